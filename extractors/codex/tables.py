"""Codex rollout record kinds and their fate, and the rules that tell a person's turn from injected context.

The verified signal for a person's turn (docs/agents/codex.md "A person's turn or injected context", openai/codex
`codex-rs/core/src/context/contextual_user_message.rs`):
- Codex writes each typed prompt twice: `response_item` message role `user` AND `event_msg` `user_message`; the
  harness injects its context (AGENTS.md, environment, skills, shell commands, abort notices, ...) as role `user`
  messages too, but never as an `event_msg` `user_message` of kind `plain`. So human turns come from
  `event_msg/user_message` wherever the rollout has any; the `response_item` user copy is then a duplicate.
- Only for rollouts without any `event_msg/user_message` (pre-envelope files, filtered captures) do turns come from
  `response_item` user messages, and then a message is a person's turn only if at least one of its text parts is
  NOT one of Codex's own contextual fragments (`CONTEXTUAL_FRAGMENTS` below, mirroring `CONTEXTUAL_USER_FRAGMENTS`).
  The same check is applied to `event_msg/user_message` text as a second guard.
- Role `developer` / `system` messages are harness; so is reasoning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from extractors.model import Disposition

# Top-level `type` of an enveloped line (`{"timestamp", "type", "payload"}`), openai/codex `RolloutItem`.
ENVELOPE_KINDS: dict[str, Disposition] = {
    "session_meta": Disposition.METADATA,  # identity, cwd, git, cli version; repeated on resume
    "turn_context": Disposition.METADATA,  # per-turn model, cwd, policies; its turn_id ends a fork replay
    "response_item": Disposition.TURN,  # decided per payload type below
    "event_msg": Disposition.SKIPPED,  # decided per payload type below
    "compacted": Disposition.HARNESS,  # compaction summary + replacement history: a summary, not a turn
    "world_state": Disposition.HARNESS,  # injected model context (AGENTS.md, environments, skills)
    "inter_agent_communication": Disposition.HARNESS,  # messages between agents of a multi-agent run
    "inter_agent_communication_metadata": Disposition.SKIPPED,  # trigger flags for the above
}

# `response_item.payload.type` -> disposition (message is decided by role; tools by `tools.py`).
RESPONSE_ITEM_KINDS: dict[str, Disposition] = {
    "message": Disposition.TURN,
    "reasoning": Disposition.HARNESS,  # private reasoning: summaries / encrypted content
    "function_call": Disposition.TOOL,
    "custom_tool_call": Disposition.TOOL,  # freeform tools such as apply_patch
    "local_shell_call": Disposition.TOOL,
    "web_search_call": Disposition.TOOL,  # server-side search: a call without an output record
    "image_generation_call": Disposition.TOOL,  # its base64 result is stored as a reference only
    "tool_search_call": Disposition.TOOL,
    "function_call_output": Disposition.TOOL,
    "custom_tool_call_output": Disposition.TOOL,
    "tool_search_output": Disposition.TOOL,
    "ghost_snapshot": Disposition.SKIPPED,  # git snapshot kept for /undo
    "agent_message": Disposition.HARNESS,  # a message between agents (author/recipient), not a reply to the user
    "compaction": Disposition.HARNESS,  # encrypted compaction item
    "compaction_summary": Disposition.HARNESS,
    "other": Disposition.SKIPPED,  # the protocol's catch-all variant
}

# `message.role` -> disposition. `user` is a candidate turn, decided by the contextual check.
MESSAGE_ROLES: dict[str, Disposition] = {
    "user": Disposition.TURN,
    "assistant": Disposition.TURN,
    "developer": Disposition.HARNESS,  # permissions, collaboration mode, skills lists, hook context
    "system": Disposition.HARNESS,
}

# `event_msg.payload.type` -> disposition. The UI/telemetry stream: mostly copies of response items.
EVENT_KINDS: dict[str, Disposition] = {
    "user_message": Disposition.TURN,  # THE human-turn source (see the module docstring)
    "agent_message": Disposition.SKIPPED,  # copy of the assistant response_item; used only if none exists
    "agent_reasoning": Disposition.HARNESS,
    "agent_reasoning_raw_content": Disposition.HARNESS,
    "agent_reasoning_section_break": Disposition.HARNESS,
    "token_count": Disposition.METADATA,  # cumulative usage -> Usage rows (identical re-emits: SKIPPED)
    "thread_name_updated": Disposition.METADATA,  # the session title
    "task_started": Disposition.SKIPPED,  # turn lifecycle (its turn_id can end a fork replay)
    "task_complete": Disposition.SKIPPED,
    "turn_aborted": Disposition.SKIPPED,
    "context_compacted": Disposition.SKIPPED,  # marker; the summary is the `compacted` line
    "exec_command_end": Disposition.TOOL,  # copies of tool results; their exit code / success feed is_error
    "patch_apply_end": Disposition.TOOL,
    "mcp_tool_call_end": Disposition.TOOL,
    "dynamic_tool_call_response": Disposition.TOOL,
    "collab_agent_spawn_end": Disposition.TOOL,  # names the spawned subagent thread of a call
    "web_search_end": Disposition.TOOL,
    "image_generation_end": Disposition.TOOL,
    "view_image_tool_call": Disposition.TOOL,
    "collab_waiting_end": Disposition.TOOL,
    "collab_close_end": Disposition.TOOL,
    "collab_agent_interaction_end": Disposition.TOOL,
    "dynamic_tool_call_request": Disposition.TOOL,
    "item_completed": Disposition.SKIPPED,  # newer item stream duplicating response items
    "entered_review_mode": Disposition.SKIPPED,  # review-mode markers
    "exited_review_mode": Disposition.SKIPPED,
    "thread_settings_applied": Disposition.SKIPPED,
    "thread_goal_updated": Disposition.SKIPPED,
    "guardian_assessment": Disposition.SKIPPED,  # auto-review of a command
    "sub_agent_activity": Disposition.SKIPPED,
    "undo_completed": Disposition.SKIPPED,
    # `{"num_turns": N}` (protocol.rs ThreadRolledBackEvent: "Number of user turns that were removed from context"):
    # the person went back (Esc Esc, edit a previous prompt) and Codex dropped the last N user turns and what followed
    # them. Those prompts and answers are left behind, as ChatGPT's abandoned branches are: counted
    # `<kind>/rolled_back`, not turns. Codex's own `user_message_positions_in_rollout` pops N positions the same way.
    "thread_rolled_back": Disposition.METADATA,
    "error": Disposition.SKIPPED,  # an error banner; the transcript continues
}

# Legacy `event_msg/user_message.kind` values (autumn 2025) that mark injected context, not a prompt.
NON_PERSON_USER_MESSAGE_KINDS = frozenset({"user_instructions", "environment_context"})

# Pre-envelope rollouts (<= ~0.3x): line 0 `{"id","timestamp","instructions",...}`, then these markers and bare
# response items without `payload`.
LEGACY_STATE_MARKER = "record_type"

# `codex exec --json` stdout saved as .jsonl: a different streaming format (docs/agents/codex.md "Older formats").
EXEC_JSON_TYPE = re.compile(r"^(thread|turn|item)\.[a-z_]+$")


@dataclass(frozen=True, slots=True)
class Fragment:
    """A contextual fragment: the trimmed text starts with `start` and ends with `end` (ASCII case-insensitive)."""

    name: str
    start: str
    end: str

    def matches(self, trimmed: str) -> bool:
        head = trimmed[: len(self.start)]
        tail = trimmed[len(trimmed) - len(self.end) :] if self.end else ""
        return head.lower() == self.start.lower() and tail.lower() == self.end.lower()


# Codex's own list (CONTEXTUAL_USER_FRAGMENTS and the hook-prompt fragment), across versions; each entry names the
# openai/codex `codex-rs/core/src/context/` file that defines it (checked against contextual_user_message.rs @43da282
# and @109c40d) and what makes Codex write it.
CONTEXTUAL_FRAGMENTS: tuple[Fragment, ...] = (
    # user_instructions.rs: AGENTS.md / project docs, sent at session start (CODEMIE real rollout l.4).
    Fragment("user_instructions", "# AGENTS.md instructions for ", "</INSTRUCTIONS>"),
    # user_instructions.rs, older builds: the same instructions in a tag of their own.
    Fragment("user_instructions_legacy", "<user_instructions>", "</user_instructions>"),
    # environment_context.rs: cwd, shell, date, timezone, sandbox; at start and when they change (CODEMIE real l.4).
    Fragment("environment_context", "<environment_context>", "</environment_context>"),
    # extension_context.rs (@109c40d): context an extension/IDE integration steers in.
    Fragment("extension_context", "<extension_context>", "</extension_context>"),
    # skill_instructions.rs: a skill's SKILL.md body, injected when the skill is used.
    Fragment("skill", "<skill>", "</skill>"),
    # user_shell_command.rs: a `!cmd` the person ran themselves and its output (a command, not words to the model).
    Fragment("user_shell_command", "<user_shell_command>", "</user_shell_command>"),
    # turn_aborted.rs: the notice Codex adds after the person interrupts a turn.
    Fragment("turn_aborted", "<turn_aborted>", "</turn_aborted>"),
    # subagent_notification.rs: a spawned agent reporting back to its parent thread.
    Fragment("subagent_notification", "<subagent_notification>", "</subagent_notification>"),
    # codex_protocol items::parse_hook_prompt_fragment: the prompt a hook feeds back to the model.
    Fragment("hook_prompt", "<hook_prompt", "</hook_prompt>"),
    # internal_model_context.rs (@43da282): context Codex's own features (goals, ...) add for the model.
    Fragment("internal_model_context", "<codex_internal_context", "</codex_internal_context>"),
    # legacy_goal_context.rs (@109c40d): the older form of goal context; kept to read old rollouts.
    Fragment("legacy_goal_context", "<goal_context>", "</goal_context>"),
    # next_prompt_suggestion.rs (@43da282): "[SUGGESTION MODE: Suggest what the user might naturally type next ...]",
    # the request behind the composer's suggested next prompt; the model is asked, no person spoke.
    Fragment("next_prompt_suggestion", "<next_prompt_suggestion>", "</next_prompt_suggestion>"),
    # agent_message_board_notification.rs (newest): "New post <id> in discussion <id>. Use collaboration.read_post
    # ..." written with role user when another agent posts to a shared discussion.
    Fragment(
        "agent_message_board_notification", "<agent_message_board_notification>", "</agent_message_board_notification>"
    ),
)

# Additional (external) context: `<external_<key>>value</external_<key>>`, newer `<external_context ...>` /
# `<application_context ...>` with attributes.
ADDITIONAL_CONTEXT = re.compile(r"^<(external_[A-Za-z0-9_.-]+|application_context)\b[^>]*>.*</\1>$", re.DOTALL)

# Legacy warnings Codex injected as user text (no longer produced; still in old rollouts). context/ files:
# LegacyUnifiedExecProcessLimitWarning, LegacyModelMismatchWarning (the "flagged for ... cyber activity" one), and
# LegacyApplyPatchExecCommandWarning (start + end below).
LEGACY_WARNING_PREFIXES: tuple[str, ...] = (
    "Warning: The maximum number of unified exec processes you can keep open is",
    "Warning: Your account was flagged for potentially high-risk cyber activity",
)
LEGACY_APPLY_PATCH_WARNING = (
    "Warning: apply_patch was requested via ",
    "Use the apply_patch tool instead of exec_command.",
)


def contextual_fragment(text: str) -> str | None:
    """The name of the Codex contextual fragment `text` is, or None for text a person wrote."""
    trimmed = text.strip()
    if not trimmed:
        return None
    for fragment in CONTEXTUAL_FRAGMENTS:
        if fragment.matches(trimmed):
            return fragment.name
    if ADDITIONAL_CONTEXT.match(trimmed):
        return "additional_context"
    if trimmed.startswith(LEGACY_WARNING_PREFIXES):
        return "legacy_warning"
    start, end = LEGACY_APPLY_PATCH_WARNING
    if trimmed.startswith(start) and trimmed.endswith(end):
        return "legacy_warning"
    return None


# IDE clients wrap the prompt: `# Context from my IDE setup:\n\n## Open tabs: ...\n\n## My request for Codex:\n<p>`;
# Codex Desktop: `# Files mentioned by the user:\n\n## a.vtt: /path/a.vtt\n\n## My request for Codex:\n<p>`
# (CODEMIE real rollout line 1). Only a message that OPENS with a wrapper header is unwrapped.
IDE_WRAPPER_OPENERS: tuple[str, ...] = ("# Context from my IDE setup:", "# Files mentioned by the user:")
IDE_REQUEST_HEADER = re.compile(r"^## My request(?: for Codex)?:[ \t]*$", re.MULTILINE)
_FILE_MENTION = re.compile(r"^## (?!My request)([^\n]+?):[ \t]*(\S[^\n]*)?$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Unwrapped:
    text: str
    mentioned_files: tuple[str, ...] = ()


def unwrap_ide_context(text: str) -> Unwrapped:
    """The person's request inside an IDE wrapper (the text after the last request header), else `text`.

    Files listed under `# Files mentioned by the user:` become references (`file <path>`).
    """
    stripped = text.lstrip()
    if not stripped.startswith(IDE_WRAPPER_OPENERS):
        return Unwrapped(text)
    headers = list(IDE_REQUEST_HEADER.finditer(stripped))
    if not headers:
        return Unwrapped(text)
    last = headers[-1]
    request = stripped[last.end() :].lstrip("\n")
    files: list[str] = []
    if stripped.startswith("# Files mentioned by the user:"):
        preamble = stripped[: headers[0].start()]
        lines = preamble.splitlines()
        for i, line in enumerate(lines):
            match = _FILE_MENTION.match(line)
            if not match:
                continue
            target = (match.group(2) or "").strip()
            if not target and i + 1 < len(lines):
                target = lines[i + 1].strip()
            if target:
                files.append(f"file {target}")
    return Unwrapped(request, tuple(files))
