"""A run killed with SIGKILL at any point, followed by a normal run, gives exactly the result of one clean run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sinks import warehouse
from sinks.failpoints import POINTS
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.lock_support import holder
from tests.test_pipeline import run, settings_for, snapshot, table_rows

ROOT = Path(__file__).resolve().parent.parent

KILLED_RUN = """
import dataclasses, sys
from pathlib import Path
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
home, data, workers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
if len(sys.argv) > 4:  # the size from which the warehouse is changed in place
    import sinks.warehouse
    sinks.warehouse.IN_PLACE_BYTES = int(sys.argv[4])
settings = load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)})
run_etl(dataclasses.replace(settings, workers=workers, batch_files=1), as_tasks=False)
"""


def killed_run(home: Path, data: Path, point: str, workers: int = 1, in_place_bytes: int | None = None) -> None:
    env = {**os.environ, "TRANSCRIPTS_FAILPOINT": point}
    extra = [] if in_place_bytes is None else [str(in_place_bytes)]
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(home), str(data), str(workers), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, f"the run was not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"


def leftovers(data: Path) -> list[str]:
    found = [str(p) for p in data.rglob("*") if ".tmp-" in p.name or p.name == "parquet.swap"]
    if (data / "staging").exists():
        found.append("staging/")
    return found


def rerun_equals_a_clean_run(tmp_path: Path, home: Path, data: Path) -> None:
    """A normal run of `data` after the kill gives exactly what one clean run of `home` gives, and leaves nothing."""
    run(settings_for(home, data))
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []


@pytest.mark.parametrize(("point", "workers"), [(p, 1) for p in POINTS] + [("extract", 2)])
def test_killed_first_run_then_normal_run_equals_a_clean_run(tmp_path: Path, point: str, workers: int) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    killed_run(home, data, point, workers)
    rerun_equals_a_clean_run(tmp_path, home, data)


@pytest.mark.parametrize("point", POINTS)
def test_killed_incremental_run_then_normal_run_equals_a_clean_run(tmp_path: Path, point: str) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = snapshot(data)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    killed_run(home, data, point)
    if point != "warehouse":  # until the swap, the corpus is the previous one, untouched
        assert snapshot(data) == before
    rerun_equals_a_clean_run(tmp_path, home, data)


def test_a_run_killed_while_it_changes_the_warehouse_in_place_leaves_it_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In place (a big warehouse no one has open), the kill comes after every change and before the COMMIT: DuckDB's
    recovery must give the previous warehouse whole, and the next run the result of a clean one."""
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    before = snapshot(data)
    inode = (data / "warehouse.duckdb").stat().st_ino
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    killed_run(home, data, "warehouse", in_place_bytes=0)
    assert (data / "warehouse.duckdb").stat().st_ino == inode, "changed in place, not swapped"
    assert not list(data.glob("warehouse.duckdb.tmp-*")), "no copy was made"
    # The Parquet version was published before the kill: the warehouse must still be the previous one, whole.
    assert {t: table_rows(data, t) for t in before} == before
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    rerun_equals_a_clean_run(tmp_path, home, data)  # the Parquet version is ahead: the warehouse is rebuilt


def test_a_run_killed_after_committing_in_place_and_before_the_checkpoint_then_rerun_equals_a_clean_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change is in DuckDB's log beside the file: readers see it, and the next run takes it as current."""
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    killed_run(home, data, "warehouse_log", in_place_bytes=0)
    assert (data / "warehouse.duckdb.wal").exists(), "killed between the COMMIT and the checkpoint"
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean), "a reader sees the committed change"
    monkeypatch.setattr(warehouse, "IN_PLACE_BYTES", 0)
    rerun_equals_a_clean_run(tmp_path, home, data)


@pytest.mark.parametrize("held", [False, True], ids=["no reader", "held by a reader"])
def test_a_log_left_beside_the_warehouse_never_reaches_the_file_swapped_in_after_it(
    tmp_path: Path, held: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a kill between an in-place COMMIT and the memo (the change in DuckDB's log beside the file, as every
    in-place change leaves it), the next run (here a small warehouse: a copy swapped in) copies the log with the file,
    so the copy holds the change and the run applies its own to it, with no rebuild, whether or not a reader holds the
    file; and the log, which DuckDB would replay onto whatever file has that name, is gone before the new file takes
    the name."""
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    killed_run(home, data, "warehouse_log", in_place_bytes=0)
    log = data / "warehouse.duckdb.wal"
    assert log.exists()
    write_session(home, S1, claude_exchange(S1, 3, start_minute=60), append=True)
    reader = holder(data, "reader") if held else None

    def no_rebuild(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("rebuilt: the log was not copied with the file")

    monkeypatch.setattr(warehouse, "_build", no_rebuild)
    try:
        run(settings_for(home, data))
    finally:
        monkeypatch.undo()
        if reader is not None:
            reader.kill()
            reader.wait()
    assert not log.exists()
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []
