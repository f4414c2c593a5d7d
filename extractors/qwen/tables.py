"""The record tables of Qwen Code chat files: record `type` (and `subtype`) -> disposition, with a why each.

The rules are docs/agents/qwen.md "Records" and "A person's turn"; the parse (`extractors.qwen.parse`) applies them.
"""

from __future__ import annotations

from extractors.model import Disposition

# Record `type` -> (disposition, why). `user` and `system` records are further decided by their `subtype`.
RECORD_TYPES: dict[str, tuple[Disposition, str]] = {
    "user": (Disposition.TURN, "a user message (`message.role` user): the person's words, or a tool response"),
    "assistant": (
        Disposition.TURN,
        "one model response (`message.role` model): text parts, `functionCall` parts, `usageMetadata`",
    ),
    "tool_result": (
        Disposition.TOOL,
        "a tool's response (`functionResponse` parts, `toolCallResult.status`), joined to its call by id",
    ),
    "system": (Disposition.METADATA, "an event record: decided by `subtype` below"),
}

# `subtype` of a `user` record -> (disposition, why). A `user` record without a subtype is the person's message.
USER_SUBTYPES: dict[str, tuple[Disposition, str]] = {
    "notification": (Disposition.HARNESS, "a background task's notice put before the model as user text"),
    "background_task_completed": (Disposition.HARNESS, "a background task's completion notice"),
    "cron": (Disposition.HARNESS, "a scheduled prompt Qwen Code sent by itself"),
    "mid_turn_user_message": (Disposition.TURN, "what the person typed while the model was working"),
}

# `provenance` of a `user` record that is not the person's (upstream `ChatRecordProvenance`).
HARNESS_PROVENANCE = frozenset({"goal_control", "goal_runtime", "system"})

# `subtype` of a `system` record -> (disposition, why). One not listed is counted SKIPPED as `system/<subtype>`.
SYSTEM_SUBTYPES: dict[str, tuple[Disposition, str]] = {
    "slash_command": (Disposition.TURN, "a `/command` the person typed (`phase` invocation): kept as typed"),
    "chat_compression": (Disposition.HARNESS, "the compressed history Qwen Code rebuilds the context from"),
    "ui_telemetry": (Disposition.SKIPPED, "a UI telemetry event (API response times, token counts for the UI)"),
    "at_command": (Disposition.METADATA, "the files an `@path` in the person's prompt read"),
    "attribution_snapshot": (Disposition.SKIPPED, "the state of the AI-contribution tracker"),
    "custom_title": (Disposition.METADATA, "the session's title (`/rename` or generated): the title"),
    "parent_session": (Disposition.METADATA, "the session that spawned this one (`parentSessionId`)"),
    "session_model": (Disposition.METADATA, "the model the session restores (`modelId`)"),
    "session_approval_mode": (Disposition.METADATA, "the approval mode the session restores"),
    "session_source": (Disposition.METADATA, "which integration created the session"),
    "rewind": (Disposition.METADATA, "the person rewound the conversation: the next record starts a branch"),
    "file_history_snapshot": (Disposition.SKIPPED, "file checkpoints for undo"),
    "session_notes": (Disposition.SKIPPED, "the session notes state"),
    "session_artifact_event": (Disposition.SKIPPED, "an artifact's event (never the active leaf)"),
    "session_artifact_snapshot": (Disposition.SKIPPED, "an artifact's snapshot (never the active leaf)"),
}

# System subtypes written beside the conversation: a trailing one is never taken as the active leaf.
ARTIFACT_SUBTYPES = frozenset({"session_artifact_event", "session_artifact_snapshot"})

# A text part holding a UserPromptSubmit hook's context, which Qwen Code adds to the person's message as a part of
# its own (docs/agents/qwen.md "A person's turn").
HOOK_CONTEXT_OPEN = "<qwen:user-prompt-submit-context>"
SESSION_START_OPEN = "<qwen:session-start-context>"
