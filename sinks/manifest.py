"""The change check: discovered sources against the manifest (`sources`), without opening any source."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import pyarrow as pa

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
    previous: dict[str, Previous] = field(default_factory=dict)
    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)  # source path -> manifest row

    @property
    def to_read(self) -> list[S]:
        return sorted(self.new + self.changed, key=lambda s: (agent_of(s), s.path))

    def bucket_layout(self, current: Mapping[str, int]) -> dict[str, int]:
        """Bucket count per agent partition for this run: sized to the partition's sources (the manifest's, with
        this run's new and changed sizes), never fewer than the partition has now."""
        sizes = {path: row["size_bytes"] for path, row in self.manifest.items()}
        agents = {path: row["agent"] for path, row in self.manifest.items()}
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
        return len(self.new) + len(self.changed) + len(self.unchanged)


def load_manifest(store: Store) -> dict[str, dict[str, Any]]:
    """Every manifest row of the current version, by source path."""
    return {row["source_path"]: row for row in store.read_table(SOURCES).to_pylist()}


def make_plan(
    store: Store,
    discovered: Sequence[S],
    scanned: Mapping[str, Iterable[str]],
    parser_versions: Mapping[str, str],
    *,
    full: bool = False,
) -> Plan[S]:
    """Sort discovered sources into new / changed / unchanged and find the ones deleted upstream.

    `scanned` names the roots each agent was discovered under this run: only manifest rows under those roots can
    be "deleted" (a run limited to one agent never marks another agent's sources as gone).
    """
    plan: Plan[S] = Plan(manifest=load_manifest(store))
    seen_paths = set()
    for source in discovered:
        seen_paths.add(source.path)
        row = plan.manifest.get(source.path)
        if row is None:
            plan.new.append(source)
            continue
        plan.previous[source.path] = Previous(row["content_sha256"], row["parser_version"], row["outcome"])
        same = (
            row["size_bytes"] == source.size
            and row["mtime_ns"] == source.mtime_ns
            and row["parser_version"] == parser_versions[agent_of(source)]
            and row["outcome"] != "deferred"
            and row["present"]
        )
        if same and not full:
            plan.unchanged.append(source)
        else:
            plan.changed.append(source)
    roots = {(str(agent), root) for agent, agent_roots in scanned.items() for root in agent_roots}
    for path, row in sorted(plan.manifest.items()):
        if path not in seen_paths and row["present"] and (row["agent"], row["root"]) in roots:
            plan.deleted.append(row)
    if full:
        plan.previous.clear()  # --full re-reads everything, even sources only touched
    return plan


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
