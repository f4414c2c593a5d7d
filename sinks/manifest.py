"""The change check: discovered sources against the manifest (`sources`), without opening any source."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extractors.model import Agent, Source
from sinks.staging import Previous
from sinks.store import Store, buckets_for
from transforms.schema import SOURCES


@dataclass(slots=True)
class Plan:
    """What a run will do, per source."""

    new: list[Source] = field(default_factory=list)
    changed: list[Source] = field(default_factory=list)  # size, mtime or parser version differ, or was deferred
    unchanged: list[Source] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)  # manifest rows no longer on disk
    previous: dict[str, Previous] = field(default_factory=dict)
    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)  # source path -> manifest row

    @property
    def to_read(self) -> list[Source]:
        return sorted(self.new + self.changed, key=lambda s: (s.agent.value, s.path))

    def bucket_layout(self, current: Mapping[str, int]) -> dict[str, int]:
        """Bucket count per agent partition for this run: sized to the partition's sources (the manifest's, with
        this run's new and changed sizes), never fewer than the partition has now."""
        sizes = {path: row["size_bytes"] for path, row in self.manifest.items()}
        agents = {path: row["agent"] for path, row in self.manifest.items()}
        for source in self.new + self.changed:
            sizes[source.path] = source.size
            agents[source.path] = source.agent.value
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
    discovered: Sequence[Source],
    scanned: Mapping[Agent, Iterable[str]],
    parser_versions: Mapping[Agent, str],
    *,
    full: bool = False,
) -> Plan:
    """Sort discovered sources into new / changed / unchanged and find the ones deleted upstream.

    `scanned` names the roots each agent was discovered under this run: only manifest rows under those roots can
    be "deleted" (a run limited to one agent never marks another agent's sources as gone).
    """
    plan = Plan(manifest=load_manifest(store))
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
            and row["parser_version"] == parser_versions[source.agent]
            and row["outcome"] != "deferred"
            and row["present"]
        )
        if same and not full:
            plan.unchanged.append(source)
        else:
            plan.changed.append(source)
    roots = {(agent.value, root) for agent, agent_roots in scanned.items() for root in agent_roots}
    for path, row in sorted(plan.manifest.items()):
        if path not in seen_paths and row["present"] and (row["agent"], row["root"]) in roots:
            plan.deleted.append(row)
    if full:
        plan.previous.clear()  # --full re-reads everything, even sources only touched
    return plan
