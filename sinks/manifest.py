"""The change check: discovered sources against the manifest (`sources`), without opening any source."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from sinks.files import FILE_MODE, private_dir, read_parquet
from sinks.results import Previous, SourceRef, agent_of
from sinks.store import Store, buckets_for, conform
from transforms.normalize import rows_table
from transforms.schema import SOURCES

S = TypeVar("S", bound=SourceRef)
log = logging.getLogger("transcripts.manifest")


@dataclass(slots=True)
class Plan(Generic[S]):
    """What a run will do, per source (of whatever type discovery gave)."""

    new: list[S] = field(default_factory=list)
    changed: list[S] = field(default_factory=list)  # size, mtime or parser version differ, or was deferred
    unchanged: list[S] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)  # manifest rows no longer on disk
    # Sources unchanged that discovery did not list (their folders quiet: `extractors.discovery.Listings`), by agent.
    quiet: dict[str, int] = field(default_factory=dict)
    previous: dict[str, Previous] = field(default_factory=dict)
    manifest: Manifest = field(default_factory=lambda: Manifest(SOURCES.arrow_schema.empty_table()))

    @property
    def to_read(self) -> list[S]:
        return sorted(self.new + self.changed, key=lambda s: (agent_of(s), s.path))

    def bucket_layout(self, current: Mapping[str, int]) -> dict[str, int]:
        """Bucket count per agent partition for this run: sized to the partition's sources (the manifest's, with
        this run's new and changed sizes), never fewer than the partition has now."""
        table = self.manifest.table
        read = self.new + self.changed
        # Only the two columns summed are filtered: the whole rows were 4-40 ms at 5 GB (57,565 rows), these ~1 ms.
        sizes = table.select(["agent", "size_bytes"])
        if read:
            drop = pa.array(sorted({s.path for s in read}), pa.string())
            sizes = sizes.filter(pc.invert(pc.is_in(table.column("source_path"), value_set=drop)))
        totals: dict[str, int] = {}
        for entry in sizes.group_by("agent").aggregate([("size_bytes", "sum")]).to_pylist():
            totals[str(entry["agent"])] = int(entry["size_bytes_sum"] or 0)
        for source in read:
            totals[agent_of(source)] = totals.get(agent_of(source), 0) + source.size
        layout = dict(current)
        for agent, total in totals.items():
            layout[agent] = max(layout.get(agent, 1), buckets_for(total))
        return layout

    @property
    def seen(self) -> int:
        return len(self.new) + len(self.changed) + self.unchanged_count

    @property
    def unchanged_count(self) -> int:
        """Unchanged sources, those discovery listed and those of quiet folders."""
        return len(self.unchanged) + sum(self.quiet.values())


FEW_LOOKUPS = 16


class Manifest(Mapping[str, dict[str, Any]]):
    """The manifest rows of the current version, by source path, kept as the Arrow table they are stored as.

    A run compares the sources it discovered with their rows in Arrow (`make_plan`); a row becomes a dict, and the
    paths a Python index, only when asked for: a run that finds one changed session among tens of thousands of
    sources does no work per source in Python.
    """

    def __init__(
        self,
        table: pa.Table,
        spans: Mapping[tuple[str, int], tuple[int, int]] | None = None,
        folders: pa.ChunkedArray | None = None,
    ) -> None:
        self.table = table
        self._folders = folders
        # (agent, bucket) -> (first row, rows) of each file the table was read from, in file order (`load_manifest`);
        # None: not known (then an agent's rows are found by filtering).
        self.spans = dict(spans) if spans is not None else None
        self._paths: list[str] | None = None
        self._where: dict[str, int] | None = None
        self._columns: dict[str, list[Any]] = {}
        self._lookups = 0

    @property
    def folders(self) -> pa.ChunkedArray | pa.Array:
        """Each row's folder (its path up to the last "/"), as the manifest cache keeps it, or made now."""
        if self._folders is None:
            self._folders = folders_of(self.table.column("source_path"))
        return self._folders

    @property
    def paths(self) -> list[str]:
        if self._paths is None:
            self._paths = self.table.column("source_path").to_pylist()
        return self._paths

    def _index(self) -> dict[str, int]:
        if self._where is None:
            self._where = {path: i for i, path in enumerate(self.paths)}
        return self._where

    def column(self, name: str) -> list[Any]:
        """The values of one column, in row order (made once)."""
        if name not in self._columns:
            self._columns[name] = self.table.column(name).to_pylist()
        return self._columns[name]

    def position(self, path: str) -> int | None:
        """The row of `path`, or None. The first few lookups search the column in Arrow (~1 ms at 57,000 rows); after
        FEW_LOOKUPS the paths are indexed in a dict (~20 ms to make there): a run that changed one session asks once."""
        if self._where is None and self._lookups < FEW_LOOKUPS:
            self._lookups += 1
            found = pc.index(self.table.column("source_path"), path).as_py()
            return None if found is None or found < 0 else int(found)
        return self._index().get(path)

    def __getitem__(self, path: str) -> dict[str, Any]:
        i = self.position(path)
        if i is None:
            raise KeyError(path)
        return {name: self.table.column(name)[i].as_py() for name in self.table.column_names}

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.position(path) is not None

    def rows(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        """Whole rows, as dicts, at `positions` (in that order)."""
        if not positions:
            return []
        found: list[dict[str, Any]] = self.table.take(pa.array(positions, pa.int64())).to_pylist()
        return found

    def _agent_rows(self, agent: str) -> pa.Table:
        if self.spans is not None:  # an agent's files are read one after the other: its rows are one slice
            mine = [span for (a, _), span in self.spans.items() if a == agent]
            if not mine:
                return self.table.slice(0, 0)
            first = min(start for start, _ in mine)
            return self.table.slice(first, sum(n for _, n in mine))
        return self.table.filter(pc.equal(self.table.column("agent"), agent))

    def count(self, agent: str) -> int:
        """How many rows `agent` has."""
        return int(self._agent_rows(agent).num_rows)

    def of_agent(self, agent: str, without: Iterable[str]) -> pa.Table:
        """The rows of `agent`'s sources, less those of the paths `without`."""
        return _without(self._agent_rows(agent), without)

    def of_bucket(self, agent: str, bucket: int, without: Iterable[str]) -> pa.Table:
        """The rows of `agent`'s manifest file `bucket` (none when there is no such file), less those of the paths
        `without`; the spans must be known (`load_manifest`)."""
        if self.spans is None:
            raise ValueError("the manifest's files are not known")
        start, rows = self.spans.get((agent, bucket), (0, 0))
        return _without(self.table.slice(start, rows), without)


def _without(table: pa.Table, paths: Iterable[str]) -> pa.Table:
    drop = pa.array(sorted(set(paths)), type=pa.string())
    return table.filter(pc.invert(pc.is_in(table.column("source_path"), value_set=drop)))


def load_manifest(store: Store, *, keep: bool = False) -> Manifest:
    """Every manifest row of the current version, by source path, with the rows of each of its files, and their
    folders; read from the cache where it has them (MANIFEST_CACHE), which `keep` (a run, under the writer lock)
    brings up to date."""
    parts: list[pa.Table] = []
    folders: list[pa.Array] = []
    spans: dict[tuple[str, int], tuple[int, int]] | None = {}
    start = 0
    cache = store.data_dir / MANIFEST_CACHE
    kept: set[str] = set()
    for path in store.files(SOURCES.name):
        part, folder, name = _decoded(path, cache, keep)
        kept.add(name)
        match = _PART_FILE.fullmatch(path.name)
        if match is None or not path.parent.name.startswith("agent=") or spans is None:
            spans = None  # a file not of the layout: rows found by filtering
        else:
            spans[(path.parent.name.removeprefix("agent="), int(match.group(1)))] = (start, part.num_rows)
        parts.append(part)
        folders.extend(folder.chunks)
        start += part.num_rows
    if keep:
        _sweep_cache(cache, kept)
    if not parts:
        return Manifest(SOURCES.arrow_schema.empty_table())
    return Manifest(pa.concat_tables(parts), spans, pa.chunked_array(folders, pa.string()))


def folders_of(paths: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Each path's folder: everything before its last "/" (a split from the right: ~5x faster than a regex)."""
    return pc.list_element(pc.split_pattern(paths, "/", max_splits=1, reverse=True), 0)


# The manifest's files decoded, with each row's folder, as Arrow IPC files in the data dir's cache folder, one per
# manifest file, named by that file's identity (device, inode, size, mtime). A run finds them memory-mapped instead of
# decoding the Parquet files and splitting every path (5 GB, 57,565 rows: 20-35 ms of decoding and 6-90 ms of
# splitting before, in a fresh process); a version's unchanged files are hard links of the previous version's, so
# after a one-session change one file is decoded. Not durable and never trusted beyond its shape: a missing, torn
# or foreign file is decoded from Parquet again and rewritten; files of no current manifest file are removed.
MANIFEST_CACHE = "cache/manifest"
_FOLDER = "folder"


def _decoded(path: Path, cache: Path, keep: bool) -> tuple[pa.Table, pa.ChunkedArray, str]:
    """The manifest file `path` as a table of SOURCES and its rows' folders, from the cache when it has them (else
    decoded, and with `keep` put in the cache), and the cache file's name."""
    st = path.stat()
    name = f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}.arrow"
    try:
        found = ipc.open_file(pa.memory_map(str(cache / name))).read_all()
        if found.schema.names[-1] == _FOLDER and found.schema.remove(found.num_columns - 1) == SOURCES.arrow_schema:
            return found.drop_columns([_FOLDER]), found.column(_FOLDER), name
    except (OSError, pa.ArrowInvalid):  # none yet, torn or foreign: decoded again
        pass
    part = conform(SOURCES, read_parquet(path), path)
    folder = folders_of(part.column("source_path"))
    if not keep:
        return part, folder, name
    try:
        private_dir(cache)
        tmp = cache / f".{name}.tmp-{os.getpid()}"
        with ipc.new_file(str(tmp), part.schema.append(pa.field(_FOLDER, pa.string()))) as out:
            out.write_table(part.append_column(_FOLDER, folder))
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, cache / name)
    except OSError as exc:  # a cache: the run goes on without it
        log.info("event=manifest_cache_unwritten path=%s error=%r", cache / name, str(exc))
    return part, folder, name


def _sweep_cache(cache: Path, kept: set[str]) -> None:
    """Remove the cache's files of manifest files that are no longer current (and leftovers of a killed write)."""
    try:
        names = os.listdir(cache)
    except OSError:
        return
    for name in names:
        if name not in kept:
            with contextlib.suppress(OSError):
                os.unlink(cache / name)


_PART_FILE = re.compile(r"part-(\d+)\.parquet")


_COMPARED = ("content_sha256", "parser_version", "outcome", "size_bytes", "mtime_ns", "present")


def make_plan(
    store: Store,
    discovered: Sequence[S],
    scanned: Mapping[str, Iterable[str]],
    parser_versions: Mapping[str, str],
    *,
    full: bool = False,
    quiet: Collection[str] = (),
    from_row: Callable[[Mapping[str, Any]], S] | None = None,
    keep_cache: bool = False,
) -> Plan[S]:
    """Sort discovered sources into new / changed / unchanged and find the ones deleted upstream.

    `scanned` names the roots each agent was discovered under this run: only manifest rows under those roots can
    be "deleted" (a run limited to one agent never marks another agent's sources as gone).

    `quiet` names folders whose files discovery did not list because none changed since the run that wrote this
    manifest (`extractors.discovery.Listings`): a present row of a source in one of them is unchanged, counted in
    `Plan.quiet`, unless its parser version is not the current one or it was deferred: then `from_row` makes its
    source from the row (its size and mtime are the files' own, unchanged) and it is read again as changed.

    The manifest side is compared in Arrow: Python looks only at the discovered sources and the rows that differ.
    """
    manifest = load_manifest(store, keep=keep_cache)
    table = manifest.table
    plan: Plan[S] = Plan(manifest=manifest)
    paths = table.column("source_path")
    listed = pa.array([source.path for source in discovered], pa.string())
    where = _rows_of(listed, paths)  # each discovered source's row, or None
    found = [i for i in where if i is not None]
    rows = table.take(pa.array(found, pa.int64())).select(list(_COMPARED)) if found else None
    sha, parser, outcome, size, mtime, present = (
        (rows.column(name).to_pylist() for name in _COMPARED) if rows is not None else ([] for _ in _COMPARED)
    )
    new, changed, unchanged, previous = plan.new, plan.changed, plan.unchanged, plan.previous
    k = 0
    for source, i in zip(discovered, where, strict=True):
        if i is None:
            new.append(source)
            continue
        if (
            not full
            and size[k] == source.size
            and mtime[k] == source.mtime_ns
            and parser[k] == parser_versions[agent_of(source)]
            and outcome[k] != "deferred"
            and present[k]
        ):
            unchanged.append(source)
        else:
            previous[source.path] = Previous(sha[k], parser[k], outcome[k])
            changed.append(source)
        k += 1
    # Rows not listed, present, under a root scanned now: deleted, or (in a quiet folder) unchanged.
    # Masks per agent, not each row's agent and root joined into one string and looked up (57,565 new strings).
    scope = pc.fill_null(pa.nulls(table.num_rows, pa.bool_()), False)
    for agent, agent_roots in scanned.items():
        roots = pa.array(list(agent_roots), pa.string())
        if len(roots):
            mine = pc.and_(pc.equal(table.column("agent"), agent), pc.is_in(table.column("root"), value_set=roots))
            scope = pc.or_(scope, pc.fill_null(mine, False))
    missing = pc.and_(pc.invert(pc.is_in(paths, value_set=listed)), pc.and_(table.column("present"), scope))
    if quiet:
        in_quiet = pc.and_(missing, pc.is_in(manifest.folders, value_set=pa.array(sorted(quiet), pa.string())))
        missing = pc.and_(missing, pc.invert(in_quiet))
        _quiet_rows(plan, table, in_quiet, parser_versions, from_row)
    gone = pc.indices_nonzero(pc.fill_null(missing, False)).to_pylist()
    plan.deleted.extend(sorted(manifest.rows(gone), key=lambda row: row["source_path"]))
    if full:
        plan.previous.clear()  # --full re-reads everything, even sources only touched
    return plan


def _rows_of(listed: pa.Array, paths: pa.ChunkedArray) -> list[int | None]:
    """The row of each of `listed` in `paths` (its first), or None. A run that lists a few sources (the others in
    quiet folders) finds them by a hash of those few, probed with every path (0.6 ms at 5 GB), rather than by a hash
    of every path probed with the few (`pc.index_in`: 6 ms)."""
    if len(listed) * 8 >= len(paths):
        return pc.index_in(listed, value_set=paths).to_pylist()  # type: ignore[no-any-return]
    found = pc.indices_nonzero(pc.is_in(paths, value_set=listed)).to_pylist()
    first: dict[str, int] = {}
    for row, path in zip(found, paths.take(pa.array(found, pa.int64())).to_pylist(), strict=True):
        first.setdefault(path, row)
    return [first.get(path) for path in listed.to_pylist()]


def _quiet_rows(
    plan: Plan[S],
    table: pa.Table,
    in_quiet: pa.ChunkedArray | pa.Array,
    parser_versions: Mapping[str, str],
    from_row: Callable[[Mapping[str, Any]], S] | None,
) -> None:
    """The manifest rows of quiet folders (`in_quiet` of `table`) become unchanged, counted by agent, or changed (see
    `make_plan`). Decided with masks over the whole columns: taking the quiet rows' values first (nearly every row,
    three string columns) cost 2-33 ms at 5 GB (57,565 rows), most of it fresh memory; only the rows to read again
    are taken, whole."""
    quiet = pc.fill_null(in_quiet, False)
    if not pc.any(quiet).as_py():
        return
    agent = table.column("agent")
    if from_row is None:
        settled = quiet
    else:
        current = pc.fill_null(pa.nulls(table.num_rows, pa.bool_()), False)  # the row's parser version is current
        for name, version in parser_versions.items():
            mine = pc.and_(pc.equal(agent, name), pc.equal(table.column("parser_version"), version))
            current = pc.or_(current, pc.fill_null(mine, False))
        done = pc.fill_null(pc.not_equal(table.column("outcome"), "deferred"), False)
        settled = pc.and_(quiet, pc.and_(current, done))
    for name in pc.unique(agent).to_pylist():
        count = int(pc.sum(pc.and_(settled, pc.equal(agent, name))).as_py() or 0)
        if count:
            plan.quiet[str(name)] = plan.quiet.get(str(name), 0) + count
    if from_row is None:
        return
    again = pc.indices_nonzero(pc.and_(quiet, pc.invert(settled)))
    for row in table.take(again).to_pylist():
        plan.previous[row["source_path"]] = Previous(row["content_sha256"], row["parser_version"], row["outcome"])
        plan.changed.append(from_row(row))


def source_outcome(loaded: int, rejected: int, deferred: bool) -> str:
    """The manifest's outcome word for a source."""
    if deferred:
        return "deferred"
    if rejected and loaded:
        return "partial"
    if rejected:
        return "rejected"
    return "loaded"


def source_row(
    source: SourceRef,
    *,
    content_sha256: str | None,
    parser_version: str,
    loaded: int,
    rejected: int,
    deferred: bool,
    present: bool = True,
) -> dict[str, Any]:
    """One manifest row."""
    return {
        "source_path": source.path,
        "agent": agent_of(source),
        "kind": source.kind,
        "root": source.root,
        "size_bytes": source.size,
        "mtime": datetime.fromtimestamp(source.mtime_ns / 1e9, tz=UTC),
        "mtime_ns": source.mtime_ns,
        "content_sha256": content_sha256,
        "parser_version": parser_version,
        "outcome": source_outcome(loaded, rejected, deferred),
        "sessions_loaded": loaded,
        "sessions_rejected": rejected,
        "present": present,
    }


def source_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Manifest rows -> an Arrow table of `sources`."""
    return rows_table(SOURCES, rows)
