"""The Parquet layout: versioned snapshots of the whole dataset, swapped in atomically.

    data/parquet -> versions/v000007          (a symlink: the current snapshot)
    data/versions/v000007/<table>/agent=<agent>/part-<bucket>.parquet
    data/staging/<run id>/...                 (a run's work in progress; never under parquet/)

A run writes only the files that change into a new version folder, hard-links the unchanged ones from the current
version, then points `data/parquet` at it with one atomic rename. Readers never see a half-written file or a mix
of two runs; a reader that opened files of the old version keeps reading them. A run killed before the swap
leaves the current version untouched, and its leftovers are removed by the next run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sinks import failpoints
from sinks.files import fsync_dir, private_dir, remove_tree, replace_atomic, write_parquet
from transforms.ids import bucket_of
from transforms.schema import Table

# A session's rows live in one bucket file per table (transforms.ids.bucket_of(session_id, buckets of its agent)), so
# replacing a session rewrites one file per table, not the partition, and a merge holds one bucket in memory.
# Each agent partition gets a power-of-two bucket count sized to hold about BUCKET_BYTES of sources per bucket;
# when a partition grows past that, every bucket splits in two (a bucket b of N becomes b and b + N of 2N, so
# a split reads one old file at a time). Few files for a small partition, bounded buckets for a big one.
BUCKET_BYTES = 8 * 1024 * 1024
MAX_BUCKETS = 4096
LAYOUT = "layout.json"
_VERSION = re.compile(r"^v(\d{6})$")


def part_name(bucket: int) -> str:
    return f"part-{bucket:03d}.parquet"


def buckets_for(partition_bytes: int) -> int:
    """The bucket count for a partition of that many source bytes: a power of two, at least 1."""
    wanted = max(1, -(-partition_bytes // BUCKET_BYTES))
    count = 1
    while count < wanted and count < MAX_BUCKETS:
        count *= 2
    return count


@dataclass(frozen=True, slots=True)
class FileKey:
    """One file of the dataset: table, agent partition (None for unpartitioned tables) and bucket."""

    table: str
    agent: str | None
    bucket: int

    def relpath(self) -> Path:
        if self.agent is None:
            return Path(self.table) / part_name(self.bucket)
        return Path(self.table) / f"agent={self.agent}" / part_name(self.bucket)


class Store:
    """The data directory's Parquet snapshots."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.link = data_dir / "parquet"
        self.versions = data_dir / "versions"
        self.staging = data_dir / "staging"

    def current(self) -> Path | None:
        """The folder of the current version, or None before the first run."""
        if not self.link.is_symlink():
            return None
        target = self.link.parent / os.readlink(self.link)
        return target if target.is_dir() else None

    def current_number(self) -> int:
        cur = self.current()
        if cur is None:
            return 0
        match = _VERSION.match(cur.name)
        return int(match.group(1)) if match else 0

    def layout(self, version: Path | None = None) -> dict[str, int]:
        """Bucket count per agent partition in a version (default: current)."""
        base = version or self.current()
        if base is None or not (base / LAYOUT).exists():
            return {}
        data = json.loads((base / LAYOUT).read_text(encoding="utf-8"))
        return {str(agent): int(n) for agent, n in data["buckets"].items()}

    def files(self, table: str, version: Path | None = None) -> list[Path]:
        """Every Parquet file of `table` in a version (default: current), sorted."""
        base = version or self.current()
        if base is None or not (base / table).is_dir():
            return []
        return sorted((base / table).rglob("*.parquet"))

    def read(self, key: FileKey, version: Path | None = None, columns: list[str] | None = None) -> pa.Table | None:
        base = version or self.current()
        if base is None:
            return None
        path = base / key.relpath()
        return pq.read_table(path, columns=columns) if path.exists() else None

    def session_holders(self, session_ids: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, int]]:
        """For sessions of the current version (agent -> session ids): session id -> (source path, turn count).

        Reads only the `sessions` bucket files those sessions live in, so the cost follows the sessions asked for.
        """
        layout = self.layout()
        found: dict[str, tuple[str, int]] = {}
        for agent, sids in session_ids.items():
            wanted = sorted(set(sids))
            if agent not in layout or not wanted:
                continue
            for bucket in sorted({bucket_of(s, layout[agent]) for s in wanted}):
                data = self.read(
                    FileKey("sessions", agent, bucket), columns=["session_id", "source_path", "turn_count"]
                )
                if data is None:
                    continue
                rows = data.filter(pc.is_in(data.column("session_id"), pa.array(wanted, type=pa.string())))
                for sid, path, turns in zip(*(rows.column(n).to_pylist() for n in rows.column_names), strict=True):
                    found[sid] = (path, turns)
        return found

    def read_table(self, table: Table, version: Path | None = None) -> pa.Table:
        """All rows of a table in a version (small tables: sources, rejects, runs)."""
        parts = [pq.read_table(p, schema=table.arrow_schema) for p in self.files(table.name, version)]
        return pa.concat_tables(parts) if parts else table.arrow_schema.empty_table()

    def cleanup(self) -> None:
        """Remove what killed runs left: staging folders and versions other than the current and previous."""
        remove_tree(self.staging)
        if not self.versions.is_dir():
            return
        keep = self.current_number()
        for child in self.versions.iterdir():
            match = _VERSION.match(child.name)
            if match is None or int(match.group(1)) not in (keep, keep - 1):
                remove_tree(child)
        stray = self.data_dir / "parquet.swap"
        if stray.is_symlink():
            stray.unlink()


class NextVersion:
    """A version being built: write the changed files, then `publish()` to swap it in."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.base = store.current()
        self.number = store.current_number() + 1
        private_dir(store.versions)
        self.tmp = store.versions / f"v{self.number:06d}.tmp-{run_id}"
        remove_tree(self.tmp)
        private_dir(self.tmp)
        self.written: set[Path] = set()
        self.buckets: dict[str, int] = store.layout()

    def read(self, key: FileKey) -> pa.Table | None:
        """A file as this version has it so far: what it wrote (or removed), else the base version's."""
        rel = key.relpath()
        if rel in self.written:
            path = self.tmp / rel
            return pq.read_table(path) if path.exists() else None
        return self.store.read(key, self.base)

    def put(self, key: FileKey, table: pa.Table) -> None:
        """Write a file of the new version (an empty table removes the file from the new version)."""
        rel = key.relpath()
        self.written.add(rel)
        if table.num_rows:
            write_parquet(table, self.tmp / rel)
            failpoints.reach("parquet")

    def publish(self) -> Path:
        """Hard-link the unchanged files, rename the folder into place and point `data/parquet` at it."""
        if self.base is not None:
            for path in sorted(self.base.rglob("*.parquet")):
                rel = path.relative_to(self.base)
                if rel in self.written:
                    continue
                dst = self.tmp / rel
                private_dir(dst.parent)
                try:
                    os.link(path, dst)
                except OSError:  # a filesystem without hard links: copy
                    dst.write_bytes(path.read_bytes())
                    os.chmod(dst, 0o600)
        layout = self.tmp / LAYOUT
        layout.write_text(json.dumps({"buckets": dict(sorted(self.buckets.items()))}, indent=1) + "\n", "utf-8")
        os.chmod(layout, 0o600)
        with open(layout, "rb") as handle:
            os.fsync(handle.fileno())
        for folder in sorted({p.parent for p in self.tmp.rglob("*.parquet")} | {self.tmp}):
            fsync_dir(folder)
        final = self.store.versions / f"v{self.number:06d}"
        remove_tree(final)
        os.rename(self.tmp, final)
        fsync_dir(self.store.versions)
        failpoints.reach("publish")
        swap = self.store.data_dir / "parquet.swap"
        swap.unlink(missing_ok=True)
        os.symlink(Path("versions") / final.name, swap)
        replace_atomic(swap, self.store.link)
        return final

    def abandon(self) -> None:
        remove_tree(self.tmp)
