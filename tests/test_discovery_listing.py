"""Changes are found in time that grows with the change: the listing record (docs/operations.md, "How changes are
found") lets a run list again only the folders that changed and stat only hot files, and never costs a change."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from extractors import discovery
from extractors.discovery import Listings, listing
from extractors.registry import extractor
from flows.etl import pipeline
from flows.etl.flow import run_etl
from flows.etl.settings import Settings, load_settings
from sinks.listing import listing_path, load_record
from tests.corpus import PROJECT, S1, S2, S3, claude_exchange, write_session
from tests.test_hostile_discovery import LAYOUTS

DAY = 86_400
OLD = 30 * DAY  # a month ago: cold for the default hot_days (7)


def settings_for(home: Path, data: Path, **env: str) -> Settings:
    return load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home), **env}, lock_wait=5)


def run(settings: Settings, found: pipeline.Discovery | None = None) -> pipeline.RunReport:
    return run_etl(settings, as_tasks=False, discovered=found)


def age(root: Path, seconds: float) -> None:
    """Every file and folder under `root` (itself included) last modified `seconds` ago."""
    when = time.time_ns() - int(seconds * 1e9)
    if not root.is_dir():
        os.utime(root, ns=(when, when))
        return
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.utime(Path(folder) / name, ns=(when, when), follow_symlinks=False)
        os.utime(folder, ns=(when, when))


def project(home: Path, name: str = PROJECT) -> Path:
    return home / ".claude" / "projects" / name


def session_in(home: Path, name: str, session: str, n: int = 2) -> Path:
    path = project(home, name) / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in claude_exchange(session, n)))
    return path


def counts(report: pipeline.RunReport) -> dict[str, int]:
    return report.plan_counts.get("claude", {})


def cold_home(tmp_path: Path, *, hot: bool = False) -> tuple[Path, Path, Settings]:
    """Two sessions in one project and one in another, all cold (or S1 written an hour ago: `hot`), loaded once
    (the record written)."""
    home = tmp_path / "home"
    s1 = write_session(home, S1, claude_exchange(S1, 2))
    write_session(home, S2, claude_exchange(S2, 2))
    session_in(home, "-home-u-other", S3)
    age(home, OLD)
    if hot:
        age(s1, 3600)
    settings = settings_for(home, tmp_path / "data")
    first = run(settings)
    assert first.committed is not None and first.committed.sessions_loaded == 3
    assert load_record(settings.data_dir) is not None
    return home, tmp_path / "data", settings


def test_a_quiet_tree_is_not_listed_again_and_nothing_is_stat_but_its_folders(tmp_path: Path) -> None:
    _, _, settings = cold_home(tmp_path)
    found = pipeline.discover(settings)
    assert not found.full_check
    assert found.listed["folders_listed"] == 0 and found.listed["files_stated"] == 0
    assert found.sources == []  # every source of a quiet folder is counted unchanged from the manifest
    report = run(settings)
    assert report.committed is None and counts(report)["unchanged"] == 3


def test_a_new_session_in_an_unchanged_tree_is_found(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    new = "eeeeeeee-0000-4000-8000-000000000005"
    session_in(home, "-home-u-other", new)  # its folder's mtime moves: that folder alone is listed again
    found = pipeline.discover(settings)
    assert not found.full_check and found.listed["folders_listed"] == 1
    report = run(settings, found)
    assert counts(report)["new"] == 1 and counts(report)["unchanged"] == 3
    assert report.committed is not None and report.committed.sessions_loaded == 1


def test_a_grown_hot_session_is_found_without_a_full_check(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path, hot=True)
    path = write_session(home, S1, claude_exchange(S1, 1, start_minute=5), append=True)
    found = pipeline.discover(settings)
    assert not found.full_check
    assert str(path) in {s.path for s in found.sources}
    assert found.listed["files_stated"] == 1  # the other session of its folder: taken from the record
    report = run(settings, found)
    assert counts(report)["changed"] == 1 and report.committed is not None


def test_a_grown_cold_session_is_found_by_the_periodic_full_check(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    path = write_session(home, S2, claude_exchange(S2, 2, start_minute=2), append=True)
    age(path, OLD)  # grown, and its mtime as old as before: what only a stat of the file can show
    quiet = pipeline.discover(settings)
    assert not quiet.full_check and quiet.sources == []  # within the window: taken as recorded
    later = time.time_ns() + int((settings.full_check_days + 0.5) * DAY * 1e9)
    due = pipeline.discover(settings, now_ns=later)
    assert due.full_check
    report = run(settings, due)
    assert counts(report)["changed"] == 1
    assert report.committed is not None and report.committed.turns_loaded == 8
    assert load_record(settings.data_dir).checked_at_ns == later  # type: ignore[union-attr]


def test_a_full_check_on_every_run_when_full_check_days_is_zero(tmp_path: Path) -> None:
    home, data, _ = cold_home(tmp_path)
    settings = settings_for(home, data, TRANSCRIPTS_FULL_CHECK_DAYS="0")
    found = pipeline.discover(settings)
    assert found.full_check and len(found.sources) == 3


def test_touched_paths_are_stat_and_their_folders_listed_whatever_the_record_says(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    path = write_session(home, S2, claude_exchange(S2, 1, start_minute=9), append=True)
    age(path, OLD)
    assert pipeline.discover(settings).sources == []
    found = pipeline.discover(settings, touched=[path])
    assert not found.full_check and str(path) in {s.path for s in found.sources}
    assert counts(run(settings, found))["changed"] == 1


def test_a_deleted_session_and_a_deleted_folder_are_noticed(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    (project(home) / f"{S1}.jsonl").unlink()
    other = project(home, "-home-u-other")
    (other / f"{S3}.jsonl").unlink()
    other.rmdir()
    found = pipeline.discover(settings)
    assert not found.full_check
    report = run(settings, found)
    assert counts(report)["deleted"] == 2 and counts(report)["unchanged"] == 1


@pytest.mark.parametrize(
    "content",
    [
        b"\x00garbage{",
        b'{"format": 999, "version": 1, "checked_at_ns": 0, "folders": {}}',
        b'{"format": 2, "version": 1, "checked_at_ns": 0, "folders": {"/x": "not a folder"}}',
        b'{"format": 2}',
        b"[]",
    ],
    ids=["not-json", "another-format", "a-damaged-folder", "fields-missing", "not-an-object"],
)
def test_an_unreadable_or_foreign_record_is_ignored_and_everything_is_checked(tmp_path: Path, content: bytes) -> None:
    _, _, settings = cold_home(tmp_path)
    listing_path(settings.data_dir).write_bytes(content)
    found = pipeline.discover(settings)
    assert found.full_check and len(found.sources) == 3
    report = run(settings, found)
    assert report.committed is None and counts(report)["unchanged"] == 3
    assert load_record(settings.data_dir) is not None  # written anew


def test_damaged_entries_in_a_usable_record_cost_a_stat_never_a_crash(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    path = listing_path(settings.data_dir)
    record = json.loads(path.read_text())
    for kept in record["folders"].values():  # every file's recorded stat replaced by junk of the right JSON shape
        entries = json.loads(kept[6])
        kept[6] = json.dumps({name: ["a", "b", 1, 2] if isinstance(e, list) else e for name, e in entries.items()})
    text = json.dumps(record)
    path.write_text(text)
    assert counts(run(settings))["unchanged"] == 3  # quiet folders: their sources are the manifest's, not the record's
    path.write_text(text)
    touched = write_session(home, S1, [], append=True)  # the same bytes; named as touched, its junk entry is used
    found = pipeline.discover(settings, touched=[touched])
    assert not found.full_check and str(touched) in {s.path for s in found.sources}  # stat'd, not taken from junk
    assert counts(run(settings, found))["unchanged"] == 3


def test_entries_that_are_not_json_make_their_folder_listed_again(tmp_path: Path) -> None:
    _, _, settings = cold_home(tmp_path, hot=True)  # S1 hot: its folder is not quiet, its entries are read
    path = listing_path(settings.data_dir)
    record = json.loads(path.read_text())
    for kept in record["folders"].values():
        kept[6] = "{not json"
    path.write_text(json.dumps(record))
    found = pipeline.discover(settings)
    assert not found.full_check and found.listed["folders_listed"] >= 1
    assert len(found.sources) >= 2  # the hot folder's two sessions, listed afresh: none taken for deleted
    report = run(settings, found)
    assert counts(report)["deleted"] == 0 and counts(report)["unchanged"] == 3


def test_a_record_of_another_corpus_version_is_not_used(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    record = load_record(settings.data_dir)
    assert record is not None
    session_in(home, "-home-u-third", "ffffffff-0000-4000-8000-000000000006")
    saved = listing_path(settings.data_dir).read_bytes()
    assert run(settings).committed is not None  # a run that committed a new version ...
    listing_path(settings.data_dir).write_bytes(saved)  # ... and whose record was lost (as if killed before it)
    assert pipeline.discover(settings).full_check


def test_a_failed_run_leaves_the_record_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, _, settings = cold_home(tmp_path)
    before = listing_path(settings.data_dir).read_bytes()
    session_in(home, "-home-u-third", "ffffffff-0000-4000-8000-000000000006")

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("flows.etl.flow.warehouse.refresh", broken)
    with pytest.raises(OSError, match="disk full"):
        run(settings)
    assert listing_path(settings.data_dir).read_bytes() == before


def test_a_run_puts_its_record_in_place_and_a_killed_runs_unfinished_record_is_cleared(tmp_path: Path) -> None:
    home, _, settings = cold_home(tmp_path)
    record_path = listing_path(settings.data_dir)
    killed = record_path.with_name(f".{record_path.name}.tmp-999999")  # written beside by a run killed meanwhile
    killed.write_bytes(b"{")
    session_in(home, "-home-u-third", "ffffffff-0000-4000-8000-000000000006")
    report = run(settings)
    assert report.committed is not None
    record = load_record(settings.data_dir)
    assert record is not None and record.version == pipeline.corpus_version(settings)
    assert any("-home-u-third" in folder for folder in record.folders)
    assert [p.name for p in record_path.parent.iterdir() if p.name.startswith(f".{record_path.name}")] == []


def _append_run_stats(tmp_path: Path, cold: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """os.stat calls of the discovery of an append run over a home with `cold` cold sessions in three projects
    and one hot session that grew."""
    home = tmp_path / "home"
    for i in range(cold):
        session_in(home, f"-home-u-p{i % 3}", f"{i:08x}-0000-4000-8000-{i:012x}", n=1)
    age(home, OLD)
    hot = session_in(home, "-home-u-p0", "99999999-0000-4000-8000-999999999999")
    os.utime(hot.parent, ns=(time.time_ns() - OLD * 10**9,) * 2)
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    with hot.open("a", encoding="utf-8") as handle:
        handle.write(
            "".join(line + "\n" for line in claude_exchange("99999999-0000-4000-8000-999999999999", 1, start_minute=5))
        )
    calls: list[str] = []
    real = os.stat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        calls.append(os.fspath(path) if not isinstance(path, int) else str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    try:
        found = pipeline.discover(settings)
    finally:
        monkeypatch.setattr(os, "stat", real)
    assert not found.full_check and str(hot) in {s.path for s in found.sources}
    return len(calls)


def test_an_append_run_stats_as_many_files_with_ten_times_the_cold_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    few = _append_run_stats(tmp_path / "few", 30, monkeypatch)
    many = _append_run_stats(tmp_path / "many", 300, monkeypatch)
    assert many == few


@pytest.mark.parametrize("agent", sorted(LAYOUTS))
def test_a_hostile_tree_lists_the_same_with_the_record_as_without(agent: str, tmp_path: Path) -> None:
    layout = LAYOUTS[agent](tmp_path)
    # The oddities of test_hostile_discovery, together: a loop, a dangling link, a FIFO, a link to the good file.
    other = layout.odd.with_name("loop-partner")
    os.symlink(other, layout.odd)
    os.symlink(layout.odd, other)
    os.symlink(layout.root / "nowhere", layout.odd.with_name("dangling" + layout.odd.suffix))
    os.mkfifo(layout.good.with_name("fifo" + layout.good.suffix))
    os.symlink(layout.good, layout.good.with_name("second-name" + layout.good.suffix))
    age(tmp_path, OLD)
    module = extractor(layout.agent)
    discovery.drain_skips()
    plain = sorted(s.path for s in module.discover(layout.root))
    plain_skips = discovery.drain_skips()
    now = time.time_ns()
    first = Listings(None, now_ns=now, hot_ns=7 * DAY * 10**9)
    with listing(first):
        listed = sorted(s.path for s in module.discover(layout.root))
    assert listed == plain and discovery.drain_skips() == plain_skips
    again = Listings(first.finish(), now_ns=now, hot_ns=7 * DAY * 10**9)
    with listing(again):
        reused = sorted(s.path for s in module.discover(layout.root))
    skips = discovery.drain_skips()
    assert again.listed == 0 and again.reused  # every folder taken from the record
    assert skips == plain_skips  # the oddities looked at afresh, counted as without a record
    quiet_paths = {p for p in plain if os.path.dirname(p) in again.quiet}
    assert reused == sorted(set(plain) - quiet_paths)  # the rest listed as before; quiet ones counted by the plan
