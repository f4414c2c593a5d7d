"""The fields of one Grok `updates.jsonl` update, as text (docs/agents/grok.md "updates.jsonl"): times, `_meta`, ACP
content blocks, tool call content and input, a prompt's usage. Pure functions; each raises RejectError(bad_shape)
for a known field of the wrong type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from extractors.blobref import data_url_reference
from extractors.bounded import Limits, clip, json_text
from extractors.errors import RejectCode, RejectError
from extractors.model import Usage
from extractors.timeutil import from_epoch_ms, from_epoch_seconds

TICKS_PER_USD = 1e10  # `costUsdTicks`: 10^10 ticks are one US dollar


def time_of(params: dict[str, Any], record: dict[str, Any]) -> datetime | None:
    """`params._meta.agentTimestampMs` (ms, when the agent made the update: it survives a fork's copy of the file),
    else the envelope's `timestamp` (unix seconds, when the line was written: a fork's copy re-stamps it)."""
    meta = params.get("_meta")
    if isinstance(meta, dict):
        stamp = from_epoch_ms(meta.get("agentTimestampMs"))
        if stamp is not None:
            return stamp
    return from_epoch_seconds(record.get("timestamp")) if record is not params else None


def meta_of(update: dict[str, Any], index: int) -> dict[str, Any]:
    meta = update.get("_meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "an update whose _meta is not an object", line=index)
    return meta


def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def content_block(content: Any, index: int) -> tuple[str, list[str]]:
    """(text, attachment references) of one ACP content block: `text`, `image`, `resource_link`, `resource`."""
    if content is None:
        return "", []
    if not isinstance(content, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "a chunk whose content is not a content block", line=index)
    kind = content.get("type")
    if isinstance(content.get("text"), str) and kind in (None, "text"):
        return content["text"], []
    if kind == "image":
        data, mime = content.get("data"), content.get("mimeType")
        if isinstance(data, str) and isinstance(mime, str):
            return "", [data_url_reference(f"data:{mime};base64,{data}")]
        uri = content.get("uri")
        return "", [data_url_reference(uri) if isinstance(uri, str) else "image"]
    if kind == "resource_link" and isinstance(content.get("uri"), str):
        return "", [f"file {content['uri']}"]
    if kind == "resource":
        resource = content.get("resource")
        uri = resource.get("uri") if isinstance(resource, dict) else None
        return "", [f"file {uri}" if isinstance(uri, str) else "resource"]
    return "", [str(kind) if isinstance(kind, str) else "content"]


def tool_content(content: Any, index: int) -> str:
    """A tool call's `content`: a list of `{type: content, content: <block>}`, `{type: diff, path}`, `{type:
    terminal, terminalId}` (or one such item alone), as text."""
    items = content if isinstance(content, list) else [content]
    parts: list[str] = []
    for item in items:
        if item is None:
            continue
        if not isinstance(item, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a tool call content item that is not an object", line=index)
        kind = item.get("type")
        if kind == "content":
            text, refs = content_block(item.get("content"), index)
            parts.extend([text] if text else [f"[{ref}]" for ref in refs])
        elif kind == "diff":
            parts.append(f"[diff {item.get('path')}]")
        elif kind == "terminal":
            parts.append(f"[terminal {item.get('terminalId')}]")
        else:  # a bare content block (a shape peers have seen)
            text, refs = content_block(item, index)
            parts.extend([text] if text else [f"[{ref}]" for ref in refs])
    return "\n".join(parts)


def tool_input(raw: Any, limits: Limits) -> str | None:
    if raw is None:
        return None
    try:
        text = raw if isinstance(raw, str) else json_text(raw)
    except RecursionError as exc:  # nested deeper than JSON text can be written back
        raise RejectError(RejectCode.BAD_SHAPE, "a tool call's rawInput nested too deep to store") from exc
    return clip(text, limits)


def count_of(usage: dict[str, Any], name: str, index: int) -> int:
    value = usage.get(name, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RejectError(RejectCode.BAD_SHAPE, f"usage.{name} is not a count", line=index)
    return value


def prompt_usage(
    usage: dict[str, Any], index: int, when: datetime | None, model: str | None, prompt: str
) -> Usage | None:
    """One `Usage` from a turn_completed's `usage` (Grok's `PromptUsage`): `inputTokens` is the whole prompt,
    cache reads included, so the uncached part is `inputTokens - cachedReadTokens`; `reasoningTokens` are part of
    `outputTokens`; `costUsdTicks` is a cost only when neither `usageIsIncomplete` nor `costIsPartial` is set."""
    read = count_of(usage, "cachedReadTokens", index)
    total_input = count_of(usage, "inputTokens", index)
    output = count_of(usage, "outputTokens", index)
    if not (total_input or output or read):
        return None
    by_model = usage.get("modelUsage")
    if isinstance(by_model, dict) and by_model:
        sized = [
            (name, count_of(v, "inputTokens", index) + count_of(v, "outputTokens", index))
            for name, v in by_model.items()
            if isinstance(v, dict)
        ]
        if sized:
            model = max(sized, key=lambda pair: pair[1])[0]  # several models: the one that did most of the work
    ticks = usage.get("costUsdTicks")
    trusted = usage.get("usageIsIncomplete") is not True and usage.get("costIsPartial") is not True
    cost = ticks / TICKS_PER_USD if trusted and isinstance(ticks, int) and not isinstance(ticks, bool) else None
    return Usage(
        turn_index=index,
        model=model,
        input_tokens=max(total_input - read, 0),
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=count_of(usage, "cacheCreationTokens", index),
        reasoning_tokens=count_of(usage, "reasoningTokens", index),
        cost_usd=cost,
        timestamp=when,
        response_id=prompt,
    )


def usage_total(row: Usage) -> int:
    return (row.input_tokens or 0) + (row.output_tokens or 0) + (row.cache_read_tokens or 0)


def strip_wrapper(text: str, tag: str) -> str | None:
    """`text` without its first `<tag>...</tag>` span (and the whitespace after it), or None when it has none."""
    start = text.find(f"<{tag}>")
    if start < 0:
        return None
    end = text.find(f"</{tag}>", start + len(tag) + 2)
    if end < 0:
        return None
    return text[:start] + text[end + len(tag) + 3 :].lstrip()
