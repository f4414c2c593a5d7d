"""An agent's manifest (`sources`) past 2 x SOURCE_BUCKET_ROWS rows is kept in buckets by a hash of the source
path, so that a one-session change rewrites the bucket of its source, not the whole manifest (issue 32): split
from a single file as it grows, split again when it outgrows its buckets, and pruned bucket by bucket; the rows
are what one file holds. Real runs on a temporary home, the bucket size made small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sinks import store as store_module
from sinks.store import Store
from tests.corpus import claude_exchange, write_session
from tests.test_pipeline import run, settings_for, snapshot
from tests.test_prune import K, P, delete, loaded_home, projects, prune


def _sid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{n:012x}"


def _home(home: Path, sessions: range) -> Path:
    for n in sessions:
        write_session(home, _sid(n), claude_exchange(_sid(n), 1, text=f"session {n}"))
    return home


def _sources_files(data: Path) -> dict[str, int]:
    """The manifest's files of the current version, by name, with their inodes."""
    folder = (data / "parquet" / "sources" / "agent=claude").resolve()
    return {p.name: p.stat().st_ino for p in sorted(folder.glob("*.parquet"))}


def _source_layout(data: Path) -> dict[str, int]:
    layout = json.loads((data / "parquet" / "layout.json").read_text(encoding="utf-8"))
    return dict(layout.get("source_buckets", {}))


def test_a_growing_manifest_is_split_in_buckets_and_a_change_rewrites_only_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path / "home", range(1, 4))
    data = tmp_path / "data"
    run(settings_for(home, data))
    assert list(_sources_files(data)) == ["part-000.parquet"] and _source_layout(data) == {}
    monkeypatch.setattr(store_module, "SOURCE_BUCKET_ROWS", 1)  # 3 rows and more: at least 2 buckets
    _home(home, range(4, 12))
    run(settings_for(home, data))  # 11 rows: split from the one file into 8 buckets
    assert _source_layout(data) == {"claude": 8}
    before = _sources_files(data)
    assert len(before) >= 2
    write_session(home, _sid(5), claude_exchange(_sid(5), 2, start_minute=30), append=True)
    run(settings_for(home, data))
    after = _sources_files(data)
    assert after.keys() == before.keys()
    rewritten = [name for name in after if after[name] != before[name]]
    assert rewritten == [store_module.part_name(store_module.bucket_of(str(_path(home, 5)), 8))]
    monkeypatch.setattr(store_module, "SOURCE_BUCKET_ROWS", 4096)
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean), "the rows are what one file holds"
    assert list(_sources_files(clean)) == ["part-000.parquet"]


def _path(home: Path, n: int) -> Path:
    return next((home / ".claude" / "projects").rglob(f"{_sid(n)}.jsonl"))


def test_a_bucketed_manifest_that_outgrows_its_buckets_is_split_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SOURCE_BUCKET_ROWS", 1)
    home = _home(tmp_path / "home", range(1, 4))
    data = tmp_path / "data"
    run(settings_for(home, data))
    assert _source_layout(data) == {"claude": 2}
    _home(home, range(4, 20))
    run(settings_for(home, data))
    assert _source_layout(data) == {"claude": 16}
    manifest = Store(data).read_table(store_module.BY_NAME["sources"])
    assert manifest.num_rows == 19 and len(set(manifest.column("source_path").to_pylist())) == 19
    monkeypatch.setattr(store_module, "SOURCE_BUCKET_ROWS", 4096)
    clean = tmp_path / "clean"
    run(settings_for(home, clean))
    assert snapshot(data) == snapshot(clean)


def test_a_prune_forgets_sources_in_every_bucket_of_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SOURCE_BUCKET_ROWS", 1)
    home, settings = loaded_home(tmp_path)
    data = settings.data_dir
    assert _source_layout(data) == {"claude": 2}
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    prune(settings)
    after = snapshot(data)
    assert [Path(r[0]).name for r in after["sources"]] == [f"{K}.jsonl"]
    assert len(Store(data).read_table(store_module.BY_NAME["sources"])) == 1


def test_a_corpus_of_a_newer_store_format_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A writer of an older layout would damage it (a bucketed manifest written again whole beside its buckets):
    it refuses, with one line saying to upgrade, and the corpus stays as it was."""
    home = _home(tmp_path / "home", range(1, 3))
    data = tmp_path / "data"
    run(settings_for(home, data))
    layout_path = (data / "parquet" / "layout.json").resolve()
    layout = json.loads(layout_path.read_text(encoding="utf-8"))
    assert layout["store_format"] == store_module.STORE_FORMAT
    layout["store_format"] = store_module.STORE_FORMAT + 1
    layout_path.write_text(json.dumps(layout), encoding="utf-8")
    before = snapshot(data)
    version = Store(data).current()
    _home(home, range(3, 4))
    with pytest.raises(store_module.SchemaMismatch, match=r"newer version of transcripts .* upgrade transcripts"):
        run(settings_for(home, data))
    assert Store(data).current() == version
    assert snapshot(data) == before
