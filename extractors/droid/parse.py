"""From the lines of one Factory Droid session file (and its `.settings.json`) to one Session. Pure: no I/O.

The rules (docs/agents/droid.md), each tested in tests/test_droid.py:
- Header: the first line is `{"type":"session_start","id":...}`; its `id` is the native id. A first line of the
  `droid exec` stream dialect is `unsupported_format`; any other first line is `missing_session_id`. A second
  header with another id is `inconsistent_source`.
- Messages: `{"type":"message","id","timestamp","message":{"role","content"}}`, content a string or a list of
  strings and Anthropic-shaped blocks. A user message's text without its `<system-reminder>` spans is the person's
  turn; its `tool_result` blocks are the results of the assistant's `tool_use` calls, joined by id.
- Visibility: a message with `message.visibility` (`llm_only` context, `user_only` notices) is never a turn.
- Models: each assistant message's `modelId`, as written.
- Times: each message's ISO `timestamp`. Start = the earliest message time, else the header's `timestamp`; none at
  all is `missing_timestamp` (never the file's mtime).
- Tokens: the settings file's `tokenUsage`, a running total of the whole session, is ONE Usage row
  (docs/agents/droid.md "Tokens"); per-message `usage` is not read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extractors.blobref import base64_reference
from extractors.bounded import Limits, Line, clip, count_glued_line
from extractors.bounded.numbers import OUT_OF_RANGE, token_count
from extractors.droid.tables import (
    HEADER,
    IMAGE_BLOCK,
    LINE_KINDS,
    MESSAGE_ROLES,
    REASONING_BLOCKS,
    STREAM_JSON_KINDS,
    SYSTEM_REMINDER_SPAN,
    TEXT_BLOCK,
    TOOL_RESULT_BLOCK,
    TOOL_USE_BLOCK,
    VISIBILITIES,
)
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Disposition, Role, Session, ToolCall, Turn, Usage
from extractors.timeutil import parse_iso

AGENT = Agent("droid")
# The settings `model` of a session left to droid's router, not a model name
# (docs/agents/droid.md "Where the files are").
AUTO_MODEL = "auto"

Census = Counter[tuple[str, str, Disposition]]
_JSON = json.JSONEncoder(ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the `<id>.settings.json` beside a session file says (docs/agents/droid.md "Where the files are")."""

    model: str | None = None
    usage: dict[str, Any] | None = None  # `tokenUsage`: the session's running totals


@dataclass(slots=True)
class _Call:
    call_id: str
    index: int
    name: str
    input: str | None
    started_at: datetime | None
    output: str | None = None
    is_error: bool | None = None
    ended_at: datetime | None = None


def read_settings(document: Any) -> Settings:
    """The fields read from a settings document. Raises RejectError(bad_shape) when it is not an object."""
    if not isinstance(document, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "the .settings.json beside the session is not a JSON object")
    model = document.get("model")
    usage = document.get("tokenUsage")
    return Settings(
        model=model if isinstance(model, str) and model.strip() else None,
        usage=usage if isinstance(usage, dict) else None,
    )


def parse_session_file(lines: Iterable[Line], limits: Limits, settings: Settings | None) -> Session:
    """The one session of a Droid file. Raises RejectError."""
    census: Census = Counter()
    native: str | None = None
    version = ""
    header_at: datetime | None = None
    title: str | None = None
    cwd: str | None = None
    turns: list[Turn] = []
    calls: dict[str, _Call] = {}
    times: list[datetime] = []
    models: list[str] = []  # each assistant message's `modelId`, in order of first use
    last_assistant = 0
    for line in lines:
        if line.parts > 1:
            count_glued_line(line, census)
        record, index = line.record, line.index
        kind = record.get("type")
        if native is None:
            native, version, header_at, title, cwd = _header(record, index)
            census[(HEADER, version, Disposition.METADATA)] += 1
            continue
        if kind == HEADER:
            if record.get("id") != native:
                raise RejectError(
                    RejectCode.INCONSISTENT_SOURCE,
                    f"a second session_start with id {record.get('id')!r} in session {native!r}",
                    line=index,
                    session_hint=session_id(AGENT, native),
                )
            census[(f"{HEADER}/repeated", version, Disposition.METADATA)] += 1
            continue
        if kind != "message":
            name = kind if isinstance(kind, str) else "(untyped)"
            census[(name, version, LINE_KINDS.get(name, _UNKNOWN)[0])] += 1
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a message line without a message object", line=index)
        at = parse_iso(record.get("timestamp"))
        if at is not None:
            times.append(at)
        role = message.get("role")
        visibility = message.get("visibility")
        if visibility is not None:  # context or a notice, not a message of the conversation
            name = f"message/{role if isinstance(role, str) else '(none)'}/{visibility}"
            census[(name, version, VISIBILITIES.get(str(visibility), _UNKNOWN)[0])] += 1
            continue
        blocks = _blocks(message.get("content"), index)
        if role == "user":
            _user(index, blocks, at, turns, calls, census, version, limits)
        elif role == "assistant":
            model = _text(message.get("modelId"))
            if model and model not in models:
                models.append(model)
            if _assistant(index, blocks, at, turns, calls, census, version, limits, model):
                last_assistant = index
        else:
            name = role if isinstance(role, str) else "(none)"
            census[(f"message/{name}", version, MESSAGE_ROLES.get(name, _UNKNOWN)[0])] += 1
    if native is None:
        raise RejectError(RejectCode.NO_CONVERSATION, "an empty file: no session_start line")
    sid = session_id(AGENT, native)
    if not turns and not calls:
        # A session opened and never used (droid writes the header at once), or context alone: nothing to load.
        raise RejectError(RejectCode.NO_CONVERSATION, "no user or assistant turn and no tool call", session_hint=sid)
    started = min(times) if times else header_at
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no message time and no header time", session_hint=sid)
    model = settings.model if settings and settings.model != AUTO_MODEL else None
    model = model or (models[-1] if models else None)
    if model and not models:
        models.append(model)
    usage = _usage(settings, last_assistant, model, max(times) if times else None, census, version)
    return Session(
        agent=AGENT,
        session_id=sid,
        native_id=native,
        started_at=started,
        ended_at=max(times) if times else None,
        cwd=cwd,
        title=title,
        models=tuple(models),
        turns=tuple(turns),
        tool_calls=tuple(
            ToolCall(c.call_id, c.index, c.name, c.input, c.output, c.is_error, c.started_at, c.ended_at)
            for c in calls.values()
        ),
        usage=usage,
        census=census,
    )


def _header(record: dict[str, Any], index: int) -> tuple[str, str, datetime | None, str | None, str | None]:
    kind = record.get("type")
    if kind != HEADER:
        if isinstance(kind, str) and kind in STREAM_JSON_KINDS:
            raise RejectError(
                RejectCode.UNSUPPORTED_FORMAT,
                f"a `droid exec` stream-json capture (first record {kind!r}), not a session file",
                line=index,
            )
        raise RejectError(RejectCode.MISSING_SESSION_ID, f"the first record is {kind!r}, not session_start", line=index)
    native = record.get("id")
    if not isinstance(native, str) or not native.strip() or "/" in native or "\\" in native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "the session_start line has no usable id", line=index)
    version = record.get("version")
    version_text = str(version) if isinstance(version, int | str) and not isinstance(version, bool) else ""
    title = _text(record.get("sessionTitle")) or _text(record.get("title"))
    return native, version_text, parse_iso(record.get("timestamp")), title, _text(record.get("cwd"))


def _blocks(content: Any, index: int) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block, a bare string in a list is a text block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": TEXT_BLOCK, "text": content}]
    if not isinstance(content, list):
        raise RejectError(RejectCode.BAD_SHAPE, "message content that is neither text nor a list", line=index)
    blocks: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            blocks.append({"type": TEXT_BLOCK, "text": item})
        elif isinstance(item, dict):
            blocks.append(item)
        else:
            raise RejectError(RejectCode.BAD_SHAPE, "a content block that is not an object or text", line=index)
    return blocks


def _user(
    index: int,
    blocks: list[dict[str, Any]],
    at: datetime | None,
    turns: list[Turn],
    calls: dict[str, _Call],
    census: Census,
    version: str,
    limits: Limits,
) -> None:
    texts: list[str] = []
    attachments: list[str] = []
    results = reminders = 0
    for block in blocks:
        kind = block.get("type")
        if kind == TEXT_BLOCK:
            value = block.get("text")
            if isinstance(value, str):
                stripped = SYSTEM_REMINDER_SPAN.sub("", value)
                if stripped != value:
                    reminders += 1
                if stripped.strip():
                    texts.append(stripped.strip() if stripped != value else value)
        elif kind == TOOL_RESULT_BLOCK:
            _tool_result(index, block, at, calls, census, version, limits)
            results += 1
        elif kind == IMAGE_BLOCK:
            attachments.append(_image(block))
        else:
            census[(f"block/{kind if isinstance(kind, str) else '(none)'}", version, Disposition.SKIPPED)] += 1
    text = "\n".join(texts)
    if text.strip() or attachments:
        turns.append(Turn(index, Role.USER, clip(text, limits), at, None, tuple(attachments)))
        census[("message/user", version, Disposition.TURN)] += 1
    elif results:
        census[("message/user/tool_result", version, Disposition.TOOL)] += 1
    elif reminders:
        census[("message/user/reminder", version, Disposition.HARNESS)] += 1
    else:
        census[("message/user/empty", version, Disposition.SKIPPED)] += 1


def _assistant(
    index: int,
    blocks: list[dict[str, Any]],
    at: datetime | None,
    turns: list[Turn],
    calls: dict[str, _Call],
    census: Census,
    version: str,
    limits: Limits,
    model: str | None,
) -> bool:
    """Reads one assistant message; True when it said something or called a tool."""
    texts: list[str] = []
    called = 0
    for block in blocks:
        kind = block.get("type")
        if kind == TEXT_BLOCK:
            value = block.get("text")
            if isinstance(value, str) and value.strip():
                texts.append(value)
        elif kind == TOOL_USE_BLOCK:
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise RejectError(RejectCode.BAD_SHAPE, "a tool_use without a string id and name", line=index)
            if call_id not in calls:  # the same call written again: one call
                arguments = block.get("input")
                text = arguments if isinstance(arguments, str) or arguments is None else _JSON.encode(arguments)
                calls[call_id] = _Call(call_id, index, name, None if text is None else clip(text, limits), at)
            called += 1
        elif isinstance(kind, str) and kind in REASONING_BLOCKS:
            continue
        else:
            census[(f"block/{kind if isinstance(kind, str) else '(none)'}", version, Disposition.SKIPPED)] += 1
    if texts:
        turns.append(Turn(index, Role.ASSISTANT, clip("\n".join(texts), limits), at, model))
        census[("message/assistant", version, Disposition.TURN)] += 1
        return True
    if called:
        census[("message/assistant/tool_calls", version, Disposition.TOOL)] += 1
        return True
    census[("message/assistant/empty", version, Disposition.SKIPPED)] += 1  # thinking only, or nothing
    return False


def _tool_result(
    index: int,
    block: dict[str, Any],
    at: datetime | None,
    calls: dict[str, _Call],
    census: Census,
    version: str,
    limits: Limits,
) -> None:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise RejectError(RejectCode.BAD_SHAPE, "a tool_result without a string tool_use_id", line=index)
    pending = calls.get(call_id)
    if pending is None:
        census[("block/tool_result/orphan", version, Disposition.TOOL)] += 1
        return
    content = block.get("content")
    if isinstance(content, str):
        output: str | None = content
    elif isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == TEXT_BLOCK and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == IMAGE_BLOCK:
                parts.append(f"[{_image(part)}]")
        output = "\n".join(parts)
    else:
        output = None
    pending.output = None if output is None else clip(output, limits)
    error = block.get("is_error")
    pending.is_error = error if isinstance(error, bool) else None
    pending.ended_at = at


def _image(block: dict[str, Any]) -> str:
    source = block.get("source")
    if isinstance(source, dict) and isinstance(source.get("data"), str):
        media = source.get("media_type")
        return base64_reference(source["data"], media if isinstance(media, str) and media else "image/unknown")
    return "image"


def _usage(
    settings: Settings | None,
    index: int,
    model: str | None,
    at: datetime | None,
    census: Census,
    version: str,
) -> tuple[Usage, ...]:
    """The settings file's running totals as one row, at the last assistant message (docs/agents/droid.md "Tokens").
    All zeros (a session that never reached the model) is no row."""
    if settings is None or settings.usage is None:
        return ()
    get = settings.usage.get
    counts: list[int | None] = []
    for key in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheCreationTokens", "thinkingTokens"):
        value, out = token_count(get(key))
        if out:
            census[OUT_OF_RANGE] += 1
        counts.append(value)
    if not any(counts):
        return ()
    tokens_in, tokens_out, cache_read, cache_write, reasoning = counts
    return (Usage(index, model, tokens_in, tokens_out, cache_read, cache_write, reasoning, None, at),)


_UNKNOWN = (Disposition.SKIPPED, "")  # a line kind or role not in the tables


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
