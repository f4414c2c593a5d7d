"""One batch of sources: read (extract), normalise, and stage the rows as delta files for the commit.

A batch's memory is bounded by the batch (and the limits); what it returns to the flow is small: per-source
outcomes and which staged files it wrote.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from extractors import ids
from extractors.bounded import Limits, content_sha256
from extractors.errors import RejectCode
from extractors.model import Agent, Deferred, Loaded, Rejected, Source
from extractors.registry import read_source
from sinks.files import write_scratch
from sinks.store import FileKey, Store
from transforms.normalize import session_tables
from transforms.redact import Redactor


@dataclass(frozen=True, slots=True)
class Previous:
    """What the manifest knew of a source before this run."""

    content_sha256: str | None
    parser_version: str
    outcome: str


@dataclass(slots=True)
class SourceResult:
    """What reading one source gave (sessions themselves are staged on disk, not held here)."""

    source: Source
    content_sha256: str | None = None
    loaded: list[tuple[str, int]] = field(default_factory=list)  # (session id, turn count)
    problems: list[Rejected | Deferred] = field(default_factory=list)
    touched_only: bool = False  # fingerprint changed, content and parser did not: nothing re-read
    bytes_read: int = 0

    @property
    def deferred(self) -> bool:
        return any(isinstance(p, Deferred) for p in self.problems)

    @property
    def rejected(self) -> int:
        return sum(1 for p in self.problems if isinstance(p, Rejected))


@dataclass(slots=True)
class BatchResult:
    batch_no: int
    sources: list[SourceResult]
    staged: dict[FileKey, list[Staged]]  # staged rows of this batch per (table, agent, bucket)
    turns: int = 0
    flushes: int = 0


def staging_dir(store: Store, run_id: str) -> Path:
    return store.staging / run_id


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


# Staged rows carry the source they came from, so that the commit keeps exactly one copy of a session that two
# sources hold (and none of a source that turned out to be in motion). The column never reaches the dataset.
SOURCE_COLUMN = "_source"
FLUSH_BYTES = 24 * 1024 * 1024  # text held before staged rows are written out: bounds a batch's memory


def _session_bytes(item: Loaded) -> int:
    ses = item.session
    size = sum(len(t.text) for t in ses.turns)
    size += sum(len(c.input or "") + len(c.output or "") for c in ses.tool_calls)
    return size + 512 * (len(ses.turns) + len(ses.tool_calls) + len(ses.usage) + len(ses.census))


def stage_batch(
    store: Store,
    run_id: str,
    batch_no: int,
    sources: Sequence[Source],
    limits: Limits,
    parser_versions: Mapping[Agent, str],
    previous: Mapping[str, Previous],
    buckets: Mapping[str, int],
    redactor: Redactor,
    *,
    flush_bytes: int = FLUSH_BYTES,
) -> BatchResult:
    """Read every source of the batch and stage its sessions' rows under `data/staging/<run id>/`.

    Sessions are normalised and written out every `flush_bytes` of text, so a batch (or one export holding
    thousands of conversations) never holds more than that in memory. `buckets` is the bucket count of each agent
    partition for this run; `redactor` replaces the secrets in every text before anything is staged.
    """
    batch = BatchResult(batch_no, [], {})
    pending: list[Loaded] = []
    held = 0
    for source in sources:
        result = SourceResult(source, content_sha256=_hash(source))
        prev = previous.get(source.path)
        if (
            prev is not None
            and _single_file(source)
            and result.content_sha256 is not None
            and prev.content_sha256 == result.content_sha256
            and prev.parser_version == parser_versions[source.agent]
            and prev.outcome != "deferred"
        ):
            result.touched_only = True  # e.g. `touch`: same bytes, same parser: the rows are already right
            batch.sources.append(result)
            continue
        result.bytes_read = source.size
        for outcome in read_source(source, limits):
            if isinstance(outcome, Loaded):
                pending.append(outcome)
                held += _session_bytes(outcome)
                result.loaded.append((outcome.session.session_id, len(outcome.session.turns)))
                if held >= flush_bytes:
                    _flush(store, run_id, batch, pending, parser_versions, buckets, redactor)
                    pending, held = [], 0
            else:
                result.problems.append(outcome)
        if result.deferred:
            # A source is read whole or not at all: sessions read before it was found in motion wait too (rows
            # already staged are dropped by the commit: they belong to no kept session of this source).
            pending = [item for item in pending if item.source is not source]
            result.loaded.clear()
            waiting: list[Rejected | Deferred] = [p for p in result.problems if isinstance(p, Deferred)]
            result.problems = waiting[:1]
        batch.sources.append(result)
    _flush(store, run_id, batch, pending, parser_versions, buckets, redactor)
    return batch


@dataclass(frozen=True, slots=True)
class Staged:
    """A run of rows of one (table, agent, bucket) inside a scratch file."""

    path: str
    offset: int
    length: int


def _flush(
    store: Store,
    run_id: str,
    batch: BatchResult,
    loaded: list[Loaded],
    parser_versions: Mapping[Agent, str],
    buckets: Mapping[str, int],
    redactor: Redactor,
) -> None:
    """Normalise `loaded` and write one scratch file per table, its rows grouped by (agent, bucket)."""
    if not loaded:
        return
    tables = session_tables(loaded, parser_versions, redactor)
    origin = {item.session.session_id: item.source.path for item in loaded}
    bucket_of = {
        item.session.session_id: ids.bucket_of(item.session.session_id, buckets[item.session.agent.value])
        for item in loaded
    }
    batch.turns += tables["turns"].num_rows
    batch.flushes += 1
    base = staging_dir(store, run_id)
    for name, table in tables.items():
        if not table.num_rows:
            continue
        session_ids = table.column("session_id")
        unique = pc.unique(session_ids)
        unique_ids = unique.to_pylist()
        position = pc.index_in(session_ids, value_set=unique)
        buckets_of_rows = pc.take(pa.array([bucket_of[s] for s in unique_ids], type=pa.int32()), position)
        table = table.append_column(SOURCE_COLUMN, pc.take(pa.array([origin[s] for s in unique_ids]), position))
        table = table.append_column(_BUCKET, buckets_of_rows)
        table = table.sort_by([("agent", "ascending"), (_BUCKET, "ascending")])
        path = base / f"{name}-{batch.batch_no:06d}-{batch.flushes:06d}.arrow"
        agents, groups = table.column("agent").to_pylist(), table.column(_BUCKET).to_pylist()
        write_scratch(table.drop_columns([_BUCKET]), path)
        start = 0
        for i in range(1, len(groups) + 1):
            if i == len(groups) or (agents[i], groups[i]) != (agents[start], groups[start]):
                key = FileKey(name, agents[start], groups[start])
                batch.staged.setdefault(key, []).append(Staged(str(path), start, i - start))
                start = i
    del tables
    pa.default_memory_pool().release_unused()  # hand freed buffers back: a long batch's RSS stays flat


_BUCKET = "_bucket"


def duplicate_problem(source: Source, session_id: str, kept_from: str) -> Rejected:
    """The outcome for a session that another source of the same run also holds, and whose copy was kept."""
    return Rejected(
        source, RejectCode.DUPLICATE, f"the same session is loaded from {kept_from}", session_hint=session_id
    )
