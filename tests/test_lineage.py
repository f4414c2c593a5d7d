"""Lineage in the corpus: forks and subagents are linked, and copied or replayed records are loaded once."""

from __future__ import annotations

from pathlib import Path

from flows.etl.settings import load_settings
from tests.corpus import S1, claude_exchange, write_session
from tests.support import write_jsonl
from tests.test_codex import OWN, PARENT, fork_records, meta
from tests.test_pipeline import run, table_rows


def test_a_codex_fork_does_not_double_the_parents_turns_or_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "05" / "11"
    replay = fork_records()
    # The parent's own rollout is what the fork replayed: its meta, then the same history.
    write_jsonl(
        day / f"rollout-2026-05-11T12-46-40-{PARENT}.jsonl", [meta(PARENT, ts="2026-05-11T10:46:40.000Z"), *replay[2:9]]
    )
    write_jsonl(day / f"rollout-2026-05-11T13-46-40-{OWN}.jsonl", replay)
    data = tmp_path / "data"
    run(load_settings(home=home, data_dir=data, sources=["codex"], env={}))
    turns = [(r[1], r[5]) for r in table_rows(data, "turns")]
    assert sorted(turns) == sorted(
        [
            (f"codex-{PARENT}", "parent question"),
            (f"codex-{PARENT}", "parent answer"),
            (f"codex-{OWN}", "fork question"),
            (f"codex-{OWN}", "fork answer"),
        ]
    )
    usage = {r[1]: (r[7], r[8], r[9]) for r in table_rows(data, "usage")}
    assert usage == {f"codex-{PARENT}": (4000, 300, 1000), f"codex-{OWN}": (400, 50, 200)}
    calls = [r[1] for r in table_rows(data, "tool_calls")]
    assert calls == [f"codex-{PARENT}"], "the replayed tool call belongs to the parent only"
    links = [(r[0], r[2], r[3]) for r in table_rows(data, "session_links")]
    assert links == [(f"codex-{OWN}", f"codex-{PARENT}", "fork")]


def test_a_resumed_claude_session_links_the_earlier_one_and_does_not_load_its_copied_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    resumed = "dddddddd-0000-4000-8000-000000000004"
    write_session(home, S1, claude_exchange(S1, 2))
    # --resume wrote a new file that starts with copies of the earlier session's records.
    write_session(home, resumed, claude_exchange(S1, 2) + claude_exchange(resumed, 1, start_minute=20))
    data = tmp_path / "data"
    run(load_settings(home=home, data_dir=data, sources=["claude"], env={}))
    per_session: dict[str, int] = {}
    for row in table_rows(data, "turns"):
        per_session[row[1]] = per_session.get(row[1], 0) + 1
    assert per_session == {f"claude-{S1}": 4, f"claude-{resumed}": 2}
    usage = {}
    for row in table_rows(data, "usage"):
        usage[row[1]] = usage.get(row[1], 0) + row[8]
    assert usage == {f"claude-{S1}": 10, f"claude-{resumed}": 5}, "output tokens counted once"
    links = [(r[0], r[2], r[3]) for r in table_rows(data, "session_links")]
    assert links == [(f"claude-{resumed}", f"claude-{S1}", "resume")]
