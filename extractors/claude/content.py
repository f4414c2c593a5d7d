"""Reading `message.content` of Claude Code records: prompt text, blob references, tool-result text, commands.

Pure functions over already-parsed JSON; content lists reach here already checked to hold only objects.
"""

from __future__ import annotations

from typing import Any

from extractors.bounded import Limits, clip
from extractors.bounded import json_text as _bounded_json_text
from extractors.claude import tables
from extractors.ids import stable_hash
from extractors.model import Disposition

Blocks = list[dict[str, Any]]


def blob_reference(block: dict[str, Any]) -> str:
    """A short reference for an image / document block, never its data: `image/png sha256:<hex> 1234 bytes`.

    The digest is of the base64 text as written; the byte count is the decoded size, computed from its length.
    """
    source = block.get("source")
    kind = str(block.get("type") or "blob")
    if not isinstance(source, dict):
        return kind
    media = source.get("media_type")
    media_type = media if isinstance(media, str) and media else kind
    data = source.get("data")
    if isinstance(data, str):
        size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
        return f"{media_type} sha256:{stable_hash(data)} {size} bytes"
    url = source.get("url")
    if isinstance(url, str):
        return f"{media_type} url:{url[:512]}"
    return media_type


def is_blob(block: dict[str, Any]) -> bool:
    return block.get("type") in ("image", "document") and isinstance(block.get("source"), dict)


def text_of(content: str | Blocks) -> str:
    """The text blocks of a content list joined with blank lines (a string content is returned as is)."""
    if isinstance(content, str):
        return content
    parts = [b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str)]
    return "\n\n".join(parts)


def attachments_of(content: str | Blocks) -> tuple[str, ...]:
    if isinstance(content, str):
        return ()
    return tuple(blob_reference(b) for b in content if is_blob(b))


def only_tool_results(content: str | Blocks) -> bool:
    return isinstance(content, list) and bool(content) and all(b.get("type") == "tool_result" for b in content)


def command_text(text: str) -> str | None:
    """`/name args` for a slash-command wrapper (any tag order), else None."""
    stripped = text.lstrip()
    if not stripped.startswith(tables.COMMAND_OPENERS):
        return None
    name_match = tables.COMMAND_NAME.search(stripped)
    if name_match is None:
        return None
    name = name_match.group(1).strip()
    if not name:
        return None
    if not name.startswith("/"):
        name = "/" + name
    args_match = tables.COMMAND_ARGS.search(stripped)
    args = args_match.group(1).strip() if args_match else ""
    return f"{name} {args}" if args else name


def strip_reminders(text: str) -> str:
    """The prompt without `<system-reminder>…</system-reminder>` spans the harness appended to it."""
    stripped = tables.SYSTEM_REMINDER_SPAN.sub("", text)
    return stripped.strip() if stripped != text else text


def classify_user(record: dict[str, Any], content: str | Blocks) -> tuple[str, Disposition, str | None]:
    """(census kind, disposition, prompt text or None) of a user record, by the rules of
    docs/agents/claude.md "A person's turn or injected text", in order.

    The text is returned only for a person's turn (a prompt or a slash command).
    """
    if record.get("isMeta") is True:
        return "user/meta", Disposition.HARNESS, None
    text = text_of(content)
    stripped = text.lstrip()
    if record.get("isCompactSummary") is True or stripped.startswith(tables.COMPACT_SUMMARY_PREFIX):
        return "user/compact_summary", Disposition.HARNESS, None
    if only_tool_results(content) or "toolUseResult" in record:
        return "user/tool_result", Disposition.TOOL, None
    for tag in tables.HARNESS_TAGS:
        if stripped.startswith(f"<{tag}>"):
            return f"user/{tag}", Disposition.HARNESS, None
    for tag in tables.SHELL_TAGS:
        if stripped.startswith(f"<{tag}>"):
            return f"user/{tag}", Disposition.TOOL, None
    if stripped.strip() in tables.INTERRUPTED_TEXTS:
        return "user/interrupted", Disposition.HARNESS, None
    for prefix, kind in tables.HARNESS_PREFIXES.items():
        if stripped.startswith(prefix):
            return kind, Disposition.HARNESS, None
    command = command_text(text)
    if command is not None:
        return "user/command", Disposition.TURN, command
    prompt = strip_reminders(text)
    if not prompt.strip() and not attachments_of(content):
        return "user/empty", Disposition.SKIPPED, None
    return "user", Disposition.TURN, prompt


def tool_result_output(block: dict[str, Any], limits: Limits) -> str | None:
    """The text of a `tool_result` block (string, or text blocks joined; images as a short reference), clipped."""
    content = block.get("content")
    if content is None:
        return None
    if isinstance(content, str):
        return clip(content, limits)
    if isinstance(content, list):
        return clip("\n\n".join(_item_text(item) for item in content), limits)
    return clip(json_text(content), limits)


def _item_text(item: Any) -> str:
    """One item of a tool result list: text as is, a blob as a reference, a search hit as `title <url>`."""
    if not isinstance(item, dict):
        return json_text(item)
    if item.get("type") == "text" and isinstance(item.get("text"), str):
        return str(item["text"])
    if is_blob(item):
        return f"[{blob_reference(item)}]"
    if isinstance(item.get("url"), str):
        # web_search_result: `encrypted_content` is an opaque blob, never stored.
        return f"{item.get('title') or ''} <{item['url']}>".strip()
    return json_text({k: v for k, v in item.items() if "encrypted" not in k})


def json_text(value: Any) -> str:
    """Compact JSON text of a parsed value (tool input, structured output).

    Through `extractors.bounded.json_text`: a record read by the stdlib fallback may hold integers past 64 bits,
    which orjson refuses to write.
    """
    return _bounded_json_text(value)
