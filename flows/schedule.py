"""The nightly schedule: serve the ETL flow with a cron through a running Prefect server."""

from __future__ import annotations

from typing import Any

from flows.settings import Settings

NO_SERVER = (
    "Schedules need a running Prefect server (a temporary one cannot hold a schedule). Start one in another "
    "terminal with `uv run prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api` and run "
    "`transcripts schedule` again. Without a long-lived process, use the systemd timer or cron entry in the README."
)


def serve_arguments(settings: Settings, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `etl_flow.serve` for the configured cron and time zone."""
    from prefect.schedules import Cron

    return {
        "name": "nightly",
        "schedules": [Cron(settings.schedule_cron, timezone=settings.schedule_timezone)],
        "parameters": {
            "options": {
                k: (str(v) if v is not None and not isinstance(v, list | float) else v) for k, v in options.items()
            }
        },
        "pause_on_shutdown": False,  # stopping the serving process must not silently pause the nightly schedule
        "description": "Nightly load of agent transcripts into Parquet and DuckDB.",
        "tags": ["transcripts"],
    }


def configured_api() -> str | None:
    from prefect.settings import PREFECT_API_URL

    value = PREFECT_API_URL.value()
    return str(value) if value else None
