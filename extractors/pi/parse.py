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
from json.encoder import encode_basestring as _quote
from math import isfinite
from typing import Any

from extractors.blobref import base64_reference
from extractors.bounded import Limits, Line, clip, count_glued_line
from extractors.bounded.numbers import INT64_MAX, INT64_MIN, OUT_OF_RANGE, fit_float, token_count
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
    """A tool call while its result is awaited: its ToolCall is made once, with the session."""

    call_id: str
    index: int
    name: str
    input: str | None
    started_at: datetime | None
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
    chained = True  # every entry's parent is the entry before it: one branch, no tree to walk
    for line in lines:
        if line.parts > 1:
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
        if parent != previous:
            chained = False
        entry = Entry(index, kind, native, parent, record, _entry_time(record.get("timestamp")))
        entries.append(entry)
        by_id[native] = entry
        previous = native
    if header is None:
        raise RejectError(RejectCode.NO_CONVERSATION, "no session header (an empty file, or title lines only)")
    hint = session_id(AGENT, header.native_id)
    _mark_copied(entries, header, hint)
    # A chain (the first entry a root, each further one the child of the one before) is one branch whose leaf is
    # the last entry: all of it is the active branch, as the walk below would find.
    owners = None if chained else _owners(entries, by_id, hint)
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
        owners: dict[str, tuple[str, str | None]] | None,
    ) -> None:
        self.header = header
        self.version = header.version
        self.limits = limits
        self.owners = owners  # None: every entry is on the active branch
        self.parts: dict[str, _Part] = {MAIN: _Part(census=census, title=title)}
        self.calls: dict[str, _Call] = {}

    def build(self, entries: list[Entry]) -> list[Session]:
        owners, parts = self.owners, self.parts
        key, part = MAIN, parts[MAIN]
        for entry in entries:
            if owners is not None:
                key, fork = owners[entry.id]
                found = parts.get(key)
                if found is None:
                    found = parts[key] = _Part()
                part = found
                if fork is not None:
                    part.fork_of = fork
            if entry.copied:
                part.census[(f"copied/{_kind(entry)}", self.version, Disposition.SKIPPED)] += 1
                continue
            if entry.at is not None:
                part.times.append(entry.at)
            if entry.kind == "message":
                self.message(entry, key, part)
            else:
                self.entry(entry, part)
        return self.sessions()

    def entry(self, entry: Entry, part: _Part) -> None:
        record, kind = entry.record, entry.kind
        if kind == "session_info":
            part.title = _text(record.get("name")) or part.title
        elif kind == "model_change":
            model = _text(record.get("modelId"))
            if model and model not in part.models:
                part.models.append(model)
        disposition = ENTRY_KINDS.get(kind, _UNKNOWN)[0]
        part.census[(kind, self.version, disposition)] += 1

    def message(self, entry: Entry, key: str, part: _Part) -> None:
        message = entry.record.get("message")
        if not isinstance(message, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a message entry without a message object", line=entry.index)
        role = message.get("role")
        at = _message_time(message.get("timestamp")) or entry.at
        if at is not None:
            part.times.append(at)
        if role == "assistant":
            self.assistant(entry, message, at, key, part)
        elif role == "toolResult":
            self.tool_result(entry, message, at, part)
            return
        elif role == "user":
            self.user(entry, message, at, part)
        elif role == "bashExecution":
            self.bash_execution(entry, message, at, key, part)
            return
        else:
            role = role if isinstance(role, str) else "(none)"
            disposition = MESSAGE_ROLES.get(role, _UNKNOWN)[0]
            part.census[(f"message/{role}", self.version, disposition)] += 1
            return
        if at is not None:  # a user's or an assistant's
            part.message_times.append(at)

    def user(self, entry: Entry, message: dict[str, Any], at: datetime | None, part: _Part) -> None:
        texts, attachments = _content(message.get("content"), entry.index)
        text = "\n".join(texts)
        if not text.strip() and not attachments:
            part.census[("message/user/empty", self.version, Disposition.SKIPPED)] += 1
            return
        part.turns.append(Turn(entry.index, Role.USER, clip(text, self.limits), at, None, tuple(attachments)))
        command = text.lstrip().startswith(COMMAND_PREFIX)
        kind = "message/user/command" if command else "message/user"
        part.census[(kind, self.version, Disposition.TURN)] += 1

    def assistant(self, entry: Entry, message: dict[str, Any], at: datetime | None, key: str, part: _Part) -> None:
        content = message.get("content")
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [{"type": "text", "text": content}]
        elif not isinstance(content, list):
            raise RejectError(RejectCode.BAD_SHAPE, "assistant content that is not a list", line=entry.index)
        model = _text(message.get("model"))
        if model and model not in part.models:
            part.models.append(model)
        texts: list[str] = []
        calls = 0
        for item in content:
            if not isinstance(item, dict):
                raise RejectError(
                    RejectCode.BAD_SHAPE, "an assistant content part that is not an object", line=entry.index
                )
            kind = item.get("type")
            if kind == "text":
                value = item.get("text")
                if isinstance(value, str):
                    texts.append(value)
            elif kind == "toolCall":
                self.tool_call(entry, item, at, key)
                calls += 1
        part.calls += calls
        self.usage(entry, message, at, model, part)
        text = "\n".join(texts)
        if text.strip():
            part.turns.append(Turn(entry.index, Role.ASSISTANT, clip(text, self.limits), at, model))
            part.census[("message/assistant", self.version, Disposition.TURN)] += 1
        elif calls:
            part.census[("message/assistant/tool_calls", self.version, Disposition.TOOL)] += 1
        else:
            # Aborted or failed responses (`stopReason` aborted/error, empty content) and thinking-only ones.
            part.census[("message/assistant/empty", self.version, Disposition.SKIPPED)] += 1

    def tool_call(self, entry: Entry, item: dict[str, Any], at: datetime | None, key: str) -> None:
        call_id, name = item.get("id"), item.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a toolCall without a string id and name", line=entry.index)
        arguments = item.get("arguments")
        text = arguments if isinstance(arguments, str) or arguments is None else _json_text(arguments)
        if call_id in self.calls:
            return  # the same call written again (a duplicated entry under another id): one call
        clipped = None if text is None else clip(text, self.limits)
        self.calls[call_id] = _Call(call_id, entry.index, name, clipped, at, key)

    def usage(self, entry: Entry, message: dict[str, Any], at: datetime | None, model: str | None, part: _Part) -> None:
        """One row per assistant message (pi's `usage` is per call). A row of zeros (an aborted request) is not
        kept: nothing was spent (docs/agents/pi.md "Tokens")."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        get = usage.get
        counts = [get("input"), get("output"), get("cacheRead"), get("cacheWrite"), get("reasoning")]
        for n, value in enumerate(counts):
            # None, or an int within int64, is the count as it is; anything else is read by `token_count`.
            if value is not None and (type(value) is not int or not INT64_MIN <= value <= INT64_MAX):
                counts[n], out = token_count(value)
                if out:
                    part.census[OUT_OF_RANGE] += 1
        cost = get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if type(total) is not float or not isfinite(total):  # else the cost as it is
            total, out = fit_float(total)
            if out:
                part.census[OUT_OF_RANGE] += 1
        if not any(counts) and not total:
            return
        tokens_in, tokens_out, cache_read, cache_write, reasoning = counts
        if cache_read and tokens_in is not None and _input_holds_cache(message, usage, at):
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
                reasoning,  # newer pi: the part of `output` that was reasoning
                total,
                at,
                response if isinstance(response, str) and response else None,
            )
        )

    def tool_result(self, entry: Entry, message: dict[str, Any], at: datetime | None, part: _Part) -> None:
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a toolResult without a string toolCallId", line=entry.index)
        pending = self.calls.get(call_id)
        if pending is None:
            part.census[("message/toolResult/orphan", self.version, Disposition.TOOL)] += 1
            return
        texts, attachments = _content(message.get("content"), entry.index)
        if attachments:
            texts += [f"[{ref}]" for ref in attachments]
        pending.output = clip("\n".join(texts), self.limits)
        error = message.get("isError")
        pending.is_error = error if isinstance(error, bool) else None
        pending.ended_at = at
        part.census[("message/toolResult", self.version, Disposition.TOOL)] += 1

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
        self.calls[call_id] = _Call(
            call_id,
            entry.index,
            "bash",
            clip(_JSON.encode({"command": command}), self.limits),
            at,
            key,
            clip(output, self.limits) if isinstance(output, str) else None,
            failed,
            at,
        )
        part.calls += 1
        part.census[("message/bashExecution", self.version, Disposition.TOOL)] += 1

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
            ToolCall(c.call_id, c.index, c.name, c.input, c.output, c.is_error, c.started_at, c.ended_at)
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


_UNKNOWN = (Disposition.SKIPPED, "")  # an entry kind or message role not in the tables
# `json.dumps(value, ensure_ascii=False)` without building its encoder again for every call.
_JSON = json.JSONEncoder(ensure_ascii=False)


def _json_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)`, sooner for an object of strings (most tool arguments: `{"path":
    ...}`, `{"command": ...}`): the same text, quoted by the same function the encoder uses."""
    if type(value) is not dict:
        return _JSON.encode(value)
    items: list[str] = []
    for key, item in value.items():
        if type(key) is not str or type(item) is not str:
            return _JSON.encode(value)
        items.append(f"{_quote(key)}: {_quote(item)}")
    return "{" + ", ".join(items) + "}"


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


# Epoch milliseconds of 2000-01-01 and 2100-01-01 (UTC): times between them are inside timeutil's usable years.
_MS_2000, _MS_2100 = 946_684_800_000, 4_102_444_800_000


def _message_time(value: Any) -> datetime | None:
    """`parse_any` of a message's `timestamp`, with a shortcut for the epoch milliseconds pi writes (of 2000-2099):
    once per message, its chain of checks was the parse's largest single cost. The same time either way."""
    if type(value) is int and _MS_2000 <= value < _MS_2100:
        return datetime.fromtimestamp(value / 1000.0, UTC)
    return parse_any(value)


def _entry_time(value: Any) -> datetime | None:
    """`parse_iso` of an entry's `timestamp`, with a shortcut for the `...Z` times of 2000-2099 pi writes: the same
    time either way."""
    if type(value) is str:
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return parse_iso(value)
        if at.tzinfo is UTC and 2000 <= at.year < 2100:
            return at
    return parse_iso(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
