"""Reading sessions back out of the warehouse: find one by id, prefix or recency, list them, load one whole.

What `transcripts show`, the MCP server (`transcripts mcp`) and the Python API's readers of one session share. Every
function takes a read-only connection (`sinks.query.connect`) in the zone times should be shown in. Only sessions
whose text was redacted are served where `redacted_only` is asked (the MCP server asks): a session loaded with
redaction off (`parser_version` ending `+raw`) is then as if it did not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any

import duckdb

from sinks import views

# A session's text was redacted when its parser version says which rules did it (`3+r1.1.5e2f1a9c`).
REDACTED = "regexp_matches({alias}.parser_version, '[+]r[0-9]')"
PROJECT = f"coalesce({views.PROJECT}, '(none)')"  # a session's project: its folder's name, as `turn_context`
MAX_LIST = 500  # rows of one page of `list_sessions`, at most


class SessionNotFound(LookupError):
    """No session has this id or prefix (or it is not served); the message says how to find one."""


class AmbiguousSession(LookupError):
    """A prefix that starts more than one session id; the message names a few of them."""


class Order(StrEnum):
    """How `list_sessions` sorts: newest first, or the most tokens or cost first."""

    time = "time"
    tokens = "tokens"
    cost = "cost"


def _served(redacted_only: bool, alias: str = "s") -> str:
    return REDACTED.format(alias=alias) if redacted_only else "true"


def resolve(con: duckdb.DuckDBPyConnection, ref: str | None, *, last: bool = False, redacted_only: bool = False) -> str:
    """The session id `ref` names: an id, or the start of exactly one id; with `last`, the session started last.

    Raises SessionNotFound or AmbiguousSession with a message that says what to try.
    """
    served = _served(redacted_only)
    if last:
        row = con.execute(
            f"SELECT session_id FROM sessions s WHERE {served} ORDER BY started_at DESC, session_id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise SessionNotFound("the corpus has no session yet: run `transcripts run`")
        return str(row[0])
    ref = (ref or "").strip()
    if not ref:
        raise SessionNotFound("name a session: its id, the start of its id, or --last")
    # Exact ids first, then the shortest: a parent's id starts its subagents' ids, and a prefix of the parent's
    # names the parent rather than being ambiguous with its own subagents.
    rows = con.execute(
        f"""SELECT session_id, session_id = $ref OR native_session_id = $ref AS exact FROM sessions s
            WHERE {served} AND (starts_with(session_id, $ref) OR starts_with(native_session_id, $ref))
            ORDER BY exact DESC, length(session_id), session_id""",
        {"ref": ref},
    ).fetchall()
    ids = [str(r[0]) for r in rows]
    if not ids:
        raise SessionNotFound(
            f'no session {ref!r}: find ids with `transcripts sql "SELECT session_id, started_at, title FROM sessions '
            'ORDER BY started_at DESC LIMIT 20"`, or show the latest with --last'
        )
    exact = [i for i, is_exact in rows if is_exact]
    if len(exact) == 1 or all(i.startswith(ids[0]) for i in ids):
        return exact[0] if exact else ids[0]
    more = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    raise AmbiguousSession(f"{ref!r} starts more than one session id ({more}): give more of it")


def _where(
    agent: str | None,
    project: str | None,
    since: date | None,
    until: date | None,
    redacted_only: bool,
) -> tuple[str, dict[str, Any]]:
    """The filter of sessions (alias `s`) for the listing and the usage: days are the connection's zone's days,
    `until` included."""
    day = "CAST(timezone(transcripts_timezone(), s.started_at) AS DATE)"
    clauses = [_served(redacted_only)]
    params: dict[str, Any] = {}
    if agent is not None:
        clauses.append("s.agent = $agent")
        params["agent"] = agent
    if project is not None:
        clauses.append(f"({PROJECT} = $project OR s.cwd = $project OR s.git_repository = $project)")
        params["project"] = project
    if since is not None:
        clauses.append(f"{day} >= $since")
        params["since"] = since
    if until is not None:
        clauses.append(f"{day} <= $until")
        params["until"] = until
    return " AND ".join(clauses), params


def list_sessions(
    con: duckdb.DuckDBPyConnection,
    *,
    agent: str | None = None,
    project: str | None = None,
    since: date | None = None,
    until: date | None = None,
    order_by: Order = Order.time,
    limit: int = 20,
    offset: int = 0,
    redacted_only: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """One page of sessions (at most MAX_LIST), and how many match in all. Each row: session_id, agent, project,
    title, started_at, ended_at, turns, tool_calls, total tokens, computed cost (None when unpriced), parent."""
    where, params = _where(agent, project, since, until, redacted_only)
    order = {
        Order.time: "s.started_at DESC, s.session_id",
        Order.tokens: "tokens DESC NULLS LAST, s.started_at DESC, s.session_id",
        Order.cost: "cost_usd DESC NULLS LAST, s.started_at DESC, s.session_id",
    }[order_by]
    total = con.execute(f"SELECT count(*) FROM sessions s WHERE {where}", params).fetchone()
    cursor = con.execute(
        f"""SELECT s.session_id, s.agent, {PROJECT} AS project, s.title, s.started_at, s.ended_at,
                   s.turn_count AS turns, s.tool_call_count AS tool_calls,
                   CAST(coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0) + coalesce(c.cache_read_tokens, 0)
                        + coalesce(c.cache_write_tokens, 0) AS BIGINT) AS tokens,
                   round(c.computed_cost_usd, 4) AS cost_usd, s.parent_session_id
            FROM sessions s LEFT JOIN session_costs c USING (session_id)
            WHERE {where} ORDER BY {order} LIMIT $limit OFFSET $offset""",
        {**params, "limit": max(0, min(limit, MAX_LIST)), "offset": max(0, offset)},
    )
    names = [d[0] for d in cursor.description or ()]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return rows, int(total[0]) if total else 0


class GroupBy(StrEnum):
    """What `usage` sums tokens and cost by."""

    day = "day"
    model = "model"
    project = "project"


def usage(
    con: duckdb.DuckDBPyConnection,
    group_by: GroupBy,
    *,
    since: date | None = None,
    until: date | None = None,
    limit: int = MAX_LIST,
    redacted_only: bool = False,
) -> list[dict[str, Any]]:
    """Tokens and cost summed per day (the connection's zone), model or project, from `usage_costs`; newest day or
    the largest first. The days are those of the responses; the project is the session's folder name."""
    day = "CAST(timezone(transcripts_timezone(), u.timestamp) AS DATE)"
    key = {
        GroupBy.day: f"{day}",
        GroupBy.model: "coalesce(u.model, '(unknown)')",
        GroupBy.project: PROJECT,
    }[group_by]
    clauses = [_served(redacted_only)]
    params: dict[str, Any] = {"limit": max(1, min(limit, MAX_LIST))}
    if since is not None:
        clauses.append(f"{day} >= $since")
        params["since"] = since
    if until is not None:
        clauses.append(f"{day} <= $until")
        params["until"] = until
    order = "1 DESC" if group_by is GroupBy.day else "total_tokens DESC, 1"
    cursor = con.execute(
        f"""SELECT {key} AS {group_by.value}, count(*) AS responses, count(DISTINCT u.session_id) AS sessions,
                   CAST(sum(u.input_tokens) AS BIGINT) AS input_tokens,
                   CAST(sum(u.billed_output_tokens) AS BIGINT) AS output_tokens,
                   CAST(sum(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens,
                   CAST(sum(u.cache_write_tokens) AS BIGINT) AS cache_write_tokens,
                   CAST(coalesce(sum(u.input_tokens), 0) + coalesce(sum(u.billed_output_tokens), 0)
                        + coalesce(sum(u.cache_read_tokens), 0) + coalesce(sum(u.cache_write_tokens), 0) AS BIGINT)
                       AS total_tokens,
                   round(sum(u.computed_cost_usd), 4) AS cost_usd,
                   count(*) FILTER (WHERE NOT u.priced) AS unpriced_responses
            FROM usage_costs u JOIN sessions s USING (session_id)
            WHERE {" AND ".join(clauses)} GROUP BY 1 ORDER BY {order} LIMIT $limit""",
        params,
    )
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    input: str | None
    output: str | None
    is_error: bool | None
    spawned_session_id: str | None


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a session in order: a turn (number counts the turns from 1), or a response with tool calls and
    no visible text (`role` None, `number` the number of the turn before it)."""

    number: int
    turn_id: str | None
    turn_index: int
    role: str | None
    timestamp: datetime | None
    model: str | None
    text: str
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Session:
    """A session as read for display: its row, its steps in order (the range asked for), its links."""

    meta: dict[str, Any]
    steps: list[Step]
    turn_count: int  # turns of the whole session
    first: int  # the first and last turn numbers shown
    last: int
    links: list[dict[str, Any]] = field(default_factory=list)  # kind, other session id, direction


def load(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    *,
    from_turn: int | None = None,
    to_turn: int | None = None,
    redacted_only: bool = False,
) -> Session:
    """Session `session_id` (an exact id; see `resolve`) with its turns `from_turn`..`to_turn` (numbers from 1,
    both included; default all) and the tool calls among them, in source order. Raises SessionNotFound."""
    cursor = con.execute(
        f"""SELECT s.session_id, s.agent, s.native_session_id, s.parent_session_id, s.title, s.cwd,
                   {PROJECT} AS project, s.git_branch, s.git_repository, s.models, s.started_at, s.ended_at,
                   s.turn_count, s.tool_call_count, s.source_path
            FROM sessions s WHERE s.session_id = $id AND {_served(redacted_only)}""",
        {"id": session_id},
    )
    names = [d[0] for d in cursor.description or ()]
    row = cursor.fetchone()
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    meta = dict(zip(names, row, strict=True))
    first = max(1, from_turn or 1)
    turns = con.execute(
        """SELECT row_number() OVER (ORDER BY turn_index) AS number, turn_id, turn_index, role, timestamp, model, text
           FROM turns WHERE session_id = $id ORDER BY turn_index""",
        {"id": session_id},
    ).fetchall()
    count = len(turns)
    last = min(count, to_turn) if to_turn is not None else count
    shown = [t for t in turns if first <= t[0] <= last]
    low = shown[0][2] if shown else None
    high = shown[-1][2] if shown else None
    # The calls of the responses shown: those of a turn shown, and those of text-less responses between them (after
    # the last turn shown, when it is the session's last).
    after_all = last >= count
    calls: dict[int, list[ToolCall]] = {}
    if low is not None:
        for index, name, input_, output, error, spawned in con.execute(
            """SELECT turn_index, tool_name, input, output, is_error, spawned_session_id FROM tool_calls
               WHERE session_id = $id AND turn_index >= $low AND ($all OR turn_index <= $high)
               ORDER BY turn_index, coalesce(started_at, TIMESTAMPTZ '1970-01-01'), call_id""",
            {"id": session_id, "low": low, "high": high, "all": after_all},
        ).fetchall():
            calls.setdefault(int(index), []).append(ToolCall(str(name), input_, output, error, spawned))
    elif not turns:  # a session of tool calls alone
        for index, name, input_, output, error, spawned in con.execute(
            """SELECT turn_index, tool_name, input, output, is_error, spawned_session_id FROM tool_calls
               WHERE session_id = $id ORDER BY turn_index, call_id""",
            {"id": session_id},
        ).fetchall():
            calls.setdefault(int(index), []).append(ToolCall(str(name), input_, output, error, spawned))
    steps: list[Step] = []
    by_index = {int(t[2]): t for t in shown}
    for index in sorted(set(by_index) | set(calls)):
        turn = by_index.get(index)
        if turn is not None:
            number, turn_id, _, role, ts, model, text = turn
            steps.append(Step(int(number), turn_id, index, role, ts, model, text, tuple(calls.get(index, ()))))
        else:
            before = steps[-1].number if steps else first - 1
            steps.append(Step(before, None, index, None, None, None, "", tuple(calls[index])))
    links = [
        {"kind": kind, "session_id": other, "direction": direction}
        for kind, other, direction in con.execute(
            """SELECT kind, other_session_id, 'to' FROM session_links WHERE session_id = $id
               UNION ALL SELECT kind, session_id, 'from' FROM session_links WHERE other_session_id = $id
               ORDER BY 3, 1, 2""",
            {"id": session_id},
        ).fetchall()
    ]
    return Session(meta, steps, count, first, last, links)
