"""A Prefect API for one command, that dies with it.

With no `PREFECT_API_URL`, Prefect starts a temporary server as a child process, and that child outlives a run
killed with SIGKILL or SIGTERM (STACK.md). This starts the same server (`prefect server start`, API only) as a
child that the kernel stops when this process dies (Linux `PR_SET_PDEATHSIG`), and stops it on every normal exit.
With `PREFECT_API_URL` configured (environment or Prefect profile), that server is used and nothing is started.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO

STARTUP_SECONDS = 120.0  # a fresh PREFECT_HOME runs migrations first (~12 s here, more on a loaded machine)


class ServerError(RuntimeError):
    """The temporary Prefect API did not come up."""


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the parent dies, however it dies (Linux only)."""
    os.setpgrp()  # a terminal's Ctrl-C goes to us, and we stop the server ourselves
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def prefect_api() -> Iterator[str]:
    """Yield the URL of a Prefect API: the configured one, or a private temporary server stopped on exit."""
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_UI_ENABLED": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    with tempfile.TemporaryFile() as log:
        yield from _serve(url, port, env, log)


def _serve(url: str, port: int, env: dict[str, str], log: IO[bytes]) -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-services",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                tail = log.read()[-2000:].decode("utf-8", "replace")
                raise ServerError(f"the temporary Prefect server did not start (exit {proc.returncode}): {tail}")
            time.sleep(0.2)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so that `finally` blocks (server stop, lock release) run."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
