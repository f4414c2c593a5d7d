"""The Prefect API a command uses: the one the user configured, or a local server this tool manages itself.

Prefect costs seconds to start, so it is paid once per machine, not once per command: the first command that
needs an API starts `prefect server start` (127.0.0.1 only, its own PREFECT_HOME under the state directory,
analytics off) in its own session, so it outlives the command and a terminal's Ctrl-C; where it is (URL, port,
pid) goes into `server.json` beside it. Later commands check its health over HTTP (never by importing Prefect or
calling its CLI) and reuse it. A file lock around the start makes two commands starting at once start one server;
a dead one, or one that no longer answers, is replaced. `PREFECT_API_URL` set by the user (environment or Prefect
profile) is used as it is, after a bounded check that it answers.

Kept free of Prefect imports: this is on the path of every command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from flows.places import state_dir as state_dir  # re-exported: where the server lives

STARTUP_SECONDS = 120.0  # a fresh PREFECT_HOME runs migrations first (~12 s here, more on a loaded machine)
CHECK_SECONDS = 5.0  # how long a configured API may take to answer its health check
HEALTH_SECONDS = 2.0  # one health probe of the managed server
STOP_SECONDS = 15.0


class ServerError(RuntimeError):
    """No usable Prefect API; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Api:
    """A Prefect API a command can use."""

    url: str
    source: str  # "managed", "PREFECT_API_URL", "Prefect profile 'x'", "Prefect settings"
    pid: int | None = None
    port: int | None = None

    @property
    def ui(self) -> str:
        return self.url.removesuffix("/api")


def _state_file(folder: Path) -> Path:
    return folder / "server.json"


def healthy(url: str, timeout: float = HEALTH_SECONDS) -> bool:
    """Whether a Prefect API answers its health check within `timeout` seconds (a bounded wait, always)."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def configured(env: Mapping[str, str] | None = None) -> Api | None:
    """The API the user configured, if any: Prefect's own settings when Prefect is loaded already (a test
    harness), else `PREFECT_API_URL`, else the active Prefect profile (read from its TOML, not via Prefect)."""
    if env is None and "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        value = PREFECT_API_URL.value()
        if value:
            return Api(str(value), "Prefect settings")
    env = os.environ if env is None else env
    if env.get("PREFECT_API_URL"):
        return Api(env["PREFECT_API_URL"], "PREFECT_API_URL")
    home = Path(env.get("PREFECT_HOME") or Path(env.get("HOME") or Path.home()) / ".prefect").expanduser()
    path = Path(env.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = env.get("PREFECT_PROFILE") or profiles.get("active")
    profile = profiles.get("profiles", {}).get(active, {}) if isinstance(active, str) else {}
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return Api(str(url), f"Prefect profile '{active}'") if url else None


def read_state(folder: Path | None = None) -> Api | None:
    """The managed server as last recorded (it may have died since)."""
    folder = folder or state_dir()
    try:
        raw = json.loads(_state_file(folder).read_text(encoding="utf-8"))
        return Api(str(raw["url"]), "managed", int(raw["pid"]), int(raw["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _is_our_server(pid: int) -> bool:
    """Whether `pid` is a live `prefect server` process (a recycled pid is never killed)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"prefect" in b" ".join(cmdline) and b"server" in cmdline


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _start_lock(folder: Path, wait: float = STARTUP_SECONDS + 30) -> Iterator[None]:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / "start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ServerError(f"another command has been starting the Prefect server for {wait:g}s") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def _server_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(folder / "home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT="false",
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    return env


def _log_tail(folder: Path) -> str:
    try:
        text = (folder / "server.log").read_bytes()[-1500:].decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f"; its log ends: {text.splitlines()[-1]}" if text else ""


def start(folder: Path | None = None) -> Api:
    """The managed server, started if it is not running (or replaced if it is dead or does not answer)."""
    folder = folder or state_dir()
    current = read_state(folder)
    if current is not None and healthy(current.url):
        return current
    with _start_lock(folder):
        current = read_state(folder)  # another command may have started it while we waited
        if current is not None and healthy(current.url):
            return current
        if current is not None and current.pid is not None:
            _stop_pid(current.pid)  # dead already, or alive and not answering: replaced
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        (folder / "home").mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(folder / "server.log", "ab") as log:
            os.fchmod(log.fileno(), 0o600)
            proc = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=_server_env(folder),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own session: it outlives this command and a terminal's Ctrl-C
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while not healthy(url):
            if proc.poll() is not None:
                raise ServerError(
                    f"the managed Prefect server exited at start (code {proc.returncode}){_log_tail(folder)} "
                    f"(log: {folder / 'server.log'})"
                )
            if time.monotonic() > deadline:
                _stop_pid(proc.pid)
                raise ServerError(
                    f"the managed Prefect server did not answer within {STARTUP_SECONDS:g}s; "
                    f"see {folder / 'server.log'}"
                )
            time.sleep(0.3)
        api = Api(url, "managed", proc.pid, port)
        record = {**asdict(api), "started_at": datetime.now(UTC).isoformat(), "prefect_home": str(folder / "home")}
        tmp = _state_file(folder).with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(_state_file(folder))
        return api


def _stop_pid(pid: int) -> bool:
    """Stop a managed server's process group (TERM, then KILL); True if there was one to stop."""
    if not _is_our_server(pid):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while _is_our_server(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
        time.sleep(0.1)
    if _is_our_server(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    return True


def stop(folder: Path | None = None) -> Api | None:
    """Stop the managed server; returns what was stopped (None: nothing was running)."""
    folder = folder or state_dir()
    from flows import runner

    helper = runner.stop(folder)  # the command runner serves this server only: it takes no more commands
    try:
        with _start_lock(folder):
            current = read_state(folder)
            if current is None:
                return None
            stopped = current.pid is not None and _stop_pid(current.pid)
            with contextlib.suppress(FileNotFoundError):
                _state_file(folder).unlink()
            return current if stopped else None
    finally:
        if helper is not None:
            runner.wait_gone(helper, folder)  # the commands it still ran have ended (their server is gone)


def api_for_command(*, manage: bool = True) -> Api:
    """The API this command uses: the configured one if it answers (within CHECK_SECONDS), else the managed one.

    Raises ServerError, with what to do, when a configured API does not answer: Prefect's own wait on it is
    unbounded (its version check waits for ever on a port that accepts and never answers).
    """
    mine = configured()
    if mine is not None:
        if not healthy(mine.url, CHECK_SECONDS):
            raise ServerError(
                f"the Prefect API at {mine.url} (from {mine.source}) does not answer within {CHECK_SECONDS:g}s. "
                "Start that server, or unset PREFECT_API_URL to let transcripts run its own."
            )
        return mine
    if not manage:
        raise ServerError("no Prefect API is configured")
    return start()


@contextlib.contextmanager
def prefect_api() -> Iterator[Api]:
    """Point Prefect at the API for this command (before Prefect is imported) for the duration of the block."""
    api = api_for_command()
    if api.source == "Prefect settings":
        yield api
        return
    saved = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api.url
    os.environ.setdefault("PREFECT_API_REQUEST_TIMEOUT", "30")  # every call on the API is bounded
    try:
        yield api
    finally:
        if saved is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = saved


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so that `finally` blocks (ledger, lock release) run."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
