"""ChatGPT export records: which message kinds are turns, tool traffic or harness text, and why (declarative).

A record is one node of a conversation's `mapping` (docs/agents/chatgpt.md "Conversations"). The verified signal that
tells a person's or the model's real turn from injected text, applied in this order to each message on the visible
thread:

1. `author.role == "tool"` -> tool output (author.name is the tool), never a turn.
2. `author.role == "system"` -> harness (system prompt, `rebase_system_message`, custom-instruction context).
3. a content type in HARNESS_CONTENT (reasoning, custom instructions, memory) -> harness, whatever the role.
4. an assistant message whose `recipient` is not "all" -> a tool call (`recipient` names the tool), e.g.
   `"recipient": "browser.search"` with `parts: ["{\"query\": ...}"]` (POLY native fixture), or `code` to `python`.
5. a content type outside TEXT_CONTENT -> not a turn: TOOL_CONTENT / HARNESS are known, anything else is an
   unknown new kind, skipped and counted (never a rejection).
6. a flag of HIDDEN_FLAGS (`is_visually_hidden_from_conversation`, `is_user_system_message`,
   `is_auto_proceed_message`) -> harness (hidden system nodes, custom instructions: `"is_user_system_message": true` in
   POLY real simple.json; agent mode's automatic "Continue").
7. assistant with `channel` not null/"final" (e.g. `"channel": "commentary"` + `is_thinking_preamble_message`,
   PIONXZH fixtures) -> harness: a preamble, not the answer.
8. role user -> user turn; role assistant -> assistant turn; any other role -> skipped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from extractors.errors import RejectCode, RejectError
from extractors.model import Disposition

# Content types whose `parts` are the visible text (str) and attachments (asset pointer objects).
TEXT_CONTENT = frozenset({"text", "multimodal_text"})

# Never a turn, whoever wrote them.
HARNESS_CONTENT: dict[str, str] = {
    "thoughts": "the model's private reasoning (thoughts[{summary, content}])",
    "reasoning_recap": "a bookkeeping line like 'Thought for 7s'",
    "user_editable_context": "custom instructions (user_profile, user_instructions) injected as context",
    "model_editable_context": "the model's memory (model_set_context) injected as context",
}

# Tool traffic: the call (assistant, recipient != "all") or the output (role tool).
TOOL_CONTENT: dict[str, str] = {
    "code": "code sent to a tool (python, a connector); its text is the call input",
    "execution_output": "what a tool returned (`text`)",
    "tether_browsing_display": "browser tool result (`result`, `summary`)",
    "tether_quote": "a quoted web/file passage returned by a tool (`text`)",
    "system_error": "a tool failure (`name`, `text`)",
}

# Part objects inside `parts` that carry words a person said (voice mode), kept as text.
SPOKEN_PARTS = frozenset({"audio_transcription"})

# Channels that carry the answer; `commentary` (preambles) and `analysis` are not the answer.
ANSWER_CHANNELS = frozenset({None, "final"})

# `message.metadata` flags that make a message harness whoever wrote it: flag -> (census suffix, why and where seen).
HIDDEN_FLAGS: dict[str, tuple[str, str]] = {
    "is_visually_hidden_from_conversation": (
        "hidden",
        "context the app sends but never shows: rebase system messages, custom-instruction nodes (POLY real)",
    ),
    "is_user_system_message": (
        "hidden",
        "custom instructions (`user_editable_context`, or text) written as role user (POLY real simple.json)",
    ),
    "is_auto_proceed_message": (
        "auto_proceed",
        'agent mode\'s own role-user `"Continue"` between steps (`system_hints: ["agent"]`, `weight: 0`; a real '
        "export of 2025-08 in a public repository): the app wrote it, no person typed it",
    ),
}

# Citation entities `\ue200filecite\ue202turn0file0\ue201` (POLY real) are removed whole; any other marker of that
# private-use scheme (U+E200..U+E2FF, e.g. the \ue203 / \ue204 around a cited span) is removed but its text kept.
_CITATION = re.compile("\ue200[^\ue200\ue201]*\ue201")
_MARKER = re.compile("[\ue200-\ue2ff]")


class Kind(StrEnum):
    """What one message on the visible thread is."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_OUTPUT = "tool_output"
    HARNESS = "harness"
    UNKNOWN = "unknown"


DISPOSITION: dict[Kind, Disposition] = {
    Kind.USER: Disposition.TURN,
    Kind.ASSISTANT: Disposition.TURN,
    Kind.TOOL_CALL: Disposition.TOOL,
    Kind.TOOL_OUTPUT: Disposition.TOOL,
    Kind.HARNESS: Disposition.HARNESS,
    Kind.UNKNOWN: Disposition.SKIPPED,
}


@dataclass(frozen=True, slots=True)
class Message:
    """The fields of one `message` this extractor uses, shape-checked."""

    node_id: str
    role: str
    name: str | None
    content_type: str
    content: dict[str, Any]
    metadata: dict[str, Any]
    recipient: str
    channel: str | None
    create_time: Any


def _bad(detail: str) -> RejectError:
    return RejectError(RejectCode.BAD_SHAPE, detail)


def message_of(node_id: str, raw: dict[str, Any]) -> Message:
    """Shape-check one `message` object. Raises RejectError(bad_shape)."""
    author = raw.get("author")
    if not isinstance(author, dict) or not isinstance(author.get("role"), str):
        raise _bad(f"node {node_id}: message.author.role is missing or not a string")
    content = raw.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
        raise _bad(f"node {node_id}: message.content.content_type is missing or not a string")
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _bad(f"node {node_id}: message.metadata is not an object")
    recipient = raw.get("recipient")
    if recipient is not None and not isinstance(recipient, str):
        raise _bad(f"node {node_id}: message.recipient is not a string")
    channel = raw.get("channel")
    if channel is not None and not isinstance(channel, str):  # compared with a set of channel names below
        raise _bad(f"node {node_id}: message.channel is not a string")
    name = author.get("name")
    content_type = content["content_type"]
    if content_type in TEXT_CONTENT:
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise _bad(f"node {node_id}: {content_type} content without a parts list")
        if not all(isinstance(part, str | dict) for part in parts):
            raise _bad(f"node {node_id}: a part that is neither text nor an object")
    if content_type in ("code", "execution_output") and not isinstance(content.get("text"), str):
        raise _bad(f"node {node_id}: {content_type} content without a text string")
    return Message(
        node_id=node_id,
        role=author["role"],
        name=name if isinstance(name, str) else None,
        content_type=content_type,
        content=content,
        metadata=metadata or {},
        recipient=recipient or "all",  # absent in old exports: addressed to everyone
        channel=channel,
        create_time=raw.get("create_time"),
    )


def classify(msg: Message) -> tuple[Kind, str]:
    """The message's kind (rules 1-8 above) and its census kind string, e.g. `user/text/hidden`."""
    base = f"{msg.role}/{msg.content_type}"
    if msg.role == "tool":
        return Kind.TOOL_OUTPUT, base
    if msg.role == "system" or msg.content_type in HARNESS_CONTENT:
        return Kind.HARNESS, base
    if msg.role == "assistant" and msg.recipient != "all":
        return Kind.TOOL_CALL, f"{base}/tool_call"
    if msg.content_type not in TEXT_CONTENT:
        return (Kind.HARNESS if msg.content_type in TOOL_CONTENT else Kind.UNKNOWN), base
    flagged = next((suffix for flag, (suffix, _) in HIDDEN_FLAGS.items() if msg.metadata.get(flag) is True), None)
    if flagged:
        return Kind.HARNESS, f"{base}/{flagged}"
    if msg.role == "user":
        return Kind.USER, base
    if msg.role == "assistant":
        if msg.channel not in ANSWER_CHANNELS or msg.metadata.get("is_thinking_preamble_message") is True:
            return Kind.HARNESS, f"{base}/{msg.channel or 'preamble'}"
        return Kind.ASSISTANT, base
    return Kind.UNKNOWN, base


def clean_text(text: str) -> str:
    """Text without citation entities and private-use markers."""
    return _MARKER.sub("", _CITATION.sub("", text))


def _attachment(part: dict[str, Any]) -> str:
    """A short reference for a non-text part: its asset pointer, kind and size (never the bytes)."""
    inner = part.get("audio_asset_pointer") or part.get("video_container_asset_pointer")
    source = inner if isinstance(inner, dict) and "asset_pointer" in inner else part
    pointer = source.get("asset_pointer")
    kind = str(part.get("content_type") or "part")
    extra = [kind]
    mime = source.get("mime_type") or source.get("format")
    if isinstance(mime, str):
        extra.append(mime)
    size = source.get("size_bytes")
    if isinstance(size, int) and not isinstance(size, bool):
        extra.append(f"{size} bytes")
    return f"{pointer if isinstance(pointer, str) else kind} ({', '.join(extra)})"


def text_and_attachments(msg: Message) -> tuple[str, tuple[str, ...]]:
    """A text message's words (string parts and voice transcriptions, joined) and its attachment references."""
    texts: list[str] = []
    attachments: list[str] = []
    for part in msg.content["parts"]:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            content_type = part.get("content_type")  # a list or an object is unhashable: not a spoken part
            if isinstance(content_type, str) and content_type in SPOKEN_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                attachments.append(_attachment(part))
    for item in msg.metadata.get("attachments") or ():
        if isinstance(item, dict):
            mime = item.get("mime_type")
            size = item.get("size")
            bits = [
                b
                for b in (mime if isinstance(mime, str) else None, f"{size} bytes" if isinstance(size, int) else None)
                if b
            ]
            attachments.append(f"{item.get('name') or item.get('id')} ({', '.join(bits) or 'file'})")
    return clean_text("\n".join(t for t in texts if t)), tuple(attachments)


def tool_text(msg: Message) -> str:
    """The text a tool call or output carries, by content type (empty when it has none)."""
    content = msg.content
    if msg.content_type in TEXT_CONTENT:
        return clean_text("\n".join(p for p in content["parts"] if isinstance(p, str)))
    for key in ("text", "result", "summary"):
        value = content.get(key)
        if isinstance(value, str):
            return clean_text(value)
    return ""


def same_tool(recipient: str, name: str | None) -> bool:
    """Is a tool message from the tool a call was sent to? Names agree up to the first dot (`python` / `python`,
    `web.run` / `web.run`, `file_search.msearch` / `file_search`); an unnamed tool message belongs to the call."""
    return name is None or name.split(".")[0] == recipient.split(".")[0]


def tool_error(msg: Message) -> bool | None:
    """Did this tool output fail? `system_error` content, or `metadata.aggregate_result.status` other than
    "success" (python tool: `"failed_with_in_kernel_exception"`); None when the output does not say."""
    if msg.content_type == "system_error":
        return True
    result = msg.metadata.get("aggregate_result")
    status = result.get("status") if isinstance(result, dict) else None
    return None if not isinstance(status, str) else status != "success"
