"""Assembling one Claude Code `Session` from the entries of its file, once the whole file has been read.

Here the session's own id is decided, records copied from other sessions and sidechain records are set aside
(counted, never turns), the lines of one API response become one turn with its usage counted once, and tool calls
meet their results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from extractors import ids
from extractors.bounded import GLUED_LINE_KIND
from extractors.bounded.numbers import OUT_OF_RANGE
from extractors.claude import tables
from extractors.claude.records import Entry, Layout, Part, Plan, Ref, Result, Text, int_value
from extractors.claude.repeats import merge_doubled_commands, resolve_queue
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Disposition, LinkKind, Role, Session, SessionLink, ToolCall, Turn, Usage

AGENT = Agent("claude")  # SPEC.name: the package imports this module before it declares SPEC


@dataclass(frozen=True, slots=True)
class _Identity:
    session_id: str
    native_id: str
    own_sid: str | None  # records with another sessionId are copies (main files only)
    parent_session_id: str | None
    link: SessionLink | None


def _distinct(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _identity(entries: list[Entry], layout: Layout, record_agent_id: str | None) -> _Identity:
    """Raises RejectError(missing_session_id | inconsistent_source)."""
    sids = _distinct([e.sid for e in entries if e.sid is not None])
    if layout.is_subagent:
        # Nested layout: the `<sessionId>` folder is the parent (the real SPOTTER subagent lines carry the same
        # id; a hand-written AS fixture carries "agent-<id>" instead, so the folder is the authority).
        parent = layout.parent_native
        if parent is None:
            if not sids:
                raise RejectError(RejectCode.MISSING_SESSION_ID, "no sessionId names the parent session")
            if len(sids) > 1:
                raise RejectError(
                    RejectCode.INCONSISTENT_SOURCE, f"subagent file names {len(sids)} parent sessions: {sids[:3]}"
                )
            parent = sids[0]
        agent_id = record_agent_id or layout.agent_id or ""
        parent_id = ids.session_id(AGENT, parent)
        compaction = agent_id.startswith(tables.COMPACTION_AGENT_PREFIX)
        kind = LinkKind.COMPACTION if compaction else LinkKind.SUBAGENT
        return _Identity(
            ids.subagent_session_id(parent_id, agent_id), agent_id, None, parent_id, SessionLink(parent_id, kind)
        )
    if layout.stem in sids:
        own = layout.stem
    elif len(sids) == 1:
        own = sids[0]
    elif not sids:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "no record carries a sessionId")
    else:
        second = next(e for e in entries if e.sid == sids[1])
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE,
            f"{len(sids)} session ids and none is the file name: {sids[:3]}",
            line=second.index,
        )
    return _Identity(ids.session_id(AGENT, own), own, own, None, None)


@dataclass(slots=True)
class _Response:
    index: int
    timestamp: datetime | None
    message_id: str | None
    model: str | None = None
    texts: list[Text] = field(default_factory=list)
    usage: dict[str, object] | None = None


@dataclass(slots=True)
class _Call:
    call_id: str
    turn_index: int
    name: str
    input: Text | None
    started_at: datetime | None
    result: Result | None = None
    ended_at: datetime | None = None
    spawned: str | None = None


def assemble(
    entries: list[Entry], layout: Layout, record_agent_id: str | None, glued_lines: int = 0, plan: Plan | None = None
) -> Session:
    """The Session of one file's entries (`glued_lines`: lines that held several records). Raises
    RejectError(missing_session_id | inconsistent_source | missing_timestamp).

    Entries whose payloads are `Ref`s (the first pass over a big session) need a `plan`: every decision is taken
    as for texts, and the plan notes which payloads each turn and tool call is made of (left "" / None here)."""
    who = _identity(entries, layout, record_agent_id)
    census: Counter[tuple[str, str, Disposition]] = Counter()
    foreign: list[str] = []
    own: list[Entry] = []
    for entry in entries:
        if who.own_sid is not None and entry.sid is not None and entry.sid != who.own_sid:
            # A resumed / forked session starts with copies of the other session's records: not this one's turns.
            census[(f"copied/{entry.rtype}", entry.version, Disposition.SKIPPED)] += 1
            foreign.append(entry.sid)
        elif who.own_sid is not None and entry.sidechain:
            # A sidechain line in a main file is a subagent's (older layout), never this session's turn.
            census[(f"sidechain/{entry.rtype}", entry.version, Disposition.SKIPPED)] += 1
            own.append(_metadata_only(entry))
        else:
            own.append(entry)
    if glued_lines:
        census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] += glued_lines
    # One action written twice is one turn: first a command's second record, then queued prompts (which may be
    # the same turn as a later command or user line).
    merge_doubled_commands(own)
    resolve_queue(own)

    responses: dict[_Key, _Response] = {}
    calls: dict[str, _Call] = {}
    for entry, part, key in _response_keys(own):
        _add_part(entry, part, key, responses, calls)

    turns: list[Turn] = []
    spawns: dict[str, str] = {}
    for entry in own:
        if entry.kind == "<metadata-only>":
            continue
        matched = _add_results(entry, calls)
        kind = entry.kind
        if entry.results and not matched and entry.rtype == "user":
            kind = "user/tool_result_orphan"  # a result whose tool_use is not in this file: counted, not joined
        census[(kind, entry.version, entry.disposition)] += 1
        if entry.prompt is not None:
            turns.append(Turn(entry.index, Role.USER, entry.prompt, entry.timestamp, None, entry.attachments))
        if entry.spawn is not None:
            spawns.setdefault(entry.spawn[0], entry.spawn[1])

    usage: list[Usage] = []
    for response in responses.values():
        if response.texts:
            text = _joined(response.index, response.texts, plan)
            turns.append(Turn(response.index, Role.ASSISTANT, text, response.timestamp, response.model))
        if response.usage is not None:
            usage.append(_usage(response, response.usage, census))
    for call_id, agent_id in spawns.items():
        if call_id in calls:
            calls[call_id].spawned = ids.subagent_session_id(who.session_id, agent_id)

    times = [e.timestamp for e in own if e.timestamp is not None]
    if not times:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no record has a usable timestamp")
    links = [SessionLink(ids.session_id(AGENT, sid), LinkKind.RESUME) for sid in _distinct(foreign)]
    if who.link is not None:
        links.insert(0, who.link)
    return Session(
        agent=AGENT,
        session_id=who.session_id,
        native_id=who.native_id,
        started_at=min(times),
        ended_at=max(times),
        parent_session_id=who.parent_session_id,
        cwd=next((e.cwd for e in own if e.cwd), None),
        git_branch=next((e.branch for e in own if e.branch), None),
        title=_title(entries),
        models=tuple(_distinct([r.model for r in responses.values() if r.model])),
        cli_versions=tuple(_distinct([e.version for e in own if e.version])),
        turns=tuple(sorted(turns, key=lambda t: t.index)),
        tool_calls=tuple(_tool_call(c, plan) for c in calls.values()),
        usage=tuple(sorted(usage, key=lambda u: u.turn_index)),
        links=tuple(links),
        census=census,
    )


def _metadata_only(entry: Entry) -> Entry:
    """A sidechain entry still tells the session's times, cwd and CLI version, but nothing else."""
    return Entry(
        entry.index,
        entry.rtype,
        "<metadata-only>",
        entry.version,
        entry.disposition,
        entry.sid,
        True,
        entry.timestamp,
        entry.cwd,
        entry.branch,
        entry.uuid,
    )


# A response's key: the part's (message.id, requestId) and, for lines without requestId, which contiguous run of
# that message.id it is (0 for every line that has a requestId).
_Key = tuple[tuple[str, str], int]


@dataclass(slots=True)
class _Run:
    """The open response of lines without requestId, while the file is walked in order."""

    message_id: str
    number: int
    prompt: int | None  # input + cache read + cache write tokens of its first usage snapshot
    calls: set[str] = field(default_factory=set)
    answered: bool = False  # tool results for its own calls came after its last line
    ended: bool = False  # another response, a user record or a result of another call came after it


def _prompt_tokens(usage: dict[str, object] | None) -> int | None:
    """The size of the prompt a usage snapshot reports: the same on every line of one request."""
    if usage is None:
        return None
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    parts = [int_value(usage.get(name))[0] for name in names]
    return None if all(p is None for p in parts) else sum(p or 0 for p in parts)


def _continues(run: _Run, entry: Entry, part: Part) -> bool:
    """Whether an assistant line without requestId, with the run's message.id, is a further line of that run.

    Claude Code writes one response as one line per content block with the same message.id; progress, hook,
    system, queue and summary lines can fall between them (they are not conversation and never end a response).
    With streaming tool execution (2.1.x) the result of a response's first tool_use can be written before the
    response's next tool_use line (marot/spotter test/fixtures/transcripts/subagent.jsonl lines 18-21, with
    requestIds): so results of the run's own calls end it only when what follows cannot be the same response,
    which is a line with text or thinking (in every real capture read, a response's tool_use blocks come after
    its thinking and text) or a line with another prompt size (a new request carries the results in its prompt).
    A person's turn, any other user record, another response's line or a result of a call the run did not make
    always ends it.
    """
    if run.ended:
        return False
    if not run.answered:
        return True
    prompt = _prompt_tokens(part.usage)
    only_tools = bool(part.uses) and entry.kind == "assistant/tool_use"
    return only_tools and (prompt is None or run.prompt is None or prompt == run.prompt)


def _response_keys(own: list[Entry]) -> Iterator[tuple[Entry, Part, _Key]]:
    """Each assistant line with the key of the response it belongs to, in file order.

    Lines with a requestId (and lines keyed by their place, without message.id) are one response per key,
    wherever they are in the file. Without requestId, message.id alone is not enough: a relay can answer every
    request with the same id (ccusage#1635), so a response is a contiguous run of lines with that id (`_continues`).
    """
    run: _Run | None = None
    runs: Counter[str] = Counter()
    for entry in own:
        part = entry.part
        if part is None:
            if run is not None and entry.rtype == "user" and entry.kind != "<metadata-only>":
                own_results = bool(entry.results) and all(r.tool_use_id in run.calls for r in entry.results)
                if own_results and entry.prompt is None:
                    run.answered = True
                else:
                    run.ended = True
            elif run is not None and entry.rtype == "assistant" and entry.kind != "<metadata-only>":
                run.ended = True  # a synthetic message (an API error) in between: a retry is another request
            continue
        message_id, request_id = part.key
        if part.message_id is None or request_id:
            if run is not None:
                run.ended = True
            yield entry, part, (part.key, 0)
            continue
        if run is None or run.message_id != message_id or not _continues(run, entry, part):
            if run is not None:
                run.ended = True
            run = _Run(message_id, runs[message_id], _prompt_tokens(part.usage))
            runs[message_id] += 1
        run.answered = False
        run.calls.update(use.call_id for use in part.uses)
        if run.prompt is None:
            run.prompt = _prompt_tokens(part.usage)
        yield entry, part, (part.key, run.number)


def _add_part(entry: Entry, part: Part, key: _Key, responses: dict[_Key, _Response], calls: dict[str, _Call]) -> None:
    response = responses.get(key)
    if response is None:
        response = responses[key] = _Response(entry.index, entry.timestamp, part.message_id)
    response.model = response.model or part.model
    response.texts.extend(part.texts)
    if part.usage is not None:
        # Every line of a response repeats a usage snapshot; the last one is the response's (ccusage#797).
        response.usage = part.usage
    for use in part.uses:
        if use.call_id not in calls:
            calls[use.call_id] = _Call(use.call_id, response.index, use.name, use.input, entry.timestamp)


def _add_results(entry: Entry, calls: dict[str, _Call]) -> bool:
    """Join the entry's tool results to their calls; True when at least one found its call."""
    matched = False
    for result in entry.results:
        call = calls.get(result.tool_use_id)
        if call is None:
            continue
        call.result, call.ended_at = result, entry.timestamp
        matched = True
    return matched


def _usage(response: _Response, raw: dict[str, object], census: Counter[tuple[str, str, Disposition]]) -> Usage:
    """The response's last usage snapshot; a count out of range is null and counted (`extractors.bounded.numbers`)."""

    def count(name: str) -> int | None:
        value, out_of_range = int_value(raw.get(name))
        if out_of_range:
            census[OUT_OF_RANGE] += 1
        return value

    return Usage(
        turn_index=response.index,
        model=response.model,
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_tokens=count("cache_read_input_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens"),
        timestamp=response.timestamp,
        response_id=response.message_id,
    )


def _joined(index: int, texts: list[Text], plan: Plan | None) -> str:
    """A response's text: its parts joined; with refs among them, "" here and the parts noted in the plan."""
    strings = [text for text in texts if isinstance(text, str)]
    if len(strings) == len(texts):
        return "\n\n".join(strings)
    if plan is None:
        raise ValueError("payload refs without a plan")  # a bug of the caller, never a source's fault
    plan.texts[index] = tuple(texts)
    return ""


def _resolved(call_id: str, value: Text | None, refs: dict[str, Ref] | None) -> str | None:
    if not isinstance(value, Ref):
        return value
    if refs is None:
        raise ValueError("payload refs without a plan")
    refs[call_id] = value
    return None


def _tool_call(call: _Call, plan: Plan | None) -> ToolCall:
    result = call.result
    return ToolCall(
        call_id=call.call_id,
        turn_index=call.turn_index,
        name=call.name,
        input=_resolved(call.call_id, call.input, None if plan is None else plan.inputs),
        output=_resolved(call.call_id, result.output, None if plan is None else plan.outputs) if result else None,
        is_error=result.is_error if result else None,
        started_at=call.started_at,
        ended_at=call.ended_at,
        spawned_session_id=call.spawned,
    )


def _title(entries: list[Entry]) -> str | None:
    """A `custom-title` > an `ai-title` > a `summary` whose leafUuid is a uuid of this file (the last of each)."""
    uuids = {e.uuid for e in entries if e.uuid}
    best: dict[str, str] = {}
    for entry in entries:
        if entry.title is None:
            continue
        kind, text, leaf = entry.title
        if kind == "summary" and leaf not in uuids:
            continue  # in real files summaries point into other sessions (docs/agents/claude.md "Record types")
        best[kind] = text
    return best.get("custom-title") or best.get("ai-title") or best.get("summary")
