"""Goose's sessions.db (docs/agents/goose.md): columns by name across schema versions, one read-only snapshot,
hidden text never a person's turn, one usage source per session, lineage, rejections with stable codes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from extractors import goose
from extractors.bounded import Limits
from extractors.bounded.sqlite_db import ReadOnlyDb, open_readonly
from extractors.errors import RejectCode
from extractors.model import Agent, Deferred, Disposition, LinkKind, Loaded, Outcome, Rejected, Role, Session, Source
from extractors.registry import read_source
from tests.goose_support import T0, add_exchange, add_ledger, add_message, add_session, create_db, text
from tests.support import SETTLED


def read_db(path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    st = path.stat()
    return list(
        read_source(Source(Agent("goose"), str(path), st.st_size, st.st_mtime_ns, str(path.parent), "database"), limits)
    )


def only(outcomes: list[Outcome]) -> Session:
    loaded = [o.session for o in outcomes if isinstance(o, Loaded)]
    assert len(loaded) == 1, outcomes
    return loaded[0]


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_hidden_user_text_is_harness_not_a_persons_turn(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "20260102_1")
    add_message(conn, "20260102_1", "user", [text("fix the build")], metadata={"userVisible": True})
    add_message(conn, "20260102_1", "user", [text("<turn-context>cwd</turn-context>")], metadata={"userVisible": False})
    add_message(conn, "20260102_1", "assistant", [text("summary only the agent sees")], metadata={"userVisible": False})
    add_message(conn, "20260102_1", "assistant", [text("Done.")], created=T0 + 3)
    conn.close()
    session = only(read_db(db))
    assert [(t.role, t.text, t.index) for t in session.turns] == [
        (Role.USER, "fix the build", 0),
        (Role.ASSISTANT, "Done.", 3),
    ]
    assert session.census[("block/text/hidden", "v16", Disposition.HARNESS)] == 2
    assert session.census[("message/user/hidden", "v16", Disposition.METADATA)] == 1


def test_tool_results_on_user_rows_are_not_turns_and_land_on_their_calls(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "s")
    add_message(conn, "s", "user", [text("run it")])
    call = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "make"}}}
    failed = {"status": "error", "error": "Could not interpret tool use parameters"}
    add_message(
        conn,
        "s",
        "assistant",
        [
            {"type": "thinking", "thinking": "private", "signature": "x"},
            {"type": "toolRequest", "id": "c1", "toolCall": call},
            {"type": "toolRequest", "id": "c2", "toolCall": failed},
        ],
    )
    ok = {"status": "success", "value": {"content": [{"type": "text", "text": "built"}]}}
    add_message(conn, "s", "user", [{"type": "toolResponse", "id": "c1", "toolResult": ok}])
    add_message(conn, "s", "user", [{"type": "toolResponse", "id": "gone", "toolResult": ok}])
    add_message(conn, "s", "assistant", [text("It built.")])
    conn.close()
    session = only(read_db(db))
    assert [t.text for t in session.turns] == ["run it", "It built."]
    first, second = session.tool_calls
    assert (first.call_id, first.name, first.input, first.output, first.is_error, first.turn_index) == (
        "c1",
        "developer__shell",
        '{"command":"make"}',
        "built",
        False,
        1,
    )
    assert (second.call_id, second.is_error, second.output) == ("c2", True, "Could not interpret tool use parameters")
    assert session.census[("block/toolResponse/orphan", "v16", Disposition.SKIPPED)] == 1
    assert session.census[("block/thinking", "v16", Disposition.HARNESS)] == 1


def test_ledger_rows_are_the_usage_and_the_accumulated_totals_are_not_added(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(
        conn,
        "s",
        accumulated_input_tokens=99_999,
        accumulated_output_tokens=99_999,
        accumulated_cost=9.0,
        model_config_json='{"model_name":"claude-sonnet-4-5"}',
    )
    add_exchange(conn, "s", 2)
    add_ledger(
        conn,
        "s",
        T0 + 1,
        "claude-sonnet-4-5",
        input_tokens=12_000,
        output_tokens=400,
        cache_read_tokens=9_000,
        cache_write_tokens=1_500,
        cost=0.0365,
    )
    add_ledger(conn, "s", T0 + 3, "claude-sonnet-4-5", input_tokens=900, output_tokens=120)
    add_ledger(conn, "s", T0 + 3, None, input_tokens=0, output_tokens=0)  # nothing spent: no row
    conn.close()
    session = only(read_db(db))
    rows = [
        (u.turn_index, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd)
        for u in session.usage
    ]
    # input is cache-inclusive in Goose: 12000 - 9000 read - 1500 written = 1500 uncached
    assert rows == [(1, 1500, 400, 9000, 1500, 0.0365), (3, 900, 120, None, None, None)]
    assert session.census[("usage_ledger", "v16", Disposition.METADATA)] == 3


def test_the_objects_made_in_line_are_the_models_own_with_every_field_set(tmp_path: Path) -> None:
    # parse.py makes the turns, calls, ledger usage and the Session without their __init__ (`_Turn`, `_Call`,
    # `_Usage`, `_Session`): each must be what its class's own __init__ makes of the same fields, none left unset.
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "s", model_config_json='{"model_name":"claude-sonnet-4-5"}')
    add_message(conn, "s", "user", [text("run it")])
    call = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "make"}}}
    add_message(conn, "s", "assistant", [text("ok"), {"type": "toolRequest", "id": "c1", "toolCall": call}])
    add_ledger(conn, "s", T0 + 1, "claude-sonnet-4-5", input_tokens=900, output_tokens=120, cost=0.01)
    conn.close()
    session = only(read_db(db))
    values: list[object] = [session, *session.turns, *session.tool_calls, *session.usage]
    assert [type(v).__name__ for v in values] == ["Session", "Turn", "Turn", "ToolCall", "Usage"]
    for value in values:
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # type: ignore[arg-type]
        assert set(fields) == set(type(value).__slots__)  # type: ignore[attr-defined]
        assert type(value)(**fields) == value


def test_a_ledger_model_of_invalid_utf8_is_read_leniently_as_every_text_is(tmp_path: Path) -> None:
    # the ledger is read by `all_rows` (text decoded in C): a text that is not UTF-8 makes it read again leniently
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "s")
    add_exchange(conn, "s", 2)
    add_ledger(conn, "s", T0 + 1, "claude", input_tokens=900, output_tokens=120)
    conn.execute("UPDATE usage_ledger SET model = CAST(X'636CFF' AS TEXT)")
    conn.commit()
    conn.close()
    assert [u.model for u in only(read_db(db)).usage] == ["cl\ufffd"]


def test_all_rows_are_the_rows_whatever_their_text(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT, y)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [("a", 1), ("é", b"\xff"), (None, 2.5)])
    conn.commit()
    sql = "SELECT x, y FROM t ORDER BY rowid"
    with open_readonly(path, tmp_path, SETTLED) as reader:
        factory = reader.connection.text_factory
        assert reader.all_rows(sql) == list(reader.rows(sql)) == [("a", 1), ("é", b"\xff"), (None, 2.5)]
        assert reader.connection.text_factory is factory
    conn.execute("UPDATE t SET x = CAST(X'61FF62' AS TEXT) WHERE y = 1")  # not UTF-8: read again, leniently
    conn.commit()
    conn.close()
    with open_readonly(path, tmp_path, SETTLED) as reader:
        assert reader.all_rows(sql)[0] == ("a\ufffdb", 1) and reader.all_rows(sql) == list(reader.rows(sql))
        assert reader.connection.text_factory is factory


def test_all_rows_reads_again_only_text_that_is_not_utf8_and_raises_any_other_error_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.commit()
    conn.close()
    with open_readonly(path, tmp_path, SETTLED) as reader:
        again: list[str] = []
        lenient = ReadOnlyDb.rows

        def rows(self: ReadOnlyDb, sql: str, params: Any = ()) -> Any:
            again.append(sql)
            return lenient(self, sql, params)

        monkeypatch.setattr(ReadOnlyDb, "rows", rows)  # a spy: the lenient read, still made
        with pytest.raises(sqlite3.OperationalError, match="no such column"):
            reader.all_rows("SELECT nope FROM t")
        assert again == [], "an error that is not about decoding is raised, not met again by a second read"
        conn = sqlite3.connect(path)
        conn.execute("INSERT INTO t VALUES (CAST(X'61FF62' AS TEXT))")
        conn.commit()
        conn.close()
        assert reader.all_rows("SELECT x FROM t") == [("a\ufffdb",)]
        assert again == ["SELECT x FROM t"], "text that is not UTF-8 is read again, leniently"


def test_accumulated_totals_are_one_usage_row_when_there_is_no_ledger(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db, schema="v5")
    add_session(conn, "s", accumulated_input_tokens=5_000, accumulated_output_tokens=300, input_tokens=4_000)
    add_exchange(conn, "s", 2)
    conn.close()
    session = only(read_db(db))
    assert [(u.turn_index, u.input_tokens, u.output_tokens, u.model) for u in session.usage] == [(3, 5000, 300, None)]


def test_an_older_schema_is_read_by_column_name(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db, schema="v5")
    add_session(
        conn,
        "20250901_3",
        name="",
        description="older title",
        updated_at="2025-09-01 10:05:00",
        created_at="2025-09-01 10:00:00",
        session_type="scheduled",
    )
    add_exchange(conn, "20250901_3", 1)
    conn.close()
    session = only(read_db(db))
    assert (session.session_id, session.title, session.cwd, session.cli_versions) == (
        "goose-20250901_3",
        "older title",
        "/work/repo",
        ("v5",),
    )
    assert session.started_at.isoformat() == "2025-09-01T10:00:00+00:00"
    assert session.ended_at is not None and session.ended_at.isoformat() == "2025-09-01T10:05:00+00:00"


def test_a_missing_required_column_is_one_unsupported_format_rejection(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT, created TEXT);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content_json TEXT);"
    )
    conn.close()
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and outcome.code == RejectCode.UNSUPPORTED_FORMAT
    assert "sessions.created_at" in outcome.detail and "messages.created_timestamp" in outcome.detail


def test_a_sub_agent_session_links_to_its_parent(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "parent")
    add_session(conn, "child", session_type="sub_agent", parent_session_id="parent", created_at="2026-01-02 10:00:05")
    add_exchange(conn, "parent", 1)
    add_exchange(conn, "child", 1, start=T0 + 5)
    conn.close()
    sessions = {o.session.native_id: o.session for o in read_db(db) if isinstance(o, Loaded)}
    child = sessions["child"]
    assert child.parent_session_id == "goose-parent"
    assert [(link.other_session_id, link.kind) for link in child.links] == [("goose-parent", LinkKind.SUBAGENT)]
    assert sessions["parent"].links == ()


def test_messages_without_a_session_row_are_rejected_as_inconsistent(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "s")
    add_exchange(conn, "s", 1)
    add_exchange(conn, "deleted", 1)
    conn.close()
    outcomes = read_db(db)
    rejected = [o for o in outcomes if isinstance(o, Rejected)]
    assert [(r.code, r.session_hint) for r in rejected] == [(RejectCode.INCONSISTENT_SOURCE, "goose-deleted")]


def test_unreadable_metadata_rejects_the_session_rather_than_guess_visibility(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "bad")
    add_session(conn, "good")
    add_message(conn, "bad", "user", [text("hidden?")], metadata="{not json")
    add_exchange(conn, "good", 1)
    conn.close()
    outcomes = read_db(db)
    codes = {o.session_hint: o.code for o in outcomes if isinstance(o, Rejected)}
    assert codes == {"goose-bad": RejectCode.INVALID_JSON}
    assert [o.session.native_id for o in outcomes if isinstance(o, Loaded)] == ["good"]


def test_a_session_without_a_start_time_is_rejected_never_stamped_now(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "s", created_at="not a time")
    add_exchange(conn, "s", 1)
    conn.close()
    [outcome] = read_db(db)
    assert isinstance(outcome, Rejected) and outcome.code == RejectCode.MISSING_TIMESTAMP


def test_a_live_wal_database_is_read_and_nothing_beside_it_changes(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    writer = create_db(db, wal=True)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(writer, "in_wal")
    add_exchange(writer, "in_wal", 1)
    wal, shm = tmp_path / "sessions.db-wal", tmp_path / "sessions.db-shm"
    assert wal.stat().st_size > 0
    before = (checksum(db), checksum(wal), sorted(p.name for p in tmp_path.iterdir()))
    try:
        assert only(read_db(db)).native_id == "in_wal"
        assert (checksum(db), checksum(wal), sorted(p.name for p in tmp_path.iterdir())) == before
        assert shm.exists()
    finally:
        writer.close()


def test_default_roots_follow_goose_path_root_then_xdg_data_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert goose.default_roots(home, {}) == [home / ".local/share/goose/sessions"]
    assert goose.default_roots(home, {"XDG_DATA_HOME": "/x/data"}) == [Path("/x/data/goose/sessions")]
    assert goose.default_roots(home, {"GOOSE_PATH_ROOT": "/g", "XDG_DATA_HOME": "/x"}) == [Path("/g/data/sessions")]
    # Goose ignores a relative GOOSE_PATH_ROOT (config/paths.rs validated_path_root): so do we
    assert goose.default_roots(home, {"GOOSE_PATH_ROOT": "rel"}) == [home / ".local/share/goose/sessions"]


def test_discovery_lists_only_sessions_db_with_its_wal_in_the_fingerprint(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    writer = create_db(root / "sessions.db", wal=True)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(writer, "s")
    (root / "20250101_120000.jsonl").write_text("{}\n")  # a legacy session file: its own unit
    (root / "backup.db").write_bytes(b"")
    (root / "notes.txt").write_text("x")
    try:
        sources = list(goose.discover(root))
        assert [Path(s.path).name for s in sources] == ["20250101_120000.jsonl", "sessions.db"]
        wal = root / "sessions.db-wal"
        assert sources[1].size == (root / "sessions.db").stat().st_size + wal.stat().st_size
    finally:
        writer.close()


def test_tiny_limits_reject_a_big_session_before_its_rows_are_read(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    conn = create_db(db)
    add_session(conn, "big")
    add_message(conn, "big", "user", [text("x" * 5_000)])
    conn.close()
    [outcome] = read_db(db, Limits(settle_seconds=0.0, max_document_bytes=1_000))
    assert isinstance(outcome, Rejected) and outcome.code == RejectCode.LIMIT_EXCEEDED
    assert "max_document_bytes=1000" in outcome.detail


def test_a_root_given_as_gooses_data_folder_finds_its_sessions_db(tmp_path: Path) -> None:
    data = tmp_path / "data"
    create_db(data / "sessions" / "sessions.db").close()
    create_db(data / "backups" / "sessions.db").close()  # not Goose's live database: never listed
    assert [s.path for s in goose.discover(data)] == [str(data / "sessions" / "sessions.db")]


def write_legacy(path: Path, records: list[dict[str, object]], *, newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(r) for r in records) + ("\n" if newline else "")
    path.write_text(text, encoding="utf-8")
    return path


SHELL = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "git status"}}}
CLEAN = {"status": "success", "value": [{"type": "text", "text": "clean"}]}  # older builds: the content list itself
LEGACY = [
    {"working_dir": "/home/u/old", "description": "tidy the repo", "message_count": 4, "total_tokens": 50,
     "accumulated_input_tokens": 700, "accumulated_output_tokens": 90},
    {"role": "user", "created": T0, "content": [text("tidy the repo")]},
    {"role": "assistant", "created": T0 + 2, "content": [
        {"type": "toolRequest", "id": "t1", "toolCall": SHELL}]},
    {"role": "user", "created": T0 + 3, "content": [
        {"type": "toolResponse", "id": "t1", "toolResult": CLEAN}]},
    {"role": "assistant", "created": T0 + 5, "content": [text("It is clean.")]},
]  # fmt: skip


def read_file(path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    st = path.stat()
    return list(read_source(Source(Agent("goose"), str(path), st.st_size, st.st_mtime_ns, str(path.parent)), limits))


def test_a_legacy_jsonl_session_loads_with_its_metadata_line(tmp_path: Path) -> None:
    path = write_legacy(tmp_path / "20241201_093000.jsonl", LEGACY)
    session = only(read_file(path))
    assert session.session_id == "goose-20241201_093000"
    assert (session.cwd, session.title, session.cli_versions) == ("/home/u/old", "tidy the repo", ("legacy",))
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (1, Role.USER, "tidy the repo"),
        (4, Role.ASSISTANT, "It is clean."),
    ]
    assert [(c.call_id, c.output, c.is_error) for c in session.tool_calls] == [("t1", "clean", False)]
    assert session.started_at.isoformat() == "2026-01-02T10:00:00+00:00"  # the first message's `created`
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(700, 90)]  # the running totals, once
    assert session.census[("legacy/metadata", "legacy", Disposition.METADATA)] == 1


def test_a_legacy_file_whose_session_goose_imported_is_a_duplicate(tmp_path: Path) -> None:
    conn = create_db(tmp_path / "sessions.db")
    add_session(conn, "20241201_093000")
    add_exchange(conn, "20241201_093000", 1)
    conn.close()
    path = write_legacy(tmp_path / "20241201_093000.jsonl", LEGACY)
    [outcome] = read_file(path)
    assert isinstance(outcome, Rejected) and outcome.code == RejectCode.DUPLICATE
    assert outcome.session_hint == "goose-20241201_093000"
    other = write_legacy(tmp_path / "20241130_080000.jsonl", LEGACY)  # never imported: its own session
    assert only(read_file(other)).native_id == "20241130_080000"


def test_a_legacy_file_still_being_written_is_deferred(tmp_path: Path) -> None:
    path = write_legacy(tmp_path / "20241201_093000.jsonl", LEGACY, newline=False)
    path.write_text(path.read_text() + '\n{"role": "user", "cre')
    [outcome] = read_file(path, Limits())
    assert isinstance(outcome, Deferred)


def test_the_first_untyped_jsonl_dialect_is_an_unsupported_format_rejection(tmp_path: Path) -> None:
    # Goose's first files (late 2024) wrote blocks without `type`: a known format this version does not read.
    records: list[dict[str, object]] = [
        {"role": "user", "created": T0, "content": [{"text": "read the notes"}]},
        {"role": "assistant", "created": T0 + 1, "content": [{"tool_name": "DeveloperSystem__shell", "arguments": {}}]},
    ]
    path = write_legacy(tmp_path / "Ab3d.jsonl", records)
    [outcome] = read_file(path)
    assert isinstance(outcome, Rejected) and outcome.code == RejectCode.UNSUPPORTED_FORMAT
