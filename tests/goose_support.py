"""Builders for Goose test data: a `sessions.db` in either of two schema versions (docs/agents/goose.md "Schema
versions"). Used by tests/test_goose.py, the fuzz formats and the hostile layouts; writes only under given paths."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

# The newest schema (16, with usage_ledger): the one copy in the contract folder.
SCHEMA_NEW = (Path(__file__).resolve().parent / "agents" / "goose" / "schema.sql").read_text(encoding="utf-8")

# Schema 5, as crates/goose/src/session/session_manager.rs `create` wrote it (CURRENT_SCHEMA_VERSION = 5): no
# provider/model columns, no message_id, no cache or cost totals, no usage_ledger.
SCHEMA_V5 = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (
  id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
  user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
  accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
  schedule_id TEXT, recipe_json TEXT, user_recipe_values_json TEXT
);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
  content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  tokens INTEGER, metadata_json TEXT
);
INSERT INTO schema_version (version) VALUES (5);
"""

T0 = 1_767_348_000  # 2026-01-02T10:00:00Z in epoch seconds (messages.created_timestamp)
CREATED = "2026-01-02 10:00:00"  # sessions.created_at as SQLite's CURRENT_TIMESTAMP writes it


def create_db(path: Path, *, schema: str = "new", wal: bool = False) -> sqlite3.Connection:
    """A fresh database in schema `new` (16) or `v5`; returns an autocommit connection (the caller closes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA_NEW if schema == "new" else SCHEMA_V5)
    if schema == "new":
        conn.execute("INSERT INTO schema_version (version) VALUES (16)")
    return conn


def add_session(conn: sqlite3.Connection, sid: str, **columns: Any) -> None:
    """A sessions row; `columns` are set by name (only those the schema has)."""
    values: dict[str, Any] = {"id": sid, "working_dir": "/work/repo", "created_at": CREATED, "name": "a title"}
    values.update(columns)
    names = ", ".join(values)
    conn.execute(f"INSERT INTO sessions ({names}) VALUES ({', '.join('?' for _ in values)})", tuple(values.values()))


def add_message(
    conn: sqlite3.Connection,
    sid: str,
    role: str,
    content: list[dict[str, Any]] | str,
    *,
    created: int = T0,
    metadata: dict[str, Any] | str | None = None,
) -> None:
    raw = content if isinstance(content, str) else json.dumps(content)
    meta = metadata if metadata is None or isinstance(metadata, str) else json.dumps(metadata)
    conn.execute(
        "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json)"
        " VALUES (?, ?, ?, ?, ?)",
        (sid, role, raw, created, meta),
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def add_exchange(conn: sqlite3.Connection, sid: str, n: int, *, start: int = T0) -> None:
    """`n` visible user/assistant pairs."""
    for i in range(n):
        add_message(conn, sid, "user", [text(f"question {i}")], created=start + 2 * i, metadata={"userVisible": True})
        add_message(conn, sid, "assistant", [text(f"answer {i}")], created=start + 2 * i + 1)


def add_ledger(conn: sqlite3.Connection, sid: str, created: int, model: str | None, **tokens: Any) -> None:
    values = {"session_id": sid, "created_timestamp": created, "model": model, **tokens}
    names = ", ".join(values)
    conn.execute(
        f"INSERT INTO usage_ledger ({names}) VALUES ({', '.join('?' for _ in values)})", tuple(values.values())
    )
