"""Claude.ai export records: what each content block of a message is, and why (declarative).

A record is one content block of a message (`chat_messages[].content[]`), counted as `<sender>/<block type>`; a
message without a `content` list (older exports) is one record `<sender>/text_field` (docs/agents/claude_ai.md
"Messages and blocks"). Blocks of a type not listed here are a new kind: skipped and counted (`SPEC.unknown_records`),
never stored as a turn.
"""

from __future__ import annotations

from extractors.model import Disposition

HUMAN = "human"
ASSISTANT = "assistant"
SENDERS = frozenset({HUMAN, ASSISTANT})

# The flattened `text` of a message, read only when it has no `content` list or an empty one.
TEXT_FIELD = "text_field"

# The root sentinel real exports write as the first message's `parent_message_uuid` (peer renderings of real exports
# quote it verbatim); any parent that names no message of the conversation is a root, this one included.
ROOT_PARENT = "00000000-0000-4000-8000-000000000000"

# The tool whose calls write artifacts (`input`: id, type, title, command, content, version_uuid): each call is also
# kept on its turn as a reference, `artifact <id> ...`.
ARTIFACT_TOOLS = frozenset({"artifacts"})

# block type -> (disposition, why). Text is the turn; tool traffic is a ToolCall; the rest is never a turn.
BLOCKS: dict[str, tuple[Disposition, str]] = {
    "text": (Disposition.TURN, "what the person typed, or the model's visible answer"),
    "thinking": (
        Disposition.HARNESS,
        "the model's reasoning (`thinking`, `summaries`): reasoning is never a turn, as in the Claude Code reader",
    ),
    "redacted_thinking": (Disposition.HARNESS, "reasoning withheld by the service"),
    "tool_use": (Disposition.TOOL, "a call (`id`, `name`, `input`): web_search, artifacts, repl, view, MCP tools"),
    "tool_result": (Disposition.TOOL, "a call's result (`tool_use_id`, `name`, `content`, `is_error`)"),
    "token_budget": (Disposition.METADATA, "the service's budget checkpoint between tool calls: timestamps only"),
    "voice_note": (
        Disposition.SKIPPED,
        "named by a peer's structs, never seen in a capture: its fields are unknown, so nothing is taken from it",
    ),
}
