"""`transcripts prune`: whole families go, only when no member is recent, present at its source, or unselected."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from flows.etl.prune import PruneReport, preview_prune, run_prune
from flows.etl.settings import Settings, load_settings
from sinks.prune import (
    Corpus,
    DurationError,
    Member,
    SourceState,
    families,
    parse_duration,
    plan_prune,
)
from tests.claude_records import assistant, text, user
from tests.corpus import PROJECT, codex_rollout
from tests.lock_support import HANG, runs_only_after_the_lock_is_free
from tests.support import write_jsonl
from tests.test_crash import leftovers
from tests.test_pipeline import dataset_files, parquet_rows, run, settings_for, snapshot, table_rows, tree_checksum
from transforms.schema import SESSION_TABLES

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = "2025-11-01"  # seven months before NOW
RECENT = "2026-05-25"  # a week before NOW
P = "dddddddd-0000-4000-8000-000000000010"  # a parent with subagents
K = "eeeeeeee-0000-4000-8000-000000000011"  # an unrelated session
T_OLD = "019e0000-0000-7000-8000-000000000001"  # a Codex thread

SESSION_TABLE_NAMES = [t.name for t in SESSION_TABLES]

# --- the plan, pure --------------------------------------------------------------------------------------------------


def test_families_are_connected_components_through_any_link() -> None:
    edges = [("b-agent-1", "b"), ("c", "b"), ("d", "x-not-in-corpus"), ("e", "d"), ("c", "c")]
    assert families(["a", "b", "b-agent-1", "c", "d", "e", "f"], edges) == [
        ("a",),
        ("b", "b-agent-1", "c"),
        ("d", "e", "x-not-in-corpus"),
        ("f",),
    ]


def _member(sid: str, path: str, day: int, agent: str = "chatgpt") -> Member:
    return Member(sid, agent, path, datetime(2026, 1, day, tzinfo=UTC), 2)


def test_gone_multi_session_source_keeps_its_manifest_row_while_one_session_stays() -> None:
    corpus = Corpus(
        sessions={
            "chatgpt-old": _member("chatgpt-old", "/x/export.json", 1),
            "chatgpt-new": _member("chatgpt-new", "/x/export.json", 30),
            "chatgpt-unknown-source": _member("chatgpt-unknown-source", "/y/not-in-manifest.json", 1),
        },
        edges=(),
        sources={"/x/export.json": SourceState("chatgpt", False, datetime(2026, 1, 30, tzinfo=UTC))},
    )
    plan = plan_prune(corpus, now=datetime(2026, 2, 10, tzinfo=UTC), older_than=timedelta(days=20))
    assert [[m.session_id for m in f] for f in plan.removed] == [["chatgpt-old"]]
    assert plan.sources == (), "the export still holds a kept session"
    later = plan_prune(corpus, now=datetime(2026, 4, 1, tzinfo=UTC), older_than=timedelta(days=20))
    assert {m.session_id for f in later.removed for m in f} == {"chatgpt-old", "chatgpt-new"}
    assert later.sources == (("chatgpt", "/x/export.json"),)
    assert "chatgpt-unknown-source" not in {m.session_id for f in later.removed for m in f}, "no manifest row: present"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("48h", timedelta(hours=48)),
        ("30d", timedelta(days=30)),
        (" 12w ", timedelta(weeks=12)),
        ("6mo", timedelta(days=180)),
        ("1y", timedelta(days=365)),
    ],
)
def test_durations_are_read(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("30", "expected a whole number and a unit"),
        ("d", "expected"),
        ("1.5d", "expected"),
        ("-3d", "expected"),
        ("30x", "unknown unit 'x'"),
        ("90m", "ambiguous .* 90mo"),
        ("30D", "unknown unit 'D'"),
        ("0d", "at least 1"),
        ("9" * 30 + "y", "too large"),
        ("9" * 31 + "h", "too large"),
    ],
)
def test_bad_durations_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_duration(text)


def test_a_duration_of_thousands_of_digits_is_too_large_in_its_own_words() -> None:
    # int() refuses past 4,300 digits with a message about sys.set_int_max_str_digits: not one for a person.
    with pytest.raises(DurationError, match=r"^duration '9{39}\.\.\.' is too large$"):
        parse_duration("9" * 5000 + "d")


# --- a Claude Code home with parents and subagents -----------------------------------------------------------------


def projects(home: Path) -> Path:
    return home / ".claude" / "projects" / PROJECT


def claude_main(home: Path, sid: str, day: str, *, n: int = 2) -> Path:
    """A main session `<sid>.jsonl` of `n` exchanges on `day`."""
    records: list[dict[str, Any]] = []
    for i in range(n):
        ts = f"{day}T10:00:{i:02d}.000Z"
        records.append(user(f"question {i}", sid=sid, ts=ts))
        records.append(
            assistant([text(f"answer {i}")], sid=sid, ts=ts, msg_id=f"msg_{sid[:8]}_{i}", request_id=f"req_{i}")
        )
    return write_jsonl(projects(home) / f"{sid}.jsonl", records)


def claude_subagent(home: Path, parent: str, agent_id: str, day: str) -> Path:
    """A subagent `<parent>/subagents/agent-<agent_id>.jsonl` on `day`: a harness prompt and one answer."""
    ts = f"{day}T11:00:00.000Z"
    records = [
        user("Find the TODOs", sid=parent, ts=ts, isSidechain=True, agentId=agent_id),
        assistant([text("Found 3.")], sid=parent, ts=ts, isSidechain=True, agentId=agent_id, msg_id=f"m_{agent_id}"),
    ]
    return write_jsonl(projects(home) / parent / "subagents" / f"agent-{agent_id}.jsonl", records)


def sub(parent: str, agent_id: str) -> str:
    return f"claude-{parent}-agent-{agent_id}"


def family_ids(parent: str = P) -> set[str]:
    return {f"claude-{parent}", sub(parent, "a1"), sub(parent, "a2")}


def delete(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def prune(settings: Settings, older_than: str = "30d", *, now: datetime = NOW, **kw: Any) -> PruneReport:
    return run_prune(settings, older_than=parse_duration(older_than), now=now, **kw)


def session_ids(data: Path) -> dict[str, set[str]]:
    """Session ids per session table, in the warehouse (`snapshot` proves Parquet holds the same rows)."""
    snap = snapshot(data)
    return {name: {r[0] if name == "sessions" else r[1] for r in snap[name]} for name in SESSION_TABLE_NAMES}


def rows_of(snap: dict[str, list[tuple[Any, ...]]], sids: set[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of `sids` in every session table of a snapshot."""
    out = {}
    for name in SESSION_TABLE_NAMES:
        col = 0 if name == "sessions" else 1
        out[name] = [r for r in snap[name] if r[col] in sids]
    return out


def loaded_home(tmp_path: Path, *, parent_day: str = OLD, a1: str = OLD, a2: str = OLD) -> tuple[Path, Settings]:
    """A parent P with subagents a1 and a2 and an unrelated old session K (present), loaded once."""
    home = tmp_path / "home"
    claude_main(home, P, parent_day)
    claude_subagent(home, P, "a1", a1)
    claude_subagent(home, P, "a2", a2)
    claude_main(home, K, OLD)
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    return home, settings


# --- the whole family goes, or none of it ---------------------------------------------------------------------------


def test_old_family_whose_sources_are_gone_is_removed_whole_from_parquet_and_warehouse(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)
    data = settings.data_dir
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)  # marks the three sources no longer present
    before = snapshot(data)
    assert {r[0] for r in before["sessions"]} == family_ids() | {f"claude-{K}"}

    report = prune(settings)

    assert [{m.session_id for m in f} for f in report.plan.removed] == [family_ids()]
    after = snapshot(data)  # also asserts the warehouse holds exactly what Parquet holds
    for name, sids in session_ids(data).items():
        assert not sids & family_ids(), name
    assert session_ids(data)["turns"] == {f"claude-{K}"}
    assert rows_of(after, {f"claude-{K}"}) == rows_of(before, {f"claude-{K}"}), "the kept session is untouched"
    assert [Path(r[0]).name for r in after["sources"]] == [f"{K}.jsonl"], "gone sources of pruned sessions go too"
    links = [r for r in before["session_links"] if r[0] in family_ids()]
    assert len(links) == 2 and not [r for r in after["session_links"] if r[0] in family_ids()]


def test_prune_waits_for_a_run_holding_the_writer_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, settings = loaded_home(tmp_path)
    data = settings.data_dir
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    waiting = dataclasses.replace(settings, lock_wait_seconds=HANG)
    report = runs_only_after_the_lock_is_free(data, lambda: prune(waiting), monkeypatch)
    assert [{m.session_id for m in f} for f in report.plan.removed] == [family_ids()]
    assert session_ids(data)["sessions"] == {f"claude-{K}"}


def test_shared_parent_stays_until_its_last_subagent_may_go(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path, a2=RECENT)
    data = settings.data_dir
    delete(projects(home) / f"{P}.jsonl", projects(home) / P, projects(home) / f"{K}.jsonl")
    run(settings)
    before = snapshot(data)

    first = prune(settings)  # a2 is a week old: it keeps its parent, and the parent keeps a1
    assert [{m.session_id for m in f} for f in first.plan.removed] == [{f"claude-{K}"}]
    assert [{m.session_id for m in f} for f in first.plan.held] == [family_ids()]
    assert rows_of(snapshot(data), family_ids()) == rows_of(before, family_ids())

    later = prune(settings, now=NOW + timedelta(days=60))  # now a2 is old too: the family goes together
    assert [{m.session_id for m in f} for f in later.plan.removed] == [family_ids()]
    assert all(not sids for sids in session_ids(data).values())


@pytest.mark.parametrize(
    ("keeper", "days", "kept_files"),
    [
        ("a subagent is recent", {"a2": RECENT}, []),
        ("a subagent's source is present", {}, ["a2"]),
        ("the parent is recent", {"parent_day": RECENT}, []),
        ("the parent's source is present", {}, ["parent"]),
    ],
)
def test_family_stays_whole_while_any_member_is_kept(
    tmp_path: Path, keeper: str, days: dict[str, str], kept_files: list[str]
) -> None:
    home, settings = loaded_home(tmp_path, **days)
    files = {
        "parent": projects(home) / f"{P}.jsonl",
        "a1": projects(home) / P / "subagents" / "agent-a1.jsonl",
        "a2": projects(home) / P / "subagents" / "agent-a2.jsonl",
    }
    delete(*[path for name, path in files.items() if name not in kept_files])
    run(settings)
    before = snapshot(settings.data_dir)

    report = prune(settings)

    assert report.plan.removed == (), keeper
    assert [{m.session_id for m in f} for f in report.plan.held] == [family_ids()], keeper
    assert rows_of(snapshot(settings.data_dir), family_ids()) == rows_of(before, family_ids()), keeper
    assert {Path(r[0]).name for r in table_rows(settings.data_dir, "sources")} >= {"agent-a1.jsonl", f"{P}.jsonl"}


def test_present_sources_are_never_pruned_however_old(tmp_path: Path) -> None:
    _, settings = loaded_home(tmp_path)
    data = settings.data_dir
    before, files = snapshot(data), dataset_files(data)

    report = prune(settings, "1h", now=datetime(2999, 1, 1, tzinfo=UTC))

    assert report.plan.empty and report.plan.held == ()
    assert snapshot(data) == before
    assert {k: v for k, v in dataset_files(data).items() if not k.startswith("runs/")} == {
        k: v for k, v in files.items() if not k.startswith("runs/")
    }, "no corpus file is rewritten when nothing goes"


def test_agent_option_limits_what_can_go(tmp_path: Path) -> None:
    home = tmp_path / "home"
    claude_main(home, K, OLD)
    rollout = codex_rollout(home, T_OLD, 2, day=OLD)
    settings = load_settings(
        home=home, data_dir=tmp_path / "data", sources=["claude", "codex"], env={"HOME": str(home)}, lock_wait=5
    )
    run(settings)
    delete(projects(home) / f"{K}.jsonl", rollout)
    run(settings)

    only_codex = prune(settings, agents=["codex"])
    assert only_codex.plan.session_ids() == {"codex": {f"codex-{T_OLD}"}}
    assert {r[0] for r in table_rows(settings.data_dir, "sessions")} == {f"claude-{K}"}
    assert {r[1] for r in table_rows(settings.data_dir, "sources")} == {"claude"}, "codex's gone source forgotten"

    then_claude = prune(settings, agents=["claude"])
    assert then_claude.plan.session_ids() == {"claude": {f"claude-{K}"}}
    assert table_rows(settings.data_dir, "sessions") == []


def test_gone_source_without_sessions_is_forgotten_with_its_rejects_once_old(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)
    bad = write_jsonl(projects(home) / "ffffffff-0000-4000-8000-000000000012.jsonl", ['{"type":"user","broken', "{}"])
    old = NOW - timedelta(days=100)
    os.utime(bad, (old.timestamp(), old.timestamp()))
    run(settings)
    assert [Path(r[0]).name for r in table_rows(settings.data_dir, "rejects")] == [bad.name]
    delete(bad)
    run(settings)

    assert prune(settings, "200d").plan.sources == (), "modified 100 days ago: younger than 200d"
    report = prune(settings, "30d")

    assert report.plan.sources == (("claude", str(bad)),)
    assert table_rows(settings.data_dir, "rejects") == []
    assert bad.name not in {Path(r[0]).name for r in table_rows(settings.data_dir, "sources")}


# --- after a prune ---------------------------------------------------------------------------------------------------


def test_run_after_prune_is_idempotent_and_does_not_resurrect_pruned_sessions(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)
    data = settings.data_dir
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    prune(settings)
    pruned, files = snapshot(data), dataset_files(data)

    report = run(settings)

    assert report.plan_counts["claude"] == {"new": 0, "changed": 0, "unchanged": 1, "deleted": 0, "bytes": 0}
    assert report.committed is None, "nothing new, changed or deleted: a no-op"
    assert snapshot(data) == pruned
    assert dataset_files(data) == files
    assert prune(settings).plan.empty, "a second prune finds nothing more"


def test_ledger_records_the_prune_with_its_counts_per_agent(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    turns = sum(r[13] for r in table_rows(settings.data_dir, "sessions") if r[0] in family_ids())

    report = prune(settings)

    runs = {r[0]: r for r in table_rows(settings.data_dir, "runs")}
    assert len(runs) == 3
    row = runs[report.run_id or ""]
    assert (row[1], row[2], row[5], row[6]) == ("prune", "prune", "ok", None)
    assert row[13] == 0 and row[17] == 0, "a prune loads nothing"
    assert json.loads(row[19]) == {
        "claude": {"families_pruned": 1, "sessions_pruned": 3, "turns_pruned": turns, "sources_forgotten": 3}
    }


def test_failed_prune_is_in_the_ledger_and_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, settings = loaded_home(tmp_path)
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    before = snapshot(settings.data_dir)

    def broken(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("sinks.prune.write_prune", broken)
    with pytest.raises(OSError, match="No space"):
        prune(settings)

    assert snapshot(settings.data_dir) == before
    failed = [r for r in parquet_rows(settings.data_dir, "runs") if r[1] == "prune"]
    assert [(r[5], r[6]) for r in failed] == [("failed", "OSError: [Errno 28] No space left on device")]


def test_dry_run_reads_without_writing_or_creating_anything(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    before = tree_checksum(settings.data_dir)

    plan = preview_prune(settings, older_than=parse_duration("30d"), now=NOW)

    assert [{m.session_id for m in f} for f in plan.removed] == [family_ids()]
    assert tree_checksum(settings.data_dir) == before
    nowhere = settings_for(home, tmp_path / "nowhere")
    assert preview_prune(nowhere, older_than=parse_duration("30d"), now=NOW).empty
    assert not prune(nowhere).written
    assert not (tmp_path / "nowhere").exists()


# --- killed at any point ---------------------------------------------------------------------------------------------

KILLED_PRUNE = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from flows.etl.prune import run_prune
from flows.etl.settings import load_settings
from sinks.prune import parse_duration
home, data = Path(sys.argv[1]), Path(sys.argv[2])
settings = load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)})
run_prune(settings, older_than=parse_duration("30d"), now=datetime(2026, 6, 1, tzinfo=UTC))
"""


@pytest.mark.parametrize("point", ["parquet", "publish", "warehouse"])
def test_killed_prune_changes_nothing_and_the_next_prune_finishes_it(tmp_path: Path, point: str) -> None:
    home, settings = loaded_home(tmp_path)
    clean = settings_for(home, tmp_path / "clean")
    run(clean)
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    run(clean)
    before = snapshot(settings.data_dir)
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_PRUNE, str(home), str(settings.data_dir)],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "TRANSCRIPTS_FAILPOINT": point},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, f"the prune was not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    if point != "warehouse":  # until the swap, the corpus is the previous one
        assert snapshot(settings.data_dir) == before

    prune(settings)
    prune(clean)

    assert snapshot(settings.data_dir) == snapshot(clean.data_dir)
    assert leftovers(settings.data_dir) == []


# --- the command -----------------------------------------------------------------------------------------------------

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_prune_is_a_dry_run_by_default_and_removes_with_write(tmp_path: Path) -> None:
    home, settings = loaded_home(tmp_path)  # dated 2025: old for the real clock the command uses
    data = settings.data_dir
    delete(projects(home) / f"{P}.jsonl", projects(home) / P)
    run(settings)
    before = tree_checksum(data)

    for extra in ([], ["--dry-run"]):
        code, out = invoke("prune", "--older-than", "30d", "--data-dir", str(data), *extra)
        assert code == 0, out
        assert "Dry run (nothing written)" in out
        assert "claude: 1 family, 3 sessions, 6 turns would go; 3 gone sources forgotten" in out
        assert f"claude-{P}  {OLD}" in out and f"{sub(P, 'a1')}  {OLD}" in out
        assert "--write" in out
        assert tree_checksum(data) == before

    code, out = invoke("prune", "--older-than", "30d", "--data-dir", str(data), "--write")
    assert code == 0, out
    assert "Pruned" in out and "3 sessions, 6 turns removed" in out
    assert {r[0] for r in table_rows(data, "sessions")} == {f"claude-{K}"}
    code, out = invoke("prune", "--older-than", "30d", "--data-dir", str(data))
    assert code == 0 and "Nothing to prune." in out


def test_cli_prune_refuses_bad_input_and_says_when_there_is_no_corpus(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out = invoke("prune", "--older-than", "30x", "--data-dir", data)
    assert code == 2 and "unknown unit" in out
    code, out = invoke("prune", "--older-than", "30d", "--agent", "clade", "--data-dir", data)
    assert code == 2 and "Did you mean 'claude'" in out
    code, out = invoke("prune", "--older-than", "30d", "--write", "--dry-run", "--data-dir", data)
    assert code == 2
    code, out = invoke("prune", "--older-than", "30d", "--write", "--data-dir", data)
    assert code == 0 and "No corpus yet" in out
    assert not (tmp_path / "data").exists()
