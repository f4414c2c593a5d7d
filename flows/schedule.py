"""The nightly schedule: a deployment of the ETL flow with a cron, served through the Prefect server."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from flows.settings import Settings, SettingsError

DEPLOYMENT = "nightly"
FLOW = "transcripts-etl"  # flows.etl.etl_flow's name (not imported here: that loads Prefect)


def _croniter() -> ModuleType:
    """Prefect's vendored croniter, loaded from its file without importing the `prefect` package: importing
    Prefect reads its settings once, and the command has not yet pointed PREFECT_API_URL at its server (a
    Prefect loaded before that serves on a temporary server of its own, where nothing is ever scheduled)."""
    name = "transcripts_vendored_croniter"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("prefect")  # a top-level spec: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError("Prefect is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "_vendor" / "croniter" / "croniter.py"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise SettingsError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def validate_cron(cron: str, where: str) -> None:
    """Refuse a cron expression Prefect would refuse, before anything is started (Prefect's own croniter)."""
    if not _croniter().croniter.is_valid(cron) or any(c.casefold() in ("r", "h") for c in cron.split()):
        raise SettingsError(
            f"invalid cron expression {cron!r} ({where}): five fields, minute hour day month weekday, "
            'e.g. "0 3 * * *" (3:00 every night) or "30 2 * * 1-5"'
        )


def serve_arguments(settings: Settings, options: dict[str, Any], interval: float | None = None) -> dict[str, Any]:
    """The keyword arguments of `etl_flow.serve` for the configured cron and time zone (`interval`, in seconds,
    replaces the cron: the tests' schedule every few seconds, through the same deployment)."""
    from prefect.schedules import Cron, Interval
    from prefect.types.entrypoint import EntrypointType

    schedule = (
        Interval(timedelta(seconds=interval))
        if interval
        else Cron(settings.schedule_cron, timezone=settings.schedule_timezone)
    )
    return {
        "name": DEPLOYMENT,
        "schedules": [schedule],
        "parameters": {
            "options": {
                k: (str(v) if v is not None and not isinstance(v, list | float) else v) for k, v in options.items()
            }
        },
        "pause_on_shutdown": False,  # stopping the serving process must not silently pause the nightly schedule
        "description": "Nightly load of agent transcripts into Parquet and DuckDB.",
        "tags": ["transcripts"],
        "print_starting_message": False,  # the command says where the UI is, in one line
        # a run is started as `python -m prefect.engine` importing `flows.etl`, wherever serving was started from
        "entrypoint_type": EntrypointType.MODULE_PATH,
    }


def _one_line_warnings() -> None:
    """Prefect's warnings while serving (its event websocket dropped while the managed server restarts, say) as
    one line each: the exception's type and message, not its traceback. Errors keep theirs (a bug to report).

    Done where every record is made, not by a filter on the handlers: Prefect may set its handlers up again while
    serving, and a handler without the filter printed a dropped websocket's traceback (seen once in CI)."""
    import logging

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
    import os
    import signal

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
            import traceback

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
        from flows.server import ServerError

        raise ServerError(f"serving ended with exit code {code} (its error is above)")
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
        import signal

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
        import asyncio
        import signal
        import threading
        import time

        from prefect.runner import Runner

        from flows import etl, server

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
        the same address (flows.server._port_for), so that the runs keep coming."""
        import os
        import signal
        import time

        from flows import server

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


# --- the deployment as the Prefect API sees it (plain HTTP: `schedule status` does not load Prefect) -----------------

API_SECONDS = 10.0


def _call(api_url: str, method: str, path: str, body: Any = None) -> Any:
    """One bounded call on the Prefect REST API; its JSON answer (None for an empty one)."""
    import json
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{api_url.rstrip('/')}/{path.lstrip('/')}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=API_SECONDS) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def find_deployment(api_url: str) -> dict[str, Any] | None:
    """The `transcripts-etl/nightly` deployment, if the API has it."""
    found = _call(
        api_url,
        "POST",
        "deployments/filter",
        {"flows": {"name": {"any_": [FLOW]}}, "deployments": {"name": {"any_": [DEPLOYMENT]}}, "limit": 1},
    )
    return found[0] if isinstance(found, list) and found else None


def flow_runs(api_url: str, deployment_id: str, *, scheduled: bool, limit: int) -> list[dict[str, Any]]:
    """The deployment's next scheduled runs (soonest first), or its other runs (latest first)."""
    from datetime import UTC, datetime

    runs: dict[str, Any] = {"state": {"type": {"any_": ["SCHEDULED"]} if scheduled else {"not_any_": ["SCHEDULED"]}}}
    if scheduled:  # not the late ones, waiting for a serving process
        runs["expected_start_time"] = {"after_": datetime.now(UTC).isoformat()}
    found = _call(
        api_url,
        "POST",
        "flow_runs/filter",
        {
            "deployments": {"id": {"any_": [deployment_id]}},
            "flow_runs": runs,
            "sort": "EXPECTED_START_TIME_ASC" if scheduled else "EXPECTED_START_TIME_DESC",
            "limit": limit,
        },
    )
    return found if isinstance(found, list) else []


def delete_deployment(api_url: str, deployment_id: str) -> None:
    _call(api_url, "DELETE", f"deployments/{deployment_id}")


def describe_schedule(deployment: dict[str, Any]) -> str:
    """`0 3 * * * (Europe/Berlin)` or `every 5 s`, from the deployment's schedules."""
    parts = []
    for item in deployment.get("schedules") or []:
        schedule = item.get("schedule") or {}
        if schedule.get("cron"):
            parts.append(f"{schedule['cron']} ({schedule.get('timezone') or 'UTC'})")
        elif schedule.get("interval") is not None:
            parts.append(f"every {float(schedule['interval']):g} s")
        if item.get("active") is False:
            parts[-1] += " (paused)"
    return ", ".join(parts) or "no schedule"
