"""The records every extractor produces: a `Source` on disk, a complete `Session`, and the three outcomes.

Nothing here knows a source format; nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NewType, cast

from extractors.errors import DeferCode, RejectCode

# A source product: the name of its package under `extractors/`, the Parquet partition value and the name users
# type. A plain `str` at run time; the registry (`extractors.registry.parse_agent`) is what makes one from user input.
Agent = NewType("Agent", str)


class Role(StrEnum):
    USER = "user"  # a person's turn
    ASSISTANT = "assistant"  # a model's visible text


class Disposition(StrEnum):
    """What became of one source record; the census (`record_kinds`) counts records by kind and disposition."""

    TURN = "turn"  # became (part of) a user or assistant turn
    TOOL = "tool"  # a tool call or a tool result
    HARNESS = "harness"  # text the harness injected: system prompts, reminders, summaries, wrappers, reasoning
    SKIPPED = "skipped"  # well-formed bookkeeping that is not conversation (snapshots, progress, unknown kinds)
    METADATA = "metadata"  # read for session metadata (ids, cwd, model, times, titles)


class LinkKind(StrEnum):
    """How THIS session relates to the OTHER one in a `SessionLink` (`session_links`)."""

    SUBAGENT = "subagent"  # this was spawned by the other session (Task tool, sidechain, child session)
    COMPACTION = "compaction"  # this is a compaction helper run of, or a continuation after compacting, the other
    FORK = "fork"  # this was forked from the other session, which holds the shared history
    RESUME = "resume"  # this resumed the other session (and copied its records, which are not loaded again)


@dataclass(frozen=True, slots=True)
class Source:
    """One unit on disk (file, export, database, or a directory of legacy JSON), as discovery saw it.

    `size` and `mtime_ns` are the fingerprint of the unit: for a unit made of several files (Grok's
    `chat_history.jsonl` + `summary.json`, OpenCode's legacy JSON tree) they are the total size and the newest
    mtime of its files, so that a change to any of them makes the unit changed.
    """

    agent: Agent
    path: str  # absolute path of the unit (the key of the `sources` manifest)
    size: int
    mtime_ns: int
    root: str = ""  # the discovery root it was found under
    kind: str = "file"  # file | directory | database | export


@dataclass(frozen=True, slots=True)
class Turn:
    index: int  # the record's position in the source (its line for JSONL), counted before any filtering
    role: Role
    text: str
    timestamp: datetime | None = None  # None: the session start is used
    model: str | None = None
    attachments: tuple[str, ...] = ()  # references to non-text parts (images, files): pointers or digests


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str  # native id, unique within the session
    turn_index: int  # index of the model response that made the call
    name: str
    input: str | None  # JSON text (or the raw text for freeform tools)
    output: str | None = None
    is_error: bool | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    spawned_session_id: str | None = None  # the session this call started (a subagent), where the source says


# --- made fast, for the readers of many small records -----------------------------------------------------------
# A frozen dataclass's __init__ sets each field through `object.__setattr__` (it must get past the frozen
# `__setattr__`): ~0.95 us for a ToolCall, ~7x a plain class's. A reader that makes tens of thousands of turns or calls
# a run (Cursor: 46k calls, 21k turns in 50 MB) makes each with `new_turn` / `new_tool_call`: an instance of a plain
# class with the same slots, whose __init__ sets them and then makes it the frozen class's (`__class__` assignment,
# allowed between classes of the same slots: the result is a `Turn` / `ToolCall` in every way, equal, hashable,
# frozen and pickled as one made by its own __init__). Every field is given, in order; tests/test_model_fast.py
# checks that each maker sets every field of its class.


class _TurnMaker:
    __slots__ = Turn.__slots__

    def __init__(
        self,
        index: int,
        role: Role,
        text: str,
        timestamp: datetime | None,
        model: str | None,
        attachments: tuple[str, ...],
    ) -> None:
        self.index = index
        self.role = role
        self.text = text
        self.timestamp = timestamp
        self.model = model
        self.attachments = attachments
        self.__class__ = Turn  # type: ignore[assignment]


class _ToolCallMaker:
    __slots__ = ToolCall.__slots__

    def __init__(
        self,
        call_id: str,
        turn_index: int,
        name: str,
        input: str | None,
        output: str | None,
        is_error: bool | None,
        started_at: datetime | None,
        ended_at: datetime | None,
        spawned_session_id: str | None,
    ) -> None:
        self.call_id = call_id
        self.turn_index = turn_index
        self.name = name
        self.input = input
        self.output = output
        self.is_error = is_error
        self.started_at = started_at
        self.ended_at = ended_at
        self.spawned_session_id = spawned_session_id
        self.__class__ = ToolCall  # type: ignore[assignment]


# `Turn(...)` / `ToolCall(...)` with every field given, positional: the same value, made ~4x faster.
new_turn = cast(
    Callable[[int, Role, str, datetime | None, str | None, tuple[str, ...]], Turn],
    _TurnMaker,
)
new_tool_call = cast(
    Callable[
        [str, int, str, str | None, str | None, bool | None, datetime | None, datetime | None, str | None], ToolCall
    ],
    _ToolCallMaker,
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model response, counted once."""

    turn_index: int
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    timestamp: datetime | None = None
    response_id: str | None = None  # the native id of the response (Claude `message.id`, ...)


class _UsageMaker:
    __slots__ = Usage.__slots__

    def __init__(
        self,
        turn_index: int,
        model: str | None,
        input_tokens: int | None,
        output_tokens: int | None,
        cache_read_tokens: int | None,
        cache_write_tokens: int | None,
        reasoning_tokens: int | None,
        cost_usd: float | None,
        timestamp: datetime | None,
        response_id: str | None,
    ) -> None:
        self.turn_index = turn_index
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens
        self.reasoning_tokens = reasoning_tokens
        self.cost_usd = cost_usd
        self.timestamp = timestamp
        self.response_id = response_id
        self.__class__ = Usage  # type: ignore[assignment]


# `Usage(...)` with every field given, positional, made as `new_turn` is (above): the same value, ~4x faster.
new_usage = cast(
    Callable[
        [
            int,
            str | None,
            int | None,
            int | None,
            int | None,
            int | None,
            int | None,
            float | None,
            datetime | None,
            str | None,
        ],
        Usage,
    ],
    _UsageMaker,
)


@dataclass(frozen=True, slots=True)
class SessionLink:
    """This session relates to `other_session_id` by `kind` (e.g. this is a subagent of other)."""

    other_session_id: str
    kind: LinkKind
    tool_call_id: str | None = None  # the native call that spawned it, where known


@dataclass(frozen=True, slots=True)
class Session:
    """A complete session: what the two parties said, plus tool calls, usage, and the record census."""

    agent: Agent
    session_id: str  # built with `extractors.ids`
    native_id: str
    started_at: datetime  # required: a session without a usable time is rejected, never stamped with "now"
    ended_at: datetime | None = None
    parent_session_id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    # The repository as `extractors.gitremote.repository` normalises a remote (`github.com/o/r`), where the source
    # records one (Codex, Grok): never the raw URL, whose userinfo can hold a token.
    git_repository: str | None = None
    title: str | None = None
    models: tuple[str, ...] = ()
    cli_versions: tuple[str, ...] = ()
    archived: bool = False
    # True when the source writes no time for its start and `started_at` is inferred from something beside it (a
    # Cursor transcript without `<timestamp>` tags: its file's mtime, a sidecar's creation time). Say where in the
    # agent's docs page.
    started_at_inferred: bool = False
    turns: tuple[Turn, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: tuple[Usage, ...] = ()
    links: tuple[SessionLink, ...] = ()
    # (record kind, writer version or "", disposition) -> count. Every record read is counted exactly once.
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter, compare=False)

    def count(self, disposition: Disposition) -> int:
        return sum(n for (_, _, d), n in self.census.items() if d is disposition)


@dataclass(frozen=True, slots=True)
class Loaded:
    source: Source
    session: Session


@dataclass(frozen=True, slots=True)
class Rejected:
    source: Source
    code: RejectCode
    detail: str
    line: int | None = None  # 0-based record index where it was found, when it has one
    offset: int | None = None  # byte offset in the source
    session_hint: str | None = None  # the session id, when one was known (multi-session sources)


@dataclass(frozen=True, slots=True)
class Deferred:
    source: Source
    code: DeferCode
    detail: str


Outcome = Loaded | Rejected | Deferred


@dataclass(frozen=True, slots=True, eq=False)
class Streamed:
    """One session too big to hold whole, read in two passes (`extractors.bounded.twopass`).

    `head` is the complete Session except its turns and tool calls (every count, time, id, usage, link and census
    is decided already); `parts` yields Session-shaped parts holding the turns and then the tool calls, in order,
    each bounded by `Limits.stream_part_bytes`. Iterating `parts` may raise RejectError / DeferError: then nothing
    of the source is kept, as when one pass fails.
    """

    source: Source
    head: Session
    parts: Iterator[Session]
