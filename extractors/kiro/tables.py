"""Kiro CLI's ConversationState: the declarative tables (what each part becomes, with a why each).

A conversation is one JSON document, the serde form of the Rust `ConversationState` (docs/agents/kiro.md
"The conversation state"). Its `history` holds entries of one user message and one assistant message; each is an
externally tagged enum (`{"Prompt": {...}}`), so the variant name is the record kind. A variant not listed here is a
shape this version does not know: the conversation is rejected (`unsupported_format`, SPEC.unknown_records =
"reject"), never guessed at, so that a new Kiro version shows up as a counted rejection.
"""

from __future__ import annotations

from extractors.model import Agent, Disposition

AGENT = Agent("kiro")  # SPEC.name: the package imports this module before it declares SPEC

# user.content variant -> disposition (Q CLI `UserMessageContent`, docs/agents/kiro.md "History entries").
USER_CONTENT: dict[str, Disposition] = {
    "Prompt": Disposition.TURN,  # {prompt}: what the person typed, exactly (context goes to `additional_context`)
    "ToolUseResults": Disposition.TOOL,  # {tool_use_results}: the CLI sends tool results back as a user message
    # {prompt?, tool_use_results}: the person typed instead of approving the tools; the results say "cancelled".
    # Counted as TURN when it carries a prompt, else TOOL.
    "CancelledToolUses": Disposition.TOOL,
}

# assistant variant -> disposition (Q CLI `AssistantMessage`). Both carry `content`, the visible answer (a turn when
# not empty); `ToolUse` adds `tool_uses`, which go to Session.tool_calls. An empty ToolUse answer counts as TOOL.
ASSISTANT_CONTENT: dict[str, Disposition] = {
    "Response": Disposition.TURN,
    "ToolUse": Disposition.TURN,
}

# A tool result block (Q CLI `ToolUseResultBlock`): `Text` is stored as written, `Json` as compact JSON text.
RESULT_BLOCKS = ("Text", "Json")
# `ToolResultStatus` (Q CLI api_client/model.rs): anything else is a shape we do not know.
RESULT_STATUS: dict[str, bool] = {"Success": False, "Error": True}  # -> ToolCall.is_error

# Top-level fields of the state that are not history, counted in the census when present (non-null, non-empty),
# each with what it is and why it is not a turn.
STATE_FIELDS: dict[str, tuple[Disposition, str]] = {
    "transcript": (
        Disposition.SKIPPED,
        "the human-readable rendering of the same exchanges ('> prompt', replies with '[Tool uses: …]'); counted "
        "per line, never read as turns: it has no times, no tool ids, and holds the tool approvals ('> t')",
    ),
    "latest_summary": (
        Disposition.HARNESS,
        "the summary `/compact` wrote in place of the history it dropped: the model's words about the conversation",
    ),
    "next_message": (
        Disposition.SKIPPED,
        "a user message staged but not yet sent (normally null when the state is saved); not a finished exchange",
    ),
    "tangent_state": (
        Disposition.SKIPPED,
        'the main conversation stashed while a /tangent runs; not read (docs/agents/kiro.md "Not read")',
    ),
    "user_turn_metadata": (
        Disposition.SKIPPED,
        "Kiro-era request/usage bookkeeping whose token fields are not confirmed; not read as usage",
    ),
}

# The SQLite tables read (docs/agents/kiro.md "Where the files are"). Kiro CLI keeps `conversations_v2`; the Amazon Q
# Developer CLI (and Kiro databases migrated from it) `conversations`. The same conversation may be in both: the
# `conversations_v2` row is the newer copy.
V2_TABLE = "conversations_v2"
V2_COLUMNS = ("key", "conversation_id", "value", "created_at", "updated_at")
LEGACY_TABLE = "conversations"
LEGACY_COLUMNS = ("key", "value")
