"""Reading Kiro CLI's `data.sqlite3` (and the Amazon Q Developer CLI's): one outcome per conversation.

Opened read-only in one snapshot through `extractors/bounded/sqlite_db.py` (nothing is ever written beside it).
Every statement is fixed text with bound values; each payload's size is checked in SQL before it is fetched.

Duplicates (docs/agents/kiro.md "One conversation, several rows"): `conversations_v2` is keyed by (folder,
conversation_id), so a conversation resumed in another folder has a row under each; the row with the newest
`updated_at` is read (ties: the smaller key), the others are counted as `row/conversations_v2/superseded`. A copy in
the older `conversations` table (keyed by folder only) of a conversation that has a `conversations_v2` row is
counted as `row/conversations/superseded`; between two legacy copies, which have no time, the one with more history
entries is read (ties: the smaller key).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extractors.bounded import Limits, parse_json
from extractors.bounded.sqlite_db import ReadOnlyDb, open_readonly
from extractors.errors import RejectCode, RejectError
from extractors.kiro.parse import RowFacts, build_session, session_id_of
from extractors.kiro.tables import LEGACY_COLUMNS, LEGACY_TABLE, V2_COLUMNS, V2_TABLE
from extractors.model import Disposition, Loaded, Outcome, Rejected, Source
from extractors.timeutil import from_epoch_ms

DATABASE_NAME = "data.sqlite3"


@dataclass(slots=True)
class _Legacy:
    key: str
    state: Any  # parsed JSON, or None when the row could not be read
    error: RejectError | None
    native: str | None


def _root_of(source: Source) -> Path:
    return Path(source.root) if source.root else Path(source.path).parent


def _tables(db: ReadOnlyDb) -> tuple[bool, bool]:
    """(has conversations_v2, has conversations), each with the columns read; raises source_unreadable when
    neither is there, naming what is missing."""
    missing: list[str] = []
    found: list[bool] = []
    for table, needed in ((V2_TABLE, V2_COLUMNS), (LEGACY_TABLE, LEGACY_COLUMNS)):
        columns = db.table_columns(table)
        if columns is None:
            missing.append(f"table {table}")
            found.append(False)
            continue
        absent = [c for c in needed if c not in columns]
        missing.extend(f"{table}.{c}" for c in absent)
        found.append(not absent)
    if not any(found):
        raise RejectError(
            RejectCode.SOURCE_UNREADABLE, f"not a Kiro CLI / Amazon Q database: missing {', '.join(missing)}"
        )
    return found[0], found[1]


def _fetch(db: ReadOnlyDb, sql: str, params: tuple[Any, ...], size: int, limits: Limits, what: str) -> Any:
    """The parsed value of one row, its size (measured in SQL) checked before the bytes are fetched."""
    if size > limits.max_conversation_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"{what} is {size} bytes, over max_conversation_bytes={limits.max_conversation_bytes}",
        )
    found = db.one(sql, params)
    raw = found[0] if found else None
    if not isinstance(raw, bytes):
        raise RejectError(RejectCode.BAD_SHAPE, f"{what} has no value")
    return parse_json(raw)


def read_database(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per conversation. Raises RejectError(source_unreadable | limit_exceeded) for the whole database
    and DeferError when it is locked or moved (see sqlite_db.open_readonly)."""
    with open_readonly(source.path, _root_of(source), limits) as db:
        has_v2, has_legacy = _tables(db)
        legacy = _legacy_rows(db, limits) if has_legacy else []
        seen: set[str] = set()
        if has_v2:
            rows = list(
                db.rows(
                    "SELECT key, conversation_id, created_at, updated_at, length(CAST(value AS BLOB))"
                    f" FROM {V2_TABLE} ORDER BY conversation_id, updated_at DESC, key"
                )
            )
            groups: dict[Any, list[tuple[Any, ...]]] = {}
            for row in rows:
                groups.setdefault(row[1], []).append(row)
            for native, group in groups.items():
                seen.add(str(native))
                copies = sum(1 for item in legacy if item.native == native)
                outcome = _read_v2(db, source, group, copies, limits)
                db.verify_unchanged()
                yield outcome
        yield from _legacy_outcomes(source, legacy, seen, limits)
        db.verify_unchanged()


def _read_v2(db: ReadOnlyDb, source: Source, group: list[tuple[Any, ...]], copies: int, limits: Limits) -> Outcome:
    key, native, created, updated, size = group[0]
    hint = session_id_of(str(native))
    try:
        if not isinstance(native, str) or not native:
            raise RejectError(RejectCode.MISSING_SESSION_ID, f"conversation_id {native!r} is not text")
        state = _fetch(
            db,
            f"SELECT CAST(value AS BLOB) FROM {V2_TABLE} WHERE key IS ? AND conversation_id = ?",
            (key, native),
            int(size or 0),
            limits,
            f"conversation {native}",
        )
        facts = RowFacts(
            conversation_id=native,
            key=key if isinstance(key, str) else None,
            created_at=from_epoch_ms(created),
            updated_at=from_epoch_ms(updated),
        )
        facts.census[(f"row/{V2_TABLE}", "", Disposition.METADATA)] += 1
        if len(group) > 1:
            facts.census[(f"row/{V2_TABLE}/superseded", "", Disposition.SKIPPED)] += len(group) - 1
        if copies:
            facts.census[(f"row/{LEGACY_TABLE}/superseded", "", Disposition.SKIPPED)] += copies
        return Loaded(source, build_session(state, facts, limits))
    except RejectError as exc:
        return Rejected(source, exc.code, exc.detail, exc.line, exc.offset, exc.session_hint or hint)


def _legacy_rows(db: ReadOnlyDb, limits: Limits) -> list[_Legacy]:
    """Every row of the older `conversations` table, parsed (its conversation id is inside the JSON)."""
    out: list[_Legacy] = []
    keys = list(db.rows(f"SELECT key, length(CAST(value AS BLOB)) FROM {LEGACY_TABLE} ORDER BY key"))
    for key, size in keys:
        try:
            sql = f"SELECT CAST(value AS BLOB) FROM {LEGACY_TABLE} WHERE key IS ?"
            state = _fetch(db, sql, (key,), int(size or 0), limits, f"conversation at {key!r}")
            native = state.get("conversation_id") if isinstance(state, dict) else None
            out.append(_Legacy(str(key), state, None, native if isinstance(native, str) and native else None))
        except RejectError as exc:
            out.append(_Legacy(str(key), None, exc, None))
    return out


def _legacy_outcomes(source: Source, legacy: list[_Legacy], seen: set[str], limits: Limits) -> Iterator[Outcome]:
    groups: dict[str, list[_Legacy]] = {}
    for item in legacy:
        if item.error is not None or item.native is None:
            error = item.error or RejectError(RejectCode.MISSING_SESSION_ID, "the conversation has no conversation_id")
            yield Rejected(source, error.code, f"conversations row {item.key!r}: {error.detail}", error.line)
            continue
        if item.native in seen:
            continue  # counted in the conversations_v2 session's census
        groups.setdefault(item.native, []).append(item)
    for native, group in groups.items():
        group.sort(key=lambda item: (-_history_length(item.state), item.key))
        chosen = group[0]
        facts = RowFacts(key=chosen.key)
        facts.census[(f"row/{LEGACY_TABLE}", "", Disposition.METADATA)] += 1
        if len(group) > 1:
            facts.census[(f"row/{LEGACY_TABLE}/superseded", "", Disposition.SKIPPED)] += len(group) - 1
        try:
            yield Loaded(source, build_session(chosen.state, facts, limits))
        except RejectError as exc:
            hint = exc.session_hint or session_id_of(native)
            yield Rejected(source, exc.code, exc.detail, exc.line, exc.offset, hint)


def _history_length(state: Any) -> int:
    history = state.get("history") if isinstance(state, dict) else None
    return len(history) if isinstance(history, list) else 0
