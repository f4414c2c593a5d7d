"""Copilot CLI events already read -> the sessions of one file: the main session, then one per sub-agent. Pure.

docs/agents/copilot.md says where each rule comes from; the tables are in `extractors.copilot.tables`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors.bounded import GLUED_LINE_KIND, Limits, LineFields, clip
from extractors.bounded.numbers import INT64_MAX, INT64_MIN, OUT_OF_RANGE, token_count
from extractors.errors import RejectCode, RejectError
from extractors.gitremote import repository
from extractors.ids import session_id, subagent_session_id
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Role,
    Session,
    SessionLink,
    ToolCall,
    Turn,
    Usage,
)
from extractors.timeutil import parse_iso

from . import tables

AGENT = Agent("copilot")
# gitremote.repository, cached: every session of a repository names it again, and urlsplit is ~3 us a call.
_remote = functools.lru_cache(maxsize=256)(repository)

_Data = dict[str, Any]  # an event's envelope or payload
_When = datetime | None


@dataclass(frozen=True, slots=True)
class Workspace:
    """The flat keys of a session folder's `workspace.yaml` that the reader uses (docs/agents/copilot.md
    "workspace.yaml")."""

    cwd: str | None = None
    repository: str | None = None
    branch: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """What the path says: the session id its folder or file name gives (None outside `session-state/`), and the
    folder's workspace.yaml (None in the flat layout)."""

    native_id: str | None
    workspace: Workspace | None = None


@dataclass(slots=True)
class _Call:
    call_id: str
    turn_index: int
    name: str
    input: str | None
    output: str | None = None
    is_error: bool | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    spawned: str | None = None
    completed: bool = False


@dataclass(slots=True)
class _Thread:
    """The events of one conversation in the file: the main agent's (key None) or one sub-agent's."""

    key: str | None
    turns: list[Turn] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    census: Counter[tuple[str, Disposition]] = field(default_factory=Counter)
    out_of_range: int = 0
    first: datetime | None = None
    last: datetime | None = None
    last_response: int | None = None  # the index of its latest assistant.message (the response tool calls belong to)
    # Per-message output tokens (assistant.message.data.outputTokens) by process segment, as (index, model, output
    # tokens, time, messageId): made Usage rows only for a segment without session.shutdown metrics (cut short).
    message_usage: dict[int, list[tuple[int, str | None, int, _When, Any]]] = field(default_factory=dict)
    call_usage: list[Usage] = field(default_factory=list)  # assistant.usage events (streams)
    spawning_call: str | None = None

    def count(self, kind: str, disposition: Disposition) -> None:
        census, key = self.census, (kind, disposition)
        census[key] = census.get(key, 0) + 1

    def model(self, name: Any) -> str | None:
        if not isinstance(name, str) or not name.strip():
            return None
        if name not in self.models:
            self.models.append(name)
        return name


@dataclass(slots=True)
class _Parser:
    limits: Limits
    layout: Layout
    main: _Thread = field(default_factory=lambda: _Thread(None))
    subagents: dict[str, _Thread] = field(default_factory=dict)
    agent_of_call: dict[str, str] = field(default_factory=dict)  # spawning tool call id -> sub-agent key
    native_id: str | None = None
    result_id: str | None = None  # `result.sessionId` of a stdout stream
    started: datetime | None = None
    version: str = ""
    versions: list[str] = field(default_factory=list)
    vscode: bool = False
    cwd: str | None = None
    branch: str | None = None
    repo: str | None = None
    current_model: str | None = None
    segment: int = 0
    shutdown_usage: dict[int, list[Usage]] = field(default_factory=dict)  # segment -> modelMetrics rows
    glued: int = 0
    stamp: Any = None  # the latest event's `timestamp` as written, and `when`, what parse_iso makes of it
    when: datetime | None = None

    # --- dispatch --------------------------------------------------------------------------------------------------

    def feed(self, line: LineFields) -> None:
        index, _offset, record, _line, part, parts, _size, _crc = line
        if parts > 1 and part == 0:  # Line.starts_glued_line
            self.glued += 1
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(kind, str):
            self.main.count("(untyped)", Disposition.SKIPPED)
            return
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise RejectError(RejectCode.BAD_SHAPE, f"a {kind} event whose data is not an object", line=index)
        # Events come in bursts written in the same millisecond: a time equal to the last one is not read again.
        stamp = record.get("timestamp")
        if stamp != self.stamp:
            self.stamp, self.when = stamp, parse_iso(stamp)
        when = self.when
        agent, call = record.get("agentId"), data.get("parentToolCallId")
        thread = self.main if agent is None and call is None else self.thread(agent, call)
        if when is not None:  # _Thread.saw, inline: once per event
            if thread.first is None or when < thread.first:
                thread.first = when
            if thread.last is None or when > thread.last:
                thread.last = when
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, thread, data, index, when, record)
        else:
            census = thread.census
            key = _COUNTED.get(kind) or (kind, Disposition.SKIPPED)
            census[key] = census.get(key, 0) + 1

    def thread(self, agent: Any, call: Any) -> _Thread:
        """The conversation an event belongs to: a sub-agent's when the envelope names its `agentId` (or, without
        one, when the payload names the `parentToolCallId` that spawned it); else the main agent's
        (docs/agents/copilot.md "Sub-agents")."""
        key: str | None = None
        if isinstance(agent, str) and agent:
            key = agent
            if isinstance(call, str) and call:
                self.agent_of_call.setdefault(call, agent)
        elif isinstance(call, str) and call:
            key = self.agent_of_call.get(call, call)
        if key is None:
            return self.main
        child = self.subagents.get(key)
        if child is None:
            child = self.subagents[key] = _Thread(key)
        if child.spawning_call is None and isinstance(call, str) and call:
            child.spawning_call = call
        return child

    # --- session lifecycle -----------------------------------------------------------------------------------------

    def start(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        sid = data.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise RejectError(RejectCode.BAD_SHAPE, "a session.start without a string sessionId", line=index)
        if self.native_id is not None and sid != self.native_id:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"two session.start events with different session ids ({self.native_id!r}, {sid!r})",
                line=index,
            )
        self.native_id = sid
        started = parse_iso(data.get("startTime"))
        if started is not None and (self.started is None or started < self.started):
            self.started = started
        version = data.get("copilotVersion")
        if isinstance(version, str) and version:
            self.version = self.version or version
            if version not in self.versions:
                self.versions.append(version)
        self.vscode = self.vscode or tables.VSCODE_FIELD in data
        self.context(data.get("context"))
        model = data.get("selectedModel")
        self.current_model = model if isinstance(model, str) and model and model != "auto" else self.current_model
        self.main.count(
            "session.start/vscode" if tables.VSCODE_FIELD in data else "session.start", Disposition.METADATA
        )

    def resume(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        # A resume appends a new process segment to the same file (docs/agents/copilot.md "Resumes").
        self.segment += 1
        self.context(data.get("context"))
        model = data.get("selectedModel")
        self.current_model = model if isinstance(model, str) and model and model != "auto" else self.current_model
        self.main.count("session.resume", Disposition.METADATA)

    def context(self, context: Any) -> None:
        if not isinstance(context, dict):
            return
        cwd, branch, repo = context.get("cwd"), context.get("branch"), context.get("repository")
        self.cwd = self.cwd or (cwd if isinstance(cwd, str) and cwd else None)
        self.branch = branch if isinstance(branch, str) and branch else self.branch
        if isinstance(repo, str) and repo and self.repo is None:
            host = context.get("repositoryHost")
            self.repo = _remote(f"https://{host if isinstance(host, str) and host else 'github.com'}/{repo}")

    def shutdown(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        """The end of a process segment: its `modelMetrics` are the segment's totals per model (docs/agents/copilot.md
        "Tokens")."""
        metrics = data.get("modelMetrics")
        rows: list[Usage] = []
        if isinstance(metrics, dict):
            for model, entry in metrics.items():
                usage = entry.get("usage") if isinstance(entry, dict) else None
                if not isinstance(usage, dict):
                    continue
                row = self.usage_row(usage, index, model, when, None)
                if row is not None:
                    rows.append(row)
                    self.main.model(model)
        if rows:
            self.shutdown_usage.setdefault(self.segment, []).extend(rows)
        self.main.count("session.shutdown", Disposition.METADATA)

    # --- turns -----------------------------------------------------------------------------------------------------

    def user(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        """A person's turn only when the person typed it (docs/agents/copilot.md "A person's turn")."""
        content = data.get("content")
        if content is not None and not isinstance(content, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a user.message whose content is not text", line=index)
        text = content or ""
        source = data.get("source")
        if thread.key is not None:
            thread.count("user.message/subagent", Disposition.HARNESS)  # the parent agent's prompt to it
        elif isinstance(source, str) and source.startswith(tables.HARNESS_SOURCES):
            thread.count(f"user.message/source/{source.split('-', 1)[0]}", Disposition.HARNESS)
        elif data.get("isAutopilotContinuation") is True:
            thread.count("user.message/autopilot", Disposition.HARNESS)
        elif text.lstrip().startswith(tables.SKILL_CONTEXT):
            thread.count("user.message/skill_context", Disposition.HARNESS)
        else:
            attachments = _attachments(data.get("attachments"))
            if not text.strip() and not attachments:
                thread.count("user.message/empty", Disposition.SKIPPED)
                return
            thread.turns.append(Turn(index, Role.USER, clip(text, self.limits), when, None, attachments))
            delivery = data.get("delivery")
            steered = isinstance(delivery, str) and delivery in ("steering", "queued")
            thread.count(f"user.message/{delivery}" if steered else "user.message", Disposition.TURN)

    def assistant(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        content = data.get("content")
        if content is not None and not isinstance(content, str):
            raise RejectError(RejectCode.BAD_SHAPE, "an assistant.message whose content is not text", line=index)
        model = data.get("model")
        if model.__class__ is not str or model not in thread.models:  # a model already met is one _Thread.model took
            model = thread.model(model) or thread.model(self.current_model)
        thread.last_response = index
        requests = data.get("toolRequests")
        if isinstance(requests, list):
            for raw in requests:
                self.request(thread, raw, index)
        elif requests is not None and not isinstance(requests, str):
            # A string is what redacted captures hold ("[REDACTED]"); the calls are then read from their
            # tool.execution_start events.
            raise RejectError(RejectCode.BAD_SHAPE, "an assistant.message whose toolRequests is not a list", line=index)
        output = data.get("outputTokens")
        if output.__class__ is not int or not INT64_MIN <= output <= INT64_MAX:  # the common case, without a call
            output, bad = token_count(output)
            thread.out_of_range += bad
        if output is not None:
            rows = thread.message_usage.get(self.segment)
            if rows is None:
                rows = thread.message_usage[self.segment] = []
            rows.append((index, model, output, when, data.get("messageId")))
        if content and content.strip():
            thread.turns.append(Turn(index, Role.ASSISTANT, clip(content, self.limits), when, model))
            thread.count("assistant.message", Disposition.TURN)
        elif isinstance(requests, list) and requests:
            thread.count("assistant.message/tool_requests", Disposition.TOOL)
        else:
            thread.count("assistant.message/empty", Disposition.SKIPPED)

    def request(self, thread: _Thread, raw: Any, index: int) -> None:
        if not isinstance(raw, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a toolRequests entry that is not an object", line=index)
        call_id, name = raw.get("toolCallId"), raw.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a tool request without a string toolCallId and name", line=index)
        known = thread.calls.get(call_id)
        if known is not None:  # its execution_start came first: the request names the response that made it
            known.turn_index = index
            known.input = known.input if known.input is not None else self.arguments(raw.get("arguments"))
            return
        thread.calls[call_id] = _Call(call_id, index, name, self.arguments(raw.get("arguments")))

    def arguments(self, value: Any) -> str | None:
        """`arguments` is an object or a JSON string (docs/agents/copilot.md "Tool calls"): stored as JSON text."""
        if value is None:
            return None
        text = value if isinstance(value, str) else _json_text(value)
        return clip(text, self.limits)

    # --- tools -----------------------------------------------------------------------------------------------------

    def tool_start(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        call_id, name = data.get("toolCallId"), data.get("toolName")
        if not isinstance(call_id, str) or not call_id:
            raise RejectError(RejectCode.BAD_SHAPE, "a tool.execution_start without a string toolCallId", line=index)
        call = thread.calls.get(call_id)
        if call is None:
            # No request names it (a redacted toolRequests, or the start written first): the call is read from here,
            # on the latest response of its conversation.
            at = thread.last_response if thread.last_response is not None else index
            call = thread.calls[call_id] = _Call(
                call_id, at, name if isinstance(name, str) else "", self.arguments(data.get("arguments"))
            )
        call.started_at = call.started_at or when
        thread.count("tool.execution_start", Disposition.TOOL)

    def tool_complete(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        call_id = data.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RejectError(RejectCode.BAD_SHAPE, "a tool.execution_complete without a string toolCallId", line=index)
        call = thread.calls.get(call_id)
        if call is None:
            thread.count("tool.execution_complete/orphan", Disposition.TOOL)
            return
        if call.completed:
            thread.count("tool.execution_complete/again", Disposition.TOOL)
            return
        call.completed = True
        call.output = _result_text(data.get("result"), data.get("error"), self.limits)
        success = data.get("success")
        call.is_error = (not success) if isinstance(success, bool) else (True if data.get("error") else None)
        call.ended_at = when
        thread.count("tool.execution_complete", Disposition.TOOL)

    def model_change(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        model = data.get("newModel")
        self.current_model = model if isinstance(model, str) and model else self.current_model
        thread.count("session.model_change", Disposition.METADATA)

    def result(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        sid = record.get("sessionId")
        self.result_id = sid if isinstance(sid, str) and sid else self.result_id
        thread.count("result", Disposition.METADATA)

    def subagent_started(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        call, agent = data.get("toolCallId"), data.get("agentId")
        if isinstance(call, str) and call and isinstance(agent, str) and agent:
            self.agent_of_call.setdefault(call, agent)
        thread.count("subagent.started", Disposition.METADATA)

    # --- usage -----------------------------------------------------------------------------------------------------

    def call_usage(self, thread: _Thread, data: _Data, index: int, when: _When, record: _Data) -> None:
        model = data.get("model")
        row = self.usage_row(data, index, model, when, _text(data.get("apiCallId")), thread)
        if row is not None:
            thread.call_usage.append(row)
            thread.model(model)
        thread.count("assistant.usage", Disposition.METADATA)

    def usage_row(
        self,
        usage: dict[str, Any],
        index: int,
        model: Any,
        when: datetime | None,
        response_id: str | None,
        thread: _Thread | None = None,
    ) -> Usage | None:
        """A Usage row; `inputTokens` includes the cache reads and writes, stored net of them."""
        counts: dict[str, int | None] = {}
        for name in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens"):
            value = usage.get(name)
            if value.__class__ is int and INT64_MIN <= value <= INT64_MAX:  # token_count's common case, inline
                counts[name] = value
            else:
                counts[name], bad = token_count(value)
                (thread or self.main).out_of_range += bad
        if all(v is None for v in counts.values()):
            return None
        gross, read, write = counts["inputTokens"], counts["cacheReadTokens"], counts["cacheWriteTokens"]
        net = gross
        if gross is not None and gross >= (read or 0) + (write or 0):
            net = gross - (read or 0) - (write or 0)
        return Usage(
            turn_index=index,
            model=model if isinstance(model, str) and model else None,
            input_tokens=net,
            output_tokens=counts["outputTokens"],
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=counts["reasoningTokens"],
            timestamp=when,
            response_id=response_id,
        )

    # --- the sessions ----------------------------------------------------------------------------------------------

    def sessions(self) -> list[Session]:
        """The main session, then each sub-agent's with a turn or a tool call, in the order they first appear."""
        native = self.native_id or self.result_id or self.layout.native_id
        if native is None:
            raise RejectError(
                RejectCode.MISSING_SESSION_ID, "no session.start, no result and no session id in the path"
            )
        if self.layout.native_id is not None and self.native_id is not None and self.layout.native_id != native:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"session.start says {native!r} in the file of session {self.layout.native_id!r}",
                session_hint=session_id(AGENT, self.layout.native_id),
            )
        sid = session_id(AGENT, native)
        # One usage rule per file (docs/agents/copilot.md "Tokens"): per-call assistant.usage events when the file
        # has any (a stdout stream); else, per process segment, its session.shutdown modelMetrics when it has them
        # and the per-message outputTokens of that segment's messages when it has none.
        per_call = bool(self.main.call_usage) or any(c.call_usage for c in self.subagents.values())
        children: list[Session] = []
        for key, child in self.subagents.items():
            spawning = child.spawning_call or next((c for c, a in self.agent_of_call.items() if a == key), None)
            child_id = subagent_session_id(sid, key)
            if not child.turns and not child.calls:
                self.main.census.update(child.census)  # nothing to load: its records are counted with the parent
                self.main.out_of_range += child.out_of_range
                continue
            parent_call = self.main.calls.get(spawning) if spawning else None
            if parent_call is not None:
                parent_call.spawned = child_id
            usage = child.call_usage if per_call else self.messages_outside_shutdowns(child)
            children.append(self.session(child, child_id, key, sid, spawning, tuple(usage)))
        if per_call:
            usage = self.main.call_usage
        else:
            usage = [u for seg in sorted(self.shutdown_usage) for u in self.shutdown_usage[seg]]
            usage += self.messages_outside_shutdowns(self.main)
            usage.sort(key=lambda u: u.turn_index)
        main = self.session(self.main, sid, native, None, None, tuple(usage))
        return [main, *children]

    def messages_outside_shutdowns(self, thread: _Thread) -> list[Usage]:
        return [
            Usage(index, model, None, output, timestamp=when, response_id=_text(message_id))
            for seg, rows in sorted(thread.message_usage.items())
            if seg not in self.shutdown_usage
            for index, model, output, when, message_id in rows
        ]

    def session(
        self,
        thread: _Thread,
        sid: str,
        native: str,
        parent: str | None,
        spawning: str | None,
        usage: tuple[Usage, ...],
    ) -> Session:
        main = parent is None
        started = (self.started or thread.first) if main else (thread.first or self.started)
        if started is None:
            raise RejectError(RejectCode.MISSING_TIMESTAMP, "no usable time in the events", session_hint=sid)
        ended = max(started, thread.last) if thread.last else None
        version = self.version
        census = Counter({(kind, version, disposition): n for (kind, disposition), n in thread.census.items()})
        if thread.out_of_range:
            census[OUT_OF_RANGE] += thread.out_of_range
        if main and self.glued:
            census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] += self.glued
        workspace = self.layout.workspace or Workspace()
        calls = sorted(thread.calls.values(), key=lambda c: c.turn_index)
        models = tuple(thread.models) or ((self.current_model,) if main and self.current_model else ())
        return Session(
            agent=AGENT,
            session_id=sid,
            native_id=native,
            started_at=started,
            ended_at=ended,
            parent_session_id=parent,
            cwd=self.cwd or workspace.cwd,
            git_branch=self.branch or workspace.branch,
            git_repository=self.repo or workspace.repository,
            title=workspace.title if main else None,
            models=models,
            cli_versions=tuple(self.versions),
            turns=tuple(thread.turns),
            tool_calls=tuple(
                ToolCall(
                    c.call_id, c.turn_index, c.name, c.input, c.output, c.is_error, c.started_at, c.ended_at, c.spawned
                )
                for c in calls
            ),
            usage=usage,
            links=(SessionLink(parent, LinkKind.SUBAGENT, spawning),) if parent else (),
            census=census,
        )


# The handler of each event type the parse reads (tables.HANDLED); the others are only counted, under _COUNTED's key.
_HANDLERS: dict[str, Callable[[_Parser, _Thread, _Data, int, _When, _Data], None]] = {
    "session.start": _Parser.start,
    "session.resume": _Parser.resume,
    "session.shutdown": _Parser.shutdown,
    "user.message": _Parser.user,
    "assistant.message": _Parser.assistant,
    "assistant.usage": _Parser.call_usage,
    "tool.execution_start": _Parser.tool_start,
    "tool.execution_complete": _Parser.tool_complete,
    "subagent.started": _Parser.subagent_started,
    "session.model_change": _Parser.model_change,
    "result": _Parser.result,
}
assert _HANDLERS.keys() == tables.HANDLED
_COUNTED = {kind: (kind, disposition) for kind, (disposition, _why) in tables.EVENT_TYPES.items()}


# json.dumps(value, ensure_ascii=False, sort_keys=True), without building an encoder on each call.
_json_text = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _attachments(value: Any) -> tuple[str, ...]:
    """References to the files, folders and selections a person attached: `<type>:<path or name>`."""
    if not isinstance(value, list):
        return ()
    refs: list[str] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        kind = _text(item.get("type")) or "attachment"
        where = _text(item.get("path")) or _text(item.get("displayName")) or _text(item.get("url")) or ""
        refs.append(f"{kind}:{where}" if where else kind)
    return tuple(refs)


def _result_text(result: Any, error: Any, limits: Limits) -> str | None:
    """A tool's output: `result` is a string or `{content, detailedContent, ...}`; a failed call may hold only
    `error{message}` (docs/agents/copilot.md "Tool calls")."""
    text: str | None = None
    if isinstance(result, str):
        text = result
    elif isinstance(result, dict):
        for key in ("content", "detailedContent"):
            if isinstance(result.get(key), str):
                text = result[key]
                break
        else:
            text = _json_text(result)
    elif result is not None:
        text = _json_text(result)
    if text is None and isinstance(error, dict) and isinstance(error.get("message"), str):
        text = error["message"]
    elif text is None and isinstance(error, str):
        text = error
    return None if text is None else clip(text, limits)


def parse_events(lines: Iterable[LineFields], limits: Limits, layout: Layout) -> list[Session]:
    """The sessions of one events file. Pure. Raises RejectError (bad_shape, missing_session_id,
    missing_timestamp, inconsistent_source)."""
    parser = _Parser(limits, layout)
    for line in lines:
        parser.feed(line)
    return parser.sessions()
