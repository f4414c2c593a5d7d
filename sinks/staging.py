"""Staging: the rows of a run's sessions, written as uncompressed Arrow IPC scratch files until the commit.

One scratch file per table and flush under `data/staging/<run id>/`, its rows grouped by (agent, bucket), one record
batch each, so that the commit reads back each bucket's rows alone. Nothing here knows a format or a reader: it receives
Arrow tables (with the staging-only `_source` column naming the source each row came from) and writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from sinks.files import write_scratch
from sinks.results import Staged
from sinks.store import FileKey, Store
from transforms import ids

# Staged rows carry the source they came from, so that the commit keeps exactly one copy of a session that two
# sources hold (and none of a source that turned out to be in motion). The column never reaches the dataset.
SOURCE_COLUMN = "_source"
_BUCKET = "_bucket"


def staging_dir(store: Store, run_id: str) -> Path:
    return store.staging / run_id


def stage_tables(
    store: Store,
    run_id: str,
    batch_no: int,
    flush_no: int,
    tables: Mapping[str, pa.Table],
    buckets: Mapping[str, int],
) -> dict[FileKey, list[Staged]]:
    """Write one scratch file per non-empty table, its rows sorted by (agent, bucket); return where each run of rows
    of one (table, agent, bucket) is. `buckets` is the bucket count of each agent partition for this run."""
    staged: dict[FileKey, list[Staged]] = {}
    base = staging_dir(store, run_id)
    for name, table in tables.items():
        if not table.num_rows:
            continue
        session_ids = table.column("session_id")
        unique = pc.unique(session_ids)
        position = pc.index_in(session_ids, value_set=unique)
        first = pc.take(table.column("agent"), pc.index_in(unique, value_set=session_ids))
        of_unique = [ids.bucket_of(s, buckets[a]) for s, a in zip(unique.to_pylist(), first.to_pylist(), strict=True)]
        table = table.append_column(_BUCKET, pc.take(pa.array(of_unique, type=pa.int32()), position))
        if not _grouped(table.column("agent"), table.column(_BUCKET)):
            # A copy of every row; none when they come grouped, as `flows.etl.batch` hands them.
            table = table.sort_by([("agent", "ascending"), (_BUCKET, "ascending")])
        path = base / f"{name}-{batch_no:06d}-{flush_no:06d}.arrow"
        agents, groups = table.column("agent").to_pylist(), table.column(_BUCKET).to_pylist()
        table = table.drop_columns([_BUCKET])
        runs: list[tuple[FileKey, int, int]] = []  # (key, first row, rows): one record batch each
        start = 0
        for i in range(1, len(groups) + 1):
            if i == len(groups) or (agents[i], groups[i]) != (agents[start], groups[start]):
                runs.append((FileKey(name, agents[start], groups[start]), start, i - start))
                start = i
        batches = [_one_batch(table.slice(at, rows)) for _, at, rows in runs]
        spans = write_scratch(batches, table.schema, path)
        for (key, _, rows), batch, (offset, size) in zip(runs, batches, spans, strict=True):
            staged.setdefault(key, []).append(Staged(str(path), offset, size, rows, batch.nbytes))
    return staged


def _grouped(agents: pa.ChunkedArray, buckets: pa.ChunkedArray) -> bool:
    """Whether rows are in (agent, bucket) order already: then sorting them (stable) would leave them as they are."""
    if len(agents) < 2:
        return True
    a, a_next = agents.slice(0, len(agents) - 1), agents.slice(1)
    b, b_next = buckets.slice(0, len(buckets) - 1), buckets.slice(1)
    in_order = pc.or_(pc.less(a, a_next), pc.and_(pc.equal(a, a_next), pc.less_equal(b, b_next)))
    return bool(pc.all(in_order).as_py())


def _one_batch(rows: pa.Table) -> pa.RecordBatch:
    """`rows` as one record batch (no copy unless they span several chunks of the sorted table)."""
    batches = rows.to_batches()
    return batches[0] if len(batches) == 1 else rows.combine_chunks().to_batches()[0]
