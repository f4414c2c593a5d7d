"""The next Parquet version is built in the folder of the version before the current one, which the run would
otherwise remove (`NextVersion._recycle`): only the files the current version changed are linked again, so that a
small change costs links in proportion to the change, not to the corpus. Checked on versions real runs wrote: the
new version holds exactly what linking would give it, the current version is never written through a link, a
pinned version is left alone, a CHANGES file that is not ours is never followed, and the corpus equals a fresh
load after a history of changes of every kind (appends, new sessions, a bucket split, a deleted source)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from sinks import store as store_module
from sinks.store import CHANGES, NextVersion, Store, pin
from tests.corpus import S1, S2, claude_exchange, small_home, write_session
from tests.test_pipeline import run, settings_for, snapshot


def _files(version: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(version)): (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(version.rglob("*.parquet"))
    }


def _number(version: Path) -> int:
    return int(version.name[1:])


class _Made:
    """What one run of `_history` left, read right after it (a later run recycles the folder)."""

    def __init__(self, version: Path, base_files: dict[str, tuple[int, str]]) -> None:
        self.number = _number(version)
        self.inode = os.stat(version).st_ino
        self.files = _files(version)
        self.base_files = base_files  # the files of the version it replaced, as they were before the run
        changes = version / CHANGES
        self.changed = set(json.loads(changes.read_text("utf-8"))["changed"]) if changes.exists() else None


def _history(home: Path, data: Path, monkeypatch: pytest.MonkeyPatch, linked: Path | None = None) -> list[_Made]:
    """A run after each kind of change; with `linked`, a run into that data dir too after each, with recycling off
    (no version says what it changed), whose corpus must be the same."""
    settings = settings_for(home, data)
    store = Store(data)
    changes = [
        lambda: None,  # the first load
        lambda: write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True),
        lambda: write_session(home, S2, claude_exchange(S2, 2, start_minute=50), append=True),
        lambda: [
            write_session(home, sid, claude_exchange(sid, 4, text=f"growth {n}"))
            for n, sid in enumerate(f"ffffffff-0000-4000-8000-00000000000{n}" for n in range(8))
        ],  # (with the small BUCKET_BYTES below: the partition splits its buckets)
        lambda: (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink(),
        lambda: write_session(home, S1, claude_exchange(S1, 1, start_minute=70, text="again"), append=True),
        lambda: None,  # nothing changed: no version
    ]
    monkeypatch.setattr("sinks.store.BUCKET_BYTES", 4000)
    made = []
    for change in changes:
        change()
        current = store.current()
        before = _files(current) if current is not None else {}
        run(settings)
        version = store.current()
        assert version is not None
        made.append(_Made(version, before))
        if linked is not None:
            with monkeypatch.context() as patch:
                patch.setattr("sinks.store.RECYCLE_CHANGES", -1)
                run(settings_for(home, linked))
            assert snapshot(linked) == snapshot(data)
    return made


def test_each_version_after_the_second_is_the_folder_of_the_one_before_its_base_holding_what_linking_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    folders: dict[int, int] = {}  # version number -> its folder's inode, as its run found it
    real_init = NextVersion.__init__

    def noting(self: NextVersion, store: Store, run_id: str) -> None:
        old = store.versions / f"v{store.current_number() - 1:06d}"
        if old.is_dir():
            folders[store.current_number() - 1] = os.stat(old).st_ino
        real_init(self, store, run_id)

    monkeypatch.setattr(NextVersion, "__init__", noting)
    made = _history(small_home(tmp_path / "home"), data, monkeypatch)
    assert [m.number for m in made] == [1, 2, 3, 4, 5, 6, 6], "one version per run that changed something"
    assert made[0].changed is None, "a first load cannot be recycled from"
    by_number = {m.number: m for m in made}
    for m in made[2:6]:
        n = m.number
        assert m.inode == folders[n - 2], f"v{n} was made in v{n - 2}'s folder"
        assert m.changed is not None
        base = by_number[n - 1]
        assert base.files == m.base_files, f"v{n - 1}'s files were never written through a link"
        # What linking would give: the base's files less those the run changed, and the changed ones it wrote.
        assert set(m.files) == (set(m.base_files) - m.changed) | {rel for rel in m.changed if rel in m.files}
        assert set(m.files) - set(m.base_files) <= m.changed
        for rel, (ino, digest) in m.files.items():
            if rel in m.changed:
                assert ino != m.base_files.get(rel, (None, ""))[0], f"{rel}: a file of its own"
            else:
                assert (ino, digest) == m.base_files[rel], f"{rel}: a link to the base's file"
    assert not (data / "versions" / "v000004").exists(), "recycled into v6"


def test_a_history_of_recycled_versions_equals_the_same_history_linked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data, linked = tmp_path / "data", tmp_path / "linked"
    _history(home, data, monkeypatch, linked)
    assert not list(linked.glob(f"versions/*/{CHANGES}")), "the linked history never said what it changed"
    assert [p.name for p in data.glob(f"versions/*/{CHANGES}")] == [CHANGES, CHANGES]
    versions = sorted(p.name for p in (data / "versions").iterdir())
    assert versions == ["v000005", "v000006"], "the current and the previous version, nothing else"


def test_a_version_a_reader_pins_is_not_recycled_and_the_new_one_is_linked(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True)
    run(settings)
    store = Store(data)
    v1 = data / "versions" / "v000001"
    fd = pin(v1)
    assert fd is not None
    try:
        before = _files(v1)
        write_session(home, S2, claude_exchange(S2, 1, start_minute=50), append=True)
        run(settings)
        assert store.current_number() == 3
        assert _files(v1) == before, "the pinned version is as it was"
        fresh = tmp_path / "fresh"
        run(settings_for(home, fresh))
        assert snapshot(data) == snapshot(fresh)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "changed",
    [
        ["../../outside.parquet"],
        ["/tmp/outside.parquet"],
        ["sessions/agent=claude/../../../outside.parquet"],
        ["sessions/agent=claude/part-000.txt"],
        "not a list",
    ],
)
def test_a_changes_file_that_is_not_ours_is_never_followed_and_the_version_is_linked(
    tmp_path: Path, changed: object
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True)
    run(settings)
    outside = data / "outside.parquet"  # where `../../outside.parquet` from a version folder leads
    outside.write_bytes(b"not ours")
    (tmp_path / "outside.parquet").write_bytes(b"not ours")
    current = Store(data).current()
    assert current is not None
    (current / CHANGES).write_text(json.dumps({"made_from": 1, "changed": changed}), "utf-8")
    write_session(home, S2, claude_exchange(S2, 1, start_minute=50), append=True)
    run(settings)
    assert outside.read_bytes() == b"not ours" and (tmp_path / "outside.parquet").read_bytes() == b"not ours"
    fresh = tmp_path / "fresh"
    run(settings_for(home, fresh))
    assert snapshot(data) == snapshot(fresh)


def test_a_recycling_that_fails_midway_falls_back_to_links_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = settings_for(home, data)
    run(settings)
    write_session(home, S1, claude_exchange(S1, 1, start_minute=40), append=True)
    run(settings)
    real = store_module._link_or_copy
    calls = {"n": 0}

    def fails_once(src: str, dst: str) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # the first link of the recycling
            raise OSError(28, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(store_module, "_link_or_copy", fails_once)
    write_session(home, S2, claude_exchange(S2, 1, start_minute=50), append=True)
    run(settings)
    monkeypatch.setattr(store_module, "_link_or_copy", real)
    assert Store(data).current_number() == 3
    fresh = tmp_path / "fresh"
    run(settings_for(home, fresh))
    assert snapshot(data) == snapshot(fresh)
