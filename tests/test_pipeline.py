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

from flows.etl.flow import run_etl
from flows.etl.settings import Settings, load_settings
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


def test_a_run_of_some_agents_marks_deleted_only_their_sources_under_the_roots_it_walked(tmp_path: Path) -> None:
    from tests.corpus import mixed_home

    home = mixed_home(tmp_path / "home")
    data = tmp_path / "data"
    every = load_settings(
        home=home, data_dir=data, sources=["claude", "codex", "grok"], env={"HOME": str(home)}, lock_wait=5
    )
    run(every)
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink()
    codex = next((home / ".codex").rglob("rollout-*.jsonl"))
    codex.unlink()
    report = run(settings_for(home, data))  # claude alone: the codex file gone is not its business
    assert report.plan_counts["claude"]["deleted"] == 1 and "codex" not in report.plan_counts
    gone = {str(r[0]) for r in table_rows(data, "sources") if r[12] is False}
    assert gone == {str(home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl")}
    report = run(every)
    assert report.plan_counts["codex"]["deleted"] == 1 and report.plan_counts["claude"]["deleted"] == 0
    gone = {str(r[0]) for r in table_rows(data, "sources") if r[12] is False}
    assert str(codex) in gone and len(gone) == 2


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
    from flows.etl.status import read_status

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


def test_each_staged_file_is_opened_once_per_group_of_buckets_its_batches_for_the_group_read_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened once per bucket, the staged files cost batches x buckets opens: the square of the corpus. A staged file
    holds every bucket's rows, one record batch per bucket; the commit opens it once per group of buckets and reads
    the group's batches, which lie together, in one read (read one by one, a 5 GB load's ~240,000 small batches
    cost a quarter of its commit), each batch once, never a batch of a bucket outside the group."""
    from sinks import commit
    from sinks.files import ScratchFile
    from sinks.store import Store
    from transforms import ids

    monkeypatch.setattr("sinks.store.BUCKET_BYTES", 500)  # dozens of buckets from a small corpus
    home = small_home(tmp_path / "home")
    for n in range(24):
        sid = f"eeeeeeee-0000-4000-8000-0000000000{n:02d}"
        write_session(home, sid, claude_exchange(sid, 3, text=f"bucketed {n}"))
    opens: list[str] = []
    real = commit.ScratchFile

    def counted(path: Any, **options: Any) -> Any:
        opens.append(str(path))
        return real(path, **options)

    monkeypatch.setattr(commit, "ScratchFile", counted)
    reads: list[list[tuple[str, int, set[str]]]] = []  # per read: (file, offset, sessions) of each batch read
    real_run = ScratchFile.read_run

    def read_run(self: ScratchFile, spans: Any) -> Any:
        tables = real_run(self, spans)
        reads.append(
            [(self.path, at, set(t.column("session_id").to_pylist())) for (at, _), t in zip(spans, tables, strict=True)]
        )
        return tables

    monkeypatch.setattr(ScratchFile, "read_run", read_run)
    config = tmp_path / "small-batches.toml"
    config.write_text("[run]\nbatch_files = 4\nworkers = 1\n", encoding="utf-8")
    grouped = tmp_path / "grouped"
    run(settings_for(home, grouped, config=config))
    files = len(set(opens))
    buckets = Store(grouped).layout()["claude"]
    assert files >= 6 and buckets >= 16, (files, buckets)  # several batches' files, many buckets
    groups = -(-buckets * 5 // commit.GROUP_BUCKETS)  # five session tables
    assert len(opens) <= files * groups < files * buckets, (len(opens), files, groups)
    batches = [batch for read in reads for batch in read]
    assert len({(f, at) for f, at, _ in batches}) == len(batches), "each batch read once"
    assert len(batches) > 2 * files, (files, len(batches))  # several buckets read from each file
    for _, _, sids in batches:
        assert len({ids.bucket_of(s, buckets) for s in sids}) == 1, sids  # a batch holds one bucket's rows
    assert any(len(read) > 1 for read in reads), "a group's batches of a file are read together"
    for read in reads:
        assert len({ids.bucket_of(s, buckets) for _, _, sids in read for s in sids}) <= commit.GROUP_BUCKETS
    loaded = {f"claude-eeeeeeee-0000-4000-8000-0000000000{n:02d}" for n in range(24)}
    assert loaded <= {s for _, _, sids in batches for s in sids}, "every session's rows read back"
    monkeypatch.setattr(commit, "GROUP_BUCKETS", 1)  # each bucket on its own: what it was
    one_by_one = tmp_path / "one_by_one"
    run(settings_for(home, one_by_one, config=config))
    assert snapshot(grouped) == snapshot(one_by_one)


def test_a_group_of_buckets_holds_at_most_group_bytes_of_staged_rows_a_big_buckets_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's staged rows are read with it and held until it is merged: groups close at GROUP_BYTES (or
    GROUP_BUCKETS), a bucket bigger alone is a group alone, and a big bucket's rows (read where they lie, apart)
    count for nothing."""
    from sinks import commit
    from sinks.results import Staged
    from sinks.store import FileKey
    from transforms.schema import TURNS

    monkeypatch.setattr(commit, "GROUP_BYTES", 100)
    monkeypatch.setattr(commit, "GROUP_BUCKETS", 3)
    monkeypatch.setattr(commit, "BIG_BUCKET_BYTES", 1000)
    sizes = [40, 40, 40, 40, 150, 30, 5000, 30, 10, 10, 10]  # staged bytes per bucket; 5000 is a big bucket
    jobs = [(TURNS, FileKey("turns", "claude", b), {f"s{b}"}) for b in range(len(sizes))]
    staged = {FileKey("turns", "claude", b): [Staged(f"/s/{b}", 0, 1, 1, n)] for b, n in enumerate(sizes)}
    groups = [[key.bucket for _, key, _ in group] for group in commit._groups(jobs, staged)]
    assert groups == [[0, 1], [2, 3], [4], [5, 6, 7], [8, 9, 10]]
    assert [b for group in groups for b in group] == list(range(len(sizes)))  # every bucket once, in order


def _tool_session(home: Path, sid: str, exchanges: int, *, start: int = 0) -> None:
    """A Claude session of prompts, answers and tool calls with their results, appended to its file."""
    import json

    from tests import claude_records as r

    records = []
    for i in range(start, start + exchanges):
        ts = f"2026-03-01T11:{i // 60:02d}:{i % 60:02d}.000Z"
        call = f"toolu_{sid[:4]}_{i:04d}"
        records += [
            r.user(f"step {i}: list the files {'and explain ' * (i % 7)}", sid=sid, ts=ts),
            r.assistant([r.text(f"Looking at step {i}."), r.tool_use(call, command=f"ls -la dir{i}")],
                        sid=sid, ts=ts, msg_id=f"msg_{sid[:4]}_{i}", request_id=f"req_{sid[:4]}_{i}"),
            r.user([r.tool_result(call, f"file{i}.txt\n" * (1 + i % 13))], sid=sid, ts=ts),
        ]  # fmt: skip
    write_session(home, sid, [json.dumps(x) for x in records], append=True)


def _file_rows(data: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows of every session-table file of the dataset, in file order."""
    import pyarrow.parquet as pq

    root = data / "parquet"
    tables = ("sessions", "turns", "tool_calls", "usage", "session_links", "record_kinds")
    return {
        str(p.relative_to(root)): pq.read_table(p).to_pylist()
        for t in tables
        for p in sorted((root / t).rglob("*.parquet"))
    }


def test_a_bucket_too_big_to_hold_is_written_in_slices_with_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One huge session fills a bucket alone; it is merged a slice of sorted rows at a time, never whole, and the
    corpus is the one the whole-bucket merge gives, after a first load and after an append."""
    import pyarrow.parquet as pq

    from sinks import commit

    home = small_home(tmp_path / "home")
    big = "bbbbbbbb-0000-4000-8000-000000000001"
    _tool_session(home, big, 60)
    _tool_session(home, S1, 5)
    config = tmp_path / "streamed.toml"  # the big session read in two passes, in parts: many staged pieces
    config.write_text(
        "[run]\nbatch_files = 1\nworkers = 1\n[limits]\nstream_source_bytes = 2000\nstream_part_bytes = 3000\n",
        encoding="utf-8",
    )
    unmapped: list[str] = []
    mapped_reads: list[str] = []
    real = commit._read_piece

    def counted(piece: Any, *, mapped: bool = False) -> Any:
        (mapped_reads if mapped else unmapped).append(piece.path)
        return real(piece, mapped=mapped)

    monkeypatch.setattr(commit, "_read_piece", counted)
    whole, sliced, again = tmp_path / "whole", tmp_path / "sliced", tmp_path / "again"
    run(settings_for(home, whole, config=config))
    assert not unmapped and not mapped_reads, "under the threshold: the whole-bucket merge, every piece read whole"
    with monkeypatch.context() as small:
        small.setattr(commit, "BIG_BUCKET_BYTES", 2000)
        small.setattr(commit, "SLICE_BYTES", 500)
        run(settings_for(home, sliced, config=config))
        assert len(set(unmapped)) >= 4, "slices gathered from the staged pieces of the big session"
        assert len(set(mapped_reads)) >= 4, "its pieces mapped to find their keys, never read whole"
        run(settings_for(home, again, config=config))
    assert snapshot(sliced) == snapshot(whole)
    assert _file_rows(sliced) == _file_rows(whole), "each file: the same rows in the same order"
    turns = next(p for p in (sliced / "parquet" / "turns").rglob("*.parquet") if big[:8] in str(pq.read_table(p)))
    assert pq.ParquetFile(turns).num_row_groups > 3, "written a slice at a time"
    same = {k: v[1] for k, v in dataset_files(sliced).items() if not k.startswith("runs/")}
    assert same == {k: v[1] for k, v in dataset_files(again).items() if not k.startswith("runs/")}, "same bytes"

    _tool_session(home, big, 5, start=60)  # the big session grows: its old rows are dropped a row group at a time
    run(settings_for(home, whole, config=config))
    with monkeypatch.context() as small:
        small.setattr(commit, "BIG_BUCKET_BYTES", 2000)
        small.setattr(commit, "SLICE_BYTES", 500)
        run(settings_for(home, sliced, config=config))
        fresh = tmp_path / "fresh"  # the same rows from another history: one load of the grown session
        run(settings_for(home, fresh, config=config))
    after = snapshot(sliced)
    assert after == snapshot(whole)
    assert _file_rows(sliced) == _file_rows(whole)
    tables = ("sessions/", "turns/", "tool_calls/", "usage/", "session_links/", "record_kinds/")
    assert {k: v[1] for k, v in dataset_files(sliced).items() if k.startswith(tables)} == {
        k: v[1] for k, v in dataset_files(fresh).items() if k.startswith(tables)
    }, "the same rows give the same bytes, whatever history led to them"
    assert len([t for t in after["tool_calls"] if big in str(t)]) == 65


def test_a_growing_partition_splits_a_big_bucket_a_row_group_at_a_time_into_the_files_a_fresh_load_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition that grows spreads its buckets over more; a bucket holding a huge session is read a row group at
    a time, and each new file is written as a merge writes it (in slices when big), so its bytes are a fresh load's."""
    import pyarrow.parquet as pq

    from sinks import commit, store
    from sinks.store import Store

    monkeypatch.setattr(store, "BUCKET_BYTES", 4000)  # a bucket per ~4 KB of sources, to grow quickly
    monkeypatch.setattr(commit, "BIG_BUCKET_BYTES", 2000)
    monkeypatch.setattr(commit, "SLICE_BYTES", 500)
    home = small_home(tmp_path / "home")
    big = "bbbbbbbb-0000-4000-8000-000000000001"
    _tool_session(home, big, 40)
    data = tmp_path / "data"
    run(settings_for(home, data))
    first = Store(data).layout()["claude"]
    for n in range(8):
        _tool_session(home, f"cccccccc-0000-4000-8000-00000000000{n}", 6)
    takes: list[int] = []
    real_take = store.KeptRows.take

    def counted(self: store.KeptRows, indices: Any) -> Any:
        takes.append(len(indices))
        return real_take(self, indices)

    def never_whole(self: store.NextVersion, key: store.FileKey) -> Any:
        raise AssertionError(f"{key} read whole")

    monkeypatch.setattr(store.KeptRows, "take", counted)
    monkeypatch.setattr(store.NextVersion, "read", never_whole)
    run(settings_for(home, data))
    assert Store(data).layout()["claude"] > first, "the partition grew: its buckets were split"
    fresh = tmp_path / "fresh"
    run(settings_for(home, fresh))
    tables = ("sessions/", "turns/", "tool_calls/", "usage/", "session_links/", "record_kinds/")
    assert {k: v[1] for k, v in dataset_files(data).items() if k.startswith(tables)} == {
        k: v[1] for k, v in dataset_files(fresh).items() if k.startswith(tables)
    }, "the same rows give the same bytes, whatever history led to them"
    turns = next(p for p in (data / "parquet" / "turns").rglob("*.parquet") if big[:8] in str(pq.read_table(p)))
    assert pq.ParquetFile(turns).num_row_groups > 3, "the big session's file is written a slice at a time"
    assert takes and max(takes) < 120, "rows read again a slice at a time, never the big session whole"


def test_a_big_bucket_merged_in_slices_keeps_the_sorted_order_of_rows_drawn_from_several_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces whose rows interleave in the sort order (and a copy from a losing source, and old rows of another
    session): every slice is put back in order, and the file equals the whole-bucket merge row for row."""
    from datetime import UTC, datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sinks import commit
    from sinks.files import write_scratch
    from sinks.results import Staged
    from sinks.staging import SOURCE_COLUMN
    from sinks.store import FileKey, KeptRows
    from transforms.schema import TURNS

    def turns(sid: str, indexes: list[int], source: str | None) -> pa.Table:
        n = len(indexes)
        when = datetime(2026, 3, 1, tzinfo=UTC)
        data = pa.table(
            {
                "turn_id": [f"{sid}-{i}" for i in indexes], "session_id": [sid] * n, "agent": ["claude"] * n,
                "turn_index": indexes, "role": ["user"] * n, "text": [f"text {i} " * (i % 5 + 1) for i in indexes],
                "timestamp": [when] * n, "timestamp_inferred": [False] * n, "model": [None] * n,
                "attachments": [[] for _ in indexes],
            },
            schema=TURNS.arrow_schema,
        )  # fmt: skip
        return data if source is None else data.append_column(SOURCE_COLUMN, pa.array([source] * n, pa.string()))

    class Version:  # the NextVersion calls a merge makes: the old file in row groups of two rows, writes in memory
        def __init__(self, old: pa.Table) -> None:
            self.old = tmp_path / "old.parquet"
            pq.write_table(old, self.old, row_group_size=2)
            self.files: dict[FileKey, tuple[str, pa.Table]] = {}

        def kept_rows(self, key: FileKey, sids: set[str]) -> KeptRows:
            return KeptRows(TURNS, self.old, sids)

        def put(self, key: FileKey, table: pa.Table) -> None:
            self.files[key] = ("whole", table)

        def put_parts(self, key: FileKey, parts: Any, schema: pa.Schema) -> None:
            self.files[key] = ("slices", pa.concat_tables(list(parts)))

    staged = []
    for n, piece in enumerate(
        [
            turns("claude-b", [4, 0, 8, 2], "/b.jsonl"),
            turns("claude-b", [1, 5, 3, 7, 6], "/b.jsonl"),
            turns("claude-b", [0, 1, 2], "/copy.jsonl"),
        ]
    ):
        path = tmp_path / f"turns-{n}.arrow"
        (offset, size), *_ = write_scratch(piece.to_batches(), piece.schema, path)
        staged.append(Staged(str(path), offset, size, piece.num_rows, piece.nbytes))
    key = FileKey("turns", "claude", 0)
    results = {}
    for threshold in (10**9, 0):
        monkeypatch.setattr(commit, "BIG_BUCKET_BYTES", threshold)
        monkeypatch.setattr(commit, "SLICE_BYTES", 400)  # several rows a slice, from two pieces in turn
        version = Version(pa.concat_tables([turns("claude-a", [0, 1], None), turns("claude-b", [0, 9], None)]))
        commit._merge_bucket(
            version, TURNS, key, {"claude-b"}, staged, {"claude-b": "/b.jsonl"}, commit._Opened(staged)
        )  # type: ignore[arg-type]
        results[threshold] = version.files[key]
    assert results[10**9][0] == "whole" and results[0][0] == "slices"
    rows = results[0][1].to_pylist()
    assert rows == results[10**9][1].to_pylist()
    assert [(r["session_id"], r["turn_index"]) for r in rows] == [("claude-a", 0), ("claude-a", 1)] + [
        ("claude-b", i) for i in range(9)
    ], "the old copy of b and the losing source's rows are gone; b's rows are in order"

    # A big session that stays (a) beside one that is replaced: its old rows are read again a slice at a time,
    # never held whole; and with nothing new staged for the bucket, the same.
    reads: list[int] = []
    real_take = KeptRows.take

    def counted_take(self: KeptRows, indices: pa.Array) -> pa.Table:
        reads.append(len(indices))
        return real_take(self, indices)

    monkeypatch.setattr(KeptRows, "take", counted_take)
    old = pa.concat_tables([turns("claude-a", list(range(30)), None), turns("claude-b", [0, 9], None)])
    for deltas in (staged, []):
        got = {}
        for threshold in (10**9, 0):
            monkeypatch.setattr(commit, "BIG_BUCKET_BYTES", threshold)
            version = Version(old)
            reads.clear()
            commit._merge_bucket(
                version,  # type: ignore[arg-type]
                TURNS, key, {"claude-b"}, deltas, {"claude-b": "/b.jsonl"}, commit._Opened(deltas),
            )  # fmt: skip
            got[threshold] = version.files[key]
            taken = list(reads)
        assert got[10**9][0] == "whole" and got[0][0] == "slices"
        assert got[0][1].to_pylist() == got[10**9][1].to_pylist()
        assert [r["session_id"] for r in got[0][1].to_pylist()].count("claude-a") == 30
        assert sum(taken) == 30 and len(taken) > 3 and max(taken) < 30, taken  # a slice at a time


def test_kept_rows_are_taken_by_position_in_any_order_reading_only_their_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sinks.store import KeptRows
    from transforms.schema import SESSION_LINKS

    sids = ["a", "gone", "b", "gone", "gone", "gone", "c", "d", "e", "f"]  # one row group (3..5) holds only `gone`
    rows = pa.table(
        {
            "session_id": sids,
            "agent": ["codex"] * 10,
            "other_session_id": [f"x{i}" for i in range(10)],
            "kind": ["fork"] * 10,
            "tool_call_id": [None] * 10,
        },
        schema=SESSION_LINKS.arrow_schema,
    )
    path = tmp_path / "links.parquet"
    pq.write_table(rows, path, row_group_size=3)
    kept = KeptRows(SESSION_LINKS, path, ["gone"])
    assert [r["session_id"] for g in kept.groups() for r in g.to_pylist()] == ["a", "b", "c", "d", "e", "f"]
    read: list[int] = []
    real = KeptRows._group
    monkeypatch.setattr(KeptRows, "_group", lambda self, group: read.append(group) or real(self, group))
    got = kept.take(pa.array([5, 0, 3], pa.int64()))
    assert [r["other_session_id"] for r in got.to_pylist()] == ["x9", "x0", "x7"]
    assert sorted(read) == [0, 2, 3], "row group 1 holds none of them; only `gone` rows, and is never read"
    assert kept.take(pa.array([], pa.int64())).num_rows == 0
