"""Surviving failures: readers holding the warehouse or the Parquet files, a full disk, a busy lock, kill -9."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.etl.settings import load_settings
from sinks import warehouse
from sinks.store import Store
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.lock_support import HANG, runs_only_after_the_lock_is_free
from tests.prefect_db import migrated
from tests.test_crash import leftovers
from tests.test_pipeline import run, settings_for, snapshot, table_rows

ROOT = Path(__file__).resolve().parent.parent

HOLD_WAREHOUSE = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
first = con.execute("SELECT count(*) FROM turns").fetchone()[0]
print(f"ready {first}", flush=True)
sys.stdin.readline()  # hold the connection until told
again = con.execute("SELECT count(*) FROM turns").fetchone()[0]
sessions = con.execute("SELECT count(*) FROM turns t JOIN sessions s USING (session_id)").fetchone()[0]
print(f"still {again} {sessions}", flush=True)
"""


@pytest.mark.parametrize("in_place_bytes", [None, 0], ids=["small", "big enough to change in place"])
def test_a_reader_holding_the_warehouse_open_neither_fails_the_run_nor_sees_half_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int | None
) -> None:
    if in_place_bytes is not None:
        monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = len(table_rows(data, "turns"))
    inode = (data / "warehouse.duckdb").stat().st_ino
    reader = subprocess.Popen(
        [sys.executable, "-c", HOLD_WAREHOUSE, str(data / "warehouse.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert reader.stdout is not None and reader.stdin is not None
    try:
        assert reader.stdout.readline().split() == ["ready", str(before)]
        write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
        report = run(settings_for(home, data))  # DuckDB would refuse a writer on the reader's file
        assert report.committed.sessions_loaded == 1
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert reader.stdout.readline().split() == ["still", str(before), str(before)], "its snapshot is whole"
    finally:
        reader.kill()
        reader.wait()
    assert len(table_rows(data, "turns")) == before + 4, "a new connection sees the new run"
    assert (data / "warehouse.duckdb").stat().st_ino != inode, "held open: a copy was changed and swapped in"


READ_PARQUET_LOOP = """
import os, sys, time, duckdb
root, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    began = time.monotonic()
    try:
        n = duckdb.execute(f"SELECT count(*) FROM read_parquet('{root}/turns/**/*.parquet')").fetchall()[0][0]
        print("read", began, time.monotonic(), n, flush=True)
    except Exception as exc:
        print("error", began, time.monotonic(), repr(exc).replace(chr(10), " "), flush=True)
print("end", flush=True)
"""


def test_readers_of_the_parquet_dataset_never_see_a_half_written_snapshot(tmp_path: Path) -> None:
    """A reader loops over the dataset while runs write it; its reads must overlap the writes, and see whole ones.

    No timing is assumed: runs go on (up to a bound) until a read began during a run, and after each run the
    test waits for a read that began after it, which must see exactly that run's snapshot.
    """
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    counts = [len(table_rows(data, "turns"))]
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READ_PARQUET_LOOP, str(data / "parquet"), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert reader.stdout is not None
    lines: list[list[str]] = []

    def read_until(after: float) -> list[str]:
        """Reader lines up to the first read that began after `after` (monotonic: one clock for both)."""
        assert reader.stdout is not None
        while True:
            line = reader.stdout.readline().split()
            assert line and line[0] != "end", "the reader stopped"
            lines.append(line)
            if float(line[1]) > after:
                return line

    windows: list[tuple[float, float]] = []
    try:
        read_until(0.0)  # the reader is reading
        minute = 30
        during = 0
        while len(windows) < 20 and (len(windows) < 3 or during == 0):
            write_session(home, S1, claude_exchange(S1, 1, start_minute=minute), append=True)
            minute += 1
            began = time.monotonic()
            run(settings)
            windows.append((began, time.monotonic()))
            counts.append(len(table_rows(data, "turns")))
            last = read_until(windows[-1][1])
            assert last[0] == "read" and int(last[3]) == counts[-1], (last, counts)
            during = sum(1 for x in lines if any(a <= float(x[1]) <= b for a, b in windows))
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
    lines += [x.split() for x in out.splitlines() if x.strip()]
    reads = [x for x in lines if x[0] == "read"]
    errors = [x for x in lines if x[0] == "error"]
    assert errors == [], (errors[:3], err[-2000:])
    assert during > 0, f"no read began while a run was writing ({len(windows)} runs, {len(reads)} reads)"
    assert len(set(counts)) == len(counts) > 3, counts
    assert {int(x[3]) for x in reads} <= set(counts), "every read saw one whole snapshot"


def test_a_full_disk_fails_the_run_clearly_and_leaves_the_previous_corpus_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before = snapshot(data)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("sinks.store.write_parquet", full)
    with pytest.raises(OSError, match="No space left on device") as failure:
        run(settings)
    assert any("could not be recorded" in note for note in getattr(failure.value, "__notes__", []))
    monkeypatch.undo()
    assert snapshot(data) == before
    assert leftovers(data) == []
    run(settings)  # the disk has room again: the change goes in
    assert len([r for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"]) == 10


def test_a_failure_after_the_commit_is_recorded_and_the_next_run_repairs_the_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(data / "warehouse.duckdb"))

    monkeypatch.setattr("sinks.warehouse.refresh", broken)
    with pytest.raises(PermissionError):
        run(settings)
    monkeypatch.undo()
    run(settings)
    runs = sorted(table_rows(data, "runs"), key=lambda r: r[3])
    assert [r[5] for r in runs] == ["ok", "failed", "ok"]
    assert "Permission denied" in runs[1][6]
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)


def test_a_failure_while_the_old_version_is_removed_is_recorded_in_a_version_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old Parquet version is removed on a thread while the warehouse loads (flows/etl/flow.py
    `_sweep_old_versions`). The warehouse fails at once, the removal is slow (a slow disk): the failure's ledger
    version is written after the removal ends, never removed by it, and the runs table keeps the failed run."""
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    remove = Store.remove_old_versions

    def slow(self: Store, keep: int | None = None) -> None:
        time.sleep(1.0)
        remove(self, keep)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(data / "warehouse.duckdb"))

    monkeypatch.setattr(Store, "remove_old_versions", slow)
    monkeypatch.setattr("sinks.warehouse.refresh", broken)
    with pytest.raises(PermissionError):
        run(settings)
    monkeypatch.undo()
    recorded = [row["outcome"] for f in Store(data).files("runs") for row in pq.read_table(f).to_pylist()]
    assert sorted(recorded) == ["failed", "ok"], recorded  # the current version holds the failure's row
    run(settings)
    runs = sorted(table_rows(data, "runs"), key=lambda r: r[3])
    assert [r[5] for r in runs] == ["ok", "failed", "ok"]


def test_a_second_run_waits_for_the_first_to_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    data.mkdir()
    settings = load_settings(home=home, data_dir=data, sources=["claude"], env={}, lock_wait=HANG)
    report = runs_only_after_the_lock_is_free(data, lambda: run(settings), monkeypatch)
    assert report.committed.sessions_loaded == 2


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(pid))
    return found


def test_a_run_killed_from_outside_leaves_no_process_behind(tmp_path: Path) -> None:
    """Nothing of the run outlives it; the managed Prefect server does, on purpose (its own session), and so does
    its idle watch (which stops it after TRANSCRIPTS_SERVER_IDLE_MINUTES unused)."""
    from flows.service import server

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    token = uuid.uuid4().hex  # unique: another test session on the machine has the same tmp_path names
    marker = f"TRANSCRIPTS_TEST_MARKER={token}"
    env = {**os.environ, "TRANSCRIPTS_TEST_MARKER": token, "PREFECT_HOME": str(tmp_path / "prefect")}
    env["TRANSCRIPTS_STATE_DIR"] = str(migrated(tmp_path / "state"))
    env.pop("PREFECT_API_URL", None)
    folder = server.state_dir(env)
    cli = [
        sys.executable,
        "-c",
        "from flows.cli.app import main; main()",
        "run",
        "--home",
        str(home),
        "--data-dir",
        str(data),
        "--source",
        "claude",
    ]
    proc = subprocess.Popen(cli, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while server.read_state(folder) is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        managed = server.read_state(folder)
        assert managed is not None and managed.pid is not None, "the managed Prefect server did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

        def watch() -> int | None:
            try:
                return int((folder / "watch.pid").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None

        def run_processes() -> list[int]:
            return [pid for pid in _processes_with(marker) if os.getsid(pid) != managed.pid and pid != watch()]

        deadline = time.monotonic() + 30
        while run_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run_processes() == [], "a process of the killed run outlived it"
        assert server.healthy(managed.url), "the managed server outlives the run, for the next command"
        assert watch() in _processes_with(marker), "and its idle watch with it"
    finally:
        server.stop(folder)
    report = run(settings_for(home, data))  # and a later run starts cleanly
    assert report.committed.sessions_loaded + report.plan_counts["claude"]["unchanged"] >= 2


@pytest.mark.parametrize("where", ["index", "tables"])
def test_a_build_that_fails_in_its_index_or_its_tables_fails_the_run_and_the_next_run_builds_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # A build makes the search index on a cursor in a thread while its main connection inserts the other tables:
    # a failure on either side is the run's error (the other side stopped and waited for), never a hang or a
    # half-built warehouse taken for whole.
    from sinks import search

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    real_build_index = search.build_index
    real_insert_all = warehouse._insert_all
    ended: list[bool] = []

    def slow_index(con: object, *args: object, **kwargs: object) -> None:
        try:
            time.sleep(0.2)  # still indexing when the tables fail: the failure must stop and wait for it
            real_build_index(con, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            ended.append(True)

    def failing_index(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the index broke")

    def failing_insert(con: object, store: object, table: object, version: object) -> None:
        if getattr(table, "name", "") == "tool_calls":
            raise RuntimeError("the tables broke")
        real_insert_all(con, store, table, version)  # type: ignore[arg-type]

    if where == "index":
        monkeypatch.setattr(search, "build_index", failing_index)
    else:
        monkeypatch.setattr(search, "build_index", slow_index)
        monkeypatch.setattr(warehouse, "_insert_all", failing_insert)
    with pytest.raises(RuntimeError, match=f"the {where} broke"):
        run(settings)
    assert ended == ([] if where == "index" else [True]), "the index's thread had ended before the run failed"
    assert not (data / "warehouse.duckdb").exists()
    monkeypatch.undo()
    run(settings)
    assert leftovers(data) == []
    snapshot(data)  # the warehouse holds exactly what the Parquet dataset holds
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)


def test_a_staging_folder_still_written_as_an_interrupted_run_ends_never_changes_the_runs_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Ctrl-C: a worker process may write one more staged file while the run removes the folder; rmtree then fails
    # with "Directory not empty", and that error replaced the interrupt (exit 1 instead of 130). Injected here.
    import errno

    from flows.etl import flow as etl
    from sinks.store import Store

    store = Store(tmp_path / "data")
    calls: list[int] = []

    def busy_then_clear(self: Store) -> None:
        calls.append(1)
        if len(calls) < 3:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(self.staging))

    monkeypatch.setattr(Store, "cleanup", busy_then_clear)
    etl._clean_up(store, "r1")
    assert len(calls) == 3, "tried again until the workers were done"

    def always_busy(self: Store) -> None:
        raise OSError(errno.ENOTEMPTY, "Directory not empty", str(self.staging))

    monkeypatch.setattr(Store, "cleanup", always_busy)
    with caplog.at_level("WARNING", logger="transcripts.etl"):
        etl._clean_up(store, "r2", attempts=2)  # does not raise: the run's own outcome stands
    assert any("event=cleanup_left run=r2" in r.getMessage() for r in caplog.records)
