"""Goose `sessions.db`: the declarative tables (docs/agents/goose.md "Schema versions", "Messages and blocks").

Columns drift between Goose versions (migrations add them; tables are never rebuilt), so the reader looks at
`pragma_table_info` first and selects by name: a REQUIRED column missing is a database this version does not
read (one `unsupported_format` rejection naming what is missing, counted by `status`), an OPTIONAL one is NULL.
"""

from __future__ import annotations

from extractors.model import Disposition

# Without these the session cannot be told apart, timed or ordered: present in every schema Goose has written
# (the first `create` of schema_version 5 and every migration after it, docs/agents/goose.md "Schema versions").
REQUIRED: dict[str, tuple[str, ...]] = {
    "sessions": ("id", "working_dir", "created_at"),
    "messages": ("id", "session_id", "role", "content_json", "created_timestamp"),
}

# Read when present, NULL otherwise: each arrived with a later migration (the version it came with, in the page).
OPTIONAL_SESSION: tuple[str, ...] = (
    "name",  # v4; older databases keep the title in `description`
    "description",
    "updated_at",
    "session_type",  # v5: user | scheduled | sub_agent | hidden | acp (v9) | ...
    "provider_name",  # v6
    "model_config_json",  # v6: {"model_name": ...}
    "archived_at",  # v12
    "parent_session_id",  # seen in a v16 schema (1.46.0): a sub-agent's parent
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "accumulated_cache_read_tokens",
    "accumulated_cache_write_tokens",
    "accumulated_cost",  # v13
)
# messages.metadata_json (v3) is read when present, NULL otherwise; messages.message_id (v7) is not read: no field
# of a session comes from it (a legacy file's `id` is kept on its MessageRow all the same).

# usage_ledger: one row per model call (newer Goose). Read only when every one of these columns is there.
LEDGER_COLUMNS: tuple[str, ...] = (
    "id",
    "session_id",
    "created_timestamp",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)

# messages.role -> kept (the Rust reader drops any other role: `_ => continue`); others are SKIPPED, counted.
ROLES = frozenset({"user", "assistant"})

# content_json block `type` -> disposition, with why. An unknown type is SKIPPED and counted (`block/<type>`).
BLOCK_KINDS: dict[str, Disposition] = {
    "text": Disposition.TURN,  # the party's words (unless the message is userVisible: false, then HARNESS)
    "image": Disposition.TURN,  # an attachment reference on the turn (hashed, never stored)
    "toolRequest": Disposition.TOOL,  # a call: id + toolCall {status, value {name, arguments}} or {error}
    "frontendToolRequest": Disposition.TOOL,  # the same, for a tool the desktop UI runs
    "toolResponse": Disposition.TOOL,  # the result on the next user row: toolResult {status, value} or {error}
    "thinking": Disposition.HARNESS,  # the model's private reasoning, not its visible answer
    "redactedThinking": Disposition.HARNESS,  # an encrypted reasoning blob
    "toolConfirmationRequest": Disposition.HARNESS,  # Goose asking the person to approve a call (UI prompt)
    "actionRequired": Disposition.HARNESS,  # the same kind of UI prompt, newer builds
    "systemNotification": Disposition.HARNESS,  # status text Goose shows (compaction notices, ...)
    "contextLengthExceeded": Disposition.HARNESS,  # Goose's notice that the context overflowed
    "summarizationRequested": Disposition.HARNESS,  # Goose's notice that it compacted the conversation
    "conversationCompacted": Disposition.HARNESS,  # the same, newer name
}
