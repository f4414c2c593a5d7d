"""`transcripts data where|move`: where the corpus lives, and moving it (e.g. out of a checkout, sinks/move.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.console import Config, Json, UsageError, Wait, console, err, escape, print_json, reported
from flows.etl.datahome import holds_corpus, move_command, old_corpus, old_corpus_message, sample_data_dir
from flows.etl.settings import SettingsError, load_settings

if TYPE_CHECKING:
    from flows.etl.settings import Settings

data_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Where the corpus lives, and moving it.")


def check_old_corpus(settings: Settings, *, refuse: bool) -> None:
    """A corpus older versions left in the checkout, while the data dir is the default one elsewhere: a run refuses
    to start a second corpus beside it (it could not be moved after), and otherwise it is a warning on stderr."""

    message = old_corpus_message(settings.data_dir, settings.origins.get("data_dir", "default"))
    if message is None:
        return
    if refuse and not holds_corpus(settings.data_dir):
        raise SettingsError(message)
    err.print(f"[yellow]warning:[/yellow] {escape(message)}", soft_wrap=True, highlight=False)


@data_app.command("where")
@reported("data where")
def where(config: Config = None, as_json: Json = False) -> None:
    """Print the data dir commands use (and where the sample is loaded), and any corpus left in a checkout."""

    settings = load_settings(config=config)
    origin = settings.origins.get("data_dir", "default")
    old = old_corpus(settings.data_dir, origin)
    if as_json:
        print_json(
            {
                "data_dir": str(settings.data_dir),
                "origin": origin,
                "sample_data_dir": str(sample_data_dir()),
                "old_corpus": str(old) if old else None,
            }
        )
        return
    console.print(f"data dir: {settings.data_dir} ({origin})", markup=False)
    console.print(f"sample data dir: {sample_data_dir()}", markup=False)
    if old is not None:
        console.print(f"a corpus is still in {old}: move it with {move_command(old)}", markup=False)


@data_app.command("move")
@reported("data move")
def move(
    source: Annotated[
        Path, typer.Argument(metavar="OLD", help="The data dir the corpus is in (e.g. a checkout's data/).")
    ],
    target: Annotated[
        Path | None,
        typer.Argument(metavar="[NEW]", help="An empty or new folder (default: the data dir, see `data where`)."),
    ] = None,
    wait: Wait = None,
    config: Config = None,
    as_json: Json = False,
) -> None:
    """Move the corpus at OLD to NEW under its lock, leaving a checkout's README.md and sample/ in place. By
    renames on one filesystem, else a copy (fsynced) then the removal of OLD's copy; run again after a kill."""
    # here: pyarrow through the sinks (~0.15 s), for `data move` only
    from sinks.move import MoveError, move_corpus

    settings = load_settings(config=config, lock_wait=wait)
    new = (target.expanduser() if target is not None else settings.data_dir).absolute()
    try:
        moved = move_corpus(source.expanduser(), new, settings.lock_wait_seconds)
    except MoveError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        print_json({"outcome": moved.how, "from": str(moved.source), "to": str(moved.target), "entries": moved.entries})
        return
    how = {"renamed": "renamed", "copied": "copied, then removed", "finished": "finished a move begun earlier"}
    console.print(f"Moved the corpus from {moved.source} to {moved.target} ({how[moved.how]}).", markup=False)
    if moved.target != settings.data_dir.absolute():
        console.print(
            f"Commands use {settings.data_dir}; point them at the corpus with --data-dir {moved.target} "
            "or TRANSCRIPTS_DATA_DIR.",
            markup=False,
        )


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
