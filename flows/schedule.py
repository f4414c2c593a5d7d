"""The nightly schedule: serve the ETL flow with a cron through the Prefect server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flows.settings import Settings, SettingsError


def validate_cron(cron: str, where: str) -> None:
    """Refuse a cron expression Prefect would refuse, before anything is started (Prefect's own croniter)."""
    import importlib

    is_valid: Callable[[str], bool] = importlib.import_module("prefect._vendor.croniter").croniter.is_valid
    if not is_valid(cron) or any(c.casefold() in ("r", "h") for c in cron.split()):
        raise SettingsError(
            f"invalid cron expression {cron!r} ({where}): five fields, minute hour day month weekday, "
            'e.g. "0 3 * * *" (3:00 every night) or "30 2 * * 1-5"'
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
