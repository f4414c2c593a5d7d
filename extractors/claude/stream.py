"""A big Claude Code session in two passes, so that memory follows the limits and not the size of the session.

Pass 1 parses every line as one pass does, but keeps assistant texts, tool inputs and tool outputs as `Ref`s (where
the line is, and its CRC-32) instead of text; prompts stay text (the queue and doubled-command rules compare them).
Assembly then decides everything on those entries, unchanged: the session's id, copied records, which lines make
one response, which results meet which calls, turn order, title, census. Pass 2 (`extractors.bounded.twopass`) walks the
decided turns and then the tool calls in order, reads each referenced line again (seek, read, the same parse for
that one line), and yields them in parts of at most `Limits.stream_part_bytes` of text, which the batch normalises
and stages one by one. The file must be the same in pass 2: its size and mtime, and the bytes of every line read
again; otherwise the source is deferred (`changed_during_read`) as a one-pass read of a file in motion is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from extractors.bounded import Limits, Line, check_source_size, iter_jsonl
from extractors.bounded.twopass import Reread, fingerprint, session_parts
from extractors.claude.parse import Parser
from extractors.claude.records import Entry, Layout, Plan, Text, layout_of
from extractors.model import Session, Source, Streamed, ToolCall, Turn


def read_in_two_passes(source: Source, limits: Limits) -> Streamed:
    """Pass 1 over the file now; pass 2 when the parts are iterated. Raises what a one-pass read raises."""
    layout = layout_of(Path(source.path))
    before = fingerprint(check_source_size(source.path, limits))
    parser = Parser(layout, limits, lazy=True)
    for line in iter_jsonl(source.path, limits, checksums=True):
        parser.feed(line)
    plan = Plan()
    session = parser.finish(plan)
    del parser  # the entries: what pass 2 needs is in the session and the plan
    head = replace(session, turns=(), tool_calls=())
    return Streamed(source, head, _parts(source.path, before, layout, limits, session, plan))


def _parts(
    path: str, before: tuple[int, int], layout: Layout, limits: Limits, session: Session, plan: Plan
) -> Iterator[Session]:
    """The session's turns, then its tool calls, with their texts read again, in parts bounded by bytes."""

    def entry(line: Line) -> Entry:
        parser = Parser(layout, limits)
        parser.feed(line)
        return parser.entries[-1]

    def turn(short: Turn) -> Turn:
        texts = plan.texts.get(short.index)
        return short if texts is None else replace(short, text="\n\n".join(_text(reread, t) for t in texts))

    def call(short: ToolCall) -> ToolCall:
        tool_input, output = plan.inputs.get(short.call_id), plan.outputs.get(short.call_id)
        if tool_input is None and output is None:
            return short
        return replace(
            short,
            input=short.input if tool_input is None else _text(reread, tool_input),
            output=short.output if output is None else _text(reread, output),
        )

    with Reread(path, before, entry) as reread:
        yield from session_parts(session, limits, turn, call)
        reread.check_unchanged("after the second pass")


def _text(reread: Reread[Entry], value: Text) -> str:
    """The text a `Ref` stands for, as one pass would have kept it. Raises DeferError(changed_during_read)."""
    if isinstance(value, str):
        return value
    entry = reread.at(value)
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
