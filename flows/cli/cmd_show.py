"""`transcripts show`: one session as readable text, or exported as Markdown, JSON or a self-contained HTML page."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.cmd_sql import Config, DataDir, Zone, fail, opened, settings_of, zone_of
from flows.cli.console import err
from flows.cli.lazy import lazy

sessions = lazy("sinks.sessions")
transcript = lazy("sinks.transcript")


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"
    html = "html"


def show(
    session: Annotated[
        str | None, typer.Argument(metavar="SESSION", help="A session id, or the start of one (unique).")
    ] = None,
    last: Annotated[bool, typer.Option("--last", help="The session that started last.")] = False,
    form: Annotated[Format, typer.Option("--format", help="text (a terminal), markdown, json or html.")] = Format.text,
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of the output.")] = None,
    open_page: Annotated[
        bool, typer.Option("--open", help="Write an HTML page (--out, else a temporary file) and open it.")
    ] = False,
    timezone: Zone = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Show one session: its turns in order with roles and times, tool calls folded, subagents and compactions
    marked."""
    if last == (session is not None):
        raise fail("name one session: SESSION (an id or its start) or --last", 2)
    if open_page and form not in (Format.text, Format.html):
        raise fail("--open writes HTML: leave out --format, or give --format html", 2)
    settings = settings_of(data_dir, config)
    zone, _ = zone_of(timezone, settings)
    with opened(settings, zone) as con:
        try:
            found = sessions.resolve(con, session, last=last)
            loaded = sessions.load(con, found)
        except (sessions.SessionNotFound, sessions.AmbiguousSession) as exc:
            raise fail(str(exc), 2) from None
    form = Format.html if open_page else form
    if form is Format.markdown:
        page = transcript.markdown(loaded, zone)[0] + "\n"
    elif form is Format.json:
        page = transcript.json_text(loaded, zone)
    elif form is Format.html:
        page = transcript.html_page(loaded, zone)
    else:
        page = transcript.text(loaded, zone)
    if open_page and out is None:
        # here: tempfile only for --open without --out
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="transcripts-show-")) / f"{found}.html"
    if out is None:
        sys.stdout.write(page)
        return
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}", 1) from None
    err.print(f"wrote {out}", highlight=False, soft_wrap=True)
    if open_page:
        # here: webbrowser (~20 ms) only when a page is to be opened
        import webbrowser

        if not webbrowser.open(out.resolve().as_uri()):
            err.print(f"no browser found to open it: open {out} yourself", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(name="show")(show)
