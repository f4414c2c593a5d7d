"""Serving the nightly schedule (`transcripts schedule`): the deployment of the ETL flow (flows.etl.schedule) served
by a Prefect runner in a process of its own, with the managed server kept up while it serves."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

from flows.etl.schedule import DEPLOYMENT, serve_arguments
from flows.etl.settings import Settings
from flows.service import server


def _one_line_warnings() -> None:
    """Prefect's warnings while serving (its event websocket dropped while the managed server restarts, say) as
    one line each: the exception's type and message, not its traceback. Errors keep theirs (a bug to report).

    Done where every record is made, not by a filter on the handlers: Prefect may set its handlers up again while
    serving, and a handler without the filter printed a dropped websocket's traceback (seen once in CI)."""

    make = logging.getLogRecordFactory()

    def one_line(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        if (
            record.name.startswith("prefect")
            and record.levelno < logging.ERROR
            and record.exc_info
            and record.exc_info[1] is not None
        ):
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return record

    logging.setLogRecordFactory(one_line)


def serve_in_own_group(serving: Serving, interval: float | None) -> str:
    """Serve in a child process of a session of its own, and return the signal that stopped it (the name).

    A terminal's Ctrl-C reaches the whole foreground process group, and Prefect starts each run in a process of
    that group: interrupted while it imports, a run prints a traceback of its own. Here the terminal's signals
    reach this process only, which passes them on as SIGTERM: serving stops, and stops the run it has in flight
    the way Prefect cancels one (the ledger records it as interrupted)."""

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, serving._on_signal)  # stopped while still loading Prefect: quietly
            serving.serve(interval)
        except (KeyboardInterrupt, SystemExit):
            pass
        except BaseException:
            code = 1

            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    got: list[str] = []

    def forward(signum: int, _frame: object) -> None:
        got.append(signal.Signals(signum).name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if not got and code != 0:
        raise server.ServerError(f"serving ended with exit code {code} (its error is above)")
    return got[0] if got else "ended"


class Serving:
    """One `transcripts schedule`: the deployment served until a signal ends it; the managed server kept up."""

    def __init__(self, settings: Settings, options: dict[str, Any], api_url: str, managed: bool) -> None:
        self.settings = settings
        self.options = options
        self.api_url = api_url
        self.managed = managed
        self.stopped: str | None = None  # the signal that ended serving
        self.runner: Any = None

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopped = signal.Signals(signum).name
        runner = self.runner
        if runner is not None and runner.started and not runner.stopping and runner._loop is not None:
            runner.stopping = True
            runner.execute_in_background(runner.astop)  # cancels a run in flight (the ledger says interrupted)
        else:
            raise KeyboardInterrupt  # before serving began: nothing to stop gracefully

    def serve(self, interval: float | None = None, restart_seconds: float = 5.0) -> str:
        """Serve until SIGINT or SIGTERM; returns the signal's name. A lost API (the managed server replaced) is
        waited for and served again: the deployment is created again on it if it is new."""
        # here: in the serving process only (~50 ms)
        import asyncio

        # Here, in the serving process, after the command set Prefect's settings (it reads them once, at its
        # import) and forked: `transcripts schedule --help` and `status` do without Prefect (~2 s).
        from prefect.runner import Runner

        from flows.etl import flow as etl

        _one_line_warnings()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        keeper = threading.Thread(target=self._keep_server, daemon=True, name="transcripts-keep-server")
        keeper.start()
        try:
            while self.stopped is None:
                self.runner = Runner(name=DEPLOYMENT, pause_on_shutdown=False, limit=1)  # one run at a time
                arguments = serve_arguments(self.settings, self.options, interval)
                del arguments["print_starting_message"], arguments["pause_on_shutdown"]
                try:
                    self.runner.add_flow(etl.etl_flow, **arguments)
                    asyncio.run(self.runner.start())
                    signal.signal(signal.SIGTERM, self._on_signal)  # Runner.start replaced it with its own
                except (KeyboardInterrupt, SystemExit):
                    self.stopped = self.stopped or "SIGINT"
                except Exception as exc:  # the API went away (the server restarted): serve again once it is back
                    if self.stopped is not None:
                        break
                    if server.healthy(self.api_url):
                        raise  # not a lost API: a bug, reported as one
                    print(f"lost the Prefect API ({type(exc).__name__}); serving again", file=sys.stderr, flush=True)
                    deadline = time.monotonic() + server.STARTUP_SECONDS
                    while not server.healthy(self.api_url) and self.stopped is None and time.monotonic() < deadline:
                        time.sleep(restart_seconds / 5)
                    continue
                if self.stopped is None:  # the runner ended by itself (its own SIGTERM handling)
                    self.stopped = "SIGTERM"
        except KeyboardInterrupt:
            self.stopped = self.stopped or "SIGINT"
        return self.stopped or "SIGINT"

    def _keep_server(self, period: float = 5.0) -> None:
        """A serving schedule keeps the managed server up: one that died or was stopped is started again, on
        the same address (flows.service.server._port_for), so that the runs keep coming."""

        parent = os.getppid()
        while self.stopped is None:
            time.sleep(period)
            if os.getppid() != parent:  # the command that forked this serving process is gone (SIGKILL)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if self.managed and self.stopped is None and not server.healthy(self.api_url):
                try:
                    api = server.start()
                except server.ServerError as exc:
                    print(f"the managed Prefect server could not be started again: {exc}", file=sys.stderr)
                    continue
                if api.url != self.api_url:
                    print(
                        f"the managed Prefect server came back at {api.url}, not {self.api_url} (its port was "
                        "taken): restart `transcripts schedule`",
                        file=sys.stderr,
                    )
