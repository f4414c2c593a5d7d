"""The record tables of Factory Droid session files: line `type` and message `role` -> disposition, with a why each.

The rules are docs/agents/droid.md "Records" and "A person's turn"; the parse (`extractors.droid.parse`) applies
them. A line `type` not in LINE_KINDS follows `SPEC.unknown_records` ("skip": counted as SKIPPED under its own kind).
"""

from __future__ import annotations

import re

from extractors.model import Disposition

HEADER = "session_start"

# Line `type` -> (disposition, why). `message` lines are decided by their role (MESSAGE_ROLES) and content.
LINE_KINDS: dict[str, tuple[Disposition, str]] = {
    HEADER: (Disposition.METADATA, "the header: session `id`, `title`/`sessionTitle`, `cwd`, `owner`, `version`"),
    "message": (Disposition.TURN, "a conversation message: decided by `message.role` and its content blocks"),
    "todo_state": (Disposition.SKIPPED, "a copy of the todo list the TodoWrite tool call already holds"),
    "agent_turn_outcome": (Disposition.METADATA, "how an assistant turn ended (`reason`, `resultKind`); no time"),
    "compaction_state": (Disposition.HARNESS, "the summary droid writes when it compacts the context (`summaryText`)"),
}

# `message.visibility` -> (disposition, why). Absent: the message was both shown and sent (a person's prompt, the
# model's answer). A value not here is counted SKIPPED as `message/<role>/<value>` and never read as a turn.
VISIBILITIES: dict[str, tuple[Disposition, str]] = {
    "llm_only": (Disposition.HARNESS, "context droid sends the model and never shows: reminders, skills, the date"),
    "user_only": (Disposition.HARNESS, "a notice droid shows the person and never sends the model"),
}

# `message.role` -> (disposition, why).
MESSAGE_ROLES: dict[str, tuple[Disposition, str]] = {
    "user": (Disposition.TURN, "what the person typed; `tool_result` blocks and `<system-reminder>` text are not"),
    "assistant": (Disposition.TURN, "the model's visible `text`; `tool_use` blocks are tool calls, `thinking` is not"),
}

# The first line of a `droid exec --output-format stream-json` capture (saved stdout, not a session file on disk):
# a known format this reader does not read, so `unsupported_format` rather than a guess (docs/agents/droid.md
# "Not read").
STREAM_JSON_KINDS = frozenset({"system", "completion", "tool_call"})

# Content block types of a message (Anthropic-shaped). Anything else in a user or assistant message is counted and
# not read (census `block/<type>`).
TEXT_BLOCK = "text"
TOOL_USE_BLOCK = "tool_use"
TOOL_RESULT_BLOCK = "tool_result"
IMAGE_BLOCK = "image"
REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# Injected context droid writes as user text (the date, the skills list, the environment): a `<system-reminder>`
# span, stripped from the person's text; a user message of nothing else is HARNESS (census `message/user/reminder`).
SYSTEM_REMINDER_SPAN = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
