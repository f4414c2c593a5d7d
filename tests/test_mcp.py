"""`transcripts mcp`: a real MCP client (the SDK's ClientSession over stdio) spawns the server on the sample corpus,
lists its tools and calls each one; what a model can get wrong ends in a tool error it can read, never a crash."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent
from typer.testing import CliRunner

from flows.cli.app import app
from flows.etl.datahome import SAMPLE_HOME
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from tests.test_warehouse_views import load_sample

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"search", "list_sessions", "get_session", "sql", "usage"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("mcp") / "data"
    load_sample(data, "UTC")
    return data


@asynccontextmanager
async def client(data: Path) -> AsyncIterator[ClientSession]:
    """A client session with `transcripts mcp` in a process of its own, stopped when the block ends, however."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "flows.cli.app", "mcp", "--data-dir", str(data), "--timezone", "UTC"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def run(data: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        async with client(data) as session:
            await body(session)

    anyio.run(main)


def text(result: CallToolResult) -> str:
    assert result.content and isinstance(result.content[0], TextContent), result
    return result.content[0].text


def ok(result: CallToolResult) -> Any:
    assert not result.isError, text(result)
    return json.loads(text(result))


def test_a_client_lists_the_tools_and_calls_each_one(data: Path) -> None:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM sessions").fetchone()
    finally:
        con.close()
    assert row is not None and row[0] > 3
    sessions = int(row[0])  # the sample corpus's sessions, however many agents it holds

    async def body(session: ClientSession) -> None:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        for tool in listed.tools:
            assert tool.description and len(tool.description) > 100, tool.name  # written for a model
            assert tool.annotations and tool.annotations.readOnlyHint, tool.name

        found = ok(await session.call_tool("search", {"query": "empty password"}))
        assert found["hits"], found
        hit = found["hits"][0]
        assert hit["session_id"].startswith("claude-") and hit["turn"] >= 1 and "password" in hit["snippet"].lower()
        only = ok(await session.call_tool("search", {"query": "password", "role": "user", "until": "2026-03-02"}))
        assert all(h["role"] == "user" and h["time"] < "2026-03-03" for h in only["hits"])

        page = ok(await session.call_tool("list_sessions", {"order_by": "tokens", "limit": 2}))
        assert page["total"] == sessions and len(page["sessions"]) == 2 and page["next_offset"] == 2
        assert page["sessions"][0]["tokens"] >= page["sessions"][1]["tokens"]
        rest = ok(await session.call_tool("list_sessions", {"order_by": "tokens", "limit": 50, "offset": 2}))
        assert len(rest["sessions"]) == sessions - 2 and rest["next_offset"] is None
        ids = [s["session_id"] for s in page["sessions"] + rest["sessions"]]
        assert len(set(ids)) == sessions

        md = await session.call_tool("get_session", {"session_id": hit["session_id"]})
        assert not md.isError
        assert "## 1 · user" in text(md) and "> tool: Bash" in text(md) and "subagent" in text(md)
        part = text(
            await session.call_tool("get_session", {"session_id": hit["session_id"], "from_turn": 2, "to_turn": 3})
        )
        assert "## 2 · assistant" in part and "## 1 · user" not in part and "## 4 ·" not in part

        rows = ok(
            await session.call_tool("sql", {"query": "SELECT agent, count(*) AS n FROM sessions GROUP BY 1 ORDER BY 1"})
        )
        assert rows["columns"] == ["agent", "n"] and rows["truncated"] is None and len(rows["rows"]) >= 5

        for group in ("day", "model", "project"):
            used = ok(await session.call_tool("usage", {"group_by": group}))
            assert used["rows"] and group in used["rows"][0] and "cost_usd" in used["rows"][0]

    run(data, body)


def test_mistakes_are_tool_errors_and_the_server_goes_on(data: Path) -> None:
    async def body(session: ClientSession) -> None:
        async def error(tool: str, arguments: dict[str, Any], *words: str) -> None:
            result = await session.call_tool(tool, arguments)
            assert result.isError, text(result)
            message = text(result)
            assert all(w.lower() in message.lower() for w in words), message
            assert "Traceback" not in message

        await error("sql", {"query": "DELETE FROM sessions"}, "read-only")
        await error("sql", {"query": "CREATE TABLE x AS SELECT 1"}, "read-only")
        await error("sql", {"query": "COPY sessions TO '/tmp/transcripts-mcp-leak.csv'"})
        assert not Path("/tmp/transcripts-mcp-leak.csv").exists()
        await error("sql", {"query": "SET enable_external_access = true"})
        await error("sql", {"query": "SELECT 1; SELECT 2"}, "one SQL statement")
        await error("sql", {"query": "SELECT count(*) FROM range(100000000000) a"}, "time limit")
        await error("get_session", {"session_id": "no-such-session"}, "no session")
        await error("get_session", {"session_id": "claude-5f0c2a1e", "from_turn": 0})
        await error("list_sessions", {"order_by": "size"})
        await error("list_sessions", {"since": "yesterday"})
        await error("search", {"query": "x", "agent": "nobody"}, "nobody")
        await error("usage", {"group_by": "week"})

        huge = ok(
            await session.call_tool("sql", {"query": "SELECT repeat('x', 1000) AS s FROM range(5000)", "limit": 1000})
        )
        assert huge["truncated"] and len(huge["rows"]) < 1000
        many = ok(await session.call_tool("sql", {"query": "SELECT * FROM range(5000)", "limit": 10}))
        assert len(many["rows"]) == 10 and "more than 10 rows" in many["truncated"]
        # still serving after every one of them
        assert ok(await session.call_tool("sql", {"query": "SELECT 42 AS answer"}))["rows"] == [[42]]

    run(data, body)


def test_no_corpus_yet_is_a_tool_error_naming_the_run(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("list_sessions", {})
        assert result.isError and "transcripts run" in text(result)

    run(tmp_path / "empty", body)


def test_the_documented_client_setups_start_this_server() -> None:
    """docs/mcp.md's one-liners for Claude Code, Codex and any JSON client all run `transcripts mcp`, and that
    command is the one `transcripts` installs."""
    page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"^```(\w+)\n(.*?)^```", page, flags=re.MULTILINE | re.DOTALL)[:3])
    claude = [line for line in blocks["sh"].splitlines() if line.startswith("claude mcp add")]
    assert claude and all(line.split(" -- ", 1)[1].split()[:2] == ["transcripts", "mcp"] for line in claude)
    codex = tomllib.loads(blocks["toml"])["mcp_servers"]["transcripts"]
    generic = json.loads(blocks["json"])["mcpServers"]["transcripts"]
    assert codex == generic == {"command": "transcripts", "args": ["mcp"]}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"]["transcripts"] == "flows.cli.entry:main"
    shown = CliRunner().invoke(app, ["mcp", "--help"])
    assert shown.exit_code == 0 and "MCP" in shown.stdout


def test_the_benchmark_runs_on_a_tiny_corpus(tmp_path: Path) -> None:
    """bench/mcp_bench.py (docs/benchmarks.md): generation, the long session, the load and every timed call."""
    out = tmp_path / "mcp.json"
    args = ["--mb", "0.3", "--turns", "40", "--repeat", "1", "--keep", str(tmp_path / "home")]
    args += ["--data", str(tmp_path / "data"), "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mcp_bench.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures["turns"] == 40 and figures["search_ms"]["n"] == 5 and figures["get_session_pages"] == 1


def test_a_run_committing_while_the_server_holds_the_corpus_neither_waits_nor_breaks_a_call(tmp_path: Path) -> None:
    """The server holds the warehouse open; a run that adds a session builds the new warehouse beside it and swaps
    it in (it does not fail on DuckDB's lock), and the next call sees the new session."""
    home = tmp_path / "home"
    shutil.copytree(SAMPLE_HOME, home, symlinks=True)
    data = tmp_path / "data"
    settings = load_settings(home=home, data_dir=data, env={}, lock_wait=5)
    run_etl(settings, as_tasks=False)

    async def body(session: ClientSession) -> None:
        before = ok(await session.call_tool("list_sessions", {}))
        folder = home / ".claude" / "projects" / "-home-dev-webapp"
        old = "7a2e9b4c-1d2f-4e3a-8b5c-6d7e8f901202"
        new = "7a2e9b4c-1d2f-4e3a-8b5c-00000000beef"
        text = (folder / f"{old}.jsonl").read_text(encoding="utf-8").replace(old, new)
        (folder / f"{new}.jsonl").write_text(text, encoding="utf-8")
        started = time.monotonic()
        await anyio.to_thread.run_sync(lambda: run_etl(settings, as_tasks=False))
        assert time.monotonic() - started < 60
        after = ok(await session.call_tool("list_sessions", {}))
        assert after["total"] == before["total"] + 1
        assert f"claude-{new}" in {s["session_id"] for s in after["sessions"]}
        shown = await session.call_tool("get_session", {"session_id": f"claude-{new}"})
        assert not shown.isError

    run(data, body)


def test_sessions_loaded_without_redaction_are_not_served(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run_etl(load_settings(home=SAMPLE_HOME, data_dir=data, env={}, lock_wait=5, redact=False), as_tasks=False)

    async def body(session: ClientSession) -> None:
        assert ok(await session.call_tool("list_sessions", {}))["total"] == 0
        assert ok(await session.call_tool("search", {"query": "password"}))["hits"] == []
        refused = await session.call_tool("sql", {"query": "SELECT text FROM turns"})
        assert refused.isError and "without redaction" in text(refused)
        missing = await session.call_tool("get_session", {"session_id": "claude-5f0c2a1e"})
        assert missing.isError

    run(data, body)
