"""`transcripts watch [install|remove]`: load changed sessions within seconds of their write (OS file events), and
keep doing so across logout and reboot (a systemd user unit, a launchd agent: the machinery of `schedule install`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.cmd_data import check_old_corpus
from flows.cli.cmd_run import Home, Roots, Sources, keep_sample_apart
from flows.cli.cmd_schedule import say_installed, say_removed
from flows.cli.console import (
    FAILED,
    Config,
    DataDir,
    UsageError,
    Verbose,
    console,
    err,
    escape,
    fail,
    reported,
    route_logs,
    split_list,
)
from flows.etl import places, runlog
from flows.etl.settings import Settings, check_paths, load_settings
from flows.service import units

watch_app = typer.Typer(
    rich_markup_mode=None,
    help="Load changed sessions within seconds of their write (OS file events); install, remove.",
)

LOG = "watch.log"
LOG_BYTES = 5 * 1024 * 1024  # then it rolls over to watch.log.1: at most two such files


def log_path() -> Path:
    """Where a watch's log records go: `watch.log` beside the managed server's folder (and `dask.log`)."""
    return places.state_dir().parent / LOG


@watch_app.callback(invoke_without_command=True)
def watch(
    ctx: typer.Context,
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    config: Config = None,
    verbose: Verbose = 0,
) -> None:
    """Follow the agents' folders and load each changed session within seconds, until Ctrl-C or SIGTERM (exit 0).
    `watch install` keeps it running across logout and reboot."""
    if ctx.invoked_subcommand is None:
        _watch(source, home, root, data_dir, config, verbose)


def _settings(
    source: list[str] | None, home: Path | None, root: list[str] | None, data_dir: Path | None, config: Path | None
) -> Settings:
    settings = load_settings(data_dir=data_dir, home=home, sources=split_list(source), roots=root or [], config=config)
    check_paths(settings)
    keep_sample_apart(settings, False, write=True)  # the sample's data dir is never a real watch's
    check_old_corpus(settings, refuse=True)  # as `run`: never a second corpus beside an old one
    return settings


@reported("watch")
def _watch(
    source: list[str] | None,
    home: Path | None,
    root: list[str] | None,
    data_dir: Path | None,
    config: Path | None,
    verbose: int = 0,
) -> None:
    # here: the pipeline, pyarrow and DuckDB (~0.3 s) that `watch install` and `--help` do without
    from flows.etl.watch import Watch, describe, roots_of
    from flows.service.api import quiet_prefect

    settings = _settings(source, home, root, data_dir, config)
    quiet_prefect()  # a load imports Prefect (the steps are its tasks, called as plain functions): quietly
    import flows.etl.flow  # noqa: F401  # Prefect (~2.5 s) at start, before route_logs: its import resets logging

    route_logs(verbose)  # the records of the watch and of its loads go to watch.log, not the terminal (-v: both)
    logs = log_path()
    terminal = sys.stdout.isatty()

    def said(text: str) -> None:
        console.print(text, soft_wrap=True, highlight=False, markup=False)

    def problem(text: str) -> None:
        err.print(f"[yellow]watch:[/yellow] {escape(text)}", soft_wrap=True, highlight=False)

    watcher = Watch(settings, on_load=(lambda load: said(describe(load))) if terminal else None, on_problem=problem)
    if terminal:
        watched = sorted({r.agent for r in roots_of(settings) if r.watched})
        checked = sorted({r.agent for r in roots_of(settings) if not r.watched})
        also = f"; {', '.join(checked)} by the check only (a root that holds the home)" if checked else ""
        said(
            f"Watching {', '.join(watched) or 'no agent'} (every {settings.watch_check_minutes:g} min a check of "
            f"all{also}) into {settings.data_dir}. Log: {logs}. Ctrl-C stops."
        )
    with runlog.log_to(logs, max_bytes=LOG_BYTES):
        stopped = watcher.serve()
    ending = "; the load in progress was abandoned (nothing of it is lost or half-written; the next start finishes it)"
    said(f"Stopped watching ({stopped}){ending if watcher.abandoned else ''}.")


Manager = Annotated[
    str | None,
    typer.Option(
        "--manager",
        metavar="systemd|launchd",
        help="With --print: the unit for this service manager (default: this system's).",
    ),
]


@watch_app.command("install")
@reported("watch install")
def install(
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    config: Config = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the unit (or launchd plist) instead of writing it.")
    ] = False,
    manager: Manager = None,
) -> None:
    """Write and enable what keeps `transcripts watch` running across logout and reboot: a systemd user unit
    (Linux), a launchd agent (macOS). Without a user service manager here, it prints the commands to run (exit 0)."""

    settings = _settings(source, home, root, data_dir, config)
    kind = manager or ("launchd" if sys.platform == "darwin" else "systemd")
    if kind not in ("systemd", "launchd"):
        raise UsageError(f"--manager must be systemd or launchd, got {kind!r}")
    if manager and not print_only:
        raise UsageError("--manager goes with --print (install writes this system's own)")
    command = [*units.executable(), "watch", "--data-dir", str(settings.data_dir)]
    if home:
        command += ["--home", str(home.expanduser().absolute())]
    for agent in split_list(source):
        command += ["--source", agent]
    for item in root or []:
        command += ["--root", item]
    if config:
        command += ["--config", str(config.expanduser().absolute())]
    env = units.kept_env(os.environ)
    if print_only:
        if kind == "launchd":
            sys.stdout.write(units.launchd_plist(command, env, log_path().parent, units.WATCH).decode())
        else:
            sys.stdout.write(units.systemd_unit(command, env, units.WATCH))
        return
    try:
        if kind == "launchd":
            outcome = units.install_launchd(command, env, log_path().parent, service=units.WATCH)
        else:
            outcome = units.install_systemd(command, env, service=units.WATCH)
    except units.UnitError as exc:
        raise fail(f"the unit is written but could not be enabled: {exc}", FAILED) from None
    say_installed(outcome, command, systemd=kind == "systemd")


@watch_app.command("remove")
@reported("watch remove")
def remove() -> None:
    """Stop, disable and remove the unit (or launchd agent) that `watch install` wrote."""

    try:
        if sys.platform == "darwin":
            outcome = units.remove_launchd(service=units.WATCH)
        else:
            outcome = units.remove_systemd(service=units.WATCH)
    except units.UnitError as exc:
        raise fail(f"the unit could not be disabled: {exc}", FAILED) from None
    say_removed(outcome)


def register(app: typer.Typer) -> None:
    app.add_typer(watch_app, name="watch")
