"""The warehouse's views on the sample corpus: their answers, and days in the configured zone, not the reader's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from flows.etl.datahome import SAMPLE_HOME
from flows.etl.flow import run_etl
from flows.etl.settings import SettingsError, load_settings
from sinks import views

PARENT = "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01"


def load_sample(data: Path, zone: str | None = None) -> Path:
    """Load the shipped sample corpus into `data` (no Prefect API) and return the warehouse."""
    env = {"TRANSCRIPTS_TIMEZONE": zone} if zone else {}
    run_etl(load_settings(home=SAMPLE_HOME, data_dir=data, env=env, lock_wait=5), as_tasks=False)
    return data / "warehouse.duckdb"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load_sample(tmp_path_factory.mktemp("views") / "data", "UTC")


@pytest.fixture
def con(sample: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect(str(sample), read_only=True)
    yield c
    c.close()


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return con.execute(sql).fetchall()


def test_daily_activity_counts_sessions_prompts_responses_and_tool_calls_per_day_and_agent(
    con: duckdb.DuckDBPyConnection,
) -> None:
    assert rows(con, "FROM daily_activity ORDER BY day, agent") == [
        (date(2025, 12, 29), "opencode", 1, 1, 1, 1, 0),
        (date(2026, 1, 16), "gemini", 1, 1, 1, 1, 1),
        (date(2026, 3, 2), "claude", 2, 2, 2, 4, 2),  # the parent session and its subagent
        (date(2026, 3, 4), "claude", 1, 1, 2, 2, 0),
        (date(2026, 5, 11), "codex", 1, 1, 1, 1, 1),
        (date(2026, 7, 31), "aider", 1, 1, 2, 1, 0),  # a command and a prompt of two lines, one reply
        (date(2026, 7, 31), "cursor", 1, 1, 1, 1, 1),  # four assistant rows make one reply
        (date(2026, 7, 31), "grok", 1, 1, 1, 2, 1),
    ]
    totals = rows(con, "SELECT sum(prompts), sum(responses), sum(tool_calls) FROM daily_activity")
    assert totals == rows(
        con, "SELECT sum(user_turn_count), sum(assistant_turn_count), sum(tool_call_count) FROM sessions"
    )


def test_project_activity_groups_sessions_by_working_directory(con: duckdb.DuckDBPyConnection) -> None:
    got = rows(con, "SELECT project, cwd, sessions, agents, prompts, git_branches FROM project_activity ORDER BY 1")
    assert got == [
        ("(none)", None, 3, ["aider", "cursor", "gemini"], 4, None),  # aider and cursor record no working dir
        ("webapp", "/home/dev/webapp", 6, ["claude", "codex", "grok", "opencode"], 7, ["main"]),
    ]


def test_tool_usage_rates_errors_over_calls_with_a_known_outcome(con: duckdb.DuckDBPyConnection) -> None:
    got = rows(con, "SELECT agent, tool_name, calls, errors, unknown, error_rate FROM tool_usage ORDER BY 1, 2")
    assert got == [
        ("claude", "Bash", 1, 0, 0, 0.0),
        ("claude", "Task", 1, 0, 0, 0.0),
        ("codex", "shell", 1, 0, 0, 0.0),
        ("cursor", "Grep", 1, 0, 1, None),  # Cursor's transcripts keep no tool results
        ("gemini", "search_file_content", 1, 0, 0, 0.0),
        ("grok", "read_file", 1, 0, 1, None),  # no result recorded: unknown, not a success
    ]


def test_session_lengths_bucket_every_session_once(con: duckdb.DuckDBPyConnection) -> None:
    got = rows(con, "SELECT agent, bucket, duration, sessions, max_turns FROM session_lengths ORDER BY 1, 2")
    assert got == [
        ("aider", 1, "< 1 min", 1, 3),  # no end time: a run's length is unknown
        ("claude", 1, "< 1 min", 1, 1),
        ("claude", 2, "1-10 min", 1, 5),
        ("claude", 4, "30 min-2 h", 1, 4),
        ("codex", 1, "< 1 min", 1, 2),
        ("cursor", 1, "< 1 min", 1, 2),
        ("gemini", 2, "1-10 min", 1, 2),
        ("grok", 2, "1-10 min", 1, 3),
        ("opencode", 2, "1-10 min", 1, 2),
    ]
    assert rows(con, "SELECT sum(sessions) FROM session_lengths") == rows(con, "SELECT count(*) FROM sessions")


def test_model_usage_per_month_joins_responses_and_tokens(con: duckdb.DuckDBPyConnection) -> None:
    got = rows(con, "SELECT month, agent, model, sessions, responses, output_tokens FROM model_usage ORDER BY 1, 2")
    assert got == [
        (date(2025, 12, 1), "opencode", "claude-sonnet-4-5", 1, 1, 120),
        (date(2026, 1, 1), "gemini", "gemini-2.5-pro", 1, 1, 40),
        (date(2026, 3, 1), "claude", "claude-opus-4-6", 3, 6, 771),
        (date(2026, 5, 1), "codex", "gpt-5.4", 1, 1, 300),
        (date(2026, 7, 1), "aider", "anthropic/claude-sonnet-4-5", 1, 1, 64),
        (date(2026, 7, 1), "cursor", "(unknown)", 1, 1, None),  # Cursor's transcripts name no model
        (date(2026, 7, 1), "grok", "grok-4.5", 1, 2, None),  # grok records no usage
    ]


def test_turn_context_carries_the_session_context_of_every_turn(con: duckdb.DuckDBPyConnection) -> None:
    assert rows(con, "SELECT count(*) FROM turn_context") == rows(con, "SELECT count(*) FROM turns")
    got = rows(con, f"SELECT role, day, project, cwd, git_branch, text FROM turn_context WHERE turn_id = '{PARENT}-1'")
    assert got == [
        (
            "user",
            date(2026, 3, 2),
            "webapp",
            "/home/dev/webapp",
            "main",
            "The login form accepts empty passwords. Find out why and fix it.",
        )
    ]


def test_the_existing_views_still_answer(con: duckdb.DuckDBPyConnection) -> None:
    assert rows(con, "SELECT count(*) FROM session_overview") == [(9,)]
    assert rows(con, "SELECT count(*) FROM prompts") == [(11,)]
    assert rows(con, "SELECT sum(output_tokens) FROM daily_tokens WHERE day = DATE '2026-03-02'") == [(321,)]
    assert rows(con, "SELECT sum(calls) FROM tool_failures") == [(6,)]
    assert sorted(r[0] for r in rows(con, "SELECT reason_code FROM current_rejects")) == [
        "invalid_json",
        "no_conversation",
    ]


def test_days_follow_the_zone_of_the_load_not_the_readers_session_zone(tmp_path: Path) -> None:
    # Gemini's prompt is at 2026-01-16 18:34 UTC: 2026-01-17 in Tokyo, 2026-01-16 in UTC and in Los Angeles.
    warehouse = load_sample(tmp_path / "data", "Asia/Tokyo")
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        con.execute("SET TimeZone = 'America/Los_Angeles'")  # a reader's accidental session zone
        gemini = "SELECT day FROM daily_activity WHERE agent = 'gemini'"
        assert rows(con, gemini) == [(date(2026, 1, 17),)]
        assert rows(con, "SELECT DISTINCT day FROM daily_tokens WHERE agent = 'gemini'") == [(date(2026, 1, 17),)]
        assert rows(con, "SELECT value FROM transcripts_meta WHERE key = 'timezone'") == [("Asia/Tokyo",)]
        con.execute(f"SET VARIABLE {views.ZONE_VARIABLE} = 'UTC'")  # what --timezone does
        assert rows(con, gemini) == [(date(2026, 1, 16),)]
    finally:
        con.close()


def test_every_load_recreates_the_views_in_the_zone_now_configured(tmp_path: Path) -> None:
    data = tmp_path / "data"
    load_sample(data, "Asia/Tokyo")
    load_sample(data, "UTC")  # nothing changed in the sources: an incremental run
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        assert rows(con, "SELECT day FROM daily_activity WHERE agent = 'gemini'") == [(date(2026, 1, 16),)]
    finally:
        con.close()


def test_an_unknown_timezone_setting_is_a_settings_error_naming_close_zones(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="unknown time zone 'Europe/Berln'; did you mean Europe/Berlin"):
        load_settings(data_dir=tmp_path, env={"TRANSCRIPTS_TIMEZONE": "Europe/Berln"})
    config = tmp_path / "config.toml"
    config.write_text('timezone = "Asia/Tokyo"\n')
    assert load_settings(data_dir=tmp_path, config=config, env={}).timezone == "Asia/Tokyo"
    assert load_settings(data_dir=tmp_path, config=config, env={"TRANSCRIPTS_TIMEZONE": "UTC"}).timezone == "UTC"
