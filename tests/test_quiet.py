"""What a run prints (issue 32, "quiet by default"): its summary and nothing else, off a terminal and on one (where
a progress display comes and goes before it); its log records, ours, Prefect's and Dask's, in the run's log file
(`<data dir>/logs/run-<run id>.log`), and on stderr too with `-v`. The real CLI in a subprocess, on a tmp home and
data dir (docs/operations.md, "What a run prints").
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import select
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.corpus import busy_home, mixed_home

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 300  # a bound on a command, so that a hung one fails the test instead of stalling the run


def transcripts(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, piped (not a terminal), as cron or a script runs it."""
    return subprocess.run(
        [sys.executable, "-m", "flows.cli.app", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SECONDS,
    )


def summary_only(text: str) -> bool:
    """Whether `text` is a run's summary and nothing else: its first line, per-agent lines, what to look at (new
    rejections), where the corpus is."""
    lines = text.splitlines()
    return (
        bool(lines)
        and lines[0].startswith("sources found ")
        and lines[-1].startswith("Corpus: ")
        and all(line.startswith("  ") or re.match(WARNINGS, line) for line in lines[1:-1])
    )


# The summary's lines for a person to act on: new rejections, what discovery passed over.
WARNINGS = r"\d+ new rejections?: see |passed over while discovering: "


def run_logs(data: Path) -> list[Path]:
    return sorted((data / "logs").glob("run-*.log"))


# A user whose Prefect profile logs at INFO gets Prefect's records per task on stderr unless the command keeps them
# off the terminal: the tests run with that, the worst case.
LOUD_PREFECT = {"PREFECT_LOGGING_LEVEL": "INFO"}


@pytest.mark.usefixtures("prefect_harness")  # the tests' managed server started before: no line saying so
def test_a_piped_run_prints_its_summary_only_and_its_log_records_go_to_the_runs_log_file(tmp_path: Path) -> None:
    home, data = mixed_home(tmp_path / "home"), tmp_path / "data"
    fifo = next((home / ".claude" / "projects").iterdir()) / "named-pipe.jsonl"
    os.mkfifo(fifo)  # passed over by discovery, with a warning: in the summary, its details in the log
    proc = transcripts("run", "--home", str(home), "--data-dir", str(data), env=LOUD_PREFECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "no log record on the terminal: not ours, not Prefect's"
    assert summary_only(proc.stdout), proc.stdout
    [log] = run_logs(data)
    assert f"passed over while discovering: fifo 1 (details: {log})" in proc.stdout
    assert "WARNING transcripts.discovery" in log.read_text(encoding="utf-8")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text = log.read_text(encoding="utf-8")
    for record in ("INFO transcripts.etl event=plan", "INFO transcripts.etl event=done", "INFO prefect.flow_runs"):
        assert record in text, record
    run_id = re.search(r"event=done run=(\S+)", text)
    assert run_id is not None and log.name == f"run-{run_id.group(1)}.log"
    fifo.unlink()  # a no-op run below logs nothing (a FIFO passed over is a warning: a record)

    # The same records on stderr with -v; the summary on stdout as before; a no-op run logs nothing, leaves no file.
    proc = transcripts("run", "-v", "--full", "--home", str(home), "--data-dir", str(data), env=LOUD_PREFECT)
    assert proc.returncode == 0, proc.stderr
    assert summary_only(proc.stdout), proc.stdout
    assert "INFO transcripts.etl event=done" in proc.stderr and "INFO prefect.flow_runs" in proc.stderr
    assert len(run_logs(data)) == 2
    proc = transcripts("run", "--home", str(home), "--data-dir", str(data))
    assert proc.returncode == 0 and proc.stderr == "" and "nothing new" in proc.stdout
    assert len(run_logs(data)) == 2

    # --json: one document, nothing else on either stream.
    proc = transcripts("run", "--json", "--full", "--home", str(home), "--data-dir", str(data), env=LOUD_PREFECT)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.lstrip().startswith("{") and proc.stdout.rstrip().endswith("}")


@pytest.mark.usefixtures("prefect_harness")
def test_a_piped_backfill_prints_its_summary_only(tmp_path: Path) -> None:
    home, data = mixed_home(tmp_path / "home"), tmp_path / "data"
    codex = home / ".codex" / "sessions"
    proc = transcripts("backfill", "codex", str(codex), "--write", "--data-dir", str(data), env=LOUD_PREFECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert summary_only(proc.stdout), proc.stdout
    [log] = run_logs(data)
    assert "event=done" in log.read_text(encoding="utf-8")


def _read_all(fd: int, proc: subprocess.Popen[bytes], seconds: float) -> bytes:
    """Everything written to the pty until the command ends (EIO once no process holds the other side)."""
    out = bytearray()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            with contextlib.suppress(OSError):
                while chunk := os.read(fd, 65536):
                    out += chunk
            break
    return bytes(out)


def _screen(raw: bytes) -> list[str]:
    """The lines a terminal showed, each state of a redrawn line once (escape sequences removed)."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode("utf-8", "replace"))
    shown: list[str] = []
    for line in text.split("\n"):
        for part in line.split("\r"):
            if part.strip() and (not shown or shown[-1] != part):
                shown.append(part.rstrip())
    return shown


@pytest.mark.usefixtures("prefect_harness")
def test_on_a_terminal_a_load_shows_its_progress_then_only_its_summary(tmp_path: Path) -> None:
    home, data = busy_home(tmp_path / "home", sessions=400), tmp_path / "data"
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, **LOUD_PREFECT, "TERM": "xterm-256color", "TRANSCRIPTS_PROGRESS_AFTER": "0"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli.app", "run", "--home", str(home), "--data-dir", str(data)],
        cwd=ROOT,
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    )
    os.close(secondary)
    try:
        raw = _read_all(primary, proc, SECONDS)
        code = proc.wait(timeout=SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(primary)
    shown = _screen(raw)
    assert code == 0, shown
    display = [line for line in shown if " sources · " in line]
    assert any(line.lstrip("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ").startswith("reading ") for line in display), shown
    assert any(re.search(r"\d+/400 sources · [\d.]+/[\d.]+ MB · .* MB/s · ETA ", line) for line in display), shown
    assert any("loading the warehouse" in line for line in display), "each stage is named"
    start = next(i for i, line in enumerate(shown) if line.startswith("sources found "))
    assert summary_only("\n".join(shown[start:])), shown[start:]
    assert "loaded 400 sessions" in shown[start]
    assert not any("event=" in line or "INFO" in line for line in shown), "no log record on the terminal"
    assert raw.rstrip().endswith(b"for a summary)"), "the display is gone when the summary prints"


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_on_a_local_dask_cluster_prints_its_summary_only_and_the_clusters_records_go_to_the_runs_log(
    tmp_path: Path,
) -> None:
    pytest.importorskip("prefect_dask", reason="prefect-dask is a dependency of the project: `uv sync` installs it")
    home, data = mixed_home(tmp_path / "home"), tmp_path / "data"
    config = tmp_path / "dask.toml"
    config.write_text("[run]\nbatch_files = 2\nworkers = 2\n", encoding="utf-8")  # several batches, two workers
    # The command starts the cluster and stops it as it ends, however it ends; the timeout bounds a hung one.
    args = ("run", "--dask", "local", "--config", str(config), "--home", str(home), "--data-dir", str(data))
    proc = transcripts(*args, env=LOUD_PREFECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "neither distributed's records nor Prefect's reach the terminal"
    assert summary_only(proc.stdout), proc.stdout
    [log] = run_logs(data)
    text = log.read_text(encoding="utf-8")
    assert "INFO distributed.scheduler" in text, "the cluster's records are the run's, at its level"
    pids = {line.split()[2] for line in text.splitlines() if " INFO distributed.worker " in line}
    command = {line.split()[2] for line in text.splitlines() if " transcripts.etl event=done" in line}
    assert pids and command and pids - command, "a worker process's own records are in the run's log"


def test_a_scheduled_runs_records_go_to_its_log_file_and_the_folder_keeps_the_newest_runs(tmp_path: Path) -> None:
    # The nightly schedule's flow run calls run_etl with no CLI around it: the run opens its log file itself.
    from flows.etl import runlog
    from flows.etl.flow import run_etl
    from flows.etl.settings import load_settings

    home, data = mixed_home(tmp_path / "home"), tmp_path / "data"
    old = runlog.folder(data)
    old.mkdir(parents=True)
    for n in range(runlog.KEEP + 5):
        (old / f"run-20000101T0000{n:02d}000000Z-1.log").write_text("old\n")
    logging.getLogger("transcripts").setLevel(logging.NOTSET)  # as in a process the CLI did not set up
    report = run_etl(load_settings(home=home, data_dir=data, lock_wait=5), as_tasks=False)
    logs = run_logs(data)
    assert len(logs) == runlog.KEEP, "the newest runs' logs are kept, the older removed"
    assert logs[-1].name == f"run-{report.run_id}.log"
    assert "event=done" in logs[-1].read_text(encoding="utf-8")
    assert runlog.current() is None, "the run's file is closed with the run"
