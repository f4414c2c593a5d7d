"""Grok Build's `updates.jsonl`: the append-only stream of a session's updates (docs/agents/grok.md "updates.jsonl").

Each line is an envelope `{timestamp, method, params: {sessionId, update: {sessionUpdate, ...}, _meta}}`: `method`
`session/update` for the ACP updates (the person's prompt chunks, the model's message and thought chunks, tool calls
and their updates), `_x.ai/session/update` for xAI's own (turn_completed with the prompt's usage, rewind_marker,
model_changed, hook_execution, ...). Lines of the oldest builds are the bare `params` (`{sessionId, update}`).
`chat_history.jsonl` beside it is the model's context, which a compaction rewrites; this stream keeps every prompt,
and a rewind appends a marker instead of truncating. The rules below are Grok's own replay rules (its storage code,
`filter_rewind_by` / `collect_prompts_from_events` / `strip_context_wrappers`), cited by name in the docs page.

The reader streams the file and holds only what it keeps: coalesced texts bounded by `max_field_bytes` while they
grow, each tool call's latest result (a terminal update replaces the result, so the repeated tool outputs that make
this file large are never accumulated), one usage row per prompt.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors.bounded import Limits, Line, clip, count_glued_line
from extractors.errors import RejectCode, RejectError
from extractors.grok.acp import (
    content_block,
    meta_of,
    prompt_usage,
    strip_wrapper,
    text_of,
    time_of,
    tool_content,
    tool_input,
    usage_total,
)
from extractors.model import Disposition, Role, ToolCall, Turn, Usage

ACP_METHOD = "session/update"
XAI_METHOD = "_x.ai/session/update"

# ACP `sessionUpdate` kinds (method `session/update`, or a bare legacy line) -> disposition.
ACP_KINDS: dict[str, Disposition] = {
    "user_message_chunk": Disposition.TURN,  # one content block of a prompt; harness when the rules below say so
    "agent_message_chunk": Disposition.TURN,  # streamed visible text, coalesced into one assistant turn
    "agent_thought_chunk": Disposition.HARNESS,  # reasoning, as chat_history's `reasoning` records
    "tool_call": Disposition.TOOL,  # `title` (the function's name when first written), `rawInput`
    "tool_call_update": Disposition.TOOL,  # status and content; the terminal one's content is the result
    "plan": Disposition.SKIPPED,  # the todo list as the plan tool left it; the tool call itself is kept
    "available_commands_update": Disposition.SKIPPED,  # the slash commands on offer: UI state
    "current_mode_update": Disposition.SKIPPED,  # the agent mode switch: UI state
    "config_option_update": Disposition.SKIPPED,  # UI state
    "session_info_update": Disposition.SKIPPED,  # title and similar: summary.json holds the session's metadata
    "usage_update": Disposition.SKIPPED,  # context-window gauge, not billed usage (turn_completed is)
}

# xAI `sessionUpdate` kinds (method `_x.ai/session/update`) -> disposition. Each one not read for turns, tools or
# usage is bookkeeping of Grok's UI and runtime (its `SessionUpdate` enum in extensions/notification.rs).
XAI_KINDS: dict[str, Disposition] = {
    "turn_completed": Disposition.METADATA,  # `usage`: the prompt's ledger, the one source of token counts
    "rewind_marker": Disposition.METADATA,  # `target_prompt_index`: later prompts replace the ones from there on
    "model_changed": Disposition.METADATA,  # `model_id`: the model from here on
    "model_auto_switched": Disposition.METADATA,  # `new_model_id`: the model from here on
    "streaming_attempt_reset": Disposition.SKIPPED,  # drops the assistant text streamed so far in this attempt
    "hook_execution": Disposition.HARNESS,  # a hook the harness ran and its output
    "hook_annotation": Disposition.HARNESS,  # a hook's note shown to the person
    "compaction_checkpoint": Disposition.SKIPPED,  # a compaction happened: chat_history.jsonl was rewritten
    "auto_compact_started": Disposition.SKIPPED,  # compaction progress
    "auto_compact_completed": Disposition.SKIPPED,
    "auto_compact_failed": Disposition.SKIPPED,
    "auto_compact_cancelled": Disposition.SKIPPED,
    "tool_call_delta_chunk": Disposition.SKIPPED,  # streamed arguments; the tool_call carries them whole
    "task_completed": Disposition.SKIPPED,  # a background task finished (its wake-up prompt is a user chunk)
    "task_backgrounded": Disposition.SKIPPED,
    "subagent_spawned": Disposition.SKIPPED,  # the child is a session of its own, linked through meta.json
    "subagent_progress": Disposition.SKIPPED,
    "subagent_finished": Disposition.SKIPPED,
    "diff_review": Disposition.SKIPPED,  # a diff offered for review: the edit's tool call holds it
    "retry_state": Disposition.SKIPPED,  # a transient API error being retried
    "session_summary_generated": Disposition.SKIPPED,  # the title, which summary.json keeps too
    "session_recap": Disposition.SKIPPED,
    "session_recap_unavailable": Disposition.SKIPPED,
    "memory_flush_started": Disposition.SKIPPED,
    "memory_flush_completed": Disposition.SKIPPED,
    "memory_dream_completed": Disposition.SKIPPED,
    "memory_session_saved": Disposition.SKIPPED,
    "memory_files": Disposition.SKIPPED,
    "auto_continue_completed": Disposition.SKIPPED,
    "auto_recovery_started": Disposition.SKIPPED,
    "auto_recovery_exhausted": Disposition.SKIPPED,
    "feedback_request": Disposition.SKIPPED,
    "relay_sync_status": Disposition.SKIPPED,
    "hooks_changed": Disposition.SKIPPED,
    "plugins_changed": Disposition.SKIPPED,
    "plugin_updates_installed": Disposition.SKIPPED,
    "scheduled_task_created": Disposition.SKIPPED,
    "scheduled_task_fired": Disposition.SKIPPED,
    "scheduled_task_deleted": Disposition.SKIPPED,
    "monitor_event": Disposition.SKIPPED,
    "image_compressed": Disposition.SKIPPED,
    "image_dropped": Disposition.SKIPPED,
    "goal_updated": Disposition.SKIPPED,
    "pending_interaction": Disposition.SKIPPED,
    "interaction_resolved": Disposition.SKIPPED,
}

# Wrappers Grok's subagent fork/resume puts around the parent's context in a child's first prompt: harness. Grok's
# replay strips the first span of each (and the whitespace after it), so does the reader.
CONTEXT_WRAPPERS = ("fork-context", "resume-context")
# A mid-turn interjection is persisted without a promptIndex, its words framed as
# `The user sent a message while you were working:\n<user_query>...</user_query>`: the spans are the person's.
USER_QUERY_SPAN = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)
TERMINAL_STATUSES = frozenset({"completed", "failed"})


@dataclass(slots=True)
class _Run:
    """Consecutive chunks of one message being coalesced: bounded by `max_field_bytes` while it grows."""

    role: Role
    index: int
    timestamp: datetime | None
    model: str | None
    kinds: Counter[str] = field(default_factory=Counter)  # census kinds of its chunks
    pieces: list[str] = field(default_factory=list)
    size: int = 0
    attachments: list[str] = field(default_factory=list)

    def add(self, text: str, limit: int) -> None:
        if self.size <= limit:
            self.pieces.append(text)
        self.size += len(text.encode("utf-8", "surrogatepass"))

    def text(self, limit: int) -> str:
        joined = "".join(self.pieces)
        if self.size <= limit:
            return joined
        kept = joined.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")
        return f"{kept}\n[… clipped: {self.size} bytes in the source, {limit} kept]"


@dataclass(slots=True)
class _Call:
    call_id: str
    turn_index: int
    name: str
    input: str | None
    started_at: datetime | None
    output: str | None = None
    is_error: bool | None = None
    ended_at: datetime | None = None


@dataclass(slots=True)
class UpdatesParser:
    """Builds a session's turns, tool calls and usage from updates.jsonl lines, fed in order. Pure."""

    limits: Limits
    version: str
    default_model: str | None
    turns: list[Turn] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    usage: dict[str, Usage] = field(default_factory=dict)  # prompt_id -> its one row
    models: list[str] = field(default_factory=list)
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter)
    last_time: datetime | None = None
    prompts_marked: int = 0  # user chunks carrying a promptIndex: this stream stamps its prompts
    user_chunks: int = 0
    # The rewind state (Grok's `filter_rewind_by`): where each counted prompt began in turns / calls, and the census
    # of the records read since then, so that a rewind can take them back.
    _prompt_starts: list[tuple[int, int]] = field(default_factory=list)
    _segments: list[Counter[tuple[str, str, Disposition]]] = field(default_factory=list)
    # The user-run tracker (Grok's `UserRunTurnTracker`): progressive counting.
    _seen_marker: bool = False
    _in_user: bool = False
    _run_prompt: int | None = None
    _user: _Run | None = None
    _agent: _Run | None = None
    _model: str | None = None
    _response: int | None = None  # index of the assistant text this response's tool calls belong to

    def count(self, kind: str, disposition: Disposition) -> None:
        """Count one record of the current prompt (a rewind that takes the prompt back recounts it as rewound)."""
        self._segment_add(kind, disposition, 1)

    def feed(self, line: Line) -> None:
        count_glued_line(line, self.census)
        record, index = line.record, line.index
        method = record.get("method")
        params = record.get("params") if "method" in record else record
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(kind, str) or (method is not None and not isinstance(method, str)):
            raise RejectError(
                RejectCode.UNSUPPORTED_FORMAT,
                "updates.jsonl holds a line that is not a Grok session update ({method, params: {update: "
                "{sessionUpdate}}})",
                line=index,
            )
        assert isinstance(params, dict) and isinstance(update, dict)
        when = time_of(params, record)
        if when is not None and (self.last_time is None or when > self.last_time):
            self.last_time = when
        if method is None or method == ACP_METHOD:
            self.acp(kind, update, index, when)
        elif method == XAI_METHOD:
            self.xai(kind, update, index, when)
        else:  # a method this reader does not know: counted, never guessed at
            self.end_user_run()
            self.count(f"method/{method}", Disposition.SKIPPED)

    # --- ACP updates ------------------------------------------------------------------------------------------------

    def acp(self, kind: str, update: dict[str, Any], index: int, when: datetime | None) -> None:
        meta = meta_of(update, index)
        model = text_of(meta.get("modelId"))
        if model:
            self._use_model(model)
        if kind == "user_message_chunk":
            self.user_chunk(update, meta, index, when)
            return
        self.end_user_run()
        if kind == "agent_message_chunk" and meta.get("hostTurn") is True:
            # Host feedback (e.g. "Loaded hooks (9)") written as the agent's: Grok's is_host_turn_chunk
            self.count("agent_message_chunk/host_turn", Disposition.HARNESS)
        elif kind == "agent_message_chunk":
            text, attachments = content_block(update.get("content"), index)
            if self._agent is None:
                self._agent = _Run(Role.ASSISTANT, index, when, self._model or self.default_model)
                self._response = index
            self._agent.add(text, self.limits.max_field_bytes)
            self._agent.attachments.extend(attachments)
            self._agent.kinds[kind] += 1
        elif kind == "tool_call":
            self.end_agent_run()
            self.tool_call(update, index, when)
        elif kind == "tool_call_update":
            self.tool_update(update, index, when)
        else:
            self.count(kind, ACP_KINDS.get(kind, Disposition.SKIPPED))

    def user_chunk(self, update: dict[str, Any], meta: dict[str, Any], index: int, when: datetime | None) -> None:
        self.end_agent_run()
        self._response = None
        self.user_chunks += 1
        prompt = meta.get("promptIndex")
        if prompt is not None and (isinstance(prompt, bool) or not isinstance(prompt, int)):
            raise RejectError(
                RejectCode.BAD_SHAPE, "a user_message_chunk whose promptIndex is not an integer", line=index
            )
        if meta.get("hostTurn") is True:  # a turn the host (not the person) started: Grok's is_host_turn_update
            self.end_user_run()
            self.count("user_message_chunk/host_turn", Disposition.HARNESS)
            return
        # Grok's tracker: every run counts as a prompt until the first promptIndex; after that only marked runs do
        # (the unmarked ones are injected mid-turn); a change of promptIndex opens a new run.
        if prompt is not None:
            self._seen_marker = True
            self.prompts_marked += 1
        counts = prompt is not None if self._seen_marker else True
        new_run = not self._in_user or ((self._seen_marker or prompt is not None) and prompt != self._run_prompt)
        if new_run:
            self.end_user_run()
            self._in_user, self._run_prompt = True, prompt
            if counts:
                self._prompt_starts.append((len(self.turns), len(self.calls)))
                self._segments.append(Counter())
        elif self._run_prompt is None and prompt is not None:
            self._run_prompt = prompt
        content = update.get("content")
        block_meta = content.get("_meta") if isinstance(content, dict) else None
        block_meta = block_meta if isinstance(block_meta, dict) else {}
        if block_meta.get("bash_command") is not None:  # a `!command` of bash mode: not a prompt to the model
            self.count("user_message_chunk/bash_command", Disposition.SKIPPED)
            return
        text, attachments = content_block(content, index)
        sub = "user_message_chunk"
        for tag in CONTEXT_WRAPPERS:
            stripped = strip_wrapper(text, tag)
            if stripped is not None:
                text, sub = stripped, "user_message_chunk/context_wrapper"
        if meta.get("hideFromScrollback") is True:
            # A prompt Grok started itself (a finished background task or subagent, a notification drain, a goal
            # nudge: PromptOrigin::hide_user_echo_from_scrollback): it counts as a prompt, but not as the person's.
            self.count("user_message_chunk/auto_prompt", Disposition.HARNESS)
            return
        person = self._run_prompt is not None or not self._seen_marker
        if not person:  # injected mid-turn: harness unless it is the person's interjection
            display = text_of(block_meta.get("displayText"))
            queries = USER_QUERY_SPAN.findall(text)
            if meta.get("interjection") is True or block_meta.get("interjection") is True or queries:
                text = display or ("\n".join(queries) if queries else text)
                sub = "user_message_chunk/interjection"
                person = True
        if not person:
            self.count("user_message_chunk/unmarked", Disposition.HARNESS)
            return
        queries = USER_QUERY_SPAN.findall(text)
        if queries:
            text = "\n".join(queries)
        if not text.strip() and not attachments:
            self.count("user_message_chunk/empty", Disposition.SKIPPED)
            return
        if self._user is None:
            self._user = _Run(Role.USER, index, when, None)
        self._user.add(text, self.limits.max_field_bytes)
        self._user.attachments.extend(attachments)
        self._user.kinds[sub] += 1

    def tool_call(self, update: dict[str, Any], index: int, when: datetime | None) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RejectError(RejectCode.BAD_SHAPE, "a tool_call without a string toolCallId", line=index)
        if call_id in self.calls:  # the same call written again: an update, never a second call
            self.tool_update(update, index, when)
            return
        title = text_of(update.get("title")) or "tool"
        backend = meta_of(update, index).get("backend") is True
        self.calls[call_id] = _Call(
            call_id,
            self._response if self._response is not None else index,
            title,
            tool_input(update.get("rawInput"), self.limits),
            when,
        )
        self.count("tool_call/backend" if backend else "tool_call", Disposition.TOOL)
        self._result(self.calls[call_id], update, index, when)

    def tool_update(self, update: dict[str, Any], index: int, when: datetime | None) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RejectError(RejectCode.BAD_SHAPE, "a tool_call_update without a string toolCallId", line=index)
        pending = self.calls.get(call_id)
        if pending is None:
            self.count("tool_call_update/orphan", Disposition.TOOL)
            return
        if "rawInput" in update and update["rawInput"] is not None:
            pending.input = tool_input(update["rawInput"], self.limits)
        self.count("tool_call_update", Disposition.TOOL)
        self._result(pending, update, index, when)

    def _result(self, pending: _Call, update: dict[str, Any], index: int, when: datetime | None) -> None:
        """A terminal status's content is the call's result: it replaces whatever an earlier update held."""
        status = update.get("status")
        if not isinstance(status, str) or status not in TERMINAL_STATUSES:
            return
        if "content" in update:
            pending.output = clip(tool_content(update["content"], index), self.limits)
        pending.is_error = status == "failed"
        pending.ended_at = when

    # --- xAI updates ------------------------------------------------------------------------------------------------

    def xai(self, kind: str, update: dict[str, Any], index: int, when: datetime | None) -> None:
        self.end_user_run()
        if kind == "rewind_marker":
            self.rewind(update, index)
        elif kind == "turn_completed":
            self.end_agent_run()
            self.turn_completed(update, index, when)
        elif kind in ("model_changed", "model_auto_switched"):
            model = text_of(update.get("model_id" if kind == "model_changed" else "new_model_id"))
            if model:
                self._use_model(model)
            self.count(kind, Disposition.METADATA)
        elif kind == "streaming_attempt_reset":
            dropped = self._agent
            self._agent = None
            for chunk_kind, n in (dropped.kinds if dropped is not None else Counter[str]()).items():
                self._segment_add(f"{chunk_kind}/reset", Disposition.SKIPPED, n)
            self.count(kind, Disposition.SKIPPED)
        else:
            self.count(kind, XAI_KINDS.get(kind, Disposition.SKIPPED))

    def rewind(self, update: dict[str, Any], index: int) -> None:
        """Grok's `filter_rewind_by`: a marker with target N takes back everything from the start of the N-th
        counted prompt on (an out-of-range target keeps all); later markers apply to what is left (the last wins)."""
        target = update.get("target_prompt_index")
        if isinstance(target, bool) or not isinstance(target, int) or target < 0:
            raise RejectError(
                RejectCode.BAD_SHAPE, "a rewind_marker without an integer target_prompt_index", line=index
            )
        self.end_agent_run()
        self.end_user_run()
        self.census[("rewind_marker", self.version, Disposition.METADATA)] += 1
        if target >= len(self._prompt_starts):
            return
        turns, calls = self._prompt_starts[target]
        del self.turns[turns:]
        for call_id in list(self.calls)[calls:]:
            del self.calls[call_id]
        for segment in self._segments[target:]:
            for (kind, version, _), n in segment.items():
                self.census[(f"{kind}/rewound", version, Disposition.SKIPPED)] += n
        del self._prompt_starts[target:]
        del self._segments[target:]
        self._response = None

    def turn_completed(self, update: dict[str, Any], index: int, when: datetime | None) -> None:
        """The prompt's usage ledger, once per `prompt_id` (a repeated prompt_id keeps its largest ledger: the
        ledger only grows while its prompt runs)."""
        self.census[("turn_completed", self.version, Disposition.METADATA)] += 1
        usage = update.get("usage")
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a turn_completed whose usage is not an object", line=index)
        prompt = update.get("prompt_id")
        key = prompt if isinstance(prompt, str) and prompt else f"line-{index}"
        row = prompt_usage(usage, index, when, self._model or self.default_model, key)
        if row is None:
            return
        known = self.usage.get(key)
        if known is None or usage_total(row) > usage_total(known):
            self.usage[key] = row

    # --- runs -------------------------------------------------------------------------------------------------------

    def end_user_run(self) -> None:
        self.flush_user()
        self._in_user, self._run_prompt = False, None

    def flush_user(self) -> None:
        run, self._user = self._user, None
        if run is not None:
            self._emit(run)

    def end_agent_run(self) -> None:
        run, self._agent = self._agent, None
        if run is not None:
            self._emit(run)

    def _emit(self, run: _Run) -> None:
        text = run.text(self.limits.max_field_bytes)
        if not text.strip() and not run.attachments:  # whitespace streamed before a tool call: no turn
            for kind, n in run.kinds.items():
                self._segment_add(f"{kind}/empty", Disposition.SKIPPED, n)
            return
        self.turns.append(Turn(run.index, run.role, text, run.timestamp, run.model, tuple(run.attachments)))
        for kind, n in run.kinds.items():
            self._segment_add(kind, Disposition.TURN, n)

    def _segment_add(self, kind: str, disposition: Disposition, n: int) -> None:
        if n > 0:
            target = self._segments[-1] if self._segments else self.census
            target[(kind, self.version, disposition)] += n

    def _use_model(self, model: str) -> None:
        self._model = model
        if model not in self.models:
            self.models.append(model)

    def finish(self) -> None:
        self.end_agent_run()
        self.end_user_run()
        for segment in self._segments:
            self.census.update(segment)
        self._segments.clear()
        self._prompt_starts.clear()

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(c.call_id, c.turn_index, c.name, c.input, c.output, c.is_error, c.started_at, c.ended_at)
            for c in self.calls.values()
        )


def parse_updates(lines: Iterable[Line], limits: Limits, version: str, default_model: str | None) -> UpdatesParser:
    """Feed every line of one updates.jsonl to a parser and finish it. Pure. Raises RejectError."""
    parser = UpdatesParser(limits, version, default_model)
    for line in lines:
        parser.feed(line)
    parser.finish()
    return parser
