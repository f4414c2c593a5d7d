"""The `transcripts` command: the app and its command groups, each in its own `flows/cli/cmd_<group>.py`.

Keep this light: it runs on every `--help`. A module named here is imported at start-up and registers its
commands with `register(app)`; its own heavy imports (Prefect, DuckDB, pyarrow, polars) happen inside commands.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Annotated

import typer

from flows.cli import (
    cmd_data,
    cmd_mcp,
    cmd_prune,
    cmd_publish,
    cmd_report,
    cmd_run,
    cmd_schedule,
    cmd_search,
    cmd_server,
    cmd_show,
    cmd_sql,
    cmd_status,
    cmd_watch,
)
from flows.cli.console import OK, closed_pipe, err
from flows.service.server import exit_on_sigterm

# The command modules, in the order `--help` lists their commands (one per line, so that adding one merges cleanly).
COMMANDS = (
    cmd_run,
    cmd_status,
    cmd_prune,
    cmd_schedule,
    cmd_watch,
    cmd_server,
    cmd_report,
    cmd_sql,
    cmd_search,
    cmd_show,
    cmd_mcp,
    cmd_publish,
    cmd_data,
)

app = typer.Typer(
    add_completion=True,
    rich_markup_mode=None,  # plain help: flags shown as flags, readable at 80 columns and in a pipe
    no_args_is_help=True,
    help="Agent transcripts -> Parquet + DuckDB.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,  # an unexpected error is a bug report, not 100 lines of locals
)


def _version(value: bool) -> None:
    if value:
        # here: ~30 ms that only --version needs
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("agent-transcripts")
        except PackageNotFoundError:
            number = "unknown"
        typer.echo(f"transcripts {number} (Python {sys.version.split()[0]})")
        raise typer.Exit(OK)


@app.callback()
def _main(
    _version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Agent transcripts -> Parquet + DuckDB."""


for _module in COMMANDS:
    _module.register(app)


def main() -> None:
    exit_on_sigterm()
    code: int = OK
    try:
        app()
    except SystemExit as exc:  # typer ends every command with one
        code = _exit_code(exc.code)
    except KeyboardInterrupt:  # Ctrl-C outside a command body (argument parsing, start-up)
        err.print("interrupted.")
        code = 130
    _exit_now(code)


def _exit_code(value: object) -> int:
    if value is None:
        return OK
    if isinstance(value, int):
        return value
    err.print(str(value))
    return 1


def _exit_now(code: int) -> None:
    """Exit without tearing the interpreter down: after a flow, freeing thousands of Prefect modules and objects
    one by one takes ~0.4 s of a command that is otherwise done. Every exit handler still runs (Prefect's
    drains, logging, multiprocessing's reaping), and the output is flushed; with a thread of ours still running,
    the normal exit joins it instead."""

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `transcripts status | head`: the reader left; not an error
            closed_pipe()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
