"""The run ledger sees every run that started, whatever ended it: ok, no-op, failed, interrupted, killed."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.etl.status import read_status
from sinks import ledger
from sinks.lock import writer_lock
from tests.corpus import S1, claude_exchange, small_home, write_session
from tests.test_pipeline import run, settings_for

ROOT = Path(__file__).resolve().parent.parent


def test_started_and_ended_records_merge_into_one_run_newest_first(tmp_path: Path) -> None:
    with ledger.recording(tmp_path, "r1", flow="etl", mode="incremental") as rec:
        rec.counts = {"sessions_loaded": 2}
    with ledger.recording(tmp_path, "r2", flow="etl", mode="incremental") as rec:
        rec.outcome = "noop"
    runs = ledger.runs(tmp_path)
    assert [(r["run_id"], r["outcome"]) for r in runs] == [("r2", "noop"), ("r1", "ok")]
    assert runs[1]["counts"] == {"sessions_loaded": 2} and runs[1]["ended_at"] >= runs[1]["started_at"]
    assert oct(ledger.ledger_path(tmp_path).stat().st_mode & 0o777) == "0o600"


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    with ledger.recording(tmp_path, "r1", flow="etl", mode="incremental"):
        pass
    with ledger.ledger_path(tmp_path).open("a") as handle:
        handle.write('{"event":"started","run_id":"r2","at":"2026')  # a kill in the middle of a write
    assert [r["run_id"] for r in ledger.runs(tmp_path)] == ["r1"]


def test_a_failure_or_ctrl_c_ends_the_record_and_the_error_goes_on(tmp_path: Path) -> None:
    with pytest.raises(ValueError), ledger.recording(tmp_path, "r1", flow="etl", mode="incremental"):
        raise ValueError("bad")
    with pytest.raises(KeyboardInterrupt), ledger.recording(tmp_path, "r2", flow="etl", mode="incremental"):
        raise KeyboardInterrupt
    runs = {r["run_id"]: r for r in ledger.runs(tmp_path)}
    assert runs["r1"]["outcome"] == "failed" and runs["r1"]["error"] == "ValueError: bad"
    assert runs["r2"]["outcome"] == "interrupted"
    assert read_status(tmp_path).problems() == [f"the last run (r2) interrupted: {runs['r2']['error']}"]


def test_a_stop_signal_finds_a_run_under_way_from_its_started_record_until_its_end_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`interrupt` (a stop signal's handler) says whether a run was under way: from the moment its `started` record is
    written (a signal may come just then) until its end is; after that nothing of it is abandoned."""
    seen: list[tuple[str, bool]] = []
    write = ledger.append

    def append(data_dir: Path, record: dict[str, object]) -> None:
        write(data_dir, record)
        seen.append((str(record["event"]), ledger.interrupt("stopped")))  # the signal as the record is written

    monkeypatch.setattr(ledger, "append", append)
    with ledger.recording(tmp_path, "r1", flow="etl", mode="incremental"):
        pass
    assert seen == [("started", True), ("ended", False)]
    assert ledger.interrupt("stopped") is False


def test_nested_recordings_of_one_run_write_once(tmp_path: Path) -> None:
    with (
        ledger.recording(tmp_path, "r1", flow="etl", mode="incremental") as outer,
        ledger.recording(tmp_path, "r1", flow="etl", mode="incremental") as inner,
    ):
        assert inner is outer
        inner.counts = {"sessions_loaded": 1}
    records = ledger.read_records(tmp_path)
    assert [r["event"] for r in records] == ["started", "ended"]
    assert records[1]["counts"] == {"sessions_loaded": 1}


def test_an_unended_run_is_running_while_the_lock_is_held_then_interrupted(tmp_path: Path) -> None:
    ledger.append(tmp_path, {"event": "started", "run_id": "r1", "pid": 2**22 + 7, "host": "elsewhere", "at": "x"})
    with writer_lock(tmp_path, 0):
        assert ledger.runs(tmp_path)[0]["outcome"] == "running"
        assert read_status(tmp_path).problems() == [], "a run going on is not a problem"
    (entry,) = ledger.runs(tmp_path)
    assert entry["outcome"] == "interrupted" and "without recording an outcome" in entry["error"]


KILLED = """
import sys
from pathlib import Path
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
home, data = Path(sys.argv[1]), Path(sys.argv[2])
run_etl(load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)}), as_tasks=False)
"""


def test_a_run_killed_with_sigkill_is_reported_interrupted_and_fails_the_check(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    env = {**os.environ, "TRANSCRIPTS_FAILPOINT": "extract"}
    proc = subprocess.run([sys.executable, "-c", KILLED, str(home), str(data)], cwd=ROOT, env=env, check=False)
    assert proc.returncode == -9
    status = read_status(data)
    assert [r["outcome"] for r in status.runs] == ["interrupted", "ok"]
    assert status.problems() and "interrupted" in status.problems()[0]
    run(settings_for(home, data))
    assert read_status(data).problems() == [], "the next good run clears the check"


def test_a_failed_run_is_seen_by_status_check_without_the_warehouse(
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
    (problem,) = read_status(data).problems()
    assert "failed" in problem and "Permission denied" in problem, "the warehouse still has the old runs table"


def test_a_busy_run_is_recorded_but_is_not_a_problem(tmp_path: Path) -> None:
    from sinks.lock import LockBusy

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    with writer_lock(data, 0), pytest.raises(LockBusy):
        run(dataclasses.replace(settings_for(home, data), lock_wait_seconds=0))
    runs = ledger.runs(data)
    assert [r["outcome"] for r in runs] == ["busy", "ok"]
    assert read_status(data).problems() == [f"the last run ({runs[1]['run_id']}) found 1 new rejection(s)"]


def test_a_run_records_a_snapshot_of_the_corpus_that_status_reads_without_duckdb(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    last = json.loads(ledger.ledger_path(data).read_text().splitlines()[-1])
    assert last["corpus"]["counts"]["sessions"] == {"claude": 2}
    assert last["counts"]["sessions_loaded"] == 2
    probe = (
        "import sys; from flows.etl.status import read_status; from pathlib import Path; "
        f"s = read_status(Path({str(data)!r})); print(s.counts['sessions'], 'duckdb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["{'claude':", "2}", "False"]
