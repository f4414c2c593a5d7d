"""Reading `opencode.db` (and channel databases like `opencode-stable.db`): one outcome per session.

Every statement is fixed text with bound values (the only variable SQL is choosing a column or `NULL` for an
optional column, from the fixed tables below). Sizes are checked in SQL before payloads are fetched.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from extractors.bounded import Limits, parse_json, sqlite_db
from extractors.bounded.sqlite_db import ReadOnlyDb, open_readonly
from extractors.discovery import walk_files
from extractors.errors import RejectCode, RejectError
from extractors.model import Loaded, Outcome, Rejected, Source
from extractors.opencode.records import MessageRow, PartRow, SessionRow, build_session, session_id_of

# The columns read, per table. A database without a REQUIRED one is not OpenCode's (a fork, a future version, the
# non-canonical shuv1337/oc-manager `test.db` with `created_at`): one source_unreadable naming what is missing.
REQUIRED: dict[str, tuple[str, ...]] = {
    "session": ("id", "parent_id", "time_created"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
}
# Read when present, NULL otherwise (trimmed copies such as usage-dashboard's lack `version`, `time_archived`).
OPTIONAL_SESSION = ("title", "directory", "version", "time_updated", "time_archived")


def is_database_name(name: str) -> bool:
    """`opencode.db` or a channel variant `opencode-<channel>.db` (not the `-wal` / `-shm` sidecars)."""
    return name == "opencode.db" or (name.startswith("opencode-") and name.endswith(".db"))


def databases(root: Path) -> list[Path]:
    """The OpenCode databases directly in a data directory, sorted, each real file once (`discovery.walk_files`:
    a loop, a dangling link, a FIFO named `opencode.db` is skipped and counted; a copy reached by a second name
    through a symlink or hard link is listed once); symlinks leading outside are not listed."""
    return [Path(path) for path, _ in walk_files(root, lambda name, _f, _d: is_database_name(name), max_depth=0)]


def _root_of(source: Source) -> Path:
    return Path(source.root) if source.root else Path(source.path).parent


def _check_schema(db: ReadOnlyDb) -> frozenset[str]:
    """The session columns present; raises RejectError(source_unreadable) naming what is missing."""
    missing: list[str] = []
    session_columns: frozenset[str] = frozenset()
    for table, needed in REQUIRED.items():
        columns = db.table_columns(table)
        if columns is None:
            missing.append(f"table {table}")
            continue
        missing.extend(f"{table}.{c}" for c in needed if c not in columns)
        if table == "session":
            session_columns = columns
    if missing:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"not an OpenCode database: missing {', '.join(missing)}")
    return session_columns


def read_database(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per session (and one rejection per group of messages whose session row is missing).

    Raises RejectError(source_unreadable | limit_exceeded) for the whole database, DeferError when locked/moved.
    """
    with open_readonly(source.path, _root_of(source), limits) as db:
        present = _check_schema(db)
        part_ids_unique = _unique_part_ids(db)
        optional = ", ".join(c if c in present else f"NULL AS {c}" for c in OPTIONAL_SESSION)
        sessions = list(
            db.rows(f"SELECT id, parent_id, time_created, {optional} FROM session ORDER BY time_created, id")
        )
        for raw in sessions:
            outcome = _read_session(db, source, raw, limits, part_ids_unique)
            db.verify_unchanged()  # immutable reads: nothing handed out from a file that moved under us
            yield outcome
        orphans = db.rows(
            "SELECT session_id, count(*) FROM message WHERE session_id NOT IN (SELECT id FROM session)"
            " GROUP BY session_id ORDER BY session_id"
        )
        for session_id, count in orphans:
            yield Rejected(
                source,
                RejectCode.INCONSISTENT_SOURCE,
                f"{count} message rows refer to session {session_id!r}, which has no row in the session table",
                session_hint=session_id_of(str(session_id)),
            )


def _read_session(
    db: ReadOnlyDb, source: Source, raw: tuple[Any, ...], limits: Limits, part_ids_unique: bool
) -> Outcome:
    native = raw[0]
    hint = session_id_of(str(native))
    try:
        if not isinstance(native, str) or not native:
            raise RejectError(RejectCode.BAD_SHAPE, f"session id {native!r} is not text")
        _check_size(db, native, limits)
        time_created, title, directory, version, time_updated, time_archived = raw[2:8]
        row = SessionRow(
            native,
            _text(raw[1]),
            _text(title),
            _text(directory),
            _text(version),
            time_created,
            time_updated,
            time_archived,
        )
        messages = []
        for mid, created, data in db.all_rows(
            "SELECT id, time_created, CAST(data AS BLOB) FROM message WHERE session_id = ? ORDER BY time_created, id",
            (native,),
        ):
            if type(mid) is not str:
                _id(mid, "message")  # raises
            messages.append(MessageRow(mid, created, _payload(data, "message", mid)))
        parts = None
        if part_ids_unique:  # build_session orders the parts: SQLite need not sort them (and their payloads)
            try:
                parts = _parts(db, PARTS_AS_STORED, native)
            except RejectError:
                parts = None  # read again in order: the row named is the first bad one in that order, as always
        if parts is None:
            parts = _parts(db, PARTS_IN_ORDER, native)
        return Loaded(source, build_session(row, messages, parts, limits))
    except RejectError as exc:
        return Rejected(source, exc.code, exc.detail, exc.line, exc.offset, exc.session_hint or hint)


PARTS_IN_ORDER = "SELECT id, message_id, CAST(data AS BLOB) FROM part WHERE session_id = ? ORDER BY message_id, id"
PARTS_AS_STORED = "SELECT id, message_id, CAST(data AS BLOB) FROM part WHERE session_id = ?"


def _parts(db: ReadOnlyDb, sql: str, native: str) -> list[PartRow]:
    parts = []
    # `all_rows`: the ids decoded in C (~36k part and message ids in 50 MB), the rows fetched at once
    for pid, mid, data in db.all_rows(sql, (native,)):
        if type(pid) is not str or type(mid) is not str:
            _id(pid, "part")  # raises, as does
            _id(mid, "part message")
        parts.append(PartRow(pid, mid, _payload(data, "part", pid)))
    return parts


def _unique_part_ids(db: ReadOnlyDb) -> bool:
    """Whether `part.id` is the table's whole primary key (OpenCode's schema): two parts then never share an id, so
    build_session's (message_id, id) order is one order whatever order the rows come in."""
    return [r[0] for r in db.rows("SELECT name FROM pragma_table_info(?) WHERE pk > 0", ("part",))] == ["id"]


def _id(value: Any, what: str) -> str:
    """Ids are TEXT in OpenCode's schema; anything else (a hand-edited row) is a bad shape, not a crash."""
    if not isinstance(value, str):
        raise RejectError(RejectCode.BAD_SHAPE, f"{what} id {value!r} is not text")
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _check_size(db: ReadOnlyDb, native: str, limits: Limits) -> None:
    """Count and measure the session's rows in SQL, looking at no more than max_records + 1 of them.

    Per field: max_document_bytes (one message/part JSON, like one file of the legacy storage); per session:
    max_records rows (messages + parts) and max_conversation_bytes of payload. Bytes are counted as bytes
    (`CAST(data AS BLOB)`), so multibyte UTF-8 text is not undercounted. Raises RejectError(limit_exceeded).
    """
    found = db.one(
        "SELECT count(*), total(n), coalesce(max(n), 0) FROM ("
        " SELECT length(CAST(data AS BLOB)) AS n FROM message WHERE session_id = ?1"
        " UNION ALL SELECT length(CAST(data AS BLOB)) FROM part WHERE session_id = ?1"
        " LIMIT ?2)",
        (native, limits.max_records + 1),
    )
    count, total, largest = found if found else (0, 0, 0)
    if count > limits.max_records:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} messages + parts")
    if largest > limits.max_document_bytes:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"a message/part is {largest} bytes, over max_document_bytes")
    if total > limits.max_conversation_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"session payload is {int(total)} bytes, over max_conversation_bytes={limits.max_conversation_bytes}",
        )


def _payload(data: Any, table: str, row_id: Any) -> Any:
    if type(data) is not bytes:
        raise RejectError(RejectCode.BAD_SHAPE, f"{table} {row_id} has no data")
    try:
        return parse_json(data)
    except RejectError as exc:
        raise RejectError(exc.code, f"{table} {row_id}: {exc.detail}") from exc


def contains_session(root: Path, native_id: str, limits: Limits) -> bool:
    """Whether a readable OpenCode database in `root` holds session `native_id` (the db copy wins over JSON).

    A database that cannot be read at all (RejectError) loads no session, so it holds none. DeferError propagates:
    a locked database cannot decide, and the JSON unit waits with it.
    """
    for path in databases(root):
        size, mtime = sqlite_db.fingerprint(path)
        if native_id in _session_ids(str(path), str(root), size, mtime, limits):
            return True
    return False


@functools.lru_cache(maxsize=8)
def _session_ids(path: str, root: str, size: int, mtime_ns: int, limits: Limits) -> frozenset[str]:
    """The session ids of one database state (keyed by its fingerprint, so thousands of legacy units open it once)."""
    try:
        with open_readonly(path, root, limits) as db:
            _check_schema(db)
            return frozenset(str(row[0]) for row in db.rows("SELECT id FROM session"))
    except RejectError:
        return frozenset()
