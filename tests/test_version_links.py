"""The next Parquet version links the files no change touches while the commit writes the others
(`NextVersion.link_ahead`): a file linked ahead and then written after all gets a file of its own, never a write
through the link into the current version's file; a link that fails fails the publish, never a version missing a
file. On a version a real run wrote."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path

import pytest

from sinks import store as store_module
from sinks.store import FileKey, NextVersion, Store
from tests.corpus import small_home
from tests.test_pipeline import run, settings_for, snapshot
from transforms.schema import SESSIONS


def _loaded(tmp_path: Path) -> tuple[Store, Path]:
    data = tmp_path / "data"
    run(settings_for(small_home(tmp_path / "home"), data))
    return Store(data), data


def _files(version: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(version)): (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(version.rglob("*.parquet"))
    }


def test_a_file_linked_ahead_then_written_gets_a_file_of_its_own_and_the_current_one_is_untouched(
    tmp_path: Path,
) -> None:
    store, _ = _loaded(tmp_path)
    current = store.current()
    assert current is not None
    before = _files(current)
    key = FileKey(SESSIONS.name, "claude", 0)
    old = store.read(key)
    assert old is not None and old.num_rows == 2
    version = NextVersion(store, "links-test")
    version.link_ahead(set())  # every file: the write below was not announced
    version.put(key, old.slice(0, 1))
    published = version.publish()
    assert _files(current) == before, "the current version's files are as they were"
    after = _files(published)
    assert set(after) == set(before)
    rel = str(key.relpath())
    assert after[rel][0] != before[rel][0] and after[rel][1] != before[rel][1]
    assert all(after[f] == before[f] for f in before if f != rel), "every other file is a link to the same file"
    assert store.read(key) is not None and store.read(key).num_rows == 1  # type: ignore[union-attr]


def test_a_link_that_fails_ahead_fails_the_publish_and_the_current_version_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, data = _loaded(tmp_path)
    before = snapshot(data)
    current = store.current()
    real = store_module._link_or_copy

    def full_disk(src: str, dst: str) -> None:
        if "/turns/" in dst:
            raise OSError(errno.ENOSPC, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(store_module, "_link_or_copy", full_disk)
    version = NextVersion(store, "links-test")
    version.link_ahead({"runs"})
    with pytest.raises(OSError, match="No space left"):
        version.publish()
    version.abandon()
    assert store.current() == current
    assert snapshot(data) == before
    assert not list((data / "versions").glob("*.tmp-*"))
