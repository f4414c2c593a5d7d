"""The warehouse's part of an incremental run begins while the commit writes the next Parquet version
(`sinks.warehouse.Begun`: the warehouse opened or copied, the replaced rows deleted in an open transaction), and is
finished by the warehouse step, never made twice; a commit that fails, or a run killed during it, leaves the
warehouse as the last run left it. Real runs of the pipeline on a temporary home; faults injected where named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sinks import warehouse
from sinks.store import NextVersion
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.test_crash import KILLED_RUN, ROOT, leftovers, rerun_equals_a_clean_run
from tests.test_pipeline import run, settings_for, snapshot, table_rows

PATHS = {"in place": 0, "copied": 1 << 40}


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of `warehouse.<name>` (still made)."""
    calls: list[int] = []
    real = getattr(warehouse, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(warehouse, name, counted)
    return calls


def _held(path: Path) -> bool:
    """Whether another process holds DuckDB's lock on `path`."""
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.IOException as exc:
        if "Could not set lock" in str(exc):
            return True
        raise
    return False


@pytest.mark.parametrize("in_place_bytes", PATHS.values(), ids=PATHS.keys())
def test_the_change_begun_during_the_commit_is_finished_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)  # as on ext4
    opened = _counting(monkeypatch, "_open_to_change")
    begun = _counting(monkeypatch, "_begin_apply")
    inode = (data / "warehouse.duckdb").stat().st_ino
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    # One opening and one beginning: the warehouse step took the change the commit's neighbour began (had the
    # sessions or sources it was begun for differed from the commit's, the step would have begun it again).
    assert (len(opened), len(begun)) == (1, 1)
    assert ((data / "warehouse.duckdb").stat().st_ino == inode) == (in_place_bytes == 0)
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []


@pytest.mark.parametrize("in_place_bytes", PATHS.values(), ids=PATHS.keys())
def test_a_commit_that_fails_rolls_back_the_change_begun_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = snapshot(data)
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)
    begun = _counting(monkeypatch, "_begin_apply")
    real_publish = NextVersion.publish

    def full_disk(self: NextVersion) -> Path:
        deadline = time.monotonic() + 10
        while not begun and time.monotonic() < deadline:  # the change is begun (its rows deleted) by now
            time.sleep(0.01)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(NextVersion, "publish", full_disk)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    with pytest.raises(OSError, match="No space left"):
        run(settings_for(home, data))
    assert begun, "the change was begun beside the commit"
    assert not _held(data / "warehouse.duckdb"), "the begun change let the warehouse go"
    # The warehouse holds what it held: the deleted rows are back (the Parquet side recorded the failed run).
    assert {t: table_rows(data, t) for t in before if t != "runs"} == {t: r for t, r in before.items() if t != "runs"}
    assert not list(data.glob("warehouse.duckdb.tmp-*"))
    monkeypatch.setattr(NextVersion, "publish", real_publish)
    rerun_equals_a_clean_run(tmp_path, home, data)


def test_a_change_that_cannot_begin_beside_the_commit_is_made_by_the_warehouse_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    real = warehouse._begin_apply
    calls: list[str] = []

    def first_fails(*args: Any, **kwargs: Any) -> Any:
        calls.append("begin")
        if len(calls) == 1:
            raise duckdb.IOException("IO Error: a hiccup of the disk")
        return real(*args, **kwargs)

    monkeypatch.setattr(warehouse, "_begin_apply", first_fails)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    assert calls == ["begin", "begin"]
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []


def test_a_run_killed_while_its_change_is_begun_in_place_leaves_the_warehouse_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held at `publish` (the version written, not swapped in), the begun change holds the warehouse in place with
    the replaced rows deleted in an open transaction; SIGKILL there, and the warehouse is the previous one, whole."""
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = snapshot(data)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    flag = tmp_path / "go"
    env = {**os.environ, "TRANSCRIPTS_PAUSEPOINT": f"publish:{flag}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(home), str(data), "1", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{flag}.reached").exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run never reached the publish point"
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while not _held(data / "warehouse.duckdb"):  # the begun change opens it beside the commit
            assert time.monotonic() < deadline, "the change was not begun in place during the commit"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert snapshot(data) == before
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    rerun_equals_a_clean_run(tmp_path, home, data)


def test_a_change_of_many_sessions_is_begun_after_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the commit, a big change's DELETEs would hold memory while the merges hold theirs: above
    BEGIN_BESIDE_SESSIONS the warehouse step makes the whole change, as before."""
    from flows.etl import flow

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    monkeypatch.setattr(flow, "BEGIN_BESIDE_SESSIONS", 0)
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    threads: list[str] = []
    real = warehouse._begin_apply

    def noted(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(warehouse, "_begin_apply", noted)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    # (the warehouse opened before the read is abandoned, closed with no change begun in it)
    assert threads == ["MainThread"], "no change begun beside the commit; the warehouse step made it"
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)


def _opening_noted(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a run has opened the warehouse to change it (`warehouse._open_to_change`, still made)."""
    opened = threading.Event()
    real_open = warehouse._open_to_change

    def noted(*args: Any, **kwargs: Any) -> Any:
        found = real_open(*args, **kwargs)
        opened.set()
        return found

    monkeypatch.setattr(warehouse, "_open_to_change", noted)
    return opened


def _waiting_for(monkeypatch: pytest.MonkeyPatch, opened: threading.Event, owner: Any, name: str) -> list[bool]:
    """`owner.<name>` made to wait (up to 30 s) until the warehouse is opened; whether it was, per call."""
    real = getattr(owner, name)
    seen: list[bool] = []

    def waits(*args: Any, **kwargs: Any) -> Any:
        seen.append(opened.wait(30))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, waits)
    return seen


STEPS = {"the plan": ("flows.etl.pipeline", "make_plan"), "the read": ("flows.etl.flow", "read_batch")}


@pytest.mark.parametrize("in_place_bytes", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_a_small_run_opens_the_warehouse_while_it_plans_and_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int, step: tuple[str, str]
) -> None:
    """Once discovery has found the listing moved (a session grew), the warehouse is opened (its log replayed) while
    the sources are sorted against the manifest (`flow._open_when_discovered`) and read (`OPEN_BEFORE_READ_BYTES`):
    the step waits here until it is opened, which, opened after the plan, or after the read, it never would be."""
    import importlib

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)  # as on ext4
    owner, name = step
    seen = _waiting_for(monkeypatch, _opening_noted(monkeypatch), importlib.import_module(owner), name)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    assert seen == [True], f"the warehouse was opened while {name} ran"
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []


@pytest.mark.parametrize("in_place_bytes", PATHS.values(), ids=PATHS.keys())
def test_a_listing_that_moved_with_nothing_to_load_lets_go_of_the_warehouse_opened_for_it_and_is_a_noop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int
) -> None:
    from sinks import ledger

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)
    opened = _opening_noted(monkeypatch)
    before = snapshot(data)
    target = data / "warehouse.duckdb"
    as_it_was = (target.stat().st_ino, target.stat().st_mtime_ns, target.read_bytes())
    # A file that is no session: its folder's listing moves, and there is nothing to load.
    (home / ".claude" / "projects" / "notes.txt").write_text("not a session\n", encoding="utf-8")
    report = run(settings_for(home, data))
    assert opened.is_set(), "the listing moved: the warehouse was opened as the plan was made"
    assert report.committed is None, "nothing to do: nothing committed"
    assert next(r["outcome"] for r in ledger.runs(data)) == "noop"
    assert not _held(target), "the warehouse opened for the run was let go"
    assert snapshot(data) == before
    assert (target.stat().st_ino, target.stat().st_mtime_ns, target.read_bytes()) == as_it_was, "not written"
    assert not Path(f"{target}.wal").exists(), "nor a log left beside it"
    assert not list(data.glob("warehouse.duckdb.tmp-*"))
    assert leftovers(data) == []


@pytest.mark.parametrize("in_place_bytes", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_a_plan_or_read_that_fails_lets_go_of_the_warehouse_opened_for_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place_bytes: int, step: tuple[str, str]
) -> None:
    import importlib

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = {t: table_rows(data, t) for t in ("sessions", "turns", "sources")}
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", in_place_bytes)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)
    opened = _opening_noted(monkeypatch)

    def disk_gone(*_args: Any, **_kwargs: Any) -> Any:
        assert opened.wait(30), "the warehouse is opened before this step"
        raise OSError(5, "Input/output error")

    owner, name = step
    monkeypatch.setattr(importlib.import_module(owner), name, disk_gone)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    with pytest.raises(OSError, match="Input/output error"):
        run(settings_for(home, data))
    assert not _held(data / "warehouse.duckdb"), "the warehouse opened for the run was let go"
    assert {t: table_rows(data, t) for t in before} == before
    assert not list(data.glob("warehouse.duckdb.tmp-*"))
    monkeypatch.undo()
    rerun_equals_a_clean_run(tmp_path, home, data)


def test_registering_an_arrow_table_in_a_change_imports_nothing_the_warehouse_did_not() -> None:
    """DuckDB imports pyarrow.dataset at the first Arrow table registered on a connection, which a run's change does
    in its first statements; `sinks.warehouse` imports it with itself, so that a run does not pay it mid-change.
    In a fresh interpreter: whatever registering imports beyond what importing the warehouse did is named here."""
    probe = (
        "import sys\n"
        "import sinks.warehouse\n"
        "import duckdb, pyarrow as pa\n"
        "before = set(sys.modules)\n"
        "con = duckdb.connect()\n"
        "con.register('replaced_ids', pa.table({'session_id': ['a']}))\n"
        "con.execute('SELECT count(*) FROM replaced_ids').fetchall()\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
