"""A corpus written before `sessions.git_repository` existed still merges and loads; its rows of deleted sources
keep a NULL repository, re-read sources get theirs, and a file the schema cannot take in stops the run clearly."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.etl.flow import run_etl
from flows.etl.settings import Settings, load_settings
from sinks.store import LAYOUT, SchemaMismatch, Store, conform
from tests.corpus import codex_rollout, grok_session
from transforms.schema import SCHEMA_VERSION, SESSIONS, TABLES

GONE = "019e1695-0522-7c83-8b39-0dd379793f81"  # its source is deleted after the upgrade
CHANGED = "019e1695-0522-7c83-8b39-0dd379793f82"  # its source grows after the upgrade
KEPT = "019e1695-0522-7c83-8b39-0dd379793f83"  # its source stays as it is
GROK = "019f6851-7ec4-7ef0-97d3-03f3eee38755"
SECRET = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"


def _with_remote(path: Path, url: str) -> Path:
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["payload"]["git"]["repository_url"] = url
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return path


def _home(home: Path) -> dict[str, Path]:
    paths = {
        GONE: _with_remote(codex_rollout(home, GONE, 1, day="2026-05-10"), "git@github.com:acme/old.git"),
        CHANGED: _with_remote(
            codex_rollout(home, CHANGED, 2, day="2026-05-11"), f"https://me:{SECRET}@github.com/acme/shop.git"
        ),
        KEPT: _with_remote(codex_rollout(home, KEPT, 1, day="2026-05-12"), "https://github.com/acme/shop"),
    }
    folder = grok_session(home, GROK, 1)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summary["git_remotes"] = ["git@github.com:acme/shop.git"]
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    paths[GROK] = folder / "chat_history.jsonl"
    return paths


def _settings(home: Path, data: Path) -> Settings:
    return load_settings(home=home, data_dir=data, sources=["codex", "grok"], env={"HOME": str(home)}, lock_wait=5)


def _run(settings: Settings, *, full: bool = False) -> Any:
    return run_etl(settings, full=full, as_tasks=False)


def _older_parser(version: str) -> str:
    """The reader's version as schema 2 wrote it: 2 (Codex and Grok were at 3 when the schema became 3)."""
    return re.sub(r"^\d+", "2", version)


def _as_written_by_the_previous_version(data: Path) -> None:
    """What schema 2 left on disk: sessions files without the column, parser versions 2, no schema in the layout,
    and a warehouse of schema 2."""
    current = Store(data).current()
    assert current is not None
    for path in sorted((current / "sessions").rglob("*.parquet")):
        old = pq.read_table(path).drop_columns(["git_repository"])
        old = old.set_column(
            old.column_names.index("parser_version"),
            "parser_version",
            pa.array([_older_parser(v) for v in old.column("parser_version").to_pylist()], pa.string()),
        )
        os.unlink(path)  # hard-linked with the previous version: write a new file, as the old code did
        pq.write_table(old.replace_schema_metadata({"transcripts.schema_version": "2"}), path)
    for path in sorted((current / "sources").rglob("*.parquet")):
        sources = pq.read_table(path)
        sources = sources.set_column(
            sources.column_names.index("parser_version"),
            "parser_version",
            pa.array([_older_parser(v) for v in sources.column("parser_version").to_pylist()], pa.string()),
        )
        os.unlink(path)
        pq.write_table(sources, path)
    layout = json.loads((current / LAYOUT).read_text(encoding="utf-8"))
    layout.pop("schema_version", None)
    (current / LAYOUT).write_text(json.dumps(layout), encoding="utf-8")
    con = duckdb.connect(str(data / "warehouse.duckdb"))
    try:
        con.execute("DROP VIEW IF EXISTS session_overview")
        con.execute("ALTER TABLE sessions DROP COLUMN git_repository")
        con.execute("UPDATE transcripts_meta SET value = '2' WHERE key = 'schema_version'")
    finally:
        con.close()


def _repositories(data: Path) -> dict[str, tuple[str | None, bool]]:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT native_session_id, git_repository, source_present FROM session_overview").fetchall()
    finally:
        con.close()
    return {native: (repo, present) for native, repo, present in rows}


def _session_rows(data: Path, natives: set[str]) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT * EXCLUDE (source_path) FROM sessions").fetchall()
    finally:
        con.close()
    index = SESSIONS.column_names.index("native_session_id")
    return sorted((r for r in rows if r[index] in natives), key=repr)


def test_ok_old_corpus_merges_keeps_gone_rows_and_rereads_the_rest(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    paths = _home(home)
    _run(_settings(home, data))
    _as_written_by_the_previous_version(data)

    paths[GONE].unlink()  # the agent deleted it: its rows can never be read again
    codex_rollout(home, CHANGED, 3, day="2026-05-11")  # the session went on
    _with_remote(paths[CHANGED], f"https://me:{SECRET}@github.com/acme/shop.git")
    report = _run(_settings(home, data))
    # Every source that exists is read again: the Codex and Grok readers' versions changed with the schema.
    assert report.plan_counts["codex"] == {"new": 0, "changed": 2, "unchanged": 0, "deleted": 1, "bytes": ANY}
    assert report.plan_counts["grok"]["changed"] == 1

    assert _repositories(data) == {
        GONE: (None, False),  # loaded before the column existed; NULL, never a guess
        CHANGED: ("github.com/acme/shop", True),  # re-read: changed
        KEPT: ("github.com/acme/shop", True),  # re-read: the Codex reader's version changed
        GROK: ("github.com/acme/shop", True),
    }
    # One schema throughout the new version: every old file was conformed, and the layout says so.
    store = Store(data)
    current = store.current()
    assert current is not None
    assert json.loads((current / LAYOUT).read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION
    for table in TABLES:
        for path in store.files(table.name):
            assert pq.read_schema(path).equals(table.arrow_schema, check_metadata=False), path
    # The whole dataset reads as one table, as people query it directly.
    files = [str(p) for p in store.files("sessions")]
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet({files!r})").fetchone() == (4,)
    # The token in a remote's URL is stored nowhere.
    for path in sorted(data.rglob("*")):
        if path.is_file() and path.suffix in (".parquet", ".duckdb"):
            assert SECRET.encode() not in path.read_bytes(), path

    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        activity = con.execute(
            "SELECT project, git_repository, cwd, sessions, inferred_sessions, agents FROM project_activity"
        ).fetchall()
    finally:
        con.close()
    # The gone session's row has no repository of its own; its folder's other sessions name one: the same project.
    assert activity == [("shop", "github.com/acme/shop", "/home/u/proj", 4, 1, ["codex", "grok"])]

    # --full re-reads every source that exists and agrees with a fresh load of the same home; the gone row stays.
    _run(_settings(home, data), full=True)
    assert _repositories(data)[GONE] == (None, False)
    fresh = tmp_path / "fresh"
    _run(_settings(home, fresh))
    present = {CHANGED, KEPT, GROK}
    assert _session_rows(data, present) == _session_rows(fresh, present)


def test_ok_conform_adds_a_missing_nullable_column_as_nulls() -> None:
    old = SESSIONS.arrow_schema.empty_table().drop_columns(["git_repository"])
    conformed = conform(SESSIONS, old, "old.parquet")
    assert conformed.schema.equals(SESSIONS.arrow_schema)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.append_column("legacy_flag", pa.array([True] * t.num_rows)), "column legacy_flag is not in"),
        (lambda t: t.drop_columns(["source_path"]), "required column sessions.source_path is missing"),
        (
            lambda t: t.set_column(
                t.column_names.index("turn_count"), "turn_count", t.column("turn_count").cast(pa.string())
            ),
            "column sessions.turn_count is string in the file but int32 here",
        ),
    ],
)
def test_reject_a_file_the_schema_cannot_take_stops_the_run_saying_what_to_do(
    tmp_path: Path, change: Any, message: str
) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    _home(home)
    _run(_settings(home, data))
    current = Store(data).current()
    assert current is not None
    for path in sorted((current / "sessions").rglob("*.parquet")):
        table = change(pq.read_table(path))
        os.unlink(path)
        pq.write_table(table, path)
    layout = json.loads((current / LAYOUT).read_text(encoding="utf-8"))
    layout.pop("schema_version")
    (current / LAYOUT).write_text(json.dumps(layout), encoding="utf-8")
    codex_rollout(home, CHANGED, 3, day="2026-05-11")
    before = {p.name: p.stat().st_ino for p in (current / "sessions").rglob("*.parquet")}
    with pytest.raises(SchemaMismatch, match=re.escape(message)) as caught:
        _run(_settings(home, data))
    assert "move the data directory aside and run `transcripts run`" in str(caught.value)
    assert isinstance(caught.value, OSError)  # the CLI's one line: "run failed: ...; the previous corpus is intact"
    # Nothing of the corpus changed: the failed run's ledger row is all the next version adds.
    now = Store(data).current()
    assert now is not None
    assert {p.name: p.stat().st_ino for p in (now / "sessions").rglob("*.parquet")} == before


def test_reject_schema_mismatch_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from flows.cli.console import FAILED, reporting

    with pytest.raises(typer.Exit) as exit_, reporting("run"):
        raise SchemaMismatch("data/versions/v000001/sessions/agent=codex/part-000.parquet: column x is not in table")
    assert exit_.value.exit_code == FAILED
    err = capsys.readouterr().err
    assert "column x is not in table" in err and "previous corpus is intact" in err and "Traceback" not in err


def test_ok_a_no_op_command_does_not_skip_the_flow_on_a_corpus_of_an_older_schema(tmp_path: Path) -> None:
    # Gemini, OpenCode or ChatGPT readers did not change with the schema: none of their sources looks changed, so
    # only the corpus's own schema version can tell `transcripts run` that the flow must bring it up to date.
    from flows.cli.cmd_run import _may_skip_flow
    from sinks import ledger

    home, data = tmp_path / "home", tmp_path / "data"
    _home(home)
    _run(_settings(home, data))
    assert _may_skip_flow(data), "the corpus as this version wrote it: a no-op may skip the flow"
    lines = (data / ledger.LEDGER).read_text(encoding="utf-8").splitlines()
    older = [json.loads(line) for line in lines]
    for record in older:
        if record.get("corpus"):
            record["corpus"]["schema"] = "2"
    (data / ledger.LEDGER).write_text("".join(json.dumps(r) + "\n" for r in older), encoding="utf-8")
    assert not _may_skip_flow(data), "a corpus of schema 2 goes through the flow"


def test_ok_a_file_is_read_as_pyarrows_reader_reads_it_whole_or_by_column(tmp_path: Path) -> None:
    from sinks.files import read_parquet, write_parquet

    table = pa.table(
        {"a": pa.array([1, None, 3], pa.int64()), "b": pa.array([["x"], [], None], pa.list_(pa.string()))},
        metadata={b"transcripts.schema_version": b"9"},
    )
    path = tmp_path / "sources" / "agent=claude" / "part-000.parquet"  # a hive-style folder adds no column
    write_parquet(table, path)
    whole = read_parquet(path)
    assert whole.equals(pq.read_table(path)) and whole.schema.equals(pq.read_table(path).schema, check_metadata=True)
    assert whole.column_names == ["a", "b"]
    assert read_parquet(path, columns=["b"]).equals(pq.read_table(path, columns=["b"]))
