"""The command runner: `run` and `backfill` answered by a process that has Prefect and the pipeline loaded already.

Importing Prefect and the pipeline costs ~2.5 s, paid again by every command that goes through a flow. Beside the
managed Prefect server, a runner keeps them imported. The `transcripts` executable (flows.cli.entry) sends it the
command's arguments, environment, working directory and umask, and its stdin, stdout and stderr as file
descriptors, over a Unix socket in the state directory (0700, the socket 0600, the peer's uid checked). The
runner forks a child that runs the command as the command itself would (the CLI's main, which the runner's
process, flows.cli.resident, hands it), writing to the caller's terminal or pipe; the caller forwards its signals
(Ctrl-C, SIGTERM, SIGHUP) to the child and exits with the child's code. A caller killed outright (SIGKILL) takes
its command with it: the runner sees the socket close and kills the child's group, as killing a command of its own
kills its process.

The runner declines, and the command runs in its own process as before, whenever a child could differ from that:
another Python or sys.path, other PYTHON* or Prefect settings (environment, `.env`, `prefect.toml` or
`[tool.prefect]` in the working directory, the Prefect profile), another managed server than the one it was
loaded for, or code changed on disk since it was loaded (it then steps down; the next command through a flow
starts a fresh one). `TRANSCRIPTS_RUNNER=off` turns it off.

It is started in the background by a command that went through the managed server (for the next command), and by
`transcripts server start`; `transcripts server stop` stops it with the server; it leaves when its server is gone.
What it does is logged, one line per command, in `runner.log` beside the server's (no arguments' values that
could be secrets: the command name only).

The caller's side (`delegate`, `call`) imports only the standard library: it is on the path of every command.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import io
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extractors import registry
from flows.etl.places import state_dir
from flows.service import api
from flows.service.api import QUIET_PREFECT

DELEGATED = ("run", "backfill")  # the commands that go through a Prefect flow
SOCKET = "runner.sock"
LOCK = "runner.lock"
PROCESS = "flows.cli.resident"  # the runner's process: this module serving the CLI's commands
STATE = "runner.json"
LOG = "runner.log"
CONNECT_SECONDS = 2.0  # a runner takes a connection at once; one that does not is not waited on
# The runner answers a request in milliseconds (it forks). A caller that gives up waiting runs the command itself,
# and the runner then kills the child it may have forked meanwhile (the caller's connection closed): a kill the
# pipeline is safe against. Long enough that this happens only on a machine that has stopped making progress.
ANSWER_SECONDS = 10.0
READY_SECONDS = 60.0  # how long `server start` waits for a runner loading Prefect on a busy machine
CHECK_SECONDS = 30.0  # how often an idle runner checks that its server and its code are still the ones it loaded
HEALTH_SECONDS = 1.0  # the managed server's health check, per command (a few ms when it is up)
HEALTH_TRIES = 3  # a server slow to answer on a loaded machine is not a silent one
PREFECT_FILES = (".env", "prefect.toml", "pyproject.toml")  # read by Prefect's settings from the working directory


def enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    return env.get("TRANSCRIPTS_RUNNER", "on").strip().lower() not in ("0", "off", "false", "no")


def socket_path(folder: Path | None = None) -> Path:
    return (folder or state_dir()) / SOCKET


# --- the caller -------------------------------------------------------------------------------------------------


def delegate(argv: list[str]) -> int | None:
    """Run the command `argv` in the runner; its exit code, or None when it is to run here (no runner, or declined)."""
    if not argv or argv[0] not in DELEGATED or not enabled(os.environ):
        return None
    try:
        request = _request(argv)
        sock = _connect(socket_path())
    except OSError:  # no runner listening, a stale socket, a working directory that is gone, a closed stdio fd
        return None
    with sock:
        return _drive(sock, request)


def _request(argv: list[str]) -> dict[str, Any]:
    for fd in (0, 1, 2):
        os.fstat(fd)  # a closed stdio descriptor (OSError): run here, as a process of its own would
    umask = os.umask(0o077)
    os.umask(umask)
    return {
        "argv0": sys.argv[0],
        "argv": argv,
        "cwd": os.getcwd(),
        "umask": umask,
        "env": dict(os.environ),
        "python": _python(),
        "streams": [[getattr(s, "encoding", None), getattr(s, "errors", None)] for s in _stdio()],
    }


def _stdio() -> tuple[Any, Any, Any]:
    return sys.stdin, sys.stdout, sys.stderr


def _python() -> dict[str, Any]:
    """What a child inherits from the interpreter and cannot change after start: it must match the caller's."""
    return {
        "executable": sys.executable,
        "version": sys.version,
        "path": sys.path[1:],  # [0] is the script's folder or the working directory, which may differ
        "flags": repr(sys.flags),
        "fs_encoding": sys.getfilesystemencoding(),
    }


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_SECONDS)
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def _drive(sock: socket.socket, request: dict[str, Any]) -> int | None:
    data = json.dumps(request).encode() + b"\n"
    try:
        sent = socket.send_fds(sock, [data], [0, 1, 2])
        if sent < len(data):
            sock.sendall(data[sent:])
        sock.settimeout(ANSWER_SECONDS)
        replies = sock.makefile("rb")
        first = _reply(replies)
    except OSError:
        return None
    if first is None or "pid" not in first:
        return None  # declined (the reason is in runner.log): run here
    child = int(first["pid"])
    sock.settimeout(None)  # the command takes as long as it takes

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signum)  # to the command: it stops its own workers, and says so in one line

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    try:
        done = _reply(replies)
    except OSError:
        done = None
    if done is None or "exit" not in done:
        log = socket_path().parent / LOG
        print(f"error: the command runner went away during the command (see {log})", file=sys.stderr)
        return 1
    return int(done["exit"])


def _reply(stream: Any) -> dict[str, Any] | None:
    line = stream.readline()
    try:
        value = json.loads(line) if line else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- status, start, stop (for `transcripts server` and the commands that start one) ------------------------------


def read_state(folder: Path | None = None) -> dict[str, Any] | None:
    """The runner as it recorded itself when ready (None: never started, or stopped)."""
    try:
        value = json.loads(((folder or state_dir()) / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def ready(folder: Path | None = None) -> bool:
    """Whether a runner accepts commands in `folder` (a connection is made and closed: it serves nothing)."""
    try:
        _connect(socket_path(folder)).close()
    except OSError:
        return False
    return True


def _is_runner(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return PROCESS.encode() in cmdline


def start_in_background(url: str, folder: Path | None = None, env: dict[str, str] | None = None) -> Any:
    """Start a runner for the managed server at `url` unless one is ready; it loads in the background and takes
    commands once loaded (a second one started meanwhile sees the first's lock and leaves). It loads Prefect with
    `env` (default: this process's environment), and serves commands whose environment agrees with it. Returns
    the process started, or None (off, or one is ready)."""

    folder = folder or state_dir()
    env = dict(os.environ) if env is None else env
    if not enabled(env) or ready(folder):
        return None
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(folder / LOG, "ab") as log:
        os.fchmod(log.fileno(), 0o600)
        return subprocess.Popen(
            [sys.executable, "-m", PROCESS, "serve", str(folder), url],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives this command and a terminal's Ctrl-C, like the server
        )


def wait_ready(folder: Path | None = None, seconds: float = READY_SECONDS, started: Any = None) -> bool:
    """Wait until a runner takes commands; give up after `seconds`, or when `started` (a process from
    `start_in_background`) has exited without one being ready (it failed, or it found another runner's lock)."""

    # Ready is accepting and recorded: the socket listens a moment before the runner writes its state (`_record`),
    # and a caller told "ready" then read no state (seen in CI: `read_state` None right after `wait_ready`).
    def taking() -> bool:
        return ready(folder) and read_state(folder) is not None

    deadline = time.monotonic() + seconds
    while not taking():
        if time.monotonic() > deadline or (started is not None and started.poll() is not None and not taking()):
            return taking()
        time.sleep(0.2)
    return True


def stop(folder: Path | None = None) -> int | None:
    """Tell the runner to stop (it takes no more commands, and leaves once those it runs have ended); its pid, or
    None when none runs. `wait_gone` then waits for it."""
    folder = folder or state_dir()
    state = read_state(folder)
    pid = state.get("pid") if state else None
    if not isinstance(pid, int) or not _is_runner(pid):
        with contextlib.suppress(FileNotFoundError):
            (folder / STATE).unlink()
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    return pid


def wait_gone(pid: int, folder: Path | None = None, seconds: float = 15.0) -> None:
    """Wait for a stopped runner to leave; one still there after `seconds` is killed (its commands run on)."""

    deadline = time.monotonic() + seconds
    while _is_runner(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child (a test)
        time.sleep(0.05)
    if _is_runner(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        state = read_state(folder)
        if state is not None and state.get("pid") == pid:
            ((folder or state_dir()) / STATE).unlink()


# --- the runner -------------------------------------------------------------------------------------------------


def effective_prefect_env(env: dict[str, str], url: str) -> dict[str, str]:
    """The Prefect-related environment a command through the managed server at `url` ends up with: what it loads
    Prefect with (flows.cli.cmd_run sets the quiet defaults and the API URL before the import)."""
    out = {k: v for k, v in env.items() if k.startswith("PREFECT_") or k == "DO_NOT_TRACK"}
    for key, value in QUIET_PREFECT.items():
        out.setdefault(key, value)
    out.setdefault("PREFECT_API_URL", url)
    if "PREFECT_HOME" not in out:  # Prefect's home (its profiles, its local storage) is then ~/.prefect
        out["HOME (Prefect's home)"] = env.get("HOME", "")
    return out


def python_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def fingerprint(env: dict[str, str], root: Path | None = None) -> list[str]:
    """What the loaded code and settings came from: the project's modules (under `root`, default: where this module
    is), the installed packages, the Prefect profile."""

    root = root or Path(__file__).resolve().parent.parent.parent
    paths = [p for pkg in ("flows", "extractors", "transforms", "sinks") for p in sorted((root / pkg).rglob("*.py"))]
    paths.append(root / "pyproject.toml")
    paths += _installed(Path(sysconfig.get_paths()["purelib"]))
    home = Path(env.get("PREFECT_HOME") or Path(env.get("HOME") or Path.home()) / ".prefect").expanduser()
    paths.append(Path(env.get("PREFECT_PROFILES_PATH") or home / "profiles.toml"))
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append(f"{path}:{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            out.append(f"{path}:-")
    return out


def _installed(purelib: Path) -> list[Path]:
    """What says which packages are installed: their `.dist-info` folders and `.pth` files (an install, an upgrade or
    a removal changes them). Not the folder's own mtime: Python's first import of a top-level module creates
    `__pycache__` there, which changed nothing that was loaded."""
    try:
        names = sorted(os.listdir(purelib))
    except OSError:
        return [purelib]
    return [purelib / name for name in names if name.endswith((".dist-info", ".pth", ".egg-link"))]


def prefect_files(cwd: str) -> str | None:
    """A file in `cwd` from which Prefect would read settings at its import, if any (the runner loaded Prefect
    elsewhere, so the command must load it itself)."""
    for name in PREFECT_FILES:
        path = Path(cwd) / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if name == "prefect.toml" or (name == ".env" and "PREFECT_" in text) or "tool.prefect" in text:
            return str(path)
    return None


# Why a runner steps down (and declines the request that found out).
SERVER_GONE = "its Prefect server was stopped or replaced"
SERVER_SILENT = "its Prefect server does not answer"
CODE_CHANGED = "the code or the Prefect profile changed since it was loaded"
STALE = (SERVER_GONE, SERVER_SILENT, CODE_CHANGED)


class Loaded:
    """What the runner loaded, and with what: a request is served only when a child would equal a fresh process."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.url = url
        self.env = dict(os.environ)
        self.python = _python()
        self.prefect = effective_prefect_env(self.env, url)
        self.pyenv = python_env(self.env)
        self.code = fingerprint(self.env)

    def stale(self) -> str | None:
        """Why this runner should step down (its server replaced or gone, its code changed), if it should."""
        current = api.read_state(self.folder)
        if current is None or current.url != self.url:
            return SERVER_GONE
        if not any(api.healthy(self.url, HEALTH_SECONDS) for _ in range(HEALTH_TRIES)):
            return SERVER_SILENT  # a command of its own replaces it
        if fingerprint(self.env) != self.code:
            return CODE_CHANGED
        return None

    def decline(self, request: dict[str, Any]) -> str | None:
        """Why `request` must run in a process of its own, if it must."""
        env = request.get("env")
        if not isinstance(env, dict) or not isinstance(request.get("argv"), list):
            return "a malformed request"
        if request.get("python") != self.python:
            return "another Python interpreter or sys.path"
        if python_env(env) != self.pyenv:
            return "other PYTHON* environment variables"
        if effective_prefect_env(env, self.url) != self.prefect:
            return "other Prefect settings in the environment"
        if not enabled(env):
            return "TRANSCRIPTS_RUNNER=off"
        found = prefect_files(str(request.get("cwd", "")))
        if found is not None:
            return f"Prefect settings in {found}"
        return self.stale()


def _log(text: str) -> None:
    print(f"{datetime.now().astimezone().isoformat(timespec='seconds')} {text}", flush=True)


# Imported by a run after its start, each at a cost (fastapi alone, for Prefect's parameter serialization: 0.5 s):
# found by listing what a 200 MB load imported beyond the CLI and the ETL flow (which the runner's process imports
# itself, flows.cli.resident); the readers' parsers are for runs small enough to be read in the command's own process.
WARM = (
    "rich.console",
    "rich.progress",
    "fastapi.encoders",
    "graphviz",
    "prefect.flow_engine",
    "prefect.task_engine",
    "prefect.concurrency.sync",
    "prefect.concurrency.v1.sync",
    "prefect._internal.control_listener",
    "prefect.telemetry.run_telemetry",
    "anyio._backends._asyncio",
    "opentelemetry.metrics",
    "opentelemetry._logs",
    "httpx2",
    "http.cookies",
    "encodings.idna",
    "pyarrow.dataset",
    "genai_prices",
    "sqlite3",
    "multiprocessing.forkserver",
    "multiprocessing.popen_forkserver",
    "multiprocessing.synchronize",
    "multiprocessing.resource_tracker",
    "extractors.registry",  # then every module of every agent's package (`registry.modules()`, in `preload`)
    "extractors.bounded.json_array",
    "extractors.bounded.zip_member",
    "genai_prices.data",
    "prefect.utilities.visualization",
    "typer._click.decorators",
    "flows.etl.workers",
    "flows.service.server",
    "sinks.prices",
    "sinks.search",
)


def preload() -> None:
    """Import what a command through a flow imports, then end DuckDB's default connection: `import duckdb` opens one
    with a thread per core, and a child must not be forked from live DuckDB threads (duckdb-python#292)."""

    for name in (*WARM, *registry.modules()):
        with contextlib.suppress(ImportError):  # a module a newer Prefect no longer has costs only its time
            importlib.import_module(name)
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None:
        duckdb.default_connection().close()


def serve(folder: Path, url: str, load: Callable[[], Callable[[], object]]) -> int:
    """Serve commands for the managed server at `url` until stopped, stale, or the server is gone. `load` imports
    what the commands need, once Prefect's environment is set (Prefect reads it at its import), and returns the
    command: each request runs it in a child forked from this process (the CLI's main, reading `sys.argv`)."""

    folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + READY_SECONDS
    while True:  # another runner has the folder: it may be stepping down (stale) or still loading
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if ready(folder) or time.monotonic() > deadline:
                return 0  # it serves this folder
            time.sleep(0.2)
    os.environ["PREFECT_API_URL"] = url
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    loaded = Loaded(folder, url)
    command = load()
    preload()
    reason = loaded.stale()
    if reason is not None:
        _log(f"event=runner_exit reason={reason!r}")
        return 0
    return _Runner(folder, loaded, lock, command).loop()


RUNNER_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class _Runner:
    def __init__(self, folder: Path, loaded: Loaded, lock: int, command: Callable[[], object]) -> None:
        self.command = command
        self.folder = folder
        self.loaded = loaded
        self.lock = lock
        self.children: dict[int, socket.socket] = {}  # pid (= its process group) -> the caller's connection
        self.stopping: str | None = None
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        path = socket_path(folder)
        path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(str(path))
        finally:
            os.umask(old)
        self.listener.listen(64)

    def loop(self) -> int:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the wakeup fd
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        self._record()
        threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
        _log(f"event=runner_ready pid={os.getpid()} url={self.loaded.url} threads={threads}")
        try:
            while self.stopping is None or self.children:
                events = self.selector.select(CHECK_SECONDS)
                for key, _ in events:
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            while os.read(self.wake_r, 512):
                                pass
                        self._reap()
                    else:
                        self._caller_gone(key.data)
                self._reap()
                if not events and self.stopping is None:  # idle (a request checks for itself, in decline)
                    reason = self.loaded.stale()
                    if reason is not None:
                        self._stop_accepting(reason)
        finally:
            self._stop_accepting(self.stopping or "stopped")
        _log(f"event=runner_exit reason={self.stopping!r}")
        return 0

    def _stop(self, signum: int, _frame: object) -> None:
        self._stop_accepting(f"signal {signal.Signals(signum).name}")

    def _stop_accepting(self, reason: str) -> None:
        if self.stopping is not None:
            return
        self.stopping = reason
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(self.listener)
        self.listener.close()
        state = read_state(self.folder)
        if state is not None and state.get("pid") == os.getpid():  # a runner started after this one keeps its own
            with contextlib.suppress(FileNotFoundError):
                (self.folder / STATE).unlink()
        with contextlib.suppress(FileNotFoundError):
            socket_path(self.folder).unlink()
        os.close(self.lock)  # a fresh runner may start now, while the commands of this one end
        self.lock = -1

    def _record(self) -> None:
        record = {"pid": os.getpid(), "url": self.loaded.url, "started_at": datetime.now(UTC).isoformat()}
        tmp = self.folder / f"{STATE}.tmp"
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(self.folder / STATE)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds: list[int] = []
        try:
            conn.settimeout(CONNECT_SECONDS)
            if not _same_user(conn):
                self._answer(conn, {"declined": "another user"}, "event=declined reason='another user'")
                return
            request, fds = _receive(conn)
            if request is None:  # a readiness probe, or a caller that left
                conn.close()
                return
            self._serve(conn, request, fds)
        except OSError:
            conn.close()
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)  # the child has its own copies; the caller's pipe must not stay open here

    def _serve(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        name = str(request["argv"][0]) if request.get("argv") else "?"
        reason = self.loaded.decline(request) if len(fds) == 3 else "no stdin, stdout and stderr"
        if reason is not None:
            self._answer(conn, {"declined": reason}, f"event=declined command={name} reason={reason!r}")
            if reason in STALE:
                self._stop_accepting(reason)
            return
        pid = self._fork(conn, request, fds)
        self._answer(conn, {"pid": pid}, f"event=serving command={name} pid={pid}", close=False)
        conn.settimeout(None)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def _answer(self, conn: socket.socket, reply: dict[str, Any], line: str, close: bool = True) -> None:
        _log(line)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")
        if close:
            conn.close()

    def _fork(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        # Signals wait until the child has its own handlers: the runner's (stop, reap) must never run in a child,
        # where stopping would remove the runner's socket.
        signal.pthread_sigmask(signal.SIG_BLOCK, RUNNER_SIGNALS)
        with warnings.catch_warnings():
            # Python 3.12+ warns of forking with threads; the only one left is jemalloc's (pyarrow's allocator),
            # which is fork-safe (its own atfork handlers): DuckDB's are ended in preload().
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid != 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, RUNNER_SIGNALS)
        if pid == 0:
            code = 1
            try:
                self._child(conn, request, fds)  # the command exits the process itself (flows.cli.app._exit_now)
            except SystemExit as exc:  # ... or, with a thread of its own still running, by SystemExit
                code = exc.code if isinstance(exc.code, int) else 1
                _finish_as_an_interpreter_would()
            except BaseException as exc:  # before the command started: its working directory is gone, say
                with contextlib.suppress(Exception):
                    print(f"error: the command could not start in the command runner: {exc}", file=sys.stderr)
            finally:
                os._exit(code)  # never back into the runner's loop (its cleanup is the runner's, not the child's)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # the child does it too: whichever runs first, signals reach its group
        return pid

    def _child(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, RUNNER_SIGNALS)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        self.selector.close()
        for sock in (self.listener, conn, *self.children.values()):
            sock.close()
        for fd in (self.wake_r, self.wake_w, self.lock):
            if fd >= 0:
                os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})

        time.tzset()
        _streams(request.get("streams") or [])
        sys.argv = [str(request.get("argv0") or "transcripts"), *map(str, request["argv"])]
        # Click names the program after __main__'s package when it has one: here `python -m flows.cli.resident` would
        # make help and usage errors say `python -m flows.cli.transcripts`; without it, the name is argv[0]'s.
        sys.modules["__main__"].__package__ = None
        try:
            self.command()
        except Exception:  # the command started: an error it did not say in one line is a bug, shown as such
            traceback.print_exc()  # as a process of its own prints it, and with its exit code
            raise SystemExit(1) from None

    def _caller_gone(self, pid: int) -> None:
        """The caller's connection closed before its command ended: it was killed; its command goes with it."""
        conn = self.children.get(pid)
        if conn is None:
            return
        try:
            if conn.recv(4096, socket.MSG_DONTWAIT):
                return  # bytes a caller should not send: ignored (only the end of the connection means gone)
        except BlockingIOError:
            return
        except OSError:
            pass  # reset: gone
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _log(f"event=caller_gone pid={pid}")

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
            _log(f"event=done pid={pid} exit={code}")
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
            conn.close()


def _finish_as_an_interpreter_would() -> None:
    """Join the threads that are not daemons, run the exit handlers, flush: what `sys.exit` does at the top."""

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _same_user(conn: socket.socket) -> bool:
    """The caller runs as this user (Linux's SO_PEERCRED; elsewhere the 0700 state directory is the guard)."""

    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _receive(conn: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    chunks = [data]
    while data and not data.endswith(b"\n"):
        data = conn.recv(1 << 16)
        chunks.append(data)
    raw = b"".join(chunks)
    if not raw.endswith(b"\n"):
        return None, fds
    try:
        value = json.loads(raw)
    except ValueError:
        return None, fds
    return (value if isinstance(value, dict) else None), fds


def _streams(streams: list[Any]) -> None:
    """New sys.stdin/stdout/stderr on the caller's descriptors, encoded and buffered as the caller's own would be
    (line-buffered on a terminal; stderr always). Objects made before the fork still write to fds 0-2."""

    def spec(i: int) -> tuple[str | None, str | None]:
        enc, errors = (streams[i] if i < len(streams) and isinstance(streams[i], list) else [None, None])[:2]
        return (enc if isinstance(enc, str) else None), (errors if isinstance(errors, str) else None)

    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        enc, errors = spec(fd)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffered,
            encoding=enc,
            errors=errors,
            line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
