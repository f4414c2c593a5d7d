"""Claude Code's record kinds and the signals that tell a person's turn from injected text (docs/agents/claude.md).

Everything here is data: the parse in `extractors.claude.parse` looks kinds up in these tables, so a new record kind
or harness tag is one line here. Quoted sample lines are from the real captures named in
docs/agents/README.md "Where the facts come from".
"""

from __future__ import annotations

import re

from extractors.model import Disposition

# --- Record `type` values ------------------------------------------------------------------------------------------
# Conversation records: a file without any of these holds no session (only `summary` / snapshot / queue lines,
# CP `4762e53b-….jsonl`) -> no_conversation.
CONVERSATION_TYPES = frozenset({"user", "assistant"})

# Known record types that never carry a turn, with why. Anything not listed here and not `user` / `assistant` /
# `system` is an unknown new kind: SKIPPED under its own type name, never a reason to reject.
NON_TURN_TYPES: dict[str, tuple[Disposition, str]] = {
    "progress": (
        Disposition.SKIPPED,
        "hook runs; agent_progress copies of subagent lines (their own file has them)",
    ),
    "file-history-snapshot": (Disposition.SKIPPED, "checkpoint bookkeeping; only its snapshot.timestamp is read"),
    "summary": (Disposition.METADATA, "a title candidate, used only when its leafUuid is a uuid of this file"),
    "custom-title": (Disposition.METADATA, "the title the person gave the session"),
    "ai-title": (Disposition.METADATA, "a generated title"),
    "attachment": (Disposition.SKIPPED, "hook results, reminders, listings the harness attaches (v2.1.80+)"),
    "last-prompt": (Disposition.SKIPPED, "a pointer to the last prompt, which is a user line of its own"),
    "agent-name": (Disposition.SKIPPED, "display name of the agent"),
    "permission-mode": (Disposition.SKIPPED, "UI mode switch"),
    "mode": (Disposition.SKIPPED, "UI mode switch"),
    "pr-link": (Disposition.SKIPPED, "a link to a pull request the session opened"),
    "relocated": (Disposition.SKIPPED, "worktree bookkeeping"),
    "worktree-state": (Disposition.SKIPPED, "worktree bookkeeping"),
}

# `system` records by `subtype`. `local_command` is special: see `COMMAND_NAME` below.
SYSTEM_SUBTYPES: dict[str, tuple[Disposition, str]] = {
    "compact_boundary": (Disposition.HARNESS, '"Conversation compacted" marker; the summary follows as a user line'),
    "turn_duration": (Disposition.SKIPPED, "timing bookkeeping"),
    "stop_hook_summary": (Disposition.SKIPPED, "hook bookkeeping"),
    "local_command": (Disposition.HARNESS, "the output of a built-in command (`<local-command-stdout>`)"),
}
# Any other subtype (api_error, session_start, ... from hand-written fixtures) or a v1.0 hook line without one:
SYSTEM_OTHER = Disposition.SKIPPED

# --- Queued prompts: `queue-operation` records (docs/agents/claude.md "Queued prompts") -------------------------------
# A prompt typed while the model works is queued: `{"type":"queue-operation","operation":"enqueue","content":"/mcp",
# "timestamp":...}` (SPOTTER tool_heavy.jsonl l.9, v2.1.38; CODEMIE session-196820da.jsonl l.133, v2.0.76). The queue is
# FIFO and no record carries an id linking the operations, so every other operation takes the oldest prompt still
# waiting (the one whose `content` it names, when it names one). What each operation means, from real captures
# and from peer parsers that measured real corpora (in each, every enqueue was closed by exactly one of the other
# three, over 116 and over 5 real transcripts; none saw another operation):
QUEUE_TYPE = "queue-operation"
QUEUE_ENQUEUE = "enqueue"  # typed while busy; also how task notifications and teammate messages arrive
QUEUE_OPERATIONS: dict[str, str] = {
    QUEUE_ENQUEUE: "a prompt joins the queue",
    # Taken at the end of the turn; the text is then written as an ordinary user line about 30 ms later
    # (CODEMIE 196820da l.135 -> l.137), or a queued /cmd runs and is recorded as that command.
    "dequeue": "delivered as the next turn",
    # Delivered into the running turn (after a tool result) instead of waiting for its end: v2.1.38 writes no
    # user line for it (SPOTTER tool_heavy l.10), newer CLIs add `"reason":"absorbed_mid_turn"` and an `attachment`
    # of type `queued_command` carrying the prompt. A `remove` can also be the person deleting the queued prompt
    # (the x): which one it is, is decided by the rules below.
    "remove": "delivered into the running turn",
    # The person pressed Up ("Press up to edit queued messages"): the queued prompts go back into the input box,
    # withdrawn. Sent again, they are written as ordinary user lines of their own.
    "popAll": "withdrawn into the input box",
}
# The signal relied on: the operation that takes the prompt out of the queue, and for a `remove` (which can also be
# the person deleting a queued prompt, the x: tugtool's survey of 2.1.133-2.1.177, and a peer's test of a `remove`
# after the turn ended with no reply) what the CLI says beside it, in this order:
# 1. its `reason`: delivered into THIS session when it is one of QUEUE_DELIVERED_REASONS; any other reason seen
#    (`delivered_to_agent`, `agent_stopped`: a subagent's queue, delivered into the subagent's own file) is not
#    this session's turn;
# 2. no reason, in a file whose CLI writes QUEUED_COMMAND_ATTACHMENT records (2.1.1xx+, one per delivered prompt,
#    measured 1:1 with `remove` by a peer over 470 deliveries): delivered only when such an attachment carries
#    the same prompt text (each attachment vouches for one prompt); a `remove` without one is the x;
# 3. no reason, no such attachments anywhere in the file (2.1.38 and older: SPOTTER tool_heavy, and a real
#    early-2026 session in a peer's bug report whose 5 removed prompts were answered by the model and never written
#    as user lines): delivered.
QUEUE_DELIVERED = frozenset({"dequeue", "remove"})
QUEUE_WITHDRAWN = frozenset({"popAll"})
# After these the CLI writes the prompt again itself, as the next user line (peers measured it ~30 ms later, every
# time): that line is the turn even when its text is not the queued text (a paste placeholder expanded, an image
# added), so the queued copy is never a turn of its own; it is QUEUE_MATCHED or, when no text matches,
# QUEUE_WRITTEN_AGAIN. Only a `remove`d prompt can be a turn at its enqueue.
QUEUE_REWRITTEN = frozenset({"dequeue"})
QUEUE_DELIVERED_REASONS = frozenset({"absorbed_mid_turn"})
# `{"type":"attachment","attachment":{"type":"queued_command","prompt":"...","commandMode":"prompt"}}`
QUEUED_COMMAND_ATTACHMENT = "queued_command"
# The matching rule. A delivered prompt (its text read by the user-line rules below, so a queued
# `<task-notification>` is harness) is the SAME turn as a later person's turn of this file (a user line or a
# recorded command) when (order) that record comes after the enqueue line and is not already another queued
# prompt's, (text) its text equals the prompt's (whitespace at the ends aside; a queued `/mcp` equals the command
# `/mcp`), and (time) it is written at most QUEUE_MATCH_WINDOW_SECONDS after the prompt left the queue (a dequeued
# prompt is written ~30 ms later; SPOTTER tool_heavy's removed `/mcp` ran 9 s later, after an interrupt); either
# order of that record and the `remove` line. Then the record's turn is the one turn, and the enqueue is counted as
# QUEUE_MATCHED. A `remove`d prompt that matches nothing is a user turn at the enqueue line's index with the
# enqueue's timestamp (QUEUE_DELIVERED_AS_TURN): the queue is the only record of those words. A prompt still
# waiting when the file ends (QUEUE_PENDING) or withdrawn (QUEUE_NOT_DELIVERED) is not a turn. A delivery that
# names its prompt (`remove` with `content`) while nothing is waiting stands for its own enqueue (written before a
# resume into another file; claude-code-log's test data has such a `remove` as a mid-turn steering message): the
# same rules, at the remove's index and time.
QUEUE_MATCH_WINDOW_SECONDS = 60.0
QUEUE_DELIVERED_AS_TURN = "queue-operation/delivered_as_turn"
QUEUE_MATCHED = "queue-operation/matched_user_record"
QUEUE_NOT_DELIVERED = "queue-operation/not_delivered"
QUEUE_PENDING = "queue-operation/pending"
QUEUE_WRITTEN_AGAIN = "queue-operation/dequeued_unmatched"

# --- A slash command recorded twice --------------------------------------------------------------------------------
# v2.1.38 may write a built-in command as a `user` line with the `<command-name>/mcp</command-name>` wrapper and,
# after its `<local-command-stdout>`, again as a `system` `local_command` line with the same wrapper (SPOTTER
# tool_heavy.jsonl l.21 user at 22:58:08.126, l.23 system at 22:58:11.673). One command, one turn: a system
# command line whose command equals the latest person's turn, a `user` command line with no assistant record
# between them, is that command's second record. The turn keeps the user line's index and time (it is written when
# the command runs; the system copy after its output); the system line is counted as DOUBLED_COMMAND_KIND.
DOUBLED_COMMAND_KIND = "system/local_command/recorded_twice"

# A JSONL line holding several records glued together (`extractors.bounded.glued_index`) is counted once per line
# as `extractors.bounded.GLUED_LINE_KIND`, on top of the records it holds, which are read and counted as usual.

# --- User records: the rules of docs/agents/claude.md "A person's turn or injected text", in order ------------------
# 1. `isMeta: true`: caveats, expanded slash-command/skill bodies, hook `<system-reminder>` context -> HARNESS.
# 2. `isCompactSummary: true`, or content starting with this text -> HARNESS (the compaction summary).
COMPACT_SUMMARY_PREFIX = "This session is being continued from a previous conversation"
# 3. Content only `tool_result` blocks, or a top-level `toolUseResult` -> TOOL.
# 4. Text starting with a harness tag -> HARNESS, census kind `user/<tag>`.
HARNESS_TAGS = (
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "system-reminder",
    "task-notification",  # a background task / subagent talking back
    "user-prompt-submit-hook",  # hook output the model is told to treat as user feedback
)
# `<bash-input>ls</bash-input>` is the person's `!cmd` shell input and `<bash-stdout>` / `<bash-stderr>` its output.
# Person-originated, but a shell command, not something said to the model: TOOL (a command run), not a turn.
SHELL_TAGS = ("bash-input", "bash-stdout", "bash-stderr")
# 5. Whole-text harness messages (string or text-block form; SPOTTER subagent.jsonl l.68
#    `[{"type":"text","text":"[Request interrupted by user]"}]`) -> HARNESS.
INTERRUPTED_TEXTS = frozenset({"[Request interrupted by user]", "[Request interrupted by user for tool use]"})
# 6. Prefixes of injected text -> HARNESS: the v2.0.76 bare caveat, and @-file injections.
HARNESS_PREFIXES: dict[str, str] = {
    "Caveat: The messages below were generated by the user while running local commands": "user/caveat",
    "Called the Read tool with the following input:": "user/file_injection",
}
# 7. A slash command is a person's action: `<command-name>/review</command-name><command-message>review
#    </command-message><command-args>PR 12</command-args>` (either tag order) becomes ONE user turn "/review PR 12".
#    v2.1 writes built-ins as `system` `subtype:"local_command"` with the same wrapper (SPOTTER short.jsonl l.13,
#    `"content": "<command-name>/model</command-name>\n <command-message>model</command-message>..."`): the same
#    rule makes that a user turn too. The expanded prompt that follows is an `isMeta` user line (rule 1).
COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
COMMAND_OPENERS = ("<command-name>", "<command-message>", "<command-args>")
# Everything else with text is the person's prompt. `<system-reminder>` spans appended inside it are stripped.
SYSTEM_REMINDER_SPAN = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# In a subagent file no user line is a person's: the first is the prompt the parent model wrote (SPOTTER
# `agent-a881341.jsonl` l.0, `isSidechain: true, parentUuid: null`), or the v2.0 "Warmup" probe.
SUBAGENT_PROMPT_KIND = "user/subagent_prompt"

# --- Assistant records ---------------------------------------------------------------------------------------------
# Block types whose text is the model's visible answer; reasoning blocks are never turns.
VISIBLE_BLOCKS = frozenset({"text"})
REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
TOOL_USE_BLOCKS = frozenset({"tool_use", "server_tool_use"})
SERVER_TOOL_RESULT_SUFFIX = "_tool_result"  # web_search_tool_result, web_fetch_tool_result, ... (in assistant content)
# `message.model == "<synthetic>"`: a message the CLI wrote itself (API error text, "No response requested."),
# not a model response (AS small.jsonl l.46, usage all zeros). HARNESS, not in `models`, no usage row.
SYNTHETIC_MODEL = "<synthetic>"

# A tool result whose `toolUseResult` is a string starting like this failed (CP v1.0.89:
# `"toolUseResult": "Error: Path … does not exist"`), even without `is_error` on the block.
TOOL_ERROR_PREFIX = "Error"

# --- Discovery -----------------------------------------------------------------------------------------------------
SUBAGENT_DIR = "subagents"
AGENT_FILE_PREFIX = "agent-"
COMPACTION_AGENT_PREFIX = "acompact-"  # `subagents/agent-acompact-fffbd0.jsonl`: a compaction helper run
NOT_SESSIONS = frozenset({"history.jsonl"})  # ~/.claude/history.jsonl: typed-prompt history, not a transcript
