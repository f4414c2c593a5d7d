"""Builders for OpenCode test data: a canonical `opencode.db` from SQL (drizzle schema,
docs/agents/opencode.md "The database") and the legacy `storage/` JSON tree. Used by tests/test_opencode*.py; writes
only under the given tmp paths."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

# The canonical schema, as OpenCode's drizzle migrations create it (columns from json-migration.ts): one copy.
SCHEMA = (Path(__file__).resolve().parent / "agents" / "opencode" / "schema.sql").read_text(encoding="utf-8")

T0 = 1_760_000_000_000  # 2025-10-09T08:53:20Z in epoch ms


def create_db(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    """A fresh canonical database; returns an autocommit connection (the caller closes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) VALUES ('global', '/', ?, ?, '[]')",
        (T0, T0),
    )
    return conn


def add_session(
    conn: sqlite3.Connection,
    sid: str,
    *,
    created: int | None = T0,
    updated: int | None = T0 + 60_000,
    parent: str | None = None,
    archived: int | None = None,
    title: str = "a title",
    directory: str = "/work/repo",
    version: str = "1.2.3",
) -> None:
    conn.execute(
        "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated,"
        " time_archived) VALUES (?, 'global', ?, 'slug', ?, ?, ?, ?, ?, ?)",
        (sid, parent, directory, title, version, created, updated, archived),
    )


def add_message(conn: sqlite3.Connection, sid: str, mid: str, created: int, data: dict[str, Any] | str) -> None:
    raw = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
        (mid, sid, created, created, raw),
    )


def add_part(conn: sqlite3.Connection, sid: str, mid: str, pid: str, data: dict[str, Any] | str) -> None:
    raw = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
        (pid, mid, sid, T0, T0, raw),
    )


def user(created: int) -> dict[str, Any]:
    return {
        "role": "user",
        "time": {"created": created},
        "agent": "build",
        "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
    }


def assistant(created: int, **extra: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "time": {"created": created, "completed": created + 500},
        "modelID": "claude-sonnet-4-5",
        "providerID": "anthropic",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/w", "root": "/w"},
        **extra,
    }


def text(value: str, **flags: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **flags}


def add_exchange(conn: sqlite3.Connection, sid: str, n: int, *, start: int = T0) -> None:
    """n user/assistant message pairs, each message with one text part."""
    for i in range(n):
        u, a = f"{sid}_msg_{i:06d}_u", f"{sid}_msg_{i:06d}_a"
        add_message(conn, sid, u, start + 2 * i * 1000, user(start + 2 * i * 1000))
        add_part(conn, sid, u, f"{u}_prt", text(f"question {i}"))
        add_message(conn, sid, a, start + (2 * i + 1) * 1000, assistant(start + (2 * i + 1) * 1000))
        add_part(conn, sid, a, f"{a}_prt", text(f"answer {i}"))


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def storage_session(
    storage: Path,
    sid: str,
    messages: list[tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]],
    *,
    older: bool = False,
    session: dict[str, Any] | None = None,
) -> Path:
    """Write one session of the legacy JSON tree (current or older layout); returns the session file."""
    info = (
        session
        if session is not None
        else {
            "id": sid,
            "title": "legacy",
            "directory": "/legacy",
            "version": "1.0.0",
            "time": {"created": T0, "updated": T0 + 5000},
        }
    )
    if older:
        session_file = write_json(storage / "session" / "info" / f"{sid}.json", info)
    else:
        session_file = write_json(storage / "session" / "global" / f"{sid}.json", info)
    for mid, data, parts in messages:
        folder = storage / "session" / "message" / sid if older else storage / "message" / sid
        write_json(folder / f"{mid}.json", {"id": mid, "sessionID": sid, **data})
        for pid, pdata in parts:
            pfolder = storage / "session" / "part" / sid / mid if older else storage / "part" / mid
            write_json(pfolder / f"{pid}.json", {"id": pid, "messageID": mid, "sessionID": sid, **pdata})
    return session_file
