"""The nightly schedule: a deployment of the ETL flow with a cron, served through the Prefect server."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from flows.etl.settings import Settings, SettingsError

DEPLOYMENT = "nightly"
FLOW = "transcripts-etl"  # flows.etl.flow.etl_flow's name (not imported here: that loads Prefect)


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
    # here: Prefect (~2 s), which `schedule status` and `--help` do without
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
        # a run is started as `python -m prefect.engine` importing `flows.etl.flow`, wherever serving was started from
        "entrypoint_type": EntrypointType.MODULE_PATH,
    }


# --- the deployment as the Prefect API sees it (plain HTTP: `schedule status` does not load Prefect) -----------------

API_SECONDS = 10.0


def _call(api_url: str, method: str, path: str, body: Any = None) -> Any:
    """One bounded call on the Prefect REST API; its JSON answer (None for an empty one)."""
    # here: ~15 ms (http.client, ssl), for the API calls only
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
