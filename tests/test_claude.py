"""Claude Code extractor: one test per rule, each on its own small file named after the expected outcome."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from extractors import claude
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.ids import stable_hash
from extractors.model import Agent, Deferred, Disposition, LinkKind, Rejected, Role, SessionLink
from tests.claude_records import (
    OTHER,
    SID,
    TS,
    assistant,
    envelope,
    load,
    read_file,
    reject,
    said,
    text,
    tool_result,
    tool_use,
    usage,
    user,
)
from tests.support import read_one, write_jsonl

# --- module contract ------------------------------------------------------------------------------------------------


def test_module_constants() -> None:
    assert (claude.AGENT, claude.NIGHTLY, claude.PARSER_VERSION) == (Agent.CLAUDE, True, "1")


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
    assert all(s.agent is Agent.CLAUDE and s.size == 3 and s.root == str(root) for s in found)


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
    [outcome] = read_one(Agent.CLAUDE, path)
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
    [outcome] = read_one(Agent.CLAUDE, path)
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


# --- user turns: FORMATS.md 1.8 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "record", "kind", "disposition"),
    [
        ("meta", user("Expanded skill body", isMeta=True), "user/meta", Disposition.HARNESS),
        ("compact_flag", user("Summary.", isCompactSummary=True), "user/compact_summary", Disposition.HARNESS),
        (
            "compact_text",
            user("This session is being continued from a previous conversation that ran out of context."),
            "user/compact_summary",
            Disposition.HARNESS,
        ),
        ("tool_result", user([tool_result("toolu_x")]), "user/tool_result_orphan", Disposition.TOOL),
        ("tool_use_result", user("Error: boom", toolUseResult="Error: boom"), "user/tool_result", Disposition.TOOL),
        (
            "stdout",
            user("<local-command-stdout>ok</local-command-stdout>"),
            "user/local-command-stdout",
            Disposition.HARNESS,
        ),
        (
            "stderr",
            user("<local-command-stderr>x</local-command-stderr>"),
            "user/local-command-stderr",
            Disposition.HARNESS,
        ),
        (
            "caveat_tag",
            user("<local-command-caveat>Caveat</local-command-caveat>"),
            "user/local-command-caveat",
            Disposition.HARNESS,
        ),
        ("reminder", user("<system-reminder>ctx</system-reminder>"), "user/system-reminder", Disposition.HARNESS),
        ("task", user("<task-notification>done</task-notification>"), "user/task-notification", Disposition.HARNESS),
        (
            "hook",
            user("<user-prompt-submit-hook>x</user-prompt-submit-hook>"),
            "user/user-prompt-submit-hook",
            Disposition.HARNESS,
        ),
        ("interrupted", user("[Request interrupted by user]"), "user/interrupted", Disposition.HARNESS),
        (
            "interrupted_block",
            user([text("[Request interrupted by user for tool use]")]),
            "user/interrupted",
            Disposition.HARNESS,
        ),
        (
            "caveat",
            user("Caveat: The messages below were generated by the user while running local commands. DO NOT"),
            "user/caveat",
            Disposition.HARNESS,
        ),
        (
            "at_file",
            user([text("Called the Read tool with the following input: {}"), text("Result of calling the Read tool:")]),
            "user/file_injection",
            Disposition.HARNESS,
        ),
        ("bash_input", user("<bash-input>ls</bash-input>"), "user/bash-input", Disposition.TOOL),
        (
            "bash_stdout",
            user("<bash-stdout>a</bash-stdout><bash-stderr></bash-stderr>"),
            "user/bash-stdout",
            Disposition.TOOL,
        ),
    ],
)
def test_ok_injected_user_line_is_not_a_turn(
    tmp_path: Path, name: str, record: dict[str, object], kind: str, disposition: Disposition
) -> None:
    session = load(tmp_path, f"ok_not_a_turn_{name}.jsonl", [user("the real prompt"), record])
    assert said(session) == [(0, "the real prompt")]
    assert session.census[(kind, "2.1.38", disposition)] == 1


def test_ok_system_reminder_inside_a_prompt_is_stripped(tmp_path: Path) -> None:
    record = user("fix the bug\n\n<system-reminder>\nTodo list is empty\n</system-reminder>")
    assert said(load(tmp_path, "ok_reminder_stripped.jsonl", [record])) == [(0, "fix the bug")]


def test_ok_compact_boundary_and_summary_are_not_turns(tmp_path: Path) -> None:
    records = [
        user("before"),
        envelope("system", subtype="compact_boundary", content="Conversation compacted", compactMetadata={}),
        user("This session is being continued from a previous conversation...", isCompactSummary=True),
        {"type": "summary", "summary": "A title", "leafUuid": "nowhere"},
        user("after"),
    ]
    session = load(tmp_path, "ok_compaction_not_turns.jsonl", records)
    assert said(session) == [(0, "before"), (4, "after")]
    assert session.census[("system/compact_boundary", "2.1.38", Disposition.HARNESS)] == 1
    assert session.census[("summary", "", Disposition.METADATA)] == 1


def test_ok_whitespace_only_prompt_is_dropped_and_others_keep_their_index(tmp_path: Path) -> None:
    session = load(tmp_path, "ok_empty_dropped.jsonl", [user("  \n"), user("second")])
    assert said(session) == [(1, "second")]


# --- slash commands -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wrapper", "expected"),
    [
        (
            "<command-name>/review</command-name>\n<command-message>review</command-message>\n"
            "<command-args>PR 12</command-args>",
            "/review PR 12",
        ),
        (
            "<command-message>review</command-message>\n<command-name>/review</command-name>\n"
            "<command-args>PR 12</command-args>",
            "/review PR 12",
        ),
        (
            "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
            "/clear",
        ),
    ],
)
def test_ok_slash_command_is_one_user_turn(tmp_path: Path, wrapper: str, expected: str) -> None:
    records = [
        user(wrapper),
        user([text("Expanded body of the command...")], isMeta=True),
        user("<local-command-stdout></local-command-stdout>"),
    ]
    session = load(tmp_path, "ok_slash_command.jsonl", records)
    assert said(session) == [(0, expected)]
    assert session.census[("user/command", "2.1.38", Disposition.TURN)] == 1


def test_ok_v21_system_local_command_is_a_user_turn_and_its_stdout_harness(tmp_path: Path) -> None:
    records = [
        envelope(
            "system",
            subtype="local_command",
            content="<command-name>/model</command-name>\n <command-message>model</command-message>\n "
            "<command-args></command-args>",
            level="info",
        ),
        envelope("system", subtype="local_command", content="<local-command-stdout>Kept model</local-command-stdout>"),
        user("go"),
    ]
    session = load(tmp_path, "ok_local_command.jsonl", records)
    assert [(t.index, t.role, t.text) for t in session.turns] == [(0, Role.USER, "/model"), (2, Role.USER, "go")]
    assert session.census[("system/local_command", "2.1.38", Disposition.TURN)] == 1
    assert session.census[("system/local_command", "2.1.38", Disposition.HARNESS)] == 1


# --- assistant turns and usage --------------------------------------------------------------------------------------


def test_ok_one_response_over_three_lines_is_one_turn_with_its_last_usage(tmp_path: Path) -> None:
    records = [
        user("q"),
        assistant([text("First part.")], usage=usage(4), ts="2026-02-10T21:00:01Z"),
        assistant([{"type": "thinking", "thinking": "hmm", "signature": "x"}], usage=usage(50)),
        envelope("progress", data={"type": "hook_progress"}),
        assistant([text("Second part."), tool_use("toolu_1", command="ls")], usage=usage(98, read=200)),
    ]
    session = load(tmp_path, "ok_one_response_three_lines.jsonl", records)
    assert said(session, Role.ASSISTANT) == [(1, "First part.\n\nSecond part.")]
    [row] = session.usage
    assert (row.turn_index, row.output_tokens, row.cache_read_tokens, row.response_id) == (1, 98, 200, "msg_1")
    assert (row.input_tokens, row.cache_write_tokens, row.model) == (3, 10, "claude-opus-4-6")
    assert row.timestamp == datetime(2026, 2, 10, 21, 0, 1, tzinfo=UTC)
    assert session.tool_calls[0].turn_index == 1
    assert session.census[("assistant/thinking", "2.1.38", Disposition.HARNESS)] == 1


def test_ok_same_message_id_with_another_request_id_is_another_response(tmp_path: Path) -> None:
    records = [
        assistant([text("a")], request_id="req_1", usage=usage(1)),
        assistant([text("b")], request_id="req_2", usage=usage(2)),
    ]
    session = load(tmp_path, "ok_request_id_splits.jsonl", records)
    assert said(session) == [(0, "a"), (1, "b")]
    assert [u.output_tokens for u in session.usage] == [1, 2]


def test_ok_gateway_response_without_request_id_is_keyed_on_message_id(tmp_path: Path) -> None:
    records = [assistant([text("a")], request_id=None), assistant([text("b")], request_id=None)]
    assert said(load(tmp_path, "ok_no_request_id.jsonl", records)) == [(0, "a\n\nb")]


def test_ok_synthetic_message_is_harness_not_a_model(tmp_path: Path) -> None:
    records = [
        user("q"),
        assistant([text("No response requested.")], model="<synthetic>", msg_id="m2", usage=usage(0)),
        assistant([text("real")], msg_id="m3"),
    ]
    session = load(tmp_path, "ok_synthetic_harness.jsonl", records)
    assert said(session, Role.ASSISTANT) == [(2, "real")]
    assert session.models == ("claude-opus-4-6",)
    assert session.usage == ()
    assert session.census[("assistant/synthetic", "2.1.38", Disposition.HARNESS)] == 1


# --- tool calls -----------------------------------------------------------------------------------------------------


def test_ok_tool_call_joined_with_its_result(tmp_path: Path) -> None:
    records = [
        assistant([tool_use("toolu_1", "Bash", command="ls")], ts="2026-02-10T21:00:01Z"),
        user(
            [
                tool_result(
                    "toolu_1",
                    [
                        text("a.txt"),
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    ],
                )
            ],
            ts="2026-02-10T21:00:02Z",
            toolUseResult={"stdout": "a.txt"},
        ),
        assistant([tool_use("toolu_2", "Read", file_path="/x")], msg_id="msg_2"),
        user([tool_result("toolu_2", "nope", is_error=True)]),
        assistant([tool_use("toolu_3", "Read", file_path="/y")], msg_id="msg_3"),
        user([tool_result("toolu_3", "Error: Path does not exist")], toolUseResult="Error: Path does not exist"),
    ]
    calls = load(tmp_path, "ok_tool_calls.jsonl", records).tool_calls
    first = calls[0]
    assert (first.call_id, first.turn_index, first.name, first.input) == ("toolu_1", 0, "Bash", '{"command":"ls"}')
    assert first.output == f"a.txt\n\n[image/png sha256:{stable_hash('QUJD')} 3 bytes]"
    assert first.is_error is False
    assert (first.started_at, first.ended_at) == (
        datetime(2026, 2, 10, 21, 0, 1, tzinfo=UTC),
        datetime(2026, 2, 10, 21, 0, 2, tzinfo=UTC),
    )
    assert [c.is_error for c in calls[1:]] == [True, True]


def test_ok_tool_result_without_its_call_is_counted_not_rejected(tmp_path: Path) -> None:
    session = load(tmp_path, "ok_orphan_result.jsonl", [user("q"), user([tool_result("toolu_gone")])])
    assert session.tool_calls == ()
    assert session.census[("user/tool_result_orphan", "2.1.38", Disposition.TOOL)] == 1


def test_ok_tool_input_and_output_are_clipped(tmp_path: Path) -> None:
    records = [assistant([tool_use("toolu_1", command="x" * 5000)]), user([tool_result("toolu_1", "y" * 5000)])]
    outcomes = read_file(tmp_path, "ok_clipped.jsonl", records)
    path = tmp_path / "-home-u-proj" / "ok_clipped.jsonl"
    [outcome] = read_one(Agent.CLAUDE, path, Limits(settle_seconds=0, max_field_bytes=1000))
    [call] = outcome.session.tool_calls  # type: ignore[union-attr]
    assert call.input is not None and call.output is not None
    assert "clipped" in call.input and len(call.input) < 1200
    assert "clipped" in call.output and len(call.output) < 1200
    assert outcomes  # the unclipped read loads too


def test_ok_server_tool_use_and_its_result(tmp_path: Path) -> None:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    found = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "title": "T", "url": "https://u", "encrypted_content": "Zm9v"}],
    }
    [call] = load(tmp_path, "ok_server_tool.jsonl", [assistant([block, found, text("Found it.")])]).tool_calls
    assert (call.name, call.output) == ("web_search", "T <https://u>")


# --- images ---------------------------------------------------------------------------------------------------------


def test_ok_image_in_prompt_is_an_attachment_reference_never_text(tmp_path: Path) -> None:
    data = "iVBORw0KGgo" * 100 + "=="
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    [turn] = load(tmp_path, "ok_image_attachment.jsonl", [user([image, text("what is this?")])]).turns
    assert turn.text == "what is this?"
    assert turn.attachments == (f"image/png sha256:{stable_hash(data)} {len(data) * 3 // 4 - 2} bytes",)
    assert data not in json.dumps(turn.attachments)


# --- session metadata -----------------------------------------------------------------------------------------------


def test_ok_session_metadata(tmp_path: Path) -> None:
    records = [
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {"timestamp": "2026-02-10T20:59:00Z"}},
        user("q", gitBranch="", version="2.1.37", cwd="/home/u/proj", ts="2026-02-10T21:00:00Z"),
        assistant([text("a")], model="claude-sonnet-4-5", gitBranch="feat", cwd="/elsewhere"),
        assistant([text("b")], msg_id="m2", model="claude-opus-4-6", ts="2026-02-10T22:00:00Z"),
        assistant([text("c")], msg_id="m3", model="claude-sonnet-4-5", ts="not a time"),
    ]
    session = load(tmp_path, "ok_metadata.jsonl", records)
    assert (session.cwd, session.git_branch) == ("/home/u/proj", "feat")
    assert session.models == ("claude-sonnet-4-5", "claude-opus-4-6")
    assert session.cli_versions == ("2.1.37", "2.1.38")
    assert session.started_at == datetime(2026, 2, 10, 20, 59, tzinfo=UTC)  # the snapshot's own timestamp
    assert session.ended_at == datetime(2026, 2, 10, 22, tzinfo=UTC)
    assert [t.timestamp for t in session.turns][-1] is None  # an unusable time stays None, never "now"


@pytest.mark.parametrize(
    ("extra", "title"),
    [
        ([], None),
        ([{"type": "summary", "summary": "Elsewhere", "leafUuid": "not-in-file"}], None),
        ([{"type": "summary", "summary": "Here", "leafUuid": "leaf-1"}], "Here"),
        (
            [
                {"type": "ai-title", "sessionId": SID, "aiTitle": "AI"},
                {"type": "summary", "summary": "S", "leafUuid": "leaf-1"},
            ],
            "AI",
        ),
        (
            [
                {"type": "custom-title", "sessionId": SID, "customTitle": "Mine"},
                {"type": "ai-title", "sessionId": SID, "aiTitle": "AI"},
            ],
            "Mine",
        ),
    ],
)
def test_ok_title_precedence(tmp_path: Path, extra: list[dict[str, object]], title: str | None) -> None:
    assert load(tmp_path, "ok_title.jsonl", [user("q", uuid="leaf-1"), *extra]).title == title


def test_reject_missing_timestamp(tmp_path: Path) -> None:
    assert (
        reject(tmp_path, "x.jsonl", [user("q", ts=None), user("r", ts="garbage")]).code is RejectCode.MISSING_TIMESTAMP
    )


# --- census and shapes ----------------------------------------------------------------------------------------------


def test_ok_every_line_counted_once_and_unknown_kinds_skipped(tmp_path: Path) -> None:
    records = [
        user("q"),
        {"type": "brand-new-kind", "sessionId": SID, "whatever": [1, 2]},
        {"no_type": True},
        envelope("system", subtype="turn_duration", durationMs=5),
        envelope("attachment", attachment={"type": "todo_reminder"}),
        assistant([text("a")]),
    ]
    session = load(tmp_path, "ok_census.jsonl", records)
    assert sum(session.census.values()) == len(records)
    assert session.census[("brand-new-kind", "", Disposition.SKIPPED)] == 1
    assert session.census[("<untyped>", "", Disposition.SKIPPED)] == 1
    assert session.census[("system/turn_duration", "2.1.38", Disposition.SKIPPED)] == 1


@pytest.mark.parametrize(
    "broken",
    [
        envelope("user", message="not an object"),
        envelope("assistant", message={"role": "assistant", "content": 42}),
        envelope("user", message={"role": "user", "content": ["not a block"]}),
        envelope("assistant", message={"id": "m", "content": [], "usage": [1]}),
        envelope("user", message={"content": "x"}, sessionId=7),
    ],
)
def test_reject_bad_shape_of_a_known_kind_with_line_and_offset(tmp_path: Path, broken: dict[str, object]) -> None:
    first = json.dumps(user("q"))
    rejected = reject(tmp_path, "reject_bad_shape.jsonl", [first, json.dumps(broken)])
    assert (rejected.code, rejected.line, rejected.offset) == (RejectCode.BAD_SHAPE, 1, len(first) + 1)


def test_reject_invalid_json_mid_file_with_its_line(tmp_path: Path) -> None:
    lines = [json.dumps(user("q")), '{"type":"pr-link","prNu{"parentUuid":null}', json.dumps(user("r"))]
    rejected = reject(tmp_path, "reject_invalid_json.jsonl", lines)
    assert (rejected.code, rejected.line) == (RejectCode.INVALID_JSON, 1)


def test_defer_fresh_partial_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p" / "defer.jsonl", [json.dumps(user("q")), '{"type":"assist'], newline_at_end=False)
    os.utime(path, (time.time(), time.time()))
    [outcome] = read_one(Agent.CLAUDE, path, Limits(settle_seconds=3600))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.WRITE_IN_PROGRESS


def test_reject_stale_partial_last_line_as_truncated_tail(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p" / "stale.jsonl", [json.dumps(user("q")), '{"type":"assist'], newline_at_end=False)
    [outcome] = read_one(Agent.CLAUDE, path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.TRUNCATED_TAIL
