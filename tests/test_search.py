"""`transcripts search`: BM25 over turns, offline, with filters, highlighted snippets and stable JSON."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli import app
from sinks import search
from tests.test_warehouse_views import PARENT, load_sample

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("search") / "data"
    load_sample(data, "UTC")
    return data


def hits(data: Path, *args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["search", *args, "--json", "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    parsed: list[dict[str, object]] = json.loads(result.stdout)
    return parsed


def test_the_extension_loads_from_the_wheel_with_autoinstall_off() -> None:
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    search.load_extension(con)
    assert con.execute("SELECT stem('passwords', 'porter')").fetchone() == ("password",)
    assert search.extension_path().is_file()


def test_stemmed_words_rank_the_prompt_that_has_them_all_first(data: Path) -> None:
    found = hits(data, "empty password")
    assert [h["turn_id"] for h in found] == [f"{PARENT}-1", f"{PARENT}-6"]
    first = found[0]
    assert first["agent"] == "claude" and first["role"] == "user" and first["project"] == "webapp"
    assert first["timestamp"] == "2026-03-02T09:00:01+00:00"
    assert first["snippet"] == "The login form accepts empty passwords. Find out why and fix it."
    snippet = str(first["snippet"])
    assert [snippet[a:b] for a, b in first["highlights"]] == ["empty", "passwords"]  # type: ignore[attr-defined]
    assert float(first["score"]) > float(found[1]["score"])  # type: ignore[arg-type]
    assert list(first) == [
        "rank",
        "score",
        "agent",
        "role",
        "timestamp",
        "project",
        "cwd",
        "title",
        "session_id",
        "turn_id",
        "snippet",
        "highlights",
    ]


def test_filters_by_role_agent_and_day(data: Path) -> None:
    assert [h["turn_id"] for h in hits(data, "empty password", "--role", "assistant")] == [f"{PARENT}-6"]
    assert hits(data, "empty password", "--agent", "codex") == []
    codex = "codex-019e1695-0522-7c83-8b39-0dd379793f81"
    everywhere = [h["turn_id"] for h in hits(data, "test")]
    assert everywhere == [f"{PARENT}-agent-a7c41d2-1", f"{codex}-4", f"{codex}-9", f"{PARENT}-6"]
    assert [h["turn_id"] for h in hits(data, "test", "--since", "2026-05-01")] == [f"{codex}-4", f"{codex}-9"]
    assert [h["turn_id"] for h in hits(data, "test", "--agent", "claude")] == [
        f"{PARENT}-agent-a7c41d2-1",
        f"{PARENT}-6",
    ]
    assert hits(data, "test", "--since", "2026-12-01") == []
    assert len(hits(data, "the form", "--limit", "1")) == 1


def test_stop_words_alone_match_nothing_and_say_so(data: Path) -> None:
    result = runner.invoke(app, ["search", "the", "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "No turns match 'the'." in result.output


def test_the_terminal_output_names_agent_time_project_and_the_zone(data: Path) -> None:
    result = runner.invoke(
        app, ["search", "passwords", "--timezone", "Asia/Tokyo", "--data-dir", str(data)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "times in Asia/Tokyo (--timezone)" in out
    assert "claude · 2026-03-02 18:00 · webapp · user" in out  # 09:00 UTC is 18:00 in Tokyo
    assert "The login form accepts empty passwords." in out


def test_bad_arguments_and_a_missing_warehouse_exit_2_with_one_line(data: Path, tmp_path: Path) -> None:
    for args in (
        ["search", "x", "--agent", "cursor", "--data-dir", str(data)],
        ["search", "x", "--data-dir", str(tmp_path / "none")],
        ["search", "x", "--timezone", "Nowhere/Town", "--data-dir", str(data)],
        ["search", "x", "--since", "yesterday", "--data-dir", str(data)],
    ):
        result = runner.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
    result = runner.invoke(app, ["search", "x", "--data-dir", str(tmp_path / "none")])
    assert result.output.strip().startswith("error: no warehouse in")


def test_a_warehouse_without_an_index_says_what_to_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    target = load_sample(data, "UTC")
    con = duckdb.connect(str(target))
    search.load_extension(con)
    con.execute("PRAGMA drop_fts_index('turns')")
    con.close()
    result = runner.invoke(app, ["search", "x", "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "no search index yet: run `transcripts run`" in result.output


def test_match_bm25_works_from_transcripts_sql(data: Path) -> None:
    sql = (
        "SELECT turn_id FROM (SELECT turn_id, fts_main_turns.match_bm25(turn_id, 'router') AS score FROM turns) "
        "WHERE score IS NOT NULL ORDER BY score DESC"
    )
    result = runner.invoke(app, ["sql", "--csv", sql, "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "turn_id"
    assert len(result.stdout.splitlines()) == 2


def test_a_snippet_of_a_long_turn_is_cut_around_the_first_match_with_ellipses() -> None:
    text = ("lorem ipsum " * 40) + "the needle\n\n  is here " + ("dolor sit " * 40)
    snippet, spans = search._snippet(text, [(text.index("needle"), text.index("needle") + 6)])
    assert snippet.startswith("…") and snippet.endswith("…")
    assert [snippet[a:b] for a, b in spans] == ["needle"]
    assert "needle is here" in snippet  # whitespace collapsed
    assert len(snippet) <= search.SNIPPET_CHARS + 42
