"""Publish this machine's Parquet corpus to a team folder: incremental, atomic for readers, resumable.

    <url>/machine=<label>/manifest.json                  (written last: names the exact files of the publish)
    <url>/machine=<label>/objects/<sha256>.parquet       (content-addressed: written once, never changed)

An object's name is the SHA-256 of its bytes, so a file that did not change is never sent again, an object that
exists is complete (S3 shows an object only once its upload completed; a folder gets a rename), and a publish killed
half way is resumed by the next one, which finds what was sent. The manifest is replaced in one PUT once every
object it names is in place: a reader reads the manifest, then the objects it names, and never sees half a publish.
An object the new manifest no longer names is listed in it as retired, with the time, and removed only by a publish
at least `GRACE_SECONDS` later, so a reader that read the previous manifest keeps its files.

Each machine writes only under its own label; the corpus is read from a pinned version (`sinks.store.pin`) and
nothing of it is changed: a failed publish leaves the local corpus as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sinks import failpoints, remote
from sinks.files import FILE_MODE, private_dir, write_parquet_parts, write_private_atomic
from sinks.remote import RemoteError, Target
from sinks.store import Store, pin
from transforms.schema import BY_NAME, SCHEMA_VERSION, SESSIONS, metrics_columns

MANIFEST = "manifest.json"
OBJECTS = "objects"
MACHINE = "machine="
FORMAT = "transcripts-team"
FORMAT_VERSION = 1  # of the manifest itself: a reader refuses a newer one
GRACE_SECONDS = 3600.0
# Objects sent at once: a request to an object store is mostly waiting (latency), and pyarrow's streams release
# the GIL. Against the local endpoint of bench/publish_bench.py, one at a time sent the 200 MB corpus (24 MB of
# Parquet in 194 files) at 2.5 MB/s, each object three requests (a multipart upload) in turn.
UPLOADERS = 8  # how long a retired object stays for readers of an older manifest
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_OBJECT = re.compile(r"^[0-9a-f]{64}\.parquet$")
_HASHES = "publish-hashes.json"  # in data/cache: file identity -> hash of what was published for it


class Level(StrEnum):
    """What a publish sends: `full` the (redacted) corpus, `metrics` no column that holds text."""

    full = "full"
    metrics = "metrics"


class PublishError(RemoteError):
    """A publish cannot go on; the message says why. The local corpus is untouched."""


class NothingToPublish(PublishError):
    """No corpus yet."""


class Busy(PublishError):
    """Another publish of this data directory is running."""


def check_label(label: str) -> str:
    """`label` when it can name a machine's folder (letters, digits, `.`, `_`, `-`); raises ValueError."""
    if not _LABEL.match(label):
        raise ValueError(
            f"machine label {label!r} must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return label


def default_label() -> str:
    """The host name, cut at its first dot and made a valid label."""
    name = os.uname().nodename.split(".")[0] or "machine"
    name = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("._-") or "machine"
    return name[:63]


def machine_dir(target: Target, label: str) -> str:
    return target.path(f"{MACHINE}{label}")


# ---- the manifest ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PublishedFile:
    """One Parquet file of a publish: its path in the corpus and the object that holds it."""

    path: str  # "<table>/agent=<agent>/part-000.parquet"
    sha256: str
    size: int

    @property
    def table(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def object(self) -> str:
        return f"{OBJECTS}/{self.sha256}.parquet"


@dataclass(slots=True)
class Manifest:
    machine: str
    level: Level
    published_at: str
    corpus_version: int
    schema_version: str = SCHEMA_VERSION
    files: list[PublishedFile] = field(default_factory=list)
    retired: dict[str, str] = field(default_factory=dict)  # object -> when it stopped being named (ISO time)

    def objects(self) -> set[str]:
        return {f.object for f in self.files}

    def to_json(self) -> bytes:
        data = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "machine": self.machine,
            "level": self.level.value,
            "published_at": self.published_at,
            "corpus_version": self.corpus_version,
            "schema_version": self.schema_version,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
            "retired": [{"object": o, "since": s} for o, s in sorted(self.retired.items())],
        }
        return (json.dumps(data, indent=1) + "\n").encode()


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """A manifest read from `where`; PublishError for one that is not a transcripts manifest or is of a newer
    format or corpus schema than this version reads."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError
        version = int(data["format_version"])
    except (ValueError, KeyError, TypeError):
        raise PublishError(f"{where} is not a transcripts manifest: a foreign object under the team prefix") from None
    if version > FORMAT_VERSION:
        raise PublishError(
            f"{where} has manifest format {version}, newer than this version of transcripts reads "
            f"({FORMAT_VERSION}): upgrade transcripts"
        )
    schema = str(data.get("schema_version", ""))
    if _newer(schema, SCHEMA_VERSION):
        raise PublishError(
            f"{where} holds a corpus of schema {schema}, newer than this version of transcripts reads "
            f"({SCHEMA_VERSION}): upgrade transcripts"
        )
    try:
        return Manifest(
            machine=str(data["machine"]),
            level=Level(data["level"]),
            published_at=str(data["published_at"]),
            corpus_version=int(data["corpus_version"]),
            schema_version=schema,
            files=[PublishedFile(str(f["path"]), str(f["sha256"]), int(f["size"])) for f in data["files"]],
            retired={str(r["object"]): str(r["since"]) for r in data.get("retired", [])},
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise PublishError(f"{where} is a damaged manifest ({exc!r})") from None


def _newer(have: str, ours: str) -> bool:
    try:
        return int(have) > int(ours)
    except ValueError:
        return have != ours


def read_manifest(target: Target, label: str) -> Manifest | None:
    where = f"{machine_dir(target, label)}/{MANIFEST}"
    raw = remote.read_bytes(target, where)
    return None if raw is None else parse_manifest(raw, where)


def machines(target: Target) -> list[str]:
    """The labels with a folder in the team folder; PublishError for anything else found there."""
    labels = []
    found = remote.list_dir(target, target.root)
    if not found:
        remote.check_bucket(target)  # an empty listing is also what a missing bucket can give
    for info in found:
        name = info.base_name
        if info.type == pafs.FileType.Directory and name.startswith(MACHINE):
            labels.append(name[len(MACHINE) :])
        elif not name.startswith(".tmp-"):
            raise PublishError(
                f"{info.path} is not a machine's folder: a foreign object under the team prefix {target.url} "
                "(publish to a prefix that only transcripts writes to)"
            )
    return sorted(labels)


# ---- what to send ---------------------------------------------------------------------------------------------


def _unredacted(path: Path) -> int:
    """Sessions of a `sessions` file stored without redaction (`--no-redact`: parser version `...+raw`)."""
    versions = pq.read_table(path, columns=["parser_version"]).column("parser_version")
    return int(pc.sum(pc.cast(pc.invert(pc.match_substring_regex(versions, r"\+r[0-9]")), pa.int64())).as_py() or 0)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(remote.CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _metrics_copy(path: Path, table: str, out: Path) -> None:
    """`path` with only the columns a metrics publish keeps, a row group at a time."""
    keep = list(metrics_columns(BY_NAME[table]))
    parquet = pq.ParquetFile(path)
    columns = [c for c in keep if c in parquet.schema_arrow.names]
    schema = pa.schema([parquet.schema_arrow.field(c) for c in columns], metadata=parquet.schema_arrow.metadata)
    parts = (parquet.read_row_group(i, columns=columns) for i in range(parquet.num_row_groups))
    write_parquet_parts(parts, schema, out)
    if not out.exists():  # a file without rows (the corpus writes none, but a file is a file)
        pq.write_table(schema.empty_table(), out, compression="zstd")


class _Hashes:
    """What was published for each local file, by its identity (inode, size, mtime): the files of a version are never
    changed once written (a run writes changed files into a new version), so an unchanged identity is an unchanged
    file and need not be read again."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "cache" / _HASHES
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self.known: dict[str, list[Any]] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self.known = {}
        self.used: dict[str, list[Any]] = {}

    @staticmethod
    def key(path: Path, level: Level) -> str:
        st = path.stat()
        return f"{level.value}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"

    def get(self, key: str) -> tuple[str, int] | None:
        found = self.known.get(key)
        if isinstance(found, list) and len(found) == 2:
            self.used[key] = found
            return str(found[0]), int(found[1])
        return None

    def put(self, key: str, sha: str, size: int) -> None:
        self.used[key] = [sha, size]

    def save(self) -> None:
        private_dir(self.path.parent)
        text = json.dumps(self.used, sort_keys=True)
        write_private_atomic(self.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


# ---- the publish ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Published:
    """What a publish did."""

    machine: str
    level: Level
    files: int
    bytes_total: int
    uploaded: int  # objects sent
    bytes_sent: int
    removed: int  # retired objects removed after their grace period
    manifest_written: bool
    corpus_version: int


@contextlib.contextmanager
def _publish_lock(data_dir: Path) -> Iterator[None]:
    path = data_dir / ".publish.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"another publish of {data_dir} is running; try again when it ends") from None
        yield
    finally:
        os.close(fd)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def publish(
    data_dir: Path,
    target: Target,
    label: str,
    level: Level = Level.full,
    *,
    grace_seconds: float = GRACE_SECONDS,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    progress: Callable[[int, int], None] | None = None,
) -> Published:
    """Mirror the current corpus version of `data_dir` to `target` under `machine=<label>/`.

    Raises PublishError (NothingToPublish, Busy, a foreign object, a newer manifest, unredacted text at level full)
    or remote.RemoteError (no bucket, credentials refused, no network). Either way the local corpus is untouched.
    """
    check_label(label)
    store = Store(data_dir)
    if store.current() is None:
        raise NothingToPublish(f"no corpus in {data_dir} yet: run `transcripts run` first")
    private_dir(data_dir)
    with _publish_lock(data_dir):
        mine = machine_dir(target, label)
        machines(target)  # a foreign object at the top refuses the prefix before anything is written
        old = read_manifest(target, label)
        found = _objects(target, mine)
        with _pinned(store) as version:
            return _send(data_dir, store, version, target, label, level, old, found, grace_seconds, now, progress)


def _send(
    data_dir: Path,
    store: Store,
    version: Path,
    target: Target,
    label: str,
    level: Level,
    old: Manifest | None,
    found: dict[str, int],
    grace_seconds: float,
    now: Callable[[], datetime],
    progress: Callable[[int, int], None] | None,
) -> Published:
    """The publish of `version` once the team folder has been read (`old` manifest, `found` objects)."""
    mine = machine_dir(target, label)
    hashes = _Hashes(data_dir)
    files: list[PublishedFile] = []
    to_send: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="publish-", dir=private_dir(data_dir / "cache")) as scratch:
        for path in sorted(version.rglob("*.parquet")):
            rel = path.relative_to(version).as_posix()
            table = rel.split("/", 1)[0]
            if table not in BY_NAME:
                continue
            key = _Hashes.key(path, level)
            known = hashes.get(key)
            if known is None and level is Level.full and table == SESSIONS.name and _unredacted(path):
                raise PublishError(
                    f"{rel} holds sessions stored without redaction (`--no-redact`): a full publish never sends "
                    "unredacted text; publish with --level metrics, or turn redaction on and run again"
                )
            if known is None or found.get(f"{known[0]}.parquet") != known[1]:
                source = path  # its bytes are needed: not hashed yet, or not (whole) in the team folder
                if level is Level.metrics:
                    source = Path(scratch) / f"{len(files)}.parquet"
                    _metrics_copy(path, table, source)
                known = (_sha256(source), source.stat().st_size)
                if found.get(f"{known[0]}.parquet") != known[1]:
                    to_send.setdefault(f"{OBJECTS}/{known[0]}.parquet", source)
            hashes.put(key, *known)
            files.append(PublishedFile(rel, *known))
        total = sum(p.stat().st_size for p in to_send.values())
        sent = 0
        pool = ThreadPoolExecutor(UPLOADERS, thread_name_prefix="publish-upload")
        try:
            uploads = [
                pool.submit(remote.upload, target, src, f"{mine}/{name}") for name, src in sorted(to_send.items())
            ]
            for upload in as_completed(uploads):
                sent += upload.result()
                failpoints.reach("team_upload")
                if progress is not None:
                    progress(sent, total)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # a failed upload: the others not yet started never start
    hashes.save()
    moment = now()
    live = {f.object for f in files}
    retired = dict(old.retired) if old is not None else {}
    for name in [*(old.objects() if old else ()), *(f"{OBJECTS}/{n}" for n in found)]:
        if name not in live and name not in retired:
            retired[name] = _iso(moment)  # no longer named, or left by a killed publish: kept for the grace
    for name in live:
        retired.pop(name, None)
    expired = sorted(o for o, since in retired.items() if _age(since, moment) >= grace_seconds)
    for name in expired:
        del retired[name]
    manifest = Manifest(label, level, _iso(moment), store.current_number() or 0, files=files, retired=retired)
    unchanged = (
        old is not None
        and old.level is level
        and old.schema_version == SCHEMA_VERSION
        and [(f.path, f.sha256) for f in old.files] == [(f.path, f.sha256) for f in files]
        and old.retired == retired
    )
    if not unchanged:
        failpoints.pause("team_manifest")
        remote.write_bytes(target, f"{mine}/{MANIFEST}", manifest.to_json())
    for name in expired:  # only once the manifest that no longer lists them is in place
        remote.delete(target, f"{mine}/{name}")
    return Published(
        machine=label,
        level=level,
        files=len(files),
        bytes_total=sum(f.size for f in files),
        uploaded=len(to_send),
        bytes_sent=sent,
        removed=len(expired),
        manifest_written=not unchanged,
        corpus_version=manifest.corpus_version,
    )


def _age(since: str, moment: datetime) -> float:
    try:
        return (moment - datetime.fromisoformat(since)).total_seconds()
    except ValueError:
        return timedelta.max.total_seconds()


def _objects(target: Target, mine: str) -> dict[str, int]:
    """The objects already under the machine's folder (name -> size); PublishError for anything foreign there.
    Temporary files a killed folder publish left are removed."""
    found: dict[str, int] = {}
    for info in remote.list_dir(target, mine, recursive=True):
        rel = info.path[len(mine) + 1 :]
        if info.type == pafs.FileType.Directory and rel == OBJECTS:
            continue
        if rel == MANIFEST:
            continue
        name = rel[len(OBJECTS) + 1 :] if rel.startswith(f"{OBJECTS}/") else ""
        if _OBJECT.match(name) and info.type == pafs.FileType.File:
            found[name] = info.size or 0
        elif os.path.basename(rel).startswith(".tmp-"):
            remote.delete(target, info.path)
        else:
            raise PublishError(
                f"{info.path} was not written by transcripts: a foreign object under the team prefix; "
                "publish to a prefix that only transcripts writes to"
            )
    return found


@contextlib.contextmanager
def _pinned(store: Store) -> Iterator[Path]:
    """The current version, kept from the nightly cleanup while it is read."""
    version = store.current()
    assert version is not None
    fd = pin(version)
    try:
        yield version
    finally:
        if fd is not None:
            os.close(fd)
