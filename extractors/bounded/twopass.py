"""The second pass over a big session's file, for the readers that read one in two passes.

Pass 1 (the reader's own) parses every line as one pass does but keeps the large texts as references to their
line (`LineRef`: the record's place, the line's size and CRC-32) and decides everything else. Pass 2 (`Reread`)
reads each referenced line again, checks that its bytes are those pass 1 read, and parses it again; `session_parts`
yields the session's turns and then its tool calls with their texts filled in, in parts of at most
`Limits.stream_part_bytes`, which the batch normalises and stages one by one. A file that changed between the passes
(its size or mtime, or the bytes of a line read again) is deferred (`changed_during_read`), as a one-pass read of a
file in motion is.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import TracebackType
from typing import BinaryIO, Generic, TypeVar

from extractors.bounded import Limits, Line, parse_json_values
from extractors.errors import DeferCode, DeferError
from extractors.model import Session, ToolCall, Turn

ROW_BYTES = 512  # what a row costs besides its text, as `flows.etl.batch` counts a session's size

E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class LineRef:
    """Where a record is in the file: its `Line`'s place, and the size and CRC-32 of its physical line. A reader's
    reference to a text it left for the second pass adds what it needs to make the text again."""

    index: int
    line: int
    offset: int
    size: int
    crc: int
    part: int
    parts: int


def line_fields(line: Line) -> tuple[int, int, int, int, int, int, int]:
    """The `LineRef` fields of `line`, which must have been read with checksums."""
    if line.crc is None:
        raise ValueError("a two-pass parse needs lines read with checksums")  # a bug of the caller
    return line.index, line.line, line.offset, line.size, line.crc, line.part, line.parts


def fingerprint(st: os.stat_result) -> tuple[int, int]:
    """What must not move between the passes: the file's size and mtime."""
    return st.st_size, st.st_mtime_ns


class Reread(Generic[E]):
    """The file open again for pass 2: each referenced record read, checked against pass 1, parsed and `decode`d
    again (the last one is kept: a record's texts are often asked for in a row)."""

    def __init__(self, path: str, before: tuple[int, int], decode: Callable[[Line], E]) -> None:
        self.path = path
        self.before = before
        self.decode = decode
        self.handle: BinaryIO | None = None
        self.cached: tuple[tuple[int, int], E] | None = None

    def __enter__(self) -> Reread[E]:
        try:
            self.handle = open(self.path, "rb")
        except OSError as exc:
            raise DeferError(
                DeferCode.CHANGED_DURING_READ, f"cannot open again for the second pass: {exc.strerror}"
            ) from exc
        self.check_unchanged("between the two passes")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self.handle is not None:
            self.handle.close()

    def check_unchanged(self, when: str) -> None:
        """Raises DeferError(changed_during_read) when the file's size or mtime moved since pass 1 began."""
        assert self.handle is not None
        if fingerprint(os.fstat(self.handle.fileno())) != self.before:
            raise DeferError(DeferCode.CHANGED_DURING_READ, f"file changed {when}")

    def at(self, where: LineRef) -> E:
        """The record at `where`, decoded. Raises DeferError(changed_during_read) when its line's bytes changed."""
        key = (where.offset, where.part)
        if self.cached is not None and self.cached[0] == key:
            return self.cached[1]
        assert self.handle is not None
        self.handle.seek(where.offset)
        raw = self.handle.read(where.size)
        if len(raw) != where.size or zlib.crc32(raw) != where.crc:
            # `line` is 0-based; a person reads the line an editor shows.
            raise DeferError(DeferCode.CHANGED_DURING_READ, f"line {where.line + 1} changed between the two passes")
        values = parse_json_values(raw, line=where.line, offset=where.offset)
        record = values[where.part]
        line = Line(where.index, where.offset, record, where.line, where.part, where.parts, where.size, where.crc)
        decoded = self.decode(line)
        self.cached = (key, decoded)
        return decoded


def session_parts(
    session: Session, limits: Limits, turn: Callable[[Turn], Turn], call: Callable[[ToolCall], ToolCall]
) -> Iterator[Session]:
    """`session`'s turns, then its tool calls, each completed by `turn` / `call` (pass 2), in parts bounded by
    `limits.stream_part_bytes` of text."""
    turns: list[Turn] = []
    calls: list[ToolCall] = []
    held = 0
    for short in session.turns:
        full = turn(short)
        turns.append(full)
        held += len(full.text) + ROW_BYTES
        if held >= limits.stream_part_bytes:
            yield replace(session, turns=tuple(turns), tool_calls=())
            turns, held = [], 0
    for short_call in session.tool_calls:
        full_call = call(short_call)
        calls.append(full_call)
        held += len(full_call.input or "") + len(full_call.output or "") + ROW_BYTES
        if held >= limits.stream_part_bytes:
            yield replace(session, turns=tuple(turns), tool_calls=tuple(calls))
            turns, calls, held = [], [], 0
    if turns or calls:
        yield replace(session, turns=tuple(turns), tool_calls=tuple(calls))
