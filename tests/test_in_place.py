"""A big warehouse no one has open is changed in place (no copy of it every night); readers wait for that change.

`sinks.warehouse.IN_PLACE_BYTES` is set to 0 here, so that the small test warehouses take the path a big one takes.
A reader holding the file makes the run copy it instead (tests/test_failures.py); a kill before the COMMIT leaves
the previous warehouse whole (tests/test_crash.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from sinks import readonly, search, warehouse
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.lock_support import holder
from tests.test_crash import leftovers
from tests.test_pipeline import parquet_rows, run, settings_for, snapshot, table_rows


@pytest.fixture
def in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)


def test_a_big_warehouse_no_one_holds_is_changed_in_place_into_what_a_clean_run_gives(
    tmp_path: Path, in_place: None
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    path = data / "warehouse.duckdb"
    inode = path.stat().st_ino
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    report = run(settings_for(home, data))
    assert report.committed.sessions_loaded == 1
    assert path.stat().st_ino == inode, "changed in place: no copy swapped in"
    assert Path(f"{path}.wal").exists(), "the change is left in DuckDB's log (no checkpoint per change)"
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []
    # The memo left for the next run describes the file as it is now: a no-op run believes it.
    version = int(warehouse._recalled(path, path.stat())["parquet_version"])  # type: ignore[index]
    assert warehouse.is_current(data, version, None)


def test_changes_made_in_place_stay_in_the_log_until_it_passes_its_threshold_and_then_are_folded_into_the_file(
    tmp_path: Path, in_place: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    path = data / "warehouse.duckdb"
    log = Path(f"{path}.wal")
    sizes = []
    for n in (2, 3):
        write_session(home, S1, claude_exchange(S1, n, start_minute=30 * n), append=True)
        run(settings_for(home, data))
        sizes.append(log.stat().st_size)
    assert sizes[0] < sizes[1], "the second change was appended to the log"
    for reader in (readonly.connect(path), duckdb.connect(str(path), read_only=True)):  # readers replay it
        try:
            assert reader.execute("SELECT count(*) FROM turns WHERE session_id = ?", [f"claude-{S1}"]).fetchone()
        finally:
            reader.close()
    assert leftovers(data) == []
    warehouse._written.clear()  # as a later process: the memo describes the file and its log as the run left them
    assert warehouse._recalled(path, path.stat()) is not None
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(warehouse, "LOG_THRESHOLD", "1KiB")
    write_session(home, S1, claude_exchange(S1, 4, start_minute=120), append=True)
    run(settings_for(home, data))
    assert not log.exists(), "past the threshold, the COMMIT folded the log into the file"
    assert path.stat().st_mtime_ns != mtime
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    version = int(warehouse._recalled(path, path.stat())["parquet_version"])  # type: ignore[index]
    assert warehouse.is_current(data, version, None)


def test_a_failure_while_changing_in_place_rolls_the_warehouse_back_and_the_next_run_repairs_it(
    tmp_path: Path, in_place: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = snapshot(data)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)

    def full(*_args: object, **_kwargs: object) -> None:  # after the sessions' rows were deleted and inserted
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")

    monkeypatch.setattr(search, "add_documents", full)
    with pytest.raises(duckdb.IOException, match="No space left"):
        run(settings_for(home, data))
    monkeypatch.undo()
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)  # the lock was let go: it opens
    try:
        for table in ("sessions", "turns", "tool_calls"):
            assert sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr) == before[table], table
    finally:
        con.close()
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    run(settings_for(home, data))
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    runs = table_rows(data, "runs")
    assert runs == parquet_rows(data, "runs"), "the failed run's row, which replaced its own, is in the warehouse too"
    assert sorted(str(row[5]) for row in runs) == ["failed", "ok", "ok"]


def test_a_change_in_place_rewrites_the_rows_of_runs_that_changed_and_leaves_the_others_where_they_are(
    tmp_path: Path, in_place: None
) -> None:
    # Every run's row deleted and inserted again at each change wrote them all to DuckDB's log: with a row per run
    # and a run per change, the log grew with the runs, and every open replayed it.
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    for n in (2, 3):
        write_session(home, S1, claude_exchange(S1, n, start_minute=30 * n), append=True)
        run(settings_for(home, data))
    path = data / "warehouse.duckdb"

    def placed() -> dict[str, int]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            return {
                str(run_id): int(rowid) for rowid, run_id in con.execute("SELECT rowid, run_id FROM runs").fetchall()
            }
        finally:
            con.close()

    before = placed()
    write_session(home, S1, claude_exchange(S1, 4, start_minute=120), append=True)
    report = run(settings_for(home, data))
    after = placed()
    assert Path(f"{path}.wal").exists(), "changed in place, the log not folded: row ids are as the changes left them"
    assert set(after) == set(before) | {report.run_id}
    assert {run_id: after[run_id] for run_id in before} == before, "the earlier runs' rows were not rewritten"
    assert table_rows(data, "runs") == parquet_rows(data, "runs")


def test_a_big_warehouse_this_duckdb_cannot_open_is_rebuilt(tmp_path: Path, in_place: None) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    path = data / "warehouse.duckdb"
    path.write_bytes(b"not a database" * 1000)  # damaged: opened in place, refused, rebuilt from Parquet
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)


def test_a_reader_waits_while_a_run_holds_the_warehouse_then_opens_it(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    path = data / "warehouse.duckdb"
    proc = holder(data, "run")
    try:
        with pytest.raises(duckdb.IOException, match=readonly.LOCK_ERROR):
            duckdb.connect(str(path), read_only=True)  # DuckDB alone refuses at once
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        con = readonly.connect(path)
        try:
            assert con.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
        finally:
            con.close()
        assert proc.stdout.readline().strip() == "closed", "it opened only once the run let go of the file"
    finally:
        proc.kill()
        proc.wait()


def test_a_file_held_by_something_else_than_a_run_is_refused_at_once_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    pauses: list[float] = []
    monkeypatch.setattr(readonly.time, "sleep", pauses.append)
    proc = holder(data, "shell")
    try:
        with pytest.raises(duckdb.IOException, match=readonly.LOCK_ERROR):
            readonly.connect(data / "warehouse.duckdb")
        assert pauses == [], "no run holds the data directory: nothing to wait for"
        result = CliRunner().invoke(app, ["sql", "SELECT 1", "--data-dir", str(data)], catch_exceptions=False)
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "is open for writing in another process" in lines[0], lines
        assert "duckdb -readonly" in lines[0]
    finally:
        proc.kill()
        proc.wait()


def test_a_run_holding_the_lock_in_this_process_does_not_wait_for_itself(tmp_path: Path) -> None:
    from sinks.ledger import lock_held
    from sinks.lock import writer_lock

    data = tmp_path / "data"
    data.mkdir()
    assert not lock_held(data, by_another=True), "no lock file yet"
    with writer_lock(data, 1):
        assert lock_held(data) and not lock_held(data, by_another=True)
    proc = holder(data, "run")
    try:
        assert lock_held(data, by_another=True)
    finally:
        proc.kill()
        proc.wait()
    assert not lock_held(data, by_another=True), "a killed run's lock dies with it"
    assert os.path.exists(data / ".lock")
