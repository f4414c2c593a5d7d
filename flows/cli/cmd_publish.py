"""`transcripts publish`: mirror this machine's corpus to a team folder; and the team side of sql/report/search."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.console import FAILED, USAGE, console, fail
from flows.cli.lazy import lazy
from flows.etl.settings import Settings, SettingsError, load_settings

publishing = lazy("sinks.publish")
remote = lazy("sinks.remote")
team_corpus = lazy("sinks.team")

if TYPE_CHECKING:
    import duckdb

    from sinks.publish import Published


class LevelChoice(StrEnum):
    full = "full"
    metrics = "metrics"


TeamUrl = Annotated[
    str | None,
    typer.Option(
        "--team",
        metavar="URL",
        help="Query every machine published to this team folder (s3://bucket/prefix or a folder) instead of "
        "this machine's warehouse.",
    ),
]


def label_of(flag: str | None, settings: Settings) -> str:
    """The machine label: --machine, else the setting, else the host name."""
    label = flag or settings.machine_label or publishing.default_label()
    try:
        return str(publishing.check_label(label))
    except ValueError as exc:
        raise fail(f"--machine: {exc}", USAGE) from None


def open_target(url: str, settings: Settings) -> object:
    try:
        return remote.open_target(url, settings.env)
    except remote.BadUrl as exc:
        raise fail(str(exc), USAGE) from None
    except remote.RemoteError as exc:
        raise fail(str(exc), FAILED) from None


def run_publish(settings: Settings, url: str, label: str, level: str) -> Published:
    """Publish, or raise remote.RemoteError (PublishError included) with the one line to show."""
    target = remote.open_target(url, settings.env)
    result: Published = publishing.publish(settings.data_dir, target, label, publishing.Level(level))
    return result


def summary(done: Published, url: str) -> str:
    what = (
        f"{done.uploaded} of {done.files} files sent ({done.bytes_sent / 1e6:.1f} of {done.bytes_total / 1e6:.1f} MB)"
        if done.uploaded
        else f"nothing changed ({done.files} files, {done.bytes_total / 1e6:.1f} MB already there)"
    )
    removed = f"; {done.removed} old objects removed" if done.removed else ""
    return f"Published corpus version {done.corpus_version} of {done.machine} ({done.level}) to {url}: {what}{removed}."


def publish(
    url: Annotated[
        str | None,
        typer.Argument(
            metavar="URL", help="Team folder: s3://bucket/prefix (AWS_ENDPOINT_URL for MinIO, R2, ...) or a folder."
        ),
    ] = None,
    machine: Annotated[
        str | None, typer.Option("--machine", metavar="LABEL", help="This machine's label (default: the host name).")
    ] = None,
    level: Annotated[
        LevelChoice | None,
        typer.Option("--level", help="full: the redacted corpus; metrics: no column that holds text (default: full)."),
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the corpus lives (default: see `transcripts data where`).")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
) -> None:
    """Mirror this machine's corpus to a team folder under machine=LABEL/ (only what changed travels)."""
    try:
        settings = load_settings(data_dir=data_dir, config=config)
    except SettingsError as exc:
        raise fail(str(exc), USAGE) from None
    url = url or settings.publish_url
    if not url:
        raise fail("give the team folder (transcripts publish s3://bucket/prefix) or set [publish] url", USAGE)
    label = label_of(machine, settings)
    chosen = level.value if level is not None else settings.publish_level
    try:
        done = run_publish(settings, url, label, chosen)
    except remote.BadUrl as exc:
        raise fail(str(exc), USAGE) from None
    except remote.RemoteError as exc:
        raise fail(f"publish failed, the local corpus is unchanged: {exc}", FAILED) from None
    console.print(summary(done, url), highlight=False)


@contextlib.contextmanager
def team_connection(
    url: str, settings: Settings, zone: str, *, materialize_turns: bool = False
) -> Iterator[tuple[duckdb.DuckDBPyConnection, object]]:
    """The team's corpus as an in-memory DuckDB (see sinks/team.py), and the Team read; errors: one line, exit 1
    (exit 2 for a URL that cannot be used)."""
    target = open_target(url, settings)
    try:
        team = team_corpus.fetch(target, settings.data_dir)
        con = team_corpus.connect(team, zone, settings.data_dir / "cache", materialize_turns=materialize_turns)
    except remote.RemoteError as exc:
        raise fail(str(exc), FAILED) from None
    try:
        yield con, team
    finally:
        con.close()


def register(app: typer.Typer) -> None:
    app.command(name="publish")(publish)
