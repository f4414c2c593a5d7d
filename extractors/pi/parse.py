"""From the records of one Pi session file to its Sessions: header, tree, fork gate, branches, turns, tools, usage.

Pure: no I/O. The rules (docs/agents/pi.md), each tested in tests/test_pi.py:
- Header: the first record (after OMP's `title` slot lines) is `{"type":"session","id":...}`; its `id` is the
  native id. A repeated header with the same id (pi's duplicate-header bug) is metadata; another id is
  `inconsistent_source`.
- Tree: v2/v3 entries carry `id`/`parentId`; v1 entries carry neither and are chained in line order (as pi's own
  v1->v2 migration does). An entry whose parent is not in the file hangs on the entry before it in the file (pi's
  `createBranchedSession` drops `label` entries from the path it copies, leaving their children's `parentId`
  dangling); a cycle is `undecidable_thread`. An entry id met twice is a copy (counted `duplicate/<kind>`).
- Active branch: walk `parentId` from the last entry to the root (pi's own leaf on load). Those entries are the
  session. Every other branch, grouped from each further leaf (in file order) up to the first entry already
  placed, is a session of its own, `<native id>-branch-<its leaf id>`, linked FORK to the session holding its fork
  point (docs/agents/pi.md "Branches"); a branch with no turn and no tool call is counted `abandoned/<kind>`.
- Fork gate: a header with `branchedFrom` (v1, a path) or `parentSession` (v3: a path; OMP: an id) copies the
  parent's entries, with their own times, before the fork's own: entries older than the header's time, up to the
  first that is not, are the parent's (counted `copied/<kind>`, never turns), and the session links FORK to it.
- Times: a message's `timestamp` (epoch ms), else its entry's ISO `timestamp`. Start = the earliest of the
  session's own message times (a v1 header can be later than its first messages), else the header's time.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from extractors.blobref import base64_reference
from extractors.bounded import Limits, Line, clip, count_glued_line
from extractors.bounded.numbers import OUT_OF_RANGE, fit_float, token_count
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
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
from extractors.pi.tables import COMMAND_PREFIX, ENTRY_KINDS, MESSAGE_ROLES
from extractors.timeutil import parse_any, parse_iso

AGENT = Agent("pi")
MAIN = ""  # the owner key of the active branch (branch sessions are keyed by their leaf's id)

Census = Counter[tuple[str, str, Disposition]]


@dataclass(slots=True)
class Entry:
    index: int
    kind: str
    id: str
    parent: str | None
    record: dict[str, Any]
    at: datetime | None  # the entry's ISO `timestamp`
    copied: bool = False


@dataclass(frozen=True, slots=True)
class Header:
    native_id: str
    version: str
    at: datetime | None
    cwd: str | None
    parent: str | None  # the fork parent's native id
    model: str | None


@dataclass(slots=True)
class _Call:
    call: ToolCall
    owner: str
    output: str | None = None
    is_error: bool | None = None
    ended_at: datetime | None = None


@dataclass(slots=True)
class _Part:
    """What one session of the file is made of while it is built."""

    turns: list[Turn] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)  # every own time (message and entry)
    message_times: list[datetime] = field(default_factory=list)
    census: Census = field(default_factory=Counter)
    title: str | None = None
    fork_of: str | None = None  # owner key holding the fork point
    calls: int = 0


def parse_session_file(lines: Iterable[Line], limits: Limits) -> list[Session]:
    """The sessions of one Pi file: the active branch first, then each other branch. Raises RejectError."""
    census: Census = Counter()
    header: Header | None = None
    title: str | None = None
    entries: list[Entry] = []
    by_id: dict[str, Entry] = {}
    previous: str | None = None
    for line in lines:
        count_glued_line(line, census)
        record, index = line.record, line.index
        kind = record.get("type")
        if header is None:
            if kind == "title":
                census[("title", "", Disposition.METADATA)] += 1
                title = _text(record.get("title")) or title
                continue
            header = _header(record, index)
            census[("session", header.version, Disposition.METADATA)] += 1
            continue
        if kind == "session":
            if record.get("id") != header.native_id:
                raise RejectError(
                    RejectCode.INCONSISTENT_SOURCE,
                    f"a second session header with id {record.get('id')!r} in session {header.native_id!r}",
                    line=index,
                    session_hint=session_id(AGENT, header.native_id),
                )
            census[("session/repeated", header.version, Disposition.METADATA)] += 1
            continue
        if not isinstance(kind, str):
            census[("(untyped)", header.version, Disposition.SKIPPED)] += 1
            continue
        native = record.get("id")
        if isinstance(native, str) and native:
            parent = record.get("parentId")
            parent = parent if isinstance(parent, str) and parent else None
        else:
            native, parent = f"#{index}", previous  # v1: no ids, chained in line order
        if native in by_id:
            census[(f"duplicate/{kind}", header.version, Disposition.SKIPPED)] += 1
            continue
        entry = Entry(index, kind, native, parent, record, parse_iso(record.get("timestamp")))
        entries.append(entry)
        by_id[native] = entry
        previous = native
    if header is None:
        raise RejectError(RejectCode.NO_CONVERSATION, "no session header (an empty file, or title lines only)")
    hint = session_id(AGENT, header.native_id)
    _mark_copied(entries, header, hint)
    owners = _owners(entries, by_id, hint)
    return _Builder(header, limits, census, title, owners).build(entries)


def _header(record: dict[str, Any], index: int) -> Header:
    if record.get("type") != "session":
        raise RejectError(
            RejectCode.MISSING_SESSION_ID,
            f"the first record is {record.get('type')!r}, not the session header",
            line=index,
        )
    native = record.get("id")
    if not isinstance(native, str) or not native.strip() or "/" in native or "\\" in native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "the session header has no usable id", line=index)
    version = record.get("version", 1)
    parent = _parent_id(record.get("branchedFrom")) or _parent_id(record.get("parentSession"))
    return Header(
        native_id=native,
        version=str(version) if isinstance(version, int | str) and not isinstance(version, bool) else "",
        at=parse_iso(record.get("timestamp")),
        cwd=_text(record.get("cwd")),
        parent=parent,
        model=_text(record.get("modelId")),
    )


def _parent_id(value: Any) -> str | None:
    """The parent's native id from `branchedFrom` / `parentSession`: a path `.../<ISO time>_<id>.jsonl` (pi, Prime)
    gives the id after the first `_` of its file name; a bare id (OMP) is the id."""
    text = _text(value)
    if text is None:
        return None
    if "/" not in text and "\\" not in text and not text.endswith(".jsonl"):
        return text.strip()
    name = text.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
    stem = name.split("_", 1)[1] if "_" in name else name
    return stem or None


def _mark_copied(entries: list[Entry], header: Header, hint: str) -> None:
    """The fork gate: a fork's leading entries older than its header are the parent's copies."""
    if header.parent is None:
        return
    if header.at is None:
        raise RejectError(
            RejectCode.UNDECIDABLE_THREAD,
            "a forked session whose header has no usable time: its own entries cannot be told from the copied ones",
            session_hint=hint,
        )
    for entry in entries:
        if entry.at is not None and entry.at >= header.at:
            return
        entry.copied = True


def _owners(entries: list[Entry], by_id: dict[str, Entry], hint: str) -> dict[str, tuple[str, str | None]]:
    """Entry id -> (owner key, owner key of the fork point for a branch's first entry). The active branch is MAIN."""
    position = {entry.id: n for n, entry in enumerate(entries)}

    def parent_of(entry: Entry) -> str | None:
        if entry.parent is None:
            return None
        if entry.parent in by_id:
            return entry.parent
        n = position[entry.id]
        return entries[n - 1].id if n > 0 else None  # a dangling parent hangs on the entry before it

    owners: dict[str, tuple[str, str | None]] = {}
    has_child: set[str] = set()
    for entry in entries:
        parent = parent_of(entry)
        if parent is not None:
            has_child.add(parent)
    leaves = [entry for entry in entries if entry.id not in has_child]
    if entries:
        leaves = [entries[-1]] + [leaf for leaf in leaves if leaf is not entries[-1]]
    for n, leaf in enumerate(leaves):
        key = MAIN if n == 0 else leaf.id
        walked: list[str] = []
        seen: set[str] = set()
        current: str | None = leaf.id
        while current is not None and current not in owners:
            if current in seen:
                raise RejectError(
                    RejectCode.UNDECIDABLE_THREAD, f"a cycle in the entry tree at {current!r}", session_hint=hint
                )
            seen.add(current)
            walked.append(current)
            current = parent_of(by_id[current])
        fork = owners[current][0] if current is not None else (None if key == MAIN else MAIN)
        for native in walked:
            owners[native] = (key, None)
        if walked and key != MAIN:
            owners[walked[-1]] = (key, fork)
    # Entries on no path from a leaf cannot exist (every entry leads to a leaf); a cycle with no leaf can.
    for entry in entries:
        if entry.id not in owners:
            raise RejectError(
                RejectCode.UNDECIDABLE_THREAD,
                f"entry {entry.id!r} lies on a cycle of the entry tree",
                session_hint=hint,
            )
    return owners


class _Builder:
    def __init__(
        self,
        header: Header,
        limits: Limits,
        census: Census,
        title: str | None,
        owners: dict[str, tuple[str, str | None]],
    ) -> None:
        self.header = header
        self.limits = limits
        self.owners = owners
        self.parts: dict[str, _Part] = {MAIN: _Part(census=census, title=title)}
        self.calls: dict[str, _Call] = {}
        self.bash = 0

    def count(self, part: _Part, kind: str, disposition: Disposition) -> None:
        part.census[(kind, self.header.version, disposition)] += 1

    def build(self, entries: list[Entry]) -> list[Session]:
        for entry in entries:
            key, fork = self.owners[entry.id]
            part = self.parts.get(key)
            if part is None:
                part = self.parts[key] = _Part()
            if fork is not None:
                part.fork_of = fork
            if entry.copied:
                self.count(part, f"copied/{_kind(entry)}", Disposition.SKIPPED)
                continue
            if entry.at is not None:
                part.times.append(entry.at)
            self.entry(entry, key, part)
        return self.sessions()

    def entry(self, entry: Entry, key: str, part: _Part) -> None:
        record, kind = entry.record, entry.kind
        if kind == "message":
            self.message(entry, key, part)
            return
        if kind == "session_info":
            part.title = _text(record.get("name")) or part.title
        elif kind == "model_change":
            model = _text(record.get("modelId"))
            if model and model not in part.models:
                part.models.append(model)
        disposition = ENTRY_KINDS.get(kind, (Disposition.SKIPPED, ""))[0]
        self.count(part, kind, disposition)

    def message(self, entry: Entry, key: str, part: _Part) -> None:
        message = entry.record.get("message")
        if not isinstance(message, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a message entry without a message object", line=entry.index)
        role = message.get("role")
        at = parse_any(message.get("timestamp")) or entry.at
        if at is not None:
            part.times.append(at)
        if role == "user":
            self.user(entry, message, at, part)
        elif role == "assistant":
            self.assistant(entry, message, at, key, part)
        elif role == "toolResult":
            self.tool_result(entry, message, at, part)
        elif role == "bashExecution":
            self.bash_execution(entry, message, at, key, part)
        else:
            role = role if isinstance(role, str) else "(none)"
            self.count(part, f"message/{role}", MESSAGE_ROLES.get(role, (Disposition.SKIPPED, ""))[0])
            return
        if role in ("user", "assistant") and at is not None:
            part.message_times.append(at)

    def user(self, entry: Entry, message: dict[str, Any], at: datetime | None, part: _Part) -> None:
        texts, attachments = _content(message.get("content"), entry.index)
        text = "\n".join(texts)
        if not text.strip() and not attachments:
            self.count(part, "message/user/empty", Disposition.SKIPPED)
            return
        part.turns.append(Turn(entry.index, Role.USER, clip(text, self.limits), at, None, tuple(attachments)))
        command = text.lstrip().startswith(COMMAND_PREFIX)
        self.count(part, "message/user/command" if command else "message/user", Disposition.TURN)

    def assistant(self, entry: Entry, message: dict[str, Any], at: datetime | None, key: str, part: _Part) -> None:
        content = message.get("content")
        if content is None:
            content = []
        if not isinstance(content, list | str):
            raise RejectError(RejectCode.BAD_SHAPE, "assistant content that is not a list", line=entry.index)
        model = _text(message.get("model"))
        if model and model not in part.models:
            part.models.append(model)
        texts: list[str] = []
        calls = 0
        for item in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if not isinstance(item, dict):
                raise RejectError(
                    RejectCode.BAD_SHAPE, "an assistant content part that is not an object", line=entry.index
                )
            if item.get("type") == "text" and isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif item.get("type") == "toolCall":
                self.tool_call(entry, item, at, key)
                calls += 1
        part.calls += calls
        self.usage(entry, message, at, model, part)
        text = "\n".join(texts)
        if text.strip():
            part.turns.append(Turn(entry.index, Role.ASSISTANT, clip(text, self.limits), at, model))
            self.count(part, "message/assistant", Disposition.TURN)
        elif calls:
            self.count(part, "message/assistant/tool_calls", Disposition.TOOL)
        else:
            # Aborted or failed responses (`stopReason` aborted/error, empty content) and thinking-only ones.
            self.count(part, "message/assistant/empty", Disposition.SKIPPED)

    def tool_call(self, entry: Entry, item: dict[str, Any], at: datetime | None, key: str) -> None:
        call_id, name = item.get("id"), item.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a toolCall without a string id and name", line=entry.index)
        arguments = item.get("arguments")
        text = (
            arguments if isinstance(arguments, str) or arguments is None else json.dumps(arguments, ensure_ascii=False)
        )
        if call_id in self.calls:
            return  # the same call written again (a duplicated entry under another id): one call
        call = ToolCall(call_id, entry.index, name, None if text is None else clip(text, self.limits), started_at=at)
        self.calls[call_id] = _Call(call, key)

    def usage(self, entry: Entry, message: dict[str, Any], at: datetime | None, model: str | None, part: _Part) -> None:
        """One row per assistant message (pi's `usage` is per call). A row of zeros (an aborted request) is not
        kept: nothing was spent (docs/agents/pi.md "Tokens")."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        counts: list[int | None] = []
        for name in ("input", "output", "cacheRead", "cacheWrite", "reasoning"):
            value, out = token_count(usage.get(name))
            if out:
                part.census[OUT_OF_RANGE] += 1
            counts.append(value)
        cost = usage.get("cost")
        total, out = fit_float(cost.get("total")) if isinstance(cost, dict) else (None, False)
        if out:
            part.census[OUT_OF_RANGE] += 1
        if not any(counts) and not total:
            return
        tokens_in, tokens_out, cache_read, cache_write, reasoning = counts
        if _input_holds_cache(message, usage, at) and tokens_in is not None and cache_read:
            tokens_in = max(tokens_in - cache_read, 0)
        response = message.get("responseId")
        part.usage.append(
            Usage(
                entry.index,
                model,
                tokens_in,
                tokens_out,
                cache_read,
                cache_write,
                reasoning_tokens=reasoning,  # newer pi: the part of `output` that was reasoning
                cost_usd=total,
                timestamp=at,
                response_id=response if isinstance(response, str) and response else None,
            )
        )

    def tool_result(self, entry: Entry, message: dict[str, Any], at: datetime | None, part: _Part) -> None:
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a toolResult without a string toolCallId", line=entry.index)
        pending = self.calls.get(call_id)
        if pending is None:
            self.count(part, "message/toolResult/orphan", Disposition.TOOL)
            return
        texts, attachments = _content(message.get("content"), entry.index)
        pending.output = clip("\n".join(texts + [f"[{ref}]" for ref in attachments]), self.limits)
        error = message.get("isError")
        pending.is_error = error if isinstance(error, bool) else None
        pending.ended_at = at
        self.count(part, "message/toolResult", Disposition.TOOL)

    def bash_execution(self, entry: Entry, message: dict[str, Any], at: datetime | None, key: str, part: _Part) -> None:
        """The person's `!cmd`: a tool call by the person, made at its own record (docs/agents/pi.md "Tools")."""
        command = message.get("command")
        if not isinstance(command, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a bashExecution without a string command", line=entry.index)
        output = message.get("output")
        code = message.get("exitCode")
        failed = message.get("cancelled") is True or (
            isinstance(code, int) and not isinstance(code, bool) and code != 0
        )
        call_id = f"bash-{entry.id}"
        call = ToolCall(
            call_id,
            entry.index,
            "bash",
            clip(json.dumps({"command": command}, ensure_ascii=False), self.limits),
            clip(output, self.limits) if isinstance(output, str) else None,
            failed,
            at,
            at,
        )
        self.calls[call_id] = _Call(call, key, call.output, failed, at)
        part.calls += 1
        self.count(part, "message/bashExecution", Disposition.TOOL)

    def sessions(self) -> list[Session]:
        header = self.header
        main_id = session_id(AGENT, header.native_id)
        ids = {
            key: main_id if key == MAIN else session_id(AGENT, f"{header.native_id}-branch-{key}") for key in self.parts
        }
        main = self.parts[MAIN]
        empty = {key for key, part in self.parts.items() if key != MAIN and not part.turns and not part.calls}
        for key in empty:
            for (kind, version, _), n in self.parts[key].census.items():  # nothing said on it: not a session
                main.census[(f"abandoned/{kind}", version, Disposition.SKIPPED)] += n
        for part in self.parts.values():
            while part.fork_of in empty:  # a branch off a branch that is no session hangs on that one's fork point
                part.fork_of = self.parts[part.fork_of or MAIN].fork_of
        return [self.session(key, part, ids) for key, part in self.parts.items() if key not in empty]

    def session(self, key: str, part: _Part, ids: dict[str, str]) -> Session:
        header = self.header
        if key == MAIN:
            links = (SessionLink(session_id(AGENT, header.parent), LinkKind.FORK),) if header.parent else ()
            started = min(part.message_times) if part.message_times else header.at
            native = header.native_id
        else:
            links = (SessionLink(ids[part.fork_of or MAIN], LinkKind.FORK),)
            started = min(part.message_times) if part.message_times else min(part.times, default=header.at)
            native = f"{header.native_id}-branch-{key}"
        if started is None:
            raise RejectError(
                RejectCode.MISSING_TIMESTAMP, "no usable time in the header or any message", session_hint=ids[key]
            )
        calls = tuple(
            ToolCall(
                c.call.call_id,
                c.call.turn_index,
                c.call.name,
                c.call.input,
                c.output,
                c.is_error,
                c.call.started_at,
                c.ended_at,
            )
            for c in self.calls.values()
            if c.owner == key
        )
        models = tuple(part.models) or ((header.model,) if header.model and key == MAIN else ())
        return Session(
            agent=AGENT,
            session_id=ids[key],
            native_id=native,
            started_at=started,
            ended_at=max(part.times) if part.times else None,
            cwd=header.cwd,
            title=part.title,
            models=models,
            turns=tuple(part.turns),
            tool_calls=calls,
            usage=tuple(part.usage),
            links=links,
            census=part.census,
        )


# pi before v0.12.7 (released 2025-12-04T02:11:03Z) wrote an OpenAI response's `input` WITH its cached part
# (pi-mono 989af797 "Fixed usage.input to exclude cached tokens for OpenAI providers"); `totalTokens` came after
# (v0.13.0). A row of an OpenAI API without `totalTokens` stamped before that release can only be such a row
# (docs/agents/pi.md "Tokens").
_OPENAI_INPUT_NET_SINCE = datetime(2025, 12, 4, 2, 11, 3, tzinfo=UTC)


def _input_holds_cache(message: dict[str, Any], usage: dict[str, Any], at: datetime | None) -> bool:
    api = message.get("api")
    return (
        isinstance(api, str)
        and api.startswith("openai-")
        and "totalTokens" not in usage
        and at is not None
        and at < _OPENAI_INPUT_NET_SINCE
    )


def _kind(entry: Entry) -> str:
    if entry.kind == "message":
        message = entry.record.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        return f"message/{role if isinstance(role, str) else '(none)'}"
    return entry.kind


def _content(content: Any, index: int) -> tuple[list[str], list[str]]:
    """(texts, attachment references) of a `content` string or list of `text` / `image` parts."""
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise RejectError(RejectCode.BAD_SHAPE, "content that is neither text nor a list of parts", line=index)
    texts: list[str] = []
    attachments: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a content part that is not an object", line=index)
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image":
            data, mime = part.get("data"), part.get("mimeType")
            media = mime if isinstance(mime, str) and mime else "image/unknown"
            attachments.append(base64_reference(data, media) if isinstance(data, str) else "image")
    return texts, attachments


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
