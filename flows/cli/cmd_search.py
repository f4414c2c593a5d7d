"""`transcripts search`: turns ranked by BM25 for some words, each with agent, time, project and a snippet."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from extractors.registry import parse_agent
from flows.cli.cmd_publish import TeamUrl, team_connection
from flows.cli.cmd_sql import Config, DataDir, Zone, fail, opened, settings_of, zone_of
from flows.cli.lazy import lazy
from flows.etl.settings import Settings

if TYPE_CHECKING:
    import duckdb
    from rich.console import Group

    from sinks.search import Hit

search_index = lazy("sinks.search")
team_corpus = lazy("sinks.team")


class Role(StrEnum):
    user = "user"
    assistant = "assistant"


def _hit_json(rank: int, hit: Hit) -> dict[str, object]:
    return {
        "rank": rank,
        "score": round(hit.score, 4),
        "agent": hit.agent,
        "role": hit.role,
        "timestamp": hit.timestamp.isoformat(),
        "project": hit.project,
        "cwd": hit.cwd,
        "title": hit.title,
        "session_id": hit.session_id,
        "turn_id": hit.turn_id,
        "snippet": hit.snippet,
        "highlights": [list(span) for span in hit.highlights],
    }


def _hit_text(rank: int, hit: Hit) -> Group:
    # here: rich (~80 ms), for the highlighted snippets only
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    head = Text(f"{rank:>2}. ", style="bold")
    head.append(hit.agent, style="cyan")
    head.append(f" · {hit.timestamp:%Y-%m-%d %H:%M} · ")
    head.append(hit.project, style="green")
    head.append(f" · {hit.role} · score {hit.score:.2f}", style="dim")
    snippet = Text(hit.snippet)
    for start, end in hit.highlights:
        snippet.stylize("bold yellow", start, end)
    return Group(
        head,
        Padding(snippet, (0, 0, 0, 4), expand=False),
        Padding(Text(hit.turn_id, style="dim"), (0, 0, 0, 4), expand=False),
    )


def search(
    words: Annotated[str, typer.Argument(help="Words to look for (any of them; stemmed).")],
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's turns.")] = None,
    since: Annotated[
        datetime | None, typer.Option("--since", formats=["%Y-%m-%d"], help="Only turns from this day on (YYYY-MM-DD).")
    ] = None,
    role: Annotated[
        Role | None, typer.Option("--role", help="Only a person's (user) or a model's (assistant) turns.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Hits to show, best first.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array of hits.")] = False,
    timezone: Zone = None,
    team: TeamUrl = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Full-text search of every turn (BM25), offline, from the index the load builds."""
    if agent is not None:
        try:
            agent = parse_agent(agent)
        except ValueError as exc:
            raise fail(str(exc), 2) from None
    settings = settings_of(data_dir, config)
    zone, how = zone_of(timezone, settings)
    with _searchable(settings, zone, team) as con:
        try:
            hits = search_index.search(
                con,
                words,
                agent=agent,
                role=role.value if role else None,
                since=since.date() if since else None,
                limit=limit,
            )
            ignored = [] if hits else search_index.ignored_words(con, words)
        except search_index.SearchUnavailable as exc:
            raise fail(str(exc), 2) from None
    if as_json:
        lines = [json.dumps(_hit_json(n, h), ensure_ascii=False) for n, h in enumerate(hits, 1)]
        print("[\n" + ",\n".join(lines) + "\n]" if lines else "[]")  # one hit per line, as `sql --json`
        return
    if not hits:
        print(f"No turns match {words!r}.")
        if ignored:  # an index made before every word was indexed: the next run rebuilds it
            print(
                f"Not searched: {', '.join(ignored)} (left out of this warehouse's index as stop words when it was "
                "made; the next `transcripts run` rebuilds it with every word)."
            )
        return
    from rich.console import Console  # the highlighted snippets are rich's drawing (imported only here)
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(f"{len(hits)} hit(s) for {words!r}, times in {zone} ({how})", style="dim"))
    for n, hit in enumerate(hits, 1):
        console.print(_hit_text(n, hit))


@contextlib.contextmanager
def _searchable(settings: Settings, zone: str, team: str | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """The warehouse, or with `team` the team's corpus with an index built over the turns of the machines that
    published their text (level full); none did: one line, exit 2."""
    if team is None:
        with opened(settings, zone) as con:
            yield con
        return
    with team_connection(team, settings, zone, materialize_turns=True) as (con, found):
        if not team_corpus.text_machines(found):
            raise fail(f"no machine published its text to {team} (all at --level metrics): nothing to search", 2)
        try:
            search_index.create_index(con)
        except search_index.SearchUnavailable as exc:
            raise fail(str(exc), 2) from None
        yield con


def register(app: typer.Typer) -> None:
    app.command(name="search")(search)
