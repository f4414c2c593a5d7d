"""The manifest's cache (sinks.manifest.MANIFEST_CACHE): each manifest file decoded once, with its rows' folders, as
an Arrow IPC file named by the file's identity; a run reads it instead of the Parquet file, a damaged one is decoded
again, and only a run under the writer lock writes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.etl import pipeline
from sinks.manifest import MANIFEST_CACHE, folders_of, load_manifest
from sinks.store import Store
from tests.corpus import S1, S2, S3, claude_exchange, small_home, write_session
from tests.test_pipeline import run, settings_for


def cached(data: Path) -> set[str]:
    folder = data / MANIFEST_CACHE
    return set(p.name for p in folder.iterdir()) if folder.exists() else set()


def loaded(home: Path, data: Path) -> None:
    """A first load, then a run with nothing to do: its plan, under the lock, read the manifest the load wrote."""
    run(settings_for(home, data))
    run(settings_for(home, data))


def test_a_run_keeps_each_manifest_file_decoded_and_the_next_reads_it_as_the_parquet_file_says(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    run(settings_for(home, data))
    assert cached(data) == set(), "the first load planned against no manifest"
    run(settings_for(home, data))
    store = Store(data)
    assert len(cached(data)) == len(store.files("sources")) == 1
    from_cache = load_manifest(store)
    (data / MANIFEST_CACHE).rename(tmp_path / "aside")
    from_parquet = load_manifest(store)
    assert from_cache.table.equals(from_parquet.table) and from_cache.spans == from_parquet.spans
    assert from_cache.folders.equals(folders_of(from_parquet.table.column("source_path")))
    assert sorted(set(from_cache.folders.to_pylist())) == [str(home / ".claude" / "projects" / "-home-u-proj")]
    assert cached(data) == set(), "a plan made without the lock writes nothing"


def test_after_a_change_the_cache_holds_the_current_files_and_nothing_else(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    loaded(home, data)
    before = cached(data)
    write_session(home, S1, claude_exchange(S1, 2, start_minute=30), append=True)
    run(settings_for(home, data))
    assert cached(data) == before, "that run read the manifest it found; the one it wrote is read by the next"
    run(settings_for(home, data))
    after = cached(data)
    assert len(after) == 1 and after != before, "the rewritten manifest file's entry replaced the old one's"
    name = next(iter(after))
    st = Store(data).files("sources")[0].stat()
    assert name == f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}.arrow"


@pytest.mark.parametrize("damage", [b"", b"not arrow at all", None])
def test_a_torn_or_foreign_cache_file_is_decoded_again_and_the_run_is_as_without_it(
    tmp_path: Path, damage: bytes | None
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    loaded(home, data)
    entry = data / MANIFEST_CACHE / next(iter(cached(data)))
    if damage is None:
        entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # torn mid-write
    else:
        entry.write_bytes(damage)
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink()
    report = run(settings_for(home, data))
    assert report.plan_counts["claude"]["deleted"] == 1 and report.plan_counts["claude"]["unchanged"] == 2
    manifest = load_manifest(Store(data)).table
    present = dict(zip(manifest.column("source_path").to_pylist(), manifest.column("present").to_pylist(), strict=True))
    assert {Path(p).stem: v for p, v in present.items()} == {S1: True, S2: False, S3: True}
    assert entry.read_bytes()[:6] == b"ARROW1", "the run decoded the file again and put it back in the cache"


def test_a_plan_outside_a_run_reads_the_cache_but_never_writes_it(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    loaded(home, data)
    entry = data / MANIFEST_CACHE / next(iter(cached(data)))
    entry.unlink()
    _, plan = pipeline.plan_run(settings, Store(data), full=False)  # as `run --dry-run` and the CLI's first look
    assert plan.unchanged_count == 3 and cached(data) == set()
