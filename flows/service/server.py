"""The Prefect API a command uses: the one the user configured, or a local server this tool manages itself.

Prefect costs seconds to start, so it is paid once per machine, not once per command: the first command that
needs an API starts `prefect server start` (127.0.0.1 only, its own PREFECT_HOME under the state directory,
analytics off) in its own session, so it outlives the command and a terminal's Ctrl-C; where it is (URL, port,
pid) goes into `server.json` beside it. Later commands check its health over HTTP (never by importing Prefect or
calling its CLI) and reuse it. A file lock around the start makes two commands starting at once start one server;
a dead one, or one that no longer answers, is replaced (on its last port when free: a serving `schedule` knows
that address). `PREFECT_API_URL` set by the user (environment or Prefect profile) is used as it is, after a bounded
check that it answers.

A command using the managed server holds `in-use.lock` shared; a small watch process (`python -m flows.service.server
watch`) stops the server and the command runner once nobody has held it for TRANSCRIPTS_SERVER_IDLE_MINUTES.

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
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from flows.etl.places import state_dir as state_dir  # re-exported: where the server lives
from flows.service import runner
from flows.service.api import HEALTH_SECONDS as HEALTH_SECONDS  # the names callers know the server by
from flows.service.api import Api as Api
from flows.service.api import ServerError as ServerError
from flows.service.api import configured as configured
from flows.service.api import healthy as healthy
from flows.service.api import read_state as read_state
from flows.service.api import state_file
from sinks import failpoints

STARTUP_SECONDS = 120.0  # a fresh PREFECT_HOME runs migrations first (~12 s here, more on a loaded machine)
CHECK_SECONDS = 5.0  # how long a configured API may take to answer its health check
STOP_SECONDS = 15.0
# The managed server and the command runner hold ~470 MB between them (measured: RSS after a first `run`). They
# leave once no command has used them for this long; the next command brings them back (~10 s). An hour covers an
# evening of interactive use without paying the start again, and frees the memory overnight.
IDLE_MINUTES = 60.0
IDLE_ENV = "TRANSCRIPTS_SERVER_IDLE_MINUTES"  # 0: never idle out
IN_USE = "in-use.lock"  # held shared by every command using the managed API (and by a serving `schedule`)


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


def _flock(fd: int, kind: int, wait: float, gave_up: str) -> None:
    """Take the lock `kind` (fcntl.LOCK_SH or LOCK_EX) on `fd`, polling for at most `wait` seconds; ServerError
    with `gave_up` past that."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ServerError(gave_up) from None
            time.sleep(0.2)


@contextlib.contextmanager
def _start_lock(folder: Path, wait: float = STARTUP_SECONDS + 30) -> Iterator[None]:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / "start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _flock(fd, fcntl.LOCK_EX, wait, f"another command has been starting the Prefect server for {wait:g}s")
        yield
    finally:
        os.close(fd)


def _server_env(folder: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(folder / "home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT="false",
        PREFECT_SERVER_API_HOST="127.0.0.1",
        # The UI asks its API at the address these give (its /ui-settings); without the port it is 4200, another
        # Prefect server's, or none.
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_UI_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    return env


def _port_for(folder: Path) -> int:
    """The port the managed server had last time, if it is free: a `schedule` serving on its address carries on
    when the server is replaced (Prefect reads its API URL once). Else a free one."""
    try:
        last = int((folder / "port").read_text(encoding="utf-8"))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds (TIME_WAIT is free)
            sock.bind(("127.0.0.1", last))
        return last
    except (OSError, ValueError):
        return _free_port()


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
        port = _port_for(folder)
        url = f"http://127.0.0.1:{port}/api"
        (folder / "home").mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(folder / "server.log", "ab") as log:
            os.fchmod(log.fileno(), 0o600)
            proc = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=_server_env(folder, port),
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
        api = Api(url, "managed", proc.pid, port, started=True)
        # The idle watch first, told which server is its: a command killed from here on leaves the server with its
        # watch (which stops it, should the command die before recording it).
        _watch_in_background(folder, proc.pid)
        failpoints.reach("server_state")
        record = {**asdict(api), "started_at": datetime.now(UTC).isoformat(), "prefect_home": str(folder / "home")}
        del record["started"]
        tmp = state_file(folder).with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(state_file(folder))
        (folder / "port").write_text(str(port), encoding="utf-8")
        used(folder)
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
    helper = runner.stop(folder)  # the command runner serves this server only: it takes no more commands
    try:
        with _start_lock(folder):
            current = read_state(folder)
            if current is None:
                return None
            stopped = current.pid is not None and _stop_pid(current.pid)
            with contextlib.suppress(FileNotFoundError):
                state_file(folder).unlink()
            return current if stopped else None
    finally:
        if helper is not None:
            runner.wait_gone(helper, folder)  # the commands it still ran have ended (their server is gone)
        _stop_watch(folder)


def _stop_watch(folder: Path) -> None:
    """End the idle watch of a stopped server now (it would leave by itself within its period)."""
    try:
        pid = int((folder / "watch.pid").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if pid == os.getpid():
        return
    deadline = time.monotonic() + STOP_SECONDS  # gone when `server stop` returns, not a moment later
    ours = _is_watch(pid) or _zombie(pid)  # not another process that took an ended watch's pid
    if _is_watch(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        while _is_watch(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    if ours and _parent(pid) == os.getpid():  # this process started the server (a test, a serving `schedule`): reap its
        while time.monotonic() < deadline:  # watch, ended or ending, or it stays a zombie
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.05)


def _is_watch(pid: int) -> bool:
    """Whether `pid` is a live idle watch (an ended one not reaped yet has no command line: waiting for /proc/<pid>
    to go waited the whole STOP_SECONDS for it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"flows.service.server" in cmdline and b"watch" in cmdline


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _parent(pid: int) -> int | None:
    """The parent of process `pid` (an ended one included, until it is reaped), if there is such a process."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
    """Point Prefect at the API for this command for the duration of the block. Through the managed server, the
    command holds it in use meanwhile (it is not idle, flows.service.server watch), and one it started says so once."""
    with contextlib.ExitStack() as stack:
        if configured() is None:  # the managed server: held in use first, so that the idle watch cannot stop it
            stack.enter_context(in_use())  # between its health check and the command's first call
        api = api_for_command()
        if api.source == "Prefect settings":
            yield api
            return
        if api.started and sys.stderr.isatty():  # a person at a terminal; a script's or cron's output stays as it was
            resident_notice(api)
        saved = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = api.url
        os.environ.setdefault("PREFECT_API_REQUEST_TIMEOUT", "30")  # every call on the API is bounded
        try:
            if "prefect.context" in sys.modules:
                # Prefect read its settings at its import, before the URL was set: without this it would serve on
                # a temporary server of its own ("Cannot schedule flows on an ephemeral server"). Loaded already.
                from prefect.settings import PREFECT_API_URL, temporary_settings

                stack.enter_context(temporary_settings(updates={PREFECT_API_URL: api.url}))
            yield api
        finally:
            if saved is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = saved


def resident_notice(api: Api) -> None:
    """Say, once, what a first command leaves running, what it costs and how to stop it (on stderr: stdout may be
    a JSON document)."""
    minutes = idle_minutes()
    until = f"until unused for {minutes:g} min ({IDLE_ENV}) or" if minutes else "until"
    print(
        f"Started the managed Prefect server (pid {api.pid}, UI {api.ui}); it stays running, with the command "
        f"runner beside it (~470 MB together), {until} `transcripts server stop`.",
        file=sys.stderr,
    )


# --- idle exit ----------------------------------------------------------------------------------------------------


def idle_minutes(env: Mapping[str, str] | None = None) -> float:
    """`TRANSCRIPTS_SERVER_IDLE_MINUTES` (default IDLE_MINUTES; 0: never). Raises ServerError when it is not a
    number of minutes."""
    raw = (os.environ if env is None else env).get(IDLE_ENV, "").strip()
    if not raw:
        return IDLE_MINUTES
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ServerError(f"{IDLE_ENV} must be a number of minutes (0: never), got {raw!r}")
    return value


def used(folder: Path | None = None) -> None:
    """Record that the managed server was just used (its idle time starts again)."""
    path = (folder or state_dir()) / IN_USE
    with contextlib.suppress(OSError):
        path.touch(mode=0o600)
        os.utime(path)


@contextlib.contextmanager
def in_use(folder: Path | None = None, wait: float = STOP_SECONDS * 3) -> Iterator[None]:
    """Hold the managed server in use (a shared lock): the idle watch never stops it meanwhile, and one stopping it
    now is waited for (bounded), so that the command then starts a fresh one."""
    folder = folder or state_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _flock(fd, fcntl.LOCK_SH, wait, f"the managed Prefect server has been stopping for {wait:g}s")
        used(folder)
        yield
    finally:
        used(folder)
        os.close(fd)


def _watch_in_background(folder: Path, server_pid: int) -> None:
    """Start the idle watch of the server just started, `server_pid`, before the server is recorded (stdlib only:
    ~15 MB), unless idling out is off."""
    if not idle_minutes():
        return
    with open(folder / "server.log", "ab") as log:
        # It names itself in watch.pid once it holds the watch lock (`watch`): only the one that watches does.
        subprocess.Popen(
            [sys.executable, "-m", "flows.service.server", "watch", str(folder), str(server_pid)],
            env=os.environ.copy(),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


RECORD_SECONDS = 20.0  # how long a watch waits for its server to be recorded (the starter writes it at once)


def _recorded(folder: Path, server_pid: int) -> Api | None:
    """The state of the server `server_pid` once its starter has recorded it; None when it is gone first, or when it
    is never recorded (the starter was killed in between: nothing else knows of the server, which is stopped)."""
    deadline = time.monotonic() + RECORD_SECONDS
    while time.monotonic() < deadline:
        state = read_state(folder)
        if state is not None and state.pid == server_pid:
            return state
        if not _is_our_server(server_pid):
            return None
        time.sleep(0.1)
    now = datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"{now} event=unrecorded_stop pid={server_pid} (its starter ended before recording it)", flush=True)
    if _is_our_server(server_pid):
        _stop_pid(server_pid)
    return None


def watch(folder: Path, minutes: float, server_pid: int | None = None) -> int:
    """Stop the managed server (and the command runner) once nothing has held it in use for `minutes`; leave when
    it is gone or replaced (its replacement has a watch of its own). `server_pid`: the server whose start began this
    watch, recorded a moment later by its starter (`start`)."""
    lock = os.open(folder / "watch.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # a watch runs already
    # Named by the watch itself, not by the command that started it: that command may be killed before it writes,
    # and a watch started while an older one still holds the lock leaves at once (the older one is the watch).
    (folder / "watch.pid").write_text(str(os.getpid()), encoding="utf-8")
    mine = read_state(folder) if server_pid is None else _recorded(folder, server_pid)
    if mine is None:
        return 0
    period = max(0.5, min(30.0, minutes * 60 / 6))
    fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        time.sleep(period)
        current = read_state(folder)
        if current is None or current.pid != mine.pid or not _is_our_server(mine.pid or 0):
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a command, or a serving `schedule`, uses it
        try:
            idle = time.time() - os.stat(folder / IN_USE).st_mtime
            if idle >= minutes * 60:
                now = datetime.now().astimezone().isoformat(timespec="seconds")
                print(f"{now} event=idle_stop pid={mine.pid} idle_seconds={idle:.0f}", flush=True)
                stop(folder)  # the runner too; a command waiting in in_use() then starts a fresh one
                return 0
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3) or args[0] != "watch" or not all(a.isdigit() for a in args[2:]):
        print(
            "usage: python -m flows.service.server watch STATE_DIR [SERVER_PID] (started by transcripts itself)",
            file=sys.stderr,
        )
        return 2
    try:
        minutes = idle_minutes()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return watch(Path(args[1]), minutes, int(args[2]) if len(args) == 3 else None) if minutes else 0


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so that `finally` blocks (ledger, lock release) run."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    raise SystemExit(main())
