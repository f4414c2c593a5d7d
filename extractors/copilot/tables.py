"""GitHub Copilot CLI's event types and the signals that tell a person's turn from injected text
(docs/agents/copilot.md).

Everything here is data: `extractors.copilot.parse` looks event types up in these tables, so a new type is one line
here. Types not listed are counted under their own name as SKIPPED (`SPEC.unknown_records = "skip"`): the CLI's
schema has over 150 event types and adds more with each release.
"""

from __future__ import annotations

from extractors.model import Disposition

# Event types the parse handles itself (their disposition depends on the payload or the envelope):
# session.start, session.resume, session.shutdown, user.message, assistant.message, assistant.usage,
# tool.execution_start, tool.execution_complete, subagent.started, session.model_change, result.
HANDLED = frozenset(
    {
        "session.start",
        "session.resume",
        "session.shutdown",
        "user.message",
        "assistant.message",
        "assistant.usage",
        "tool.execution_start",
        "tool.execution_complete",
        "subagent.started",
        "session.model_change",
        "result",
    }
)

# Known event types that never carry a turn, with why (docs/agents/copilot.md "Events").
EVENT_TYPES: dict[str, tuple[Disposition, str]] = {
    # Harness text: what the CLI says to the model, never the person's words.
    "system.message": (Disposition.HARNESS, "the system / developer prompt, sent once per interaction"),
    "system.notification": (Disposition.HARNESS, "`<system_notification>` talk-back: agent idle, shell done, ..."),
    "assistant.reasoning": (Disposition.HARNESS, "the model's reasoning text, not its visible answer"),
    "session.compaction_start": (Disposition.HARNESS, "a compaction begins (marker)"),
    "session.compaction_complete": (
        Disposition.HARNESS,
        "a compaction ended: its summaryContent replaces the history sent to the model; the file is not rewritten",
    ),
    "session.truncation": (Disposition.HARNESS, "context dropped to fit the window; the file is not rewritten"),
    "skill.invoked": (Disposition.HARNESS, "a skill's body injected into the context"),
    # Bookkeeping: turn and call boundaries, progress, UI state.
    "assistant.turn_start": (Disposition.SKIPPED, "a model turn begins (its messages are separate events)"),
    "assistant.turn_end": (Disposition.SKIPPED, "a model turn ends"),
    "assistant.intent": (Disposition.SKIPPED, "a one-line status the UI shows"),
    "assistant.idle": (Disposition.SKIPPED, "the agent waits for input (stream only)"),
    "assistant.message_start": (Disposition.SKIPPED, "streaming: a message begins (its whole text follows)"),
    "assistant.message_delta": (Disposition.SKIPPED, "streaming: a piece of a message written whole later"),
    "assistant.reasoning_delta": (Disposition.SKIPPED, "streaming: a piece of reasoning"),
    "assistant.tool_call_delta": (Disposition.SKIPPED, "streaming: a piece of a tool call's arguments"),
    "assistant.streaming_delta": (Disposition.SKIPPED, "streaming: progress bytes"),
    "model.call_start": (Disposition.SKIPPED, "an API call begins (stream only)"),
    "model.call_finished": (Disposition.SKIPPED, "an API call ends (stream only)"),
    "tool.execution_partial_result": (Disposition.SKIPPED, "partial output; the complete result follows"),
    "tool.execution_progress": (Disposition.SKIPPED, "a tool's progress message"),
    "tool.user_requested": (Disposition.SKIPPED, "the person ran a tool by hand (its execution events follow)"),
    "subagent.completed": (Disposition.SKIPPED, "a sub-agent ended (its events carry its agentId)"),
    "subagent.failed": (Disposition.SKIPPED, "a sub-agent failed"),
    "subagent.selected": (Disposition.SKIPPED, "a custom agent was selected"),
    "subagent.deselected": (Disposition.SKIPPED, "a custom agent was deselected"),
    "hook.start": (Disposition.SKIPPED, "a hook runs"),
    "hook.end": (Disposition.SKIPPED, "a hook ended"),
    "abort": (Disposition.SKIPPED, "the person stopped the model turn"),
    "permission.requested": (Disposition.SKIPPED, "a tool asked for permission"),
    "permission.completed": (Disposition.SKIPPED, "the permission answer"),
    "session.info": (Disposition.SKIPPED, "a status line (folder trust, configuration)"),
    "session.warning": (Disposition.SKIPPED, "a warning line"),
    "session.error": (Disposition.SKIPPED, "an API or tool error line"),
    "session.usage_checkpoint": (
        Disposition.SKIPPED,
        "a periodic cumulative AI-unit snapshot (no token split), never summed",
    ),
    "session.context_changed": (Disposition.SKIPPED, "cwd / branch changed"),
    "session.plan_changed": (Disposition.SKIPPED, "the plan file changed"),
    "session.todos_changed": (Disposition.SKIPPED, "the todo list changed"),
    "session.task_complete": (Disposition.SKIPPED, "the agent declared the task done"),
    "session.handoff": (Disposition.SKIPPED, "the session was handed to another host"),
    "session.snapshot_rewind": (Disposition.SKIPPED, "undo to a snapshot (ephemeral)"),
    "session.title_changed": (Disposition.SKIPPED, "a generated title (ephemeral; workspace.yaml keeps it)"),
    "session.auto_mode_resolved": (Disposition.SKIPPED, "the auto model router's choice"),
    "session.mcp_server_status_changed": (Disposition.SKIPPED, "MCP server status (stream only)"),
    "session.mcp_servers_loaded": (Disposition.SKIPPED, "MCP servers listed (stream only)"),
    "session.skills_loaded": (Disposition.SKIPPED, "skills listed (stream only)"),
    "session.tools_updated": (Disposition.SKIPPED, "tool list changed (stream only)"),
    "session.background_tasks_changed": (Disposition.SKIPPED, "background task list changed (stream only)"),
    "command.execute": (Disposition.SKIPPED, "a slash command ran (ephemeral)"),
    "prompt_cache_break": (Disposition.SKIPPED, "prompt-cache diagnostics (stream only; seen in a real stream)"),
}

# `user.message.data.source` prefixes that mark text the CLI sends as the user: a skill's hidden injection
# (`skill-pdf`) or another agent's message (`agent-<id>`) (docs/agents/copilot.md "A person's turn").
HARNESS_SOURCES = ("skill-", "agent-")
# A user.message whose content starts so is a skill injection (a peer reader's isCopilotSyntheticSkillMessage).
SKILL_CONTEXT = "<skill-context"

# `session.start.data` fields that say the log was written by VS Code's Copilot agent, which reuses the CLI's event
# schema (docs/agents/copilot.md "VS Code logs"). Read like the CLI's; the census says which one it was.
VSCODE_FIELD = "vscodeVersion"
