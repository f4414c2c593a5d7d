"""`project_activity`: a project is its git repository where known (its own, else its folder's), else its folder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import duckdb
import pytest

from sinks import views
from transforms.schema import TABLES, duckdb_ddl

START = datetime(2026, 5, 11, 9, 0, tzinfo=UTC)


def _session(
    sid: str, agent: str, cwd: str | None, repository: str | None, branch: str | None = None
) -> dict[str, Any]:
    return {
        "session_id": sid,
        "agent": agent,
        "native_session_id": sid,
        "source_path": f"/src/{sid}",
        "cwd": cwd,
        "git_branch": branch,
        "models": [],
        "cli_versions": [],
        "started_at": START,
        "archived": False,
        "turn_count": 2,
        "user_turn_count": 1,
        "assistant_turn_count": 1,
        "tool_call_count": 0,
        "harness_record_count": 0,
        "skipped_record_count": 0,
        "record_count": 2,
        "parser_version": "3",
        "git_repository": repository,
    }


SESSION_ROWS = [
    _session("c1", "codex", "/home/u/shop", "github.com/acme/shop", "main"),
    _session("c2", "claude", "/home/u/shop", None, "fix"),  # Claude records no remote: its folder's
    _session("g1", "grok", "/tmp/shop-review", "github.com/acme/shop"),  # the same repository, cloned again
    _session("c3", "codex", "/home/u/mixed", "github.com/acme/a"),
    _session("c4", "codex", "/home/u/mixed", "github.com/acme/b"),  # the folder's remote changed: no agreement
    _session("c5", "claude", "/home/u/mixed", None),
    _session("c6", "claude", "/home/u/notes/", None),
    _session("m1", "gemini", None, None),
]


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    for table in TABLES:  # every view is created; only sessions has rows
        c.execute(duckdb_ddl(table))
    for row in SESSION_ROWS:
        names = ", ".join(row)
        c.execute(f"INSERT INTO sessions ({names}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))
    views.create_views(c, "UTC")
    yield c
    c.close()


def test_ok_a_project_is_its_repository_else_its_folder(con: duckdb.DuckDBPyConnection) -> None:
    got = con.execute(
        """SELECT project, git_repository, cwd, folders, sessions, inferred_sessions, agents, git_branches
           FROM project_activity ORDER BY project, git_repository"""
    ).fetchall()
    assert got == [
        ("(none)", None, None, None, 1, 0, ["gemini"], None),
        ("a", "github.com/acme/a", "/home/u/mixed", ["/home/u/mixed"], 1, 0, ["codex"], None),
        ("b", "github.com/acme/b", "/home/u/mixed", ["/home/u/mixed"], 1, 0, ["codex"], None),
        ("mixed", None, "/home/u/mixed", ["/home/u/mixed"], 1, 0, ["claude"], None),
        ("notes", None, "/home/u/notes/", ["/home/u/notes/"], 1, 0, ["claude"], None),
        (
            "shop",
            "github.com/acme/shop",
            None,  # two folders: see `folders`
            ["/home/u/shop", "/tmp/shop-review"],
            3,
            1,
            ["claude", "codex", "grok"],
            ["fix", "main"],
        ),
    ]


def test_ok_every_session_counts_in_exactly_one_project(con: duckdb.DuckDBPyConnection) -> None:
    assert con.execute("SELECT sum(sessions) FROM project_activity").fetchone() == (len(SESSION_ROWS),)
