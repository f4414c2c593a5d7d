"""The command runner (flows.service.runner): a command through it is the command run by itself, only without loading
Prefect: same output, exit codes, Ctrl-C and kill behaviour; it declines whatever could make a child differ."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.service import runner, server
from tests.corpus import busy_home
from tests.prefect_db import migrated

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A managed server and a ready runner in a state directory of their own, stopped at the end whatever happens."""
    base = migrated(tmp_path_factory.mktemp("runner-state"))
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})
    try:
        api = server.start(folder)
        runner.start_in_background(api.url, folder, _env(base))
        assert runner.wait_ready(folder, 120), (
            (folder / runner.LOG).read_text() if (folder / runner.LOG).exists() else ""
        )
        yield base
    finally:
        server.stop(folder)


def _env(base: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TRANSCRIPTS_STATE_DIR=str(base), TRANSCRIPTS_RUNNER="on", **extra)
    return env


def _folder(base: Path) -> Path:
    return server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})


def _log(base: Path) -> list[str]:
    return (_folder(base) / runner.LOG).read_text(encoding="utf-8").splitlines()


def _transcripts(
    base: Path, *args: str, cwd: Path, here: bool = False, **extra: str
) -> subprocess.CompletedProcess[str]:
    """The `transcripts` executable as a person runs it (flows.cli.entry); `here`: with the runner turned off."""
    env = _env(base, **extra)
    if here:
        env["TRANSCRIPTS_RUNNER"] = "off"
    return subprocess.run(
        [sys.executable, "-m", "flows.cli.entry", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _served(base: Path, before: int) -> list[str]:
    return [line for line in _log(base)[before:] if "event=serving" in line]


def _plain(text: str, *names: Path) -> str:
    for i, name in enumerate(names):
        text = text.replace(str(name), f"<dir{i}>")
    text = re.sub(r"\d+\.\d+s\b", "<t>s", text)
    return re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ .*\n", "", text, flags=re.M)  # structured log lines


def test_a_run_through_the_runner_prints_and_loads_what_a_run_of_its_own_does(state: Path, tmp_path: Path) -> None:
    before = len(_log(state))
    through = _transcripts(state, "run", "--sample", "--data-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert len(_served(state, before)) == 1, _log(state)[before:]  # it did go through the runner
    own = _transcripts(state, "run", "--sample", "--data-dir", str(tmp_path / "b"), cwd=tmp_path, here=True)
    assert len(_served(state, before)) == 1, _log(state)[before:]
    assert through.returncode == own.returncode == 0, (through.stderr, own.stderr)
    assert _plain(through.stdout, tmp_path / "a") == _plain(own.stdout, tmp_path / "b")
    assert "Traceback" not in through.stdout + through.stderr
    assert any("exit=0" in line for line in _log(state)[before:])
    docs = []
    for name in ("a", "b"):
        status = _transcripts(state, "status", "--json", "--data-dir", str(tmp_path / name), cwd=tmp_path)
        doc = json.loads(status.stdout)
        docs.append({"counts": doc["counts"], "rejections": doc["rejections"]})
    assert docs[0] == docs[1] and docs[0], docs
    again = _transcripts(state, "run", "--sample", "--json", "--data-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "noop"


def test_a_backfill_goes_through_the_runner_and_loads_the_export(state: Path, tmp_path: Path) -> None:
    export = ROOT / "data" / "sample" / "chatgpt" / "conversations.json"
    before = len(_log(state))
    args = ("backfill", "chatgpt", str(export), "--write", "--json", "--data-dir", str(tmp_path / "d"))
    proc = _transcripts(state, *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sessions_loaded"] >= 1
    assert [line for line in _served(state, before) if "command=backfill" in line]
    again = _transcripts(state, *args, cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "noop"


def test_a_usage_error_through_the_runner_is_the_same_one_line_and_exit_code(state: Path, tmp_path: Path) -> None:
    before = len(_log(state))
    args = ("run", "--root", f"claude={tmp_path / 'nowhere'}", "--data-dir", str(tmp_path / "d"))
    through = _transcripts(state, *args, cwd=tmp_path)
    own = _transcripts(state, *args, cwd=tmp_path, here=True)
    assert len(_served(state, before)) == 1, _log(state)[before:]
    assert through.returncode == own.returncode == 2
    assert through.stderr == own.stderr and "nowhere" in through.stderr
    assert "Traceback" not in through.stderr


def test_help_and_usage_errors_through_the_runner_name_the_program_transcripts(state: Path, tmp_path: Path) -> None:
    executable = Path(sys.executable).parent / "transcripts"  # the installed script, as a person runs it
    assert executable.exists(), executable
    before = len(_log(state))
    for args, code in ((["run", "--help"], 0), (["run", "--no-such-option"], 2)):
        proc = subprocess.run(
            [str(executable), *args], cwd=tmp_path, env=_env(state), capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == code, proc.stderr
        assert "Usage: transcripts run" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert "python -m" not in proc.stdout + proc.stderr
    assert len(_served(state, before)) == 2, _log(state)[before:]  # both went through the runner


def _start_and_wait_for_the_plan(
    state: Path, tmp_path: Path, hold: Path | None = None
) -> tuple[subprocess.Popen[str], list[str]]:
    """`transcripts run` through the runner, returned once it has planned; with `hold`, once it is held at the pause
    point after its first batch (sinks/failpoints.py: `hold` is its flag), so that a signal finds it still running."""
    home = busy_home(tmp_path / "home")
    extra = {"TRANSCRIPTS_PAUSEPOINT": f"extract:{hold}"} if hold is not None else {}
    proc = subprocess.Popen(
        # -v: its log records on stderr too, where the test sees that it planned
        [sys.executable, "-m", "flows.cli.entry", "run", "-v", "--home", str(home), "--data-dir", str(tmp_path / "d")],
        cwd=tmp_path,
        env=_env(state, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's background job ignores it
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # the run has planned: it is in the flow now
        seen.append(line)
        if "event=plan" in line:
            break
    if hold is not None:
        deadline = time.monotonic() + 120
        while not Path(f"{hold}.reached").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert Path(f"{hold}.reached").exists(), "the run never reached its first batch's end"
    return proc, seen


def test_ctrl_c_of_a_command_in_the_runner_is_one_line_exit_130_and_recorded(state: Path, tmp_path: Path) -> None:
    from sinks import ledger

    before = len(_log(state))
    # held after its first batch: the rest of a small run may otherwise end before the forwarded signal comes
    hold = tmp_path / "go"
    proc, seen = _start_and_wait_for_the_plan(state, tmp_path, hold=hold)
    try:
        assert len(_served(state, before)) == 1, _log(state)[before:]
        proc.send_signal(signal.SIGINT)  # to the caller only, as a terminal sends it: the caller forwards it
        time.sleep(0.5)
        hold.touch()  # a pause point holds no real run: released, whatever the signal has done by then
        out, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    err_lines = [line for line in ("".join(seen) + rest).splitlines() if line and not line[:4].isdigit()]
    assert proc.returncode == 130, (out, rest)
    assert err_lines == ["run interrupted; the previous corpus is intact."], err_lines
    assert "Traceback" not in out + rest
    assert [r["outcome"] for r in ledger.runs(tmp_path / "d")] == ["interrupted"]


def test_a_caller_killed_outright_takes_its_command_with_it(state: Path, tmp_path: Path) -> None:
    from sinks import ledger

    before = len(_log(state))
    proc, _ = _start_and_wait_for_the_plan(state, tmp_path)
    try:
        served = _served(state, before)
        assert len(served) == 1, _log(state)[before:]
        child = int(served[0].rsplit("pid=", 1)[1])
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists(), "the command outlived its caller"
    assert any(f"event=caller_gone pid={child}" in line for line in _log(state)[before:])
    assert [r["outcome"] for r in ledger.runs(tmp_path / "d")] == ["interrupted"]  # killed: the lock is free
    rerun = _transcripts(
        state, "run", "--home", str(tmp_path / "home"), "--data-dir", str(tmp_path / "d"), cwd=tmp_path
    )
    assert rerun.returncode == 0, rerun.stderr
    assert ledger.runs(tmp_path / "d")[0]["outcome"] == "ok"


def test_the_runner_declines_other_prefect_settings_and_the_command_runs_by_itself(state: Path, tmp_path: Path) -> None:
    before = len(_log(state))
    proc = _transcripts(
        state, "run", "--sample", "--data-dir", str(tmp_path / "a"), cwd=tmp_path, PREFECT_LOGGING_LEVEL="ERROR"
    )
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "prefect.toml").write_text("[logging]\nlevel = 'ERROR'\n")
    proc = _transcripts(state, "run", "--sample", "--data-dir", str(tmp_path / "b"), cwd=tmp_path / "proj")
    assert proc.returncode == 0, proc.stderr
    lines = _log(state)[before:]
    assert not [line for line in lines if "event=serving" in line], lines
    assert any("reason='other Prefect settings in the environment'" in line for line in lines), lines
    assert any(f"reason='Prefect settings in {tmp_path / 'proj' / 'prefect.toml'}'" in line for line in lines), lines


def test_commands_that_need_no_flow_never_reach_the_runner(state: Path, tmp_path: Path) -> None:
    before = len(_log(state))
    proc = _transcripts(state, "status", "--data-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert proc.returncode == 0
    assert _log(state)[before:] == []


def test_a_request_is_declined_for_another_python_environment_or_a_malformed_one(state: Path, tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/api"
    loaded = runner.Loaded(tmp_path, url)
    env = {**os.environ, "TRANSCRIPTS_RUNNER": "on"}
    request = {"argv": ["run"], "cwd": str(tmp_path), "env": env, "python": runner._python()}
    assert loaded.decline(request) == "its Prefect server was stopped or replaced"  # no server.json in tmp_path
    assert loaded.decline({**request, "python": {**runner._python(), "executable": "/other/python"}}) == (
        "another Python interpreter or sys.path"
    )
    assert loaded.decline({**request, "env": {**env, "PYTHONHASHSEED": "1"}}) == ("other PYTHON* environment variables")
    assert loaded.decline({**request, "env": {**env, "PREFECT_API_URL": "http://elsewhere/api"}}) == (
        "other Prefect settings in the environment"
    )
    assert loaded.decline({**request, "env": {**env, "TRANSCRIPTS_RUNNER": "off"}}) == "TRANSCRIPTS_RUNNER=off"
    # Without PREFECT_HOME, Prefect's home (profiles, local storage) follows HOME; with it, HOME does not matter.
    no_home = {k: v for k, v in env.items() if k != "PREFECT_HOME"}
    effective = runner.effective_prefect_env
    assert effective({**no_home, "HOME": "/elsewhere"}, url) != effective({**no_home, "HOME": "/here"}, url)
    assert effective({**env, "HOME": "/elsewhere"}, url) == effective({**env, "HOME": "/here"}, url)
    assert loaded.decline({"argv": "run"}) == "a malformed request"
    (tmp_path / ".env").write_text("PREFECT_LOGGING_LEVEL=DEBUG\n")
    assert loaded.decline(request) == f"Prefect settings in {tmp_path / '.env'}"
    (tmp_path / ".env").write_text("OTHER=1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert runner.prefect_files(str(tmp_path)) is None  # a .env and pyproject.toml without Prefect settings
    (tmp_path / "pyproject.toml").write_text("[tool.prefect]\nhome = '/x'\n")
    assert runner.prefect_files(str(tmp_path)) == str(tmp_path / "pyproject.toml")


def test_the_code_fingerprint_changes_when_a_module_or_the_profile_changes(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    module = tmp_path / "flows" / "x.py"
    module.write_text("A = 1\n")
    env = {"PREFECT_HOME": str(tmp_path / "home")}
    first = runner.fingerprint(env, tmp_path)
    assert runner.fingerprint(env, tmp_path) == first
    os.utime(module, ns=(1, 1))
    assert runner.fingerprint(env, tmp_path) != first
    second = runner.fingerprint(env, tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.toml").write_text("active = 'x'\n")
    assert runner.fingerprint(env, tmp_path) != second


def test_installed_packages_change_the_fingerprint_and_a_first_import_does_not(tmp_path: Path) -> None:
    """A fresh environment's first import of a top-level module creates `__pycache__` in site-packages: the runner
    stepped down for that (CI, a fresh clone), though nothing it had loaded changed."""
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg-1.0.dist-info").mkdir()
    first = [f"{p}:{p.stat().st_mtime_ns}" for p in runner._installed(site)]
    (site / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__").mkdir()
    assert [f"{p}:{p.stat().st_mtime_ns}" for p in runner._installed(site)] == first
    (site / "pkg-1.0.dist-info").rename(site / "pkg-1.1.dist-info")
    assert [f"{p}:{p.stat().st_mtime_ns}" for p in runner._installed(site)] != first
    (site / "_editable.pth").write_text(str(tmp_path))
    assert len(runner._installed(site)) == 2


def test_server_stop_stops_the_runner_and_status_says_so(state: Path, tmp_path: Path) -> None:
    env = _env(state)
    status = subprocess.run(
        [sys.executable, "-m", "flows.cli.app", "server", "status", "--json"], env=env, capture_output=True, text=True
    )
    doc = json.loads(status.stdout)
    assert doc["runner"]["state"] == "ready" and isinstance(doc["runner"]["pid"], int), doc
    pid = doc["runner"]["pid"]
    stopped = subprocess.run(
        [sys.executable, "-m", "flows.cli.app", "server", "stop"], env=env, capture_output=True, text=True, timeout=60
    )
    assert stopped.returncode == 0, stopped.stderr
    assert not Path(f"/proc/{pid}").exists() or runner.PROCESS.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not runner.ready(_folder(state)) and runner.read_state(_folder(state)) is None
    before = len(_log(state))
    proc = _transcripts(state, "run", "--sample", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # no runner: the command runs by itself (and starts the server)
    assert not _served(state, before)
    server.stop(_folder(state))
    started = subprocess.run(
        [sys.executable, "-m", "flows.cli.app", "server", "start", "--json"], env=env, capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["runner"]["state"] == "ready"  # started, and waited for
    proc = _transcripts(state, "run", "--sample", "--data-dir", str(tmp_path / "e"), cwd=tmp_path)
    assert proc.returncode == 0 and len(_served(state, before)) == 1, _log(state)[before:]
