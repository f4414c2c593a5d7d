"""`transcripts sql`: read-only SQL on the warehouse as a table, CSV or JSON; alone, an interactive shell."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.cmd_publish import TeamUrl, team_connection
from flows.cli.console import err
from flows.cli.lazy import lazy
from flows.etl.settings import Settings, SettingsError, load_settings

query = lazy("sinks.query")
views = lazy("sinks.views")
warehouse = lazy("sinks.warehouse")
files = lazy("sinks.files")

if TYPE_CHECKING:
    import duckdb

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Where the corpus lives (default: see `transcripts data where`).")
]
Config = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
Zone = Annotated[
    str | None,
    typer.Option(
        "--timezone",
        help="Zone of times and per-day views, e.g. Europe/Berlin (default: the setting, else the machine's).",
    ),
]
HISTORY = ".sql_history"


def fail(message: str, code: int) -> typer.Exit:
    """Print one line and return the Exit to raise (exit codes: 1 the SQL failed, 2 nothing to query / bad input)."""
    err.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


def settings_of(data_dir: Path | None, config: Path | None) -> Settings:
    try:
        return load_settings(data_dir=data_dir, config=config)
    except SettingsError as exc:
        raise fail(str(exc), 2) from None


def zone_of(flag: str | None, settings: Settings) -> tuple[str, str]:
    """The zone to use and where it came from (said in the output so nobody reads days in the wrong zone)."""
    try:
        if flag:
            return views.check_zone(flag), "--timezone"
        if settings.timezone:
            return settings.timezone, "the timezone setting"
        return views.machine_zone(), "the machine's zone; --timezone to change"
    except views.ZoneError as exc:
        raise fail(f"--timezone: {exc}", 2) from None


@contextlib.contextmanager
def opened(settings: Settings, zone: str, team: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """The warehouse read-only in `zone`; no warehouse, or one this DuckDB cannot open: one line, exit 2. With
    `team` (a team folder's URL): every machine's published corpus instead (flows/cli/cmd_publish.py)."""
    if team is not None:
        with team_connection(team, settings, zone) as (con, _):
            yield con
        return
    try:
        con = query.connect(settings.data_dir, zone)
    except (query.NoWarehouse, warehouse.WarehouseUnreadable) as exc:
        raise fail(str(exc), 2) from None
    try:
        yield con
    finally:
        con.close()


def sql(
    statement: Annotated[
        str | None, typer.Argument(metavar="SQL", help="The query; none: an interactive shell.")
    ] = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="CSV with a header.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array of objects.")] = False,
    max_rows: Annotated[int, typer.Option("--max-rows", help="Rows shown in a table (0: all).")] = 40,
    builtin: Annotated[
        bool, typer.Option("--builtin-shell", help="The bundled engine's shell even when the DuckDB CLI is installed.")
    ] = False,
    timezone: Zone = None,
    team: TeamUrl = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Run read-only SQL on the warehouse (tables, views, fts_main_turns.match_bm25), or open a shell on it."""
    if as_csv and as_json:
        raise fail("--csv and --json exclude each other", 2)
    settings = settings_of(data_dir, config)
    zone, how = zone_of(timezone, settings)
    if statement is None:
        _interactive(settings, zone, how, builtin=builtin, team=team)
        return
    with opened(settings, zone, team) as con:
        try:
            result = query.execute(con, statement)
            if result is None:
                return
            if as_json:
                query.write_json(result, sys.stdout)
            elif as_csv:
                query.write_csv(result, sys.stdout)
            else:
                table = query.render_table(result, width=query.table_width(), max_rows=max_rows)
                err.print(f"times in {zone} ({how})", style="dim", highlight=False)
                sys.stdout.write(table)
        except query.QueryError as exc:
            raise fail(str(exc), 1) from None


def _interactive(settings: Settings, zone: str, how: str, *, builtin: bool, team: str | None = None) -> None:
    exe = (
        None
        if builtin or team is not None or not warehouse.warehouse_path(settings.data_dir).exists()
        else query.duckdb_cli(settings.data_dir)
    )
    if exe is not None:
        err.print(f"DuckDB CLI {exe}, read-only; times in {zone} ({how})", highlight=False)
        raise typer.Exit(subprocess.run(query.cli_command(exe, settings.data_dir, zone), check=False).returncode)
    with opened(settings, zone, team) as con:
        interactive = sys.stdin.isatty()
        if interactive and not builtin and team is None:
            err.print(
                "No DuckDB CLI that opens the warehouse (none on PATH, nor installed with transcripts): the built-in "
                f"shell. For DuckDB's own shell: `{query.CLI_INSTALL}`.",
                style="dim",
                highlight=False,
                soft_wrap=True,
            )
        history = settings.data_dir / HISTORY
        remember = _history(history) if interactive else (lambda sql: None)
        failed = query.shell(
            con,
            (lambda prompt: input(prompt)) if interactive else (lambda prompt: _read_line()),
            _write,
            zone=f"{zone} ({how})",
            remember=remember,
            banner=interactive,
        )
    if failed and not interactive:
        raise typer.Exit(1)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _read_line() -> str:
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _history(path: Path) -> Callable[[str], None]:
    """readline with a history of whole statements in the data directory, private (0600) like every file there."""
    try:
        # here: it changes how input() reads the terminal; only the interactive shell wants that
        import readline
    except ImportError:  # no readline (some builds): the shell works, without history
        return lambda sql: None
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_auto_history(False)  # lines of a multi-line statement are not history; the statement is

    def remember(sql: str) -> None:
        readline.add_history(sql)
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, files.FILE_MODE)
            os.close(fd)
            os.chmod(path, files.FILE_MODE)
            readline.write_history_file(path)

    return remember


def register(app: typer.Typer) -> None:
    app.command(name="sql")(sql)
