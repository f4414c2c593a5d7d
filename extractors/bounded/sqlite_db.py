"""Read-only, confined, snapshot-consistent access to a SQLite source (OpenCode's `opencode.db`).

How a source database is opened, and why (measured with SQLite 3.40, the version CI runs):
- Always `file:<realpath>?mode=ro` (`uri=True`), plus `PRAGMA query_only` and `trusted_schema=OFF`: no write, no
  migration, no write lock, and no function in a hostile schema (views/triggers) runs unsafely.
- WAL-mode databases (header bytes 18/19 == 2) need the `-shm` wal-index to be read. A `mode=ro` connection
  CREATES a missing `-shm` and an empty `-wal` beside the database, and with both present it still WRITES the
  `-shm` (read marks, and a rebuilt index after a writer died: seen changing its bytes and mtime), so a WAL
  database is never opened in place with its sidecars:
  - no `-wal`, or an empty one (with or without `-shm`): everything is in the main file (a clean shutdown
    checkpoints and deletes the `-wal`), so it is read with `immutable=1` (no locks, no sidecar files), and its
    size/mtime are checked to be unchanged before each result is handed out (`ReadOnlyDb.verify_unchanged`); a
    change defers the source.
  - a non-empty `-wal` (OpenCode running, or a writer that committed with autocheckpoint off and died): the
    database and its `-wal` (never the `-shm`) are copied into a private temporary directory, deleted afterwards,
    and the copy is read: SQLite rebuilds the wal-index from the copied `-wal`, so every committed transaction in
    it is seen and nothing beside the source is touched. The copy is bounded by `max_source_bytes` (checked on the
    stat and again while copying), and taken consistently: the originals' size and mtime are compared before and
    after; on a change it is taken again (`COPY_ATTEMPTS`), then the source is deferred (changed_during_read).
    A writer appending meanwhile is harmless: frames after the last commit frame in the copy are ignored.
- Everything is read in ONE read transaction (`BEGIN` ... `ROLLBACK`), so all rows come from the snapshot taken at
  the first SELECT while OpenCode keeps writing.
- The real path must lie inside the data directory (symlinks resolved); `-wal` / `-shm` that are symlinks are
  refused, since SQLite would follow them.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from extractors.bounded import Limits
from extractors.discovery import confined
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError

SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_SECONDS = 5.0
COPY_ATTEMPTS = 3  # a database copied while OpenCode writes is taken again this often, then deferred
_COPY_CHUNK = 1 << 20
# Errors that mean "someone holds a lock right now": read again next run.
_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_RECOVERY", "SQLITE_BUSY_SNAPSHOT"})


def sidecars(path: Path) -> tuple[Path, Path]:
    """The `-wal` and `-shm` files SQLite keeps beside a database."""
    return Path(f"{path}-wal"), Path(f"{path}-shm")


def fingerprint(path: Path) -> tuple[int, int]:
    """(total size, newest mtime_ns) of a database and its `-wal` (writes land in the WAL first). Stat only."""
    st = os.stat(path)
    size, mtime = st.st_size, st.st_mtime_ns
    wal, _ = sidecars(path)
    try:
        wst = os.stat(wal)
    except FileNotFoundError:
        return size, mtime
    return size + wst.st_size, max(mtime, wst.st_mtime_ns)


@dataclass(slots=True)
class ReadOnlyDb:
    """One open read transaction on a source database; SQL goes through `rows` with bound values only."""

    connection: sqlite3.Connection
    guarded: Path | None  # the original file whose stat must not move (immutable reads), else None
    guard_stat: tuple[int, int] | None

    def rows(self, sql: str, params: Iterable[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """Run one statement with bound `params` and stream its rows."""
        cursor = self.connection.execute(sql, tuple(params))
        try:
            yield from cursor
        finally:
            cursor.close()

    def all_rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one statement with bound `params`, as `rows` streams them, in a list: for a statement of many
        rows with text columns. Its text is decoded in C (`str`, the lenient text factory's answer for valid UTF-8;
        the factory is a Python call a value, ~0.25 us); when some is not valid UTF-8 (sqlite3 raises
        OperationalError), the statement is run again through `rows`, as before."""
        connection = self.connection
        lenient = connection.text_factory
        connection.text_factory = str
        try:
            cursor = connection.execute(sql, tuple(params))
            try:
                found: list[tuple[Any, ...]] = cursor.fetchall()
                return found
            finally:
                cursor.close()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):  # only `Could not decode to UTF-8 column ...` is read again, leniently
                raise
        finally:
            connection.text_factory = lenient
        return list(self.rows(sql, params))

    def one(self, sql: str, params: Iterable[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a statement, or None."""
        cursor = self.connection.execute(sql, tuple(params))
        try:
            row: tuple[Any, ...] | None = cursor.fetchone()
            return row
        finally:
            cursor.close()

    def table_columns(self, table: str) -> frozenset[str] | None:
        """The column names of `table` when it exists as a TABLE (not a view), else None."""
        found = self.one("SELECT type FROM sqlite_master WHERE name = ?", (table,))
        if found is None or found[0] != "table":
            return None
        return frozenset(str(r[0]) for r in self.rows("SELECT name FROM pragma_table_info(?)", (table,)))

    def verify_unchanged(self) -> None:
        """For immutable reads: raise DeferError(changed_during_read) if the file moved since it was opened."""
        if self.guarded is None:
            return
        if _stat_key(self.guarded) != self.guard_stat:
            raise DeferError(DeferCode.CHANGED_DURING_READ, "database file changed while it was read")


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _check_file(path: Path, root: Path, limits: Limits) -> tuple[Path, bool]:
    """Confinement, type, size and header checks. Returns (real path, is WAL mode). Raises RejectError."""
    if not confined(path, root):
        raise RejectError(RejectCode.SOURCE_UNREADABLE, "database resolves outside the data directory (symlink)")
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot stat database: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise RejectError(RejectCode.SOURCE_UNREADABLE, "database is not a regular file")
    for sidecar in sidecars(real):
        if sidecar.is_symlink():
            raise RejectError(RejectCode.SOURCE_UNREADABLE, f"{sidecar.name} is a symlink; not followed")
        if not os.path.lexists(sidecar):
            continue  # no -wal / -shm: nothing beside the database to copy
        if not stat.S_ISREG(os.lstat(sidecar).st_mode):  # a FIFO there would block the copy
            raise RejectError(RejectCode.SOURCE_UNREADABLE, f"{sidecar.name} is not a regular file")
    total, _ = fingerprint(real)
    if total > limits.max_source_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"database and -wal are {total} bytes, over max_source_bytes={limits.max_source_bytes}",
        )
    try:
        with open(real, "rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot read database: {exc.strerror}") from exc
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise RejectError(RejectCode.SOURCE_UNREADABLE, "not a SQLite database (bad header)")
    # File format write/read version 2 = WAL (sqlite.org/fileformat.html, offsets 18 and 19).
    return real, header[18] == 2 or header[19] == 2


def _uri(path: Path, *, immutable: bool) -> str:
    return f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")


@contextmanager
def open_readonly(path: str | Path, root: str | Path, limits: Limits) -> Iterator[ReadOnlyDb]:
    """Open a source database read-only inside one read transaction (see the module docstring).

    Raises RejectError(source_unreadable | limit_exceeded) for a database that cannot be read at all (outside the
    root, not SQLite, corrupt) and DeferError(write_in_progress | changed_during_read) when it is locked or moved.
    SQLite errors raised by queries inside the block are classified the same way.
    """
    real, wal_mode = _check_file(Path(path), Path(root), limits)
    wal, _ = sidecars(real)
    with tempfile.TemporaryDirectory(prefix="transcripts-sqlite-") as scratch:
        target, immutable, guarded = real, False, None
        if wal_mode:
            wal_size = _stat_key(wal)
            if wal_size is None or wal_size[0] == 0:
                immutable, guarded = True, real  # everything is in the main file; mode=ro would touch sidecars
            else:
                target = _private_copy(real, wal, Path(scratch), limits)
        guard_stat = _stat_key(real) if guarded else None
        try:
            connection = sqlite3.connect(
                _uri(target, immutable=immutable), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS
            )
        except sqlite3.Error as exc:
            raise _classify(exc) from exc
        # TEXT that is not valid UTF-8 would make sqlite3 raise for the whole database; metadata text is decoded
        # leniently (U+FFFD). Payloads are selected as BLOBs and go through bounded.parse_json (invalid_utf8).
        connection.text_factory = _lenient_text
        try:
            try:
                connection.execute("PRAGMA query_only = ON")
                connection.execute("PRAGMA trusted_schema = OFF")
                connection.execute("BEGIN")
                yield ReadOnlyDb(connection, guarded, guard_stat)
            except sqlite3.ProgrammingError:
                raise  # our own SQL is wrong: a bug, not a property of the source
            except sqlite3.Error as exc:
                raise _classify(exc) from exc
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            connection.close()


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _private_copy(real: Path, wal: Path, scratch: Path, limits: Limits) -> Path:
    """Copy a database and its non-empty `-wal` into `scratch`, consistently (see the module docstring)."""
    target = scratch / "copy.db"
    for _attempt in range(COPY_ATTEMPTS):
        before = (_stat_key(real), _stat_key(wal))
        try:
            budget = _copy_bounded(real, target, limits.max_source_bytes)
            _copy_bounded(wal, Path(f"{target}-wal"), budget)
        except OSError as exc:
            raise RejectError(
                RejectCode.SOURCE_UNREADABLE, f"cannot copy database for reading: {exc.strerror}"
            ) from exc
        if (_stat_key(real), _stat_key(wal)) == before:
            return target
    raise DeferError(DeferCode.CHANGED_DURING_READ, f"database changed while it was copied ({COPY_ATTEMPTS} tries)")


def _copy_bounded(source: Path, target: Path, budget: int) -> int:
    """Copy `source` to `target` (replacing it) reading at most `budget` bytes; the budget left. Raises
    RejectError(limit_exceeded) when the file grew past it while it was copied."""
    left = budget
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(min(_COPY_CHUNK, left + 1)):
            left -= len(chunk)
            if left < 0:
                raise RejectError(
                    RejectCode.LIMIT_EXCEEDED,
                    f"database and -wal grew past max_source_bytes={budget} while they were copied",
                )
            dst.write(chunk)
    return left


def _classify(exc: sqlite3.Error) -> RejectError | DeferError:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name in _BUSY or "locked" in str(exc):
        return DeferError(DeferCode.WRITE_IN_PROGRESS, f"database is locked: {exc}")
    return RejectError(RejectCode.SOURCE_UNREADABLE, f"SQLite cannot read it: {name or type(exc).__name__}: {exc}")
