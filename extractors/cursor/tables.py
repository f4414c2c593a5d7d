"""Cursor's agent-transcript records and what becomes of them (docs/agents/cursor.md "Records").

A JSONL row has NO envelope: role-bearing rows carry a top-level `role` and `message.content` and no `type`, id,
time, model or usage; marker rows carry a top-level `type` and no `role`. The census kind of a row is
`<role>/<what it held>` or `<type>`; every row is counted once (docs/agents/cursor.md "The census").
"""

from __future__ import annotations

from extractors.model import Disposition

# Top-level `role` -> disposition (a role not listed is skipped under `role/<value>`).
ROLES: dict[str, Disposition] = {
    "user": Disposition.TURN,  # a person's turn when it holds a <user_query> (or plain text); else harness or tool
    "assistant": Disposition.TURN,  # visible text; consecutive rows are ONE reply; `tool_use` blocks are calls
}

# Top-level `type` of a row without `role` -> (disposition, why).
MARKERS: dict[str, tuple[Disposition, str]] = {
    "turn_ended": (
        Disposition.SKIPPED,
        '`{"type":"turn_ended","status":"success"|"error","error":...}`: the end of a turn, not a message '
        "(AS bench: added around 2026-04; vibe-replay#577: 8 in 3 real files). Counted as `turn_ended/<status>`, "
        "so errors and aborts show in the census",
    ),
}

# A row with a top-level `type` of these and no `role` is a Claude Code record (`{"type":"user","message":{"role":
# ...}}`), not Cursor's: the file is rejected as unsupported_format, naming --format claude (MemPalace PR#232: the
# two are told apart by a top-level `role` without `type`).
CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "system", "progress", "file-history-snapshot"})

# --- a person's text ---------------------------------------------------------------------------------------------
# The typed prompt sits inside `<user_query>` (the real capture in docs/agents/cursor.md "Real captures": every user
# row of it); what follows it (`<context>`, attached files) and precedes it is harness. A tag's body is what lies
# between an opening and the first closing after it, trimmed (what `<user_query>\s*(.*?)\s*</user_query>` would
# find, read with str.find: the regex's lazy scan cost ten times as much, once per prompt).
USER_QUERY = ("<user_query>", "</user_query>")
# The turn's time: `<timestamp>Sunday, Sep 20, 2026, 12:31 AM (UTC+3)</timestamp>`, local wall clock with its UTC
# offset, minute precision (agentsview#1627: in 810/814 parents and 964/967 children of one real machine).
TIMESTAMP = ("<timestamp>", "</timestamp>")
# A user row without <user_query> whose text starts with one of these tags is harness (injected context), never a
# person's turn (pond#207 lists <context>; a peer's .txt reader names <cursor_commands>, the expanded body of a
# command; the others are the tags Cursor's harness family writes).
HARNESS_TAGS = (
    "<context",
    "<cursor_commands",
    "<user_info",
    "<system_reminder",
    "<system-reminder",
    "<attached_files",
    "<additional_data",
    "<rules",
    "<agent_skills",
    "<agent_transcripts",
)

# `[REDACTED]` stands where Cursor elided thinking or intermediate text: never text. Rows empty without it are
# counted as `assistant/redacted` (harness: elided reasoning), never a turn.
REDACTED = "[REDACTED]"
REDACTED_DISPOSITION = Disposition.HARNESS

# Rows Cursor writes byte for byte the same, many times a file: an assistant row of only `[REDACTED]` (a third of a
# real capture's rows, docs/agents/cursor.md "Real captures") and the end of a turn that went well. The reader gets
# each one's record without parsing it again (`iter_jsonl_fields(known=...)`), and tells it by identity.
REDACTED_ROW = b'{"role":"assistant","message":{"content":[{"type":"text","text":"[REDACTED]"}]}}\n'
TURN_ENDED_ROW = b'{"type":"turn_ended","status":"success"}\n'

# Content block `type` -> what it is in an assistant or user row (a block type not listed is ignored inside its row;
# the row is counted once, under the row's kind).
BLOCKS: dict[str, str] = {
    "text": "visible text ([REDACTED] stripped)",
    "tool_use": "a tool call `{name, input}` with NO id: the call id is built from line and block position",
    "tool_result": "a tool result (rare: pond#207 lists it; most files have none), joined to the oldest open call",
    "image": "an attachment, stored as a reference",
    "thinking": "reasoning, if a build writes it: harness (never seen in a real capture)",
    "redacted": "an elided block (pond#207): harness",
}

# --- the legacy plain-text transcript (`<uuid>.txt`) ----------------------------------------------------------------
# Blocks start with a line that is exactly `user:` or `assistant:` (AV cursor.go splitCursorBlocks). Inside an
# assistant block, these markers open an indented body that ends at the next line at the left margin.
TXT_ROLES = {"user:": "user", "assistant:": "assistant"}
TXT_THINKING = "[Thinking]"  # reasoning: harness
TXT_TOOL_CALL = "[Tool call] "  # `[Tool call] Name` + indented `key: value` or JSON arguments
TXT_TOOL_RESULT = "[Tool result] "  # `[Tool result] Name` + indented output, joined to the oldest open call of Name

# --- discovery -------------------------------------------------------------------------------------------------------
TRANSCRIPTS_DIR = "agent-transcripts"
SUBAGENTS_DIR = "subagents"
NESTED_NAME = "transcript.jsonl"  # `<uuid>/transcript.jsonl`, a nested variant (cli-continues PR#62 [peer])
# Project folders that hold no sessions of a workspace (AS CursorSessionParser skips it).
SKIPPED_PROJECTS = frozenset({"empty-window"})
