"""Goose rows already read -> a Session (pure: no I/O). Rules: docs/agents/goose.md.

A person's turn is a `user` message's `text` blocks, unless the message's `metadata_json.userVisible` is false
(text Goose adds for the model only: turn context, hidden summaries): that message is HARNESS whatever it holds.
A `user` message holding only `toolResponse` blocks is tool results, never a turn. The assistant's visible answer
is its `text` blocks; `thinking` is private. Tool calls are `toolRequest` blocks, matched to the `toolResponse`
with the same id.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, NamedTuple

from extractors import ids
from extractors.bounded import Limits, clip, json_text
from extractors.bounded.numbers import INT64_MAX, INT64_MIN, OUT_OF_RANGE, fit_float, token_count
from extractors.errors import RejectCode, RejectError
from extractors.goose.tables import BLOCK_KINDS, ROLES
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
)
from extractors.timeutil import parse_any, parse_iso

AGENT = Agent("goose")  # SPEC.name: the package imports this module before it declares SPEC
# The keys of the untyped blocks Goose's first session files wrote (`{"text": ...}`, `{"tool_name": ...,
# "arguments": ...}`, `{"id": ..., "tool_result": "..."}`: a real file quoted in block/goose#283, November 2024).
FIRST_DIALECT_KEYS = frozenset({"text", "tool_name", "tool_result"})


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    columns: dict[str, Any]  # every selected column by name (NULL where the schema has none)


class MessageRow(NamedTuple):  # a tuple: made ~60k times in 50 MB, 3x faster than a frozen dataclass
    id: int
    role: Any
    content: Any  # parsed content_json
    created: Any  # created_timestamp (epoch seconds as Goose writes them)
    metadata: Any  # parsed metadata_json, or None
    message_id: str | None
    position: int | None = None  # Turn.index: the line for a legacy file; None = the place among the rows


# MessageRow's fields in a plain tuple: what the database reader makes (a NamedTuple costs ~0.25 us more a row).
MessageTuple = tuple[int, Any, Any, Any, Any, str | None, int | None]


# A usage_ledger row as the reader selects it: (the session id it was matched with, id, created_timestamp, model,
# input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost), a plain tuple (~27k in 50 MB).
LedgerRow = tuple[Any, int, Any, Any, Any, Any, Any, Any, Any]


# Whole epoch seconds a second or more inside timeutil's usable years (1990-2200): Goose's created_timestamp, read
# as parse_any reads them (from_epoch_seconds, whose checks they pass) without its calls: ~90k times in 50 MB.
_SECONDS_INSIDE = (
    int(datetime(1990, 1, 1, tzinfo=UTC).timestamp()) + 1,
    int(datetime(2200, 1, 1, tzinfo=UTC).timestamp()) - 1,
)


# Enum members as module names: a member looked up on its class costs ~90 ns (Python 3.11), several times a message.
_USER, _ASSISTANT = Role.USER, Role.ASSISTANT
_TURN, _SKIPPED, _METADATA, _HARNESS = Disposition.TURN, Disposition.SKIPPED, Disposition.METADATA, Disposition.HARNESS


# The turns, calls, usage and sessions made as `model.new_turn` / `new_tool_call` / `new_usage` make them (a plain
# class of the same slots, each set, made the model's class by `__class__`), in line: a call of the maker costs as
# much as the rest (tests/test_goose.py checks each object so made is what its class's __init__ makes).
class _Turn:
    __slots__ = Turn.__slots__


class _Call:
    __slots__ = ToolCall.__slots__


class _Usage:
    __slots__ = Usage.__slots__


class _Session:
    __slots__ = Session.__slots__


def session_id_of(native_id: str) -> str:
    return ids.session_id(AGENT, native_id)


def _reject(code: RejectCode, detail: str, native_id: str) -> RejectError:
    return RejectError(code, detail, session_hint=session_id_of(native_id))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_text(value: Any, limits: Limits) -> str | None:
    if value is None:
        return None
    return clip(value if isinstance(value, str) else json_text(value), limits)


def _result_text(result: dict[str, Any], limits: Limits) -> tuple[str | None, bool]:
    """(output, is_error) of a toolResponse's `toolResult`: `{status: success, value}` or `{status: error, error}`.

    `value` is `{content: [...]}` (1.x, seen in a real capture) or the content list itself (older builds): the
    text blocks' text joined, else the value as JSON. (`clip` is called only for a text it may cut: ~16k a 50 MB.)"""
    if result.get("status") == "error":
        return _as_text(result.get("error"), limits), True
    value = result.get("value")
    content = value.get("content") if isinstance(value, dict) else value
    if isinstance(content, list):
        if len(content) == 1:  # the usual result: one text block, whose text is the output
            first = content[0]
            text = first.get("text") if isinstance(first, dict) else None
            if isinstance(text, str):
                return (text if len(text) * 4 <= limits.max_field_bytes else clip(text, limits)), False
        else:
            texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
            if len(texts) == len(content):
                return clip("\n".join(texts), limits), False
    return _as_text(value, limits), False


def _attachment(block: dict[str, Any]) -> str:
    data = block.get("data")
    mime = block.get("mimeType") if isinstance(block.get("mimeType"), str) else "application/octet-stream"
    payload = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else b""
    return f"{mime} sha256:{ids.stable_hash(payload)} {len(payload)} bytes"


def _model_of(config: Any) -> str | None:
    """`model_config_json.model_name` (v6+), parsed by the reader; None before."""
    return _text(_dict(config).get("model_name"))


def _count(value: Any, census: Counter[tuple[str, str, Disposition]]) -> int | None:
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # token_count's answer, without its calls
        return value
    count, bad = token_count(value)
    if bad:
        census[OUT_OF_RANGE] += 1
    return count


def _fresh_input(total: int | None, read: int | None, write: int | None) -> int | None:
    """Goose's `input_tokens` include the cached prompt (docs/agents/goose.md "Tokens"): the uncached part is what
    is left after the cache reads and writes, when they fit inside it."""
    if total is None:
        return None
    cached = (read or 0) + (write or 0)
    return total - cached if cached <= total else total


def _ledger_usage(
    ledger: Sequence[LedgerRow],
    assistant_at: list[tuple[datetime | None, int]],
    last_index: int,
    census: Counter[tuple[str, str, Disposition]],
    version: str,
    seconds: dict[int, datetime],
    at_second: dict[int, int] | None,
) -> list[Usage]:
    """One Usage per usage_ledger row (one model call each), on the last assistant message written at or before
    it (the ledger names no message). `seconds`: the times of the whole epoch seconds the messages were read with
    (parse_any's answers, reused); `at_second`: the last assistant message of each whole second, when every timed
    assistant message is in whole seconds (else None)."""
    found: list[Usage] = []
    timed = [(at, i) for at, i in assistant_at if at is not None]
    times = [at for at, _ in timed]
    # The last timed assistant message at or before `when`, in message order: when the times never go back (as
    # Goose writes them), those are a prefix of `timed`, found by bisection instead of a pass over every message;
    # and when they are whole seconds, a row written in the second of a message (every row Goose writes) is on the
    # last message of that second, the one the bisection finds.
    ordered = all(a <= b for a, b in pairwise(times))
    if not ordered:
        at_second = None
    ledger_key = ("usage_ledger", version, _METADATA)
    seconds_low, seconds_high = _SECONDS_INSIDE
    rows = 0
    for _, row_id, created, model, total_in, out, cache_read, cache_write, cost in ledger:
        when: datetime | None
        index = last_index
        if type(created) is int and seconds_low <= created <= seconds_high:  # parse_any's answer, without its calls
            when = seconds.get(created)
            if when is None:
                when = datetime.fromtimestamp(created, UTC)
            found_at = at_second.get(created) if at_second is not None else None
            if found_at is not None:
                index = found_at
            elif ordered:
                found_at = bisect_right(times, when)
                if found_at:
                    index = timed[found_at - 1][1]
            else:
                for at, i in timed:
                    if at <= when:
                        index = i
        else:
            when = parse_any(created)
            if when is None:
                pass
            elif ordered:
                found_at = bisect_right(times, when)
                if found_at:
                    index = timed[found_at - 1][1]
            else:
                for at, i in timed:
                    if at <= when:
                        index = i
        # _count's answers, its calls only for what is not a plain int64 (in its order: the census counts them)
        read = (
            cache_read
            if type(cache_read) is int and INT64_MIN <= cache_read <= INT64_MAX
            else _count(cache_read, census)
        )
        write = (
            cache_write
            if type(cache_write) is int and INT64_MIN <= cache_write <= INT64_MAX
            else _count(cache_write, census)
        )
        cost_usd = None
        if cost is not None:
            cost_usd, bad = fit_float(cost) if isinstance(cost, int | float) else (None, False)
            if bad:
                census[OUT_OF_RANGE] += 1
        total = total_in if type(total_in) is int and INT64_MIN <= total_in <= INT64_MAX else _count(total_in, census)
        output = out if type(out) is int and INT64_MIN <= out <= INT64_MAX else _count(out, census)
        fresh = None  # _fresh_input's answer
        if total is not None:
            cached = (read or 0) + (write or 0)
            fresh = total - cached if cached <= total else total
        rows += 1
        if rows == 1:  # the key counted where it was first counted (after the first row's other counts)
            census[ledger_key] += 1
        if fresh or output or read or write or cost_usd:
            used: Any = _Usage()  # new_usage(…) without its call
            used.turn_index, used.model = index, model if isinstance(model, str) and model else None
            used.input_tokens, used.output_tokens = fresh, output
            used.cache_read_tokens, used.cache_write_tokens, used.reasoning_tokens = read, write, None
            used.cost_usd, used.timestamp, used.response_id = cost_usd, when, f"ledger:{row_id}"
            used.__class__ = Usage
            found.append(used)
    if rows > 1:
        census[ledger_key] += rows - 1
    return found


def _accumulated_usage(
    columns: dict[str, Any], model: str | None, index: int, census: Counter[tuple[str, str, Disposition]]
) -> list[Usage]:
    """The session's running totals (`accumulated_*`) as ONE Usage, for a session the ledger has no row for."""
    read = _count(columns.get("accumulated_cache_read_tokens"), census)
    write = _count(columns.get("accumulated_cache_write_tokens"), census)
    total_in = _count(columns.get("accumulated_input_tokens"), census)
    out = _count(columns.get("accumulated_output_tokens"), census)
    raw_cost = columns.get("accumulated_cost")
    cost, bad = fit_float(raw_cost) if isinstance(raw_cost, int | float) else (None, False)
    if bad:
        census[OUT_OF_RANGE] += 1
    if not any((total_in, out, read, write, cost)):
        return []
    return [
        Usage(
            turn_index=index,
            model=model,
            input_tokens=_fresh_input(total_in, read, write),
            output_tokens=out,
            cache_read_tokens=read,
            cache_write_tokens=write,
            cost_usd=cost,
            response_id="accumulated",
        )
    ]


def build_session(
    row: SessionRow,
    messages: Iterable[MessageTuple],
    ledger: Sequence[LedgerRow] | None,
    version: str,
    limits: Limits,
) -> Session:
    """A complete Session from one session's rows (messages in `id` order: Goose inserts them in conversation order).

    Turn.index = the message's position in that order, 0-based, counted before filtering (a legacy file's line).
    `messages`: a list, or an iterator that is not empty (the reader's, parsing each row as it comes).
    `ledger` is None when the database has no usage_ledger table.
    Raises RejectError(bad_shape | missing_timestamp | no_conversation).
    """
    native = row.id
    columns = row.columns
    started = parse_any(columns.get("created_at"))
    if started is None:
        raise _reject(RejectCode.MISSING_TIMESTAMP, f"sessions.created_at is {columns.get('created_at')!r}", native)
    if not messages:
        raise _reject(RejectCode.NO_CONVERSATION, "session has no messages", native)
    census: Counter[tuple[str, str, Disposition]] = Counter()
    census[("session", version, Disposition.METADATA)] += 1
    turns: list[Turn] = []
    # A call's fields until its result comes (each call made once, at the end, with its result if any).
    calls: list[list[Any]] = []
    by_call: dict[str, int] = {}
    assistant_at: list[tuple[datetime | None, int]] = []
    model = _model_of(columns.get("model_config_json"))
    # The census keys, made once per session (the same tuples as written out): a kept message's by (role, hidden),
    # a block's by its kind; the usual blocks' in locals.
    message_keys = _message_keys(version)
    user_key, user_hidden_key = message_keys[True, False], message_keys[True, True]
    assistant_key, assistant_hidden_key = message_keys[False, False], message_keys[False, True]
    block_keys = _block_keys(version)
    text_key, hidden_text_key = block_keys["text"], ("block/text/hidden", version, _HARNESS)
    request_key, response_key = block_keys["toolRequest"], block_keys["toolResponse"]
    orphan_key = ("block/toolResponse/orphan", version, _SKIPPED)
    seconds_low, seconds_high = _SECONDS_INSIDE
    from_epoch = datetime.fromtimestamp
    # Each whole second read once (a usage_ledger row is written in the second of its assistant message), and the
    # last assistant message of each second, while every timed one is in whole seconds.
    seconds: dict[int, datetime] = {}
    at_second: dict[int, int] = {}
    whole_seconds = True
    place = -1
    # The usual kinds counted in ints (a Counter's += costs ~140 ns, an int's ~15: ~130k counts in 50 MB), each put
    # in the census where it first comes (its keys keep their order) and its count added after the loop.
    n_user = n_assistant = n_text = n_request = n_response = n_thinking = 0
    n_user_hidden = n_assistant_hidden = n_hidden_text = 0
    thinking_key = block_keys["thinking"]
    for mid, role_value, content, created, metadata, _, position in messages:
        place += 1
        index = place if position is None else position
        if not isinstance(content, list):
            raise _reject(RejectCode.BAD_SHAPE, f"message {mid}: content_json is not a block array", native)
        if role_value == "user":
            role = _USER
        elif role_value == "assistant":
            role = _ASSISTANT
        else:
            role_name = role_value if isinstance(role_value, str) else repr(role_value)
            if role_name not in ROLES:
                census[(f"message/{role_name}", version, _SKIPPED)] += 1
                continue
            role = _USER if role_name == "user" else _ASSISTANT
        hidden = isinstance(metadata, dict) and metadata.get("userVisible") is False
        if hidden:
            if role is _USER:
                if not n_user_hidden:
                    census.setdefault(user_hidden_key, 0)
                n_user_hidden += 1
            else:
                if not n_assistant_hidden:
                    census.setdefault(assistant_hidden_key, 0)
                n_assistant_hidden += 1
        elif role is _USER:
            if not n_user:
                census.setdefault(user_key, 0)
            n_user += 1
        else:
            if not n_assistant:
                census.setdefault(assistant_key, 0)
            n_assistant += 1
        # The texts: the first alone, a list only from the second (most messages have one block).
        first_text: str | None = None
        texts: list[str] | None = None
        attachments: list[str] | None = None
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":  # the usual kinds first (the general branch below reads them alike)
                if hidden:
                    if not n_hidden_text:
                        census.setdefault(hidden_text_key, 0)
                    n_hidden_text += 1
                    continue
                if not n_text:
                    census.setdefault(text_key, 0)
                n_text += 1
                text = block.get("text")
                if not isinstance(text, str):
                    raise _reject(RejectCode.BAD_SHAPE, f"message {mid}: a text block without text", native)
                if first_text is None:
                    first_text = text
                elif texts is None:
                    texts = [first_text, text]
                else:
                    texts.append(text)
                continue
            if kind == "toolResponse":
                call_id = block.get("id")
                at = by_call.get(call_id) if isinstance(call_id, str) and call_id else None
                if at is None:  # a result whose call is not in the session (compacted away): never invented
                    census[orphan_key] += 1
                    continue
                result = block.get("toolResult")
                call = calls[at]
                call[4], call[5] = _result_text(result if isinstance(result, dict) else {}, limits)
                if not n_response:
                    census.setdefault(response_key, 0)
                n_response += 1
                continue
            if kind == "toolRequest":
                if not n_request:
                    census.setdefault(request_key, 0)
                n_request += 1
                calls.append(_tool_call(block, index, mid, limits, native, by_call, len(calls)))
                continue
            if kind == "thinking":  # what the general branch below does with it (HARNESS: never hidden text)
                if not n_thinking:
                    census.setdefault(thinking_key, 0)
                n_thinking += 1
                continue
            if not isinstance(kind, str):
                if isinstance(block, dict) and FIRST_DIALECT_KEYS & block.keys():
                    # docs/agents/goose.md "Legacy JSONL": the untyped blocks of Goose's first files (late 2024)
                    raise _reject(
                        RejectCode.UNSUPPORTED_FORMAT,
                        f"message {mid}: an untyped block of Goose's first JSONL dialect (not read)",
                        native,
                    )
                raise _reject(RejectCode.BAD_SHAPE, f"message {mid}: a block without a type", native)
            key = block_keys.get(kind)
            if key is None:
                key = block_keys[kind] = (f"block/{kind}", version, BLOCK_KINDS.get(kind, _SKIPPED))
            if hidden and key[2] is _TURN:
                census[(f"block/{kind}/hidden", version, _HARNESS)] += 1
                continue
            census[key] += 1
            if kind == "image":
                if attachments is None:
                    attachments = []
                attachments.append(_attachment(block))
            elif kind == "frontendToolRequest":
                calls.append(_tool_call(block, index, mid, limits, native, by_call, len(calls)))
        turn_text = None
        text = "\n\n".join(texts) if texts is not None else first_text if first_text is not None else ""
        if attachments or text.strip():
            turn_text = text
        if turn_text is None and role is _USER:
            continue  # no turn (tool results, hidden context): its time is not needed
        when: datetime | None
        whole = type(created) is int and seconds_low <= created <= seconds_high
        if whole:  # parse_any's answer, without its calls
            when = seconds.get(created)
            if when is None:
                when = seconds[created] = from_epoch(created, UTC)
        else:
            when = parse_any(created)
        if turn_text is not None:
            turn: Any = _Turn()  # new_turn(…) without its call
            turn.index, turn.role, turn.text, turn.timestamp = index, role, turn_text, when
            turn.model = model if role is _ASSISTANT else None
            turn.attachments = tuple(attachments) if attachments else ()
            turn.__class__ = Turn
            turns.append(turn)
        if role is _ASSISTANT:
            assistant_at.append((when, index))
            if whole:
                at_second[created] = index
            elif when is not None:
                whole_seconds = False

    for key, n in (
        (user_key, n_user),
        (assistant_key, n_assistant),
        (text_key, n_text),
        (request_key, n_request),
        (response_key, n_response),
        (thinking_key, n_thinking),
        (user_hidden_key, n_user_hidden),
        (assistant_hidden_key, n_assistant_hidden),
        (hidden_text_key, n_hidden_text),
    ):
        if n:
            census[key] += n
    last_assistant = assistant_at[-1][1] if assistant_at else place  # the last message's place
    # docs/agents/goose.md "Tokens": the ledger's rows where the session has any, else the running totals; never both.
    usage = (
        _ledger_usage(
            ledger, assistant_at, last_assistant, census, version, seconds, at_second if whole_seconds else None
        )
        if ledger
        else []
    )
    if not ledger:
        usage = _accumulated_usage(columns, model, last_assistant, census)
    models = [model] if model else []
    for u in usage:
        if u.model and u.model not in models:
            models.append(u.model)

    parent = _text(columns.get("parent_session_id"))
    parent_sid = session_id_of(parent) if parent else None
    title = _text(columns.get("name")) or _text(columns.get("description"))
    ended = parse_any(columns.get("updated_at"))
    made: list[ToolCall] = []
    for call_id, turn_index, name, arguments, output, is_error, _, _, _ in calls:
        tool_call: Any = _Call()  # new_tool_call(*call) without its call
        tool_call.call_id, tool_call.turn_index, tool_call.name, tool_call.input = call_id, turn_index, name, arguments
        tool_call.output, tool_call.is_error = output, is_error
        tool_call.started_at = tool_call.ended_at = tool_call.spawned_session_id = None
        tool_call.__class__ = ToolCall
        made.append(tool_call)
    # Session(agent=AGENT, ...) made as a turn is: its __init__ sets 19 fields through `object.__setattr__`.
    session: Any = _Session()
    session.agent, session.session_id, session.native_id = AGENT, session_id_of(native), native
    session.started_at = started
    session.ended_at = ended if ended is not None and ended >= started else started
    session.parent_session_id = parent_sid
    session.cwd = _text(columns.get("working_dir"))
    session.git_branch = session.git_repository = None
    session.title = title
    session.models = tuple(models)
    session.cli_versions = (version,) if version else ()
    session.archived = parse_iso(columns.get("archived_at")) is not None or bool(columns.get("archived_at"))
    session.started_at_inferred = False
    session.turns, session.tool_calls, session.usage = tuple(turns), tuple(made), tuple(usage)
    session.links = (SessionLink(parent_sid, LinkKind.SUBAGENT),) if parent_sid else ()
    session.census = census
    session.__class__ = Session
    built: Session = session
    return built


def _message_keys(version: str) -> dict[tuple[bool, bool], tuple[str, str, Disposition]]:
    """A kept message's census key by (is a user message, is hidden)."""
    return {
        (is_user, hidden): (
            f"message/{'user' if is_user else 'assistant'}" + ("/hidden" if hidden else ""),
            version,
            _METADATA,
        )
        for is_user in (True, False)
        for hidden in (False, True)
    }


def _block_keys(version: str) -> dict[str, tuple[str, str, Disposition]]:
    """A block's census key by its kind, for the kinds `BLOCK_KINDS` names (others are added as they come)."""
    return {kind: (f"block/{kind}", version, disposition) for kind, disposition in BLOCK_KINDS.items()}


def _tool_call(
    block: dict[str, Any], index: int, message_id: int, limits: Limits, native: str, by_call: dict[str, int], at: int
) -> list[Any]:
    """A toolRequest's call as `new_tool_call`'s arguments (its output and is_error, 4 and 5, set by its result).
    `_dict`, `_text` and `_as_text` written out (~16k calls a 50 MB)."""
    call = block.get("toolCall")
    if not isinstance(call, dict):
        call = {}
    value = call.get("value")
    if not isinstance(value, dict):
        value = {}
    call_id = block.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"msg{message_id}#{at}"
    failed = call.get("status") == "error"
    name = value.get("name")
    if not isinstance(name, str) or not name:
        if not failed:
            raise _reject(RejectCode.BAD_SHAPE, f"message {message_id}: a toolRequest without a tool name", native)
        name = "(invalid call)"
    if call_id in by_call:  # ids stay unique within the session
        call_id = f"{call_id}#{message_id}"
    by_call[call_id] = at
    arguments = value.get("arguments")
    if arguments is not None:
        if not isinstance(arguments, str):
            arguments = json_text(arguments)
        if len(arguments) * 4 > limits.max_field_bytes:
            arguments = clip(arguments, limits)
    return [
        call_id,
        index,
        name,
        arguments,
        _as_text(call.get("error"), limits) if failed else None,
        True if failed else None,
        None,
        None,
        None,
    ]
