"""The commit of a run: merge staged rows into the next Parquet version, update manifest, rejects and ledger.

Order matters for a run killed mid-way: everything is written into a new version folder that only becomes the
dataset with the final atomic swap, so a killed run changes nothing and the next run redoes its work.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sinks.files import ScratchFile
from sinks.manifest import Manifest, Plan, S, source_row, source_table
from sinks.results import BatchResult, SourceResult, Staged, agent_of
from sinks.staging import SOURCE_COLUMN
from sinks.store import FileKey, KeptRows, NextVersion, Store, source_buckets_for
from transforms import ids
from transforms.normalize import rows_table, to_table
from transforms.schema import REJECTS, RUNS, SESSION_TABLES, SOURCES, Table


@dataclass(slots=True)
class Committed:
    """What the commit changed (the warehouse applies the same change)."""

    version_number: int
    replaced: dict[str, set[str]] = field(default_factory=dict)  # agent -> session ids whose rows were replaced
    # The source paths whose `sources` and `rejects` rows this run rewrote (None: say nothing; the warehouse then
    # loads those tables whole).
    sources_changed: set[str] | None = None
    counts_by_agent: dict[str, dict[str, int]] = field(default_factory=dict)
    sessions_loaded: int = 0
    sessions_rejected: int = 0
    sources_deferred: int = 0
    new_rejections: int = 0
    turns_loaded: int = 0
    bytes_read: int = 0


def _sorted(table: Table, data: pa.Table, keep: pa.ChunkedArray | None = None) -> pa.Table:
    """`data` in the table's row order, only the rows `keep` marks when given, in one copy (the sort's `take`): a
    filter first was a second copy of every row, ~0.5 s per 165 MB of rows. Arrow's sort is stable, so the rows
    are those, and in the order, that sorting the kept rows alone gives."""
    order = pc.sort_indices(data, sort_keys=[(name, "ascending") for name in table.sort_by])
    if keep is not None:
        order = pc.filter(order, pc.take(keep, order))
    return data.take(order).combine_chunks()


def _kept_mask(delta: pa.Table, winners: Mapping[str, str]) -> pa.ChunkedArray:
    """Which staged rows are of the kept copy of their session (reads only the session and source columns)."""
    sids = pc.unique(delta.column("session_id"))
    kept_from = pa.array([winners.get(s) for s in sids.to_pylist()], type=pa.string())
    wanted = pc.take(kept_from, pc.index_in(delta.column("session_id"), value_set=sids))
    return pc.fill_null(pc.equal(delta.column(SOURCE_COLUMN), wanted), False)


# A bucket file whose rows hold more than this many bytes of strings is merged a slice of its sorted rows at a time
# (`_merge_big`), never whole: one huge session fills a bucket alone (a 2 GB Claude session is ~1.5 GB of rows),
# and sorting it whole took three copies of it. Buckets are merged on MERGE_WORKERS threads, so a whole merge must
# stay small enough for several to run at once: at 256 MB, a 700 MB Codex rollout's turns (160 MB, whole) merged
# beside its tool calls (sliced) peaked at 1.1 GB; at 64 MB, 0.67 GB. Which way a file is written depends only on
# the rows it ends up with, so the same rows give the same bytes whatever history led to them.
BIG_BUCKET_BYTES = 64 * 1024 * 1024
SLICE_BYTES = 32 * 1024 * 1024  # string bytes of the rows in one slice (a row group or more) of such a file


def _strings(data: pa.Table) -> Iterator[pa.ChunkedArray]:
    """`data`'s string columns, the staging-only source column left out (so that a row's bytes are the row's,
    wherever it comes from)."""
    for name, column in zip(data.column_names, data.columns, strict=True):
        if name != SOURCE_COLUMN and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            yield column


def _row_bytes(data: pa.Table) -> pa.Array:
    """Bytes of each row's string columns; reads the columns' offsets only, not the characters."""
    total = pa.array([0] * data.num_rows, type=pa.int64())
    for column in _strings(data):
        total = pc.add(total, pc.fill_null(pc.cast(pc.binary_length(column), pa.int64()), 0))
    return total.combine_chunks() if isinstance(total, pa.ChunkedArray) else total


def _string_bytes(data: pa.Table) -> int:
    """`_row_bytes` summed, without a figure per row."""
    return sum(pc.sum(pc.binary_length(column)).as_py() or 0 for column in _strings(data))


MERGE_WORKERS = max(2, min(4, os.cpu_count() or 2))


# Every staged file holds rows of every bucket. Opened once per bucket, that is batches x buckets x tables opens,
# which grows with the square of the corpus (1 GB: 30 x 128 x 5 = 19k opens, 15 s of a 95 s load when an open read
# an IPC file's footer, ~0.4 ms; 5 GB: ~750k). So buckets are merged in groups of consecutive ones, each staged file
# opened once per group, and all of its batches for the group, which lie together (staging files a flush's rows by
# bucket), read in one go. A group holds at most GROUP_BYTES of staged rows (they are read with it and held until it
# is merged) and GROUP_BUCKETS buckets. At 5 GB (1,024 buckets), groups of 16 buckets, their batches read one by
# one, opened files 54,000 times and read 240,000 small batches: a commit of 42-61 s, a third of it waiting for the
# GIL between the many small calls; in groups by size, 34-39 s.
GROUP_BUCKETS = 256
GROUP_BYTES = 32 * 1024 * 1024


def _read_mapped(pieces: Sequence[Staged]) -> bool:
    """Whether a bucket's staged pieces are many enough to be read where they lie, from mapped files, as far as they
    are used (`_merge_bucket`), rather than read whole with its group."""
    return sum(piece.nbytes for piece in pieces) > BIG_BUCKET_BYTES


class _Opened:
    """The staged rows of one group of buckets (`pieces`, the big buckets' left out): all of a file's pieces for the
    group read together, the file opened for that alone, the first time one is asked for; each handed out once
    (shared by the merge threads)."""

    def __init__(self, pieces: Iterable[Staged]) -> None:
        self._wanted: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for piece in pieces:
            self._wanted[piece.path].append((piece.offset, piece.size))
        self._read: dict[str, dict[int, pa.Table]] = {}
        self._locks = {path: threading.Lock() for path in self._wanted}

    def rows(self, piece: Staged) -> pa.Table:
        with self._locks[piece.path]:  # one reader per file; the merge threads read different files at once
            if piece.path not in self._read:
                self._read[piece.path] = _read_runs(piece.path, sorted(self._wanted[piece.path]))
            return self._read[piece.path].pop(piece.offset)

    def close(self) -> None:
        self._read.clear()  # the pieces no bucket took (a merge that failed)


def _read_runs(path: str, spans: list[tuple[int, int]]) -> dict[int, pa.Table]:
    """The record batches at `spans` (sorted) of a staged file, by offset: a read for each run of them that lies end
    to end; the file is closed before they are used (they are in memory of their own)."""
    opened = ScratchFile(path)
    try:
        found: dict[int, pa.Table] = {}
        for run in _runs(spans):
            found.update(zip((offset for offset, _ in run), opened.read_run(run), strict=True))
        return found
    finally:
        opened.close()


def _runs(spans: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """`spans` (sorted) in runs of spans that lie end to end."""
    run: list[tuple[int, int]] = []
    for span in spans:
        if run and run[-1][0] + run[-1][1] != span[0]:
            yield run
            run = []
        run.append(span)
    if run:
        yield run


def _merge_bucket(
    version: NextVersion,
    table: Table,
    key: FileKey,
    sids: set[str],
    deltas: Sequence[Staged],
    winners: Mapping[str, str],
    opened: _Opened,
) -> None:
    """Rewrite one bucket file: its old rows minus the replaced sessions, plus the kept staged rows."""
    old = _Old(table, version.kept_rows(key, sids))
    # One staged piece per batch: joined first (no copy) and filtered once, as per-piece Python work grew with
    # batches x buckets, the square of the corpus (5 GB: ~750k pieces, ~100 s of the commit).
    if _read_mapped(deltas):
        pieces = [_read_piece(piece, mapped=True) for piece in deltas]  # read as far as they are used
    else:
        pieces = [opened.rows(piece) for piece in deltas]
    delta: pa.Table | None = None
    mask: pa.ChunkedArray | None = None
    size = old.bytes
    every = True  # every staged row is of its session's kept copy (the usual case: no copy lost to another)
    if pieces:
        schema = pieces[0].schema
        delta = pa.concat_tables([p if p.schema.equals(schema) else p.cast(schema) for p in pieces])
        mask = _kept_mask(delta, winners)
        every = bool(pc.all(mask).as_py())
        size += _string_bytes(delta) if every else pc.sum(pc.if_else(mask, _row_bytes(delta), 0)).as_py() or 0
    if size > BIG_BUCKET_BYTES:
        _merge_big(version, table, key, old, deltas, delta, mask)
        pa.default_memory_pool().release_unused()  # the slices' buffers, before the next bucket's
        return
    if not old.found and delta is None:
        return  # no old file and nothing new for this table in this bucket
    parts = [*old.held, table.arrow_schema.empty_table()]
    keep: pa.ChunkedArray | None = None
    if delta is not None and mask is not None:
        parts.append(delta.drop_columns([SOURCE_COLUMN]))
        if not every:
            held = sum(p.num_rows for p in old.held)
            keep = pa.chunked_array([pa.repeat(True, held), *mask.chunks], type=pa.bool_())
    merged = pa.concat_tables([p.cast(table.arrow_schema) for p in parts])
    version.put(key, _sorted(table, merged, keep))


class _Old:
    """A bucket's old rows that stay, read a row group at a time: held while they are few (`held`), else only
    their sort keys (`keys`), the rows read again slice by slice (`take`). `bytes`: their string bytes."""

    def __init__(self, table: Table, kept: KeptRows | None) -> None:
        self.found = kept is not None
        self.kept = kept
        self.held: list[pa.Table] = []  # the row groups' kept rows, from the first, while they are few
        self.keys: list[pa.Table] = []  # else their sort keys
        self.bytes = 0
        if kept is None:
            return
        for rows in kept.groups():
            self.bytes += pc.sum(_row_bytes(rows)).as_py() or 0
            if self.keys or self.bytes > BIG_BUCKET_BYTES:  # too many to hold: keep their sort keys only
                held = zip(self.held, kept.starts, strict=False)  # the held groups are the first ones
                self.keys += [_keys(table, rows_of, 0, _every(rows_of), at) for rows_of, at in held]
                self.held = []
                self.keys.append(_keys(table, rows, 0, _every(rows), kept.starts[-1]))
            else:
                self.held.append(rows)

    def sort_keys(self, table: Table) -> pa.Table | None:
        """Every old row's sort keys with where it is (`_owner` 0, `_row`) and its bytes; None without rows."""
        if self.held:
            together = pa.concat_tables([p.cast(table.arrow_schema) for p in self.held])
            self.held = [together]
            return _keys(table, together, 0, _every(together))
        return pa.concat_tables(self.keys) if self.keys else None

    def take(self, indices: pa.Array) -> pa.Table:
        """The old rows at `indices` (positions in file order)."""
        if self.held:
            return self.held[0].take(indices)
        assert self.kept is not None
        return self.kept.take(indices)


def _merge_big(
    version: NextVersion,
    table: Table,
    key: FileKey,
    old: _Old,
    deltas: Sequence[Staged],
    delta: pa.Table | None,
    mask: pa.ChunkedArray | None,
) -> None:
    """`_merge_bucket` for a bucket too big to hold whole: sort the kept rows' keys only, then write the rows in
    slices of that order, each gathered from the old rows (read again a row group at a time when there are many)
    and from the staged pieces read again for it (each alone: its memory goes with the slice). In the case it is for,
    one huge session, the order follows the staged files, so a slice reads one or two of them."""
    owners: list[pa.Table] = []  # per source of rows: sort keys, which source, which row, bytes
    sources: list[Staged | None] = []
    old_keys = old.sort_keys(table)
    if old_keys is not None and old_keys.num_rows:
        sources.append(None)
        owners.append(old_keys)
    start = 0
    for piece in deltas if delta is not None and mask is not None else ():
        assert delta is not None and mask is not None
        kept = mask.slice(start, piece.length)
        rows = pc.indices_nonzero(kept)
        if len(rows):
            sources.append(piece)
            owners.append(_keys(table, delta.slice(start, piece.length), len(sources) - 1, rows))
        start += piece.length
    if not owners:
        version.put(key, table.arrow_schema.empty_table())  # nothing stays in this bucket
        return
    keys = pa.concat_tables(owners)
    ordered = keys.take(pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in table.sort_by]))
    owner, row = ordered.column("_owner").combine_chunks(), ordered.column("_row").combine_chunks()
    ends = _slice_ends(ordered.column("_bytes").to_pylist())
    del ordered, keys, owners

    def slices() -> Iterator[pa.Table]:
        cache: tuple[Staged, pa.Table] | None = None  # the staged rows read last: consecutive slices share them
        begin = 0
        for end in ends:
            owners_here, rows_here = owner.slice(begin, end - begin), row.slice(begin, end - begin)
            gathered: list[pa.Table] = []
            places: list[pa.Array] = []
            for who in pc.unique(owners_here).to_pylist():
                at = pc.indices_nonzero(pc.equal(owners_here, who))
                piece = sources[who]
                if piece is None:
                    gathered.append(old.take(pc.take(rows_here, at)).cast(table.arrow_schema))
                else:
                    if cache is None or cache[0] != piece:
                        cache = None  # let the last one go before the next is read
                        cache = (piece, _read_piece(piece))
                    rows = cache[1].drop_columns([SOURCE_COLUMN])
                    gathered.append(rows.take(pc.take(rows_here, at)).cast(table.arrow_schema))
                places.append(at)
            together = pa.concat_tables(gathered)
            order = pc.sort_indices(pa.chunked_array(places, type=pa.uint64()))
            yield together.take(order).combine_chunks()
            begin = end

    version.put_parts(key, slices(), table.arrow_schema)


def _read_piece(piece: Staged, *, mapped: bool = False) -> pa.Table:
    """One staged piece's rows, the file opened for them alone (a big bucket's pieces and slices)."""
    opened = ScratchFile(piece.path, mapped=mapped)
    try:
        return opened.read(piece.offset, piece.size)
    finally:
        opened.close()  # a mapping stays while the rows' buffers do


def _every(data: pa.Table) -> pa.Array:
    return pa.array(range(data.num_rows), pa.int64())


def _keys(table: Table, data: pa.Table, owner: int, rows: pa.Array, base: int = 0) -> pa.Table:
    """The sort keys of `data`'s rows `rows`, with where each row is (`_owner`, `_row`: `base` + its row) and its
    string bytes."""
    picked = data.select(list(table.sort_by)).take(rows)
    return (
        picked.append_column("_owner", pa.array([owner] * len(rows), pa.int32()))
        .append_column("_row", pc.add(pc.cast(rows, pa.int64()), base))
        .append_column("_bytes", pc.take(_row_bytes(data), rows))
    )


def _split_bucket(version: NextVersion, table: Table, agent: str, bucket: int, count: int) -> None:
    """Spread one bucket file of a partition over the buckets of a larger (power-of-two) count, a row group at a
    time: a bucket can hold one huge session. Each new file is written as a merge writes it (whole, or in slices
    when its rows are big), so the same rows give the same bytes."""
    key = FileKey(table.name, agent, bucket)
    kept = version.kept_rows(key, ())
    if kept is None:
        return
    targets: list[pa.Array] = []
    sizes: list[pa.Array] = []
    for rows in kept.groups():
        sids = rows.column("session_id")
        unique = pc.unique(sids)
        of_unique = pa.array([ids.bucket_of(s, count) for s in unique.to_pylist()], type=pa.int32())
        targets.append(pc.take(of_unique, pc.index_in(sids, value_set=unique)).combine_chunks())
        sizes.append(_row_bytes(rows))
    if not targets:
        return
    target = pa.concat_arrays(targets)
    size = pa.concat_arrays(sizes)
    wanted = sorted(pc.unique(target).to_pylist())
    for goal in sorted(wanted, key=lambda b: b == bucket):  # its own bucket last: its file is the one being read
        at = pc.indices_nonzero(pc.equal(target, goal))
        here = pc.take(size, at)
        if (pc.sum(here).as_py() or 0) > BIG_BUCKET_BYTES:
            spans = _slice_ends(here.to_pylist())
            parts = (
                kept.take(at.slice(begin, end - begin)).combine_chunks()
                for begin, end in zip([0, *spans], spans, strict=False)
            )
            version.put_parts(FileKey(table.name, agent, goal), parts, table.arrow_schema)
        else:
            version.put(FileKey(table.name, agent, goal), _sorted(table, kept.take(at)))
    if bucket not in wanted:
        version.put(key, table.arrow_schema.empty_table())  # none of its rows stay in this bucket


def _slice_ends(sizes: list[int]) -> list[int]:
    """Where each slice of rows of these string sizes ends: at most SLICE_BYTES of strings (or one row) each."""
    ends: list[int] = []
    held = 0
    for i, size in enumerate(sizes):
        if held and held + size > SLICE_BYTES:
            ends.append(i)
            held = 0
        held += size
    ends.append(len(sizes))
    return ends


def resize_partitions(version: NextVersion, buckets: Mapping[str, int]) -> None:
    """Give each agent partition the bucket count of this run, splitting the buckets of one that grew."""
    jobs: list[tuple[Table, str, int, int]] = []
    for agent, count in sorted(buckets.items()):
        current = version.buckets.get(agent)
        if current is not None and count > current:
            jobs += [(table, agent, b, count) for table in SESSION_TABLES for b in range(current)]
        if current is None or count > current:
            version.buckets[agent] = count
    with ThreadPoolExecutor(max_workers=MERGE_WORKERS) as pool:
        list(pool.map(lambda job: _split_bucket(version, *job), jobs))


_Job = tuple[Table, FileKey, set[str]]  # a bucket file to merge: its table, its key, the sessions it replaces


def replaced_sessions(batches: Sequence[BatchResult]) -> dict[str, set[str]]:
    """agent -> the ids of the sessions whose rows the commit of `batches` replaces: every session they loaded
    (after `resolve_duplicates` took the losing copies out). Known before the commit, so the warehouse can begin
    the same change while the commit writes (`sinks.warehouse.Begun`)."""
    replaced: dict[str, set[str]] = defaultdict(set)
    for batch in batches:
        for result in batch.sources:
            replaced[agent_of(result.source)].update(sid for sid, _ in result.loaded)
    return {agent: sids for agent, sids in replaced.items() if sids}


def changed_sources(plan: Plan[S], batches: Sequence[BatchResult]) -> set[str]:
    """The source paths whose `sources` and `rejects` rows the commit of `batches` rewrites: every source they
    read or touched, and every source the plan found deleted."""
    changed = {result.source.path for batch in batches for result in batch.sources}
    return changed | {row["source_path"] for row in plan.deleted}


def _by_bucket(replaced: Mapping[str, set[str]], buckets: Mapping[str, int]) -> dict[tuple[str, int], set[str]]:
    """(agent, bucket) -> the replaced sessions in that bucket."""
    by_bucket: dict[tuple[str, int], set[str]] = defaultdict(set)
    for agent, sids in replaced.items():
        for sid in sids:
            by_bucket[(agent, ids.bucket_of(sid, buckets[agent]))].add(sid)
    return by_bucket


def _merge_session_tables(
    version: NextVersion,
    batches: Sequence[BatchResult],
    winners: Mapping[str, str],
    by_bucket: Mapping[tuple[str, int], set[str]],
) -> None:
    staged: dict[FileKey, list[Staged]] = defaultdict(list)
    for batch in batches:  # in batch order: deterministic
        for key, pieces in batch.staged.items():
            staged[key].extend(pieces)
    jobs = [
        (table, FileKey(table.name, agent, bucket), sids)
        for table in SESSION_TABLES
        for (agent, bucket), sids in sorted(by_bucket.items())
    ]

    # Parquet decoding, sorting and encoding release the GIL: a few buckets at a time use every core, and memory
    # stays bounded by a group's staged rows and MERGE_WORKERS buckets.
    with ThreadPoolExecutor(max_workers=MERGE_WORKERS) as pool:
        for group in _groups(jobs, staged):
            read = [staged.get(key, []) for _, key, _ in group]
            opened = _Opened(piece for pieces in read if not _read_mapped(pieces) for piece in pieces)

            def merge(job: _Job, opened: _Opened = opened) -> None:
                table, key, sids = job
                _merge_bucket(version, table, key, sids, staged.get(key, []), winners, opened)

            try:
                list(pool.map(merge, group))  # re-raises the first error
            finally:
                opened.close()
    pa.default_memory_pool().release_unused()


def _groups(jobs: Sequence[_Job], staged: Mapping[FileKey, Sequence[Staged]]) -> Iterator[list[_Job]]:
    """`jobs` in order, in groups of at most GROUP_BUCKETS and about GROUP_BYTES of staged rows read with the group
    (a big bucket's are read apart: `_read_mapped`)."""
    group: list[_Job] = []
    size = 0
    for job in jobs:
        pieces = staged.get(job[1], ())
        held = 0 if _read_mapped(pieces) else sum(piece.nbytes for piece in pieces)
        if group and (len(group) >= GROUP_BUCKETS or size + held > GROUP_BYTES):
            yield group
            group, size = [], 0
        group.append(job)
        size += held
    if group:
        yield group


def _merge_sources_and_rejects(
    store: Store,
    version: NextVersion,
    plan: Plan[S],
    results: Sequence[SourceResult],
    parser_versions: Mapping[str, str],
) -> set[str]:
    """Write the `sources` and `rejects` partitions of the agents this run touched; returns the source paths whose
    rows changed (their manifest rows, and their rejects when they were read)."""
    updates: dict[str, dict[str, Any]] = {}
    reread: set[str] = set()
    problems: list[dict[str, Any]] = []
    for result in results:
        src = result.source
        if result.touched_only:
            row = dict(plan.manifest[src.path])
            row.update(
                source_row(
                    src,
                    content_sha256=result.content_sha256,
                    parser_version=row["parser_version"],
                    loaded=row["sessions_loaded"],
                    rejected=row["sessions_rejected"],
                    deferred=False,
                )
            )
            row["outcome"] = plan.manifest[src.path]["outcome"]
            updates[src.path] = row
            continue
        reread.add(src.path)
        problems.extend(result.rejects)
        updates[src.path] = source_row(
            src,
            content_sha256=result.content_sha256,
            parser_version=parser_versions[agent_of(src)],
            loaded=len(result.loaded),
            rejected=result.rejected,
            deferred=result.deferred,
        )
    for row in plan.deleted:
        updates[row["source_path"]] = {**row, "present": False}
    touched_agents = {row["agent"] for row in updates.values()}
    new_paths = {source.path for source in plan.new}
    for agent in sorted(touched_agents):
        mine = {p: r for p, r in updates.items() if r["agent"] == agent}
        _merge_sources(store, version, plan.manifest, agent, mine, sum(1 for p in mine if p in new_paths))
        rkey = FileKey(REJECTS.name, agent, 0)
        old = store.read(rkey)
        parts = (
            []
            if old is None
            else [
                old.filter(pc.invert(pc.is_in(old.column("source_path"), pa.array(sorted(reread), type=pa.string()))))
            ]
        )
        parts.append(rows_table(REJECTS, [p for p in problems if p["agent"] == agent]))
        merged = pa.concat_tables([p.cast(REJECTS.arrow_schema) for p in parts])
        version.put(rkey, _sorted(REJECTS, merged))
    return set(updates)


def _merge_sources(
    store: Store,
    version: NextVersion,
    manifest: Manifest,
    agent: str,
    mine: Mapping[str, Mapping[str, Any]],
    added: int,
) -> None:
    """Write `agent`'s manifest: its rows as stored, less the ones this run replaces (`mine`, `added` of them new
    paths), plus those, no row made a dict again. Only the buckets (`store.SOURCE_BUCKET_ROWS`) that hold a path
    of `mine` are written; all of them when the manifest grows past its bucket count (it is split again)."""
    current = version.source_buckets.get(agent, 1)
    count = source_buckets_for(manifest.count(agent) + added, current)
    new = source_table(list(mine.values())).cast(SOURCES.arrow_schema)
    if count == current and (count == 1 or manifest.spans is not None):
        if count == 1:
            kept = manifest.of_agent(agent, without=mine)
            version.put(FileKey(SOURCES.name, agent, 0), _sorted(SOURCES, pa.concat_tables([kept, new])))
            return
        placed = pa.array([ids.bucket_of(path, count) for path in mine], pa.int64())  # `mine`'s order is `new`'s
        for bucket in sorted(set(placed.to_pylist())):
            kept = manifest.of_bucket(agent, bucket, without=mine)
            rows = pa.concat_tables([kept, new.filter(pc.equal(placed, bucket))])
            version.put(FileKey(SOURCES.name, agent, bucket), _sorted(SOURCES, rows))
        return
    # Split again (or read from files of another layout): every row placed by its path, every old file replaced.
    rows = pa.concat_tables([manifest.of_agent(agent, without=mine), new])
    placed = pa.array([ids.bucket_of(p, count) for p in rows.column("source_path").to_pylist()], pa.int64())
    for bucket in range(count):
        version.put(FileKey(SOURCES.name, agent, bucket), _sorted(SOURCES, rows.filter(pc.equal(placed, bucket))))
    for key in store.partition_keys(SOURCES.name, agent, version.base):
        if key.bucket >= count:
            version.put(key, SOURCES.arrow_schema.empty_table())  # removed from the new version
    version.source_buckets[agent] = count


def append_run(store: Store, version: NextVersion, run_row: Mapping[str, Any]) -> None:
    """Add the run's row to the ledger of the new version."""
    key = FileKey(RUNS.name, None, 0)
    old = store.read(key)
    new = to_table(RUNS, {name: [run_row[name]] for name in RUNS.column_names})
    if old is not None:  # a run that failed after its commit replaces its own "ok" row
        old = old.filter(pc.not_equal(old.column("run_id"), run_row["run_id"]))
    merged = new if old is None else pa.concat_tables([old.cast(RUNS.arrow_schema), new])
    version.put(key, _sorted(RUNS, merged))


def summarize(batches: Sequence[BatchResult], plan: Plan[S]) -> Committed:
    out = Committed(version_number=0)
    per_agent: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for batch in batches:
        out.turns_loaded += batch.turns
        for result in batch.sources:
            agent = agent_of(result.source)
            counts = per_agent[agent]
            out.bytes_read += result.bytes_read
            counts["sessions_loaded"] += len(result.loaded)
            counts["sessions_rejected"] += result.rejected
            counts["sources_deferred"] += int(result.deferred)
            counts["sources_read"] += int(not result.touched_only)
            out.new_rejections += result.alarms
    for source in plan.new:
        per_agent[agent_of(source)]["sources_new"] += 1
    for source in plan.changed:
        per_agent[agent_of(source)]["sources_changed"] += 1
    for source in plan.unchanged:
        per_agent[agent_of(source)]["sources_unchanged"] += 1
    for agent, n in plan.quiet.items():
        per_agent[agent]["sources_unchanged"] += n
    for row in plan.deleted:
        per_agent[row["agent"]]["sources_deleted"] += 1
    out.counts_by_agent = {a: dict(sorted(c.items())) for a, c in sorted(per_agent.items())}
    out.sessions_loaded = sum(c.get("sessions_loaded", 0) for c in out.counts_by_agent.values())
    out.sessions_rejected = sum(c.get("sessions_rejected", 0) for c in out.counts_by_agent.values())
    out.sources_deferred = sum(c.get("sources_deferred", 0) for c in out.counts_by_agent.values())
    return out


def commit_run(
    store: Store,
    run_id: str,
    plan: Plan[S],
    batches: Sequence[BatchResult],
    parser_versions: Mapping[str, str],
    run_row: dict[str, Any],
    buckets: Mapping[str, int],
    winners: Mapping[str, str],
) -> Committed:
    """Write the next version (changed files only) and swap it in. `run_row` is completed with the counts.

    `buckets` is the bucket count per agent partition the batches were staged with; `winners` names, for every
    session loaded by this run, the one source whose copy is kept (the batches' results already say `duplicate`
    for the others): only rows staged from that source reach the dataset.
    """
    version = NextVersion(store, run_id)
    try:
        version.conform_all()  # the first run after a schema change brings every old file to it
        resize_partitions(version, buckets)
        replaced = replaced_sessions(batches)
        by_bucket = _by_bucket(replaced, version.buckets)
        # The files no change of this run touches are linked into the new version while it writes the others.
        merging = {os.fspath(FileKey(t.name, a, b).relpath()) for t in SESSION_TABLES for a, b in by_bucket}
        version.link_ahead({SOURCES.name, REJECTS.name, RUNS.name} | merging)
        results = [r for b in batches for r in b.sources]
        sources_changed: set[str] = set()
        # The manifest (one file per agent, rewritten whole: 19 MB in memory at 5 GB) is merged and written beside
        # the session tables' buckets: neither reads what the other writes. Its thread is waited for either way.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit-sources") as beside:
            merged = (
                beside.submit(_merge_sources_and_rejects, store, version, plan, results, parser_versions)
                if results or plan.deleted
                else None
            )
            _merge_session_tables(version, batches, winners, by_bucket)
            if merged is not None:
                sources_changed = merged.result()
        summary = summarize(batches, plan)
        run_row.update(
            sources_seen=plan.seen,
            sources_new=len(plan.new),
            sources_changed=len(plan.changed),
            sources_unchanged=plan.unchanged_count,
            sources_deleted=len(plan.deleted),
            sessions_loaded=summary.sessions_loaded,
            sessions_rejected=summary.sessions_rejected,
            sources_deferred=summary.sources_deferred,
            new_rejections=summary.new_rejections,
            turns_loaded=summary.turns_loaded,
            bytes_read=summary.bytes_read,
            counts_by_agent=json.dumps(summary.counts_by_agent, sort_keys=True),
        )
        append_run(store, version, run_row)
        version.publish()
    except BaseException:
        version.abandon()
        raise
    finally:
        # What the Arrow allocator keeps of the commit's buffers goes back to the system before the warehouse
        # (the sources and rejects merges: ~27 MB at 1 GB, held through the whole build otherwise).
        pa.default_memory_pool().release_unused()
    summary.version_number = version.number
    summary.replaced = replaced
    summary.sources_changed = sources_changed
    return summary


def record_failed_run(store: Store, run_id: str, run_row: dict[str, Any]) -> int:
    """A failed run still leaves its row in the ledger (and nothing else)."""
    version = NextVersion(store, run_id)
    try:
        append_run(store, version, run_row)
        version.publish()
    except BaseException:
        version.abandon()
        raise
    return version.number
