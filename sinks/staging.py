"""One batch of sources: read (extract), normalise, and stage the rows as delta files for the commit.

A batch's memory is bounded by the batch (and the limits); what it returns to the flow is small: per-source
outcomes and which staged files it wrote.
"""

from __future__ import annotations

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
from sinks.files import write_parquet
from sinks.store import BUCKETS, FileKey, Store
from transforms.normalize import session_tables


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
    staged: dict[FileKey, Path]  # delta file of this batch per (table, agent, bucket)
    turns: int = 0


def staging_dir(store: Store, run_id: str) -> Path:
    return store.staging / run_id


def _hash(source: Source) -> str | None:
    if source.kind == "directory":
        return None
    try:
        return content_sha256(source.path)
    except OSError:
        return None  # the reader reports why it cannot be read


def stage_batch(
    store: Store,
    run_id: str,
    batch_no: int,
    sources: Sequence[Source],
    limits: Limits,
    parser_versions: Mapping[Agent, str],
    previous: Mapping[str, Previous],
) -> BatchResult:
    """Read every source of the batch and stage its sessions' rows under `data/staging/<run id>/`."""
    results: list[SourceResult] = []
    loaded: list[Loaded] = []
    for source in sources:
        result = SourceResult(source, content_sha256=_hash(source))
        prev = previous.get(source.path)
        if (
            prev is not None
            and source.kind == "file"
            and result.content_sha256 is not None
            and prev.content_sha256 == result.content_sha256
            and prev.parser_version == parser_versions[source.agent]
            and prev.outcome != "deferred"
        ):
            result.touched_only = True  # e.g. `touch`: same bytes, same parser: the rows are already right
            results.append(result)
            continue
        result.bytes_read = source.size
        for outcome in read_source(source, limits):
            if isinstance(outcome, Loaded):
                loaded.append(outcome)
                result.loaded.append((outcome.session.session_id, len(outcome.session.turns)))
            else:
                result.problems.append(outcome)
        if result.deferred:
            # A source is read whole or not at all: sessions read before it was found in motion wait too.
            loaded = [item for item in loaded if item.source is not source]
            result.loaded.clear()
            waiting: list[Rejected | Deferred] = [p for p in result.problems if isinstance(p, Deferred)]
            result.problems = waiting[:1]
        results.append(result)
    tables = session_tables(loaded, parser_versions)
    staged = _stage(store, run_id, batch_no, tables)
    return BatchResult(batch_no, results, staged, turns=tables["turns"].num_rows)


def _stage(store: Store, run_id: str, batch_no: int, tables: Mapping[str, pa.Table]) -> dict[FileKey, Path]:
    staged: dict[FileKey, Path] = {}
    base = staging_dir(store, run_id)
    for name, table in tables.items():
        if not table.num_rows:
            continue
        session_ids = table.column("session_id")
        unique = pc.unique(session_ids)
        bucket_of_unique = pa.array([ids.bucket_of(s, BUCKETS) for s in unique.to_pylist()], type=pa.int32())
        buckets = pc.take(bucket_of_unique, pc.index_in(session_ids, value_set=unique))
        agents = table.column("agent")
        for agent in pc.unique(agents).to_pylist():
            in_agent = pc.equal(agents, agent)
            for bucket in sorted(set(pc.filter(buckets, in_agent).to_pylist())):
                part = table.filter(pc.and_(in_agent, pc.equal(buckets, bucket)))
                key = FileKey(name, agent, bucket)
                path = base / name / f"agent={agent}" / f"bucket-{bucket:03d}" / f"batch-{batch_no:06d}.parquet"
                write_parquet(part, path)
                staged[key] = path
    return staged


def duplicate_problem(source: Source, session_id: str, kept_from: str) -> Rejected:
    """The outcome for a session that another source of the same run also holds, and whose copy was kept."""
    return Rejected(
        source, RejectCode.DUPLICATE, f"the same session is loaded from {kept_from}", session_hint=session_id
    )
