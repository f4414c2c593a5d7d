"""Reading a WAL database writes nothing beside it: db, -wal and -shm keep their bytes and mtimes; the WAL is read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from extractors.bounded import sqlite_db
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Loaded, Outcome, Rejected
from extractors.registry import extractor, read_source
from tests.opencode_support import SCHEMA, T0, add_exchange, add_session, create_db
from tests.support import SETTLED

NAMES = ("opencode.db", "opencode.db-wal", "opencode.db-shm")


def state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in the folder: its bytes and mtime (the -shm included: that is what a read used to change)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def read_root(root: Path) -> list[Outcome]:
    [source] = list(extractor(Agent("opencode")).discover(root))
    return list(read_source(source, SETTLED))


def native_ids(outcomes: list[Outcome]) -> list[str]:
    return sorted(o.session.native_id for o in outcomes if isinstance(o, Loaded))


def _writer_left_open(root: Path) -> None:
    """A writer that committed with autocheckpoint off, its files copied while it is still open (as a crash
    leaves them): the committed session is only in the -wal, and the -shm holds the writer's wal-index."""
    live = root.parent / "live"
    writer = create_db(live / "opencode.db", wal=True)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(writer, "ses_main")
    add_exchange(writer, "ses_main", 1)
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # ses_main is in the main file ...
    add_session(writer, "ses_in_wal", created=T0 + 5)  # ... ses_in_wal only in the -wal
    add_exchange(writer, "ses_in_wal", 1, start=T0 + 10_000)
    root.mkdir(parents=True)
    for name in NAMES:
        shutil.copy2(live / name, root / name)
    writer.close()


def _writer_killed(root: Path) -> None:
    """The same state, made by a writer process killed with SIGKILL after it committed."""
    root.mkdir(parents=True)
    script = textwrap.dedent(
        f"""
        import os, signal, sqlite3, json
        conn = sqlite3.connect({str(root / "opencode.db")!r}, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.executescript({SCHEMA!r})
        conn.execute("INSERT INTO project (id, worktree, time_created, time_updated, sandboxes)"
                     " VALUES ('global', '/', {T0}, {T0}, '[]')")
        for sid, t in (("ses_main", {T0}), ("ses_in_wal", {T0 + 5})):
            conn.execute("INSERT INTO session (id, project_id, slug, directory, title, version, time_created)"
                         " VALUES (?, 'global', 's', '/w', 't', '1', ?)", (sid, t))
            for i, role in enumerate(("user", "assistant")):
                mid = f"{{sid}}_m{{i}}"
                conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data)"
                             " VALUES (?, ?, ?, ?, ?)", (mid, sid, t + i, t + i, json.dumps(
                                 {{"role": role, "time": {{"created": t + i}}}})))
                conn.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                             " VALUES (?, ?, ?, 0, 0, ?)", (mid + "_p", mid, sid, json.dumps(
                                 {{"type": "text", "text": role + " words"}})))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -9


@pytest.mark.parametrize("make", [_writer_left_open, _writer_killed], ids=["copied-open", "killed"])
def test_a_wal_database_is_read_without_writing_beside_it(tmp_path: Path, make: object) -> None:
    root = tmp_path / "opencode"
    make(root)  # type: ignore[operator]
    assert {p.name for p in root.iterdir()} == set(NAMES)
    assert (root / "opencode.db-wal").stat().st_size > 0
    before = state(root)
    outcomes = read_root(root)
    assert state(root) == before  # bytes and mtimes of all three files, and no file added
    assert native_ids(outcomes) == ["ses_in_wal", "ses_main"]  # the data only in the -wal is read


def test_a_live_writer_is_not_disturbed_and_its_later_commits_are_read_next_time(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    writer = create_db(root / "opencode.db", wal=True)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(writer, "ses_1")
    add_exchange(writer, "ses_1", 1)
    before = state(root)
    assert native_ids(read_root(root)) == ["ses_1"]
    assert state(root) == before
    add_session(writer, "ses_2", created=T0 + 5)  # the writer goes on, unaware of the read
    add_exchange(writer, "ses_2", 1, start=T0 + 10_000)
    assert native_ids(read_root(root)) == ["ses_1", "ses_2"]
    writer.close()


def test_a_database_that_keeps_changing_while_it_is_copied_is_deferred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "opencode"
    _writer_left_open(root)
    wal = root / "opencode.db-wal"
    real_copy = sqlite_db._copy_bounded
    copies: list[Path] = []

    def busy_writer(source: Path, target: Path, budget: int) -> int:
        left = real_copy(source, target, budget)
        copies.append(source)
        if source == wal:
            os.utime(wal, ns=(wal.stat().st_atime_ns, wal.stat().st_mtime_ns + 1_000_000))  # a write landed
        return left

    monkeypatch.setattr(sqlite_db, "_copy_bounded", busy_writer)
    [outcome] = read_root(root)
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ
    assert len(copies) == 2 * sqlite_db.COPY_ATTEMPTS


def test_one_change_during_the_copy_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "opencode"
    _writer_left_open(root)
    wal = root / "opencode.db-wal"
    real_copy = sqlite_db._copy_bounded
    moved: list[bool] = []

    def once(source: Path, target: Path, budget: int) -> int:
        left = real_copy(source, target, budget)
        if source == wal and not moved:
            moved.append(True)
            os.utime(wal, ns=(wal.stat().st_atime_ns, wal.stat().st_mtime_ns + 1_000_000))
        return left

    monkeypatch.setattr(sqlite_db, "_copy_bounded", once)
    assert native_ids(read_root(root)) == ["ses_in_wal", "ses_main"]
    assert moved == [True]


def test_the_copy_is_bounded_by_max_source_bytes(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    _writer_left_open(root)
    total = sum((root / n).stat().st_size for n in NAMES[:2])
    [source] = list(extractor(Agent("opencode")).discover(root))
    [outcome] = list(read_source(source, sqlite_db.Limits(settle_seconds=0.0, max_source_bytes=total - 1)))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


def test_a_wal_that_is_a_fifo_is_refused_not_opened(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    _writer_left_open(root)
    (root / "opencode.db-wal").unlink()
    os.mkfifo(root / "opencode.db-wal")
    [outcome] = read_root(root)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE
    assert "not a regular file" in outcome.detail


def test_the_private_copy_is_deleted_afterwards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "opencode"
    _writer_left_open(root)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    assert native_ids(read_root(root)) == ["ses_in_wal", "ses_main"]
    assert list(scratch.iterdir()) == []
