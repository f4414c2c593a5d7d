"""No number can stop the warehouse: a token count of 2**63 (or the largest int64) goes through every reader, the
Parquet files and the warehouse build, and every view answers; a build that fails leaves no temporary file.

Each case is a real source under a temporary home, loaded by the real pipeline (`run_etl`) and read back from the
real warehouse. Grok and ChatGPT exports carry no token counts: there is nothing of theirs to read out of range.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from sinks import prices, views, warehouse
from tests.corpus import S1, claude_exchange, codex_rollout, small_home, write_session
from tests.opencode_support import T0, add_message, add_part, add_session, assistant, create_db, text, user
from tests.test_crash import leftovers
from tests.test_pipeline import run, settings_for

HUGE = 2**63  # one past int64
MAX = 2**63 - 1  # the largest count a column holds
CACHED = 11_502  # the cached tokens of the Gemini session that stopped every run
THREAD = "019e1695-0522-7c83-8b39-0dd379793f80"
GEMINI_META = {
    "sessionId": "0f2b7a1c-0000-4000-8000-00000000000a",
    "projectHash": "ab" * 32,
    "startTime": "2026-01-02T03:04:05.000Z",
    "lastUpdated": "2026-01-02T03:10:00.000Z",
    "kind": "main",
}


def _claude(home: Path, count: int) -> None:
    lines = claude_exchange(S1, 1)
    record = json.loads(lines[1])
    record["message"]["usage"]["input_tokens"] = count
    lines[1] = json.dumps(record)
    write_session(home, S1, lines)


def _codex(home: Path, count: int) -> None:
    path = codex_rollout(home, THREAD, 1)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    for usage in last["payload"]["info"].values():
        usage["input_tokens"], usage["cached_input_tokens"] = count, CACHED
    lines[-1] = json.dumps(last)
    path.write_text("\n".join(lines) + "\n")


def _gemini(home: Path, count: int) -> None:
    chats = home / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    messages = [
        {"id": "u1", "timestamp": "2026-01-02T03:05:00.000Z", "type": "user", "content": "hi"},
        {
            "id": "g1",
            "timestamp": "2026-01-02T03:05:01.000Z",
            "type": "gemini",
            "content": "hello",
            "model": "gemini-2.5-pro",
            "tokens": {"input": count, "output": 5, "cached": CACHED, "thoughts": 0},
        },
    ]
    path = chats / "session-2026-01-02T03-04-0f2b7a1c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [GEMINI_META, *messages]))


def _opencode(home: Path, count: int) -> None:
    root = home / ".local" / "share" / "opencode"
    root.mkdir(parents=True)
    conn = create_db(root / "opencode.db", wal=False)
    add_session(conn, "ses_n")
    add_message(conn, "ses_n", "msg_u", T0, user(T0))
    add_part(conn, "ses_n", "msg_u", "prt_u", text("question"))
    tokens = {"input": count, "output": 7, "reasoning": 0, "cache": {"read": CACHED, "write": 2}}
    add_message(conn, "ses_n", "msg_a", T0 + 1000, json.dumps(assistant(T0 + 1000, cost=0.5, tokens=tokens)))
    add_part(conn, "ses_n", "msg_a", "prt_a", text("answer"))
    conn.close()


# What each reader stores as input_tokens for a read count of MAX: Codex and Gemini store the prompt net of cache.
READERS: dict[str, tuple[Callable[[Path, int], None], int]] = {
    "claude": (_claude, MAX),
    "codex": (_codex, MAX - CACHED),
    "gemini": (_gemini, MAX - CACHED),
    "opencode": (_opencode, MAX),
}


def _load(tmp_path: Path, agent: str, count: int) -> Path:
    home, data = tmp_path / "home", tmp_path / "data"
    READERS[agent][0](home, count)
    settings = load_settings(home=home, data_dir=data, sources=[agent], env={"HOME": str(home)}, lock_wait=5)
    report = run_etl(settings, as_tasks=False)
    assert report.committed.sessions_loaded == 1 and report.committed.sessions_rejected == 0
    assert leftovers(data) == []
    return data / "warehouse.duckdb"


def _every_view(con: duckdb.DuckDBPyConnection) -> None:
    for name in [*views.VIEWS, "usage_costs", "cost_daily"]:
        con.execute(f"SELECT * FROM {name}").fetchall()  # an overflow anywhere raises here


def _largest_input(con: duckdb.DuckDBPyConnection) -> Any:
    return con.execute("SELECT max(input_tokens) FROM usage").fetchone()[0]  # type: ignore[index]


def _out_of_range(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT sum(record_count) FROM record_kinds WHERE record_kind = 'usage/out_of_range'").fetchone()
    return int(row[0] or 0) if row else 0


@pytest.mark.parametrize("agent", sorted(READERS))
def test_a_count_of_2_63_is_null_and_counted_and_the_warehouse_is_built(tmp_path: Path, agent: str) -> None:
    con = duckdb.connect(str(_load(tmp_path, agent, HUGE)), read_only=True)
    try:
        assert _largest_input(con) is None  # not 2**63 - 11,502: nothing derived from a count that does not fit
        assert _out_of_range(con) == 1
        _every_view(con)
    finally:
        con.close()


@pytest.mark.parametrize("agent", sorted(READERS))
def test_the_largest_count_is_kept_and_every_view_adds_it_up_without_overflow(tmp_path: Path, agent: str) -> None:
    con = duckdb.connect(str(_load(tmp_path, agent, MAX)), read_only=True)
    try:
        stored = READERS[agent][1]
        assert _largest_input(con) == stored and _out_of_range(con) == 0
        _every_view(con)
        [(prompt,)] = con.execute("SELECT max(prompt_tokens) FROM usage_costs").fetchall()
        assert prompt >= stored + CACHED if agent != "claude" else prompt > MAX  # past int64, exact
        [(summed,)] = con.execute("SELECT sum(input_tokens) FROM model_usage").fetchall()
        assert summed == stored
    finally:
        con.close()


def test_costs_of_the_largest_counts_at_a_high_price_do_not_overflow() -> None:
    # A count near 2**63 at $75 per million was past DECIMAL(38, 24); costs are DECIMAL(38, 12) per token.
    con = duckdb.connect()
    try:
        cost = prices._cost(str(MAX), "CAST(75 AS DECIMAL(38, 18))")
        [(one, many)] = con.execute(f"SELECT {cost}, {cost} * 1000000").fetchall()
        assert int(one) == MAX * 75 // 1_000_000 and int(many) > int(one)
    finally:
        con.close()


def test_a_build_that_fails_leaves_no_temporary_file_and_status_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)

    def overflow(*_args: object, **_kwargs: object) -> None:
        raise duckdb.OutOfRangeException("Out of Range Error: Overflow in addition of INT64 (1 + 2)!")

    monkeypatch.setattr(warehouse, "_build", overflow)
    with pytest.raises(duckdb.OutOfRangeException):
        run(settings)
    assert leftovers(data) == []
    assert not (data / "warehouse.duckdb").exists()
    result = CliRunner().invoke(app, ["status", "--check", "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 1
    why = [line for line in result.output.splitlines() if "failed" in line and "Overflow in addition" in line]
    assert len(why) == 1, result.output
    monkeypatch.undo()
    run(settings)
    assert leftovers(data) == [] and (data / "warehouse.duckdb").exists()


def test_a_change_that_fails_on_a_copy_leaves_no_temporary_file_and_the_old_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before = (data / "warehouse.duckdb").read_bytes()
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)

    def overflow(*_args: object, **_kwargs: object) -> None:
        raise duckdb.OutOfRangeException("Out of Range Error: Overflow in addition of INT64 (1 + 2)!")

    monkeypatch.setattr(warehouse, "_finish_apply", overflow)
    with pytest.raises(duckdb.OutOfRangeException):
        run(settings)
    assert leftovers(data) == []
    assert (data / "warehouse.duckdb").read_bytes() == before
