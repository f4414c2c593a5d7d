"""`transcripts schedule`: serve the nightly run on a cron through the Prefect server (the managed one by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cmd_run import Home, Roots, Sources
from flows.console import Config, DataDir, console, reported, split_list


def schedule(
    cron: Annotated[
        str | None, typer.Option("--cron", metavar="EXPR", help="Cron expression (default: 0 3 * * *).")
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", metavar="TZ", help="IANA time zone, e.g. Europe/Berlin (default: the server's)."),
    ] = None,
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Serve the nightly run on a cron through the Prefect server (Ctrl-C stops serving, not the schedule)."""
    _schedule(cron, timezone, source, home, root, data_dir, config)


@reported("schedule")
def _schedule(
    cron: str | None,
    timezone: str | None,
    source: list[str] | None,
    home: Path | None,
    root: list[str] | None,
    data_dir: Path | None,
    config: Path | None,
) -> None:
    import dataclasses

    from flows.cmd_run import _quiet_prefect
    from flows.schedule import serve_arguments, validate_cron
    from flows.server import prefect_api
    from flows.settings import check_paths, check_schedule, load_settings

    options: dict[str, Any] = {
        "data_dir": data_dir,
        "home": home,
        "sources": split_list(source),
        "roots": root or [],
        "config": config,
    }
    settings = load_settings(**options)
    origins = dict(settings.origins)
    if cron:
        origins["cron"] = "--cron"
    if timezone:
        origins["timezone"] = "--timezone"
    settings = dataclasses.replace(
        settings, schedule_cron=cron or settings.schedule_cron, schedule_timezone=timezone or settings.schedule_timezone
    )
    check_schedule(settings.schedule_cron, settings.schedule_timezone, origins)
    check_paths(settings)
    validate_cron(settings.schedule_cron, origins.get("cron", "default"))
    options["data_dir"] = settings.data_dir
    _quiet_prefect()
    with prefect_api() as api:
        from flows import etl

        where = f" ({settings.schedule_timezone})" if settings.schedule_timezone else ""
        console.print(
            f"Serving the nightly run at '{settings.schedule_cron}'{where} into {settings.data_dir}; "
            f"runs show in the Prefect UI at {api.ui}. Ctrl-C stops serving.",
            soft_wrap=True,
            highlight=False,
        )
        etl.etl_flow.serve(**serve_arguments(settings, options))


def register(app: typer.Typer) -> None:
    app.command()(schedule)
