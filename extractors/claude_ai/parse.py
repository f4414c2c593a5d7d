"""One parsed Claude.ai conversation -> its Sessions (pure: no I/O), or a RejectError for that conversation.

Messages and blocks (docs/agents/claude_ai.md "Messages and blocks"): a message's `content` blocks are read, its
flattened `text` only when it has no blocks; a `human` message's text blocks are the person's turn, its attachments
(`extracted_content` is the file's text, pasted by the app) and files references on that turn, never its text.
Thread (docs/agents/claude_ai.md "Branches"): with `parent_message_uuid` links, the conversation is the path from
`current_leaf_message_uuid` (else the last leaf in array order) up to the root; every other branch is a session of
its own, `<uuid>-branch-<its leaf's uuid>`, linked FORK to the session holding its fork point. Without links the
array is one thread, in order. Turn index = the message's position in `chat_messages`, counted before filtering.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from extractors import ids
from extractors.bounded import Limits, clip
from extractors.claude_ai.tables import ARTIFACT_TOOLS, BLOCKS, HUMAN, SENDERS, TEXT_FIELD
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Disposition, LinkKind, Role, Session, SessionLink, ToolCall, Turn
from extractors.timeutil import parse_iso

AGENT = Agent("claude_ai")  # SPEC.name: the package imports this module before it declares SPEC
MAIN = ""  # the owner key of the conversation's own thread (a branch is keyed by its leaf's uuid)

Census = Counter[tuple[str, str, Disposition]]


def native_id(conversation: Any) -> str | None:
    """The conversation's `uuid`; None when it is missing or not a non-empty string."""
    if isinstance(conversation, dict):
        value = conversation.get("uuid")
        if isinstance(value, str) and value.strip():
            return value
    return None


def parse_conversation(conversation: Any, limits: Limits) -> list[Session]:
    """The conversation's thread as a Session, then one Session per other branch with something said on it.

    Raises RejectError(bad_shape | missing_session_id | missing_timestamp | undecidable_thread | limit_exceeded |
    no_conversation), with `session_hint` set when the id is known.
    """
    if not isinstance(conversation, dict):
        raise RejectError(RejectCode.BAD_SHAPE, f"a conversation is a JSON {type(conversation).__name__}")
    native = native_id(conversation)
    if native is None:
        if "chat_messages" not in conversation:  # not a conversation at all (a wrapper, another product's export)
            keys = ", ".join(sorted(map(str, conversation))[:8])
            raise _bad(f"an object without chat_messages or uuid (keys: {keys})")
        raise RejectError(RejectCode.MISSING_SESSION_ID, "conversation without a uuid")
    session_id = ids.session_id(AGENT, native)
    try:
        return _parse(conversation, native, session_id, limits)
    except RejectError as exc:
        exc.session_hint = session_id
        raise


@dataclass(frozen=True, slots=True)
class Message:
    """The fields of one `chat_messages` item this reader uses, shape-checked."""

    index: int
    uuid: str
    sender: str
    parent: str | None
    created: datetime | None
    text: str
    blocks: list[dict[str, Any]] | None  # None: no content list (or an empty one), the flat `text` is read
    attachments: list[dict[str, Any]]
    files: list[dict[str, Any]]


def _bad(detail: str) -> RejectError:
    return RejectError(RejectCode.BAD_SHAPE, detail)


def _object_list(raw: Any, what: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise _bad(f"{what} is not a list of objects")
    return raw


def message_of(index: int, raw: Any) -> Message:
    """Shape-check one message. Raises RejectError(bad_shape)."""
    if not isinstance(raw, dict):
        raise _bad(f"message {index} is not an object")
    uuid, sender, parent, text = raw.get("uuid"), raw.get("sender"), raw.get("parent_message_uuid"), raw.get("text")
    if not isinstance(uuid, str) or not uuid:
        raise _bad(f"message {index} without a uuid")
    if not isinstance(sender, str):
        raise _bad(f"message {uuid}: sender is missing or not a string")
    if parent is not None and not isinstance(parent, str):
        raise _bad(f"message {uuid}: parent_message_uuid is not a string")
    if text is not None and not isinstance(text, str):
        raise _bad(f"message {uuid}: text is not a string")
    blocks = _object_list(raw.get("content"), f"message {uuid}: content")
    for block in blocks:
        if not isinstance(block.get("type"), str):
            raise _bad(f"message {uuid}: a content block without a type")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise _bad(f"message {uuid}: a text block without a text string")
    return Message(
        index=index,
        uuid=uuid,
        sender=sender,
        parent=parent,
        created=parse_iso(raw.get("created_at")),
        text=text or "",
        blocks=blocks or None,
        attachments=_object_list(raw.get("attachments"), f"message {uuid}: attachments"),
        files=_object_list(raw.get("files"), f"message {uuid}: files"),
    )


def _parse(conv: dict[str, Any], native: str, session_id: str, limits: Limits) -> list[Session]:
    raw_messages = conv.get("chat_messages")
    if not isinstance(raw_messages, list):
        hint = " (a ChatGPT conversation: --format chatgpt)" if "mapping" in conv else ""
        raise _bad(f"conversation without a chat_messages list{hint}")
    if len(raw_messages) > limits.max_records:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED, f"{len(raw_messages)} messages, over max_records={limits.max_records}"
        )
    messages = [message_of(n, raw) for n, raw in enumerate(raw_messages)]
    if not messages:
        raise RejectError(RejectCode.NO_CONVERSATION, "a conversation without messages")
    owners = _owners(messages, conv.get("current_leaf_message_uuid"))
    model = conv.get("model") if isinstance(conv.get("model"), str) and conv.get("model") else None
    parts: dict[str, _Part] = {MAIN: _Part(MAIN, None)}
    for msg in messages:
        key, fork = owners[msg.index]
        part = parts.setdefault(key, _Part(key, fork))
        part.add(msg, model, limits)
    main = parts[MAIN]
    main.census["conversation", "", Disposition.METADATA] += 1
    if not main.turns and not main.calls:
        raise RejectError(RejectCode.NO_CONVERSATION, "no turn and no tool call on the conversation's thread")
    empty = {key for key, part in parts.items() if key != MAIN and not part.turns and not part.calls}
    for key in empty:  # nothing said on it: not a session, its records are counted on the thread
        for (kind, version, _), n in parts[key].census.items():
            main.census[(f"abandoned/{kind}", version, Disposition.SKIPPED)] += n
    for part in parts.values():
        while part.fork_of in empty:  # a branch off an empty branch hangs on that one's fork point
            part.fork_of = parts[part.fork_of or MAIN].fork_of
    ids_by_key = {key: session_id if key == MAIN else ids.session_id(AGENT, f"{native}-branch-{key}") for key in parts}
    title = conv.get("name") if isinstance(conv.get("name"), str) and conv.get("name", "").strip() else None
    sessions = []
    for key, part in parts.items():
        if key in empty:
            continue
        if key == MAIN:
            started, ended = _times(conv, part)
        else:  # a branch spans its own messages (the conversation's start when none has a time)
            started = min(part.times, default=None) or parse_iso(conv.get("created_at"))
            ended = max(part.times, default=None)
        if started is None:
            raise RejectError(RejectCode.MISSING_TIMESTAMP, "no created_at on the conversation or its messages")
        sessions.append(
            Session(
                agent=AGENT,
                session_id=ids_by_key[key],
                native_id=native if key == MAIN else f"{native}-branch-{key}",
                started_at=started,
                ended_at=ended,
                title=title,
                models=(model,) if model else (),
                turns=tuple(part.turns),
                tool_calls=tuple(call.done(limits) for call in part.calls),
                links=() if key == MAIN else (SessionLink(ids_by_key[part.fork_of or MAIN], LinkKind.FORK),),
                census=part.census,
            )
        )
    return sessions


def _times(conv: dict[str, Any], main: _Part) -> tuple[datetime | None, datetime | None]:
    """The conversation's own `created_at` / `updated_at`, else the extremes of its thread's message times."""
    started = parse_iso(conv.get("created_at")) or min(main.times, default=None)
    ended = parse_iso(conv.get("updated_at")) or max(main.times, default=None)
    return started, ended


def _owners(messages: list[Message], current: Any) -> dict[int, tuple[str, str | None]]:
    """Message index -> (owner key, the owner key of its fork point for a branch's first message, else None).

    Raises RejectError(undecidable_thread) for a named leaf that is no message, two messages with one uuid, or a
    cycle in the parent links.
    """
    if all(msg.parent is None for msg in messages):  # an export without links: the array is one thread
        return {msg.index: (MAIN, None) for msg in messages}
    by_uuid: dict[str, Message] = {}
    for msg in messages:
        if msg.uuid in by_uuid:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"two messages with uuid {msg.uuid}")
        by_uuid[msg.uuid] = msg

    def parent_of(msg: Message) -> Message | None:
        return by_uuid.get(msg.parent) if msg.parent is not None else None  # the root sentinel names no message

    has_child = {parent.uuid for msg in messages if (parent := parent_of(msg)) is not None}
    leaves = [msg for msg in messages if msg.uuid not in has_child]
    if current is not None:
        if not isinstance(current, str) or current not in by_uuid:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"current_leaf_message_uuid {current!r} is no message")
        first = by_uuid[current]
    elif leaves:
        first = leaves[-1]
    else:
        raise RejectError(RejectCode.UNDECIDABLE_THREAD, "every message lies on a cycle of parent links")
    owners: dict[int, tuple[str, str | None]] = {}
    for n, leaf in enumerate([first] + [leaf for leaf in leaves if leaf is not first]):
        key = MAIN if n == 0 else leaf.uuid
        walked: list[Message] = []
        seen: set[str] = set()
        node: Message | None = leaf
        while node is not None and node.index not in owners:
            if node.uuid in seen:
                raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"a cycle in the parent links at {node.uuid}")
            seen.add(node.uuid)
            walked.append(node)
            node = parent_of(node)
        fork = owners[node.index][0] if node is not None else (None if key == MAIN else MAIN)
        for msg in walked:
            owners[msg.index] = (key, None)
        if walked and key != MAIN:
            owners[walked[-1].index] = (key, fork)
    for msg in messages:  # below the named leaf, or on a cycle no leaf reaches
        if msg.index not in owners:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"message {msg.uuid} lies on a cycle of parent links")
    return owners


@dataclass(slots=True)
class _Call:
    """A tool call being collected: its `tool_use` block, then the `tool_result` blocks that answer it."""

    call_id: str
    turn_index: int
    name: str
    input: str | None
    started_at: datetime | None
    outputs: list[str] = field(default_factory=list)
    errors: list[bool] = field(default_factory=list)
    ended_at: datetime | None = None

    def done(self, limits: Limits) -> ToolCall:
        return ToolCall(
            call_id=self.call_id,
            turn_index=self.turn_index,
            name=self.name,
            input=clip(self.input, limits) if self.input is not None else None,
            output=clip("\n".join(o for o in self.outputs if o), limits) if self.outputs else None,
            is_error=True if True in self.errors else (False if False in self.errors else None),
            started_at=self.started_at,
            ended_at=self.ended_at,
        )


@dataclass(slots=True)
class _Part:
    """One session being built: the thread, or one branch."""

    key: str
    fork_of: str | None
    turns: list[Turn] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    census: Census = field(default_factory=Counter)
    times: list[datetime] = field(default_factory=list)
    by_id: dict[str, _Call] = field(default_factory=dict)

    def add(self, msg: Message, model: str | None, limits: Limits) -> None:
        if msg.created is not None:
            self.times.append(msg.created)
        if msg.sender not in SENDERS:  # a new kind of participant: counted, never guessed into a role
            self.census[f"{msg.sender}/message", "", Disposition.SKIPPED] += 1
            return
        texts: list[str] = []
        refs: list[str] = []
        if msg.blocks is None:
            self.census[f"{msg.sender}/{TEXT_FIELD}", "", Disposition.TURN] += 1
            texts.append(msg.text)
        else:
            for pos, block in enumerate(msg.blocks):
                kind = block["type"]
                disposition = BLOCKS.get(kind, (Disposition.SKIPPED, ""))[0]
                self.census[f"{msg.sender}/{kind}", "", disposition] += 1
                if kind == "text":
                    texts.append(block["text"])
                elif kind == "tool_use":
                    refs.extend(self._use(msg, pos, block))
                elif kind == "tool_result":
                    self._result(msg, pos, block)
        refs.extend(_attachment_refs(msg))
        text = "\n\n".join(t for t in texts if t.strip())
        if not text.strip() and not refs:
            return  # only tool traffic or reasoning: the index stays reserved
        human = msg.sender == HUMAN
        self.turns.append(
            Turn(
                index=msg.index,
                role=Role.USER if human else Role.ASSISTANT,
                text=text,
                timestamp=msg.created,
                model=None if human else model,
                attachments=tuple(clip(ref, limits) for ref in refs),
            )
        )

    def _use(self, msg: Message, pos: int, block: dict[str, Any]) -> list[str]:
        """Open a call for a `tool_use` block; an artifact's reference for its turn."""
        native = block.get("id")
        call_id = native if isinstance(native, str) and native and native not in self.by_id else f"{msg.uuid}:{pos}"
        name = _string(block.get("name")) or "tool"
        raw_input = block.get("input")
        call = _Call(
            call_id=call_id,
            turn_index=msg.index,
            name=name,
            input=orjson.dumps(raw_input).decode() if raw_input is not None else None,
            started_at=parse_iso(block.get("start_timestamp")) or msg.created,
        )
        self.calls.append(call)
        self.by_id[call_id] = call
        if name in ARTIFACT_TOOLS and isinstance(raw_input, dict):
            return [_artifact_ref(raw_input)]
        return []

    def _result(self, msg: Message, pos: int, block: dict[str, Any]) -> None:
        """Attach a `tool_result` to its call: by `tool_use_id`, else the latest unanswered call of that name."""
        wanted, name = block.get("tool_use_id"), block.get("name")
        call = self.by_id.get(wanted) if isinstance(wanted, str) else None
        if call is None and not isinstance(wanted, str):  # no id: the latest unanswered call of its name (any name
            # when the result names none): a result follows its call
            call = next(
                (c for c in reversed(self.calls) if not c.outputs and (not isinstance(name, str) or c.name == name)),
                None,
            )
        if call is None:  # a result whose call is not on this thread: kept as a call without input
            call_id = wanted if isinstance(wanted, str) and wanted not in self.by_id else f"{msg.uuid}:{pos}"
            call = _Call(call_id, msg.index, name if isinstance(name, str) else "tool", None, msg.created)
            self.calls.append(call)
            self.by_id[call_id] = call
        call.outputs.append(_result_text(block.get("content")))
        if isinstance(block.get("is_error"), bool):
            call.errors.append(block["is_error"])
        call.ended_at = parse_iso(block.get("stop_timestamp")) or msg.created or call.ended_at


def _string(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _result_text(content: Any) -> str:
    """A result's text: a string, or its blocks' `text` (a web result's `title` and `url` before it)."""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        head = " ".join(v for key in ("title", "url") if isinstance(v := block.get(key), str) and v)
        if head:
            out.append(head)
        if isinstance(block.get("text"), str):
            out.append(block["text"])
    return "\n".join(out)


def _artifact_ref(spec: dict[str, Any]) -> str:
    """`artifact <id> (<type>, "<title>", <command>, version <uuid>)`: which artifact, never its content."""
    bits = [str(spec[key]) for key in ("type", "command") if isinstance(spec.get(key), str) and spec[key]]
    if isinstance(spec.get("title"), str) and spec["title"]:
        bits.insert(1 if bits else 0, f'"{spec["title"]}"')
    if isinstance(spec.get("version_uuid"), str):
        bits.append(f"version {spec['version_uuid']}")
    ident = spec.get("id") if isinstance(spec.get("id"), str) else "?"
    return f"artifact {ident} ({', '.join(bits) or 'artifact'})"


def _attachment_refs(msg: Message) -> list[str]:
    """A reference per attachment (name, type, size, how much text the app extracted) and per file not already
    named by an attachment. The extracted text itself is the file's, not what the person typed: never stored."""
    refs: list[str] = []
    names: set[str] = set()
    for item in msg.attachments:
        name = _string(item.get("file_name")) or "attachment"
        names.add(name)
        bits = [item["file_type"]] if isinstance(item.get("file_type"), str) and item["file_type"] else []
        size = item.get("file_size")
        if isinstance(size, int) and not isinstance(size, bool):
            bits.append(f"{size} bytes")
        extracted = item.get("extracted_content")
        if isinstance(extracted, str) and extracted:
            bits.append(f"{len(extracted)} characters of extracted text")
        refs.append(f"{name} ({', '.join(bits) or 'attachment'})")
    for item in msg.files:
        file_name = _string(item.get("file_name"))
        if file_name in names:
            continue
        uuid = item.get("file_uuid")
        label = file_name or "file"
        refs.append(f"{label} (file {uuid})" if isinstance(uuid, str) else f"{label} (file)")
    return refs
