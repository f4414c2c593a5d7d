"""One parsed ChatGPT conversation -> a complete `Session` (pure: no I/O), or a RejectError for that conversation.

Thread: the visible conversation is the path from `current_node` up through `parent` links to the root, reversed.
Other branches (edited questions, regenerated answers) are not turns; they are counted as `node/off_thread`.
Turn index = the node's position on that path, root = 0, counted before hidden/empty nodes are filtered. A newer
export that appends messages to the thread keeps every earlier position, so turn ids stay the same.
`current_node` missing: taken as the mapping's only leaf when there is exactly one, else the thread is undecidable.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from extractors import ids
from extractors.bounded import Limits, clip
from extractors.chatgpt.records import (
    DISPOSITION,
    Kind,
    Message,
    classify,
    message_of,
    same_tool,
    text_and_attachments,
    tool_error,
    tool_text,
)
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Disposition, Role, Session, ToolCall, Turn
from extractors.timeutil import from_epoch_seconds

AGENT = Agent("chatgpt")  # SPEC.name: the package imports this module before it declares SPEC


def native_id(conversation: Any) -> str | None:
    """The conversation's id: `conversation_id`, else `id` (equal in real exports); None when neither is usable."""
    if isinstance(conversation, dict):
        for key in ("conversation_id", "id"):
            value = conversation.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def parse_conversation(conversation: Any, limits: Limits) -> Session:
    """A complete Session for one conversation object.

    Raises RejectError(bad_shape | missing_session_id | missing_timestamp | undecidable_thread | limit_exceeded |
    no_conversation), with `session_hint` set when the id is known.
    """
    if not isinstance(conversation, dict):
        raise RejectError(RejectCode.BAD_SHAPE, f"a conversation is a JSON {type(conversation).__name__}")
    native = native_id(conversation)
    if native is None:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "conversation has neither conversation_id nor id")
    session_id = ids.session_id(AGENT, native)
    try:
        return _parse(conversation, native, session_id, limits)
    except RejectError as exc:
        exc.session_hint = session_id
        raise


def _parse(conv: dict[str, Any], native: str, session_id: str, limits: Limits) -> Session:
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "conversation without a mapping object")
    if len(mapping) > limits.max_records:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"{len(mapping)} nodes, over max_records={limits.max_records}")
    parents = _parents(mapping)
    thread = _thread(conv.get("current_node"), parents)
    census: Counter[tuple[str, str, Disposition]] = Counter()
    census["conversation", "", Disposition.METADATA] += 1
    if len(mapping) > len(thread):
        census["node/off_thread", "", Disposition.SKIPPED] += len(mapping) - len(thread)

    turns: list[Turn] = []
    calls: list[ToolCall] = []
    models: list[str] = []
    _add_model(models, conv.get("default_model_slug"))
    open_call: _Call | None = None
    for index, node_id in enumerate(thread):
        raw = mapping[node_id].get("message")
        if raw is None:
            census["node/no_message", "", Disposition.SKIPPED] += 1
            continue
        msg = message_of(node_id, raw)
        kind, census_kind = classify(msg)
        census[census_kind, "", DISPOSITION[kind]] += 1
        _add_model(models, msg.metadata.get("model_slug"))
        if kind is Kind.TOOL_OUTPUT:
            if open_call is not None and not same_tool(open_call.name, msg.name):
                calls.append(open_call.done(limits))
                open_call = None
            if open_call is None:  # output without a call on the thread (e.g. GPT-5 Pro's streamed reasoning)
                open_call = _Call(index, msg.node_id, msg.name or "tool", None, msg.create_time)
            open_call.outputs.append(msg)
            continue
        if open_call is not None:
            calls.append(open_call.done(limits))
            open_call = None
        if kind is Kind.TOOL_CALL:
            open_call = _Call(index, msg.node_id, msg.recipient, tool_text(msg), msg.create_time)
        elif kind in (Kind.USER, Kind.ASSISTANT):
            turn = _turn(index, kind, msg)
            if turn is not None:
                turns.append(turn)
    if open_call is not None:
        calls.append(open_call.done(limits))
    if not turns and not calls:
        raise RejectError(RejectCode.NO_CONVERSATION, "no visible turn and no tool call on the thread")

    started, ended = _times(conv, mapping)
    title = conv.get("title")
    return Session(
        agent=AGENT,
        session_id=session_id,
        native_id=native,
        started_at=started,
        ended_at=ended,
        title=title if isinstance(title, str) else None,
        models=tuple(models),
        archived=conv.get("is_archived") is True,
        turns=tuple(turns),
        tool_calls=tuple(calls),
        census=census,
    )


def _parents(mapping: dict[Any, Any]) -> dict[str, str | None]:
    """node id -> parent id, shape-checked. Raises RejectError(bad_shape)."""
    parents: dict[str, str | None] = {}
    for node_id, node in mapping.items():
        if not isinstance(node, dict):
            raise RejectError(RejectCode.BAD_SHAPE, f"mapping node {node_id} is not an object")
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise RejectError(RejectCode.BAD_SHAPE, f"mapping node {node_id}: parent is not a string")
        message = node.get("message")
        if message is not None and not isinstance(message, dict):
            raise RejectError(RejectCode.BAD_SHAPE, f"mapping node {node_id}: message is not an object")
        parents[node_id] = parent
    return parents


def _thread(current: Any, parents: dict[str, str | None]) -> list[str]:
    """The visible thread, root first. Raises RejectError(undecidable_thread | no_conversation)."""
    if not parents:
        raise RejectError(RejectCode.NO_CONVERSATION, "empty mapping")
    if current is None:
        # No current_node (seen in hand-made dumps): only a mapping with one leaf has an unambiguous thread.
        has_child = set(parents.values())
        leaves = [n for n in parents if n not in has_child]
        if len(leaves) != 1:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"no current_node and {len(leaves)} leaves to choose from")
        current = leaves[0]
    if not isinstance(current, str) or current not in parents:
        raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"current_node {current!r} is not in the mapping")
    path: list[str] = []
    seen: set[str] = set()
    node: str | None = current
    while node is not None:
        if node in seen:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"cycle in the parent links at node {node}")
        if node not in parents:
            raise RejectError(RejectCode.UNDECIDABLE_THREAD, f"dangling parent {node} (not in the mapping)")
        seen.add(node)
        path.append(node)
        node = parents[node]
    path.reverse()
    return path


def _turn(index: int, kind: Kind, msg: Message) -> Turn | None:
    text, attachments = text_and_attachments(msg)
    if not text.strip():
        return None  # placeholders like `parts: [""]`; the index stays reserved
    model = msg.metadata.get("model_slug") if kind is Kind.ASSISTANT else None
    return Turn(
        index=index,
        role=Role.USER if kind is Kind.USER else Role.ASSISTANT,
        text=text,
        timestamp=from_epoch_seconds(msg.create_time),
        model=model if isinstance(model, str) else None,
        attachments=attachments,
    )


class _Call:
    """A tool call being collected: the call message, then the tool messages that follow it on the thread."""

    def __init__(self, index: int, call_id: str, name: str, input_text: str | None, when: Any) -> None:
        self.index = index
        self.call_id = call_id
        self.name = name
        self.input = input_text
        self.when = when
        self.outputs: list[Message] = []

    def done(self, limits: Limits) -> ToolCall:
        texts = [tool_text(m) for m in self.outputs]
        errors = [tool_error(m) for m in self.outputs]
        ends = [from_epoch_seconds(m.create_time) for m in self.outputs]
        return ToolCall(
            call_id=self.call_id,
            turn_index=self.index,
            name=self.name,
            input=clip(self.input, limits) if self.input is not None else None,
            output=clip("\n".join(t for t in texts if t), limits) if self.outputs else None,
            is_error=True if True in errors else (False if False in errors else None),
            started_at=from_epoch_seconds(self.when),
            ended_at=next((e for e in reversed(ends) if e is not None), None),
        )


def _add_model(models: list[str], slug: Any) -> None:
    if isinstance(slug, str) and slug and slug not in models:
        models.append(slug)


def _times(conv: dict[str, Any], mapping: dict[Any, Any]) -> tuple[datetime, datetime | None]:
    """(start, end): the conversation's own times, else the extremes of its messages' times (every branch).

    Raises RejectError(missing_timestamp) when no time is usable.
    """
    stamps = [
        t
        for node in mapping.values()
        if isinstance(node.get("message"), dict)
        and (t := from_epoch_seconds(node["message"].get("create_time"))) is not None
    ]
    started = from_epoch_seconds(conv.get("create_time")) or min(stamps, default=None)
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no create_time on the conversation or any message")
    ended = from_epoch_seconds(conv.get("update_time")) or max(stamps, default=None)
    return started, ended
