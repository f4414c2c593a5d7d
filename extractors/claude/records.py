"""What a Claude Code file's path says about it, and the small per-line entries the parse keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from extractors.bounded.numbers import fit_int, integral
from extractors.bounded.twopass import LineRef
from extractors.claude import tables
from extractors.model import Disposition


@dataclass(frozen=True, slots=True)
class Layout:
    """What a file's place on disk says about it (read from the path alone)."""

    stem: str
    agent_id: str | None = None  # set for a subagent file: the part of the stem after `agent-`
    parent_native: str | None = None  # the `<sessionId>` folder of `<sessionId>/subagents/agent-<id>.jsonl`

    @property
    def is_subagent(self) -> bool:
        return self.agent_id is not None


def layout_of(path: Path) -> Layout:
    """The layout of a session file: main `<sessionId>.jsonl`, nested or flat `agent-<agentId>.jsonl`."""
    stem = path.name.removesuffix(".jsonl")
    if not stem.startswith(tables.AGENT_FILE_PREFIX):
        return Layout(stem)
    agent_id = stem.removeprefix(tables.AGENT_FILE_PREFIX)
    if path.parent.name == tables.SUBAGENT_DIR:
        return Layout(stem, agent_id, path.parent.parent.name)
    return Layout(stem, agent_id)


@dataclass(frozen=True, slots=True)
class Ref(LineRef):
    """Where a payload text is in the file, kept instead of the text by the first pass over a big session.

    The second pass (`extractors.claude.stream`) reads the physical line at `offset` again (`size` bytes, which
    must still have CRC-32 `crc`), parses record `part` of it as the first pass did, and takes the text from the
    `slot` (`text`: the part's texts, `input`: its tool uses, `output`: the entry's results) at `position`.
    """

    slot: str
    position: int


Text = str | Ref  # a payload as the parse keeps it: the text, or (first pass of a big session) where it is


@dataclass(frozen=True, slots=True)
class Use:
    call_id: str
    name: str
    input: Text | None


@dataclass(frozen=True, slots=True)
class Result:
    tool_use_id: str
    output: Text | None
    is_error: bool


@dataclass(frozen=True, slots=True)
class Part:
    """One assistant line: a part of one API response."""

    key: tuple[str, str]
    message_id: str | None
    model: str | None
    texts: tuple[Text, ...]
    usage: dict[str, Any] | None
    uses: tuple[Use, ...]


@dataclass(frozen=True, slots=True)
class QueueOp:
    """One `queue-operation` record: what it did, and for an enqueue the text as the user-line rules read it."""

    operation: str
    content: str | None  # the text of `content` (an enqueue's prompt; some removes and popAlls name theirs)
    reason: str | None  # `reason` of a remove (`absorbed_mid_turn`, ...), when given
    prompt: str | None = None  # the `content` when it is a person's text (harness rules applied), else None
    kind: str = ""  # the `content`'s user-line census kind (`user`, `user/command`, `user/task-notification`, ...)


@dataclass(slots=True)
class Entry:
    """What one line contributes, kept until the session's own id is known."""

    index: int
    rtype: str
    kind: str
    version: str
    disposition: Disposition
    sid: str | None
    sidechain: bool
    timestamp: datetime | None
    cwd: str | None = None
    branch: str | None = None
    uuid: str | None = None
    prompt: str | None = None  # a person's turn (prompt or slash command)
    attachments: tuple[str, ...] = ()
    part: Part | None = None
    results: tuple[Result, ...] = ()
    spawn: tuple[str, str] | None = None  # (tool_use_id, agentId) of a subagent spawn
    title: tuple[str, str, str | None] | None = None  # (source kind, title, leafUuid)
    queue: QueueOp | None = None  # set for a `queue-operation` record
    delivered: str | None = None  # the prompt text of a `queued_command` attachment


@dataclass(slots=True)
class Plan:
    """What the second pass over a big session reads again: the payloads assembly met as `Ref`s.

    `texts`: the parts of an assistant turn (by turn index), joined as one pass joins them; `inputs` / `outputs`:
    a tool call's input and output (by call id). The Session assembled with a plan has "" / None in those places.
    """

    texts: dict[int, tuple[Text, ...]] = field(default_factory=dict)
    inputs: dict[str, Ref] = field(default_factory=dict)
    outputs: dict[str, Ref] = field(default_factory=dict)


def text_value(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def int_value(value: Any) -> tuple[int | None, bool]:
    """A token count: (an int, or the whole-valued float a literal past 64 bits is parsed as (`numbers.integral`),
    False); (None, False) for anything else; (None, True) for NaN, an infinity or a count past int64, which the
    caller counts in the census as out of range (`extractors.bounded.numbers`)."""
    number, out_of_range = integral(value)
    return (None, True) if out_of_range else fit_int(number)
