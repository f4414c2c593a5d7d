"""`transcripts schedule [install|status|remove]`: serve the nightly run on a cron through the Prefect server (the
managed one by default), and keep it served across logout and reboot (a systemd user unit, a launchd agent)."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.cmd_data import check_old_corpus
from flows.cli.cmd_run import Home, Roots, Sources
from flows.cli.console import FAILED, Config, DataDir, Json, console, fail, print_json, reported, split_list
from flows.etl.schedule import delete_deployment, describe_schedule, find_deployment, flow_runs, validate_cron
from flows.etl.settings import check_paths, check_schedule, load_settings
from flows.service import server, units
from flows.service.api import quiet_prefect
from flows.service.server import prefect_api
from flows.service.serving import Serving, serve_in_own_group
from sinks import ledger

schedule_app = typer.Typer(
    rich_markup_mode=None,
    help="Serve the nightly run on a cron through the Prefect server; install, status, remove.",
)

Cron = Annotated[str | None, typer.Option("--cron", metavar="EXPR", help="Cron expression (default: 0 3 * * *).")]
Timezone = Annotated[
    str | None,
    typer.Option("--timezone", metavar="TZ", help="IANA time zone, e.g. Europe/Berlin (default: the server's)."),
]
# Hidden: a schedule every N seconds instead of the cron, through the same deployment (the tests' fast schedule).
Interval = Annotated[float | None, typer.Option("--interval", hidden=True, min=1)]


@schedule_app.callback(invoke_without_command=True)
def schedule(
    ctx: typer.Context,
    cron: Cron = None,
    timezone: Timezone = None,
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    config: Config = None,
    interval: Interval = None,
) -> None:
    """Serve the nightly run on a cron through the Prefect server until Ctrl-C or SIGTERM (exit 0; the deployment
    and its schedule stay). `schedule install` keeps it served across logout and reboot."""
    if ctx.invoked_subcommand is None:
        _serve(cron, timezone, source, home, root, data_dir, config, interval)


def _settings(
    cron: str | None,
    timezone: str | None,
    source: list[str] | None,
    home: Path | None,
    root: list[str] | None,
    data_dir: Path | None,
    config: Path | None,
) -> tuple[Any, dict[str, Any]]:
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
    check_old_corpus(settings, refuse=True)  # a nightly run must not start a second corpus beside an old one
    validate_cron(settings.schedule_cron, origins.get("cron", "default"))
    options["data_dir"] = settings.data_dir
    return settings, options


@reported("schedule")
def _serve(
    cron: str | None,
    timezone: str | None,
    source: list[str] | None,
    home: Path | None,
    root: list[str] | None,
    data_dir: Path | None,
    config: Path | None,
    interval: float | None,
) -> None:
    settings, options = _settings(cron, timezone, source, home, root, data_dir, config)
    quiet_prefect()
    with prefect_api() as api:
        where = f" ({settings.schedule_timezone})" if settings.schedule_timezone else ""
        when = f"every {interval:g} s" if interval else f"at '{settings.schedule_cron}'{where}"
        console.print(
            f"Serving the nightly run {when} into {settings.data_dir}; runs and the schedule show in the Prefect UI "
            f"at {api.ui}. Ctrl-C stops serving.",
            soft_wrap=True,
            highlight=False,
        )
        sys.stdout.flush()
        serving = Serving(settings, options, api.url, api.source == "managed")
        stopped = serve_in_own_group(serving, interval)
    console.print(
        f"Stopped serving ({stopped}); the schedule stays on the Prefect server and its runs wait until "
        "`transcripts schedule` serves again.",
        soft_wrap=True,
        highlight=False,
    )


@schedule_app.command("install")
@reported("schedule install")
def install(
    cron: Cron = None,
    timezone: Timezone = None,
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Write and enable what serves the schedule across logout and reboot: a systemd user unit (Linux), a
    launchd agent (macOS). Without a user service manager here, it prints the commands to run (exit 0)."""

    settings, _options = _settings(cron, timezone, source, home, root, data_dir, config)
    command = [*units.executable(), "schedule", "--cron", settings.schedule_cron]
    if settings.schedule_timezone:
        command += ["--timezone", settings.schedule_timezone]
    command += ["--data-dir", str(settings.data_dir)]
    if home:
        command += ["--home", str(home.expanduser().absolute())]
    for agent in split_list(source):
        command += ["--source", agent]
    for item in root or []:
        command += ["--root", item]
    if config:
        command += ["--config", str(config.expanduser().absolute())]
    env = units.kept_env(os.environ)
    try:
        if sys.platform == "darwin":
            outcome = units.install_launchd(command, env, server.state_dir())
        else:
            outcome = units.install_systemd(command, env)
    except units.UnitError as exc:
        raise fail(f"the unit is written but could not be enabled: {exc}", FAILED) from None
    say_installed(outcome, command, systemd=sys.platform != "darwin")


def say_installed(outcome: units.Outcome, command: list[str], *, systemd: bool) -> None:
    """What `schedule install` and `watch install` print: the files written, the command the unit runs, what was
    enabled or what to run by hand, and for a systemd user unit the lingering it needs after logout."""
    for path in outcome.files:
        console.print(f"Wrote {path}", soft_wrap=True, highlight=False)
    console.print(f"It runs: {shlex.join(command)}", soft_wrap=True, highlight=False, markup=False)
    if outcome.ran:
        console.print("Enabled and started it (" + "; ".join(" ".join(c) for c in outcome.ran) + ").", highlight=False)
    if outcome.manual:
        console.print(f"Not enabled: {outcome.why_manual}. Run, in your user session:", soft_wrap=True)
        for cmd in outcome.manual:
            console.print(f"  {' '.join(cmd)}", soft_wrap=True, highlight=False)
    if systemd:
        user = os.environ.get("USER") or "$USER"
        console.print(
            "A user unit runs only while you are logged in unless lingering is on: "
            f"`loginctl enable-linger {user}` keeps it running after logout and starts it at boot.",
            soft_wrap=True,
            highlight=False,
        )


def say_removed(outcome: units.Outcome) -> None:
    """What `schedule remove` and `watch remove` print: the files removed, or what to run by hand."""
    for path in outcome.files:
        console.print(f"Removed {path}", soft_wrap=True, highlight=False)
    if outcome.manual:
        console.print(f"No service manager answers ({outcome.why_manual}); run, in your user session:", soft_wrap=True)
        for cmd in outcome.manual:
            console.print(f"  {' '.join(cmd)}", soft_wrap=True, highlight=False)
    if not outcome.files:
        console.print("No unit was installed.", highlight=False)


@schedule_app.command("status")
@reported("schedule status")
def status(data_dir: DataDir = None, config: Config = None, as_json: Json = False) -> None:
    """The schedule, its next run and its last runs (Prefect API and the ledger); exit 1 when nothing is
    scheduled."""

    settings = load_settings(data_dir=data_dir, config=config)
    unit = units.installed()
    doc: dict[str, Any] = {"unit": str(unit) if unit else None, "unit_state": units.active() if unit else None}
    mine = server.configured()
    api = mine if mine is not None else server.read_state()
    deployment = None
    if api is None or not server.healthy(api.url):
        doc["api"] = None
    else:
        doc["api"] = api.url
        deployment = find_deployment(api.url)
    if deployment is not None:
        upcoming = flow_runs(api.url, str(deployment["id"]), scheduled=True, limit=1) if api else []
        past = flow_runs(api.url, str(deployment["id"]), scheduled=False, limit=5) if api else []
        doc["deployment"] = {
            "id": deployment["id"],
            "schedule": describe_schedule(deployment),
            "next_run": upcoming[0].get("expected_start_time") if upcoming else None,
            "last_runs": [
                {
                    "flow_run_id": r.get("id"),
                    "start_time": r.get("start_time") or r.get("expected_start_time"),
                    "state": (r.get("state") or {}).get("type"),
                }
                for r in past
            ],
        }
    else:
        doc["deployment"] = None
    doc["ledger"] = [
        {
            "run_id": r.get("run_id"),
            "flow_run_id": (r.get("counts") or {}).get("flow_run_id"),
            "started_at": r.get("started_at"),
            "outcome": r.get("outcome"),
        }
        for r in ledger.runs(settings.data_dir)[:5]
    ]
    if as_json:
        print_json(doc)
    else:
        _print_status(doc)
    if doc["deployment"] is None and unit is None:
        raise typer.Exit(FAILED)


def _print_status(doc: dict[str, Any]) -> None:
    def say(text: str) -> None:
        console.print(text, soft_wrap=True, highlight=False)

    if doc["unit"]:
        state = f" ({doc['unit_state']})" if doc["unit_state"] else ""
        say(f"Unit: {doc['unit']}{state}")
    else:
        say("Unit: none (`transcripts schedule install` writes one)")
    if doc["api"] is None:
        say("Prefect API: not running (the next run and Prefect's view of past runs are unknown)")
    dep = doc["deployment"]
    if dep is not None:
        say(f"Schedule: {dep['schedule']} (deployment {dep['id']} at {doc['api']})")
        say(f"Next run: {dep['next_run'] or 'none scheduled'}")
        for run in dep["last_runs"]:
            say(f"  Prefect run {run['flow_run_id']}: {run['state']} (started {run['start_time']})")
    elif doc["api"] is not None:
        say(f"Schedule: none on {doc['api']}")
    if doc["ledger"]:
        say("Last runs in the ledger:")
        for run in doc["ledger"]:
            say(f"  {run['started_at']} {run['outcome']} (run {run['run_id']}, Prefect run {run['flow_run_id']})")
    else:
        say("Ledger: no runs yet")


@schedule_app.command("remove")
@reported("schedule remove")
def remove() -> None:
    """Disable and remove the unit (or agent) and delete the deployment from the Prefect server."""

    try:
        outcome = units.remove_launchd() if sys.platform == "darwin" else units.remove_systemd()
    except units.UnitError as exc:
        raise fail(f"the unit could not be disabled: {exc}", FAILED) from None
    say_removed(outcome)
    with server.prefect_api() as api:
        deployment = find_deployment(api.url)
        if deployment is None:
            console.print(f"No schedule on {api.ui}.", soft_wrap=True, highlight=False)
        else:
            delete_deployment(api.url, str(deployment["id"]))
            console.print(f"Deleted the schedule from {api.ui}.", soft_wrap=True, highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
