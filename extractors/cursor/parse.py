"""Cursor transcript rows already read -> a Session (pure: no I/O). docs/agents/cursor.md.

Both forms, the JSONL (`iter_jsonl` lines) and the legacy `.txt` (`iter_text_lines`), are turned into `Row`s first;
one assembler then applies the turn rules: the person's text is the interior of `<user_query>`, consecutive
assistant rows are one reply, tool calls get ids from their line and block position, `[REDACTED]` is not text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson

from extractors.bounded import GLUED_LINE_KIND, Limits, LineFields, clip, json_text
from extractors.cursor import tables
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Role,
    Session,
    SessionLink,
    ToolCall,
    Turn,
    new_tool_call,
)
from extractors.timeutil import in_range, parse_iso

AGENT = Agent("cursor")


@dataclass(frozen=True, slots=True)
class Facts:
    """What the file's place and stat say about its session."""

    native_id: str  # the file's stem (the nested folder's name for `<uuid>/transcript.jsonl`)
    parent: str | None  # the parent's native id, for `<parent>/subagents/<child>.jsonl`
    mtime: datetime | None  # the start when no `<timestamp>` tag gives one (then `started_at_inferred`)
    version: str = ""  # the census's writer version: "" for JSONL, "txt" for the legacy text form


# A tool call of a row: (its position, name, input as JSON text or None). The call id is `<line>.<position>`: the
# block's place in its row (.txt: the marker's line). Plain tuples: one is made per call, tens of thousands a run.
Call = tuple[int, str, str | None]


@dataclass(frozen=True, slots=True)
class Result:
    name: str | None  # the tool's name where the form says it (.txt), else None
    output: str
    is_error: bool | None


@dataclass(frozen=True, slots=True)
class Row:
    """One role-bearing record: a JSONL row, or a `user:` / `assistant:` block of the .txt form. The JSONL rows (tens
    of thousands a run) reach the assembler as these fields without the object (`_Assembler.assistant`, `.user`)."""

    index: int
    role: str
    texts: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    results: tuple[Result, ...] = ()
    attachments: tuple[str, ...] = ()
    reasoning: bool = False  # it held thinking / redacted blocks (harness)


# --- times ------------------------------------------------------------------------------------------------------------

_WALL_CLOCK = re.compile(
    r"^(?:[A-Za-z]+,\s*)?(?P<month>[A-Za-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4}),?\s+"
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?\s*(?P<ampm>[AaPp][Mm])?\s*"
    r"\(\s*(?:UTC|GMT)\s*(?:(?P<sign>[+-])\s*(?P<oh>\d{1,2})(?::?(?P<om>\d{2}))?)?\s*\)$"
)
# The form Cursor writes (`Sunday, Sep 20, 2026, 12:31 AM (UTC+3)`), at half `_WALL_CLOCK`'s cost (0.47 us, not
# 0.96): on a string it matches whole, `_WALL_CLOCK` finds the same groups on its first path (each part it allows more
# of is here exactly one form), with no second and no offset minutes. Anything else is read by `_WALL_CLOCK`.
_CURSOR_CLOCK = re.compile(
    r"[A-Za-z]+, ([A-Za-z]+) (\d{1,2}), (\d{4}), (\d{1,2}):(\d{2}) ([AP]M) \(UTC(?:([+-])(\d{1,2}))?\)"
)
_MONTHS = {
    name: n
    for n, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}


# `_CURSOR_CLOCK`'s strings (the same pattern, grouped otherwise: tests/test_cursor.py checks the two alike) as the
# day with its offset, which a session's tags share (its UTC midnight is read once: `_DAYS`), and the time of day
# (`_CLOCKS`): a tag of that form is then one match and two look-ups (~0.75 us, `_tag_time`'s way ~1.5).
_CURSOR_TAG = re.compile(r"[A-Za-z]+, ([A-Za-z]+ \d{1,2}, \d{4}), (\d{1,2}:\d{2} [AP])M \(UTC([+-]\d{1,2})?\)")
# `8:05 P` -> the time since midnight, for the hours 1-12 of a 12-hour clock (with a zero or not) and minutes 00-59;
# any other clock (`0:05`, `13:05`, `1:60`) is read by `_tag_time`, as before.
_CLOCKS: dict[str, timedelta] = {
    f"{hour_text}:{minute:02d} {half}": timedelta(0, (hour % 12 + (12 if half == "P" else 0)) * 3600 + minute * 60)
    for hour in range(1, 13)
    for hour_text in {str(hour), f"{hour:02d}"}
    for minute in range(60)
    for half in "AP"
}
_DAYS: dict[tuple[str, str | None], datetime | None] = {}  # (`Sep 20, 2026`, `+3`) -> the UTC time of its midnight
_UNREAD = datetime.min  # not in `_DAYS` yet
_MAX_DAYS = 4096  # `_DAYS` is emptied when it reaches this many (as `_local_day`'s cache is bounded)


def tag_time(body: str) -> datetime | None:
    """The time of a `<timestamp>` tag's text: `Sunday, Sep 20, 2026, 12:31 AM (UTC+3)` (local wall clock with its
    UTC offset; docs/agents/cursor.md "Times"), or an ISO 8601 string; None when it is neither."""
    body = body.strip()
    m = _CURSOR_TAG.fullmatch(body)
    if m is not None:
        date, clock, offset = m.groups()
        midnight = _DAYS.get((date, offset), _UNREAD)
        if midnight is _UNREAD:
            midnight = _read_day(date, offset)
        since = _CLOCKS.get(clock)
        if midnight is not None and since is not None:
            return midnight + since  # what `_tag_time` makes of it
    return _tag_time(body)


def _read_day(date: str, offset: str | None) -> datetime | None:
    """The UTC midnight `_local_day` gives a date and offset of `_CURSOR_TAG` (`Sep 20, 2026`, `+3`), kept in
    `_DAYS`."""
    month_name, day_text, year_text = date.replace(",", "").split(" ")
    sign, oh = (offset[0], offset[1:]) if offset else (None, None)
    day = _local_day(year_text, month_name, day_text, sign, oh, None)
    midnight = None if day is None else day[4]
    if len(_DAYS) >= _MAX_DAYS:
        _DAYS.clear()
    _DAYS[(date, offset)] = midnight
    return midnight


def _tag_time(body: str) -> datetime | None:
    """`tag_time` of a stripped text, read whole."""
    m = _CURSOR_CLOCK.fullmatch(body)
    if m is not None:
        month_name, day_text, year_text, hour_text, minute_text, ampm, sign, oh = m.groups()
        second_text = om = None
    else:
        m = _WALL_CLOCK.match(body)
        if m is None:
            return parse_iso(body)
        month_name, day_text, year_text, hour_text, minute_text, second_text, ampm, sign, oh, om = m.groups()
    hour = int(hour_text)
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.lower() == "pm" else 0)
    elif hour > 23:
        return None
    day = _local_day(year_text, month_name, day_text, sign, oh, om)
    if day is None:
        return None
    year, month, day_of_month, zone, midnight = day
    minute, second = int(minute_text), int(second_text or 0)
    if midnight is not None and minute < 60 and second < 60:
        return midnight + timedelta(0, hour * 3600 + minute * 60 + second)  # what the lines below make of it
    try:
        local = datetime(year, month, day_of_month, hour, minute, second, 0, zone)
    except ValueError:
        return None
    return in_range(local.astimezone(UTC))


# A local day of these years is, whatever its offset (under a day), a UTC time `in_range` keeps.
_PLAIN_YEARS = range(1991, 2199)


@functools.lru_cache(maxsize=4096)  # the prompts of a session fall on a few days: each day and zone is read once
def _local_day(
    year_text: str, month_name: str, day_text: str, sign: str | None, oh: str | None, om: str | None
) -> tuple[int, int, int, timezone, datetime | None] | None:
    """(year, month, day, zone, the UTC time of the day's local midnight) of a tag's date and offset, the midnight
    only for a valid date of `_PLAIN_YEARS` (a tag's time is then that midnight plus its time of day); None for an
    unknown month or an offset of a day or more."""
    month = _MONTHS.get(month_name[:3].lower())
    zone = _zone(sign, oh, om)
    if month is None or zone is None:
        return None
    year, day = int(year_text), int(day_text)
    midnight: datetime | None = None
    if year in _PLAIN_YEARS:
        with contextlib.suppress(ValueError):  # not a date: `tag_time` reads the tag as None through `datetime`
            midnight = datetime(year, month, day, 0, 0, 0, 0, zone).astimezone(UTC)
    return year, month, day, zone, midnight


@functools.cache  # at most 3 signs x 100 hours x 101 minutes: one zone object each, not one per tag
def _zone(sign: str | None, hours: str | None, minutes: str | None) -> timezone | None:
    """The zone of a tag's `(UTC+3)` / `(GMT-05:30)` / `(UTC)`, or None for an offset of a day or more."""
    offset = timedelta(hours=int(hours or 0), minutes=int(minutes or 0))
    if offset >= timedelta(hours=24):
        return None
    return timezone(-offset if sign == "-" else offset)


# --- the assembler ------------------------------------------------------------------------------------------------


# Enum members read once: `Role.USER` is a look-up through the enum's class (40-70 ns on 3.11, a global name ~10),
# and a turn or a count is made tens of thousands of times a run.
_USER, _ASSISTANT = Role.USER, Role.ASSISTANT
_TURN, _TOOL, _SKIPPED = Disposition.TURN, Disposition.TOOL, Disposition.SKIPPED
_NO_RESULTS: tuple[Result, ...] = ()
_STAMP_OPENING, _STAMP_CLOSING = tables.TIMESTAMP
_QUERY_OPENING, _QUERY_CLOSING = tables.USER_QUERY
# their lengths, once (each prompt asks them six times)
_STAMP_SKIP, _QUERY_SKIP, _QUERY_CLOSING_SKIP = len(_STAMP_OPENING), len(_QUERY_OPENING), len(_QUERY_CLOSING)
_REPLY = "assistant"  # an assistant row with text
_QUERY = "user/user_query"  # a person's turn in <user_query>
_REDACTED_SIZE = len(tables.REDACTED)


# The calls, turns and sessions made as `model.new_tool_call` / `new_turn` make them (a plain class of the same slots,
# each set, made the model's class by `__class__`), in line: a call of the maker costs as much as the rest
# (tests/test_cursor.py checks each object so made is what its class's __init__ makes, no field unset).
class _Call:
    __slots__ = ToolCall.__slots__


class _Turn:
    __slots__ = Turn.__slots__


class _Session:
    __slots__ = Session.__slots__


_CALLS = "assistant/tool_use"  # one with tool calls and no text


@dataclass(slots=True)
class _Assembler:
    limits: Limits
    facts: Facts
    turns: list[Turn] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)  # a call's output and is_error are set when one joins it
    # The places in `calls` of the calls without a result, in order: filled up to `listed` when a result comes (most
    # files have none, so the tens of thousands of calls a corpus makes are never listed).
    waiting: deque[int] = field(default_factory=deque)
    listed: int = 0
    times: list[datetime] = field(default_factory=list)
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter)
    reply_index: int | None = None  # the first line of the reply being merged
    reply_texts: list[str] = field(default_factory=list)
    prompts: int = 0  # user rows met that are not only tool results
    queries: int = 0  # the person's turns of `<user_query>`, put in the census by `session`

    def count(self, kind: str, disposition: Disposition) -> None:
        self.census[(kind, self.facts.version, disposition)] += 1

    def close_reply(self) -> None:
        """Many consecutive assistant rows are ONE reply (docs/agents/cursor.md "A reply"): one turn, at the line
        of its first row, when any of them had text."""
        if self.reply_index is not None and self.reply_texts:
            text = "\n\n".join(self.reply_texts)
            if len(text) * 4 > self.limits.max_field_bytes:  # `clip`'s own first test, without the call
                text = clip(text, self.limits)
            turn: Any = _Turn()  # new_turn(…) without its call
            turn.index, turn.role, turn.text = self.reply_index, _ASSISTANT, text
            turn.timestamp = turn.model = None
            turn.attachments = ()
            turn.__class__ = Turn
            self.turns.append(turn)
        self.reply_index = None
        self.reply_texts.clear()  # the same list: `parse_jsonl` holds it

    def row(self, row: Row) -> None:
        if row.role == "assistant":
            self.assistant(row.index, row.texts, row.calls, row.results, row.reasoning)
        else:
            self.user(row.index, row.texts, row.results, row.attachments)

    def assistant(
        self,
        index: int,
        texts: Sequence[str],
        calls: Sequence[Call],
        results: Sequence[Result],
        reasoning: bool,
    ) -> None:
        reply = self.reply_index
        if reply is None:
            reply = self.reply_index = index
        for position, name, arguments in calls:
            self.calls.append(
                new_tool_call(f"{index}.{position}", reply, name, arguments, None, None, None, None, None)
            )
        if results:
            self.join(results)
        text = _visible(texts)
        if text:
            self.reply_texts.append(text)
            self.census[(_REPLY, self.facts.version, _TURN)] += 1
        elif calls:
            self.census[(_CALLS, self.facts.version, _TOOL)] += 1
        elif results:
            self.count("assistant/tool_result", Disposition.TOOL)
        elif reasoning or any(tables.REDACTED in t for t in texts):
            self.count("assistant/redacted", tables.REDACTED_DISPOSITION)
        else:
            self.count("assistant/empty", Disposition.SKIPPED)

    def assistant_record(self, index: int, record: dict[str, Any]) -> None:
        """An assistant JSONL row `parse_jsonl`'s fast path did not take: `_blocks` (which raises RejectError(bad_shape)
        where it should), then `assistant`."""
        texts, calls, results, _, reasoning = _blocks(record, index, "assistant", self.limits)
        self.assistant(index, texts, calls, results, reasoning)

    def user(self, index: int, texts: Sequence[str], results: Sequence[Result], attachments: tuple[str, ...]) -> None:
        raw = texts[0] if len(texts) == 1 else "\n".join(texts)
        if results:
            if not raw.strip():
                # Tool results written back as a user row (the Claude-compatible shape): part of the reply's loop.
                self.join(results)
                self.count("user/tool_result", Disposition.TOOL)
                return
            self.join(results)
        self.prompt(index, raw, attachments)

    def prompt(self, index: int, raw: str, attachments: tuple[str, ...] = ()) -> None:
        """A user row that is not only tool results, its texts joined in `raw` (`parse_jsonl` calls it for a row of
        one text block, the rule, without `_blocks`)."""
        if self.reply_index is not None:  # else there is no reply to close
            self.close_reply()
        self.prompts += 1
        # The first `<timestamp>` tag's time: `_tagged(raw, tables.TIMESTAMP)[0]`, without the others.
        when = None
        start = raw.find(_STAMP_OPENING)
        if start >= 0:
            end = raw.find(_STAMP_CLOSING, start + _STAMP_SKIP)
            if end >= 0:
                when = tag_time(raw[start + _STAMP_SKIP : end])
                if when is not None:
                    self.times.append(when)
        if self.facts.parent is not None and self.prompts == 1:
            # A subagent's first user row is the delegation prompt its parent model wrote (AS fixture
            # subagent-session.jsonl), not a person's words.
            self.count("user/subagent_prompt", Disposition.HARNESS)
            return
        start = raw.find(_QUERY_OPENING)
        end = raw.find(_QUERY_CLOSING, start + _QUERY_SKIP) if start >= 0 else -1
        if end >= 0 and raw.find(_QUERY_OPENING, end + _QUERY_CLOSING_SKIP) < 0:
            # the rule: one prompt (what `_tagged` finds, here without its list and the generators below)
            body = raw[start + _QUERY_SKIP : end]
            text, kind = body.replace(tables.REDACTED, "").strip(), _QUERY
        else:
            queries = _tagged(raw, tables.USER_QUERY)
            if len(queries) == 1:
                text, kind = queries[0][2].replace(tables.REDACTED, "").strip(), _QUERY
            elif queries:
                text = "\n".join(q for q in (_visible((q,)) for _, _, q in queries) if q)
                kind = _QUERY
            else:
                text = _visible((_untagged(raw, tables.TIMESTAMP),))
                if text.startswith(tables.HARNESS_TAGS):
                    self.count("user/injected", Disposition.HARNESS)
                    return
                kind = "user/untagged"
        if not text and not attachments:
            self.count("user/empty", Disposition.SKIPPED)
            return
        if len(text) * 4 > self.limits.max_field_bytes:  # `clip`'s own first test, without the call
            text = clip(text, self.limits)
        turn: Any = _Turn()  # new_turn(…) without its call
        turn.index, turn.role, turn.text, turn.timestamp = index, _USER, text, when
        turn.model = None
        turn.attachments = attachments
        turn.__class__ = Turn
        self.turns.append(turn)
        if kind is _QUERY:  # counted as `parse_jsonl` counts its kinds (`queries`)
            if not self.queries:
                self.census.setdefault((_QUERY, self.facts.version, _TURN), 0)
            self.queries += 1
        else:
            self.census[(kind, self.facts.version, _TURN)] += 1

    def join(self, results: Sequence[Result]) -> None:
        """Results carry no call id: each goes to the oldest call still without one (of its name, where known)."""
        self.waiting.extend(range(self.listed, len(self.calls)))
        self.listed = len(self.calls)
        for result in results:
            target = next((i for i in self.waiting if result.name in (None, self.calls[i].name)), None)
            if target is None:
                continue  # an orphan result: its row is counted under its own kind
            self.waiting.remove(target)
            call = self.calls[target]
            output = clip(result.output, self.limits)
            self.calls[target] = ToolCall(call.call_id, call.turn_index, call.name, call.input, output, result.is_error)

    def session(self) -> Session:
        self.close_reply()
        facts = self.facts
        if self.queries:
            self.census[(_QUERY, facts.version, _TURN)] += self.queries
            self.queries = 0
        started = self.times[0] if self.times else facts.mtime
        if started is None:
            raise RejectError(
                RejectCode.MISSING_TIMESTAMP,
                "no <timestamp> tag and no usable file mtime",
                session_hint=session_id(AGENT, facts.native_id),
            )
        latest = max(self.times, default=None)
        parent = session_id(AGENT, facts.parent) if facts.parent else None
        # Session(agent=AGENT, ...) made as `_Turn` makes a turn: its __init__ sets 19 fields through
        # `object.__setattr__` (~3.7 us a session); the fields not given here are Session's defaults.
        session: Any = _Session()
        session.agent, session.native_id = AGENT, facts.native_id
        session.session_id = session_id(AGENT, facts.native_id)
        session.started_at = started
        session.ended_at = latest if latest is not None and latest > started else None
        session.parent_session_id = parent
        session.cwd = session.git_branch = session.git_repository = session.title = None
        session.models = session.cli_versions = session.usage = ()
        session.archived = False
        session.started_at_inferred = not self.times
        session.turns, session.tool_calls = tuple(self.turns), tuple(self.calls)
        session.links = (SessionLink(parent, LinkKind.SUBAGENT),) if parent else ()
        session.census = self.census
        session.__class__ = Session
        made: Session = session
        return made


def _tagged(raw: str, tag: tuple[str, str]) -> list[tuple[int, int, str]]:
    """(start, end, trimmed body) of each `<tag>...</tag>` in `raw`, left to right (tables.USER_QUERY)."""
    opening, closing = tag
    found: list[tuple[int, int, str]] = []
    position = 0
    while (start := raw.find(opening, position)) >= 0:
        end = raw.find(closing, start + len(opening))
        if end < 0:
            break
        position = end + len(closing)
        found.append((start, position, raw[start + len(opening) : end].strip()))
    return found


def _untagged(raw: str, tag: tuple[str, str]) -> str:
    """`raw` without its `<tag>...</tag>` spans."""
    kept: list[str] = []
    position = 0
    for start, end, _ in _tagged(raw, tag):
        kept.append(raw[position:start])
        position = end
    kept.append(raw[position:])
    return "".join(kept)


def _visible(texts: Sequence[str]) -> str:
    """The text without `[REDACTED]` markers, trimmed."""
    if len(texts) == 1:  # nearly every row: one text block
        return texts[0].replace(tables.REDACTED, "").strip()
    return "\n".join(t.replace(tables.REDACTED, "") for t in texts).strip()


# --- JSONL --------------------------------------------------------------------------------------------------------

# The rows Cursor writes byte for byte the same, with their records, for `iter_jsonl_fields(known=KNOWN_ROWS)`: the
# loop below tells those records by identity and does what its general path would make of them, without it.
KNOWN_ROWS: dict[bytes, dict[str, Any]] = {
    raw: orjson.loads(raw) for raw in (tables.REDACTED_ROW, tables.TURN_ENDED_ROW)
}
_REDACTED_RECORD = KNOWN_ROWS[tables.REDACTED_ROW]
_ENDED_RECORD = KNOWN_ROWS[tables.TURN_ENDED_ROW]


def parse_jsonl(lines: Iterable[LineFields], limits: Limits, facts: Facts) -> Session:
    """The session of one agent-transcript JSONL (`iter_jsonl_fields`). Raises RejectError (bad_shape,
    unsupported_format).

    A Cursor row is ~650 bytes and a corpus holds tens of thousands, with no hot spot but the per-row work itself:
    an assistant row of text and tool_use blocks only (all but a few) is read here, in the loop, to the same calls,
    reply text and count as `_Assembler.assistant` makes of it (any other goes through `assistant_record`); the
    assembler's state the loop touches is held in locals (its reply pieces are one list, cleared, never replaced).
    """
    assembler = _Assembler(limits, facts)
    census = assembler.census
    made = assembler.calls
    pieces = assembler.reply_texts
    version = facts.version
    reply_kind = (_REPLY, version, _TURN)
    calls_kind = (_CALLS, version, _TOOL)
    redacted_kind = ("assistant/redacted", version, tables.REDACTED_DISPOSITION)
    empty_kind = ("assistant/empty", version, _SKIPPED)
    ended_kind = (f"turn_ended/{_ENDED_RECORD['status']}", version, _SKIPPED)
    ended_kinds: dict[str, tuple[str, str, Disposition]] = {_ENDED_RECORD["status"]: ended_kind}  # by status
    redacted_record = _REDACTED_RECORD
    ended_record = _ENDED_RECORD
    redacted = tables.REDACTED
    max_field_bytes = limits.max_field_bytes
    dumps = orjson.dumps
    prompt = assembler.prompt
    made_append = made.append
    # The loop's own kinds counted in locals (a Counter's `+=` costs ~130 ns, an int's ~15: a count a row), each put
    # in the census where it first comes (so its keys keep their order) and its count added at the end.
    n_redacted = n_ended = n_reply = n_calls = n_empty = 0
    for index, _, record, _, part, parts, _, _ in lines:
        if parts > 1 and part == 0:  # `count_glued_line`
            census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] += 1
        if record is redacted_record:  # an assistant row of only `[REDACTED]`: no text, no call
            if assembler.reply_index is None:
                assembler.reply_index = index
            if not n_redacted:
                census.setdefault(redacted_kind, 0)
            n_redacted += 1
            continue
        if record is ended_record:  # `turn_ended` / success
            if pieces or assembler.reply_index is not None:
                assembler.close_reply()
            if not n_ended:
                census.setdefault(ended_kind, 0)
            n_ended += 1
            continue
        role = record.get("role")
        if role == "assistant":
            message = record.get("message")
            content = message.get("content") if type(message) is dict else None
            if type(content) is list:
                reply = assembler.reply_index
                if reply is None:
                    reply = index
                text: str | None = None  # the first text block's; `texts` only when there are more
                texts: list[str] | None = None
                new = 0  # the row's calls, put in `made` as they come (taken out again if the row is not usual)
                for position, block in enumerate(content):
                    if type(block) is not dict:
                        break
                    kind = block.get("type")
                    if kind == "text":
                        piece = block.get("text")
                        if type(piece) is str:  # orjson's strings are never a subclass
                            if text is None:
                                text = piece
                            elif texts is None:
                                texts = [text, piece]
                            else:
                                texts.append(piece)
                    elif kind == "tool_use":
                        name = block.get("name")
                        if type(name) is not str or not name:
                            break
                        raw = block.get("input")
                        if raw is None:
                            arguments = None
                        else:
                            try:  # `json_text`, inline: the stdlib fallback only for what orjson refuses to write
                                arguments = dumps(raw).decode("utf-8")
                            except orjson.JSONEncodeError:
                                arguments = json_text(raw)
                            if len(arguments) * 4 > max_field_bytes:  # `clip`'s own first test, without the call
                                arguments = clip(arguments, limits)
                        call: Any = _Call()  # new_tool_call(…) without its call
                        call.call_id, call.turn_index = f"{index}.{position}", reply
                        call.name, call.input = name, arguments
                        call.output = call.is_error = call.started_at = call.ended_at = call.spawned_session_id = None
                        call.__class__ = ToolCall
                        made_append(call)
                        new += 1
                    else:
                        break
                else:
                    assembler.reply_index = reply
                    # `_visible`: most rows are one text block, and a third of them only `[REDACTED]`; a text with one
                    # is read by `replace` alone (a test with `in` first scans it once more). Cursor ends a text with
                    # it (`...to deploy.\n\n[REDACTED]`, 17 of the real capture's 22 other texts): with no other
                    # before, the text without it is a slice, not `replace`'s search and copy
                    if texts is not None:
                        visible = _visible(texts)
                    elif text is None or text == redacted:
                        visible = ""
                    elif text.endswith(redacted) and text.find(redacted, 0, len(text) - _REDACTED_SIZE) < 0:
                        visible = text[: len(text) - _REDACTED_SIZE].strip()
                    else:
                        visible = text.replace(redacted, "").strip()
                    if visible:
                        pieces.append(visible)
                        if not n_reply:
                            census.setdefault(reply_kind, 0)
                        n_reply += 1
                    elif new:
                        if not n_calls:
                            census.setdefault(calls_kind, 0)
                        n_calls += 1
                    elif text is not None and (redacted in text or any(redacted in t for t in texts or ())):
                        if not n_redacted:  # no result and no reasoning block here
                            census.setdefault(redacted_kind, 0)
                        n_redacted += 1
                    else:
                        if not n_empty:
                            census.setdefault(empty_kind, 0)
                        n_empty += 1
                    continue
                if new:  # the row is read again whole
                    del made[len(made) - new :]
            assembler.assistant_record(index, record)
            continue
        if role == "user":
            message = record.get("message")
            content = message.get("content") if type(message) is dict else None
            if type(content) is list and len(content) == 1:  # one text block: the rule (`_blocks` makes it [text])
                block = content[0]
                if type(block) is dict and block.get("type") == "text":
                    piece = block.get("text")
                    if type(piece) is str:  # orjson's strings are never a subclass
                        prompt(index, piece)
                        continue
            texts_, _, results, attachments, _ = _blocks(record, index, role, limits)
            assembler.user(index, texts_, results, attachments)
            continue
        if role is None:
            kind = record.get("type")
            if kind == "turn_ended":  # not one of tables.CLAUDE_TYPES
                if pieces or assembler.reply_index is not None:
                    assembler.close_reply()
                status = record.get("status")
                ended = ended_kinds.get(status) if isinstance(status, str) else None
                if ended is None:
                    kind = f"turn_ended/{status}" if isinstance(status, str) else "turn_ended"
                    ended = (kind, version, Disposition.SKIPPED)
                    if isinstance(status, str):
                        ended_kinds[status] = ended
                census[ended] += 1
                continue
            if isinstance(kind, str) and kind in tables.CLAUDE_TYPES and "message" in record:
                raise RejectError(
                    RejectCode.UNSUPPORTED_FORMAT,
                    f"a record with type {kind!r} and no top-level role: Claude Code JSONL, not Cursor's "
                    "(read it with --format claude)",
                    line=index,
                )
            assembler.count(kind if isinstance(kind, str) else "(untyped)", Disposition.SKIPPED)
            continue
        # tables.ROLES holds "user" and "assistant", read above: any other role is skipped under its name
        assembler.count(f"role/{role}" if isinstance(role, str) else "role/(not text)", Disposition.SKIPPED)
    for kind, n in (
        (redacted_kind, n_redacted),
        (ended_kind, n_ended),
        (reply_kind, n_reply),
        (calls_kind, n_calls),
        (empty_kind, n_empty),
    ):
        if n:
            census[kind] += n
    return assembler.session()


def _blocks(
    record: dict[str, Any], index: int, role: str, limits: Limits
) -> tuple[list[str], list[Call], list[Result] | tuple[Result, ...], tuple[str, ...], bool]:
    """A row's (texts, calls, results, attachments, reasoning). Raises RejectError(bad_shape)."""
    message = record.get("message")
    if not isinstance(message, dict):
        raise RejectError(RejectCode.BAD_SHAPE, f"a {role} row without a message object", line=index)
    content = message.get("content")
    if isinstance(content, str):
        return [content], [], _NO_RESULTS, (), False
    if content is None:
        return [], [], _NO_RESULTS, (), False
    if not isinstance(content, list):
        raise RejectError(RejectCode.BAD_SHAPE, "message.content is neither text nor a list of blocks", line=index)
    texts: list[str] = []
    calls: list[Call] = []
    results: list[Result] = []
    attachments: list[str] = []
    reasoning = False
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a content block that is not an object", line=index)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
        elif kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str) or not name:
                raise RejectError(RejectCode.BAD_SHAPE, "a tool_use block without a name", line=index)
            raw = block.get("input")
            calls.append((position, name, None if raw is None else clip(json_text(raw), limits)))
        elif kind == "tool_result":
            failed = block.get("is_error")
            is_error = failed if isinstance(failed, bool) else None
            results.append(Result(None, _result_text(block.get("content")), is_error))
        elif kind == "image":
            attachments.append("image")
        elif kind in ("thinking", "redacted", "reasoning"):
            reasoning = True
    return texts, calls, results, tuple(attachments), reasoning


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return "" if content is None else json_text(content)


# --- the legacy .txt ------------------------------------------------------------------------------------------------


def parse_txt(lines: Iterable[tuple[int, str]], limits: Limits, facts: Facts) -> Session:
    """The session of one legacy plain-text transcript: blocks opened by a line `user:` or `assistant:`, each one
    record (its index is the marker's line). Lines before the first marker are counted as `preamble`."""
    assembler = _Assembler(limits, facts)
    block: tuple[int, str] | None = None
    body: list[str] = []
    preamble = False
    for index, text in lines:
        role = tables.TXT_ROLES.get(text.strip())
        if role is None:
            if block is None:
                preamble = preamble or bool(text.strip())
            else:
                body.append(text)
            continue
        if block is not None:
            assembler.row(_txt_row(block[0], block[1], body, limits))
        block, body = (index, role), []
    if block is not None:
        assembler.row(_txt_row(block[0], block[1], body, limits))
    if preamble:
        assembler.count("preamble", Disposition.SKIPPED)
    return assembler.session()


def _txt_row(index: int, role: str, body: list[str], limits: Limits) -> Row:
    if role == "user":
        return Row(index, role, ("\n".join(body),))
    texts: list[str] = []
    calls: list[Call] = []
    results: list[Result] = []
    reasoning = False
    i = 0
    while i < len(body):
        trimmed = body[i].strip()
        marker = next(
            (m for m in (tables.TXT_THINKING, tables.TXT_TOOL_CALL, tables.TXT_TOOL_RESULT) if trimmed.startswith(m)),
            None,
        )
        if marker is None:
            texts.append(body[i])
            i += 1
            continue
        start = i + 1
        i = start
        while i < len(body) and not _body_ends(body[i]):
            i += 1
        inner = _dedent(body[start:i])
        name = trimmed[len(marker) :].strip()
        if marker == tables.TXT_THINKING:
            reasoning = True
        elif marker == tables.TXT_TOOL_CALL:
            # the call id's second part is the `[Tool call]` line's own number (body line k is line index + 1 + k)
            calls.append((index + start, name or "tool", clip(_arguments(inner), limits) if inner else None))
        elif inner:  # an empty body: the result was not written (peers' samples), so the call keeps no output
            results.append(Result(name or None, inner, None))
    return Row(index, role, ("\n".join(texts),), tuple(calls), tuple(results), (), reasoning)


def _body_ends(line: str) -> bool:
    """A marker body is its indented or blank lines; a non-blank line at the left margin (or a marker) ends it."""
    trimmed = line.strip()
    if trimmed.startswith((tables.TXT_THINKING, tables.TXT_TOOL_CALL, tables.TXT_TOOL_RESULT)):
        return True
    return bool(trimmed) and not line.startswith((" ", "\t"))


def _dedent(lines: list[str]) -> str:
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines).strip()


def _arguments(text: str) -> str:
    """A tool call's arguments as JSON text: the body itself when it is JSON, else its `key: value` lines as an
    object, else the body as written."""
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return text
    pairs = [line.split(":", 1) for line in text.splitlines() if line.strip()]
    if pairs and all(len(p) == 2 and p[0].strip() and not p[0].startswith((" ", "\t")) for p in pairs):
        return json_text({k.strip(): v.strip() for k, v in pairs})
    return text
