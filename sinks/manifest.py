"""The change check: discovered sources against the manifest (`sources`), without opening any source."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from sinks.results import Previous, SourceRef, agent_of
from sinks.store import Store, buckets_for
from transforms.normalize import rows_table
from transforms.schema import SOURCES

S = TypeVar("S", bound=SourceRef)


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
        sizes = dict(zip(self.manifest.paths, self.manifest.column("size_bytes"), strict=True))
        agents = dict(zip(self.manifest.paths, self.manifest.column("agent"), strict=True))
        for source in self.new + self.changed:
            sizes[source.path] = source.size
            agents[source.path] = agent_of(source)
        totals: dict[str, int] = {}
        for path, size in sizes.items():
            totals[agents[path]] = totals.get(agents[path], 0) + size
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


class Manifest(Mapping[str, dict[str, Any]]):
    """The manifest rows of the current version, by source path, kept as the Arrow table they are stored as.

    A run compares every discovered source with its row, so the few columns that takes are made Python lists once
    (`column`), and a whole row becomes a dict only when asked for: a no-change run over tens of thousands of
    sources no longer turns every row, timestamps and all, into a dict.
    """

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.paths: list[str] = table.column("source_path").to_pylist()
        self._where = {path: i for i, path in enumerate(self.paths)}
        self._columns: dict[str, list[Any]] = {}

    def column(self, name: str) -> list[Any]:
        """The values of one column, in row order (made once)."""
        if name not in self._columns:
            self._columns[name] = self.table.column(name).to_pylist()
        return self._columns[name]

    def position(self, path: str) -> int | None:
        return self._where.get(path)

    def __getitem__(self, path: str) -> dict[str, Any]:
        i = self._where[path]
        return {name: self.table.column(name)[i].as_py() for name in self.table.column_names}

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __contains__(self, path: object) -> bool:
        return path in self._where

    def of_agent(self, agent: str, without: Iterable[str]) -> pa.Table:
        """The rows of `agent`'s sources, less those of the paths `without`."""
        table = self.table.filter(pc.equal(self.table.column("agent"), agent))
        drop = pa.array(sorted(set(without)), type=pa.string())
        return table.filter(pc.invert(pc.is_in(table.column("source_path"), value_set=drop)))


def load_manifest(store: Store) -> Manifest:
    """Every manifest row of the current version, by source path."""
    return Manifest(store.read_table(SOURCES))


def make_plan(
    store: Store,
    discovered: Sequence[S],
    scanned: Mapping[str, Iterable[str]],
    parser_versions: Mapping[str, str],
    *,
    full: bool = False,
    quiet: Collection[str] = (),
    from_row: Callable[[Mapping[str, Any]], S] | None = None,
) -> Plan[S]:
    """Sort discovered sources into new / changed / unchanged and find the ones deleted upstream.

    `scanned` names the roots each agent was discovered under this run: only manifest rows under those roots can
    be "deleted" (a run limited to one agent never marks another agent's sources as gone).

    `quiet` names folders whose files discovery did not list because none changed since the run that wrote this
    manifest (`extractors.discovery.Listings`): a present row of a source in one of them is unchanged, counted in
    `Plan.quiet`, unless its parser version is not the current one or it was deferred: then `from_row` makes its
    source from the row (its size and mtime are the files' own, unchanged) and it is read again as changed.
    """
    manifest = load_manifest(store)
    plan: Plan[S] = Plan(manifest=manifest)
    sha, parser, outcome, size, mtime, present = (
        manifest.column(name)
        for name in ("content_sha256", "parser_version", "outcome", "size_bytes", "mtime_ns", "present")
    )
    # Once per discovered source of every nightly run: names bound locally, and nothing made for a source whose row
    # says it is unchanged (what `previous` holds is only read for the sources a run reads).
    position, new, changed, unchanged, previous = (
        manifest.position,
        plan.new,
        plan.changed,
        plan.unchanged,
        plan.previous,
    )
    seen = bytearray(len(manifest))
    for source in discovered:
        i = position(source.path)
        if i is None:
            new.append(source)
            continue
        seen[i] = 1
        if (
            not full
            and size[i] == source.size
            and mtime[i] == source.mtime_ns
            and parser[i] == parser_versions[agent_of(source)]
            and outcome[i] != "deferred"
            and present[i]
        ):
            unchanged.append(source)
        else:
            previous[source.path] = Previous(sha[i], parser[i], outcome[i])
            changed.append(source)
    roots = {(str(agent), root) for agent, agent_roots in scanned.items() for root in agent_roots}
    agents, under, paths = manifest.column("agent"), manifest.column("root"), manifest.paths
    gone = [i for i in range(len(paths)) if not seen[i] and present[i] and (agents[i], under[i]) in roots]
    if quiet and gone:
        gone = _quiet_rows(plan, gone, quiet, parser_versions, from_row)
    plan.deleted.extend(manifest[paths[i]] for i in sorted(gone, key=paths.__getitem__))
    if full:
        plan.previous.clear()  # --full re-reads everything, even sources only touched
    return plan


def _quiet_rows(
    plan: Plan[S],
    rows: list[int],
    quiet: Collection[str],
    parser_versions: Mapping[str, str],
    from_row: Callable[[Mapping[str, Any]], S] | None,
) -> list[int]:
    """Of the manifest rows not listed (`rows`), those of quiet folders become unchanged (or changed, see
    `make_plan`); returns the others, which are gone."""
    manifest = plan.manifest
    paths, agents, parser, outcome = (
        manifest.paths,
        manifest.column("agent"),
        manifest.column("parser_version"),
        manifest.column("outcome"),
    )
    folders = quiet if isinstance(quiet, set | frozenset) else set(quiet)
    others: list[int] = []
    for i in rows:
        path = paths[i]
        if path[: path.rfind("/")] not in folders:
            others.append(i)
        elif (parser[i] == parser_versions.get(agents[i]) and outcome[i] != "deferred") or from_row is None:
            plan.quiet[agents[i]] = plan.quiet.get(agents[i], 0) + 1
        else:
            row = manifest[path]
            plan.previous[path] = Previous(row["content_sha256"], row["parser_version"], row["outcome"])
            plan.changed.append(from_row(row))
    return others


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
