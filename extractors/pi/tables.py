"""The record tables of Pi session files: entry `type` and message `role` -> disposition, with a why each.

The rules are docs/agents/pi.md "Entries" and "A person's turn"; the parse (`extractors.pi.parse`) applies them.
"""

from __future__ import annotations

from extractors.model import Disposition

# Entry `type` -> (disposition, why). `message` entries are decided by their role (MESSAGE_ROLES).
ENTRY_KINDS: dict[str, tuple[Disposition, str]] = {
    "session": (
        Disposition.METADATA,
        "the header: id, cwd, version, time, fork parent (`branchedFrom`/`parentSession`)",
    ),
    "title": (Disposition.METADATA, "OMP's rewritable title slot line, written before the header"),
    "message": (Disposition.TURN, "an AgentMessage: decided by `message.role` below"),
    "model_change": (Disposition.METADATA, "the person switched model (`provider`, `modelId`)"),
    "thinking_level_change": (Disposition.METADATA, "the person switched the thinking level"),
    "session_info": (Disposition.METADATA, "the person named the session (`name`): the title"),
    "label": (Disposition.METADATA, "a bookmark the person set on an entry (`targetId`, `label`)"),
    "compaction": (
        Disposition.HARNESS,
        "the summary pi writes when it compacts the context; the file keeps every entry",
    ),
    "branch_summary": (Disposition.HARNESS, "the summary of a branch the person navigated away from (`/tree`)"),
    "custom_message": (Disposition.HARNESS, "an extension's message injected into the context, shown as user text"),
    "custom": (Disposition.SKIPPED, "an extension's saved state (`customType`, `data`), never in the context"),
}

# `message.role` -> (disposition, why).
MESSAGE_ROLES: dict[str, tuple[Disposition, str]] = {
    "user": (Disposition.TURN, "what the person typed (a `/command` as typed too); empty ones are skipped"),
    "assistant": (
        Disposition.TURN,
        "the model's visible text; `toolCall` parts are tool calls, `thinking` is not text",
    ),
    "toolResult": (Disposition.TOOL, "a tool's output, joined to the assistant's `toolCall` by `toolCallId`"),
    "bashExecution": (Disposition.TOOL, "the person's `!cmd` shell command and its output: a tool call by the person"),
    "custom": (Disposition.HARNESS, "an extension's injected message (v3; `hookMessage` before)"),
    "hookMessage": (Disposition.HARNESS, "an extension's injected message (v1/v2 name of `custom`)"),
    "compactionSummary": (Disposition.HARNESS, "a compaction summary as a message (pi builds these at load)"),
    "branchSummary": (Disposition.HARNESS, "a branch summary as a message (pi builds these at load)"),
}

# A user message whose text starts with this is a slash command typed as text (`/mode`, `/model`), kept as the
# person's turn with the command as typed, as the Claude reader keeps `<command-name>` (census `message/user/command`).
COMMAND_PREFIX = "/"
