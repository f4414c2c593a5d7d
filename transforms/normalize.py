"""Pure: complete `Session`s and rejected outcomes -> Arrow tables shaped by `transforms.schema`.

No filesystem, no clock, no environment: the same outcomes give the same rows.

Numbers that do not fit their column never stop a run (`extractors.bounded.numbers`): a token count outside int64
(readers hand over Python's unbounded ints: `2**63`, a 30-digit literal) and a cost that is not a finite float (`1e400`,
`NaN`, an integer too large for a float) are stored null, and counted in the session's `record_kinds` as kind
`usage/out_of_range` (disposition `metadata`; `record_count` = fields nulled), added to what the reader counted under
the same key (Gemini, for NaN / infinite token counts). The rest of the session loads as it is. Those rows count fields,
not records: `sessions.record_count` leaves them out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from extractors.bounded.numbers import OUT_OF_RANGE, OUT_OF_RANGE_KIND, fit_float, fit_int
from extractors.model import Agent, Deferred, Disposition, Loaded, Rejected, Role, Session, Streamed, Turn
from transforms import ids
from transforms.redact import Redactor
from transforms.schema import SESSION_TABLES, Table


def _empty(table: Table) -> dict[str, list[Any]]:
    return {name: [] for name in table.column_names}


def to_table(table: Table, columns: Mapping[str, list[Any]]) -> pa.Table:
    """Columns (lists in schema order) -> an Arrow table with exactly the schema's types."""
    return pa.table({c.name: pa.array(columns[c.name], type=c.type) for c in table.columns}, schema=table.arrow_schema)


def _kept(turn: Turn) -> bool:
    """An empty turn is dropped (an image-only prompt is not empty); the others keep their index."""
    return bool(turn.text.strip() or turn.attachments)


def kept_turns(session: Session) -> int:
    """How many turns of a session become rows."""
    return sum(1 for turn in session.turns if _kept(turn))


def _height(columns: Mapping[str, list[Any]]) -> int:
    return len(columns[next(iter(columns))])


class _Audit:
    """Redacts cells and collects the `redactions` rows of what it replaced."""

    def __init__(self, redactor: Redactor, rows: dict[str, list[Any]]) -> None:
        self.redactor = redactor
        self.rows = rows

    def __call__(
        self,
        value: str | None,
        column: str,
        sid: str,
        agent: str,
        when: datetime,
        turn_id: str | None = None,
        call_id: str | None = None,
    ) -> str | None:
        if value is None:
            return None
        text, findings = self.redactor.redact(value)
        if not findings:
            return value
        counts: dict[tuple[str, str], int] = {}
        for f in findings:
            counts[(f.rule, f.digest)] = counts.get((f.rule, f.digest), 0) + 1
        r = self.rows
        for (rule, digest), n in counts.items():
            r["session_id"].append(sid)
            r["agent"].append(agent)
            r["column_name"].append(column)
            r["turn_id"].append(turn_id)
            r["tool_call_id"].append(call_id)
            r["rule"].append(rule)
            r["secret_hmac"].append(digest)
            r["count"].append(n)
            r["timestamp"].append(when)
        return text


@dataclass(slots=True)
class _Tally:
    """What the session row counts from the turn and tool-call rows written for it (across parts, when streamed)."""

    users: int = 0
    assistants: int = 0
    calls: int = 0
    times: dict[int, datetime] = field(default_factory=dict)  # turn index -> time, for the tool calls' rows


def _turn_rows(cols: dict[str, dict[str, list[Any]]], audit: _Audit, ses: Session, tally: _Tally) -> None:
    t = cols["turns"]
    sid, agent, start = ses.session_id, ses.agent, ses.started_at
    for turn in ses.turns:
        if not _kept(turn):
            continue
        if turn.role is Role.USER:
            tally.users += 1
        else:
            tally.assistants += 1
        tid = ids.turn_id(sid, turn.index)
        when = turn.timestamp or start
        tally.times[turn.index] = when
        t["turn_id"].append(tid)
        t["session_id"].append(sid)
        t["agent"].append(agent)
        t["turn_index"].append(turn.index)
        t["role"].append(turn.role.value)
        t["text"].append(audit(turn.text, "turns.text", sid, agent, when, turn_id=tid))
        t["timestamp"].append(turn.timestamp or start)
        t["timestamp_inferred"].append(turn.timestamp is None)
        t["model"].append(turn.model)
        t["attachments"].append(list(turn.attachments))


def _call_rows(cols: dict[str, dict[str, list[Any]]], audit: _Audit, ses: Session, tally: _Tally) -> None:
    c = cols["tool_calls"]
    sid, agent, start = ses.session_id, ses.agent, ses.started_at
    for call in ses.tool_calls:
        tally.calls += 1
        cid = ids.tool_call_id(sid, call.call_id)
        tid = ids.turn_id(sid, call.turn_index)
        when = call.started_at or tally.times.get(call.turn_index) or start
        c["tool_call_id"].append(cid)
        c["session_id"].append(sid)
        c["agent"].append(agent)
        c["turn_id"].append(tid)
        c["turn_index"].append(call.turn_index)
        c["call_id"].append(call.call_id)
        c["tool_name"].append(call.name)
        c["input"].append(audit(call.input, "tool_calls.input", sid, agent, when, turn_id=tid, call_id=cid))
        c["output"].append(audit(call.output, "tool_calls.output", sid, agent, when, turn_id=tid, call_id=cid))
        c["is_error"].append(call.is_error)
        c["started_at"].append(call.started_at)
        c["ended_at"].append(call.ended_at)
        c["spawned_session_id"].append(call.spawned_session_id)


def _head_rows(
    cols: dict[str, dict[str, list[Any]]],
    audit: _Audit,
    ses: Session,
    source_path: str,
    tally: _Tally,
    parser_version: str,
) -> None:
    """Usage, links, census and the session row; the counts of turns and tool calls come from `tally`."""
    s, u, lk, rk = cols["sessions"], cols["usage"], cols["session_links"], cols["record_kinds"]
    sid, agent, start = ses.session_id, ses.agent, ses.started_at
    out_of_range = 0
    for use in ses.usage:
        u["usage_id"].append(ids.usage_id(sid, use.turn_index))
        u["session_id"].append(sid)
        u["agent"].append(agent)
        u["turn_index"].append(use.turn_index)
        u["response_id"].append(use.response_id)
        u["model"].append(use.model)
        u["timestamp"].append(use.timestamp or start)
        for name, raw in (
            ("input_tokens", use.input_tokens),
            ("output_tokens", use.output_tokens),
            ("cache_read_tokens", use.cache_read_tokens),
            ("cache_write_tokens", use.cache_write_tokens),
            ("reasoning_tokens", use.reasoning_tokens),
        ):
            value, bad = fit_int(raw)
            u[name].append(value)
            out_of_range += bad
        cost, bad = fit_float(use.cost_usd)
        u["cost_usd"].append(cost)
        out_of_range += bad
    for link in ses.links:
        lk["session_id"].append(sid)
        lk["agent"].append(agent)
        lk["other_session_id"].append(link.other_session_id)
        lk["kind"].append(link.kind.value)
        lk["tool_call_id"].append(link.tool_call_id)
    census = ses.census
    if out_of_range:
        census = Counter(census)
        census[OUT_OF_RANGE] += out_of_range
    records = 0
    for (kind, version, disposition), n in census.items():
        if kind != OUT_OF_RANGE_KIND:
            records += n  # record_count counts records; out-of-range rows count fields
        rk["session_id"].append(sid)
        rk["agent"].append(agent)
        rk["record_kind"].append(kind)
        rk["writer_version"].append(version)
        rk["disposition"].append(disposition.value)
        rk["record_count"].append(n)
    s["session_id"].append(sid)
    s["agent"].append(agent)
    s["native_session_id"].append(ses.native_id)
    s["parent_session_id"].append(ses.parent_session_id)
    s["source_path"].append(source_path)
    s["cwd"].append(audit(ses.cwd, "sessions.cwd", sid, agent, start))
    s["git_branch"].append(audit(ses.git_branch, "sessions.git_branch", sid, agent, start))
    s["title"].append(audit(ses.title, "sessions.title", sid, agent, start))
    s["models"].append(list(ses.models))
    s["cli_versions"].append(list(ses.cli_versions))
    s["started_at"].append(start)
    s["ended_at"].append(ses.ended_at)
    s["archived"].append(ses.archived)
    s["turn_count"].append(tally.users + tally.assistants)
    s["user_turn_count"].append(tally.users)
    s["assistant_turn_count"].append(tally.assistants)
    s["tool_call_count"].append(tally.calls)
    s["harness_record_count"].append(ses.count(Disposition.HARNESS))
    s["skipped_record_count"].append(ses.count(Disposition.SKIPPED))
    s["record_count"].append(records)
    s["parser_version"].append(parser_version)
    s["git_repository"].append(audit(ses.git_repository, "sessions.git_repository", sid, agent, start))
    s["started_at_inferred"].append(ses.started_at_inferred)


def _tables(cols: dict[str, dict[str, list[Any]]]) -> dict[str, pa.Table]:
    return {table.name: to_table(table, cols[table.name]) for table in SESSION_TABLES}


def session_tables(
    loaded: Iterable[Loaded],
    parser_versions: Mapping[Agent, str],
    redactor: Redactor,
    *,
    source_column: str | None = None,
) -> dict[str, pa.Table]:
    """Rows of every session-keyed table (sessions, turns, tool_calls, usage, session_links, record_kinds,
    redactions), every stored text redacted by `redactor` (a raw `Redactor(None)` keeps them as they are).

    Redacted: turn text, tool inputs and outputs, and the session's title, cwd, git branch and git repository (a
    secret in a cwd is rare, and a redacted cwd still groups its sessions: the marker is the same for the same
    value; a repository has lost its URL's credentials in the reader already).
    Not redacted: ids, names, model and version strings, and attachment references (`image/png sha256:...`).

    With `source_column`, every table gets one more string column of that name: the path of the source each row was
    read from (staging uses it to keep one copy of a session that two sources hold).
    """
    cols = {t.name: _empty(t) for t in SESSION_TABLES}
    origin: dict[str, list[str]] = {t.name: [] for t in SESSION_TABLES}
    audit = _Audit(redactor, cols["redactions"])
    for item in loaded:
        before = {name: _height(columns) for name, columns in cols.items()}
        ses = item.session
        tally = _Tally()
        _turn_rows(cols, audit, ses, tally)
        _call_rows(cols, audit, ses, tally)
        _head_rows(cols, audit, ses, item.source.path, tally, parser_versions[ses.agent])
        if source_column is not None:
            for name, columns in cols.items():
                origin[name].extend([item.source.path] * (_height(columns) - before[name]))
    tables = _tables(cols)
    if source_column is not None:
        for name, data in tables.items():
            tables[name] = data.append_column(source_column, pa.array(origin[name], type=pa.string()))
    return tables


class SessionStream:
    """The rows of one streamed session (`extractors.model.Streamed`), part by part, and its head last.

    `part_tables` gives the turn and tool-call rows of one part (and the redactions of their texts); `head_tables`,
    called once after every part, the session row (its turn and tool-call counts are those of the parts' rows),
    usage, links and census. Together they are the rows `session_tables` gives for the whole session.
    """

    def __init__(
        self,
        item: Streamed,
        parser_versions: Mapping[Agent, str],
        redactor: Redactor,
        *,
        source_column: str | None = None,
    ) -> None:
        self.head = item.head
        self.source_path = item.source.path
        self.parser_version = parser_versions[item.head.agent]
        self.redactor = redactor
        self.source_column = source_column
        self.tally = _Tally()

    @property
    def kept_turns(self) -> int:
        """How many turns of the parts so far became rows."""
        return self.tally.users + self.tally.assistants

    def part_tables(self, part: Session) -> dict[str, pa.Table]:
        cols = {t.name: _empty(t) for t in SESSION_TABLES}
        audit = _Audit(self.redactor, cols["redactions"])
        _turn_rows(cols, audit, part, self.tally)
        _call_rows(cols, audit, part, self.tally)
        return self._with_source(_tables(cols))

    def head_tables(self) -> dict[str, pa.Table]:
        cols = {t.name: _empty(t) for t in SESSION_TABLES}
        audit = _Audit(self.redactor, cols["redactions"])
        _head_rows(cols, audit, self.head, self.source_path, self.tally, self.parser_version)
        return self._with_source(_tables(cols))

    def _with_source(self, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
        if self.source_column is None:
            return tables
        return {
            name: data.append_column(self.source_column, pa.array([self.source_path] * data.num_rows, pa.string()))
            for name, data in tables.items()
        }


def reject_row(outcome: Rejected | Deferred, parser_version: str) -> dict[str, Any]:
    """One row of `rejects` for a rejected or deferred outcome."""
    rejected = isinstance(outcome, Rejected)
    return {
        "source_path": outcome.source.path,
        "agent": outcome.source.agent,
        "session_id": outcome.session_hint if isinstance(outcome, Rejected) else None,
        "outcome": "rejected" if rejected else "deferred",
        "reason_code": outcome.code.value,
        "detail": outcome.detail,
        "line": outcome.line if isinstance(outcome, Rejected) else None,
        "byte_offset": outcome.offset if isinstance(outcome, Rejected) else None,
        "parser_version": parser_version,
    }


def rows_table(table: Table, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts with every column of `table`) -> an Arrow table with exactly the schema's types."""
    return to_table(table, {name: [row[name] for row in rows] for name in table.column_names})
