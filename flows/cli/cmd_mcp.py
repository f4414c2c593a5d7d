"""`transcripts mcp`: the corpus as a Model Context Protocol server over stdio, read-only (`flows.cli.mcp_server`)."""

from __future__ import annotations

import typer

from flows.cli.cmd_sql import Config, DataDir, Zone, settings_of, zone_of


def mcp(timezone: Zone = None, data_dir: DataDir = None, config: Config = None) -> None:
    """Serve the corpus to an AI agent over stdio (MCP): search, list_sessions, get_session, sql, usage.

    Set up once per client, e.g. `claude mcp add transcripts -- transcripts mcp` (docs/mcp.md has the others).
    """
    settings = settings_of(data_dir, config)
    zone, _ = zone_of(timezone, settings)
    # here: the MCP SDK, DuckDB and pydantic (~0.6 s) that every other command does without
    from flows.cli.mcp_server import serve
    from sinks.served import Served

    serve(Served(settings.data_dir, zone))


def register(app: typer.Typer) -> None:
    app.command(name="mcp")(mcp)
