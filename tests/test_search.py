"""`transcripts search`: BM25 over turns, offline, with filters, highlighted snippets and stable JSON."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from flows.cli.app import app
from sinks import readonly, search, warehouse
from tests.corpus import S1, S2, claude_exchange, small_home, write_session
from tests.test_pipeline import run, settings_for
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


def test_a_word_english_stop_lists_drop_is_found_in_every_turn_that_has_it(data: Path) -> None:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        having = {
            str(r[0])
            for r in con.execute(r"SELECT turn_id FROM turns WHERE regexp_matches(text, '(?i)\bthe\b')").fetchall()
        }
    finally:
        con.close()
    assert having  # the sample says it
    assert {h["turn_id"] for h in hits(data, "the", "--limit", "100")} == having


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
        ["search", "x", "--agent", "nonesuch", "--data-dir", str(data)],
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


WORDS = ["login", "logins", "form", "Forms", "the", "and", "café", "naïve", "tests", "testing", "42", "x-ray", "CI"]
WORDS += ["a≠b", "e\u0301té", "\u0301alone", "ǅemal", "İSTANBUL", "ﬁle"]  # stripped, split again, case-folded


def _texts(rng: random.Random, n: int) -> list[str]:
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) + rng.choice(["", ".", " !?", "\n"])
        for _ in range(n)
    ]


def _turns(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str, str]]) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS turns (turn_id VARCHAR, session_id VARCHAR, text VARCHAR)")
    con.execute("DELETE FROM turns")
    if rows:
        con.executemany("INSERT INTO turns VALUES (?, ?, ?)", rows)


def _index_contents(con: duckdb.DuckDBPyConnection) -> tuple[object, ...]:
    """What BM25 scores depend on, independent of the internal ids."""
    s = search.INDEX_SCHEMA
    docs = con.execute(f"SELECT name, len FROM {s}.docs ORDER BY name").fetchall()
    df = con.execute(f"SELECT term, df FROM {s}.dict WHERE df > 0 ORDER BY term").fetchall()
    postings = con.execute(
        f"SELECT d.name, t.term, count(*) FROM {s}.terms x JOIN {s}.docs d USING (docid) "
        f"JOIN {s}.dict t USING (termid) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    stats = con.execute(f"SELECT num_docs, round(avgdl, 9) FROM {s}.stats").fetchall()
    return docs, df, postings, stats


def _scores(con: duckdb.DuckDBPyConnection, query: str) -> list[tuple[str, float]]:
    return [
        (name, round(score, 9))
        for name, score in con.execute(
            f"SELECT turn_id, {search.INDEX_SCHEMA}.match_bm25(turn_id, ?) AS s FROM turns "
            "WHERE s IS NOT NULL ORDER BY turn_id",
            [query],
        ).fetchall()
    ]


def _rebuilt(rows: list[tuple[str, str, str]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    _turns(con, rows)
    search.create_index(con)  # the extension's own full build
    return con


# Text that trips a tokenizer: accents composed and decomposed, marks after separators, characters that strip to a
# separator (≠ is = and a mark), ligatures, scripts with their own case rules, white space ASCII and not, quotes.
HOSTILE = [
    "Café naïve ÅNGSTRÖM",
    "cafe\u0301 \u0301alone =\u0338x a≠b ≮c≯",
    "İSTANBUL ΣΊΣΥΦΟΣ ǅemal ﬃ Ⅻ ① ¹²³ ½ ß",
    "tab\there\r\nx\fy\u000bv\u00a0nb\u2028ls\u3000ideo",
    "a'b\"c`d-e_f~g|h\\i/j [k] {l} (m) <n> 4x4 x86_64",
    "",
    "  ",
    "日本語のテキスト 한국어 текст ünïcödé",
]
_TEXTS = st.text(
    alphabet=st.sampled_from([*"aZé=<>-_ '\"\t\n\u000b\u00a0", "\u0301", "\u0338", "≠", "ǅ", "İ", "ﬁ", "Σ", "①"]),
    max_size=24,
)


def _words(con: duckdb.DuckDBPyConnection, expression: str) -> list[list[str] | None]:
    return [
        row[0]
        for row in con.execute(
            f"SELECT list_filter({expression}, w -> len(w) > 0) FROM tokenized ORDER BY i"
        ).fetchall()
    ]


@pytest.fixture(scope="module")
def tokenizing() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    _turns(con, [])
    search.create_index(con)
    con.execute("CREATE TABLE tokenized (i INTEGER, text VARCHAR)")
    return con


def _same_words(con: duckdb.DuckDBPyConnection, texts: list[str | None]) -> None:
    con.execute("DELETE FROM tokenized")
    con.executemany("INSERT INTO tokenized VALUES (?, ?)", list(enumerate(texts)))
    ours = search._tokens(search.tokenizer_of(con), "text")
    assert "tokenize" not in ours  # the fast form, not the macro it stands for
    assert _words(con, ours) == _words(con, f"{search.INDEX_SCHEMA}.tokenize(text)")


def test_the_index_splits_hostile_text_into_the_words_of_the_extensions_tokenizer(
    tokenizing: duckdb.DuckDBPyConnection,
) -> None:
    _same_words(tokenizing, [*HOSTILE, None])
    tokenizing.execute("DELETE FROM tokenized")
    tokenizing.execute("INSERT INTO tokenized VALUES (0, 'a≠b Café')")
    assert _words(tokenizing, search._tokens(search.tokenizer_of(tokenizing), "text")) == [["a", "b", "cafe"]]


@given(st.lists(_TEXTS, min_size=1, max_size=8))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_splits_into_the_words_of_the_extensions_tokenizer(
    tokenizing: duckdb.DuckDBPyConnection, texts: list[str]
) -> None:
    _same_words(tokenizing, list(texts))


def test_the_incremental_index_equals_the_extensions_full_build() -> None:
    rng = random.Random(7)
    rows = [(f"s{s}-{i}", f"s{s}", text) for s in range(6) for i, text in enumerate(_texts(rng, 8))]
    ours = duckdb.connect()
    _turns(ours, [])
    search.create_index(ours)
    _turns(ours, rows)
    search.update_index(ours, "SELECT DISTINCT session_id FROM turns")
    queries = ["login form", "tests", "cafe", "naive testing", "the", "x ray ci", "forms logins"]
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    for q in queries:
        assert _scores(ours, q) == _scores(theirs, q), q

    # s1 grows and changes, s2 goes, s9 is new: re-index just those three sessions.
    rows = [r for r in rows if r[1] not in {"s1", "s2"}]
    rows += [(f"s1-{i}", "s1", text) for i, text in enumerate(_texts(rng, 11))]
    rows += [(f"s9-{i}", "s9", text) for i, text in enumerate(_texts(rng, 3))]
    _turns(ours, rows)
    search.update_index(ours, "SELECT unnest(['s1', 's2', 's9'])")
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    for q in queries:
        assert _scores(ours, q) == _scores(theirs, q), q
    assert _scores(ours, "login")  # the comparison is not between two empty indexes


def test_documents_dropped_before_the_new_rows_then_an_update_equal_the_extensions_full_build() -> None:
    # A warehouse change drops the documents of the turns it deleted as it begins (beside the commit), and brings
    # the index up to date once the sessions' new rows are in: the two halves must give what one update gives.
    rng = random.Random(9)
    rows = [(f"s{s}-{i}", f"s{s}", text) for s in range(6) for i, text in enumerate(_texts(rng, 8))]
    ours = duckdb.connect()
    _turns(ours, [])
    search.create_index(ours)
    _turns(ours, rows)
    search.update_index(ours, "SELECT DISTINCT session_id FROM turns")
    deleted = [r[0] for r in rows if r[1] in {"s1", "s2"}]
    ours.execute("DELETE FROM turns WHERE session_id IN ('s1', 's2')")
    search.drop_documents(ours, f"SELECT unnest({deleted!r})")
    assert not ours.execute(
        f"SELECT count(*) FROM {search.INDEX_SCHEMA}.docs WHERE name IN (SELECT unnest(?))", [deleted]
    ).fetchone()[0]
    # s1 comes back grown (some of its turn ids are the old ones), s2 is gone, s9 is new.
    new = [(f"s1-{i}", "s1", text) for i, text in enumerate(_texts(rng, 11))]
    new += [(f"s9-{i}", "s9", text) for i, text in enumerate(_texts(rng, 3))]
    ours.executemany("INSERT INTO turns VALUES (?, ?, ?)", new)
    search.add_documents(ours, "SELECT unnest(['s1', 's2', 's9'])", "turns", tokenizer=search.tokenizer_of(ours))
    rows = [r for r in rows if r[1] not in {"s1", "s2"}] + new
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    for q in ["login form", "tests", "cafe", "naive testing", "forms logins"]:
        assert _scores(ours, q) == _scores(theirs, q), q
    assert _scores(ours, "login")


def test_an_index_built_in_chunks_equals_the_extensions_full_build() -> None:
    # A large corpus is indexed a chunk of sessions at a time (memory stays within the warehouse's limit: a 5 GB
    # corpus failed to pin memory when indexed whole); chunks must give the index one pass gives.
    rng = random.Random(11)
    rows = [(f"s{s}-{i}", f"s{s}", text) for s in range(12) for i, text in enumerate(_texts(rng, 6))]
    ours = duckdb.connect()
    _turns(ours, [])
    search.create_index(ours)
    _turns(ours, rows)
    total = sum(len(text) for _, _, text in rows)
    search.update_index(ours, "SELECT DISTINCT session_id FROM turns", chunk_bytes=total // 5)
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    for q in ["login form", "tests", "cafe", "naive testing"]:
        assert _scores(ours, q) == _scores(theirs, q), q
    # Then a re-index of some sessions, in chunks too.
    rows = [r for r in rows if r[1] != "s3"] + [(f"s3-{i}", "s3", t) for i, t in enumerate(_texts(rng, 9))]
    _turns(ours, rows)
    search.update_index(ours, "SELECT unnest(['s3', 's4', 's5'])", chunk_bytes=50)
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    assert _scores(ours, "login")


def _in_bucket_files(
    tmp_path: Path, buckets: int
) -> tuple[duckdb.DuckDBPyConnection, list[tuple[str, str, str]], list[str]]:
    """A connection with turns and the index's empty scaffold, and the turns written to `buckets` Parquet files of
    whole sessions, as buckets spread them."""
    rng = random.Random(13)
    rows = [(f"s{s}-{i}", f"s{s}", text) for s in range(12) for i, text in enumerate(_texts(rng, 6))]
    ours = duckdb.connect()
    _turns(ours, [])
    search.create_index(ours)
    _turns(ours, rows)
    files = []
    for bucket in range(buckets):
        path = tmp_path / f"part-{bucket:03d}.parquet"
        where = f"CAST(substr(session_id, 2) AS INTEGER) % {buckets} = {bucket}"  # none empty
        ours.execute(f"COPY (SELECT * FROM turns WHERE {where} ORDER BY turn_id) TO '{path}' (FORMAT parquet)")
        files.append(str(path))
    return ours, rows, files


def test_a_fresh_build_from_the_parquet_files_in_groups_equals_the_extensions_full_build(tmp_path: Path) -> None:
    # A fresh warehouse indexes from the turns files, a group of files (whole sessions) at a time, each file read
    # once; the groups are tokenized on other cursors, ahead of the one that adds them, more groups than cursors.
    ours, rows, files = _in_bucket_files(tmp_path, 6)
    assert len(search._file_groups(files, 1)) == 6 > 2 * search.TOKENIZERS
    assert len(search._file_groups(files, 10**9)) == 1
    search.build_index(ours, files, chunk_bytes=1)  # one file per group: six groups
    theirs = _rebuilt(rows)
    assert _index_contents(ours) == _index_contents(theirs)
    for q in ["login form", "tests", "cafe", "naive testing", "the"]:
        assert _scores(ours, q) == _scores(theirs, q), q
    assert _scores(ours, "login")


@pytest.mark.parametrize("side", ["tokenizer", "index"])
def test_a_fresh_build_that_fails_on_either_side_raises_that_error_and_leaves_no_thread_or_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    # While this cursor adds one group to the index, other cursors tokenize the next ones: a failure on either side
    # is the build's error, with every tokenizing thread stopped and waited for, and the connection as it was.
    ours, _, files = _in_bucket_files(tmp_path, 6)
    real_tokenize, real_add = search._tokenize, search._add_words

    def tokenize(con: duckdb.DuckDBPyConnection, rows: str, tables: tuple[str, str], *a: Any, **k: Any) -> None:
        if side == "tokenizer" and tables[0].endswith("_3"):
            raise RuntimeError("the tokenizer broke")
        real_tokenize(con, rows, tables, *a, **k)

    def add(con: duckdb.DuckDBPyConnection, tables: tuple[str, str]) -> None:
        if side == "index" and tables[0].endswith("_1"):
            raise RuntimeError("the index broke")
        real_add(con, tables)

    monkeypatch.setattr(search, "_tokenize", tokenize)
    monkeypatch.setattr(search, "_add_words", add)
    with pytest.raises(RuntimeError, match=f"the {side} broke"):
        search.build_index(ours, files, chunk_bytes=1)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("fts-tokenize")]
    attached = ours.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [search.SCRATCH])
    assert attached.fetchone() == (0,)
    assert ours.execute("SELECT count(*) FROM turns").fetchone() == (72,)


def test_after_incremental_runs_the_warehouse_index_equals_a_rebuild(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30, text="refactor the router"), append=True)
    write_session(home, S2, claude_exchange(S2, 1, text="replaced wholly"))  # rewritten: turns replaced
    run(settings_for(home, data))
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    search.load_extension(con)
    try:
        ours = _index_contents(con)
        rows = con.execute("SELECT turn_id, session_id, text FROM turns").fetchall()
        found = _scores(con, "router replaced")
    finally:
        con.close()
    theirs = _rebuilt(rows)
    assert ours == _index_contents(theirs)
    assert found == _scores(theirs, "router replaced") and len(found) == 3


def test_a_stop_signal_while_the_index_build_waits_for_its_tokenizers_is_raised_not_swallowed() -> None:
    """The build's last wait for its tokenizing threads swallowed every exception, a Ctrl-C or SIGTERM in the main
    thread included: the load went on to the end and was recorded `ok` (seen in CI: a stopped `watch`). The interrupt
    (`_thread.interrupt_main`, as a signal's handler raises it; raised in the wait at once, or as the thread it waits
    for ends, by Python version) now goes on up, the threads stopped."""
    import _thread

    con = duckdb.connect()
    try:
        ahead = search._Ahead(con, [], "porter")  # no group: no thread of its own
        ahead._workers = [search.OnCursor(con, lambda _cursor: time.sleep(1.0), name="slow-tokenizer")]
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                ahead.wait()
        finally:
            timer.cancel()
    finally:
        con.close()


def test_a_run_loads_the_extension_it_found_unhashed_and_a_users_connection_still_refuses_an_unsigned_one(
    tmp_path: Path,
) -> None:
    # A copy of the extension whose signature no longer matches: what DuckDB's check is there to refuse.
    tampered = tmp_path / "fts.duckdb_extension"
    data = bytearray(search.extension_path().read_bytes())
    data[-10] ^= 0xFF
    tampered.write_bytes(bytes(data))
    home = small_home(tmp_path / "home")
    out = tmp_path / "data"
    run(settings_for(home, out))
    path = out / "warehouse.duckdb"
    for user in (readonly.connect(path), duckdb.connect(str(path), read_only=True)):  # `sql`, `search`, the report
        try:
            with pytest.raises(duckdb.IOException, match="signature is either missing or invalid"):
                user.execute(f"LOAD '{tampered}'")
        finally:
            user.close()
    # The run's own connection (its one LOAD is of the installed wheel's file) skips the 40-70 ms hash.
    con = warehouse._connect(tmp_path / "scratch.duckdb", out)
    try:
        con.execute(f"LOAD '{tampered}'")
        assert con.execute("SELECT stem('running', 'porter')").fetchone() == ("run",)
    finally:
        con.close()
