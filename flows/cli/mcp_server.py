"""The MCP server of `transcripts mcp`: the corpus as tools a model can call, over stdio, read-only.

Built on the official MCP Python SDK (`mcp`, its FastMCP layer): the SDK every client's documentation starts from, kept
by the protocol's authors, with a client session the tests drive the server through. The tools' names and arguments
are an interface clients script against: keep them. Each tool reads one snapshot of the warehouse through
`sinks.served` (a read-only, locked-down connection), answers within bounds of rows, bytes and seconds, and says when
it cut the answer; what a model got wrong (an unknown session, a bad date, a writing statement) comes back as a tool
error it can read, and the server goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from typing import Annotated, Any, Literal, TypeVar

import anyio
import duckdb
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from extractors.registry import parse_agent, specs
from sinks import query, search, sessions, transcript
from sinks.query import QueryError, jsonable
from sinks.readonly import first_line
from sinks.search import SearchUnavailable
from sinks.served import NotServed, Served
from sinks.sessions import REDACTED, AmbiguousSession, SessionNotFound

T = TypeVar("T")

SECONDS = 10.0  # a call's time limit
SQL_SECONDS = 5.0  # a `sql` statement's, within it
MAX_BYTES = 60_000  # about what one answer may hold (a model's context is the scarce thing)
MAX_ROWS = 1000
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

INSTRUCTIONS = """\
The user's own AI coding-agent sessions ({agents}), loaded into a local corpus: what they asked, what the models
answered, tool calls, tokens and cost. Read-only. Start with `search` to find where something was discussed, or
`list_sessions` to browse; open one with `get_session`. `usage` answers tokens and cost per day, model or project;
`sql` answers anything else in DuckDB SQL (tables sessions, turns, tool_calls, usage; views such as session_costs,
cost_daily, tool_usage, daily_activity). Times are in {zone}."""

Day = Annotated[date | None, Field(description="A day, YYYY-MM-DD (in the corpus's zone), included.")]
Agent = Annotated[str | None, Field(description="Only this agent's sessions, e.g. claude or codex.")]
Project = Annotated[
    str | None, Field(description="Only this project: its folder's name (as results show it) or its full path.")
]


def _json(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False)


def _agent(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return parse_agent(name)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def build(served: Served) -> FastMCP:
    """The server over `served`, with its five tools."""
    agents = ", ".join(spec.name for spec in specs())
    server = FastMCP(
        "transcripts",
        instructions=INSTRUCTIONS.format(agents=agents, zone=served.zone),
        log_level="WARNING",  # not a line on stderr per request: clients keep the server's stderr as its log
    )

    async def run(work: Callable[[duckdb.DuckDBPyConnection], T], seconds: float = SECONDS) -> T:
        """`work` on the snapshot in a thread (the server keeps reading messages), its errors as tool errors."""

        def call() -> T:
            try:
                return served.call(work, seconds=seconds)
            except (NotServed, QueryError, SearchUnavailable, SessionNotFound, AmbiguousSession) as exc:
                raise ToolError(str(exc)) from None
            except duckdb.Error as exc:
                raise ToolError(f"the corpus could not answer: {first_line(exc)}") from None

        return await anyio.to_thread.run_sync(call)

    @server.tool(
        annotations=READ_ONLY,
        description=(
            "Full-text search (BM25, stemmed, any of the words) over every turn of the user's sessions: what a "
            "person asked (role user) or a model answered (role assistant). Returns the best turns first, each with "
            "its session_id, turn number, time, agent, project, session title and a snippet. Use it to find where "
            "something was discussed; then get_session(session_id, from_turn=turn-2, to_turn=turn+5) reads the "
            "conversation around a hit. Not for counting or aggregates: use sql or usage."
        ),
    )
    async def search(
        query: Annotated[str, Field(description="Words to look for.", min_length=1, max_length=1000)],
        agent: Agent = None,
        project: Project = None,
        since: Day = None,
        until: Day = None,
        role: Annotated[
            Literal["user", "assistant"] | None, Field(description="user: a person's turns; assistant: a model's.")
        ] = None,
        limit: Annotated[int, Field(description="Hits to return, best first.", ge=1, le=50)] = 10,
    ) -> str:
        name = _agent(agent)

        def work(con: duckdb.DuckDBPyConnection) -> str:
            hits = search_index(
                con,
                query,
                agent=name,
                role=role,
                since=since,
                until=until,
                project=project,
                sessions=REDACTED.format(alias="s"),
                limit=limit,
            )
            numbers = _turn_numbers(con, [h.turn_id for h in hits])
            out = [
                {
                    "session_id": h.session_id,
                    "turn": numbers.get(h.turn_id),
                    "time": h.timestamp,
                    "agent": h.agent,
                    "role": h.role,
                    "project": h.project,
                    "title": transcript_clip(h.title),
                    "snippet": h.snippet,
                    "score": round(h.score, 3),
                }
                for h in hits
            ]
            return _json({"hits": out, "count": len(out), "zone": served.zone})

        return await run(work)

    @server.tool(
        annotations=READ_ONLY,
        description=(
            "Lists the user's sessions, newest first (order_by time), or those that used the most tokens "
            "(order_by tokens) or cost the most (order_by cost), with filters; paged with limit and offset. Each row "
            "has session_id (for get_session), agent, project, title, start and end time, turns, tool calls, tokens "
            "and cost in USD (null when the model has no known price). Returns total (all that match) and "
            "next_offset (null on the last page)."
        ),
    )
    async def list_sessions(
        agent: Agent = None,
        project: Project = None,
        since: Day = None,
        until: Day = None,
        order_by: Annotated[
            Literal["time", "tokens", "cost"], Field(description="Sort: newest, most tokens, most cost.")
        ] = "time",
        limit: Annotated[int, Field(description="Sessions per page.", ge=1, le=100)] = 20,
        offset: Annotated[int, Field(description="Sessions to skip (paging).", ge=0)] = 0,
    ) -> str:
        name = _agent(agent)

        def work(con: duckdb.DuckDBPyConnection) -> str:
            rows, total = sessions.list_sessions(
                con,
                agent=name,
                project=project,
                since=since,
                until=until,
                order_by=sessions.Order(order_by),
                limit=limit,
                offset=offset,
                redacted_only=True,
            )
            for row in rows:
                row["title"] = transcript_clip(row["title"])
            after = offset + len(rows)
            return _json(
                {"sessions": rows, "total": total, "offset": offset, "next_offset": after if after < total else None}
            )

        return await run(work)

    @server.tool(
        annotations=READ_ONLY,
        description=(
            "One session as Markdown: a header (agent, project, times, models, links to a parent session, subagents "
            "and compactions), then its turns in order, each headed by its number, role (user: the person; "
            "assistant: the model), time and model, with the tool calls a response made folded to one line each "
            "(name, input, outcome, start of the output). from_turn and to_turn (turn numbers, both included) read "
            "part of a long session; an answer too long for one reply ends saying which from_turn continues it. "
            "session_id is an id from search or list_sessions (or its unique start)."
        ),
    )
    async def get_session(
        session_id: Annotated[str, Field(description="The session's id, or a unique start of it.", min_length=1)],
        from_turn: Annotated[int | None, Field(description="First turn number to show (from 1).", ge=1)] = None,
        to_turn: Annotated[int | None, Field(description="Last turn number to show (included).", ge=1)] = None,
    ) -> str:
        if from_turn is not None and to_turn is not None and to_turn < from_turn:
            raise ToolError(f"to_turn ({to_turn}) is before from_turn ({from_turn})")

        def work(con: duckdb.DuckDBPyConnection) -> str:
            found = sessions.resolve(con, session_id, redacted_only=True)
            session = sessions.load(con, found, from_turn=from_turn, to_turn=to_turn, redacted_only=True)
            text, following = transcript.markdown(session, served.zone, max_bytes=MAX_BYTES)
            if following is not None:
                text += (
                    f"\n\n[truncated: this answer stops before turn {following} of {session.turn_count}; call "
                    f"get_session(session_id={found!r}, from_turn={following}) for the rest]\n"
                )
            return text

        return await run(work)

    @server.tool(
        annotations=READ_ONLY,
        description=(
            "Runs one read-only DuckDB SQL statement on the corpus and returns columns and rows as JSON. Tables: "
            "sessions (one row per session), turns (what was said: role, text, timestamp), tool_calls (tool_name, "
            "input, output, is_error), usage (tokens per response); views: session_costs, cost_daily, usage_costs, "
            "tool_usage, tool_failures, daily_activity, model_usage, project_activity, session_projects (each "
            "session's project: its repository, else its folder), turn_context; full-text rank "
            "with fts_main_turns.match_bm25(turn_id, 'words'). The corpus cannot be changed from here (a writing "
            f"statement fails); a statement is stopped after {SQL_SECONDS:g} s, and at most `limit` rows and about "
            f"{MAX_BYTES} bytes come back, with `truncated` saying what was cut: aggregate in SQL rather than "
            "fetching rows. For tokens and cost, usage is simpler."
        ),
    )
    async def sql(
        query: Annotated[str, Field(description="One SQL statement (SELECT, WITH, DESCRIBE, ...).", min_length=1)],
        limit: Annotated[int, Field(description="Rows to return at most.", ge=1, le=MAX_ROWS)] = 100,
    ) -> str:
        def work(con: duckdb.DuckDBPyConnection) -> str:
            if served.unredacted:
                raise ToolError(
                    f"sql is off: {served.unredacted} session(s) of this corpus were loaded without redaction, and "
                    "sql could read their text; the other tools leave them out"
                )
            result = bounded_query(con, query, rows=limit, seconds=SQL_SECONDS, max_bytes=MAX_BYTES)
            return _json({"columns": result.columns, "rows": result.rows, "truncated": result.truncated})

        return await run(work, seconds=SQL_SECONDS + SECONDS)

    @server.tool(
        annotations=READ_ONLY,
        description=(
            "Tokens and cost summed per day, model or project (group_by), optionally between two days: responses, "
            "sessions, input, output, cache read and cache write tokens, total tokens, cost in USD computed from "
            "dated list prices (null when no price is known; unpriced_responses counts those). Days newest first; "
            "models and projects by total tokens."
        ),
    )
    async def usage(
        group_by: Annotated[Literal["day", "model", "project"], Field(description="What to sum by.")],
        since: Day = None,
        until: Day = None,
    ) -> str:
        def work(con: duckdb.DuckDBPyConnection) -> str:
            rows = sessions.usage(
                con, sessions.GroupBy(group_by), since=since, until=until, limit=MAX_ROWS, redacted_only=True
            )
            return _json({"rows": rows, "zone": served.zone})

        return await run(work)

    return server


search_index = search.search
bounded_query = query.bounded


def transcript_clip(title: str | None, chars: int = 200) -> str | None:
    return None if title is None else (title if len(title) <= chars else title[: chars - 1] + "…")


def _turn_numbers(con: duckdb.DuckDBPyConnection, turn_ids: list[str]) -> dict[str, int]:
    """Each turn's number in its session (from 1, in source order), as get_session numbers them."""
    if not turn_ids:
        return {}
    rows = con.execute(
        """SELECT h.turn_id, (SELECT count(*) FROM turns t WHERE t.session_id = h.session_id
                              AND t.turn_index <= h.turn_index)
           FROM turns h WHERE h.turn_id IN (SELECT unnest($ids))""",
        {"ids": turn_ids},
    ).fetchall()
    return {str(turn_id): int(number) for turn_id, number in rows}


def serve(served: Served) -> None:
    """Answer over stdin and stdout until the client closes them."""
    try:
        build(served).run("stdio")
    finally:
        served.close()
