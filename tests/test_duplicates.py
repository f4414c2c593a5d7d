"""A session held by two sources loads once, whole, from the fuller copy (ties: the first path), whatever the order
in which the copies appear: one rule, in `flows.etl.pipeline.resolve_duplicates` (issue 14, item 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

from flows.etl.settings import load_settings
from tests.corpus import S1, claude_exchange, codex_rollout, write_session
from tests.test_pipeline import run, settings_for, snapshot, table_rows

T1 = "019e1625-0000-7000-8000-00000000c0de"


def _claude_copy(home: Path, *, extra: int = 0) -> tuple[Path, Path]:
    first = write_session(home, S1, claude_exchange(S1, 3))
    second = first.with_name("zz-copy-of-the-session.jsonl")
    second.write_text("".join(line + "\n" for line in claude_exchange(S1, 3 + extra)), encoding="utf-8")
    return first, second


def _rejects(data: Path) -> list[tuple[str, str]]:
    return sorted((r[0], r[4]) for r in table_rows(data, "rejects"))


def test_a_session_copied_under_a_second_name_loads_whole_from_the_first_path(tmp_path: Path) -> None:
    first, second = _claude_copy(tmp_path / "home")
    data = tmp_path / "data"
    report = run(settings_for(tmp_path / "home", data))
    assert report.committed.sessions_loaded == 1
    sessions = table_rows(data, "sessions")
    assert [(r[0], r[4]) for r in sessions] == [(f"claude-{S1}", str(first))]
    assert len([r for r in table_rows(data, "turns") if r[1] == f"claude-{S1}"]) == 6
    assert _rejects(data) == [(str(second), "duplicate")]
    outcomes = {r[0]: r[9] for r in table_rows(data, "sources")}
    assert outcomes == {str(first): "loaded", str(second): "rejected"}


def test_the_fuller_copy_wins_whatever_its_name(tmp_path: Path) -> None:
    first, second = _claude_copy(tmp_path / "home", extra=1)
    data = tmp_path / "data"
    run(settings_for(tmp_path / "home", data))
    assert [r[4] for r in table_rows(data, "sessions")] == [str(second)]
    assert len(table_rows(data, "turns")) == 8
    assert _rejects(data) == [(str(first), "duplicate")]


def test_a_copy_added_later_does_not_replace_the_loaded_session_and_full_agrees(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    first = write_session(home, S1, claude_exchange(S1, 3))
    settings = settings_for(home, data)
    run(settings)
    before = snapshot(data)
    second = first.with_name("zz-copy-of-the-session.jsonl")
    shutil.copyfile(first, second)
    report = run(settings)
    assert report.committed.sessions_loaded == 0
    after = snapshot(data)
    assert after["sessions"] == before["sessions"] and after["turns"] == before["turns"]
    assert _rejects(data) == [(str(second), "duplicate")]
    run(settings, full=True)
    assert {t: rows for t, rows in snapshot(data).items() if t != "sources"} == {
        t: rows for t, rows in after.items() if t != "sources"
    }


def test_a_codex_rollout_copied_in_its_folder_loads_once(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    rollout = codex_rollout(home, T1, 2)
    shutil.copyfile(rollout, rollout.with_name(rollout.name.replace("rollout-", "rollout-zz-")))
    settings = load_settings(home=home, data_dir=data, sources=["codex"], env={"HOME": str(home)}, lock_wait=5)
    run(settings)
    assert [r[0] for r in table_rows(data, "sessions")] == [f"codex-{T1}"]
    assert len(table_rows(data, "turns")) == 4


def test_an_opencode_database_beside_its_copy_keeps_every_session(tmp_path: Path) -> None:
    from tests.opencode_support import add_exchange, add_session, create_db

    home, data = tmp_path / "home", tmp_path / "data"
    db_path = home / ".local" / "share" / "opencode" / "opencode.db"
    writer = create_db(db_path, wal=False)
    for sid in ("ses_a", "ses_b", "ses_c"):
        add_session(writer, sid)
        add_exchange(writer, sid, 2)
    writer.close()
    shutil.copyfile(db_path, db_path.with_name("opencode-dev.db"))
    settings = load_settings(home=home, data_dir=data, sources=["opencode"], env={"HOME": str(home)}, lock_wait=5)
    report = run(settings)
    assert report.committed.sessions_loaded == 3
    assert sorted(r[0] for r in table_rows(data, "sessions")) == ["opencode-ses_a", "opencode-ses_b", "opencode-ses_c"]
    assert len(table_rows(data, "turns")) == 12
    assert {r[4] for r in table_rows(data, "rejects")} == {"duplicate"}
