"""Claude Code extractor: one test per rule, each on its own small file named after the expected outcome."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from extractors import claude
from extractors.errors import RejectCode
from extractors.model import Agent, Disposition, LinkKind, Role, SessionLink
from tests.claude_records import (
    OTHER,
    SID,
    TS,
    assistant,
    envelope,
    load,
    reject,
    said,
    text,
    tool_result,
    tool_use,
    user,
)
from tests.support import read_one, write_jsonl

# --- module contract ------------------------------------------------------------------------------------------------


def test_module_constants() -> None:
    assert (claude.SPEC.name, claude.SPEC.nightly, claude.SPEC.parser_version) == (Agent("claude"), True, "3")


def test_default_roots_without_env(tmp_path: Path) -> None:
    assert claude.default_roots(tmp_path, {}) == [
        tmp_path / ".claude" / "projects",
        tmp_path / ".config" / "claude" / "projects",
    ]


def test_default_roots_claude_config_dir_comma_list_replaces_defaults(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": "/a/claude, ~/work-claude,,"}
    assert claude.default_roots(tmp_path, env) == [Path("/a/claude/projects"), tmp_path / "work-claude" / "projects"]


# --- discovery ------------------------------------------------------------------------------------------------------


def test_discover_lists_main_subagent_flat_and_compaction_files_only(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    wanted = [
        f"-home-u-proj/{SID}.jsonl",
        f"-home-u-proj/{SID}/subagents/agent-a881341.jsonl",
        f"-home-u-proj/{SID}/subagents/agent-acompact-fffbd0.jsonl",
        "-home-u-proj/agent-36541525.jsonl",
    ]
    ignored = [
        f"-home-u-proj/{SID}/subagents/agent-a881341.meta.json",  # companion, read with its subagent if at all
        f"-home-u-proj/{SID}/tool-results/toolu_1.jsonl",  # not a transcript folder
        "-home-u-proj/notes.txt",
        "history.jsonl",  # typed-prompt history
        "-home-u-proj/a/b/c/d/deep.jsonl",  # an unrelated deep tree is not entered
        "-home-u-proj/stray/subagents/notagent.jsonl",
    ]
    for rel in wanted + ignored:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}\n")
    found = list(claude.discover(root))
    assert [os.path.relpath(s.path, root) for s in found] == sorted(wanted)
    assert all(s.agent == Agent("claude") and s.size == 3 and s.root == str(root) for s in found)


def test_discover_missing_root_is_empty(tmp_path: Path) -> None:
    assert list(claude.discover(tmp_path / "nope")) == []


# --- session ids ----------------------------------------------------------------------------------------------------


def test_ok_session_id_is_the_file_stem_when_a_record_carries_it(tmp_path: Path) -> None:
    session = load(tmp_path, f"{SID}.jsonl", [user("hi")])
    assert (session.session_id, session.native_id) == (f"claude-{SID}", SID)


def test_ok_session_id_from_the_single_sessionid_when_the_stem_is_not_one(tmp_path: Path) -> None:
    assert load(tmp_path, "short.jsonl", [user("hi")]).session_id == f"claude-{SID}"


def test_reject_missing_session_id(tmp_path: Path) -> None:
    assert reject(tmp_path, "x.jsonl", [user("hi", sid=None)]).code is RejectCode.MISSING_SESSION_ID


def test_reject_no_conversation_only_summary_snapshot_and_queue_lines(tmp_path: Path) -> None:
    records = [
        {"type": "summary", "summary": "Old title", "leafUuid": "elsewhere"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {"timestamp": TS}},
        {"type": "queue-operation", "operation": "enqueue", "sessionId": SID, "timestamp": TS, "content": "x"},
    ]
    assert reject(tmp_path, f"{SID}.jsonl", records).code is RejectCode.NO_CONVERSATION


def test_ok_copied_records_of_another_session_are_counted_and_linked_as_resume(tmp_path: Path) -> None:
    records = [
        user("old prompt", sid=OTHER, ts="2026-01-01T00:00:00Z"),
        assistant([text("old answer")], msg_id="msg_old", sid=OTHER, ts="2026-01-01T00:00:01Z"),
        user("new prompt"),
    ]
    session = load(tmp_path, f"{SID}.jsonl", records)
    assert said(session) == [(2, "new prompt")]
    assert session.links == (SessionLink(f"claude-{OTHER}", LinkKind.RESUME),)
    assert session.census[("copied/user", "2.1.38", Disposition.SKIPPED)] == 1
    assert session.census[("copied/assistant", "2.1.38", Disposition.SKIPPED)] == 1
    assert session.started_at == datetime(2026, 2, 10, 21, tzinfo=UTC)  # the copies' times are not this session's
    assert session.usage == ()


def test_reject_inconsistent_source_two_foreign_ids_and_no_own(tmp_path: Path) -> None:
    rejected = reject(tmp_path, "mixed.jsonl", [user("a"), user("b", sid=OTHER)])
    assert (rejected.code, rejected.line) == (RejectCode.INCONSISTENT_SOURCE, 1)


# --- subagents ------------------------------------------------------------------------------------------------------


def _subagent_lines(agent_id: str, first: str = "Find the TODOs") -> list[dict[str, object]]:
    return [
        user(first, isSidechain=True, agentId=agent_id),
        assistant([text("Found 3.")], isSidechain=True, agentId=agent_id),
    ]


def test_ok_nested_subagent_is_its_own_session_linked_to_its_parent(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "proj" / SID / "subagents" / "agent-a881341.jsonl", _subagent_lines("a881341"))
    [outcome] = read_one(Agent("claude"), path)
    session = outcome.session  # type: ignore[union-attr]
    assert session.session_id == f"claude-{SID}-agent-a881341"
    assert session.parent_session_id == f"claude-{SID}"
    assert session.links == (SessionLink(f"claude-{SID}", LinkKind.SUBAGENT),)
    # The prompt was written by the parent model, not by a person.
    assert said(session) == [(1, "Found 3.")]
    assert session.census[("user/subagent_prompt", "2.1.38", Disposition.HARNESS)] == 1


def test_ok_compaction_helper_is_linked_as_compaction(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "proj" / SID / "subagents" / "agent-acompact-fffbd0.jsonl", _subagent_lines("acompact-fffbd0")
    )
    [outcome] = read_one(Agent("claude"), path)
    session = outcome.session  # type: ignore[union-attr]
    assert session.session_id == f"claude-{SID}-agent-acompact-fffbd0"
    assert session.links == (SessionLink(f"claude-{SID}", LinkKind.COMPACTION),)


def test_ok_flat_subagent_takes_its_parent_from_the_records_and_agent_id_from_the_stem(tmp_path: Path) -> None:
    lines = [user("Warmup", isSidechain=True), assistant([text("Ready.")], isSidechain=True)]
    session = load(tmp_path, "agent-50243ee8.jsonl", lines)
    assert (session.session_id, session.parent_session_id) == (f"claude-{SID}-agent-50243ee8", f"claude-{SID}")
    assert said(session, Role.USER) == []  # a v2.0 "Warmup" probe is no person's turn


def test_reject_flat_subagent_without_any_session_id(tmp_path: Path) -> None:
    lines = [user("Warmup", sid=None, isSidechain=True)]
    assert reject(tmp_path, "agent-1.jsonl", lines).code is RejectCode.MISSING_SESSION_ID


def test_ok_sidechain_records_in_a_main_file_are_never_its_turns(tmp_path: Path) -> None:
    records = [user("real prompt"), *_subagent_lines("a1"), assistant([text("real answer")], msg_id="msg_2")]
    session = load(tmp_path, f"{SID}.jsonl", records)
    assert said(session) == [(0, "real prompt"), (3, "real answer")]
    assert session.census[("sidechain/user", "2.1.38", Disposition.SKIPPED)] == 1
    assert session.census[("sidechain/assistant", "2.1.38", Disposition.SKIPPED)] == 1


def test_ok_spawned_session_from_agent_progress(tmp_path: Path) -> None:
    records = [
        user("delegate"),
        assistant([tool_use("toolu_task", "Task", prompt="look")]),
        envelope("progress", data={"type": "agent_progress", "agentId": "afb92ff"}, parentToolUseID="toolu_task"),
        user([tool_result("toolu_task", [text("done")])], toolUseResult={"status": "completed"}),
    ]
    [call] = load(tmp_path, f"{SID}.jsonl", records).tool_calls
    assert call.spawned_session_id == f"claude-{SID}-agent-afb92ff"


def test_ok_spawned_session_from_tool_use_result_agent_id(tmp_path: Path) -> None:
    records = [
        assistant([tool_use("toolu_task", "Agent", prompt="look")]),
        user([tool_result("toolu_task", [text("done")])], toolUseResult={"status": "completed", "agentId": "a1"}),
    ]
    [call] = load(tmp_path, f"{SID}.jsonl", records).tool_calls
    assert call.spawned_session_id == f"claude-{SID}-agent-a1"
