"""OpenCode message-v2 records -> a Session: the declarative tables and the pure parse (no I/O).

Both sources (`opencode.db` rows and the legacy `storage/` JSON files) are first turned into the same rows
(`SessionRow`, `MessageRow`, `PartRow`: the JSON minus the ids, which come from columns or paths), then parsed here.

The verified signal for a person's turn (OC `packages/opencode/src/session/message-v2.ts`, docs/agents/opencode.md
"Messages and parts"): a `user` message's `text` parts whose `synthetic` and `ignored` flags are not true. OpenCode
marks everything it injects into a user message as `synthetic` ("Called the Read tool with the following input: {...}"
for @-mentions, "Attached image(s) from tool result:", skill templates); we filter on the flag, never on text patterns.
The assistant's visible text is its non-synthetic `text` parts (`reasoning` is private, tools go to `tool_calls`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

from extractors import ids
from extractors.bounded import Limits, clip, json_text
from extractors.bounded.numbers import INT64_MAX, INT64_MIN, OUT_OF_RANGE, fit_float, token_count
from extractors.errors import RejectCode, RejectError
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Role,
    Session,
    SessionLink,
    ToolCall,
    Turn,
    Usage,
    new_tool_call,
    new_turn,
    new_usage,
)
from extractors.timeutil import from_epoch_ms

AGENT = Agent("opencode")  # SPEC.name: the package imports this module before it declares SPEC

# message.data.role -> the role of the turn its text parts make. Other roles are unknown: skipped and counted.
MESSAGE_ROLES: dict[str, Role] = {"user": Role.USER, "assistant": Role.ASSISTANT}

# part.data.type -> disposition. `text` is a turn unless flagged (see TEXT_FLAGS).
PART_KINDS: dict[str, Disposition] = {
    "text": Disposition.TURN,
    "file": Disposition.TURN,  # becomes a Turn.attachments reference (a data: URL is hashed, never stored)
    "tool": Disposition.TOOL,  # -> Session.tool_calls
    "step-finish": Disposition.METADATA,  # tokens and cost of one model step -> Session.usage
    "reasoning": Disposition.HARNESS,  # the model's private reasoning, not its visible answer
    "compaction": Disposition.HARNESS,  # marks a compaction; the summary it makes is not a person's turn
    "subtask": Disposition.HARNESS,  # a prompt the harness hands to a subagent (command template)
    "step-start": Disposition.SKIPPED,  # step boundary with a snapshot hash: bookkeeping
    "snapshot": Disposition.SKIPPED,  # git snapshot hash of the worktree
    "patch": Disposition.SKIPPED,  # hash + list of files a step changed
    "agent": Disposition.SKIPPED,  # "@agent" mention marker; the typed text is in the text part
    "retry": Disposition.SKIPPED,  # an API retry record (attempt, error)
}
# A text part with one of these flags set is not the party's own words (message-v2.ts TextPart): `synthetic` is
# text OpenCode wrote into the message, `ignored` text it keeps but does not send to the model.
TEXT_FLAGS = ("synthetic", "ignored")

# The texts OpenCode writes as `synthetic` user parts, by how they start (case-insensitive), with where they are
# written. They only NAME the census kind (`part/text/synthetic/<name>`); the decision is the flag, so a new
# synthetic text is still harness (`part/text/synthetic`), and a person's text that starts like one stays theirs.
SYNTHETIC_TEXTS: tuple[tuple[str, str, str], ...] = (
    # (prefix, name, where it is written and why)
    (
        "Called the Read tool with the following input:",
        "file_mention",
        "session/prompt.ts: an @-mentioned file, followed by the file body as another synthetic part",
    ),
    ("Called the Read tool on ", "file_mention", "session/prompt.ts (older builds): an @-mentioned resource or folder"),
    (
        "Read tool failed to read",
        "file_mention",
        "session/prompt.ts: an @-mentioned file that could not be read (OC prompt tests)",
    ),
    (
        "Attached image(s) from tool result:",
        "tool_attachment",
        "message-v2.ts SYNTHETIC_ATTACHMENT_PROMPT: images a tool returned, re-sent as a user message",
    ),
    (
        "Continue if you have next steps",
        "compaction_continue",
        "session/compaction.ts: the auto-continue message after "
        "an automatic compaction (OC compaction tests; a reader's `Auto-continued after compaction` label)",
    ),
    (
        "Summarize the task tool output above and continue with your task",
        "subtask_summary",
        "session/prompt.ts: after a command ran as a subtask, so the parent agent goes on",
    ),
    (
        "The following tool was executed by the user",
        "shell_command",
        "session/prompt.ts shell(): a `!cmd` the person ran; the command itself is the tool part beside it",
    ),
    ("<system-reminder>", "system_reminder", "session/prompt.ts insertReminders: plan / build mode switch reminders"),
)


def synthetic_kind(text: str) -> str:
    """The census name of a synthetic text part: `synthetic/<name>` for a known text, else `synthetic`."""
    head = text.lstrip().lower()
    for prefix, name, _ in SYNTHETIC_TEXTS:
        if head.startswith(prefix.lower()):
            return f"synthetic/{name}"
    return "synthetic"


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    parent_id: str | None
    title: str | None
    directory: str | None
    version: str | None
    time_created: Any  # epoch ms as written
    time_updated: Any
    time_archived: Any


class MessageRow(NamedTuple):
    """One message (a NamedTuple, not a frozen dataclass: tens of thousands are made per database)."""

    id: str
    time_created: Any  # epoch ms: the `time_created` column, or `time.created` in a JSON file
    data: Any  # the parsed message JSON (should be an object)


class PartRow(NamedTuple):
    id: str
    message_id: str
    data: Any


def session_id_of(native_id: str) -> str:
    return ids.session_id(AGENT, native_id)


def _reject(code: RejectCode, detail: str, native_id: str) -> RejectError:
    return RejectError(code, detail, session_hint=session_id_of(native_id))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text_or_json(value: Any, limits: Limits) -> str | None:
    """Tool input/output as stored text: strings as they are, anything else as JSON."""
    if value is None:
        return None
    return clip(value if isinstance(value, str) else json_text(value), limits)


def _attachment(part: dict[str, Any], native_id: str) -> str:
    """A short reference to a `file` part: a data: URL is hashed, never stored."""
    url = part.get("url")
    if not isinstance(url, str):
        raise _reject(RejectCode.BAD_SHAPE, "a file part without a url", native_id)
    mime = part.get("mime") if isinstance(part.get("mime"), str) else "application/octet-stream"
    name = part.get("filename") if isinstance(part.get("filename"), str) else ""
    if url.startswith("data:"):
        payload = url.partition(",")[2].encode("utf-8", "surrogatepass")
        return f"{mime} sha256:{ids.stable_hash(payload)} {len(payload)} bytes {name}".rstrip()
    return f"{mime} {name} {url[:512]}".replace("  ", " ")


def _model_of(data: dict[str, Any]) -> str | None:
    model = data.get("modelID")
    if isinstance(model, str) and model:
        return model
    nested = _dict(data.get("model")).get("modelID")
    return nested if isinstance(nested, str) and nested else None


def _usage(
    index: int,
    message_id: str,
    data: dict[str, Any],
    model: str | None,
    steps: list[dict[str, Any]],
    when: datetime | None,
    census: Counter[tuple[str, str, Disposition]],
) -> Usage | None:
    """One Usage per assistant message: the sum of its `step-finish` parts, else the message's own totals.

    Never both: the message's `tokens`/`cost` are OpenCode's running total of the same steps. Fields that are not
    numbers (a hand-written fixture writes `cost: {"usd": ...}`) are stored as null. A NaN or infinite count or
    cost (`1e400`), or a count past int64, in any step makes that field's total null, counted in the census as
    `usage/out_of_range` (`extractors.bounded.numbers`); a total of in-range steps too large for its column is
    nulled and counted when rows are built. (`model` is `_model_of(data)`.)
    """
    totals: list[int | None] = [None, None, None, None, None]
    broken: list[bool] | None = None
    cost: float | None = None
    cost_broken = False
    for source in steps or (data,):
        tokens = source.get("tokens")
        if not isinstance(tokens, dict):
            tokens = {}
        cache = tokens.get("cache")
        if not isinstance(cache, dict):
            cache = {}
        fields = (
            tokens.get("input"),
            tokens.get("output"),
            cache.get("read"),
            cache.get("write"),
            tokens.get("reasoning"),
        )
        for i, value in enumerate(fields):
            if value is None:
                continue
            if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:  # else token_count's (value, False)
                value, bad = token_count(value)
                if bad:
                    broken = broken or [False] * 5
                    broken[i] = True
                if value is None:
                    continue
            total = totals[i]
            totals[i] = value if total is None else total + value
        step_cost = source.get("cost")
        if type(step_cost) is float and math.isfinite(step_cost):  # else fit_float decides, as below
            cost = (cost or 0.0) + step_cost
        elif _number(step_cost) is not None:
            step_usd, bad = fit_float(step_cost)
            cost_broken = cost_broken or bad
            if step_usd is not None:
                cost = (cost or 0.0) + step_usd
    if broken or cost_broken:
        census[OUT_OF_RANGE] += sum(broken or ()) + cost_broken
    if broken:
        totals = [None if bad else total for total, bad in zip(totals, broken, strict=True)]
    if cost_broken:
        cost = None
    if cost is None and totals.count(None) == 5:
        return None
    # Usage(turn_index, model, input, output, cache read, cache write, reasoning, cost_usd, timestamp, response_id)
    return new_usage(index, model, totals[0], totals[1], totals[2], totals[3], totals[4], cost, when, message_id)


def _tool_call(part: PartRow, data: dict[str, Any], index: int, limits: Limits, native_id: str) -> ToolCall:
    state = data.get("state")
    name = data.get("tool")
    if not isinstance(state, dict) or not isinstance(name, str):
        raise _reject(RejectCode.BAD_SHAPE, f"tool part {part.id} without a tool name or state object", native_id)
    status = state.get("status")
    output = state.get("error") if status == "error" else state.get("output")
    times = _dict(state.get("time"))
    spawned = _dict(state.get("metadata")).get("sessionId")  # the `task` tool records the child session here
    call_id = data.get("callID")
    # ToolCall(call_id, turn_index, name, input, output, is_error, started_at, ended_at, spawned_session_id); callID
    # is required by message-v2.ts: a file without one (hand-written samples) falls back to the part id.
    return new_tool_call(
        call_id if isinstance(call_id, str) and call_id else part.id,
        index,
        name,
        _text_or_json(state.get("input"), limits),
        _text_or_json(output, limits),
        status == "error",
        from_epoch_ms(times.get("start")),
        from_epoch_ms(times.get("end")),
        session_id_of(spawned) if isinstance(spawned, str) and spawned else None,
    )


_message_order = attrgetter("time_created", "id")  # (time_created, id), as OpenCode's index orders them
_part_order = attrgetter("message_id", "id")


def build_session(row: SessionRow, messages: list[MessageRow], parts: list[PartRow], limits: Limits) -> Session:
    """A complete Session from one session's rows.

    Turn.index = the message's position among the session's messages ordered by (time_created, id), 0-based,
    counted before any filtering (OpenCode's own index `message_session_time_created_id_idx`). Parts are taken
    in (message_id, id) order. Raises RejectError(bad_shape | missing_timestamp | no_conversation).
    """
    native = row.id
    started = from_epoch_ms(row.time_created)
    if started is None:
        raise _reject(RejectCode.MISSING_TIMESTAMP, f"session time_created is {row.time_created!r}", native)
    if not messages:
        raise _reject(RejectCode.NO_CONVERSATION, "session has no messages", native)
    for message in messages:
        if _number(message.time_created) is None:
            raise _reject(RejectCode.BAD_SHAPE, f"message {message.id} has no numeric time_created", native)
    ordered = sorted(messages, key=_message_order)
    by_message: dict[str, list[PartRow]] = {}
    for part in sorted(parts, key=_part_order):
        found = by_message.get(part.message_id)
        if found is None:
            by_message[part.message_id] = [part]
        else:
            found.append(part)

    version = row.version or ""
    census: Counter[tuple[str, str, Disposition]] = Counter()
    # census keys by part kind, made once per session (the census counts in the order kinds are first met)
    part_keys: dict[str, tuple[str, str, Disposition]] = {
        kind: (f"part/{kind}", version, disposition) for kind, disposition in PART_KINDS.items()
    }
    message_keys: dict[str, tuple[str, str, Disposition]] = {}  # by role name, made once per session as part_keys
    turns: list[Turn] = []
    calls: list[ToolCall] = []
    usage: list[Usage] = []
    models: list[str] = []
    seen_calls: set[str] = set()
    for index, message in enumerate(ordered):
        data = message.data
        if not isinstance(data, dict) or not isinstance(role_name := data.get("role"), str):
            raise _reject(RejectCode.BAD_SHAPE, f"message {message.id} is not an object with a role", native)
        role = MESSAGE_ROLES.get(role_name)
        message_key = message_keys.get(role_name)
        if message_key is None:
            disposition = Disposition.METADATA if role else Disposition.SKIPPED
            message_key = message_keys[role_name] = (f"message/{role_name}", version, disposition)
        census[message_key] += 1
        model = _model_of(data)
        if model and model not in models:
            models.append(model)
        texts: list[str] = []
        attachments: list[str] = []
        steps: list[dict[str, Any]] = []
        for part in by_message.pop(message.id, ()):
            pdata = part.data
            if not isinstance(pdata, dict) or not isinstance(kind := pdata.get("type"), str):
                raise _reject(RejectCode.BAD_SHAPE, f"part {part.id} is not an object with a type", native)
            key = part_keys.get(kind) if role is not None else None
            if key is None:
                census[(f"part/{kind}", version, Disposition.SKIPPED)] += 1
                continue
            if kind == "text":
                text = pdata.get("text")
                if not isinstance(text, str):
                    raise _reject(RejectCode.BAD_SHAPE, f"text part {part.id} without text", native)
                flag = None
                for name in TEXT_FLAGS:
                    if pdata.get(name) is True:
                        flag = name
                        break
                if flag:
                    named = synthetic_kind(text) if flag == "synthetic" else flag
                    census[(f"part/text/{named}", version, Disposition.HARNESS)] += 1
                    continue
                texts.append(text)
            elif kind == "file":
                attachments.append(_attachment(pdata, native))
            elif kind == "tool":
                call = _tool_call(part, pdata, index, limits, native)
                if call.call_id in seen_calls:  # ids must stay unique within the session
                    call = replace(call, call_id=f"{call.call_id}#{part.id}")
                seen_calls.add(call.call_id)
                calls.append(call)
            elif kind == "step-finish":
                steps.append(pdata)
            census[key] += 1
        if role is None:
            continue
        when = from_epoch_ms(message.time_created)
        text = "\n\n".join(texts)
        if text.strip():
            turns.append(new_turn(index, role, text, when, model, tuple(attachments)))
        if role is Role.ASSISTANT:
            found_usage = _usage(index, message.id, data, model, steps, when, census)
            if found_usage is not None:
                usage.append(found_usage)
    for orphans in by_message.values():  # parts whose message is not in this session
        census[("part/orphan", version, Disposition.SKIPPED)] += len(orphans)

    parent = row.parent_id or None
    parent_sid = session_id_of(parent) if parent else None
    return Session(
        agent=AGENT,
        session_id=session_id_of(native),
        native_id=native,
        started_at=started,
        ended_at=from_epoch_ms(row.time_updated) or started,
        parent_session_id=parent_sid,
        cwd=row.directory or None,
        title=row.title or None,
        models=tuple(models),
        cli_versions=(version,) if version else (),
        archived=row.time_archived is not None,
        turns=tuple(turns),
        tool_calls=tuple(calls),
        usage=tuple(usage),
        links=(SessionLink(parent_sid, LinkKind.SUBAGENT),) if parent_sid else (),
        census=census,
    )
