"""`transcripts report`: the HTML report with charts, a thin layer over `sinks.report` (messages and exit codes)."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from flows.cli.cmd_publish import TeamUrl, team_connection
from flows.cli.console import console, err
from flows.etl.settings import SettingsError, load_settings


def machine_timezone(env: dict[str, str] | None = None) -> str:
    """The machine's IANA zone name: `TZ`, else what /etc/localtime links to, else /etc/timezone, else UTC."""
    env = dict(os.environ) if env is None else env
    candidates = [env.get("TZ", "").lstrip(":")]
    try:
        target = os.readlink("/etc/localtime")
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    except OSError:
        pass
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    for name in candidates:
        if name and _valid_zone(name):
            return name
    return "UTC"


def _valid_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


class BinChoice(StrEnum):
    """`--bin`: what one bar of a time chart covers; `auto` picks the finest with at most 120 bars."""

    AUTO = "auto"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


def report(
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    since: Annotated[str | None, typer.Option("--since", help="First day to show, YYYY-MM-DD (in --timezone).")] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            "--timezone",
            help="IANA zone whose days group the figures (default: the timezone setting, else the machine's).",
        ),
    ] = None,
    bin_: Annotated[
        BinChoice,
        typer.Option(
            "--bin",
            help="What one bar of the time charts covers first: a day, an ISO week, a calendar month, or auto (the "
            "finest with at most 120 bars over the data's span); the page switches between them.",
            case_sensitive=False,
        ),
    ] = BinChoice.AUTO,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the corpus lives (default: data/).")
    ] = None,
    team: TeamUrl = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
) -> None:
    """Write one self-contained HTML report with charts (viewable offline)."""
    # here: DuckDB, pyarrow and the chart library (~0.4 s) that `--help` and `status` do without
    from sinks.report import Bin, ReportError, write, write_from

    try:
        settings = load_settings(data_dir=data_dir, config=config)
    except SettingsError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    zone = timezone or settings.timezone or machine_timezone()
    if not _valid_zone(zone):
        err.print(f"[red]error:[/red] unknown time zone {zone!r} for --timezone (an IANA name, e.g. Europe/Berlin)")
        raise typer.Exit(2)
    first: date | None = None
    if since is not None:
        try:
            first = date.fromisoformat(since)
        except ValueError:
            err.print(f"[red]error:[/red] --since {since!r} is not a date (YYYY-MM-DD)")
            raise typer.Exit(2) from None
    now = datetime.now(UTC).astimezone(ZoneInfo(zone))
    try:
        unit = None if bin_ is BinChoice.AUTO else Bin(bin_.value)
        if team is not None:
            with team_connection(team, settings, zone) as (con, _):
                done = write_from(con, out, timezone=zone, since=first, now=now, unit=unit)
        else:
            done = write(settings.data_dir, out, timezone=zone, since=first, now=now, unit=unit)
    except ReportError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    except OSError as exc:
        where = getattr(exc, "filename", None)
        err.print(f"[red]report failed:[/red] {exc.strerror or exc}{f' ({where})' if where else ''}")
        raise typer.Exit(1) from None
    s = done.summary
    unpriced = int(s["unpriced_responses"] or 0)
    how = "" if not done.auto else ", chosen from the span"
    console.print(
        f"Wrote {out} ({s['sessions']} sessions, {len([c for c in done.charts if c.rows])} charts; days in {zone}; "
        f"bars per {done.bin.value}{how}"
        + (f"; {unpriced} of {s['usage_responses']} responses unpriced" if unpriced else "")
        + ")."
    )


def register(app: typer.Typer) -> None:
    app.command(name="report")(report)
