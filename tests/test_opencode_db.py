"""opencode.db is read the safe way: read-only, confined, one snapshot, checked schema, sizes checked in SQL."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from extractors import opencode
from extractors.bounded import Limits
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Outcome, Rejected, Source
from extractors.registry import read_source
from tests.opencode_support import (
    T0,
    add_exchange,
    add_message,
    add_part,
    add_session,
    checksum,
    create_db,
    text,
    user,
)
from tests.support import SETTLED, loaded_sessions


def db_source(path: Path, root: Path | None = None) -> Source:
    size, mtime = (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else (0, 0)
    return Source(Agent("opencode"), str(path), size, mtime, str(root or path.parent), "database")


def read_db(path: Path, limits: Limits = SETTLED, root: Path | None = None) -> list[Outcome]:
    return list(read_source(db_source(path, root), limits))


def by_id(outcomes: list[Outcome]) -> dict[str, Outcome]:
    found: dict[str, Outcome] = {}
    for o in outcomes:
        key = o.session.session_id if isinstance(o, Loaded) else getattr(o, "session_hint", None)
        assert key is not None, o
        found[key] = o
    return found


def two_session_db(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    conn = create_db(path, wal=wal)
    add_session(conn, "ses_a")
    add_exchange(conn, "ses_a", 2)
    add_session(conn, "ses_b", created=T0 + 1)
    add_exchange(conn, "ses_b", 1)
    return conn


# --- discovery ---------------------------------------------------------------------------------------------


def test_ok_discovers_db_and_channel_dbs_with_wal_in_fingerprint(tmp_path: Path) -> None:
    conn = two_session_db(tmp_path / "opencode.db")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(conn, "ses_c", created=T0 + 2)  # lands in the -wal
    stable = create_db(tmp_path / "opencode-stable.db")
    stable.close()
    (tmp_path / "other.db").write_bytes(b"")
    sources = {Path(s.path).name: s for s in opencode.discover(tmp_path)}
    assert sorted(sources) == ["opencode-stable.db", "opencode.db"]
    db, wal = tmp_path / "opencode.db", tmp_path / "opencode.db-wal"
    assert wal.stat().st_size > 0
    assert sources["opencode.db"].kind == "database"
    assert sources["opencode.db"].size == db.stat().st_size + wal.stat().st_size
    assert sources["opencode.db"].mtime_ns == max(db.stat().st_mtime_ns, wal.stat().st_mtime_ns)
    conn.close()


def test_default_roots_follow_xdg_data_home(tmp_path: Path) -> None:
    assert opencode.default_roots(tmp_path, {}) == [tmp_path / ".local" / "share" / "opencode"]
    assert opencode.default_roots(tmp_path, {"XDG_DATA_HOME": "/x/data"}) == [Path("/x/data/opencode")]


# --- read-only -----------------------------------------------------------------------------------------------


def test_ok_live_wal_db_and_wal_are_byte_identical_after_a_read(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    writer = two_session_db(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # keep committed pages in the -wal, unchecked-pointed
    add_session(writer, "ses_wal", created=T0 + 5)
    add_exchange(writer, "ses_wal", 1, start=T0 + 10_000)
    writer.execute("BEGIN IMMEDIATE")  # and an open write transaction with uncommitted rows
    add_session(writer, "ses_uncommitted", created=T0 + 6)
    wal = tmp_path / "opencode.db-wal"
    assert wal.exists() and wal.stat().st_size > 0 and (tmp_path / "opencode.db-shm").exists()
    before = (checksum(db), checksum(wal))
    outcomes = read_db(db)
    assert (checksum(db), checksum(wal)) == before
    ids = sorted(s.native_id for s in loaded_sessions(outcomes))
    assert ids == ["ses_a", "ses_b", "ses_wal"]  # committed WAL rows seen, uncommitted ones not
    writer.execute("ROLLBACK")
    writer.close()


def test_ok_clean_wal_db_without_shm_is_read_immutable_and_nothing_is_created(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    two_session_db(db).close()  # the last close checkpoints and deletes -wal and -shm
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opencode.db"]
    before = checksum(db)
    assert len(loaded_sessions(read_db(db))) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opencode.db"]
    assert checksum(db) == before


def test_ok_wal_without_shm_is_read_from_a_private_copy(tmp_path: Path) -> None:
    live = tmp_path / "live"
    writer = two_session_db(live / "opencode.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(writer, "ses_only_in_wal", created=T0 + 5)
    add_exchange(writer, "ses_only_in_wal", 1)
    crashed = tmp_path / "crashed"  # what a crash leaves: database + -wal, no -shm
    crashed.mkdir()
    for name in ("opencode.db", "opencode.db-wal"):
        (crashed / name).write_bytes((live / name).read_bytes())
    writer.close()
    db, wal = crashed / "opencode.db", crashed / "opencode.db-wal"
    before = (checksum(db), checksum(wal))
    ids = sorted(s.native_id for s in loaded_sessions(read_db(db)))
    assert "ses_only_in_wal" in ids
    assert (checksum(db), checksum(wal)) == before
    assert sorted(p.name for p in crashed.iterdir()) == ["opencode.db", "opencode.db-wal"]  # no -shm created


def test_ok_rollback_journal_db_reads(tmp_path: Path) -> None:
    two_session_db(tmp_path / "opencode.db", wal=False).close()
    assert len(loaded_sessions(read_db(tmp_path / "opencode.db"))) == 2


def test_reject_source_unreadable_symlinked_db_outside_the_data_dir(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "opencode.db"
    two_session_db(outside).close()
    data = tmp_path / "data"
    data.mkdir()
    (data / "opencode.db").symlink_to(outside)
    assert list(opencode.discover(data)) == []  # not followed
    [outcome] = read_db(data / "opencode.db", root=data)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE
    assert "outside" in outcome.detail


def test_ok_symlink_inside_the_data_dir_is_followed(tmp_path: Path) -> None:
    two_session_db(tmp_path / "real" / "opencode.db").close()
    (tmp_path / "opencode.db").symlink_to(tmp_path / "real" / "opencode.db")
    assert len(loaded_sessions(read_db(tmp_path / "opencode.db", root=tmp_path))) == 2


# --- one snapshot ---------------------------------------------------------------------------------------------


def test_ok_one_snapshot_while_opencode_keeps_writing(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    writer = two_session_db(db)
    reading = read_source(db_source(db), SETTLED)
    first = next(reading)  # the session list and session a are read: the snapshot is taken
    assert isinstance(first, Loaded) and first.session.native_id == "ses_a"
    # OpenCode commits more messages to session b and a new session between our reads.
    add_message(writer, "ses_b", "msg_late", T0 + 99_000, user(T0 + 99_000))
    add_part(writer, "ses_b", "msg_late", "prt_late", text("written during the read"))
    add_session(writer, "ses_new", created=T0 + 3)
    add_exchange(writer, "ses_new", 1)
    rest = list(reading)
    sessions = loaded_sessions(rest)
    assert [s.native_id for s in sessions] == ["ses_b"]
    assert [t.text for t in sessions[0].turns] == ["question 0", "answer 0"]
    # and a later read sees the new state
    assert sorted(s.native_id for s in loaded_sessions(read_db(db))) == ["ses_a", "ses_b", "ses_new"]
    writer.close()


# --- bound values only -----------------------------------------------------------------------------------------


def test_ok_ids_with_sql_metacharacters_are_bound_not_formatted(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    evil = "ses_x'); DROP TABLE session; --"
    add_session(conn, evil)
    add_exchange(conn, evil, 1)
    conn.close()
    [session] = loaded_sessions(read_db(db))
    assert session.native_id == evil and len(session.turns) == 2


# --- schema -------------------------------------------------------------------------------------------------------


def test_reject_source_unreadable_names_missing_tables_and_columns(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE session (id text, parent_id text, created_at integer);"
        "CREATE TABLE message (id text, session_id text, created_at integer, data text);"
    )
    conn.close()
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE
    assert outcome.detail == (
        "not an OpenCode database: missing session.time_created, message.time_created, table part"
    )


def test_reject_source_unreadable_when_session_is_a_view(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    conn.executescript("ALTER TABLE session RENAME TO real_session; CREATE VIEW session AS SELECT * FROM real_session;")
    conn.close()
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and "table session" in outcome.detail


def test_ok_optional_session_columns_may_be_missing(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, parent_id text, time_created integer NOT NULL);"
        "CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer, data text);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text, data text);"
    )
    conn.execute("INSERT INTO session VALUES ('ses_min', NULL, ?)", (T0,))
    conn.execute("INSERT INTO message VALUES ('m1', 'ses_min', ?, ?)", (T0, '{"role":"user"}'))
    conn.execute("INSERT INTO part VALUES ('p1', 'm1', 'ses_min', ?)", ('{"type":"text","text":"hi"}',))
    conn.close()
    [session] = loaded_sessions(read_db(db))
    assert (session.title, session.cwd, session.cli_versions, session.archived) == (None, None, (), False)
    assert session.ended_at == session.started_at


def test_reject_source_unreadable_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "opencode.db").write_bytes(b"this is not sqlite at all, just some bytes" * 10)
    [outcome] = read_db(tmp_path / "opencode.db")
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE


def test_reject_source_unreadable_corrupt_database_with_a_valid_header(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    two_session_db(db, wal=False).close()
    raw = bytearray(db.read_bytes())
    raw[100:4096] = b"\xa5" * (4096 - 100)  # trash the schema page after the header
    db.write_bytes(bytes(raw))
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE


# --- sizes checked in SQL ------------------------------------------------------------------------------------------


def test_reject_limit_exceeded_session_payload_others_load(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)
    add_session(conn, "ses_big", created=T0 + 2)
    add_message(conn, "ses_big", "m1", T0, user(T0))
    for i in range(5):
        add_part(conn, "ses_big", "m1", f"p{i}", text("x" * 2000))
    conn.close()
    outcomes = by_id(read_db(db, Limits(settle_seconds=0, max_conversation_bytes=5000)))
    big = outcomes["opencode-ses_big"]
    assert isinstance(big, Rejected) and big.code is RejectCode.LIMIT_EXCEEDED
    assert "max_conversation_bytes" in big.detail
    assert isinstance(outcomes["opencode-ses_a"], Loaded) and isinstance(outcomes["opencode-ses_b"], Loaded)


def test_reject_limit_exceeded_field_counts_utf8_bytes_not_characters(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_utf8")
    add_message(conn, "ses_utf8", "m1", T0, user(T0))
    add_part(conn, "ses_utf8", "m1", "p1", text("한" * 400))  # 400 characters, 1,200 bytes
    conn.close()
    [outcome] = read_db(db, Limits(settle_seconds=0, max_document_bytes=1000))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED
    assert "max_document_bytes" in outcome.detail and outcome.session_hint == "opencode-ses_utf8"
    assert loaded_sessions(read_db(db, Limits(settle_seconds=0, max_document_bytes=1300)))


def test_reject_limit_exceeded_records_counted_with_limit_plus_one(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)  # ses_a: 4 messages + 4 parts = 8 rows; ses_b: 4 rows
    conn.close()
    outcomes = by_id(read_db(db, Limits(settle_seconds=0, max_records=7)))
    assert isinstance(outcomes["opencode-ses_a"], Rejected)
    assert outcomes["opencode-ses_a"].code is RejectCode.LIMIT_EXCEEDED
    assert isinstance(outcomes["opencode-ses_b"], Loaded)
    assert isinstance(by_id(read_db(db, Limits(settle_seconds=0, max_records=8)))["opencode-ses_a"], Loaded)


def test_ok_regression_more_than_sqlite_variable_limit_rows_load_completely(tmp_path: Path) -> None:
    """1,500 messages with 2 parts each (4,500 rows): peers lost data at SQLite's variable limits / batch sizes."""
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_long")
    conn.execute("BEGIN")
    for i in range(1500):
        mid = f"msg_{i:05d}"
        add_message(conn, "ses_long", mid, T0 + i, user(T0 + i) if i % 2 == 0 else {"role": "assistant"})
        add_part(conn, "ses_long", mid, f"{mid}_1", text(f"first {i}"))
        add_part(conn, "ses_long", mid, f"{mid}_2", text(f"second {i}"))
    conn.execute("COMMIT")
    conn.close()
    [session] = loaded_sessions(read_db(db))
    assert len(session.turns) == 1500
    assert [t.index for t in session.turns] == list(range(1500))
    assert session.turns[-1].text == "first 1499\n\nsecond 1499"
    assert sum(n for (kind, _, _), n in session.census.items() if kind == "part/text") == 3000


# --- per-session rejections -----------------------------------------------------------------------------------------


def test_reject_invalid_json_message_is_one_session_others_load(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)
    add_session(conn, "ses_bad", created=T0 + 2)
    add_message(conn, "ses_bad", "m1", T0, '{"role": "user", "time": ')
    conn.close()
    outcomes = by_id(read_db(db))
    bad = outcomes["opencode-ses_bad"]
    assert isinstance(bad, Rejected) and bad.code is RejectCode.INVALID_JSON and "message m1" in bad.detail
    assert len(loaded_sessions(list(outcomes.values()))) == 2


def test_reject_invalid_utf8_in_a_payload_is_one_session(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)
    add_session(conn, "ses_bytes", created=T0 + 2)
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES ('m1', 'ses_bytes', ?, ?, ?)",
        (T0, T0, b'{"role":"user","x":"\xff"}'),
    )
    conn.close()
    outcomes = by_id(read_db(db))
    bad = outcomes["opencode-ses_bytes"]
    assert isinstance(bad, Rejected) and bad.code is RejectCode.INVALID_UTF8
    assert len(loaded_sessions(list(outcomes.values()))) == 2


def test_reject_missing_timestamp_session_others_load(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    conn.execute("PRAGMA ignore_check_constraints = 1")
    conn.executescript("DROP TABLE session;")
    conn.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, project_id text, parent_id text, slug text, directory text,"
        " title text, version text, time_created integer, time_updated integer, time_archived integer);"
    )
    add_session(conn, "ses_ok")
    add_exchange(conn, "ses_ok", 1)
    add_session(conn, "ses_notime", created=None)
    add_exchange(conn, "ses_notime", 1)
    conn.close()
    outcomes = by_id(read_db(db))
    assert isinstance(outcomes["opencode-ses_ok"], Loaded)
    bad = outcomes["opencode-ses_notime"]
    assert isinstance(bad, Rejected) and bad.code is RejectCode.MISSING_TIMESTAMP


def test_reject_no_conversation_session_without_messages(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_empty")
    conn.close()
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION


def test_reject_inconsistent_source_messages_without_a_session_row(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    add_message(conn, "ses_gone", "m_orphan", T0, user(T0))
    conn.close()
    outcomes = by_id(read_db(db))
    orphan = outcomes["opencode-ses_gone"]
    assert isinstance(orphan, Rejected) and orphan.code is RejectCode.INCONSISTENT_SOURCE
    assert len(loaded_sessions(list(outcomes.values()))) == 2


def test_ok_locked_rollback_database_is_deferred_not_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from extractors.bounded import sqlite_db

    monkeypatch.setattr(sqlite_db, "BUSY_TIMEOUT_SECONDS", 0.0)
    db = tmp_path / "opencode.db"
    writer = two_session_db(db, wal=False)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        [outcome] = read_db(db)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert outcome.code.value == "write_in_progress"
    assert os.path.exists(db)


def test_ok_leftover_shm_without_wal_creates_no_wal(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    two_session_db(db).close()
    (tmp_path / "opencode.db-shm").write_bytes(b"\0" * 32768)  # a -shm left behind, the -wal gone
    before = checksum(db)
    assert len(loaded_sessions(read_db(db))) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opencode.db", "opencode.db-shm"]
    assert checksum(db) == before


def test_defer_changed_during_read_when_an_immutable_read_sees_the_file_move(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    two_session_db(db).close()  # clean WAL database: read with immutable=1 and a stat guard
    reading = read_source(db_source(db), SETTLED)
    first = next(reading)
    assert isinstance(first, Loaded)
    os.utime(db, ns=(db.stat().st_atime_ns, db.stat().st_mtime_ns + 1_000_000_000))  # OpenCode checkpointed
    rest = list(reading)
    assert len(rest) == 1 and rest[0].code.value == "changed_during_read"


def test_reject_bad_shape_non_text_ids_do_not_crash(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = two_session_db(db)
    add_session(conn, "ses_ints", created=T0 + 2)
    # TEXT affinity turns an integer into text, but a BLOB stays a BLOB
    conn.execute("INSERT INTO message VALUES (X'07', 'ses_ints', ?, ?, ?)", (T0, T0, '{"role":"user"}'))
    conn.execute("INSERT INTO message VALUES ('m8', 'ses_ints', ?, ?, ?)", (T0, T0, '{"role":"user"}'))
    conn.close()
    outcomes = by_id(read_db(db))
    bad = outcomes["opencode-ses_ints"]
    assert isinstance(bad, Rejected) and bad.code is RejectCode.BAD_SHAPE
    assert len(loaded_sessions(list(outcomes.values()))) == 2
