"""The pipeline end to end (without Prefect's API; `test_flow.py` runs the real flow): idempotent, incremental,
archive-keeping, complete-or-reject, private."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import duckdb
import pytest

from flows.etl import run_etl
from flows.settings import Settings, load_settings
from sinks import ledger
from sinks.lock import LockBusy, writer_lock
from tests.corpus import S1, S2, S3, claude_exchange, small_home, write_session
from transforms.schema import TABLES

CORPUS_TABLES = [t.name for t in TABLES if t.name != "runs"]


def settings_for(home: Path, data: Path, **extra: Any) -> Settings:
    return load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)}, lock_wait=5, **extra)


def run(settings: Settings, *, full: bool = False) -> Any:
    return run_etl(settings, full=full, as_tasks=False)


def table_rows(data: Path, table: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    finally:
        con.close()


def parquet_rows(data: Path, table: str) -> list[tuple[Any, ...]]:
    files = sorted(str(p) for p in (data / "parquet" / table).rglob("*.parquet"))
    if not files:
        return []
    return sorted(duckdb.sql(f"SELECT * FROM read_parquet({files!r})").fetchall(), key=repr)


def snapshot(data: Path) -> dict[str, list[tuple[Any, ...]]]:
    snap = {t: table_rows(data, t) for t in CORPUS_TABLES}
    for t in CORPUS_TABLES:  # the warehouse holds exactly what the Parquet dataset holds
        assert parquet_rows(data, t) == snap[t], t
    return snap


def dataset_files(data: Path) -> dict[str, tuple[int, str]]:
    root = data / "parquet"
    return {
        str(p.relative_to(root)): (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*.parquet"))
    }


def tree_checksum(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_first_run_loads_good_sessions_and_rejects_the_corrupt_one(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    report = run(settings_for(home, tmp_path / "data"))
    assert report.committed.sessions_loaded == 2
    assert report.committed.sessions_rejected == 1
    data = tmp_path / "data"
    sessions = table_rows(data, "sessions")
    assert sorted(r[0] for r in sessions) == [f"claude-{S1}", f"claude-{S2}"]
    turns = table_rows(data, "turns")
    assert len(turns) == 10
    assert f"claude-{S1}-0" in {r[0] for r in turns}
    rejects = table_rows(data, "rejects")
    assert [(r[0].endswith(f"{S3}.jsonl"), r[3], r[4], r[6]) for r in rejects] == [
        (True, "rejected", "invalid_json", 1)
    ]
    sources = {Path(r[0]).stem: (r[9], r[12]) for r in table_rows(data, "sources")}
    assert sources == {S1: ("loaded", True), S2: ("loaded", True), S3: ("rejected", True)}


def test_rerun_with_nothing_changed_writes_nothing(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before_rows = snapshot(data)
    before_files = dataset_files(data)
    warehouse = data / "warehouse.duckdb"
    before_warehouse = (warehouse.stat().st_ino, warehouse.stat().st_mtime_ns, warehouse.read_bytes())
    report = run(settings)
    assert report.committed is None, "nothing to do: nothing committed"
    assert snapshot(data) == before_rows
    assert dataset_files(data) == before_files, "no corpus file may be rewritten (same inode, same bytes)"
    assert (warehouse.stat().st_ino, warehouse.stat().st_mtime_ns, warehouse.read_bytes()) == before_warehouse, (
        "the warehouse is neither copied nor rewritten to record a run that did nothing"
    )
    assert len(table_rows(data, "runs")) == 1, "a no-op run is only in the ledger"
    assert [r["outcome"] for r in ledger.runs(data)][:2] == ["noop", "ok"]


def test_rerun_with_nothing_changed_still_rebuilds_a_warehouse_a_killed_run_left_behind(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before = snapshot(data)
    (data / "warehouse.duckdb").unlink()  # as if a run died between the Parquet swap and the warehouse swap
    report = run(settings)
    assert report.committed is not None, "the flow went on to load the warehouse"
    assert snapshot(data) == before


def test_appended_lines_replace_the_session_keeping_old_turn_ids(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    old_ids = {r[0] for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"}
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30, text="later"), append=True)
    report = run(settings)
    assert report.committed.sessions_loaded == 1
    turns = [r for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"]
    ids = [r[0] for r in turns]
    assert len(ids) == len(set(ids)) == 10
    assert old_ids < set(ids)
    assert [r[0] for r in table_rows(data, "sessions")].count(f"claude-{S1}") == 1
    usage = [r for r in table_rows(data, "usage") if r[1] == f"claude-{S1}"]
    assert len(usage) == 5


def test_deleted_source_keeps_its_rows_marked_not_present(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before = snapshot(data)
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink()
    report = run(settings)
    assert report.plan_counts["claude"]["deleted"] == 1
    after = snapshot(data)
    for table in ("sessions", "turns", "tool_calls", "usage", "record_kinds"):
        assert after[table] == before[table], table
    present = {Path(r[0]).stem: r[12] for r in after["sources"]}
    assert present == {S1: True, S2: False, S3: True}
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    gone = con.execute("SELECT session_id FROM session_overview WHERE NOT source_present").fetchall()
    con.close()
    assert gone == [(f"claude-{S2}",)]


def test_full_rebuild_equals_the_incremental_history(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True)
    run(settings)
    write_session(home, S2, claude_exchange(S2, 3, start_minute=50), append=True)
    run(settings)
    incremental = snapshot(data)
    run(settings, full=True)
    assert snapshot(data) == incremental
    fresh = tmp_path / "fresh"
    run(settings_for(home, fresh))
    assert snapshot(fresh) == incremental


def test_sources_are_never_modified(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    before = tree_checksum(home)
    run(settings_for(home, tmp_path / "data"))
    run(settings_for(home, tmp_path / "data"), full=True)
    assert tree_checksum(home) == before


def test_corpus_is_private_whatever_the_umask(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        run(settings_for(home, data))
        write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True)
        run(settings_for(home, data))
    finally:
        os.umask(old)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for path in data.rglob("*"):
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_deferred_live_session_is_read_again_next_run(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    live = write_session(home, S1, claude_exchange(S1, 2))
    with live.open("a") as handle:
        handle.write('{"type":"user","sessionId":"' + S1 + '","mess')
    settings = settings_for(home, data, limits={"settle_seconds": 3600})
    report = run(settings)
    assert report.committed.sources_deferred == 1
    rejects = table_rows(data, "rejects")
    assert ("deferred", "write_in_progress") in {(r[3], r[4]) for r in rejects}
    assert f"claude-{S1}" not in {r[0] for r in table_rows(data, "sessions")}
    live.write_text("".join(line + "\n" for line in claude_exchange(S1, 2)), encoding="utf-8")
    os.utime(live, ns=(live.stat().st_mtime_ns, live.stat().st_mtime_ns))
    report = run(settings)
    assert report.committed.sessions_loaded == 1
    assert ("deferred", "write_in_progress") not in {(r[3], r[4]) for r in table_rows(data, "rejects")}


def test_a_second_writer_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    data.mkdir()
    with writer_lock(data, 0), pytest.raises(LockBusy, match="being written by pid"):
        run(load_settings(home=home, data_dir=data, sources=["claude"], env={}, lock_wait=0.3))


def test_changed_source_that_now_fails_keeps_its_last_good_rows(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    before = [r for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"]
    write_session(home, S1, ['{"broken'], append=True)
    write_session(home, S1, claude_exchange(S1, 1, start_minute=45), append=True)
    run(settings)
    assert [r for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"] == before
    codes = {(Path(r[0]).stem, r[4]) for r in table_rows(data, "rejects")}
    assert (S1, "invalid_json") in codes


def test_skipped_records_are_counted_and_visible_in_status(tmp_path: Path) -> None:
    from flows.status import read_status

    home = tmp_path / "home"
    lines = claude_exchange(S1, 1)
    lines.insert(0, '{"type":"file-history-snapshot","messageId":"m","snapshot":{"timestamp":"2026-03-01T10:00:00Z"}}')
    lines.append('{"type":"brand-new-kind","sessionId":"' + S1 + '","timestamp":"2026-03-01T10:00:09.000Z"}')
    write_session(home, S1, lines)
    data = tmp_path / "data"
    run(settings_for(home, data))
    skipped = {(r["record_kind"], r["records"]) for r in read_status(data, details=True).skipped or []}
    assert ("brand-new-kind", 1) in skipped
    assert ("file-history-snapshot", 1) in skipped
    (session,) = table_rows(data, "sessions")
    assert session[18] == 2, "sessions.skipped_record_count"


def test_extraction_on_several_processes_gives_the_same_corpus(tmp_path: Path) -> None:
    import dataclasses

    home = small_home(tmp_path / "home")
    for n in range(6):
        sid = f"eeeeeeee-0000-4000-8000-00000000000{n}"
        write_session(home, sid, claude_exchange(sid, 3, text=f"parallel {n}"))
    one = dataclasses.replace(settings_for(home, tmp_path / "one"), batch_files=2, workers=1)
    two = dataclasses.replace(settings_for(home, tmp_path / "two"), batch_files=2, workers=2)
    report = run(two)
    assert report.committed.sessions_loaded == 8
    run(one)
    assert snapshot(tmp_path / "two") == snapshot(tmp_path / "one")


def test_a_small_partition_is_one_file_per_table(tmp_path: Path) -> None:
    from sinks.store import Store

    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    assert Store(data).layout() == {"claude": 1}
    assert sorted(p.name for p in (data / "parquet" / "turns" / "agent=claude").iterdir()) == ["part-000.parquet"]


def test_a_growing_partition_splits_its_buckets_and_keeps_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sinks.store import Store

    monkeypatch.setattr("sinks.store.BUCKET_BYTES", 2000)  # a bucket per ~2 KB of sources, to grow quickly
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    first = Store(data).layout()["claude"]
    for n in range(8):
        sid = f"ffffffff-0000-4000-8000-00000000000{n}"
        write_session(home, sid, claude_exchange(sid, 4, text=f"growth {n}"))
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings)
    grown = Store(data).layout()["claude"]
    assert grown > first and grown & (grown - 1) == 0, (first, grown)
    files = {p.name for p in (data / "parquet" / "turns" / "agent=claude").iterdir()}
    assert len(files) > 1
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean), "splitting moves rows between files, never changes them"
    before = dataset_files(data)
    run(settings)
    assert {k: v for k, v in dataset_files(data).items() if not k.startswith("runs/")} == {
        k: v for k, v in before.items() if not k.startswith("runs/")
    }


def test_each_staged_file_is_opened_once_per_group_of_buckets_and_the_corpus_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened once per bucket, the staged files cost batches x buckets opens: the square of the corpus."""
    from sinks import commit
    from sinks.store import Store

    monkeypatch.setattr("sinks.store.BUCKET_BYTES", 500)  # dozens of buckets from a small corpus
    home = small_home(tmp_path / "home")
    for n in range(24):
        sid = f"eeeeeeee-0000-4000-8000-0000000000{n:02d}"
        write_session(home, sid, claude_exchange(sid, 3, text=f"bucketed {n}"))
    opens: list[str] = []
    real = commit.read_scratch

    def counted(path: Any) -> Any:
        opens.append(str(path))
        return real(path)

    monkeypatch.setattr(commit, "read_scratch", counted)
    config = tmp_path / "small-batches.toml"
    config.write_text("[run]\nbatch_files = 4\nworkers = 1\n", encoding="utf-8")
    grouped = tmp_path / "grouped"
    run(settings_for(home, grouped, config=config))
    files = len(set(opens))
    buckets = Store(grouped).layout()["claude"]
    assert files >= 6 and buckets >= 16, (files, buckets)  # several batches' files, many buckets
    groups = -(-buckets * 5 // commit.GROUP_BUCKETS)  # five session tables
    assert len(opens) <= files * groups < files * buckets, (len(opens), files, groups)
    monkeypatch.setattr(commit, "GROUP_BUCKETS", 1)  # each bucket on its own: what it was
    one_by_one = tmp_path / "one_by_one"
    run(settings_for(home, one_by_one, config=config))
    assert snapshot(grouped) == snapshot(one_by_one)
