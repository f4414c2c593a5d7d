"""One run of `.aider.chat.history.md` (its lines, already read) -> a Session. Pure: no I/O, no clock.

The lines are classified by `tables` (docs/agents/aider.md "Lines"); consecutive `####` lines make one person's turn,
the model's reply between aider's own lines makes one assistant turn, and each `> Tokens:` line one `Usage`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from itertools import chain, compress, count, repeat
from operator import or_
from typing import Any

from extractors.aider import tables as t
from extractors.bounded import Limits, clip
from extractors.bounded.text_lines import TextLine
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id, stable_hash
from extractors.model import Agent, Disposition, Role, Session, Turn, Usage

AGENT = Agent("aider")
AIDER_LINES = frozenset({"tool_output", "tokens", "banner", "working_dir"})  # kinds of aider's own `>` lines
_SPECIAL = (t.PROMPT[0], t.QUOTE, "<")  # what the lines `_walk_lines` takes one by one start with (or blank)
_NON_BLANK = re.compile(r"\S")  # a character `str.strip()` keeps
_PROMPT = t.PROMPT.encode()
_NEW_PROMPT = b"\n" + _PROMPT
_TOKENS_START = t.TOKENS_START.encode()


def _counter() -> Counter[Any]:
    """An empty Counter, made without `Counter.__init__` (which only asks whether it was given anything: ~1 us)."""
    return Counter.__new__(Counter)


@dataclass(slots=True)
class _Run:
    """What the walk over one run's lines has gathered so far."""

    turns: list[Turn] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=_counter)
    models: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    cwd: str | None = None
    model: str | None = None  # the chat model of the latest banner
    prompt: list[str] = field(default_factory=list)  # the person's lines of the open prompt
    prompt_at: int = -1
    reply: list[str] = field(default_factory=list)  # the model's lines of the open reply
    reply_at: int = -1
    last_reply: int | None = None  # the index of the latest assistant turn after the latest prompt
    last_answer: str | None = None  # the text of the latest assistant turn, until the person's next turn
    last_answer_first: str = ""  # its first character that is not a space
    pending_usage: int | None = None  # a Usage whose cost may follow on the next (continuation) line
    message_open: bool = False  # inside a message of aider's of several lines (its first `>` line had no hard break)
    reasoning: bool = False  # inside the reply's reasoning (`<thinking-content-…>` or `<think>` not yet closed)
    command_args: str | None = None  # what the command just typed was given (`/code X`: `X`), until another line


class _Unusual(Exception):
    """A run `_walk_text` does not take (a message of aider's of several lines): `_walk_lines` reads it."""


@dataclass(frozen=True, slots=True)
class RunText:
    """One run as read: its lines as UTF-8 (each followed by `\\n`, the header first; checked to decode), the
    header's line number and byte offset, and its last line when that one is cut (the file ends inside it, no
    newline), else None."""

    raw: bytes
    index: int
    offset: int
    cut_tail: TextLine | None = None


def header_time(text: str) -> str | None:
    """The `YYYY-MM-DD HH:MM:SS` of a run's header line, or None when `text` is not one."""
    match = t.HEADER.match(text)
    return match.group(1) if match else None


def started_at(stamp: str, zone: tzinfo | None) -> datetime:
    """The header's local naive time in UTC, read in `zone` (None: the machine's zone at read time).

    Raises RejectError(missing_timestamp) for a time that is not one (`2026-13-40 …`)."""
    try:
        if stamp.isascii():  # `tables.HEADER`'s digits in their places: read as strptime reads them, without its regex
            naive = datetime(
                int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10]), int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:])
            )
        else:  # other digits than ASCII's (`\d` takes them): strptime says which it reads
            naive = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
    except ValueError as exc:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, f"the run's header time {stamp!r} is no date") from exc
    # A naive time's `astimezone(UTC)` reads it in the machine's zone, as `astimezone()` then `astimezone(UTC)` does.
    return (naive.replace(tzinfo=zone) if zone is not None else naive).astimezone(UTC)


def native_id(raw: bytes, stamp: str | None = None) -> str:
    """`<header time as YYYYmmddTHHMMSS>-<12 hex>`: the digest of the run's opening, its lines from the header through
    its first `####` block (docs/agents/aider.md "Session ids"). Appending to the run never changes it, and it is
    the same wherever the file lies. `raw`: the run's lines as UTF-8, each followed by `\\n`; `stamp`: its header's
    time when the caller has read it already (`header_time` of its first line)."""
    if stamp is None:
        stamp = header_time(raw[: raw.find(b"\n")].decode()) or ""
    end = raw.find(_NEW_PROMPT)  # the newline before the first `####` line
    if end < 0:
        end = len(raw) - 1  # no `####` line: the whole run
    else:
        end = raw.find(b"\n", end + 1)
        while raw.startswith(_PROMPT, end + 1):
            end = raw.find(b"\n", end + 1)
    # `YYYY-mm-dd HH:MM:SS` (tables.HEADER: each digit one character) as `YYYYmmddTHHMMSS`.
    compact = f"{stamp[:4]}{stamp[5:7]}{stamp[8:10]}T{stamp[11:13]}{stamp[14:16]}{stamp[17:]}" if stamp else ""
    return f"{compact}-{stable_hash(raw[:end])[:12]}"


def parse_run(
    lines: RunText, native: str, limits: Limits, zone: tzinfo | None = None, stamp: str | None = None
) -> tuple[Session, int]:
    """The Session of one run (`lines.raw` starts with its header), and how many lines the run has (`stamp`: its
    header's time when the caller has read it already, `header_time` of its first line). Raises RejectError:
    truncated_tail (its last line is partial), missing_timestamp (a header time that is no date), no_conversation
    (nothing said: a run that only started)."""
    sid = session_id(AGENT, native)
    raw = lines.raw
    if stamp is None:
        stamp = header_time(raw[: raw.find(b"\n")].decode())
    if stamp is None:
        raise RejectError(RejectCode.BAD_SHAPE, "a run that does not start with its header", line=lines.index)
    start = started_at(stamp, zone)
    tail = lines.cut_tail
    if tail is not None and tail.text.strip():
        raise RejectError(
            RejectCode.TRUNCATED_TAIL,
            "the file ends inside a line, older than settle_seconds",
            line=tail.index,
            offset=tail.offset,
            session_hint=sid,
        )
    run = _Run()
    try:
        count = _walk_text(run, raw, lines.index, limits)
    except _Unusual:  # a message of aider's of several lines: the run is read again, a line at a time
        run = _Run()
        texts = raw.decode().split("\n")[:-1]
        _walk_lines(run, texts, lines.index, limits)
        count = len(texts)
    if not run.turns:
        raise RejectError(
            RejectCode.NO_CONVERSATION, "a run with no prompt and no reply", line=lines.index, offset=lines.offset
        )
    version = run.versions[0] if run.versions else ""
    # Each kind once (a Counter's keys): one census entry each, in the order the kinds first came. Put in by
    # dict.update: Counter's own (and its __init__) asks first whether it was given a Mapping, which costs more.
    census: Counter[tuple[str, str, Disposition]] = _counter()
    dict.update(census, {(kind, version, _DISPOSITIONS.get(kind, _SKIPPED)): n for kind, n in run.kinds.items()})
    # Session(agent=AGENT, session_id=sid, …) made as `_Turn` makes a turn: each field set, the rest as Session's
    # defaults (its __init__ sets each of 19 through object.__setattr__: ~3.7 us, this ~0.3).
    session: Any = _Session()
    session.agent, session.session_id, session.native_id, session.started_at = AGENT, sid, native, start
    session.ended_at = session.parent_session_id = session.git_branch = session.git_repository = session.title = None
    session.cwd = run.cwd
    session.models = tuple(dict.fromkeys(run.models))
    session.cli_versions = tuple(dict.fromkeys(run.versions))
    session.archived = session.started_at_inferred = False
    session.turns, session.usage, session.census = tuple(run.turns), tuple(run.usage), census
    session.tool_calls = session.links = ()
    session.__class__ = Session
    return session, count


# The line groups (`tables.LINE_GROUP`) that are a line like any other inside a reply, or inside its reasoning: the
# model's quote, a `# aider` line, a reasoning tag that opens nothing (`> Tokens: ` without the hard break is not one).
_NEWLINE = ord("\n")
_SCALES = {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}  # TOKEN_FIGURE's scales
_BYTE_SCALES = {scale.encode(): factor for scale, factor in _SCALES.items()}
_PLAIN_IN_REPLY = frozenset({"quote", "marker", "close"})
_PLAIN_IN_REASONING = frozenset({"quote", "marker", "open"})
_USER, _ASSISTANT = Role.USER, Role.ASSISTANT
_DISPOSITIONS = {kind: disposition for kind, (disposition, _) in t.LINE_KINDS.items()}
_SKIPPED = Disposition.SKIPPED


class _Turn:
    """A `Turn` being made: its slots in a plain class, each set and the object then made a `Turn` (`__class__`), as
    `model.new_turn` makes one, in line: the walk makes three a usual exchange, and a call costs more than the rest."""

    __slots__ = Turn.__slots__
    index: int
    role: Role
    text: str
    timestamp: datetime | None
    model: str | None
    attachments: tuple[str, ...]


class _Session:
    """A `Session` being made, as `_Turn` (in `parse_run`: tests/test_aider.py checks it sets every field)."""

    __slots__ = Session.__slots__


class _Usage:
    """A `Usage` being made, as `_Turn` (`model.new_usage`)."""

    __slots__ = Usage.__slots__
    turn_index: int
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    timestamp: datetime | None
    response_id: str | None


def _walk_text(run: _Run, text: bytes, base: int, limits: Limits) -> int:
    """Take the run's lines (UTF-8, each followed by `\\n`; the header, line `base`, first) into `run` as
    `_walk_lines` takes them, a group of lines at a time: it stops only at the lines `tables.LINE_GROUP` finds (the
    usual exchange: all of it at once), and takes the lines between at once (a reply: a slice of `text`, decoded;
    its reasoning: counted), or one by one (blank lines and aider's unprefixed lines before a reply). A reply's lines
    are counted once, at the end: the lines that are not blank (the empty ones counted as the walk goes), less all
    the others counted. Returns how many lines `text` has. Raises _Unusual for a message of aider's of several lines.
    """
    kinds = run.kinds
    kinds["header"] += 1
    previous = "header"  # the kind of the line just before (a blank line: "")
    reply: list[tuple[int, int]] | None = None  # the open reply's slices of `text`; None: no reply is open
    reasoning = False
    spaces = 0  # lines of spaces alone (blank, not empty)
    empties = 0  # empty lines
    pend = text.find(b"\n") + 1  # where the lines not taken yet start
    ln = base + 1  # the number of the line at `pend`
    last = len(text) - 1  # the newline that ends the last line
    find, count, starts = text.find, text.count, text.startswith
    turns, usage = run.turns, run.usage
    quarter = limits.max_field_bytes // 4  # a text of at most this many chars: `clip` keeps it as it is
    # What the usual exchanges count, added to `kinds` at the end (each kind put in `kinds` when it first comes, so
    # that the census keeps the order the kinds came in).
    n_tool_output = n_tokens = n_reasoning = n_command = n_prompt = 0
    replied = False  # "assistant" is in `kinds`
    # The names of `tables` the usual exchange reads, as locals (each read a few times an exchange).
    g_typed, g_command, g_echo, g_reply, g_thought, g_output = t.TYPED, t.COMMAND, t.ECHO, t.REPLY, t.THOUGHT, t.OUTPUT
    g_usual = (t.SENT, t.SENT_SCALE, t.RECEIVED, t.RECEIVED_SCALE, t.COST)
    prefixes, blank_input, confirm_start = t.COMMAND_PREFIXES, t.BLANK_INPUT, t.CONFIRM_START
    for group in chain(t.LINE_GROUP.finditer(text, pend - 1), (None,)):
        if group is None:
            kind, at = "end", last
        else:
            kind, at = group.lastgroup or "", group.start()  # the group's first line starts at `at + 1`
        if reply is None and not reasoning:
            # The lines before, outside a reply: blank ones, aider's output without its `>`, then a reply opens.
            if pend == at:  # one empty line (the usual one before a `####` line)
                previous = ""
                ln += 1
                pend += 1
                empties += 1
            while pend <= at:
                end = find(b"\n", pend)
                if end == pend:
                    previous = ""
                    empties += 1
                else:
                    if run.prompt:
                        _close_prompt(run, limits)
                    run.command_args = None
                    if previous not in AIDER_LINES:
                        reply = _open_reply(run, ln)
                        break
                    kinds["tool_output"] += 1
                ln += 1
                pend = end + 1
        if reasoning:
            if kind in _PLAIN_IN_REASONING and not starts(_TOKENS_START, at + 1):
                continue  # one of the reasoning's lines
        elif reply is not None and kind in _PLAIN_IN_REPLY and not starts(_TOKENS_START, at + 1):
            continue  # one of the reply's lines
        if pend <= at and (reply is not None or reasoning):
            lines = count(b"\n", pend, at + 1)
            empty = _empty_lines(text, pend, at + 1)
            empties += empty
            if reasoning:
                said = lines - empty
                if said:
                    kinds["reasoning"] += said
                previous = "" if text[at - 1] == _NEWLINE else "reasoning"
            else:
                reply.append((pend, at))  # type: ignore[union-attr]
                previous = "" if text[at - 1] == _NEWLINE else "assistant"
            ln += lines
        pend = at + 1
        if group is None:
            break
        if kind == "exchange":
            # The usual exchange (tables.EXCHANGE): taken as the walk takes its groups one by one.
            if previous == "prompt":
                raise _Unusual
            reasoning = False
            if reply is not None:
                _close_pieces(run, text, reply, limits)
                reply = None
            if run.prompt:
                _close_prompt(run, limits)
            end = group.end()
            typed_at, typed_end = group.span(g_typed)
            if typed_at < 0:  # a command and its echo alone
                _typed(run, [group.group(t.ALONE).decode()], ln, limits)
                run.command_args = None
                echoed = count(b"\n", group.start(t.ALONE_ECHO), end) + 1
                kinds["tool_output"] += echoed
                run.pending_usage = None
                previous = "tool_output"
                ln += 1 + echoed
                pend = end + 1
                continue
            # The lines' numbers from where each part starts: between the parts there are only empty lines.
            prompt_at = ln
            said = 0  # the lines that are not empty
            if typed_at > at + 1:  # a command of one line and aider's echo of it (its output) first
                command_start, command_end = group.span(g_command)
                command = text[command_start:command_end].decode()
                words = command.strip()
                if (  # none of `_typed`'s exceptions can be: the person's words, taken as `_typed` takes them
                    words
                    and run.command_args is None
                    and words != blank_input
                    and confirm_start not in command
                    and (run.last_answer is None or words[0] != run.last_answer_first)
                ):
                    if words.startswith(prefixes):
                        if not n_command:
                            kinds.setdefault("command", 0)
                        n_command += 1
                    else:
                        if not n_prompt:
                            kinds.setdefault("prompt", 0)
                        n_prompt += 1
                    if command_end - command_start > quarter and len(words) > quarter:
                        words = clip(words, limits)
                    turn = _Turn()  # new_turn(…) without its call (_Turn)
                    turn.index, turn.role, turn.text = ln, _USER, words
                    turn.timestamp, turn.model, turn.attachments = None, None, ()
                    turn.__class__ = Turn  # type: ignore[assignment]
                    turns.append(turn)  # type: ignore[arg-type]
                    run.last_answer = run.last_reply = None
                else:
                    _typed(run, [command], ln, limits)
                    run.command_args = None
                echo_start, echo_end = group.span(g_echo)
                echoed = count(b"\n", echo_start, echo_end) + 1
                if not n_tool_output:
                    kinds.setdefault("tool_output", 0)
                n_tool_output += echoed
                run.pending_usage = None
                said = 1 + echoed
                prompt_at = ln + said + typed_at - echo_end - 1
            if find(b"\n", typed_at, typed_end) < 0:  # one line: its words are what is between `####` and `  `
                typed_lines = 1
                words = text[typed_at + 4 : typed_end - 2].decode().strip()
            else:
                person = t.PROMPT_TEXT.findall(text[typed_at:typed_end].decode())
                typed_lines = len(person)
                words = "\n".join(person).strip()
            if (  # as above
                words
                and run.command_args is None
                and words != blank_input
                and (typed_lines > 1 or confirm_start not in words)
                and (run.last_answer is None or words[0] != run.last_answer_first)
            ):
                if words.startswith(prefixes):
                    if not n_command:
                        kinds.setdefault("command", 0)
                    n_command += typed_lines
                else:
                    if not n_prompt:
                        kinds.setdefault("prompt", 0)
                    n_prompt += typed_lines
                turn = _Turn()  # as above
                turn.index, turn.role, turn.timestamp, turn.model, turn.attachments = prompt_at, _USER, None, None, ()
                # (no more characters than bytes: a short slice needs no `len`)
                turn.text = words if typed_end - typed_at <= quarter or len(words) <= quarter else clip(words, limits)
                turn.__class__ = Turn  # type: ignore[assignment]
                turns.append(turn)  # type: ignore[arg-type]
                run.last_answer = run.last_reply = None
            else:
                _typed(run, t.PROMPT_TEXT.findall(text[typed_at:typed_end].decode()), prompt_at, limits)
                run.command_args = None
            said += typed_lines
            reply_start, reply_end = group.span(g_reply)
            thought, thought_end = group.span(g_thought)
            if thought < 0:
                reply_at = prompt_at + typed_lines - 1 + reply_start - typed_end
            else:
                reply_at = prompt_at + count(b"\n", typed_at, reply_start)
                thought_lines = count(b"\n", thought, thought_end) - _empty_lines(text, thought + 1, thought_end + 1)
                if not n_reasoning:
                    kinds.setdefault("reasoning", 0)
                n_reasoning += thought_lines + 2
                said += thought_lines + 2
            if not replied:
                kinds.setdefault("assistant", 0)  # where the first reply opened puts it in the census
                replied = True
            answer = text[reply_start:reply_end]
            answer_lines = answer.split(b"\n")
            answer_count = len(answer_lines)
            said += answer_count - answer_lines.count(b"")
            output_start = group.start(g_output)
            if output_start < 0:  # no usual usage report after the reply: the walk reads on, the reply open
                reply = [(reply_start, end)]  # its lines and the empty ones after it, as the walk keeps them
                run.reply_at = reply_at
                previous = "" if end > reply_end else "assistant"
                new_ln = reply_at + answer_count + end - reply_end
            else:
                words = answer.decode()
                model = run.model
                turn = _Turn()  # as above
                turn.index, turn.role, turn.model = reply_at, _ASSISTANT, model
                turn.timestamp, turn.attachments = None, ()
                turn.text = (
                    words if reply_end - reply_start <= quarter or len(words) <= quarter else clip(words, limits)
                )
                turn.__class__ = Turn  # type: ignore[assignment]
                turns.append(turn)  # type: ignore[arg-type]
                run.last_reply = reply_at
                run.last_answer = words
                first = words[0]  # the first character that is not a space (an indented first line has them before)
                run.last_answer_first = words.lstrip()[0] if first.isspace() else first
                if not n_tokens:
                    kinds.setdefault("tokens", 0)
                n_tokens += 1
                tokens_at = reply_at + answer_count - 1 + count(b"\n", reply_end, output_start)
                sent, sent_scale, received, received_scale, cost = group.group(*g_usual)
                if sent is not None:  # the usual report: its figures as `_add_usage` reads them
                    used = _Usage()  # new_usage(…) without its call, as the turns above
                    used.turn_index, used.model, used.cost_usd = reply_at, model, float(cost)
                    used.input_tokens = round(float(sent) * _BYTE_SCALES[sent_scale])
                    used.output_tokens = round(float(received) * _BYTE_SCALES[received_scale])
                    used.cache_read_tokens = used.cache_write_tokens = used.reasoning_tokens = None
                    used.timestamp = used.response_id = None
                    used.__class__ = Usage  # type: ignore[assignment]
                    usage.append(used)  # type: ignore[arg-type]
                    run.pending_usage = None
                else:  # any other report (cache figures, no cost): read as the walk reads it
                    report_start, report_end = group.span(t.REPORT)
                    run.pending_usage = None
                    _add_usage(run, tokens_at, text[report_start : report_end - 2].decode())
                if output_start < end:  # aider's lines after the report
                    output = count(b"\n", output_start, end)
                    if not n_tool_output:
                        kinds.setdefault("tool_output", 0)
                    n_tool_output += output
                    run.pending_usage = None
                    previous = "tool_output"
                else:
                    output = 0
                    previous = "tokens"
                said += 1 + output
                new_ln = tokens_at + output + 1
            empties += new_ln - ln - said
            ln = new_ln
        elif kind == "prompt":
            if previous == "prompt":
                raise _Unusual  # `####` lines right after `####` lines, each group its own
            reasoning = False  # aider's own line ends a reply whose reasoning never closed (an interrupted reply)
            if reply is not None:
                _close_pieces(run, text, reply, limits)
                reply = None
            if run.prompt:
                _close_prompt(run, limits)
            run.prompt = t.PROMPT_TEXT.findall(group.group(kind).decode())
            run.prompt_at = ln
            previous = "prompt"
            ln += len(run.prompt)
        elif kind == "aider":
            if run.prompt:
                _close_prompt(run, limits)
            run.command_args = None
            reasoning = False
            if reply is not None:
                _close_pieces(run, text, reply, limits)
                reply = None
            # Aider's lines, each its own kind: only the banner's and the usage report's are read (AIDER_LINE_STARTS),
            # the others are output, counted together.
            lines_text = group.group(kind)
            done = 0  # the group's lines taken so far
            for special in t.AIDER_LINE_START.finditer(lines_text):
                before = lines_text.count(b"\n", 0, special.start()) - done
                if before:
                    kinds["tool_output"] += before
                    run.pending_usage = None
                line_end = lines_text.find(b"\n", special.start())
                line = lines_text[special.start() : line_end if line_end >= 0 else len(lines_text)]
                previous = _aider_line(run, ln + done + before, line[: -len(t.HARD_BREAK)].decode())
                done += before + 1
            lines = lines_text.count(b"\n") + 1
            if lines > done:
                kinds["tool_output"] += lines - done
                run.pending_usage = None
                previous = "tool_output"
            ln += lines
        elif kind == "blank":
            spaces += 1
            if reply is not None and not reasoning:
                reply.append((pend, pend))  # an empty line in its place, not its spaces
            previous = ""
            ln += 1
        elif kind == "quote":
            raise _Unusual  # aider's message of several lines (or a usage report going on to a `Cost:` line)
        elif kind == "close" and reasoning:
            kinds["reasoning"] += 1
            reasoning = False
            previous = "reasoning"
            ln += 1
        elif kind == "open" and reply is not None:
            kinds["reasoning"] += 1  # reasoning inside the reply: left out of its text
            reasoning = True
            previous = "reasoning"
            ln += 1
        else:  # a marker, a reasoning tag outside a reply
            if run.prompt:
                _close_prompt(run, limits)
            run.command_args = None
            if previous in AIDER_LINES:
                kinds["tool_output"] += 1
            elif kind == "marker":
                kinds[t.UNKNOWN_KIND] += 1
                previous = t.UNKNOWN_KIND
            elif kind == "open":
                kinds["reasoning"] += 1
                reasoning = True
                previous = "reasoning"
            else:  # a closing tag with nothing open: the reply's first line
                reply = _open_reply(run, ln)
                continue
            ln += 1
        pend = group.end() + 1
    _close_prompt(run, limits)
    if reply is not None:
        _close_pieces(run, text, reply, limits)
    for kind, n in (
        ("tool_output", n_tool_output),
        ("tokens", n_tokens),
        ("reasoning", n_reasoning),
        ("command", n_command),
        ("prompt", n_prompt),
    ):
        if n:
            kinds[kind] += n
    # The reply's lines: every line not blank, less those counted as another kind (each line is counted once).
    said = (ln - base - 1) - empties - spaces
    said -= sum(kinds.values()) - kinds["header"]
    if said > 0:
        kinds["assistant"] = said  # where the first reply opened put it in the census
    else:
        kinds.pop("assistant", None)
    return ln - base


def _open_reply(run: _Run, ln: int) -> list[tuple[int, int]]:
    run.reply_at = ln
    run.kinds.setdefault("assistant", 0)  # counted at the end, in the census where it first appears
    return []


def _empty_lines(text: bytes, start: int, end: int) -> int:
    """How many of the lines in `text[start:end]` are empty (`start` at a line's start, after a newline; `end` after
    one): the newlines right after a newline."""
    return len(t.EMPTY_LINE.findall(text, start - 1, end))


def _close_pieces(run: _Run, text: bytes, pieces: list[tuple[int, int]], limits: Limits) -> None:
    """End the open reply, its lines the slices `pieces` of `text`."""
    if len(pieces) == 1:
        start, end = pieces[0]
        while end > start and text[end - 1] == _NEWLINE:
            end -= 1  # the blank lines after it (a reply's first line is never blank)
        _end_reply(run, text[start:end].decode(), limits)
    else:
        _end_reply(run, b"\n".join([text[start:end] for start, end in pieces]).strip(b"\n").decode(), limits)


def _walk_lines(run: _Run, texts: list[str], base: int, limits: Limits) -> None:
    """Take the run's lines (`texts[0]` its header, line `base`) into `run` one kind of line at a time: the reading
    `_walk_text` gives the same result as, for the runs it does not take."""
    kinds = run.kinds
    kinds["header"] += 1
    previous = "header"  # the kind of the line just before (a blank line: "")
    # Only a line that starts with `#`, `>` or `<`, or one of spaces alone, can be a prompt, aider's own line, a
    # reasoning tag or a blank line that is not empty; the lines between two of those are taken a span at a time.
    marked = map(or_, map(str.startswith, texts, repeat(_SPECIAL)), map(str.isspace, texts))  # no loop in Python
    position = 1
    for at in chain(compress(count(), marked), (len(texts),)):
        if at > position:
            previous = _span(run, texts, position, at, base, previous, limits)
        if at == len(texts):
            break
        if at:
            previous = _classify(run, base + at, texts[at], previous, limits)
        position = at + 1
    _close_prompt(run, limits)
    _close_reply(run, limits)


def _span(run: _Run, texts: list[str], start: int, end: int, base: int, previous: str, limits: Limits) -> str:
    """Take `texts[start:end]` (lines `base + start` ..) into `run`: lines that are empty or start with none of
    `_SPECIAL`. Inside a reply they are the reply's lines as they are, inside reasoning the reasoning's, whatever
    they hold: taken at once, as `_classify` takes each (no prompt is open there, no command's arguments are kept,
    so there is nothing to close). Elsewhere they are taken one by one, until a reply or reasoning opens."""
    position = start
    while position < end:
        if not run.message_open and (run.reasoning or run.reply):
            span = texts[position:end]
            said = len(span) - span.count("")
            last = "" if not texts[end - 1] else "assistant"
            if run.reasoning:
                if said:
                    run.kinds["reasoning"] += said
                return "" if last == "" else "reasoning"
            run.reply.extend(span)  # an empty line inside a reply stays in it (trailing ones are cut at its end)
            if said:
                run.kinds["assistant"] += said
            return last
        text = texts[position]
        if text:
            previous = _classify(run, base + position, text, previous, limits)
        elif not run.message_open:
            previous = ""  # as `_classify` takes an empty line outside a reply (inside a message of aider's: skipped)
        position += 1
    return previous


def _classify(run: _Run, index: int, text: str, previous: str, limits: Limits) -> str:
    """Take line `index` (`text`) into `run`; returns its kind ("" for a blank line) for the next line's decision."""
    if not text or text.isspace():  # blank (`text.strip()` would copy every line to ask this)
        if run.message_open:
            return previous  # a blank line inside a message of aider's of several lines
        if run.reply and not run.reasoning:
            run.reply.append("")  # a blank line inside a reply stays in it (trailing ones are cut at its end)
        return ""
    hard = text.endswith(t.HARD_BREAK)
    body = text[: -len(t.HARD_BREAK)] if hard else text
    if text.startswith(t.PROMPT) and hard:
        run.reasoning = False  # aider's own line ends a reply whose reasoning never closed (an interrupted reply)
        if run.reply:
            _close_reply(run, limits)
        if previous != "prompt":
            if run.prompt:
                _close_prompt(run, limits)
            run.prompt_at = index
        run.prompt.append(body[len(t.PROMPT) + 1 :] if body.startswith(t.PROMPT + " ") else body[len(t.PROMPT) :])
        return "prompt"
    if run.prompt:
        _close_prompt(run, limits)
    run.command_args = None
    if run.message_open and not (text.startswith(t.QUOTE) and hard):
        # The rest of a message of aider's of several lines: `tool_output` prefixes only its first line with `>` and
        # ends only its last with the hard break, blank lines and all (Simple-Calulator l.1072-1133: `> # 1
        # SEARCH/REPLACE block failed to match!`, a blank line, `## SearchReplaceNoExactMatch: …`); a usage report's
        # `Cost:` line when it has both cache figures.
        run.kinds["tool_output"] += 1
        run.message_open = not hard
        if run.pending_usage is not None:
            _add_cost(run, body)
        return previous
    run.message_open = False
    in_reply = bool(run.reply) or run.reasoning
    # In a reply, a `>` line without the hard break is the model's quote, except the usage report, whose first line
    # has none when it goes on to a `Cost:` line (docs/agents/aider.md "Lines").
    if text.startswith(t.QUOTE) and (hard or not in_reply or text.startswith(t.TOKENS_START)):
        run.reasoning = False
        if run.reply:
            _close_reply(run, limits)
        run.message_open = not hard
        return _aider_line(run, index, body)
    if run.reasoning:
        run.kinds["reasoning"] += 1
        run.reasoning = not t.REASONING_CLOSE.match(text)
        return "reasoning"
    if previous in AIDER_LINES and not in_reply:
        # An unprefixed line right after a whole line of aider's, with no blank line between: a reply always follows
        # a blank line (`ai_output` writes one first), so this is more of aider's output.
        run.kinds["tool_output"] += 1
        return previous
    if text.startswith(t.MARKER) and not in_reply:
        run.kinds[t.UNKNOWN_KIND] += 1
        return t.UNKNOWN_KIND
    if text.startswith("<") and t.REASONING_OPEN.match(text):
        run.kinds["reasoning"] += 1
        run.reasoning = True
        return "reasoning"
    if not run.reply:
        run.reply_at = index
    run.reply.append(text)
    run.kinds["assistant"] += 1
    return "assistant"


def _aider_line(run: _Run, index: int, body: str) -> str:
    """A `> …` line: the banner, a usage report, or other output of aider's."""
    run.pending_usage = None
    if not body.startswith(t.AIDER_LINE_STARTS):  # none of the patterns below can match: most of aider's lines
        run.kinds["tool_output"] += 1
        return "tool_output"
    if body.startswith(t.TOKENS_START):  # (none of VERSION, MODEL, WORKING_DIR matches it)
        run.kinds["tokens"] += 1
        _add_usage(run, index, body)
        return "tokens"
    if version := t.VERSION.match(body):
        run.versions.append(version.group(1))
        run.kinds["banner"] += 1
        return "banner"
    if model := t.MODEL.match(body):
        run.models.append(model.group(2))
        if model.group(1) in t.CHAT_MODELS:
            run.model = model.group(2)
        run.kinds["banner"] += 1
        return "banner"
    if cwd := t.WORKING_DIR.match(body):
        if cwd.group(1) == "Cur" or run.cwd is None:
            run.cwd = cwd.group(2)
        run.kinds["working_dir"] += 1
        return "working_dir"
    run.kinds["tool_output"] += 1
    return "tool_output"


def _count(figure: str, scale: str) -> int:
    """`2.3k` -> 2300, `12,450` -> 12450, `1.5M` -> 1500000: aider rounds to one decimal of a thousand."""
    value = float(figure.replace(",", ""))
    return round(value * _SCALES[scale])


def _add_usage(run: _Run, index: int, body: str) -> None:
    """One reply's usage from its report (docs/agents/aider.md "Tokens"): the message's figures and cost, never the
    session's running total."""
    cost = _cost(body)
    turn_index = run.last_reply if run.last_reply is not None else index
    usual = t.USUAL_TOKENS.match(body)
    rest = body[usual.end() :] if usual else ""
    if usual and "sent" not in rest and "received" not in rest and "cache" not in rest:
        try:  # the two figures TOKEN_FIGURE would find, and no cache figures
            usual_sent, usual_received = _count(usual[1], usual[2]), _count(usual[3], usual[4])
        except ValueError:
            pass  # a figure that is none: as below
        else:
            run.usage.append(Usage(turn_index, run.model, max(0, usual_sent), usual_received, None, None, None, cost))
            run.pending_usage = None if cost is not None else len(run.usage) - 1
            return
    figures: dict[str, int] = {}
    for figure, scale, what in t.TOKEN_FIGURE.findall(body):
        try:
            figures[what] = _count(figure, scale)
        except ValueError:
            continue  # `1.2.3k`: not a figure aider writes; that figure stays unknown
    # `sent` is litellm's prompt_tokens, which holds the cached parts too: the prompt not read from cache is what is
    # left (never below 0: the figures are rounded).
    sent = figures.get("sent")
    cached = figures.get("cache hit", 0) + figures.get("cache write", 0)
    run.usage.append(
        Usage(  # turn_index, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning, cost
            turn_index,
            run.model,
            None if sent is None else max(0, sent - cached),
            figures.get("received"),
            figures.get("cache hit"),
            figures.get("cache write"),
            None,
            cost,
        )
    )
    run.pending_usage = None if cost is not None else len(run.usage) - 1


def _cost(text: str) -> float | None:
    match = t.MESSAGE_COST.search(text)
    if match is None:
        return None
    try:
        return float(match.group(1).replace(",", ""))
    except ValueError:
        return None


def _add_cost(run: _Run, body: str) -> None:
    cost = _cost(body)
    if cost is not None and run.pending_usage is not None:
        run.usage[run.pending_usage] = replace(run.usage[run.pending_usage], cost_usd=cost)
        run.pending_usage = None


def _close_prompt(run: _Run, limits: Limits) -> None:
    """End the open `####` block: a person's turn, a command, or aider's echo of a question."""
    if not run.prompt:
        return
    lines, at = run.prompt, run.prompt_at
    run.prompt, run.prompt_at = [], -1
    _typed(run, lines, at, limits)


def _typed(run: _Run, lines: list[str], at: int, limits: Limits) -> None:
    """The person's `####` lines `lines` (the first at line `at`): a person's turn, a command, or aider's echo."""
    run.last_reply = None
    text = "\n".join(lines).strip()
    if len(lines) == 1 and t.CONFIRM_START in lines[0] and t.CONFIRM.search(lines[0]):
        run.kinds["confirm_answer"] += len(lines)
        return
    if text == t.BLANK_INPUT or not text:
        run.kinds["blank_input"] += len(lines)
        return
    if run.command_args is not None and _same_text(text, run.command_args):
        # `/code X`, `/ask X`, `/architect X` run X as the next message, and aider logs it again as `####` lines
        # (Simple-Calulator .aider.chat.history.md l.69 `#### /code i want…`, l.71 `#### i want…`): typed once.
        run.kinds["command_message"] += len(lines)
        return
    if run.last_answer is not None and text[0] == run.last_answer_first and _same_text(text, run.last_answer):
        # In architect mode the architect's reply is handed to the editor model as its input, and aider logs that
        # input as `####` lines (luvatrix .aider.chat.history.md l.485: the reply of l.276 again): not the person's.
        run.kinds["architect_handoff"] += len(lines)
        return
    command = text.startswith(t.COMMAND_PREFIXES)
    run.kinds["command" if command else "prompt"] += len(lines)
    run.turns.append(Turn(at, Role.USER, clip(text, limits)))
    run.last_answer = None  # a hand-off comes before the person's next words
    if command:
        _, _, args = text.partition(" ")
        run.command_args = args.strip() or None


def _close_reply(run: _Run, limits: Limits) -> None:
    """End the open reply: one assistant turn (its reasoning already left out)."""
    if run.reply:
        _end_reply(run, "\n".join(run.reply).strip("\n"), limits)
        run.reply = []


def _end_reply(run: _Run, text: str, limits: Limits) -> None:
    """The reply's text (`text`, without the blank lines around it) as one assistant turn, unless it is blank."""
    at = run.reply_at
    run.reply_at = -1
    first = _NON_BLANK.search(text)
    if first is not None:
        run.turns.append(Turn(at, Role.ASSISTANT, clip(text, limits), None, run.model))
        run.last_reply = at
        run.last_answer = text
        run.last_answer_first = text[first.start()]


def _same_text(a: str, b: str) -> bool:
    """Equal but for the spaces at line ends (aider's hard breaks, and what `user_input` strips)."""
    a, b = a.strip(), b.strip()
    if a[:1] != b[:1]:  # the first lines differ from their first character: most prompts against the last reply
        return False
    return [line.rstrip() for line in a.splitlines()] == [line.rstrip() for line in b.splitlines()]
