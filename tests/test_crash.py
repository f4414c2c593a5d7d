"""A run killed with SIGKILL at any point, followed by a normal run, gives exactly the result of one clean run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sinks.failpoints import POINTS
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.test_pipeline import run, settings_for, snapshot

ROOT = Path(__file__).resolve().parent.parent

KILLED_RUN = """
import dataclasses, sys
from pathlib import Path
from flows.etl import run_etl
from flows.settings import load_settings
home, data, workers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
settings = load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)})
run_etl(dataclasses.replace(settings, workers=workers, batch_files=1), as_tasks=False)
"""


def killed_run(home: Path, data: Path, point: str, workers: int = 1) -> None:
    env = {**os.environ, "TRANSCRIPTS_FAILPOINT": point}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(home), str(data), str(workers)],
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


@pytest.mark.parametrize(("point", "workers"), [(p, 1) for p in POINTS] + [("extract", 2)])
def test_killed_first_run_then_normal_run_equals_a_clean_run(tmp_path: Path, point: str, workers: int) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    killed_run(home, data, point, workers)
    run(settings_for(home, data))
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []


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
    run(settings_for(home, data))
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)
    assert leftovers(data) == []
