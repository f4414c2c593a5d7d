"""Reading Goose's `sessions.db`: one read-only snapshot, one outcome per session (docs/agents/goose.md).

Opened through `extractors.bounded.sqlite_db` (read-only, confined, WAL handled without a byte written beside it,
everything in one read transaction). Every statement is fixed text with bound values; the only variable SQL is a
column name or `NULL AS <name>`, chosen from the fixed tables in `extractors/goose/tables.py` after reading the
schema, since columns drift between versions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from extractors.bounded import Limits, parse_json
from extractors.bounded.sqlite_db import ReadOnlyDb, open_readonly
from extractors.errors import RejectCode, RejectError
from extractors.goose.parse import LedgerRow, MessageTuple, SessionRow, build_session, session_id_of
from extractors.goose.tables import LEDGER_COLUMNS, OPTIONAL_SESSION, REQUIRED
from extractors.model import Loaded, Outcome, Rejected, Source

DATABASE_NAME = "sessions.db"


def check_schema(db: ReadOnlyDb) -> dict[str, frozenset[str]]:
    """The columns of each table read; raises RejectError(unsupported_format) naming what is missing.

    docs/agents/goose.md "Schema versions": a database without a required table or column is a Goose version (or
    a fork) this reader does not know; it is one counted rejection, never a guess.
    """
    missing: list[str] = []
    found: dict[str, frozenset[str]] = {}
    for table, needed in REQUIRED.items():
        columns = db.table_columns(table)
        if columns is None:
            missing.append(f"table {table}")
            continue
        missing.extend(f"{table}.{c}" for c in needed if c not in columns)
        found[table] = columns
    if missing:
        raise RejectError(
            RejectCode.UNSUPPORTED_FORMAT, f"not a Goose sessions.db this reads: missing {', '.join(missing)}"
        )
    ledger = db.table_columns("usage_ledger")
    if ledger is not None and all(c in ledger for c in LEDGER_COLUMNS):
        found["usage_ledger"] = ledger
    return found


def _select(names: tuple[str, ...], present: frozenset[str]) -> str:
    return ", ".join(n if n in present else f"NULL AS {n}" for n in names)


def _schema_version(db: ReadOnlyDb) -> str:
    """`schema_version`'s highest version as `v<n>` (the writer version of the census), "" when it has none."""
    columns = db.table_columns("schema_version")
    if columns is None or "version" not in columns:
        return ""
    row = db.one("SELECT max(version) FROM schema_version")
    return f"v{row[0]}" if row and isinstance(row[0], int) else ""


def read_database(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per session row, plus one rejection per group of messages whose session row is missing.

    Raises RejectError(source_unreadable | unsupported_format | limit_exceeded) for the whole database, and
    DeferError when it is locked or moves while read.
    """
    root = Path(source.root) if source.root else Path(source.path).parent
    with open_readonly(source.path, root, limits) as db:
        tables = check_schema(db)
        version = _schema_version(db)
        session_sql = (
            f"SELECT {', '.join(REQUIRED['sessions'])}, {_select(OPTIONAL_SESSION, tables['sessions'])}"
            " FROM sessions ORDER BY created_at, id"
        )
        names = (*REQUIRED["sessions"], *OPTIONAL_SESSION)
        rows = [dict(zip(names, raw, strict=True)) for raw in db.rows(session_sql)]
        ledgers = _Ledgers(db) if "usage_ledger" in tables else None
        metadata_seen: dict[bytes, Any] = {}
        for columns in rows:
            outcome = _read_session(db, source, columns, tables, version, limits, ledgers, metadata_seen)
            db.verify_unchanged()
            yield outcome
        orphans = db.rows(
            "SELECT session_id, count(*) FROM messages WHERE session_id NOT IN (SELECT id FROM sessions)"
            " GROUP BY session_id ORDER BY session_id"
        )
        for session_id, count in orphans:
            yield Rejected(
                source,
                RejectCode.INCONSISTENT_SOURCE,
                f"{count} message rows refer to session {session_id!r}, which has no row in the sessions table",
                session_hint=session_id_of(str(session_id)),
            )


def _read_session(
    db: ReadOnlyDb,
    source: Source,
    columns: dict[str, Any],
    tables: dict[str, frozenset[str]],
    version: str,
    limits: Limits,
    ledgers: _Ledgers | None,
    metadata_seen: dict[bytes, Any],
) -> Outcome:
    native = columns["id"]
    try:
        if not isinstance(native, str) or not native:
            raise RejectError(RejectCode.BAD_SHAPE, f"session id {native!r} is not text")
        has_metadata = "metadata_json" in tables["messages"]
        raw = _message_rows(db, native, has_metadata, limits)
        config = columns.get("model_config_json")
        if isinstance(config, str):
            try:
                columns["model_config_json"] = parse_json(config.encode("utf-8", "surrogatepass"))
            except RejectError:
                columns["model_config_json"] = None  # the model name is optional; a bad config is not a bad session
        row = SessionRow(native, columns)
        if ledgers is not None and not ledgers.read:
            # The first session to reach the ledger reads it once its rows are parsed, as every session did.
            session = build_session(row, _messages(raw, metadata_seen), ledgers.of(native), version, limits)
        else:
            ledger = ledgers.of(native) if ledgers is not None else None
            try:
                # Each row parsed as build_session comes to it: one message's JSON alive at a time.
                session = build_session(row, _parsed(raw, metadata_seen) if raw else [], ledger, version, limits)
            except RejectError:
                # The rejection of the rows parsed first (a JSON error before any other the rows have).
                session = build_session(row, _messages(raw, metadata_seen), ledger, version, limits)
    except RejectError as exc:
        hint = session_id_of(native) if isinstance(native, str) and native else None
        return Rejected(source, exc.code, exc.detail, session_hint=exc.session_hint or hint)
    return Loaded(source, session)


class _Ledgers:
    """Every session's usage_ledger rows in `id` order, read in ONE statement the first time a session asks.

    Goose's schema has no index on usage_ledger.session_id, so `WHERE session_id = ?` scanned the whole ledger
    once per session (0.90 s of the reader's 2.1 s on the 50 MB bench corpus: 935 sessions x 27k rows). The join
    matches as that statement did: `l.session_id` on the left keeps its column's affinity and collation, `+id`
    (without affinity) stands for the bound session id, and `DISTINCT ... COLLATE BINARY` gives each ledger row
    once per distinct id, as each session's own statement did (checked against the per-session statement for
    ledger and session ids of every affinity, NOCASE on either side, duplicate session rows). Read lazily, so a
    database whose ledger cannot be read fails at the same session as before (the first to reach its ledger).
    """

    __slots__ = ("_by_session", "_db")

    @property
    def read(self) -> bool:
        """Whether the ledger was read (by the first session that asked)."""
        return self._by_session is not None

    def __init__(self, db: ReadOnlyDb) -> None:
        self._db = db
        self._by_session: dict[Any, list[LedgerRow]] | None = None

    def of(self, native: str) -> list[LedgerRow]:
        if self._by_session is None:
            found: dict[Any, list[LedgerRow]] = {}
            # `all_rows`: its two text columns (the session id and the model) decoded in C, ~54k values in 50 MB
            for row in self._db.all_rows(
                "SELECT s.id, l.id, l.created_timestamp, l.model, l.input_tokens, l.output_tokens,"
                " l.cache_read_tokens, l.cache_write_tokens, l.cost"
                " FROM usage_ledger AS l JOIN (SELECT DISTINCT +id COLLATE BINARY AS id FROM sessions) AS s"
                " ON l.session_id = s.id ORDER BY l.id"
            ):
                found.setdefault(row[0], []).append(row)
            self._by_session = found
        return self._by_session.get(native, [])


# A metadata_json parsed once per database: Goose writes a few short values again and again (three in the bench
# corpus's 62,609 rows). Short ones only, and not too many: a cache must not hold a database's worth of them.
_METADATA_CACHED_BYTES = 256
_METADATA_CACHED_VALUES = 1024
_UNSEEN = object()
# messages.role as two columns: 1 for 'user', 2 for 'assistant', else 0 and the role as stored. The two usual roles
# are then not decoded by the connection's lenient text factory (a Python call for each of ~60k rows in 50 MB).
# `COLLATE BINARY`: the column's own collation (NOCASE in some fork) must not make 'USER' a user, as it did not.
_ROLE = (
    "CASE WHEN role = 'user' COLLATE BINARY THEN 1 WHEN role = 'assistant' COLLATE BINARY THEN 2 ELSE 0 END,"
    " CASE WHEN role = 'user' COLLATE BINARY OR role = 'assistant' COLLATE BINARY THEN NULL ELSE role END"
)


def _message_rows(db: ReadOnlyDb, native: str, has_metadata: bool, limits: Limits) -> list[tuple[Any, ...]]:
    """The session's message rows in `id` order, content and metadata as bytes (not parsed yet), measured as they
    come: no more than max_records + 1 rows read, and the reading stops at the first row past a limit, with the
    rejection `_size_error` gives (the session measured in SQL, as it was before every read)."""
    meta = "CAST(metadata_json AS BLOB)" if has_metadata else "NULL"
    most, largest, budget = limits.max_records, limits.max_document_bytes, limits.max_conversation_bytes
    found: list[tuple[Any, ...]] = []
    total = 0
    checking = True
    for row in db.rows(
        f"SELECT id, {_ROLE}, CAST(content_json AS BLOB), created_timestamp, {meta}"
        " FROM messages WHERE session_id = ?1 ORDER BY id LIMIT ?2",
        (native, most + 1),
    ):
        content = row[3]
        if content is not None and checking:  # the SQL's length(...) + length(...) is NULL without content
            metadata = row[5]
            size = len(content) if metadata is None else len(content) + len(metadata)
            total += size
            if size > largest or total > budget:
                error = _size_error(db, native, has_metadata, limits)
                if error is not None:
                    raise error
                checking = False
        found.append(row)
    if len(found) > most and checking:
        error = _size_error(db, native, has_metadata, limits)
        if error is not None:
            raise error
    return found


def _messages(rows: list[tuple[Any, ...]], metadata_seen: dict[bytes, Any]) -> list[MessageTuple]:
    """Every row parsed (`_parsed`), in order: raises the first row's error."""
    return list(_parsed(rows, metadata_seen))


def _parsed(rows: list[tuple[Any, ...]], metadata_seen: dict[bytes, Any]) -> Iterator[MessageTuple]:
    """The rows with their content and metadata parsed (`_payload`'s answers: orjson first, `_payload` itself for
    what orjson refuses, so an error is the same), as MessageRow's fields in a plain tuple."""
    loads = orjson.loads
    for mid, usual, role, content, created, metadata in rows:
        if usual:
            role = "user" if usual == 1 else "assistant"
        try:
            parsed = loads(content)
        except orjson.JSONDecodeError:
            parsed = _payload(content, mid)
        if metadata is not None:
            known = metadata_seen.get(metadata, _UNSEEN)
            if known is _UNSEEN:
                known = _payload(metadata, mid, " metadata_json")
                if len(metadata) <= _METADATA_CACHED_BYTES and len(metadata_seen) < _METADATA_CACHED_VALUES:
                    metadata_seen[metadata] = known
            metadata = known
        # messages.message_id (v7) is not read: no field comes from it
        yield (mid, role, parsed, created, metadata, None, None)


def _size_error(db: ReadOnlyDb, native: str, has_metadata: bool, limits: Limits) -> RejectError | None:
    """Count and measure the session's message rows in SQL (no more than max_records + 1 of them looked at).

    Per row: max_document_bytes (one message's content + metadata); per session: max_records rows and
    max_conversation_bytes of payload, counted as bytes. The RejectError(limit_exceeded) of the first limit
    passed, in that order (records, a row, the session), else None.
    """
    metadata = " + coalesce(length(CAST(metadata_json AS BLOB)), 0)" if has_metadata else ""
    found = db.one(
        "SELECT count(*), total(n), coalesce(max(n), 0) FROM ("
        f" SELECT length(CAST(content_json AS BLOB)){metadata} AS n FROM messages WHERE session_id = ?1 LIMIT ?2)",
        (native, limits.max_records + 1),
    )
    count, total, largest = found if found else (0, 0, 0)
    if count > limits.max_records:
        return RejectError(RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} messages")
    if largest > limits.max_document_bytes:
        return RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"a message is {largest} bytes, over max_document_bytes={limits.max_document_bytes}",
        )
    if total > limits.max_conversation_bytes:
        return RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"session payload is {int(total)} bytes, over max_conversation_bytes={limits.max_conversation_bytes}",
        )
    return None


def _payload(data: Any, mid: Any, column: str = "") -> Any:
    """Message `mid`'s content_json (or, with column " metadata_json", its metadata_json: None when absent, before
    v3 or NULL, is not asked for) parsed. Unreadable metadata rejects the session: it holds `userVisible`, and
    without it hidden text could pass for a person's turn. The detail is made only for a rejection."""
    if not isinstance(data, bytes):
        raise RejectError(RejectCode.BAD_SHAPE, f"message {mid}{column} has no content_json")
    try:
        return parse_json(data)
    except RejectError as exc:
        raise RejectError(exc.code, f"message {mid}{column}: {exc.detail}") from exc
