"""One Kiro CLI ConversationState (already parsed JSON) -> a Session. Pure: no I/O.

Rules (docs/agents/kiro.md): the person's turns are the `Prompt` variants' `prompt` text, exactly as typed (the CLI
keeps context files and hook output apart, in `additional_context`, which is harness); tool results come back as
user messages (`ToolUseResults`) and go to their tool calls; the assistant's visible text is its `content`.
Turn.index is the record's position: entry i's user message is 2*i, its assistant message 2*i + 1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors import ids
from extractors.bounded import Limits, clip, json_text
from extractors.errors import RejectCode, RejectError
from extractors.kiro.tables import (
    AGENT,
    ASSISTANT_CONTENT,
    RESULT_BLOCKS,
    RESULT_STATUS,
    STATE_FIELDS,
    USER_CONTENT,
)
from extractors.model import Disposition, Role, Session, ToolCall, Turn
from extractors.timeutil import from_epoch_ms, parse_iso

Census = Counter[tuple[str, str, Disposition]]


@dataclass(slots=True)
class RowFacts:
    """What the store says about a conversation beside its JSON (all optional: a saved file has none of it)."""

    conversation_id: str | None = None  # the `conversation_id` column of conversations_v2
    key: str | None = None  # the folder the row is keyed by
    created_at: datetime | None = None
    updated_at: datetime | None = None
    inferred_start: datetime | None = None  # a saved file's mtime: used only when the state holds no time at all
    census: Census = field(default_factory=Counter)  # rows read for this conversation (the winner and its copies)


def session_id_of(native: str) -> str:
    return ids.session_id(AGENT, native)


def _bad(detail: str) -> RejectError:
    return RejectError(RejectCode.BAD_SHAPE, detail)


def _unknown(detail: str) -> RejectError:
    return RejectError(RejectCode.UNSUPPORTED_FORMAT, detail)


def _variant(value: Any, known: dict[str, Disposition], what: str) -> tuple[str, dict[str, Any]]:
    """An externally tagged serde enum: an object with one key, the variant, whose value is an object."""
    if not isinstance(value, dict) or len(value) != 1:
        raise _bad(f"{what} is not a one-variant object")
    ((name, body),) = value.items()
    if name not in known:
        raise _unknown(f"{what} variant {name!r} is not one this version reads")
    if not isinstance(body, dict):
        raise _bad(f"{what} {name} is not an object")
    return name, body


def _text(body: dict[str, Any], key: str, what: str, *, optional: bool = False) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _bad(f"{what}.{key} is not text")
    return value


def _entry_parts(entry: Any, position: int) -> tuple[Any, Any, Any]:
    """(user, assistant, request_metadata) of one history entry: an object (current builds) or, in Amazon Q CLI
    builds before `HistoryEntry` existed, a two-element array [user, assistant] (docs/agents/kiro.md "History
    entries")."""
    if isinstance(entry, dict):
        if "user" not in entry or "assistant" not in entry:
            raise _bad(f"history entry {position} has no user or no assistant message")
        return entry["user"], entry["assistant"], entry.get("request_metadata")
    if isinstance(entry, list) and len(entry) == 2:
        return entry[0], entry[1], None
    raise _bad(f"history entry {position} is neither an object nor a [user, assistant] pair")


def _results(body: dict[str, Any], what: str, limits: Limits) -> list[tuple[str, str, bool]]:
    """(tool_use_id, output, is_error) of a message's tool results."""
    raw = body.get("tool_use_results")
    if not isinstance(raw, list):
        raise _bad(f"{what}.tool_use_results is not a list")
    out: list[tuple[str, str, bool]] = []
    for result in raw:
        if not isinstance(result, dict) or not isinstance(result.get("tool_use_id"), str):
            raise _bad(f"{what}: a tool result without a tool_use_id")
        status = result.get("status")
        if not isinstance(status, str) or status not in RESULT_STATUS:
            raise _unknown(f"{what}: tool result status {status!r} is not one this version reads")
        blocks = result.get("content")
        if not isinstance(blocks, list):
            raise _bad(f"{what}: tool result content is not a list")
        texts: list[str] = []
        for block in blocks:
            if not isinstance(block, dict) or len(block) != 1:
                raise _bad(f"{what}: a tool result block is not a one-variant object")
            ((kind, value),) = block.items()
            if kind not in RESULT_BLOCKS:
                raise _unknown(f"{what}: tool result block {kind!r} is not one this version reads")
            if kind == "Text":
                if not isinstance(value, str):
                    raise _bad(f"{what}: a Text block is not text")
                texts.append(value)
            else:
                texts.append(json_text(value))
        out.append((result["tool_use_id"], clip("\n".join(texts), limits), RESULT_STATUS[status]))
    return out


def _cwd(user: dict[str, Any]) -> str | None:
    env = user.get("env_context")
    state = env.get("env_state") if isinstance(env, dict) else None
    cwd = state.get("current_working_directory") if isinstance(state, dict) else None
    return cwd if isinstance(cwd, str) and cwd else None


def _check_range(value: Any, entries: int) -> None:
    """`valid_history_range` = (start, end) of the entries sent to the model: 0 <= start <= end <= len(history)."""
    if value is None:
        return
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or not 0 <= value[0] <= value[1] <= entries
    ):
        raise _bad(f"valid_history_range {value!r} does not fit a history of {entries} entries")


def build_session(state: Any, row: RowFacts, limits: Limits) -> Session:
    """The whole session of one ConversationState, or RejectError (bad_shape, unsupported_format, no_conversation,
    missing_timestamp, inconsistent_source, limit_exceeded)."""
    if not isinstance(state, dict):
        raise _bad("the conversation is not a JSON object")
    native = state.get("conversation_id")
    if not isinstance(native, str) or not native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "the conversation has no conversation_id")
    if row.conversation_id is not None and row.conversation_id != native:
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE,
            f"row conversation_id {row.conversation_id!r} differs from the JSON's {native!r}",
        )
    history = state.get("history")
    if not isinstance(history, list):
        raise _bad("history is not a list")
    if len(history) * 2 > limits.max_records:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"{len(history)} history entries, over max_records")
    _check_range(state.get("valid_history_range"), len(history))

    census: Census = Counter(row.census)
    turns: list[Turn] = []
    calls: dict[str, ToolCall] = {}
    order: list[str] = []
    results: dict[str, tuple[str, bool]] = {}
    models: list[str] = []
    cwd: str | None = None
    for position, entry in enumerate(history):
        user, assistant, meta = _entry_parts(entry, position)
        if not isinstance(user, dict):
            raise _bad(f"history entry {position}: user is not an object")
        what = f"history entry {position}"
        name, body = _variant(user.get("content"), USER_CONTENT, f"{what} user content")
        when = parse_iso(user.get("timestamp")) if user.get("timestamp") is not None else None
        cwd = cwd or _cwd(user)
        disposition = USER_CONTENT[name]
        if name == "Prompt":
            prompt = _text(body, "prompt", f"{what} Prompt")
            assert prompt is not None
            if prompt.strip():
                turns.append(Turn(2 * position, Role.USER, clip(prompt, limits), when))
            else:
                disposition = Disposition.SKIPPED  # an empty prompt says nothing
        else:
            prompt = _text(body, "prompt", f"{what} {name}", optional=True) if name == "CancelledToolUses" else None
            if prompt and prompt.strip():
                turns.append(Turn(2 * position, Role.USER, clip(prompt, limits), when))
                disposition = Disposition.TURN
            for call_id, output, is_error in _results(body, f"{what} {name}", limits):
                results[call_id] = (output, is_error)
        census[(f"user/{name}", "", disposition)] += 1

        if not isinstance(meta, dict):
            meta = {}
        model = meta.get("model_id")
        model = model if isinstance(model, str) and model else None
        if model and model not in models:
            models.append(model)
        answered = from_epoch_ms(meta.get("stream_end_timestamp_ms"))
        kind, reply = _variant(assistant, ASSISTANT_CONTENT, f"{what} assistant")
        text = _text(reply, "content", f"{what} {kind}")
        assert text is not None
        disposition = ASSISTANT_CONTENT[kind]
        index = 2 * position + 1
        if kind == "ToolUse":
            uses = reply.get("tool_uses")
            if not isinstance(uses, list):
                raise _bad(f"{what} ToolUse.tool_uses is not a list")
            for use in uses:
                if not isinstance(use, dict) or not isinstance(use.get("id"), str) or not use["id"]:
                    raise _bad(f"{what}: a tool use without an id")
                if not isinstance(use.get("name"), str):
                    raise _bad(f"{what}: tool use {use['id']} has no name")
                if use["id"] in calls:
                    raise RejectError(RejectCode.INCONSISTENT_SOURCE, f"tool use id {use['id']!r} appears twice")
                order.append(use["id"])
                calls[use["id"]] = ToolCall(
                    use["id"], index, use["name"], clip(json_text(use.get("args")), limits), started_at=answered
                )
        if text.strip():
            turns.append(Turn(index, Role.ASSISTANT, clip(text, limits), answered, model))
        else:
            disposition = Disposition.TOOL if kind == "ToolUse" else Disposition.SKIPPED
        census[(f"assistant/{kind}", "", disposition)] += 1

    for name, (disposition, _why) in STATE_FIELDS.items():
        value = state.get(name)
        if value in (None, [], {}, ""):
            continue
        census[(f"state/{name}", "", disposition)] += (
            len(value) if name == "transcript" and isinstance(value, list) else 1
        )

    if not turns:
        raise RejectError(
            RejectCode.NO_CONVERSATION,
            f"no prompt or answer in {len(history)} history entries (a compacted or empty conversation)",
        )
    tool_calls = []
    for call_id in order:
        call = calls[call_id]
        if call_id in results:
            output, is_error = results[call_id]
            call = ToolCall(call.call_id, call.turn_index, call.name, call.input, output, is_error, call.started_at)
        tool_calls.append(call)

    times = [t.timestamp for t in turns if t.timestamp is not None]
    started = min(times) if times else row.created_at
    inferred = False
    if started is None and row.inferred_start is not None:
        started, inferred = row.inferred_start, True
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no time in the conversation or its row")
    ended = max(times) if times else row.updated_at
    return Session(
        agent=AGENT,
        session_id=session_id_of(native),
        native_id=native,
        started_at=started,
        ended_at=ended if ended is None or ended >= started else started,
        cwd=cwd or row.key,
        models=tuple(models),
        started_at_inferred=inferred,
        turns=tuple(turns),
        tool_calls=tuple(tool_calls),
        census=census,
    )
