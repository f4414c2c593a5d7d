"""The Parquet layout: versioned snapshots of the whole dataset, swapped in atomically.

    data/parquet -> versions/v000007          (a symlink: the current snapshot)
    data/versions/v000007/<table>/agent=<agent>/part-<bucket>.parquet
    data/staging/<run id>/...                 (a run's work in progress; never under parquet/)

A run writes only the files that change into a new version folder, hard-links the unchanged ones from the current
version, then points `data/parquet` at it with one atomic rename. Readers never see a half-written file or a mix
of two runs; a reader that opened files of the old version keeps reading them. A run killed before the swap
leaves the current version untouched, and its leftovers are removed by the next run.

The version before the current one, which the run would remove as it ends, is recycled instead when it can be
(`NextVersion._recycle`): its folder becomes the new version's, and only the files the current version changed
(`CHANGES`, written by the run that made it) are linked again. A small change then costs links and unlinks in
proportion to the change, not to the corpus (at 5 GB, ~6,000 links and ~6,000 unlinks a run otherwise).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sinks import failpoints
from sinks.files import (
    fsync_path,
    private_dir,
    read_parquet,
    remove_tree,
    replace_atomic,
    write_parquet,
    write_parquet_parts,
)
from transforms.ids import bucket_of
from transforms.schema import BY_NAME, SCHEMA_VERSION, Table

# A session's rows live in one bucket file per table (transforms.ids.bucket_of(session_id, buckets of its agent)), so
# replacing a session rewrites one file per table, not the partition, and a merge holds one bucket in memory.
# Each agent partition gets a power-of-two bucket count sized to hold about BUCKET_BYTES of sources per bucket;
# when a partition grows past that, every bucket splits in two (a bucket b of N becomes b and b + N of 2N, so
# a split reads one old file at a time). Few files for a small partition, bounded buckets for a big one.
BUCKET_BYTES = 8 * 1024 * 1024
MAX_BUCKETS = 4096
LAYOUT = "layout.json"
# A reader that must keep seeing one version (the Python API's open corpus) holds a shared lock on this file in the
# version's folder for as long as it reads; cleanup leaves a version so held in place (`pin`, `_pinned`).
READERS = ".readers"
# What a version changed from the one before it: {"made_from": N, "changed": [the relative paths it wrote or
# removed]}, written by `publish` when there are at most RECYCLE_CHANGES of them, so that the run after next can
# turn version N into its own (`NextVersion._recycle`). No file: the version cannot be recycled (a first load).
CHANGES = "changes.json"
RECYCLE_CHANGES = 2048
_VERSION = re.compile(r"^v(\d{6})$")
log = logging.getLogger("transcripts.store")


class SchemaMismatch(OSError):
    """A Parquet file of the data directory that the current schema cannot take in (a dropped or retyped column).

    An OSError: like an unreadable file, it stops the run with one line and leaves the previous corpus intact.
    """


def _same_type(have: pa.DataType, want: pa.DataType) -> bool:
    strings = (pa.types.is_string, pa.types.is_large_string)
    return have == want or (any(f(have) for f in strings) and any(f(want) for f in strings))


def conform(table: Table, data: pa.Table, where: Path | str) -> pa.Table:
    """`data`, read back from a file of `table`, with exactly the current schema.

    A file written by an earlier version lacks the columns added since: a nullable one is added as nulls (those
    rows predate it; a source that still exists is read again, because the readers' parser_version changed with
    it, and gets the value). Anything else cannot be made up: a column the schema no longer has, a required
    column missing, or a column of another type raises SchemaMismatch saying what to do.
    """
    want = table.arrow_schema
    if data.schema.equals(want, check_metadata=False):
        if all(str(a.type) == str(b.type) for a, b in zip(data.schema, want, strict=True)):
            return data.replace_schema_metadata(want.metadata)
        return data.cast(want)  # a list's item field as Parquet names it (`element`): the schema's own name
    fix = (
        f"this data directory was written by another version of transcripts (schema {SCHEMA_VERSION} here): run "
        "the version that wrote it, or move the data directory aside and run `transcripts run` to build a new one "
        "from the sources (rows of sources that are gone cannot be rebuilt)"
    )
    extra = [name for name in data.column_names if name not in table.column_names]
    if extra:
        raise SchemaMismatch(f"{where}: column {', '.join(extra)} is not in table {table.name}; {fix}")
    columns: list[pa.Array | pa.ChunkedArray] = []
    for field in want:
        if field.name not in data.column_names:
            if not field.nullable:
                raise SchemaMismatch(f"{where}: required column {table.name}.{field.name} is missing; {fix}")
            columns.append(pa.nulls(data.num_rows, type=field.type))
            continue
        have = data.column(field.name)
        if not _same_type(have.type, field.type):
            raise SchemaMismatch(
                f"{where}: column {table.name}.{field.name} is {have.type} in the file but {field.type} here; {fix}"
            )
        columns.append(have if have.type == field.type else have.cast(field.type))
    return pa.Table.from_arrays(columns, schema=want)


_PART = re.compile(r"part-(\d+)\.parquet")

# The layout of a version's files, as layout.json says it (`store_format`; absent: 1). 2: the manifest may be in
# buckets (`source_buckets`), which a writer of format 1 would not see (it would write the whole manifest again as
# bucket 0 beside the other buckets). A writer refuses a corpus of a format newer than it knows.
STORE_FORMAT = 2


def part_name(bucket: int) -> str:
    return f"part-{bucket:03d}.parquet"


# The manifest (`sources`) of an agent is one file up to 2 x SOURCE_BUCKET_ROWS rows, then split in buckets by a
# hash of the source path, a power of two of them: a one-session change rewrites the bucket of its source, not the
# agent's whole manifest (57,565 rows at 5 GB: ~50 ms of CPU to merge, sort and write on every run).
SOURCE_BUCKET_ROWS = 4096


def source_buckets_for(rows: int, current: int = 1) -> int:
    """The bucket count of an agent's manifest of `rows` rows: a power of two, never fewer than `current`."""
    count = max(1, current)
    while rows > count * SOURCE_BUCKET_ROWS * 2:
        count *= 2
    return count


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

    def source_layout(self, version: Path | None = None) -> dict[str, int]:
        """Bucket count per agent of the manifest (`sources`) in a version (default: current); an agent not named
        has one file, bucket 0 (every version before the manifest was bucketed)."""
        base = version or self.current()
        if base is None or not (base / LAYOUT).exists():
            return {}
        data = json.loads((base / LAYOUT).read_text(encoding="utf-8"))
        return {str(agent): int(n) for agent, n in data.get("source_buckets", {}).items()}

    def store_format(self, version: Path | None = None) -> int:
        """The layout format of a version (default: current): `STORE_FORMAT` or older; 1 when layout.json does not
        say (or there is no version)."""
        base = version or self.current()
        if base is None or not (base / LAYOUT).exists():
            return 1
        value = json.loads((base / LAYOUT).read_text(encoding="utf-8")).get("store_format", 1)
        return int(value) if isinstance(value, int) else 1

    def schema_version(self, version: Path | None = None) -> str | None:
        """The schema version every file of a version (default: current) was written or conformed with; None for
        a version from before layouts recorded it (its files may be older)."""
        base = version or self.current()
        if base is None or not (base / LAYOUT).exists():
            return None
        value = json.loads((base / LAYOUT).read_text(encoding="utf-8")).get("schema_version")
        return None if value is None else str(value)

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
        if not path.exists():
            return None
        table = BY_NAME[key.table]
        if columns is None:
            return conform(table, read_parquet(path), path)
        schema = pq.read_schema(path)
        conform(table, schema.empty_table(), path)  # the checks of a whole read, on the footer alone
        data = read_parquet(path, columns=[c for c in columns if c in schema.names])
        for name in columns:
            if name not in data.column_names:  # a column added since the file was written
                data = data.append_column(name, pa.nulls(data.num_rows, type=table.arrow_schema.field(name).type))
        return data.select(columns)

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

    def partition_keys(self, table: str, agent: str, version: Path | None = None) -> list[FileKey]:
        """The keys of the files of one agent partition of `table` in a version (default: current), by bucket."""
        base = version or self.current()
        folder = None if base is None else base / table / f"agent={agent}"
        if folder is None or not folder.is_dir():
            return []
        found = (_PART.fullmatch(path.name) for path in folder.glob("part-*.parquet"))
        return sorted((FileKey(table, agent, int(m.group(1))) for m in found if m is not None), key=lambda k: k.bucket)

    def read_table(self, table: Table, version: Path | None = None) -> pa.Table:
        """All rows of a table in a version (small tables: sources, rejects, runs)."""
        parts = [conform(table, read_parquet(p), p) for p in self.files(table.name, version)]
        return pa.concat_tables(parts) if parts else table.arrow_schema.empty_table()

    def cleanup(self) -> None:
        """Remove what killed runs left: staging folders and versions other than the current and previous."""
        remove_tree(self.staging)
        self.remove_old_versions()

    def remove_old_versions(self, keep: int | None = None) -> None:
        """Remove the versions other than the current and the previous one (and those a reader pins); with `keep`,
        other than `keep` and the one before it (the current when the caller decided: a sweep on a thread must be
        joined before anything writes a version after it)."""
        if not self.versions.is_dir():
            return
        keep = self.current_number() if keep is None else keep
        for child in self.versions.iterdir():
            match = _VERSION.match(child.name)
            if (match is None or int(match.group(1)) not in (keep, keep - 1)) and not _pinned(child):
                remove_tree(child)
        stray = self.data_dir / "parquet.swap"
        if stray.is_symlink():
            stray.unlink()


def pin(version: Path) -> int | None:
    """Keep `version` from cleanup while the returned descriptor is open (a shared lock on its READERS file); None
    when it cannot be pinned (a read-only data directory: the version then lives until the second run after)."""
    try:
        fd = os.open(version / READERS, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _pinned(version: Path) -> bool:
    """A reader holds `version` (see `pin`)."""
    try:
        fd = os.open(version / READERS, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


class NextVersion:
    """A version being built: write the changed files, then `publish()` to swap it in."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.base = store.current()
        self.number = store.current_number() + 1
        private_dir(store.versions)
        self.tmp = store.versions / f"v{self.number:06d}.tmp-{run_id}"
        remove_tree(self.tmp)
        self.written: set[Path] = set()
        found = store.store_format()
        if found > STORE_FORMAT:
            raise SchemaMismatch(
                f"{store.link}: this corpus was written by a newer version of transcripts (store format {found}; this "
                f"version writes format {STORE_FORMAT} and would damage it); upgrade transcripts to write to it"
            )
        # The folders whose entries recycling changed (fsynced by `publish`); whether the folder is a recycled one.
        self._fixed_folders: set[str] = set()
        self.recycled = self._recycle()
        if not self.recycled:
            private_dir(self.tmp)
        self.buckets: dict[str, int] = store.layout()
        self.source_buckets: dict[str, int] = store.source_layout()
        # `link_ahead`: the files it links (as strings relative to the version), its thread, the folders it made.
        self._ahead: set[str] = set()
        self._linked: set[str] = set()
        self._linking: threading.Thread | None = None
        self._link_error: BaseException | None = None
        self._ahead_folders: set[str] = set()
        # Carried forward until `conform_all` has brought every file of the base to the current schema.
        self.schema_version: str | None = SCHEMA_VERSION if self.base is None else store.schema_version(self.base)

    def _recycle(self) -> bool:
        """Make the version before the base (which this run's end would remove) the new version's folder, holding the
        base's files: renamed into place, then each file the base changed from it (the base's CHANGES) unlinked and,
        where the base has it, linked from the base. Every file is then a link to the base's, as `publish` would
        link it, and a write unlinks first (`_own`). Not when there is no such version, when the base does not say
        what it changed (a first load, a change of more than RECYCLE_CHANGES files, a version of an older
        transcripts), or when a reader pins it (`pin`); then the base's files are linked as before. Any error
        leaves an empty folder and the links are made as before."""
        if self.base is None:
            return False
        try:
            changes = json.loads((self.base / CHANGES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        old = self.store.versions / f"v{self.number - 2:06d}"
        changed = changes.get("changed") if isinstance(changes, dict) else None
        if (
            not isinstance(changed, list)
            or changes.get("made_from") != self.number - 2
            or not all(_plain_relative(rel) for rel in changed)
            or not old.is_dir()
            or old.is_symlink()
            or _pinned(old)
        ):
            return False
        base = os.fspath(self.base)
        try:
            os.rename(old, self.tmp)
            for name in (LAYOUT, CHANGES, READERS):
                (self.tmp / name).unlink(missing_ok=True)
            for rel in changed:
                target = os.path.join(self.tmp, rel)
                folder = os.path.dirname(target)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
                    self._fixed_folders.add(folder)
                source = os.path.join(base, rel)
                if os.path.exists(source):
                    private_dir(Path(folder))
                    _link_or_copy(source, target)
                    self._fixed_folders.add(folder)
        except OSError as exc:
            log.info("event=version_not_recycled error=%r", f"{type(exc).__name__}: {exc}")
            remove_tree(self.tmp)
            private_dir(self.tmp)
            self._fixed_folders.clear()
            return False
        return True

    def conform_all(self) -> int:
        """Rewrite every file of the base version written with an older schema, so that the new version is one
        schema throughout (DuckDB, and anyone reading `data/parquet` directly, then reads it as one table).
        Once per schema change; returns how many files were rewritten."""
        if self.schema_version == SCHEMA_VERSION or self.base is None:
            self.schema_version = SCHEMA_VERSION
            return 0
        rewritten = 0
        for path in sorted(self.base.rglob("*.parquet")):
            rel = path.relative_to(self.base)
            table = BY_NAME.get(rel.parts[0])
            if table is None or rel in self.written:
                continue
            if pq.read_schema(path).equals(table.arrow_schema, check_metadata=False):
                continue
            self._own(rel)
            self.written.add(rel)
            write_parquet(conform(table, read_parquet(path), path), self.tmp / rel)
            rewritten += 1
        self.schema_version = SCHEMA_VERSION
        return rewritten

    def read(self, key: FileKey) -> pa.Table | None:
        """A file as this version has it so far: what it wrote (or removed), else the base version's."""
        rel = key.relpath()
        if rel in self.written:
            path = self.tmp / rel
            return conform(BY_NAME[key.table], read_parquet(path), path) if path.exists() else None
        return self.store.read(key, self.base)

    def kept_rows(self, key: FileKey, session_ids: Iterable[str]) -> KeptRows | None:
        """The rows of `key` as this version has it so far, less those of `session_ids`, to be read a row group at a
        time (None: no such file)."""
        rel = key.relpath()
        path = self.tmp / rel if rel in self.written else (None if self.base is None else self.base / rel)
        if path is None or not path.exists():
            return None
        return KeptRows(BY_NAME[key.table], path, session_ids)

    def link_ahead(self, skip: Collection[str]) -> None:
        """Hard-link the base version's files on a thread while the commit writes the changed ones (at 5 GB, ~6,000
        links: ~45 ms of a one-session change that `publish` would otherwise make after every write). `skip`: the
        folders (relative, e.g. `sources`) and files (relative paths) the caller is about to write. A file linked
        ahead and then written after all is unlinked first (`_own`): a write never goes through a link into the
        base version's file."""
        if self.base is None or self._linking is not None or self.recycled:
            return  # (a recycled folder holds the base's files already)
        written = {os.fspath(rel) for rel in self.written}
        skipped = set(skip)
        files = [
            (rel_folder, source_folder, name)
            for rel_folder, source_folder, names in _parquet_folders(os.fspath(self.base))
            if rel_folder.split("/", 1)[0] not in skipped
            for name in names
            if (f"{rel_folder}/{name}" if rel_folder else name) not in skipped
            and (f"{rel_folder}/{name}" if rel_folder else name) not in written
        ]
        self._ahead = {f"{folder}/{name}" if folder else name for folder, _, name in files}
        self._linking = threading.Thread(target=self._link, args=(files,), name="version-links", daemon=True)
        self._linking.start()

    def _link(self, files: list[tuple[str, str, str]]) -> None:
        try:
            for rel_folder, source_folder, name in files:
                folder = os.path.join(self.tmp, rel_folder) if rel_folder else os.fspath(self.tmp)
                if folder not in self._ahead_folders:
                    private_dir(Path(folder))
                    self._ahead_folders.add(folder)
                _link_or_copy(f"{source_folder}/{name}", f"{folder}/{name}")
                self._linked.add(f"{rel_folder}/{name}" if rel_folder else name)
        except BaseException as exc:  # raised by `publish` (a full disk while copying, a file gone)
            self._link_error = exc

    def _links_done(self) -> None:
        """Wait for `link_ahead`'s thread."""
        if self._linking is not None:
            self._linking.join()

    def _own(self, rel: Path) -> None:
        """Before `rel` is written (or removed: a put of no rows): if it was linked ahead, or the folder is a recycled
        one (every file a link to the base's), its link goes, so that a write makes a file of its own and never
        goes through a link into the base version's file."""
        if self.recycled:
            (self.tmp / rel).unlink(missing_ok=True)
        elif os.fspath(rel) in self._ahead:
            self._links_done()
            (self.tmp / rel).unlink(missing_ok=True)

    def put(self, key: FileKey, table: pa.Table) -> None:
        """Write a file of the new version (an empty table removes the file from the new version)."""
        rel = key.relpath()
        self._own(rel)
        self.written.add(rel)
        if table.num_rows:
            schema = BY_NAME[key.table]
            write_parquet(table, self.tmp / rel, schema.dictionary, schema.row_group_rows)
            failpoints.reach("parquet")

    def put_parts(self, key: FileKey, parts: Iterable[pa.Table], schema: pa.Schema) -> None:
        """`put` for a file written a part at a time (`files.write_parquet_parts`); no rows removes the file."""
        rel = key.relpath()
        self._own(rel)
        self.written.add(rel)
        (self.tmp / rel).unlink(missing_ok=True)
        write_parquet_parts(parts, schema, self.tmp / rel)
        if (self.tmp / rel).exists():
            failpoints.reach("parquet")

    def publish(self) -> Path:
        """Hard-link the unchanged files, rename the folder into place and point `data/parquet` at it."""
        # Strings, a folder at a time: this runs over every file of the dataset on every run that writes (5 GB:
        # ~6,000 files; with pathlib and a folder check per file it took a second of a one-session append, and a
        # path join per file still ~40 ms).
        self._links_done()
        if self._link_error is not None:
            raise self._link_error
        folders = {os.fspath(self.tmp)} | self._ahead_folders | self._fixed_folders
        if self.base is not None and not self.recycled:
            written = {os.fspath(rel) for rel in self.written}
            done = self._linked - written  # linked ahead and not written after all
            for rel_folder, source_folder, names in _parquet_folders(os.fspath(self.base)):
                folder = os.path.join(self.tmp, rel_folder) if rel_folder else os.fspath(self.tmp)
                prefix = f"{rel_folder}/" if rel_folder else ""
                for name in names:
                    if prefix + name in written or prefix + name in done:
                        continue
                    if folder not in folders:
                        private_dir(Path(folder))
                        folders.add(folder)
                    _link_or_copy(f"{source_folder}/{name}", f"{folder}/{name}")
        # The folders of the files written, and of those removed (a recycled folder's link of one unlinked)
        parents = {os.path.dirname(os.path.join(self.tmp, rel)) for rel in self.written}
        folders |= {folder for folder in parents if os.path.isdir(folder)}
        layout = self.tmp / LAYOUT
        data: dict[str, object] = {"store_format": STORE_FORMAT, "buckets": dict(sorted(self.buckets.items()))}
        if any(n > 1 for n in self.source_buckets.values()):
            data["source_buckets"] = {a: n for a, n in sorted(self.source_buckets.items()) if n > 1}
        if self.schema_version is not None:
            data["schema_version"] = self.schema_version
        layout.write_text(json.dumps(data, indent=1) + "\n", "utf-8")
        os.chmod(layout, 0o600)
        with open(layout, "rb") as handle:
            os.fsync(handle.fileno())
        if self.base is not None and len(self.written) <= RECYCLE_CHANGES:
            changes = self.tmp / CHANGES  # what the run after next needs to recycle the base (`_recycle`)
            made_from = self.number - 1
            changed = sorted(os.fspath(rel) for rel in self.written)
            changes.write_text(json.dumps({"made_from": made_from, "changed": changed}) + "\n", "utf-8")
            os.chmod(changes, 0o600)
            with open(changes, "rb") as handle:
                os.fsync(handle.fileno())
        for folder in sorted(folders):  # every folder that holds a file of the version, and the version's own
            fsync_path(Path(folder))
        final = self.store.versions / f"v{self.number:06d}"
        remove_tree(final)
        os.rename(self.tmp, final)
        fsync_path(self.store.versions)
        failpoints.reach("publish")
        swap = self.store.data_dir / "parquet.swap"
        swap.unlink(missing_ok=True)
        os.symlink(Path("versions") / final.name, swap)
        replace_atomic(swap, self.store.link)
        return final

    def abandon(self) -> None:
        self._links_done()  # never a link made into a tree being removed
        remove_tree(self.tmp)


def _plain_relative(rel: object) -> bool:
    """Whether `rel` (read from a version's CHANGES) names a Parquet file inside a version, as `publish` writes them:
    relative, no `..`, no empty part. Anything else (a hand-edited file) stops the recycling, never reaches a path."""
    return (
        isinstance(rel, str)
        and rel.endswith(".parquet")
        and not rel.startswith("/")
        and "\\" not in rel
        and all(part not in ("", ".", "..") for part in rel.split("/"))
    )


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link of a base version's file into the next version, or a private copy on a filesystem without them."""
    try:
        os.link(src, dst)
    except OSError:
        Path(dst).write_bytes(Path(src).read_bytes())
        os.chmod(dst, 0o600)


def _parquet_folders(top: str) -> list[tuple[str, str, list[str]]]:
    """(folder relative to `top`, the folder, the names of its `.parquet` files, sorted) for every folder below `top`
    that holds one, sorted; symlinks are not followed."""
    found: list[tuple[str, str, list[str]]] = []
    stack = [("", top)]
    while stack:
        rel, folder = stack.pop()
        names: list[str] = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((os.path.join(rel, entry.name) if rel else entry.name, entry.path))
                elif entry.name.endswith(".parquet") and entry.is_file(follow_symlinks=False):
                    names.append(entry.name)
        if names:
            found.append((rel, folder, sorted(names)))
    return sorted(found)


class KeptRows:
    """A file's rows less those of some sessions, read a row group at a time and never whole: one session can be most
    of a file (a 2 GB Claude session, ~1.5 GB of rows, which a big bucket file holds in row groups of ~32 MB:
    `sinks.commit.SLICE_BYTES`), and a row group holding only those sessions is never decoded.

    `groups()` yields each row group's kept rows in file order; `take(indices)` reads again just the row groups
    that hold the kept rows at `indices` (positions in that order, as `groups()` numbered them).
    """

    def __init__(self, table: Table, path: Path, session_ids: Iterable[str]) -> None:
        self.table = table
        self.path = path
        self.parquet = pq.ParquetFile(path)  # not memory-mapped: the pages of a row group go with it
        self.gone = pa.array(sorted(set(session_ids)), type=pa.string())
        self.starts: list[int] = []  # position of each row group's first kept row, filled by groups()

    def groups(self) -> Iterator[pa.Table]:
        self.starts = []
        position = 0
        for group in range(self.parquet.num_row_groups):
            self.starts.append(position)
            rows = self._group(group)
            position += rows.num_rows
            yield rows

    def take(self, indices: pa.Array) -> pa.Table:
        """The kept rows at `indices`, in that order (after `groups()`), reading one row group at a time and only
        those that hold one of them."""
        if not len(indices):
            return self.table.arrow_schema.empty_table()
        wanted = pc.cast(indices, pa.int64())
        order = pc.sort_indices(wanted)
        ascending = pc.take(wanted, order)
        low, high = pc.min(ascending).as_py(), pc.max(ascending).as_py()
        ends = [*self.starts[1:], high + 1]
        taken: list[pa.Table] = []
        for group, (start, end) in enumerate(zip(self.starts, ends, strict=True)):
            if end <= low or start > high or start == end:
                continue
            here = pc.filter(ascending, pc.and_(pc.greater_equal(ascending, start), pc.less(ascending, end)))
            if len(here):
                taken.append(self._group(group).take(pc.subtract(here, start)))
        rows = pa.concat_tables(taken)
        return (
            rows
            if pc.all(pc.equal(order, pa.array(range(len(order)), pa.uint64()))).as_py()
            else rows.take(pc.sort_indices(order))
        )

    def _group(self, group: int) -> pa.Table:
        keep = pc.invert(pc.is_in(self.parquet.read_row_group(group, columns=["session_id"])[0], value_set=self.gone))
        wanted = pc.sum(pc.cast(keep, pa.int64())).as_py() or 0
        if not wanted:
            return self.table.arrow_schema.empty_table()
        rows = self.parquet.read_row_group(group)
        return conform(self.table, rows if wanted == len(keep) else rows.filter(keep), self.path)
