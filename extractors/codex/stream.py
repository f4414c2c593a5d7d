"""A big Codex rollout in two passes, so that memory follows the limits and not the size of the session.

Pass 1 parses every line as one pass does (`parse_rollout` with a `Plan`) and takes every decision there: identity,
the replay gate, rollbacks, which stream of turns is kept, usage, which output meets which call, `is_error`, the
census. Only texts longer than `parse.INLINE_CHARS` are left out of the session, each noted as a `Ref` to its line.
Pass 2 (`extractors.bounded.twopass`) reads those lines again and makes each text anew with the function that made it in
pass 1, yielding the turns and then the tool calls in parts the batch stages one by one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from extractors.bounded import Limits, Line, check_source_size, iter_jsonl
from extractors.bounded.twopass import Reread, fingerprint, session_parts
from extractors.codex.parse import Plan, Ref, parse_rollout, turn_text
from extractors.codex.tools import input_text, output_text
from extractors.model import Session, Source, Streamed, ToolCall, Turn


def read_in_two_passes(source: Source, limits: Limits, *, archived: bool) -> Streamed:
    """Pass 1 over the rollout now; pass 2 when the parts are iterated. Raises what a one-pass read raises."""
    before = fingerprint(check_source_size(source.path, limits))
    plan = Plan()
    session = parse_rollout(iter_jsonl(source.path, limits, checksums=True), limits, archived=archived, plan=plan)
    head = replace(session, turns=(), tool_calls=())
    return Streamed(source, head, _parts(source.path, before, limits, session, plan))


def _record(line: Line) -> dict[str, Any]:
    return line.record


def _parts(path: str, before: tuple[int, int], limits: Limits, session: Session, plan: Plan) -> Iterator[Session]:
    def payload(ref: Ref) -> dict[str, Any]:
        record = reread.at(ref)
        found = record.get("payload") if ref.enveloped else record
        if not isinstance(found, dict):
            raise ValueError(f"line {ref.line} has no payload in pass 2")  # a bug: pass 1 read one there
        return found

    def turn(short: Turn) -> Turn:
        ref = plan.texts.get(short.index)
        return short if ref is None else replace(short, text=turn_text(ref, payload(ref), limits))

    def call(short: ToolCall) -> ToolCall:
        tool_input, output = plan.inputs.get(short.call_id), plan.outputs.get(short.call_id)
        if tool_input is not None:
            short = replace(short, input=input_text(payload(tool_input), tool_input.producer, limits))
        if output is not None:
            short = replace(short, output=output_text(payload(output), limits)[0])
        return short

    with Reread(path, before, _record) as reread:
        yield from session_parts(session, limits, turn, call)
        reread.check_unchanged("after the second pass")
