"""Move a corpus to another data dir, under its writer lock: by renames on one filesystem, else by a copy; resumable.

A data dir of its own on the target's filesystem is renamed to the target in one step. Otherwise the corpus's
entries go into a staging folder beside the target (`.<target>.moving`, on the target's filesystem):
each is renamed there, or, across filesystems (EXDEV), copied file by file (a file is written under a temporary
name, fsynced and renamed, so a file under its own name is whole; folders 0700, files 0600, symlinks as they are:
`parquet -> versions/v000042` stays relative). The staging folder is then renamed to the target in one step, and
only then are the source's copied entries removed. Marks say what is under way, so that a move killed at any
moment finishes when run again: `.moving-to` in the source names the target, `.moved-from` in the staging folder
(and in the target, until the source is cleared) names the source. The repository's own files (`README.md`,
`sample/`) stay where they are: only the corpus moves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from sinks.failpoints import reach
from sinks.files import DIR_MODE, FILE_MODE, fsync_path, private_dir
from sinks.lock import writer_lock

MOVING_TO = ".moving-to"  # in the source while a move is under way: the target
MOVED_FROM = ".moved-from"  # in the staging folder, then the target, until the source is cleared: the source
PART = ".transcripts-part"  # a file being copied (renamed to its own name once whole)
REPOSITORY_NAMES = frozenset({"README.md", "sample"})  # a checkout's data/ keeps these (as flows.etl.datahome says)
STAYS = REPOSITORY_NAMES | {".lock", MOVING_TO}
CORPUS_NAMES = ("warehouse.duckdb", "versions", "parquet", "ledger.jsonl")


class MoveError(ValueError):
    """The move cannot be done as asked; the message says why and what to do (nothing was changed)."""


@dataclass(frozen=True, slots=True)
class Moved:
    source: Path
    target: Path
    how: str  # "renamed" (one filesystem), "copied" (across filesystems) or "finished" (a killed move's last step)
    entries: tuple[str, ...]  # the names that moved


def staging_of(target: Path) -> Path:
    return target.parent / f".{target.name}.moving"


def _rename(src: Path, dst: Path) -> None:
    """os.rename, by name so that a test can inject a fault (EXDEV: another filesystem)."""
    os.rename(src, dst)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def _write_mark(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, (text + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_path(path.parent)


def _entries(source: Path) -> list[str]:
    return sorted(name for name in os.listdir(source) if name not in STAYS)


def move_corpus(source: Path, target: Path, wait_seconds: float) -> Moved:
    """Move the corpus at `source` to `target` (absent or an empty folder). Raises MoveError (nothing changed),
    LockBusy (a run is writing the source), OSError (a disk error: run it again to finish)."""
    source, target = Path(os.path.abspath(source)), Path(os.path.abspath(target))
    _check(source, target)
    if not source.exists() and _read(target / MOVED_FROM) == str(source):
        os.unlink(target / MOVED_FROM)  # killed after the source was cleared: only this mark was left
        return Moved(source, target, "finished", ())
    if not source.is_dir():
        raise MoveError(f"{source} is not a folder")
    with writer_lock(source, wait_seconds):
        if _read(target / MOVED_FROM) == str(source):
            return Moved(source, target, "finished", tuple(_clear_source(source, target)))
        under_way = _read(source / MOVING_TO)
        if under_way is not None and under_way != str(target):
            raise MoveError(
                f"a move of {source} to {under_way} is under way; finish it first: "
                f"transcripts data move {_q(source)} {_q(Path(under_way))}"
            )
        staging = staging_of(target)
        resumed = staging.exists()
        if resumed and _read(staging / MOVED_FROM) != str(source):
            raise MoveError(f"{staging} is left by another move (not from {source}); remove it or finish that move")
        if not resumed and not any(os.path.lexists(source / name) for name in CORPUS_NAMES):
            raise MoveError(f"no corpus in {source} (no warehouse.duckdb, versions/, parquet or ledger.jsonl)")
        if target.exists() and any(target.iterdir()):
            raise MoveError(f"{target} is not empty: the corpus is moved only into an empty or new folder")
        if not resumed and under_way is None and _rename_whole(source, target):
            return Moved(source, target, "renamed", tuple(_entries(target)))
        _write_mark(source / MOVING_TO, str(target))
        if not resumed:
            private_dir(staging)
            _write_mark(staging / MOVED_FROM, str(source))
        for name in os.listdir(staging):  # a copy killed mid-file
            if name.endswith(PART):
                os.unlink(staging / name)
        names = _entries(source)
        copied = False
        for name in names:
            src, dst = source / name, staging / name
            if os.path.lexists(dst):  # a killed copy's (partial) entry: brought up to date with the source
                _sync(src, dst)
                copied = True
                continue
            try:
                _rename(src, dst)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                _sync(src, dst)
                copied = True
            reach("move_entry")
        fsync_path(staging)
        fsync_path(source)
        try:
            _rename(staging, target)  # an empty target folder is replaced
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise MoveError(f"{target} is not empty any more; the corpus is ready in {staging}") from None
            raise
        fsync_path(target.parent)
        reach("move_renamed")
        _clear_source(source, target)
    return Moved(source, target, "copied" if copied else "renamed", tuple(names))


def _rename_whole(source: Path, target: Path) -> bool:
    """A data dir of its own (nothing of a checkout in it) on the target's filesystem moves in one atomic rename;
    False when it cannot (other files stay behind, or another filesystem): then entry by entry."""
    if any(os.path.lexists(source / name) for name in REPOSITORY_NAMES):
        return False
    os.makedirs(target.parent, mode=DIR_MODE, exist_ok=True)
    try:
        _rename(source, target)  # an empty target folder is replaced
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    fsync_path(target.parent)
    fsync_path(source.parent)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target / ".lock")  # held by an open descriptor until the move returns; the place's, not moved
    return True


def _check(source: Path, target: Path) -> None:
    real_source, real_target = source.resolve(), target.resolve()
    if real_source == real_target:
        raise MoveError(f"{source} and {target} are the same folder")
    if real_target.is_relative_to(real_source) or real_source.is_relative_to(real_target):
        raise MoveError(f"{target} and {source} are inside one another; choose a folder outside the corpus")
    if target.exists() and not target.is_dir():
        raise MoveError(f"{target} is a file, not a folder")


def _clear_source(source: Path, target: Path) -> list[str]:
    """The last step, once the target holds the whole corpus: remove what is left of it in the source."""
    names = _entries(source)
    for name in names:
        _remove(source / name)
    fsync_path(source)
    if os.path.lexists(source / MOVING_TO):
        os.unlink(source / MOVING_TO)
    # The lock's file goes too (its flock is held by an open descriptor until the move returns); a data dir of its
    # own (not a checkout's data/, which keeps README.md and sample/) is then empty, and removed.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(source / ".lock")
    if not os.listdir(source):
        os.rmdir(source)
        fsync_path(source.parent)
    os.unlink(target / MOVED_FROM)
    fsync_path(target)
    return names


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _sync(src: Path, dst: Path) -> None:
    """Make `dst` a copy of `src` (file, folder or symlink), copying only files whose size or mtime differ."""
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        link = os.readlink(src)
        if not (dst.is_symlink() and os.readlink(dst) == link):
            _remove(dst)
            os.symlink(link, dst)
        return
    if stat.S_ISDIR(st.st_mode):
        if os.path.lexists(dst) and (dst.is_symlink() or not dst.is_dir()):
            _remove(dst)
        dst.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(dst, DIR_MODE)
        names = set(os.listdir(src))
        for name in sorted(names):
            _sync(src / name, dst / name)
        for name in os.listdir(dst):
            if name not in names:  # gone from the source since a killed copy, or a partial file
                _remove(dst / name)
        fsync_path(dst)
        return
    if not stat.S_ISREG(st.st_mode):
        raise MoveError(f"{src} is not a file, folder or symlink; move it out of the corpus and try again")
    if os.path.lexists(dst):
        have = os.lstat(dst)
        if stat.S_ISREG(have.st_mode) and (have.st_size, have.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
            return  # copied whole before the move was killed
        _remove(dst)
    part = dst.with_name(dst.name + PART)
    with (
        open(src, "rb") as reader,
        os.fdopen(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as out,
    ):
        shutil.copyfileobj(reader, out, 1 << 20)
        out.flush()
        os.fchmod(out.fileno(), FILE_MODE)
        os.fsync(out.fileno())
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(part, dst)
    reach("move_copy")


def _q(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))
