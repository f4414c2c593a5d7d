"""The managed Prefect server: one per machine, started once, reused, replaced when dead, stopped on request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from flows.service import server
from tests.prefect_db import migrated

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state directory of its own; whatever a test leaves running there is stopped, whatever happens."""
    base = migrated(tmp_path_factory.mktemp("state"))
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})
    try:
        yield base
    finally:
        server.stop(folder)


def _cli(base: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["TRANSCRIPTS_STATE_DIR"] = str(base)
    env["PREFECT_HOME"] = str(base / "no-profile")  # no user profile with an API URL
    env.update(extra or {})
    return subprocess.run(
        [sys.executable, "-m", "flows.cli.app", "server", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_one_server_for_concurrent_starts_reused_replaced_when_dead_and_stopped(state: Path) -> None:
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(state)})
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: server.start(folder), range(2))
    assert first == second, "two commands starting at once start one server"
    assert first.url.startswith("http://127.0.0.1:") and server.healthy(first.url)
    assert (folder / "home").is_dir(), "its own Prefect home under the state directory"
    proc = _cli(state, "status")
    assert proc.returncode == 0, proc.stderr
    assert f"UI  {first.ui}" in proc.stdout and f"pid {first.pid}" in proc.stdout
    assert first.pid is not None
    os.killpg(first.pid, signal.SIGKILL)  # a dead server, state file left behind
    deadline = time.monotonic() + 30
    while server.healthy(first.url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _cli(state, "status").returncode == 1
    replaced = server.start(folder)
    assert replaced.pid != first.pid and server.healthy(replaced.url)
    proc = _cli(state, "stop")
    assert proc.returncode == 0 and f"pid {replaced.pid}" in proc.stdout
    assert not server.healthy(replaced.url) and server.read_state(folder) is None
    proc = _cli(state, "status")
    assert proc.returncode == 1 and "not running" in proc.stdout


def test_a_configured_api_comes_from_the_environment_or_the_active_profile(tmp_path: Path) -> None:
    assert server.configured({"PREFECT_API_URL": "http://h:1/api", "HOME": str(tmp_path)}) == server.Api(
        "http://h:1/api", "PREFECT_API_URL"
    )
    (tmp_path / "profiles.toml").write_text(
        'active = "work"\n[profiles.work]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n[profiles.other]\n'
    )
    env = {"PREFECT_HOME": str(tmp_path)}
    assert server.configured(env) == server.Api("http://127.0.0.1:4200/api", "Prefect profile 'work'")
    assert server.configured({**env, "PREFECT_PROFILE": "other"}) is None
    assert server.configured({"PREFECT_HOME": str(tmp_path / "none")}) is None


def test_the_health_check_of_a_silent_port_is_bounded() -> None:
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        start = time.monotonic()
        assert not server.healthy(f"http://127.0.0.1:{silent.getsockname()[1]}/api", timeout=1)
        assert time.monotonic() - start < 5
    finally:
        silent.close()


def test_the_server_and_runner_say_what_they_leave_running_and_leave_when_idle_but_not_in_use(
    tmp_path: Path,
) -> None:
    from flows.service import runner

    base = migrated(tmp_path / "state")
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})
    idle = {server.IDLE_ENV: "0.1", "TRANSCRIPTS_RUNNER": "on"}  # 6 s

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(base, *args, extra=idle)

    try:
        with server.in_use(folder):  # a command using it: never idle meanwhile
            first = cli("start")
            assert first.returncode == 0, first.stderr
            assert "Started the managed Prefect server" in first.stderr and "transcripts server stop" in first.stderr
            assert "MB" in first.stderr and server.IDLE_ENV in first.stderr
            api = server.read_state(folder)
            assert api is not None and runner.ready(folder), (folder / runner.LOG).read_text()
            again = cli("start")
            assert again.returncode == 0 and "Started" not in again.stderr, "said once, by the command that started it"
            time.sleep(10)  # longer than the idle time
            assert server.healthy(api.url) and runner.ready(folder), "in use: not idle"
        deadline = time.monotonic() + 120

        def gone() -> bool:
            return not server.healthy(api.url) and not runner.ready(folder) and server.read_state(folder) is None

        while not gone() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert gone(), "idle: the server and the runner are gone, and so is the server's record"
        assert "event=idle_stop" in (folder / "server.log").read_text()
        back = cli("start")  # the next command brings them back
        assert back.returncode == 0 and "Started the managed Prefect server" in back.stderr, back.stderr
        assert "Prefect server: running (pid " in back.stdout and f"pid {api.pid}," not in back.stdout, back.stdout
        # (a 6 s idle time may well stop this one again by now: unused since it started)
    finally:
        server.stop(folder)


def test_the_managed_ui_asks_its_own_api_not_port_4200(state: Path) -> None:
    import json
    import urllib.request

    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(state)})
    api = server.start(folder)
    with urllib.request.urlopen(f"{api.ui}/ui-settings", timeout=30) as answer:
        settings = json.load(answer)
    assert settings["api_url"] == api.url, settings


def test_server_stop_in_the_process_that_started_the_server_reaps_its_watch(state: Path) -> None:
    """The idle watch is a child of the process that started the server (a test, a serving `schedule`): ended but
    not reaped, it stayed a zombie, and `server stop` waited all of STOP_SECONDS for it to go."""
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(state)})
    server.stop(folder)
    server.start(folder)  # by this process

    def parent(pid: int) -> int | None:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None

    def watch_pid() -> int:  # watch.pid may still name the watch of the server stopped above
        try:
            return int((folder / "watch.pid").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0

    deadline = time.monotonic() + 60
    while parent(watch_pid()) != os.getpid() and time.monotonic() < deadline:
        time.sleep(0.1)
    watch = watch_pid()
    assert parent(watch) == os.getpid(), "the watch of the server this process started is its child"
    server.stop(folder)
    assert not Path(f"/proc/{watch}").exists(), "the idle watch is left a zombie"


def test_an_idle_watch_names_itself_so_a_starter_killed_before_it_wrote_the_pid_leaves_none_unnamed(
    tmp_path: Path,
) -> None:
    # The command that started a watch wrote watch.pid after starting it: a kill in between left a watch that
    # `server stop` could not find. Now the watch writes its own pid as it takes the watch lock.
    folder = tmp_path / "state"
    folder.mkdir()
    env = {**os.environ, server.IDLE_ENV: "1"}
    watch = subprocess.Popen([sys.executable, "-m", "flows.service.server", "watch", str(folder)], env=env)
    assert watch.wait(timeout=60) == 0  # no server recorded in the folder: nothing to watch, it leaves
    assert int((folder / "watch.pid").read_text(encoding="utf-8")) == watch.pid


def test_a_starter_killed_before_it_records_its_server_leaves_the_watch_which_stops_that_server(
    tmp_path: Path,
) -> None:
    """The idle watch starts before the server is recorded, told which server is its: the command killed in between
    (TRANSCRIPTS_FAILPOINT=server_state: it SIGKILLs itself there) leaves a server no one knows of, which its watch
    stops once it is plainly never to be recorded (server.RECORD_SECONDS), and leaves."""
    base = migrated(tmp_path / "base")
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TRANSCRIPTS_STATE_DIR=str(base), TRANSCRIPTS_FAILPOINT="server_state", **{server.IDLE_ENV: "30"})
    starter = subprocess.run(
        [sys.executable, "-c", "from flows.service import server; server.start()"], cwd=ROOT, env=env, timeout=300
    )
    try:
        assert starter.returncode == -signal.SIGKILL
        assert server.read_state(folder) is None, "killed before it recorded the server"
        deadline = time.monotonic() + 60
        named = folder / "watch.pid"
        while not (named.exists() and named.read_text(encoding="utf-8").strip()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the watch names itself as it starts
        watch = int(named.read_text(encoding="utf-8"))
        deadline = time.monotonic() + server.RECORD_SECONDS + 60
        while Path(f"/proc/{watch}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{watch}").exists(), "the watch left"
        said = [line for line in (folder / "server.log").read_text().splitlines() if "event=unrecorded_stop" in line]
        assert len(said) == 1, said
        pid = int(said[0].split("pid=")[1].split()[0])
        assert not Path(f"/proc/{pid}").exists() or not server._is_our_server(pid), "the unrecorded server stopped"
    finally:
        server.stop(folder)
