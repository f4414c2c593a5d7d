"""From the records of one Qwen Code chat file to its Sessions: tree, branches, turns, tools, usage.

Pure: no I/O. The rules (docs/agents/qwen.md), each tested in tests/test_qwen.py:
- Every record carries `uuid`, `parentUuid`, `sessionId`, `timestamp`, `type`. All records of a file share one
  `sessionId`, the file's name (another is `inconsistent_source`); a record without one is `missing_session_id`.
- Tree: `parentUuid` links records. A `uuid` met again is a fragment of the same record and belongs to its node. A
  record whose parent is not in the file hangs on the record before it in the file; a cycle is
  `undecidable_thread`.
- Active branch: walk `parentUuid` from the last record that is not an artifact (Qwen Code's own leaf on resume).
  Those records are the session. Each other branch (a rewind leaves one), grouped from each further leaf up to the
  first record already placed, is a session of its own, `<sessionId>-branch-<its leaf uuid>`, linked FORK to the
  session holding its fork point; a branch with nothing said on it is counted `abandoned/<kind>`.
- `/branch` copies: records with `forkedFrom` are the parent session's history copied into the fork: counted
  `copied/<kind>`, never turns; the session links FORK to `forkedFrom.sessionId`.
- Sidechain records (`isSidechain`, a subagent's) are counted `sidechain/<kind>` and not read (unconfirmed layout).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors.bounded import GLUED_LINE_KIND, Limits, LineFields, clip
from extractors.bounded.numbers import INT64_MAX, INT64_MIN, OUT_OF_RANGE, token_count
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Role,
    Session,
    SessionLink,
    Turn,
    Usage,
    new_tool_call,
    new_turn,
    new_usage,
)
from extractors.qwen.tables import (
    ARTIFACT_SUBTYPES,
    HARNESS_PROVENANCE,
    HOOK_CONTEXT_OPEN,
    SESSION_START_OPEN,
    SYSTEM_SUBTYPES,
    USER_SUBTYPES,
)
from extractors.timeutil import parse_iso

AGENT = Agent("qwen")
MAIN = ""  # the owner key of the active branch (branch sessions are keyed by their leaf's uuid)
# A well-formed hook context block, open tag to its close tag (docs/agents/qwen.md "A person's turn").
_HOOK_BLOCKS = tuple((tag, tag.replace("<", "</", 1)) for tag in (HOOK_CONTEXT_OPEN, SESSION_START_OPEN))

Census = Counter[tuple[str, str, Disposition]]
# `json.dumps(value, ensure_ascii=False)` without making its encoder again for each value (what dumps does when given
# any argument): the same text.
_json_text = json.JSONEncoder(ensure_ascii=False).encode


@dataclass(slots=True)
class Record:
    index: int
    uuid: str
    parent: str | None
    record: dict[str, Any]
    kind: str
    version: str
    at: datetime | None
    copied: bool  # a `/branch` copy (`forkedFrom`): the parent session's history


@dataclass(slots=True)
class _Call:
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
    turns: list[Turn] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)  # by record uuid: fragments of one response count once
    models: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    census: Census = field(default_factory=Counter)
    title: str | None = None  # the last `custom_title` on this branch
    fork_of: str | None = None
    calls: int = 0


@dataclass(slots=True)
class _Meta:
    native_id: str
    cwd: str | None = None
    git_branch: str | None = None
    versions: list[str] = field(default_factory=list)
    forked_from: str | None = None
    spawned_by: str | None = None


def parse_chat_file(lines: Iterable[LineFields], limits: Limits, file_id: str) -> list[Session]:
    """The sessions of one Qwen Code chat file, named `<file_id>.jsonl`, from its records as the fields of their
    `Line`s (`iter_jsonl_fields`): the active branch first, then each other branch with something said on it.
    Raises RejectError."""
    census: Census = Counter()
    records: list[Record] = []
    by_uuid: dict[str, Record] = {}
    native: str | None = None
    meta: _Meta | None = None
    versions: list[str] = []
    last_version = ""
    looking = True  # for the session's cwd and git branch
    # This loop runs once per record (~35k in the 50 MB bench corpus): what every record is asked is asked here, in
    # locals; a record's sessionId equal to the file's (checked once, on the first) is not checked again.
    for index, _, record, _, part_no, parts, _, _ in lines:
        if parts > 1 and part_no == 0:
            census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] += 1
        if not isinstance(record, dict):
            census[("(not an object)", "", Disposition.SKIPPED)] += 1
            continue
        get = record.get
        kind = get("type")
        version = get("version")
        version = version if isinstance(version, str) else ""
        if not isinstance(kind, str):
            census[("(untyped)", version, Disposition.SKIPPED)] += 1
            continue
        sid = get("sessionId")
        if sid != native or native is None:
            if not isinstance(sid, str) or not sid.strip() or "/" in sid or "\\" in sid:
                raise RejectError(
                    RejectCode.MISSING_SESSION_ID, f"a {kind!r} record without a usable sessionId", line=index
                )
            if native is None:
                # Qwen Code names the file after the session (docs/agents/qwen.md "Where the files are")
                if sid != file_id:
                    raise RejectError(
                        RejectCode.INCONSISTENT_SOURCE,
                        f"records of session {sid!r} in a file named {file_id!r}",
                        line=index,
                        session_hint=session_id(AGENT, sid),
                    )
                native = sid
                meta = _Meta(sid, versions=versions)
            else:
                raise RejectError(
                    RejectCode.INCONSISTENT_SOURCE,
                    f"a record of session {sid!r} in the file of session {native!r}",
                    line=index,
                    session_hint=session_id(AGENT, native),
                )
        assert meta is not None
        if version != last_version and version:
            if version not in versions:
                versions.append(version)
            last_version = version
        if get("isSidechain") is True:
            census[(f"sidechain/{kind}", version, Disposition.SKIPPED)] += 1
            continue
        uuid = get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise RejectError(RejectCode.BAD_SHAPE, f"a {kind!r} record without a uuid", line=index)
        parent = get("parentUuid")
        parent = parent if isinstance(parent, str) and parent else None
        forked = get("forkedFrom")
        copied = isinstance(forked, dict)
        entry = Record(index, uuid, parent, record, kind, version, parse_iso(get("timestamp")), copied)
        by_uuid.setdefault(uuid, entry)
        records.append(entry)
        if looking:  # until both are found
            if meta.cwd is None:
                meta.cwd = _text(get("cwd"))
            if meta.git_branch is None:
                meta.git_branch = _text(get("gitBranch"))
            looking = meta.cwd is None or meta.git_branch is None
        if copied and meta.forked_from is None and isinstance(forked, dict):
            meta.forked_from = _text(forked.get("sessionId"))
        if kind == "system" and meta.spawned_by is None and get("subtype") == "parent_session":
            payload = get("systemPayload")
            payload = payload if isinstance(payload, dict) else {}
            meta.spawned_by = _text(payload.get("parentSessionId"))
    if meta is None:
        raise RejectError(RejectCode.NO_CONVERSATION, "no record with a session id (an empty file)")
    owners = _owners(records, by_uuid, session_id(AGENT, meta.native_id))
    return _Builder(meta, limits, census, owners).build(records)


def _owners(records: list[Record], by_uuid: dict[str, Record], hint: str) -> dict[str, tuple[str, str | None]]:
    """Record uuid -> (owner key, owner key of the fork point for a branch's first record). Active branch: MAIN."""
    nodes = list(by_uuid.values())  # first record of each uuid, in file order
    parent_of: dict[str, str | None] = {}  # each node's parent, read once
    before: str | None = None
    for node in nodes:
        uuid, parent = node.uuid, node.parent
        if parent is not None and (parent == uuid or parent not in by_uuid):
            parent = before  # a dangling parent hangs on the record before it
        parent_of[uuid] = parent
        before = uuid
    has_child = set(parent_of.values())
    has_child.discard(None)
    artifacts = {node.uuid for node in nodes if node.uuid not in has_child and _is_artifact(node)}
    last = next((by_uuid[r.uuid] for r in reversed(records) if r.uuid not in artifacts), None)
    leaves = [node for node in nodes if node.uuid not in has_child and node is not last and node.uuid not in artifacts]
    if last is not None:
        leaves.insert(0, last)
    owners: dict[str, tuple[str, str | None]] = {}
    for n, leaf in enumerate(leaves):
        key = MAIN if n == 0 else leaf.uuid
        walked: dict[str, None] = {}  # in the order walked
        current: str | None = leaf.uuid
        while current is not None and current not in owners:
            if current in walked:
                raise RejectError(
                    RejectCode.UNDECIDABLE_THREAD, f"a cycle in the record tree at {current!r}", session_hint=hint
                )
            walked[current] = None
            current = parent_of[current]
        fork = owners[current][0] if current is not None else (None if key == MAIN else MAIN)
        owners.update(dict.fromkeys(walked, (key, None)))
        if walked and key != MAIN:
            owners[next(reversed(walked))] = (key, fork)
    for node in nodes:
        if node.uuid in artifacts:  # a trailing artifact: bookkeeping of the branch it hangs on
            parent = parent_of[node.uuid]
            owners[node.uuid] = (owners[parent][0] if parent in owners else MAIN, None)
    if len(owners) != len(nodes):  # owners holds only uuids of nodes
        for node in nodes:
            if node.uuid not in owners:
                raise RejectError(
                    RejectCode.UNDECIDABLE_THREAD,
                    f"record {node.uuid!r} lies on a cycle of the record tree",
                    session_hint=hint,
                )
    return owners


class _Builder:
    def __init__(self, meta: _Meta, limits: Limits, census: Census, owners: dict[str, tuple[str, str | None]]) -> None:
        self.meta = meta
        self.limits = limits
        self.owners = owners
        self.parts: dict[str, _Part] = {MAIN: _Part(census=census)}
        self.calls: dict[str, _Call] = {}

    def build(self, records: list[Record]) -> list[Session]:
        owners, parts = self.owners, self.parts
        user, assistant, tool_result, system = self.user, self.assistant, self.tool_result, self.system
        for entry in records:
            key, fork = owners[entry.uuid]
            part = parts.get(key)
            if part is None:
                part = parts[key] = _Part()
            if fork is not None:
                part.fork_of = fork
            if entry.copied:
                part.census[(f"copied/{_kind(entry)}", entry.version, Disposition.SKIPPED)] += 1
                continue
            if entry.at is not None:
                part.times.append(entry.at)
            kind = entry.kind  # the kinds most frequent first
            if kind == "system":
                system(entry, part)
            elif kind == "assistant":
                assistant(entry, key, part)
            elif kind == "tool_result":
                tool_result(entry, part)
            elif kind == "user":
                user(entry, part)
            else:
                part.census[(kind, entry.version, Disposition.SKIPPED)] += 1
        return self.sessions()

    def user(self, entry: Record, part: _Part) -> None:
        record = entry.record
        subtype = record.get("subtype")
        parts = _parts(record, entry.index)
        responses = [p for p in parts if isinstance(p.get("functionResponse"), dict)]
        if responses and not any(isinstance(p.get("text"), str) and p["text"].strip() for p in parts):
            self.responses(entry, responses, part)  # a tool response carried as a user message
            part.census[("user/function_response", entry.version, Disposition.TOOL)] += 1
            return
        if isinstance(subtype, str):
            disposition = USER_SUBTYPES.get(subtype, (Disposition.SKIPPED, ""))[0]
            if disposition is not Disposition.TURN:
                part.census[(f"user/{subtype}", entry.version, disposition)] += 1
                return
        provenance = record.get("provenance")
        if provenance in HARNESS_PROVENANCE:
            part.census[(f"user/{provenance}", entry.version, Disposition.HARNESS)] += 1
            return
        texts: list[str] = []
        attachments: list[str] = []
        hooked = _is_hook_context(parts[-1]) if parts else False
        for p in parts[:-1] if hooked else parts:  # a hook's context, the final part: not the person's words
            text = p.get("text")
            if isinstance(text, str):
                texts.append(text)
            elif isinstance(p.get("inlineData"), dict):
                mime = p["inlineData"].get("mimeType")
                attachments.append(mime if isinstance(mime, str) and mime else "inline")
            elif isinstance(p.get("fileData"), dict):
                uri = p["fileData"].get("fileUri")
                attachments.append(uri if isinstance(uri, str) and uri else "file")
        payload = record.get("systemPayload")
        display = payload.get("displayText") if isinstance(payload, dict) else None
        text = display if isinstance(display, str) and display.strip() else "\n".join(texts)
        if not text.strip() and not attachments:
            part.census[("user/empty", entry.version, Disposition.SKIPPED)] += 1
            return
        part.turns.append(new_turn(entry.index, Role.USER, clip(text, self.limits), entry.at, None, tuple(attachments)))
        name = f"user/{subtype}" if isinstance(subtype, str) else ("user/hook_context" if hooked else "user")
        part.census[(name, entry.version, Disposition.TURN)] += 1

    def assistant(self, entry: Record, key: str, part: _Part) -> None:
        record = entry.record
        model = _text(record.get("model"))
        if model and model not in part.models:
            part.models.append(model)
        texts: list[str] = []
        calls = 0
        for p in _parts(record, entry.index):
            text = p.get("text")
            call = p.get("functionCall")
            if isinstance(text, str) and p.get("thought") is not True:
                texts.append(text)
            elif isinstance(call, dict):
                calls += self.tool_call(entry, call, key)
        part.calls += calls
        self.usage(entry, model, part)
        text = "".join(texts)
        if text.strip():
            part.turns.append(new_turn(entry.index, Role.ASSISTANT, clip(text, self.limits), entry.at, model, ()))
            part.census[("assistant", entry.version, Disposition.TURN)] += 1
        elif calls:
            part.census[("assistant/tool_calls", entry.version, Disposition.TOOL)] += 1
        else:
            part.census[("assistant/empty", entry.version, Disposition.SKIPPED)] += 1  # thought-only or aborted

    def tool_call(self, entry: Record, call: dict[str, Any], key: str) -> int:
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise RejectError(RejectCode.BAD_SHAPE, "a functionCall without a name", line=entry.index)
        call_id = call.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"{entry.uuid}-{name}"
        if call_id in self.calls:
            return 0  # the same call in a fragment of the same response: one call
        args = call.get("args")
        text = None if args is None else clip(_json_text(args), self.limits)
        self.calls[call_id] = _Call(call_id, entry.index, name, text, entry.at, key)
        return 1

    def usage(self, entry: Record, model: str | None, part: _Part) -> None:
        """One row per response (`usageMetadata` is per API call, Gemini's shape). `promptTokenCount` holds the
        cached tokens, so input = prompt - cached (docs/agents/qwen.md "Tokens")."""
        meta = entry.record.get("usageMetadata")
        if not isinstance(meta, dict):
            return
        get, census = meta.get, part.census
        prompt, cached = _tokens(get("promptTokenCount"), census), _tokens(get("cachedContentTokenCount"), census)
        output, thoughts = _tokens(get("candidatesTokenCount"), census), _tokens(get("thoughtsTokenCount"), census)
        if not (prompt or cached or output or thoughts):
            return
        net = None if prompt is None else max(prompt - (cached or 0), 0)
        usage = new_usage(entry.index, model, net, output, cached, None, thoughts, None, entry.at, None)
        part.usage[entry.uuid] = usage

    def tool_result(self, entry: Record, part: _Part) -> None:
        record = entry.record
        responses = [p for p in _parts(record, entry.index) if isinstance(p.get("functionResponse"), dict)]
        result = record.get("toolCallResult")
        result = result if isinstance(result, dict) else {}
        if not responses and isinstance(result.get("callId"), str):
            responses = [{"functionResponse": {"id": result["callId"], "response": {}}}]
        if not self.responses(entry, responses, part, result.get("status")):
            part.census[("tool_result/orphan", entry.version, Disposition.TOOL)] += 1
            return
        part.census[("tool_result", entry.version, Disposition.TOOL)] += 1

    def responses(self, entry: Record, parts: list[dict[str, Any]], part: _Part, status: Any = None) -> bool:
        matched = False
        for p in parts:
            response = p["functionResponse"]
            call_id = response.get("id")
            pending = self.calls.get(call_id) if isinstance(call_id, str) else None
            if pending is None:
                continue
            matched = True
            body = response.get("response")
            body = body if isinstance(body, dict) else {}
            value = body.get("output", body.get("error"))
            if value is None and body:
                value = body
            if value is not None:
                text = value if isinstance(value, str) else _json_text(value)
                pending.output = clip(text, self.limits)
            if isinstance(status, str):
                pending.is_error = status == "error"
            elif "error" in body:
                pending.is_error = True
            pending.ended_at = entry.at
        return matched

    def system(self, entry: Record, part: _Part) -> None:
        record = entry.record
        subtype = record.get("subtype")
        subtype = subtype if isinstance(subtype, str) else "(none)"
        disposition = SYSTEM_SUBTYPES.get(subtype, (Disposition.SKIPPED, ""))[0]
        payload = record.get("systemPayload")
        payload = payload if isinstance(payload, dict) else {}
        if subtype == "slash_command":
            raw = _text(payload.get("rawCommand"))
            if payload.get("phase") != "invocation" or raw is None:
                part.census[("system/slash_command/result", entry.version, Disposition.SKIPPED)] += 1
                return
            last = part.turns[-1] if part.turns else None
            if last is not None and last.role is Role.USER and last.text == clip(raw, self.limits):
                # newer builds also write the command as a `user` record just before: the person typed it once
                part.census[("system/slash_command/repeated", entry.version, Disposition.SKIPPED)] += 1
                return
            part.turns.append(Turn(entry.index, Role.USER, clip(raw, self.limits), entry.at))
        elif subtype == "custom_title":
            part.title = _text(payload.get("customTitle")) or part.title
        elif subtype == "session_model":
            model = _text(payload.get("modelId"))
            if model and model not in part.models:
                part.models.append(model)
        part.census[(f"system/{subtype}", entry.version, disposition)] += 1

    def sessions(self) -> list[Session]:
        meta = self.meta
        main_id = session_id(AGENT, meta.native_id)
        ids = {
            key: main_id if key == MAIN else session_id(AGENT, f"{meta.native_id}-branch-{key}") for key in self.parts
        }
        main = self.parts[MAIN]
        empty = {key for key, part in self.parts.items() if key != MAIN and not part.turns and not part.calls}
        for key in empty:
            for (kind, version, _), n in self.parts[key].census.items():
                main.census[(f"abandoned/{kind}", version, Disposition.SKIPPED)] += n
        for part in self.parts.values():
            while part.fork_of in empty:
                part.fork_of = self.parts[part.fork_of or MAIN].fork_of
        return [self.session(key, part, ids) for key, part in self.parts.items() if key not in empty]

    def session(self, key: str, part: _Part, ids: dict[str, str]) -> Session:
        meta = self.meta
        parent: str | None = None
        if key == MAIN:
            links: list[SessionLink] = []
            if meta.forked_from and meta.forked_from != meta.native_id:
                parent = session_id(AGENT, meta.forked_from)
                links.append(SessionLink(parent, LinkKind.FORK))
            if meta.spawned_by and meta.spawned_by != meta.native_id:
                parent = parent or session_id(AGENT, meta.spawned_by)
                links.append(SessionLink(session_id(AGENT, meta.spawned_by), LinkKind.SUBAGENT))
            native = meta.native_id
        else:
            links = [SessionLink(ids[part.fork_of or MAIN], LinkKind.FORK)]
            native = f"{meta.native_id}-branch-{key}"
        if not part.times:
            raise RejectError(RejectCode.MISSING_TIMESTAMP, "no record with a usable timestamp", session_hint=ids[key])
        calls = tuple(
            new_tool_call(c.call_id, c.index, c.name, c.input, c.output, c.is_error, c.started_at, c.ended_at, None)
            for c in self.calls.values()
            if c.owner == key
        )
        return Session(
            agent=AGENT,
            session_id=ids[key],
            native_id=native,
            started_at=min(part.times),
            ended_at=max(part.times),
            parent_session_id=parent,
            cwd=meta.cwd,
            git_branch=meta.git_branch,
            title=part.title,
            models=tuple(part.models),
            cli_versions=tuple(meta.versions),
            turns=tuple(part.turns),
            tool_calls=calls,
            usage=tuple(part.usage.values()),
            links=tuple(links),
            census=part.census,
        )


def _parts(record: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The `message.parts` of a record (none when it has no message). Raises RejectError (bad_shape)."""
    message = record.get("message")
    if message is None:
        return []
    if not isinstance(message, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "a message that is not an object", line=index)
    parts = message.get("parts")
    if parts is None:
        return []
    if isinstance(parts, list):
        for p in parts:  # a loop, not all() of a generator: ~23k records in the bench corpus
            if not isinstance(p, dict):
                break
        else:
            return parts
    raise RejectError(RejectCode.BAD_SHAPE, "message parts that are not a list of objects", line=index)


def _is_hook_context(part: dict[str, Any]) -> bool:
    """A text part that is one whole `<qwen:...-context>` block, as Qwen Code appends a hook's context as the final
    part of the person's message. A lookalike that is not a whole block stays the person's text."""
    text = part.get("text")
    if not isinstance(text, str):
        return False
    text = text.strip()
    return any(text.startswith(open_) and text.endswith(close) for open_, close in _HOOK_BLOCKS)


def _tokens(value: Any, census: Census) -> int | None:
    """`token_count` of a value, its out-of-range counted in `census`; an int within int64 (nearly every count) is
    taken as it is, without the call."""
    if value.__class__ is int and INT64_MIN <= value <= INT64_MAX:
        return value
    number, out = token_count(value)
    if out:
        census[OUT_OF_RANGE] += 1
    return number


def _is_artifact(node: Record) -> bool:
    return node.kind == "system" and node.record.get("subtype") in ARTIFACT_SUBTYPES


def _kind(entry: Record) -> str:
    subtype = entry.record.get("subtype")
    return f"{entry.kind}/{subtype}" if isinstance(subtype, str) else entry.kind


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
