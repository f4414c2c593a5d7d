"""One batch of sources through the stages: read (extractors) -> normalise (transforms) -> stage (sinks).

This is the orchestration of a batch, and the only place where the three meet: the extractors read sources and know
nothing of Arrow; the normaliser turns sessions into Arrow tables; the sinks write those tables and know no format.
A batch's memory is bounded by the batch and the limits (rows are normalised and staged every `flush_bytes` of
text); what it returns to the flow is small: per-source outcomes and where its staged rows are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from extractors.bounded import content_sha256
from extractors.errors import BENIGN_REJECT_CODES
from extractors.model import Agent, Deferred, Loaded, Rejected, Source, Streamed
from extractors.registry import problem_of, read_streaming
from flows.etl.run import Run
from sinks import failpoints
from sinks.results import BatchResult, Previous, SourceResult
from sinks.staging import SOURCE_COLUMN, stage_tables
from transforms import ids
from transforms.normalize import SessionStream, kept_turns, reject_row, session_tables

FLUSH_BYTES = 24 * 1024 * 1024  # text held before staged rows are written out: bounds a batch's memory


def _single_file(source: Source) -> bool:
    """True when the unit is one file, so that its hash covers everything the unit is made of.

    (A Grok unit is chat_history.jsonl + summary.json: its size is the sum, and only the first is hashed.)
    """
    if source.kind not in ("file", "export"):
        return False
    try:
        return os.stat(source.path).st_size == source.size
    except OSError:
        return False


def _hash(source: Source) -> str | None:
    if source.kind == "directory":
        return None
    try:
        return content_sha256(source.path)
    except OSError:
        return None  # the reader reports why it cannot be read


def _session_bytes(item: Loaded) -> int:
    ses = item.session
    size = sum(len(t.text) for t in ses.turns)
    size += sum(len(c.input or "") + len(c.output or "") for c in ses.tool_calls)
    return size + 512 * (len(ses.turns) + len(ses.tool_calls) + len(ses.usage) + len(ses.census))


def _bucket(item: Loaded, buckets: Mapping[str, int]) -> tuple[str, int]:
    agent = item.session.agent
    return agent, ids.bucket_of(item.session.session_id, buckets[agent])


def _unchanged_content(source: Source, result: SourceResult, prev: Previous | None, version: str) -> bool:
    """Only the fingerprint moved (e.g. `touch`): same bytes, same parser, not deferred: the rows are already right."""
    return (
        prev is not None
        and _single_file(source)
        and result.content_sha256 is not None
        and prev.content_sha256 == result.content_sha256
        and prev.parser_version == version
        and prev.outcome != "deferred"
    )


def problem_row(outcome: Rejected | Deferred, parser_versions: Mapping[Agent, str]) -> tuple[dict[str, object], int]:
    """The `rejects` row of an outcome, and 1 when it is a problem `status --check` alarms on (else 0)."""
    alarm = isinstance(outcome, Rejected) and outcome.code not in BENIGN_REJECT_CODES
    return reject_row(outcome, parser_versions[outcome.source.agent]), int(alarm)


def read_batch(
    run: Run,
    batch_no: int,
    sources: Sequence[Source],
    previous: Mapping[str, Previous],
    *,
    flush_bytes: int = FLUSH_BYTES,
) -> BatchResult:
    """Read every source of the batch and stage its sessions' rows under `data/staging/<run id>/`.

    Sessions are normalised and staged every `flush_bytes` of text, so a batch (or one export holding thousands of
    conversations) never holds more than that in memory. They are staged into the run's bucket layout, and the run's
    redactor turns the secrets of every stored text into markers before anything is written (raw: `Redactor(None)`).
    """
    failpoints.reach("batch")
    store, parser_versions, buckets, redactor = run.store, run.parser_versions, run.buckets, run.redactor
    batch = BatchResult(batch_no, [], {})
    pending: list[Loaded] = []
    held = 0

    def stage(tables: dict[str, pa.Table]) -> None:
        batch.flushes += 1
        for key, pieces in stage_tables(store, run.run_id, batch_no, batch.flushes, tables, buckets).items():
            batch.staged.setdefault(key, []).extend(pieces)

    def flush() -> None:
        nonlocal pending, held
        if pending:
            # In the order staging files them, by agent partition and bucket (stable: within a bucket, as read), so
            # that its rows come out grouped and need no sort there (a copy of every row).
            pending.sort(key=lambda item: _bucket(item, buckets))
            tables = session_tables(pending, parser_versions, redactor, source_column=SOURCE_COLUMN)
            batch.turns += tables["turns"].num_rows
            stage(tables)
            del tables
            pa.default_memory_pool().release_unused()  # hand freed buffers back: a long batch's RSS stays flat
        pending, held = [], 0

    def stream(item: Streamed, result: SourceResult) -> Rejected | Deferred | None:
        """Stage a streamed session part by part, its head last; a failure on the way is the source's outcome
        (the parts staged before it are dropped by the commit: their session is not among the source's loaded)."""
        rows = SessionStream(item, parser_versions, redactor, source_column=SOURCE_COLUMN)
        turns = 0
        while True:
            try:
                part = next(item.parts, None)
            except MemoryError:
                raise
            except Exception as exc:  # pass 2 of the reader runs here: the reader's boundary (not staging's)
                return problem_of(item.source, exc)
            if part is None:
                break
            tables = rows.part_tables(part)
            turns += tables["turns"].num_rows
            stage(tables)
            del tables, part
            pa.default_memory_pool().release_unused()
        stage(rows.head_tables())
        batch.turns += turns
        result.loaded.append((item.head.session_id, rows.kept_turns))
        return None

    for source in sources:
        result = SourceResult(source, content_sha256=_hash(source))
        if _unchanged_content(source, result, previous.get(source.path), parser_versions[source.agent]):
            result.touched_only = True
            batch.sources.append(result)
            continue
        result.bytes_read = source.size
        waiting: list[Deferred] = []
        for outcome in read_streaming(source, run.limits):
            if isinstance(outcome, Streamed):
                problem = stream(outcome, result)
                if problem is None:
                    continue
                outcome = problem
            if isinstance(outcome, Loaded):
                pending.append(outcome)
                held += _session_bytes(outcome)
                result.loaded.append((outcome.session.session_id, kept_turns(outcome.session)))
                if held >= flush_bytes:
                    flush()
            elif isinstance(outcome, Deferred):
                waiting.append(outcome)
            else:
                row, alarm = problem_row(outcome, parser_versions)
                result.rejects.append(row)
                result.alarms += alarm
        if waiting:
            # A source is read whole or not at all: sessions read before it was found in motion wait too (rows
            # already staged are dropped by the commit: they belong to no kept session of this source).
            pending = [item for item in pending if item.source is not source]
            result.loaded.clear()
            result.rejects = [problem_row(waiting[0], parser_versions)[0]]
            result.alarms = 0
        batch.sources.append(result)
    flush()
    return batch
