"""`transcripts server status|start|stop`: the local Prefect server this tool manages (flows.service.server)."""

from __future__ import annotations

import os

import typer

from flows.cli.console import FAILED, Json, console, print_json, reported
from flows.service import runner, server

server_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="The local Prefect server runs go through (and its UI)."
)


def _describe(as_json: bool, state: str, url: str | None, pid: int | None, source: str, where: str) -> None:
    runner = _runner(source)
    if as_json:
        print_json(
            {
                "state": state,
                "api_url": url,
                "ui_url": url.removesuffix("/api") if url else None,
                "pid": pid,
                "source": source,
                "state_dir": where,
                "runner": runner,
            }
        )
        return
    if url is None:
        console.print(f"Prefect server: {state} (state in {where}).", soft_wrap=True, highlight=False)
        return
    who = f"pid {pid}, " if pid else ""
    console.print(f"Prefect server: {state} ({who}{source}).", soft_wrap=True, highlight=False)
    console.print(f"  API {url}", soft_wrap=True, highlight=False)
    console.print(f"  UI  {url.removesuffix('/api')}", soft_wrap=True, highlight=False)
    if runner["state"] == "ready":
        line = f"ready (pid {runner['pid']}): `run` and `backfill` start without loading Prefect"
    elif runner["state"] == "off":
        line = "off (TRANSCRIPTS_RUNNER)"
    else:
        line = "not running (the next `run` through this server starts it)"
    console.print(f"  command runner: {line}", soft_wrap=True, highlight=False)


def _runner(source: str) -> dict[str, object]:
    """The command runner beside the managed server (flows.service.runner): ready, not running, or off."""

    if not runner.enabled(os.environ):
        return {"state": "off", "pid": None}
    if source != "managed" or not runner.ready():
        return {"state": "not running", "pid": None}
    state = runner.read_state() or {}
    return {"state": "ready", "pid": state.get("pid")}


@server_app.command("status")
@reported("server status")
def status(as_json: Json = False) -> None:
    """Whether the server runs, and its API and UI addresses (exit 1 when it does not answer)."""

    mine = server.configured()
    where = str(server.state_dir())
    if mine is not None:
        up = server.healthy(mine.url, server.CHECK_SECONDS)
        _describe(as_json, "running" if up else "not answering", mine.url, None, f"from {mine.source}", where)
    else:
        current = server.read_state()
        up = current is not None and server.healthy(current.url)
        if current is None:
            _describe(as_json, "not running", None, None, "managed", where)
        else:
            _describe(as_json, "running" if up else "not answering", current.url, current.pid, "managed", where)
    if not up:
        raise typer.Exit(FAILED)


@server_app.command("start")
@reported("server start")
def start(as_json: Json = False) -> None:
    """Start the managed server (reused when it runs already); it keeps running after this command, until it has
    been unused for TRANSCRIPTS_SERVER_IDLE_MINUTES (default 60) or `server stop`."""

    mine = server.configured()
    if mine is not None:
        api = server.api_for_command()
        _describe(as_json, "running", api.url, None, f"from {api.source}; not managed here", str(server.state_dir()))
        return
    api = server.start()
    if api.started:
        server.resident_notice(api)

    started = runner.start_in_background(api.url)
    if started is not None:  # loading Prefect takes seconds; status says "not running" if it did not come up
        runner.wait_ready(started=started)
    _describe(as_json, "running", api.url, api.pid, "managed", str(server.state_dir()))


@server_app.command("stop")
@reported("server stop")
def stop(as_json: Json = False) -> None:
    """Stop the managed server (a server you configured with PREFECT_API_URL is left alone)."""

    stopped = server.stop()
    if as_json:
        print_json({"stopped": stopped is not None, "pid": stopped.pid if stopped else None})
    elif stopped is None:
        console.print("The managed Prefect server was not running.")
    else:
        console.print(f"Stopped the managed Prefect server (pid {stopped.pid}).", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(server_app, name="server")
