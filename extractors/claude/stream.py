"""A big Claude Code session in two passes, so that memory follows the limits and not the size of the session.

Pass 1 parses every line as one pass does, but keeps assistant texts, tool inputs and tool outputs as `Ref`s (where
the line is, and its CRC-32) instead of text; prompts stay text (the queue and doubled-command rules compare them).
Assembly then decides everything on those entries, unchanged: the session's id, copied records, which lines make
one response, which results meet which calls, turn order, title, census. Pass 2 walks the decided turns and then
the tool calls in order, reads each referenced line again (seek, read, the same parse for that one line), and
yields them in parts of at most `Limits.stream_part_bytes` of text, which the batch normalises and stages one by
one. The file must be the same in pass 2: its size and mtime, and the bytes of every line read again; otherwise
the source is deferred (`changed_during_read`) as a one-pass read of a file in motion is.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from extractors.bounded import Limits, Line, check_source_size, iter_jsonl, parse_json_values
from extractors.claude.parse import Parser
from extractors.claude.records import Entry, Layout, Plan, Ref, Text, layout_of
from extractors.errors import DeferCode, DeferError
from extractors.model import Session, Source, Streamed, ToolCall, Turn

ROW_BYTES = 512  # what a row costs besides its text, as `flows.batch` counts a session's size


def read_in_two_passes(source: Source, limits: Limits) -> Streamed:
    """Pass 1 over the file now; pass 2 when the parts are iterated. Raises what a one-pass read raises."""
    layout = layout_of(Path(source.path))
    before = check_source_size(source.path, limits)
    parser = Parser(layout, limits, lazy=True)
    for line in iter_jsonl(source.path, limits, checksums=True):
        parser.feed(line)
    plan = Plan()
    session = parser.finish(plan)
    del parser  # the entries: what pass 2 needs is in the session and the plan
    fingerprint = (before.st_size, before.st_mtime_ns)
    head = replace(session, turns=(), tool_calls=())
    return Streamed(source, head, _parts(source.path, fingerprint, layout, limits, session, plan))


def _parts(
    path: str, fingerprint: tuple[int, int], layout: Layout, limits: Limits, session: Session, plan: Plan
) -> Iterator[Session]:
    """The session's turns, then its tool calls, with their texts read again, in parts bounded by bytes."""
    with _Reread(path, fingerprint, layout, limits) as reread:
        turns: list[Turn] = []
        calls: list[ToolCall] = []
        held = 0
        for turn in session.turns:
            texts = plan.texts.get(turn.index)
            if texts is not None:
                turn = replace(turn, text="\n\n".join(reread.text(text) for text in texts))
            turns.append(turn)
            held += len(turn.text) + ROW_BYTES
            if held >= limits.stream_part_bytes:
                yield replace(session, turns=tuple(turns), tool_calls=())
                turns, held = [], 0
        for call in session.tool_calls:
            tool_input, output = plan.inputs.get(call.call_id), plan.outputs.get(call.call_id)
            if tool_input is not None or output is not None:
                call = replace(
                    call,
                    input=call.input if tool_input is None else reread.text(tool_input),
                    output=call.output if output is None else reread.text(output),
                )
            calls.append(call)
            held += len(call.input or "") + len(call.output or "") + ROW_BYTES
            if held >= limits.stream_part_bytes:
                yield replace(session, turns=tuple(turns), tool_calls=tuple(calls))
                turns, calls, held = [], [], 0
        if turns or calls:
            yield replace(session, turns=tuple(turns), tool_calls=tuple(calls))
        reread.check_unchanged("after the second pass")


@dataclass(slots=True)
class _Reread:
    """The file open again for pass 2: each referenced line read, checked against pass 1 and parsed again."""

    path: str
    fingerprint: tuple[int, int]
    layout: Layout
    limits: Limits
    handle: BinaryIO | None = None
    cached: tuple[tuple[int, int], Entry] | None = None  # the last line parsed: its texts often come in a row

    def __enter__(self) -> _Reread:
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
        st = os.fstat(self.handle.fileno())
        if (st.st_size, st.st_mtime_ns) != self.fingerprint:
            raise DeferError(DeferCode.CHANGED_DURING_READ, f"file changed {when}")

    def text(self, value: Text) -> str:
        """The text a `Ref` stands for, as one pass would have kept it. Raises DeferError(changed_during_read)."""
        if isinstance(value, str):
            return value
        entry = self._entry(value)
        found: Text | None
        if value.slot == "text":
            found = entry.part.texts[value.position] if entry.part else None
        elif value.slot == "input":
            found = entry.part.uses[value.position].input if entry.part else None
        else:
            found = entry.results[value.position].output
        if not isinstance(found, str):
            raise ValueError(f"line {value.line} has no {value.slot} {value.position} in pass 2")  # a bug
        return found

    def _entry(self, ref: Ref) -> Entry:
        key = (ref.offset, ref.part)
        if self.cached is not None and self.cached[0] == key:
            return self.cached[1]
        assert self.handle is not None
        self.handle.seek(ref.offset)
        raw = self.handle.read(ref.size)
        if len(raw) != ref.size or zlib.crc32(raw) != ref.crc:
            raise DeferError(DeferCode.CHANGED_DURING_READ, f"line {ref.line} changed between the two passes")
        values = parse_json_values(raw, line=ref.line, offset=ref.offset)
        parser = Parser(self.layout, self.limits)
        parser.feed(Line(ref.index, ref.offset, values[ref.part], ref.line, ref.part, ref.parts, ref.size, ref.crc))
        entry = parser.entries[-1]
        self.cached = (key, entry)
        return entry
