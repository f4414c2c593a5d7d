"""Pure: complete `Session`s and rejected outcomes -> Arrow tables shaped by `transforms.schema`.

No filesystem, no clock, no environment: the same outcomes give the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from extractors import ids
from extractors.model import Agent, Deferred, Disposition, Loaded, Rejected, Role, Source
from transforms.redact import Redactor
from transforms.schema import REJECTS, SESSION_TABLES, SOURCES, Table


def _empty(table: Table) -> dict[str, list[Any]]:
    return {name: [] for name in table.column_names}


def to_table(table: Table, columns: Mapping[str, list[Any]]) -> pa.Table:
    """Columns (lists in schema order) -> an Arrow table with exactly the schema's types."""
    return pa.table({c.name: pa.array(columns[c.name], type=c.type) for c in table.columns}, schema=table.arrow_schema)


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


def session_tables(
    loaded: Iterable[Loaded], parser_versions: Mapping[Agent, str], redactor: Redactor
) -> dict[str, pa.Table]:
    """Rows of every session-keyed table (sessions, turns, tool_calls, usage, session_links, record_kinds,
    redactions), every stored text redacted by `redactor` (a raw `Redactor(None)` keeps them as they are).

    Redacted: turn text, tool inputs and outputs, and the session's title, cwd and git branch (a secret in a
    cwd is rare, and a redacted cwd still groups its sessions: the marker is the same for the same value).
    Not redacted: ids, names, model and version strings, and attachment references (`image/png sha256:...`).
    """
    cols = {t.name: _empty(t) for t in SESSION_TABLES}
    s, t, c, u, lk, rk = (
        cols["sessions"],
        cols["turns"],
        cols["tool_calls"],
        cols["usage"],
        cols["session_links"],
        cols["record_kinds"],
    )
    audit = _Audit(redactor, cols["redactions"])
    for item in loaded:
        ses = item.session
        sid = ses.session_id
        agent = ses.agent.value
        start = ses.started_at
        users = assistants = 0
        times: dict[int, datetime] = {}
        for turn in ses.turns:
            if not turn.text.strip() and not turn.attachments:
                continue  # an empty turn is dropped (an image-only prompt is not empty); the others keep their index
            if turn.role is Role.USER:
                users += 1
            else:
                assistants += 1
            tid = ids.turn_id(sid, turn.index)
            when = turn.timestamp or start
            times[turn.index] = when
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
        for call in ses.tool_calls:
            cid = ids.tool_call_id(sid, call.call_id)
            tid = ids.turn_id(sid, call.turn_index)
            when = call.started_at or times.get(call.turn_index) or start
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
        for use in ses.usage:
            u["usage_id"].append(ids.usage_id(sid, use.turn_index))
            u["session_id"].append(sid)
            u["agent"].append(agent)
            u["turn_index"].append(use.turn_index)
            u["response_id"].append(use.response_id)
            u["model"].append(use.model)
            u["timestamp"].append(use.timestamp or start)
            u["input_tokens"].append(use.input_tokens)
            u["output_tokens"].append(use.output_tokens)
            u["cache_read_tokens"].append(use.cache_read_tokens)
            u["cache_write_tokens"].append(use.cache_write_tokens)
            u["reasoning_tokens"].append(use.reasoning_tokens)
            u["cost_usd"].append(use.cost_usd)
        for link in ses.links:
            lk["session_id"].append(sid)
            lk["agent"].append(agent)
            lk["other_session_id"].append(link.other_session_id)
            lk["kind"].append(link.kind.value)
            lk["tool_call_id"].append(link.tool_call_id)
        records = 0
        for (kind, version, disposition), n in ses.census.items():
            records += n
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
        s["source_path"].append(item.source.path)
        s["cwd"].append(audit(ses.cwd, "sessions.cwd", sid, agent, start))
        s["git_branch"].append(audit(ses.git_branch, "sessions.git_branch", sid, agent, start))
        s["title"].append(audit(ses.title, "sessions.title", sid, agent, start))
        s["models"].append(list(ses.models))
        s["cli_versions"].append(list(ses.cli_versions))
        s["started_at"].append(start)
        s["ended_at"].append(ses.ended_at)
        s["archived"].append(ses.archived)
        s["turn_count"].append(users + assistants)
        s["user_turn_count"].append(users)
        s["assistant_turn_count"].append(assistants)
        s["tool_call_count"].append(len(ses.tool_calls))
        s["harness_record_count"].append(ses.count(Disposition.HARNESS))
        s["skipped_record_count"].append(ses.count(Disposition.SKIPPED))
        s["record_count"].append(records)
        s["parser_version"].append(parser_versions[ses.agent])
    return {table.name: to_table(table, cols[table.name]) for table in SESSION_TABLES}


def reject_table(outcomes: Iterable[Rejected | Deferred], parser_versions: Mapping[Agent, str]) -> pa.Table:
    """Rows of `rejects` for rejected and deferred outcomes."""
    cols = _empty(REJECTS)
    for out in outcomes:
        cols["source_path"].append(out.source.path)
        cols["agent"].append(out.source.agent.value)
        if isinstance(out, Rejected):
            cols["session_id"].append(out.session_hint)
            cols["outcome"].append("rejected")
            cols["line"].append(out.line)
            cols["byte_offset"].append(out.offset)
        else:
            cols["session_id"].append(None)
            cols["outcome"].append("deferred")
            cols["line"].append(None)
            cols["byte_offset"].append(None)
        cols["reason_code"].append(out.code.value)
        cols["detail"].append(out.detail)
        cols["parser_version"].append(parser_versions[out.source.agent])
    return to_table(REJECTS, cols)


def source_outcome(loaded: int, rejected: int, deferred: bool) -> str:
    """The manifest's outcome word for a source."""
    if deferred:
        return "deferred"
    if rejected and loaded:
        return "partial"
    if rejected:
        return "rejected"
    return "loaded"


def source_row(
    source: Source,
    *,
    content_sha256: str | None,
    parser_version: str,
    loaded: int,
    rejected: int,
    deferred: bool,
    present: bool = True,
) -> dict[str, Any]:
    """One manifest row."""
    return {
        "source_path": source.path,
        "agent": source.agent.value,
        "kind": source.kind,
        "root": source.root,
        "size_bytes": source.size,
        "mtime": datetime.fromtimestamp(source.mtime_ns / 1e9, tz=UTC),
        "mtime_ns": source.mtime_ns,
        "content_sha256": content_sha256,
        "parser_version": parser_version,
        "outcome": source_outcome(loaded, rejected, deferred),
        "sessions_loaded": loaded,
        "sessions_rejected": rejected,
        "present": present,
    }


def source_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Manifest rows -> an Arrow table of `sources`."""
    cols = _empty(SOURCES)
    for row in rows:
        for name in SOURCES.column_names:
            cols[name].append(row[name])
    return to_table(SOURCES, cols)
