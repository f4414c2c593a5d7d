"""The documents of one task folder, already read, -> a Session. Pure: no I/O.

docs/agents/cline.md holds the rules; each function below cites its section.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from extractors.blobref import base64_reference
from extractors.bounded import Limits, clip, json_text
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Role,
    Session,
    SessionLink,
    Turn,
    Usage,
    new_tool_call,
    new_turn,
    new_usage,
)
from extractors.timeutil import from_epoch_ms, in_range  # in_range: the usable years, for `_when`'s fast path

from . import tables as t

AGENT = Agent("cline")
# Usage of a request whose reply is not in api_conversation_history.json (cancelled, failed, or a second request for
# one reply) is keyed by its ui_messages.json row, offset so it never names an API message: docs/agents/cline.md
# "Tokens".
UI_ROW_BASE = 10**9
_UNSEEN: Any = object()  # a `ts` not yet in `_Parser.seen_times`
_DETAILS_OPEN, _DETAILS_CLOSE = "<environment_details>", "</environment_details>"
# Enum members as module names: a member looked up on its class costs ~90 ns on Python 3.11, per message here
_TURN, _TOOL, _HARNESS, _SKIPPED = Disposition.TURN, Disposition.TOOL, Disposition.HARNESS, Disposition.SKIPPED
_USER, _ASSISTANT = Role.USER, Role.ASSISTANT


@dataclass(frozen=True, slots=True)
class Task:
    """The documents of one task folder (None: the file is absent) and what its path says."""

    native_id: str
    extension: str | None  # the extension id in the path (`saoudrizwan.claude-dev`), when it is there
    api: list[Any]
    ui: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    history: dict[str, Any] | None = None


@dataclass(slots=True)
class _Call:
    call_id: str
    turn_index: int
    name: str
    input: str | None
    output: str | None = None
    is_error: bool | None = None
    spawned: str | None = None


@dataclass(slots=True)
class _Parser:
    task: Task
    limits: Limits
    version: str
    turns: list[Turn] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    by_id: dict[str, _Call] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter)
    cwd: str | None = None
    assistants: list[tuple[int, datetime | None]] = field(default_factory=list)  # (index, ts) of replies
    stored: dict[int, datetime] | None = None  # message index -> the UI row written after it (`stored_time`)
    open_calls: list[_Call] = field(default_factory=list)  # the calls of the last reply: results join these
    last_text: str = ""  # the last reply's text, where XML calls are written
    reply_models: dict[int, str | None] = field(default_factory=dict)  # reply index -> its model
    seen_times: dict[int, datetime | None] = field(default_factory=dict)  # `ts` -> `when(ts)`

    def when(self, value: Any) -> datetime | None:
        """`from_epoch_ms`, with a fast path for the int milliseconds every row holds (the same datetime: an int too
        big for a float raises OverflowError on the division, and is None either way), remembered: a message's `ts`
        is its UI rows' too."""
        if type(value) is not int:
            return from_epoch_ms(value)
        # not a KeyError caught: most messages' `ts` are new
        when: datetime | None = self.seen_times.get(value, _UNSEEN)
        if when is _UNSEEN:
            try:
                when = in_range(datetime.fromtimestamp(value / 1000.0, UTC))  # tz positional: ~0.2 us less
            except (OverflowError, OSError, ValueError):
                when = None
            self.seen_times[value] = when
        return when

    def stored_time(self, index: int) -> datetime | None:
        """The time of the UI row written once message `index` was stored (`_stored_times`, read the first time a
        message has no `ts` of its own)."""
        if self.stored is None:
            self.stored = _stored_times(self.task.ui or [], self.when)
        return self.stored.get(index)

    def count(self, kind: str, disposition: Disposition) -> None:
        self.census[(kind, self.version, disposition)] += 1

    def model(self, name: Any) -> str | None:
        if name in self.models:  # a name kept already (every reply names its model)
            return name  # type: ignore[no-any-return]
        if isinstance(name, str) and name.strip():
            if name not in self.models:
                self.models.append(name)
            return name
        return None

    # --- api_conversation_history.json ------------------------------------------------------------------------------

    def message(self, index: int, message: Any) -> None:
        if not isinstance(message, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "an API message that is not an object", line=index)
        role = message.get("role")
        when = self.when(message.get("ts"))
        if when is not None:
            self.times.append(when)
        else:
            when = self.stored_time(index)
        if role == "user":
            self.user(index, message, when)
        elif role == "assistant":
            self.assistant(index, message, when)
        else:
            self.count(f"api/{_kind(role)}", _SKIPPED)

    def user(self, index: int, message: dict[str, Any], when: datetime | None) -> None:
        """docs/agents/cline.md "A person's turn": only tag interiors; tool results join the previous calls."""
        if message.get("isTruncationMarker"):
            self.count("api/user/truncation_marker", _HARNESS)
            return
        blocks = _blocks(message.get("content"), index)
        spans: list[str] = []
        attachments: list[str] = []
        results = 0
        # The calls of the last reply still without a result, as the message starts (listed when a result needs
        # them: no block before the first result sets an output)
        pending: list[_Call] | None = None
        waiting_body: _Call | None = None  # Roo's XML era: `[x] Result:` alone, the output in the next block
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    continue
            elif kind == "tool_result":
                if pending is None:
                    pending = _unanswered(self.open_calls)
                results += 1
                output, error = _result_content(block.get("content"), index)
                call = self.by_id.get(str(block.get("tool_use_id")))
                if call is None and pending:
                    call = pending[0]
                if call is not None:
                    if call in pending:
                        pending.remove(call)
                    call.output = clip(output, self.limits)
                    call.is_error = True if block.get("is_error") is True or error else None
                    spans.extend(t.result_person_spans(output))
                continue
            else:
                if kind == "image":
                    attachments.append(_image_reference(block))
                continue
            # `result_head`'s first test here: the environment_details block every message ends with starts with `<`
            head = t.result_head(text) if text and (text[0] == "[" or text[0].isspace()) else None
            if head is not None:
                if pending is None:
                    pending = _unanswered(self.open_calls)
                results += 1
                output = text[head[1] :]
                call = pending.pop(0) if pending else self._xml_call(head[0])
                call.output = clip(output, self.limits)
                call.is_error = True if t.is_error_result(output) else None
                waiting_body = call if not output or output.isspace() else None
                if "<" in text:  # result_person_spans' own first test, without its call for most results
                    spans.extend(t.result_person_spans(text))
                continue
            if self.cwd is None:
                found = t.CWD_LINE.search(text)
                self.cwd = found.group(1) if found else None
            if text.startswith(_DETAILS_OPEN) and text.find(_DETAILS_CLOSE) == len(text) - len(_DETAILS_CLOSE):
                continue  # the environment_details block every message ends with, whole: without_harness leaves ""
            plain = t.without_harness(text)
            if not plain:
                continue
            if waiting_body is not None and not plain.isspace():
                waiting_body.output = clip(text, self.limits)
                waiting_body.is_error = True if t.is_error_result(text) else None
                spans.extend(t.result_person_spans(text))
                waiting_body = None
                continue
            spans.extend(t.person_spans(plain))
        words = [s for s in spans if s.strip()] if spans else spans
        if words or (attachments and not results):
            text = "\n\n".join(words)
            self.turns.append(new_turn(index, _USER, clip(text, self.limits), when, None, tuple(attachments)))
            self.count("api/user", _TURN)
        elif results:
            self.count("api/user/tool_results", _TOOL)
        else:
            self.count("api/user/harness", _HARNESS)

    def _last_reply(self) -> int | None:
        return self.assistants[-1][0] if self.assistants else None

    def _xml_call(self, head: str) -> _Call:
        """A result with no tool_use before it (Cline's and Roo's XML tool protocol): the call, made by the last
        reply, named by the result's head (`read_file for 'x'` -> read_file), its input the reply's `<read_file>...`
        block of that name where there is one. docs/agents/cline.md "Tool calls"."""
        reply = self._last_reply()
        turn = reply if reply is not None else -1
        name = head.split(" ", 1)[0] or "tool"
        made = self.open_calls
        xml = re.findall(rf"<{re.escape(name)}>.*?</{re.escape(name)}>", self.last_text, re.DOTALL)
        same = sum(c.name == name for c in made)
        written = xml[same] if len(xml) > same else None
        call = _Call(f"xml-{turn}-{len(made)}", turn, name, None if written is None else clip(written, self.limits))
        self.open_calls.append(call)
        self.calls.append(call)
        self.by_id[call.call_id] = call
        return call

    def assistant(self, index: int, message: dict[str, Any], when: datetime | None) -> None:
        info = message.get("modelInfo")
        model = self.model(info.get("modelId")) if isinstance(info, dict) else None
        if message.get("type") == "reasoning":  # Roo: a reasoning item stored as its own message
            self.count("api/assistant/reasoning", _HARNESS)
            return
        blocks = _blocks(message.get("content"), index)
        texts: list[str] = []
        made: list[_Call] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use":
                raw_id, name = block.get("id"), block.get("name")
                if not isinstance(raw_id, str) or not raw_id or not isinstance(name, str):
                    raise RejectError(RejectCode.BAD_SHAPE, "a tool_use block without a string id and name", line=index)
                call = _Call(raw_id, index, name, clip(json_text(block.get("input")), self.limits))
                if raw_id in self.by_id:
                    raise RejectError(RejectCode.INCONSISTENT_SOURCE, f"tool_use id {raw_id!r} twice", line=index)
                self.calls.append(call)
                self.by_id[raw_id] = call
                made.append(call)
        if message.get("isSummary"):
            self.count("api/assistant/summary", _HARNESS)
            return
        self.assistants.append((index, when))
        self.reply_models[index] = model
        self.open_calls = made
        text = "\n".join(texts)
        self.last_text = text
        if text.strip():
            self.turns.append(new_turn(index, _ASSISTANT, clip(text, self.limits), when, model, ()))
            self.count("api/assistant", _TURN)
        elif made:
            self.count("api/assistant/tool_calls", _TOOL)
        elif blocks:
            self.count("api/assistant/reasoning", _HARNESS)
        else:
            self.count("api/assistant/empty", _SKIPPED)

    # --- ui_messages.json -------------------------------------------------------------------------------------------

    def ui_rows(self, rows: list[Any]) -> list[Usage]:
        """Census of every row; usage from `api_req_started` (docs/agents/cline.md "Tokens")."""
        requests: list[tuple[int, dict[str, Any], datetime | None, dict[str, Any]]] = []
        # The census of the rows, counted in slots [census key, n] kept in the order of their first count and added
        # to the census after the loop (the same counts, in the same order, without hashing a key per row).
        partial: list[Any] = [(t.UI_PARTIAL_KIND, self.version, Disposition.SKIPPED), 0]
        counted: list[list[Any]] = []
        # (type, say or ask) -> the row kind and its slot: a few kinds make up thousands of rows
        kinds: dict[tuple[Any, Any], tuple[str, list[Any]]] = {}
        when_of, times, seen = self.when, self.times, self.seen_times
        for row_index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise RejectError(RejectCode.BAD_SHAPE, "a ui_messages.json row that is not an object")
            get = row.get
            written = (get("type"), get("say") or get("ask"))
            try:
                kind, slot = kinds[written]
            except (KeyError, TypeError):  # TypeError: an absurd, unhashable kind (a list): not kept
                try:
                    kind, census_kind, disposition = _ui_kind(*written)
                except TypeError:
                    kind, census_kind, disposition = _ui_kind.__wrapped__(*written)
                slot = [(census_kind, self.version, disposition), 0]
                if isinstance(written[0], str | None) and isinstance(written[1], str | None):
                    kinds[written] = (kind, slot)
            ts = get("ts")
            when = seen.get(ts, _UNSEEN) if type(ts) is int else _UNSEEN  # `when`'s memory, without its call
            if when is _UNSEEN:
                when = when_of(ts)
            if when is not None:
                times.append(when)
            if get("partial") is True:
                slot = partial
            if not slot[1]:
                counted.append(slot)
            slot[1] += 1
            if slot is not partial and kind == "say/api_req_started":
                fields = _request_fields(get("text"))
                if fields is not None:
                    requests.append((row_index, row, when, fields))
        for key, n in counted:
            self.census[key] += n
        replies = _Replies(self.assistants)
        of = replies.of
        replies_of = [of(row, when, order) for order, (_, row, when, _) in enumerate(requests)]
        replies_of.append(None)  # after the last request: no next request to compare with
        usage: list[Usage] = []
        taken: set[int] = set()
        models = self.models
        for k, (row_index, row, when, fields) in enumerate(requests):
            reply = replies_of[k]
            if reply is not None and (reply in taken or replies_of[k + 1] == reply):
                reply = None  # a retried request: the last request before a reply is the one that produced it
            info = row.get("modelInfo")
            model = self.model(info.get("modelId")) if isinstance(info, dict) else None
            if reply is not None:
                taken.add(reply)
                model = model or self.reply_models.get(reply)
            count = fields.get
            tokens_in, tokens_out = count("tokensIn"), count("tokensOut")
            reads, writes = count("cacheReads"), count("cacheWrites")
            usage.append(  # `_int`'s answer without its call for the usual int counts
                new_usage(
                    reply if reply is not None else UI_ROW_BASE + row_index,
                    model or (models[-1] if models else None),
                    tokens_in if type(tokens_in) is int else _int(tokens_in),
                    tokens_out if type(tokens_out) is int else _int(tokens_out),
                    reads if type(reads) is int else _int(reads),
                    writes if type(writes) is int else _int(writes),
                    None,
                    _float(count("cost")),
                    when,
                    None,
                )
            )
        return usage


@functools.lru_cache(maxsize=256)
def _ui_kind(written_type: Any, written_kind: Any) -> tuple[str, str, Disposition]:
    """A UI row's kind (`say/text`), its census kind and disposition, from its `type` and its `say` or `ask`."""
    kind = f"{_kind(written_type)}/{_kind(written_kind)}"
    return kind, f"ui/{kind}", t.UI_READ.get(kind, (Disposition.SKIPPED, t.UI_COPY_WHY))[0]


class _Replies:
    """Which API reply a request produced (docs/agents/cline.md "Tokens"), looked up by bisection."""

    def __init__(self, assistants: list[tuple[int, datetime | None]]) -> None:
        self.assistants = assistants
        self.indexes = [i for i, _ in assistants]  # ascending: the messages' order
        self.dated: list[tuple[datetime, int]] | None = None  # (time, index) of the dated replies, by time: `by_time`
        self.times: list[datetime] = []

    def by_time(self) -> list[tuple[datetime, int]]:
        """The dated replies by time, sorted the first time a request has no `conversationHistoryIndex`."""
        if self.dated is None:
            dated = [(ts, i) for i, ts in self.assistants if ts is not None]
            self.dated = dated if all(a[0] <= b[0] for a, b in itertools.pairwise(dated)) else sorted(dated)
            self.times = [ts for ts, _ in self.dated]
        return self.dated

    def of(self, row: dict[str, Any], when: datetime | None, order: int) -> int | None:
        """The first reply after Cline's `conversationHistoryIndex`, else the first reply dated at or after the
        request (Roo dates its messages), else the reply of the same rank."""
        chi = row.get("conversationHistoryIndex")
        if type(chi) is int or (isinstance(chi, int) and not isinstance(chi, bool)):
            at = bisect.bisect_right(self.indexes, chi)
            return self.indexes[at] if at < len(self.indexes) else None
        if when is not None and (dated := self.by_time()):
            at = bisect.bisect_left(self.times, when)
            return dated[at][1] if at < len(dated) else None
        return self.indexes[order] if order < len(self.indexes) else None


def _unanswered(calls: list[_Call]) -> list[_Call]:
    """The calls without an output yet, in order."""
    pending = []
    for call in calls:
        if call.output is None:
            pending.append(call)
    return pending


def _kind(value: Any) -> str:
    """A record kind for the census: the written name, or a placeholder for a missing or absurd one."""
    if not isinstance(value, str) or not value:
        return "(none)"
    return value if len(value) <= 64 else "(long)"


def _blocks(content: Any, index: int) -> list[dict[str, Any]]:
    """A message's content as blocks: a plain string is one text block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                break
        else:
            return content
    raise RejectError(RejectCode.BAD_SHAPE, "message content that is neither text nor a list of blocks", line=index)


def _result_content(content: Any, index: int) -> tuple[str, bool]:
    """A tool_result's text and whether it says the tool failed."""
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in _blocks(content, index):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "image":
                parts.append(f"[{_image_reference(block)}]")
        text = "\n".join(parts)
    return text, t.is_error_result(text)


def _image_reference(block: dict[str, Any]) -> str:
    source = block.get("source")
    if isinstance(source, dict) and isinstance(source.get("data"), str):
        media = source.get("media_type")
        return base64_reference(source["data"], media if isinstance(media, str) else "image/png")
    return "image"


def _request_fields(text: Any) -> dict[str, Any] | None:
    """The counts of an `api_req_started` row's JSON text, or None when it has no count and no cost."""
    if not isinstance(text, str):
        return None
    try:
        fields = orjson.loads(text)
    except orjson.JSONDecodeError:  # what orjson refuses and the stdlib reads (NaN, a lone surrogate, a huge int)
        try:
            fields = json.loads(text)
        except (ValueError, RecursionError):  # a broken row says nothing; the rest of the task still loads
            return None
    if not isinstance(fields, dict):
        return None
    for key in _REQUEST_COUNTS:
        if _float(fields.get(key)) is not None:
            return fields
    return None


_REQUEST_COUNTS = ("tokensIn", "tokensOut", "cacheWrites", "cacheReads", "cost")


def _int(value: Any) -> int | None:
    """A JSON count as an int; None for anything else (a string, NaN, an infinity)."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return int(value) if _float(value) is not None else None


def _float(value: Any) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int:
        try:
            return float(value)  # finite wherever it converts
        except OverflowError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _writer(task: Task) -> tuple[str, tuple[str, ...]]:
    """(the writer's version, the session's cli_versions): `<extension id>@<version>` where both are written
    (docs/agents/cline.md "Which product wrote it")."""
    version = ""
    history = (task.metadata or {}).get("environment_history")
    if isinstance(history, list):
        for entry in history:
            if isinstance(entry, dict) and isinstance(entry.get("cline_version"), str):
                version = entry["cline_version"]
    product = task.extension or ""
    label = f"{product}@{version}" if product and version else product or (f"cline@{version}" if version else "")
    return version, (label,) if label else ()


def parse_task(task: Task, limits: Limits) -> Session:
    """The session of one task folder. Raises RejectError (bad_shape, inconsistent_source, missing_timestamp,
    limit_exceeded, no_conversation)."""
    sid = session_id(AGENT, task.native_id)
    history = task.history or {}
    said = history.get("id")
    if said is not None and said != task.native_id:
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE,
            f"history_item.json says id {said!r} in the folder of task {task.native_id!r}",
            session_hint=sid,
        )
    version, cli_versions = _writer(task)
    parser = _Parser(task, limits, version)
    records = len(task.api) + len(task.ui or ())
    if records > limits.max_records:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} records")
    message = parser.message
    for index, record in enumerate(task.api):
        try:
            message(index, record)
        except RejectError as exc:
            exc.session_hint = sid
            raise
    usage = parser.ui_rows(task.ui) if task.ui is not None else []
    for name, document in ((t.TASK_METADATA, task.metadata), (t.HISTORY_ITEM, task.history)):
        if document is not None:
            parser.count(name, Disposition.METADATA)
    for entry in (task.metadata or {}).get("model_usage") or ():
        if isinstance(entry, dict):
            parser.model(entry.get("model_id"))
    if not parser.turns and not parser.calls:
        raise RejectError(RejectCode.NO_CONVERSATION, "no turn and no tool call in the task", session_hint=sid)
    started, inferred = _start(task, parser.times)
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no `ts` in any message of the task", session_hint=sid)
    # every time written in the messages and rows is at or after `started` (their minimum, or history_item's before it)
    ended = max(parser.times) if parser.times else None
    parent = history.get("parentTaskId")
    parent_sid = session_id(AGENT, parent) if isinstance(parent, str) and parent else None
    _link_children(parser.calls, history.get("childIds"))
    title = history.get("task")
    return Session(
        agent=AGENT,
        session_id=sid,
        native_id=task.native_id,
        started_at=started,
        ended_at=ended,
        parent_session_id=parent_sid,
        cwd=history.get("workspace") if isinstance(history.get("workspace"), str) else parser.cwd,
        title=clip(title, limits) if isinstance(title, str) and title.strip() else None,
        models=tuple(parser.models),
        cli_versions=cli_versions,
        started_at_inferred=inferred,
        turns=tuple(parser.turns),
        tool_calls=tuple(
            new_tool_call(c.call_id, c.turn_index, c.name, c.input, c.output, c.is_error, None, None, c.spawned)
            for c in parser.calls
        ),
        usage=tuple(usage),
        links=(SessionLink(parent_sid, LinkKind.SUBAGENT),) if parent_sid else (),
        census=parser.census,
    )


def _stored_times(rows: list[Any], when_of: Callable[[Any], datetime | None]) -> dict[int, datetime]:
    """Message index -> the `ts` of the first UI row whose `conversationHistoryIndex` reaches it: the row Cline wrote
    once that message was in the API history, which dates messages written without a `ts` of their own
    (docs/agents/cline.md "Times"). `when_of`: a `ts` -> its time (`_Parser.when`)."""
    stored: dict[int, datetime] = {}
    reached = 0
    for row in rows:
        if not isinstance(row, dict):
            continue
        index, when = row.get("conversationHistoryIndex"), when_of(row.get("ts"))
        if not isinstance(index, int) or isinstance(index, bool) or when is None:
            continue
        while reached <= index:
            stored[reached] = when
            reached += 1
    return stored


def _start(task: Task, times: list[datetime]) -> tuple[datetime | None, bool]:
    """The earliest `ts` written in the task (messages, UI rows, history_item), else the Cline task id, which is the
    epoch milliseconds of its creation (inferred). docs/agents/cline.md "Times"."""
    first = min(times) if times else None
    history_ts = from_epoch_ms((task.history or {}).get("ts"))
    if history_ts is not None and (first is None or history_ts < first):
        first = history_ts
    if first is not None:
        return first, False
    if task.native_id.isdigit() and len(task.native_id) == 13:
        return from_epoch_ms(int(task.native_id)), True
    return None, False


def _link_children(calls: list[_Call], children: Any) -> None:
    """Roo appends a child's id to `childIds` as its new_task call starts it: the n-th call spawned the n-th child."""
    if not isinstance(children, list):
        return
    ids = [c for c in children if isinstance(c, str) and c]
    for call, child in zip((c for c in calls if c.name in t.DELEGATION_TOOLS), ids, strict=False):
        call.spawned = session_id(AGENT, child)
