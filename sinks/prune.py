"""Pruning the archive: remove whole families of old sessions whose sources the agents have deleted.

The corpus keeps a session after its source is gone (docs/operations.md "Archive and retention": the corpus is the
archive); pruning is the only way rows leave it. A *family* is a connected component of the lineage graph, whose edges
are `session_links` (either direction, any kind) and `sessions.parent_session_id`: a session with its subagents,
compaction segments, forks and resumes. A session is *kept* when it is recent (its `coalesce(ended_at, started_at)` is
not before the cutoff), when its source is still present (a session without a manifest row counts as present), or when
its agent was not selected. A family goes only when none of its members is kept, so a subagent never outlives its parent
and a parent shared by several subagents stays until the last of them may go.

The plan is pure (`families`, `plan_prune`); the write goes through `NextVersion`, so a prune killed before
`publish()` changes nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sinks.commit import append_run
from sinks.files import read_parquet
from sinks.store import FileKey, NextVersion, Store
from transforms import ids
from transforms.schema import BY_NAME, REJECTS, SESSION_LINKS, SESSION_TABLES, SESSIONS, SOURCES, Table

# --- durations --------------------------------------------------------------------------------------------------

UNITS: dict[str, timedelta] = {
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
    "mo": timedelta(days=30),  # a month is 30 days: the same on every date, unlike calendar months
    "y": timedelta(days=365),
}
_DURATION = re.compile(r"(\d+)([a-zA-Z]+)")


class DurationError(ValueError):
    """A duration that cannot be understood; the message says what is accepted."""


def parse_duration(text: str) -> timedelta:
    """`48h`, `30d`, `12w`, `6mo` (30-day months), `1y` (365 days) -> timedelta. Raises DurationError.

    `m` is refused: people read it as minutes as often as months, and a prune that guesses wrong deletes data.
    """
    accepted = "a whole number and a unit: 48h (hours), 30d (days), 12w (weeks), 6mo (30-day months) or 1y"
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise DurationError(f"cannot read duration {text!r}: expected {accepted}")
    digits, unit = match.groups()
    if len(digits) > 30:  # no duration of 31 digits fits; int() refuses 4,301 digits and more with its own words
        raise DurationError(f"duration '{text.strip()[:39]}...' is too large")
    number = int(digits)
    if unit == "m":
        raise DurationError(f"'m' in {text!r} is ambiguous (minutes or months?): for months write {number}mo")
    if unit not in UNITS:
        raise DurationError(f"unknown unit {unit!r} in {text!r}: expected {accepted}")
    if number < 1:
        raise DurationError(f"duration {text!r} must be at least 1{unit}")
    try:
        return number * UNITS[unit]
    except OverflowError:
        raise DurationError(f"duration {text!r} is too large") from None


def cutoff_of(now: datetime, older_than: timedelta) -> datetime:
    """`now - older_than`, or the earliest time when that is before year 1 (then nothing is old enough)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    try:
        return now - older_than
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


# --- the corpus as the prune sees it ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    """A session of the corpus, with what decides whether it is kept."""

    session_id: str
    agent: str
    source_path: str
    last_at: datetime  # coalesce(ended_at, started_at)
    turn_count: int = 0


@dataclass(frozen=True, slots=True)
class SourceState:
    """A manifest row, reduced to what the prune needs."""

    agent: str
    present: bool
    mtime: datetime


@dataclass(frozen=True, slots=True)
class Corpus:
    sessions: Mapping[str, Member]
    edges: tuple[tuple[str, str], ...]  # lineage: (session, linked session), direction irrelevant
    sources: Mapping[str, SourceState]  # source path -> state


def _read(store: Store, table: Table, version: Path, columns: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in store.files(table.name, version):
        rows.extend(read_parquet(path, columns=columns).to_pylist())
    return rows


def read_corpus(store: Store) -> Corpus:
    """The sessions, lineage edges and manifest of the current version (empty before the first run)."""
    version = store.current()
    if version is None:
        return Corpus({}, (), {})
    sessions: dict[str, Member] = {}
    edges: list[tuple[str, str]] = []
    cols = ["session_id", "agent", "source_path", "parent_session_id", "started_at", "ended_at", "turn_count"]
    for row in _read(store, SESSIONS, version, cols):
        sid = row["session_id"]
        sessions[sid] = Member(
            sid, row["agent"], row["source_path"], row["ended_at"] or row["started_at"], row["turn_count"]
        )
        if row["parent_session_id"]:
            edges.append((sid, row["parent_session_id"]))
    for row in _read(store, SESSION_LINKS, version, ["session_id", "other_session_id"]):
        edges.append((row["session_id"], row["other_session_id"]))
    sources = {
        row["source_path"]: SourceState(row["agent"], row["present"], row["mtime"])
        for row in _read(store, SOURCES, version, ["source_path", "agent", "present", "mtime"])
    }
    return Corpus(sessions, tuple(edges), sources)


# --- the plan (pure) ----------------------------------------------------------------------------------------------


def families(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[tuple[str, ...]]:
    """Connected components of the lineage graph: each sorted, the list sorted. Edge ends need not be in `nodes`."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = parent.setdefault(x, x)
        while root != parent[root]:
            root = parent[root]
        while parent[x] != root:  # path compression keeps long fork chains cheap
            parent[x], x = root, parent[x]
        return root

    for node in nodes:
        find(node)
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = defaultdict(list)
    for node in parent:
        groups[find(node)].append(node)
    return sorted(tuple(sorted(g)) for g in groups.values())


Family = tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """What a prune removes: whole families, and the manifest rows of sources left with no session."""

    cutoff: datetime
    agents: tuple[str, ...] | None  # None: every agent
    removed: tuple[Family, ...] = ()  # families that go (members sorted by session id)
    held: tuple[Family, ...] = ()  # families with a member old and gone at the source, kept by another member
    sources: tuple[tuple[str, str], ...] = ()  # (agent, source path) whose manifest row and rejects go

    def session_ids(self) -> dict[str, set[str]]:
        """Pruned session ids by agent (the `replaced` change the warehouse applies)."""
        by_agent: dict[str, set[str]] = defaultdict(set)
        for family in self.removed:
            for m in family:
                by_agent[m.agent].add(m.session_id)
        return dict(by_agent)

    def counts_by_agent(self) -> dict[str, dict[str, int]]:
        """Per agent: families, sessions and turns removed, manifest rows forgotten (a family counts per agent)."""
        counts: dict[str, dict[str, int]] = defaultdict(
            lambda: {"families_pruned": 0, "sessions_pruned": 0, "turns_pruned": 0, "sources_forgotten": 0}
        )
        for family in self.removed:
            for agent in sorted({m.agent for m in family}):
                counts[agent]["families_pruned"] += 1
            for m in family:
                counts[m.agent]["sessions_pruned"] += 1
                counts[m.agent]["turns_pruned"] += m.turn_count
        for agent, _ in self.sources:
            counts[agent]["sources_forgotten"] += 1
        return {a: counts[a] for a in sorted(counts)}

    @property
    def empty(self) -> bool:
        return not self.removed and not self.sources


def plan_prune(
    corpus: Corpus, *, now: datetime, older_than: timedelta, agents: Collection[str] | None = None
) -> PrunePlan:
    """Which families go: those where no member is recent, present at its source, or of an unselected agent.

    A source's manifest row (and its rejects) goes only when the source is gone, its agent selected, and every
    session read from it goes too; a gone source that holds no session at all (rejected, or every session
    a duplicate kept elsewhere) goes when its last modification time is before the cutoff.
    """
    cutoff = cutoff_of(now, older_than)
    chosen = None if agents is None else frozenset(agents)

    def selected(agent: str) -> bool:
        return chosen is None or agent in chosen

    def present(m: Member) -> bool:
        state = corpus.sources.get(m.source_path)
        return state is None or state.present

    def kept(m: Member) -> bool:
        return m.last_at >= cutoff or present(m) or not selected(m.agent)

    removed: list[Family] = []
    held: list[Family] = []
    for component in families(corpus.sessions, corpus.edges):
        members = tuple(corpus.sessions[s] for s in component if s in corpus.sessions)
        if not members:
            continue
        keepers = [m for m in members if kept(m)]
        if not keepers:
            removed.append(members)
        elif len(keepers) < len(members):
            held.append(members)
    gone = {m.session_id for family in removed for m in family}
    holding: dict[str, set[str]] = defaultdict(set)  # source path -> its sessions
    for member in corpus.sessions.values():
        holding[member.source_path].add(member.session_id)
    forgotten: list[tuple[str, str]] = []
    for path, state in sorted(corpus.sources.items()):
        if state.present or not selected(state.agent):
            continue
        sessions = holding.get(path, set())
        if (sessions and sessions <= gone) or (not sessions and state.mtime < cutoff):
            forgotten.append((state.agent, path))
    return PrunePlan(
        cutoff=cutoff,
        agents=None if chosen is None else tuple(sorted(chosen)),
        removed=tuple(removed),
        held=tuple(held),
        sources=tuple(sorted(forgotten)),
    )


# --- the write ----------------------------------------------------------------------------------------------------


def _without(old: pa.Table, column: str, values: Iterable[str], table: Table) -> pa.Table:
    drop = pa.array(sorted(values), type=pa.string())
    kept = old.filter(pc.invert(pc.is_in(old.column(column), value_set=drop)))
    return kept.cast(table.arrow_schema).combine_chunks()  # rows keep their sorted order


def write_prune(store: Store, version: NextVersion, plan: PrunePlan) -> None:
    """Rewrite, into `version`, the bucket files holding pruned sessions and the manifest of forgotten sources.

    Only the affected files are written (an emptied file leaves the version); the rest is hard-linked on publish.
    """
    by_bucket: dict[tuple[str, int], set[str]] = defaultdict(set)
    for agent, sids in plan.session_ids().items():
        for sid in sids:
            by_bucket[(agent, ids.bucket_of(sid, version.buckets[agent]))].add(sid)
    for table in SESSION_TABLES:
        for (agent, bucket), sids in sorted(by_bucket.items()):
            key = FileKey(table.name, agent, bucket)
            old = store.read(key)
            if old is not None:
                version.put(key, _without(old, "session_id", sids, table))
    paths: dict[str, set[str]] = defaultdict(set)
    for agent, path in plan.sources:
        paths[agent].add(path)
    for agent, forgotten in sorted(paths.items()):
        # The manifest may be in buckets (sinks.store.SOURCE_BUCKET_ROWS): each file of the agent's is filtered.
        keys = [*store.partition_keys(SOURCES.name, agent), FileKey(REJECTS.name, agent, 0)]
        for key in keys:
            old = store.read(key)
            if old is not None:
                version.put(key, _without(old, "source_path", forgotten, BY_NAME[key.table]))


def commit_prune(store: Store, run_id: str, plan: PrunePlan, run_row: Mapping[str, Any]) -> int:
    """Write the pruned version with the run's ledger row and swap it in; returns the new version number."""
    version = NextVersion(store, run_id)
    try:
        version.conform_all()  # a prune after a schema change leaves one schema throughout, as a run does
        write_prune(store, version, plan)
        append_run(store, version, run_row)
        version.publish()
    except BaseException:
        version.abandon()
        raise
    return version.number
