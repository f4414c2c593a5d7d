"""`search` finds the words people type, `hello` and `first` among them (stop words of DuckDB's English list), and a
warehouse whose index was made with that list says so and is rebuilt by the next run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from flows.cli.app import app
from sinks import search, warehouse
from tests.corpus import S1, S2, claude_exchange, write_session
from tests.test_pipeline import run, settings_for

runner = CliRunner()


def _home(home: Path) -> Path:
    write_session(home, S1, claude_exchange(S1, 3, text="hello, is this the first"))
    write_session(home, S2, claude_exchange(S2, 2, text="a second question"))
    return home


def _turns_saying(data: Path, word: str) -> set[str]:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT turn_id, text FROM turns").fetchall()
    finally:
        con.close()
    return {str(t) for t, text in rows if re.search(rf"(?i)\b{word}\b", str(text))}


def _found(data: Path, word: str) -> set[str]:
    result = runner.invoke(
        app, ["search", word, "--json", "--limit", "100", "--data-dir", str(data)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return {str(h["turn_id"]) for h in json.loads(result.stdout)}


def test_search_finds_hello_and_first_in_every_turn_that_says_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(settings_for(_home(tmp_path / "home"), data))
    for word in ("hello", "first"):
        expected = _turns_saying(data, word)
        assert len(expected) == 3, word
        assert _found(data, word) == expected, word


def test_an_index_made_with_stop_words_says_which_it_ignored_and_the_next_run_rebuilds_it(tmp_path: Path) -> None:
    home, data = _home(tmp_path / "home"), tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    # The index as a warehouse made before kept it: English stop words, no index settings in the meta table.
    con = duckdb.connect(str(data / "warehouse.duckdb"))
    try:
        search.load_extension(con)
        con.execute("PRAGMA create_fts_index('turns', 'turn_id', 'text', stemmer = 'porter', overwrite = 1)")
        con.execute(f"DELETE FROM {warehouse.META} WHERE key = ?", [warehouse.INDEX])
    finally:
        con.close()
    result = runner.invoke(app, ["search", "hello", "--data-dir", str(data)], catch_exceptions=False)
    assert result.exit_code == 0
    out = " ".join(result.output.split())
    assert "No turns match 'hello'." in out and "Not searched: hello" in out and "transcripts run" in out
    run(settings)  # nothing new in the sources: the index's settings alone make it rebuild
    assert _found(data, "hello") == _turns_saying(data, "hello") != set()
