"""Goose's legacy sessions: one `<id>.jsonl` per session in the sessions folder (docs/agents/goose.md "Legacy
JSONL"). The first line is the session's metadata (`working_dir`, `description`, token totals), every other line one
message (`role`, `created`, `content` blocks, `metadata`), the same message shape the database stores.

Goose imports these files into `sessions.db` under the same id when it creates the database, and leaves them in
place: a session the database beside the file holds is loaded from the database, and its file is `duplicate`.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from extractors.bounded import Limits, iter_jsonl, sqlite_db
from extractors.bounded.sqlite_db import open_readonly
from extractors.errors import RejectCode, RejectError
from extractors.goose.db import DATABASE_NAME, check_schema
from extractors.goose.parse import MessageRow, SessionRow, build_session, session_id_of
from extractors.model import Disposition, Loaded, Outcome, Rejected, Source

VERSION = "legacy"  # the census's writer version for these files (they name none)
# Metadata fields read (storage.rs SessionMetadata); the token totals are the running `accumulated_*` ones.
METADATA_FIELDS = (
    "working_dir",
    "description",
    "accumulated_input_tokens",
    "accumulated_output_tokens",
)


def is_legacy_name(name: str) -> bool:
    return name.endswith(".jsonl") and len(name) > len(".jsonl")


def _is_message(record: dict[str, Any]) -> bool:
    return "role" in record and "content" in record


def read_legacy(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The file's one session, or `duplicate` when the database beside it holds the same id.

    Raises RejectError / DeferError for a file that cannot be read whole (the bounded JSONL reader's codes).
    """
    path = Path(source.path)
    native = path.stem
    database = path.with_name(DATABASE_NAME)
    if database.is_file() and _in_database(database, source.root or str(path.parent), native, limits):
        yield Rejected(
            source,
            RejectCode.DUPLICATE,
            f"session {native} is also in {DATABASE_NAME} beside it, which Goose imported it into: loaded from there",
            session_hint=session_id_of(native),
        )
        return
    lines = list(iter_jsonl(path, limits))
    census: Counter[tuple[str, str, Disposition]] = Counter()
    columns: dict[str, Any] = {"id": native}
    messages: list[MessageRow] = []
    for line in lines:
        record = line.record
        if line.index == 0 and not _is_message(record):
            census[("legacy/metadata", VERSION, Disposition.METADATA)] += 1
            columns.update({k: record.get(k) for k in METADATA_FIELDS})
            continue
        if not _is_message(record):
            census[("legacy/unknown", VERSION, Disposition.SKIPPED)] += 1
            continue
        message_id = record.get("id")
        messages.append(
            MessageRow(
                line.index,
                record.get("role"),
                record.get("content"),
                record.get("created"),
                record.get("metadata"),
                message_id if isinstance(message_id, str) else None,
                line.index,
            )
        )
    # docs/agents/goose.md "Legacy JSONL": the files name no start time; the first message's `created` is it.
    columns["created_at"] = next((m.created for m in messages if m.created is not None), None)
    columns["updated_at"] = next((m.created for m in reversed(messages) if m.created is not None), None)
    try:
        session = build_session(SessionRow(native, columns), messages, None, VERSION, limits)
    except RejectError as exc:
        yield Rejected(source, exc.code, exc.detail, session_hint=exc.session_hint or session_id_of(native))
        return
    session.census.update(census)
    yield Loaded(source, session)


def _in_database(database: Path, root: str, native: str, limits: Limits) -> bool:
    size, mtime = sqlite_db.fingerprint(database)
    return native in _session_ids(str(database), root, size, mtime, limits)


@functools.lru_cache(maxsize=8)
def _session_ids(path: str, root: str, size: int, mtime_ns: int, limits: Limits) -> frozenset[str]:
    """The session ids of one database state (keyed by its fingerprint: many legacy files open it once). A database
    that cannot be read holds none; DeferError propagates (a locked database cannot decide: the file waits)."""
    try:
        with open_readonly(path, root, limits) as db:
            check_schema(db)
            return frozenset(str(row[0]) for row in db.rows("SELECT id FROM sessions"))
    except RejectError:
        return frozenset()
