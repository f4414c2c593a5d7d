"""GitHub Copilot CLI extractor rules, one small events file per rule, named after the outcome."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors import copilot
from extractors.copilot import default_roots, discover, flat_yaml
from extractors.errors import RejectCode
from extractors.model import Agent, Disposition, LinkKind, Loaded, Rejected, Role, Session
from extractors.registry import detect_format
from tests.support import outcomes_under, read_one, write_jsonl

AGENT = Agent("copilot")
SID = "5b1f0c3e-2222-4333-8444-555566667777"


class Events:
    """Events with envelope ids and times one second apart, from 2026-03-01T10:00:00Z."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, kind: str, data: dict[str, Any] | None = None, **envelope: Any) -> Events:
        n = len(self.records)
        record = {"type": kind, "data": data or {}, "id": f"e{n}", "timestamp": f"2026-03-01T10:00:{n:02d}.000Z"}
        record["parentId"] = f"e{n - 1}" if n else None
        record.update(envelope)
        self.records.append(record)
        return self

    def start(self, sid: str = SID, **data: Any) -> Events:
        return self.add(
            "session.start",
            {"sessionId": sid, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.11",
             "startTime": "2026-03-01T10:00:00.000Z", **data},
        )  # fmt: skip

    def user(self, text: str, **data: Any) -> Events:
        return self.add("user.message", {"content": text, "transformedContent": f"<x>{text}</x>", **data})

    def say(self, text: str, calls: list[dict[str, Any]] | None = None, **data: Any) -> Events:
        return self.add("assistant.message", {"content": text, "toolRequests": calls or [], **data})


def session_file(home: Path, events: Events, sid: str = SID, workspace: str | None = None) -> Path:
    folder = home / ".copilot" / "session-state" / sid
    path = write_jsonl(folder / "events.jsonl", events.records)
    if workspace is not None:
        (folder / "workspace.yaml").write_text(workspace, encoding="utf-8")
    return path


def read(home: Path) -> list[Any]:
    return [o for group in outcomes_under(AGENT, home / ".copilot").values() for o in group]


def sessions(home: Path) -> list[Session]:
    found = read(home)
    assert all(isinstance(o, Loaded) for o in found), found
    return [o.session for o in found if isinstance(o, Loaded)]


def one(home: Path) -> Session:
    [session] = sessions(home)
    return session


def users(session: Session) -> list[str]:
    return [t.text for t in session.turns if t.role is Role.USER]


def census(session: Session, kind: str) -> dict[Disposition, int]:
    return {d: n for (k, _, d), n in session.census.items() if k == kind}


# --- a person's turn --------------------------------------------------------------------------------------------------


def test_the_typed_content_is_the_turn_not_the_transformed_content(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("fix it").say("done"))
    session = one(tmp_path)
    assert [(t.role, t.text) for t in session.turns] == [(Role.USER, "fix it"), (Role.ASSISTANT, "done")]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"source": "skill-pdf"}, "user.message/source/skill"),
        ({"source": "agent-reviewer"}, "user.message/source/agent"),
        ({"isAutopilotContinuation": True}, "user.message/autopilot"),
    ],
)
def test_injected_user_messages_are_harness(tmp_path: Path, data: dict[str, Any], kind: str) -> None:
    session_file(tmp_path, Events().start().user("typed").user("injected", **data).say("ok"))
    session = one(tmp_path)
    assert users(session) == ["typed"]
    assert census(session, kind) == {Disposition.HARNESS: 1}


def test_a_skill_context_message_is_harness_whatever_its_source(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("typed").user('<skill-context name="x">body</skill-context>'))
    assert users(one(tmp_path)) == ["typed"]


@pytest.mark.parametrize("delivery", ["steering", "queued"])
def test_a_message_typed_while_the_agent_works_is_still_the_persons(tmp_path: Path, delivery: str) -> None:
    session_file(tmp_path, Events().start().user("first").user("also this", delivery=delivery))
    session = one(tmp_path)
    assert users(session) == ["first", "also this"]
    assert census(session, f"user.message/{delivery}") == {Disposition.TURN: 1}


@pytest.mark.parametrize("kind", ["system.message", "system.notification", "session.compaction_complete"])
def test_system_text_is_harness(tmp_path: Path, kind: str) -> None:
    events = Events().start().add(kind, {"content": "<system_notification>x", "summaryContent": "<summary>"})
    session_file(tmp_path, events.user("typed"))
    session = one(tmp_path)
    assert users(session) == ["typed"]
    assert census(session, kind) == {Disposition.HARNESS: 1}


def test_attachments_are_kept_as_references(tmp_path: Path) -> None:
    attachments = [{"type": "file", "path": "/p/a.py", "displayName": "a.py"}, {"type": "selection"}]
    session_file(tmp_path, Events().start().user("look", attachments=attachments))
    assert one(tmp_path).turns[0].attachments == ("file:/p/a.py", "selection")


# --- sub-agents -------------------------------------------------------------------------------------------------------


def spawning() -> Events:
    call = {"toolCallId": "call-task", "name": "task", "arguments": {"prompt": "look around"}}
    events = Events().start().user("explore the repo").say("", [call], outputTokens=10)
    events.add("subagent.started", {"toolCallId": "call-task", "agentName": "explore"})
    events.user("look around", parentToolCallId="call-task").records[-1]["agentId"] = "exp-1"
    events.say("found it", [{"toolCallId": "call-in", "name": "grep", "arguments": {}}], outputTokens=7, model="m2")
    events.records[-1]["agentId"] = "exp-1"
    events.add("tool.execution_complete", {"toolCallId": "call-in", "success": True, "result": "x"}, agentId="exp-1")
    events.add("tool.execution_complete", {"toolCallId": "call-task", "success": True, "result": {"content": "ok"}})
    return events.say("the repo is small", outputTokens=5)


def test_a_subagents_events_become_a_linked_session_not_the_parents_turns(tmp_path: Path) -> None:
    session_file(tmp_path, spawning())
    parent, child = sessions(tmp_path)
    assert child.session_id == f"copilot-{SID}-agent-exp-1"
    assert child.parent_session_id == parent.session_id
    assert [(link.other_session_id, link.kind, link.tool_call_id) for link in child.links] == [
        (parent.session_id, LinkKind.SUBAGENT, "call-task")
    ]
    assert [t.text for t in parent.turns] == ["explore the repo", "the repo is small"]
    assert [(t.role, t.text) for t in child.turns] == [(Role.ASSISTANT, "found it")]  # its prompt is not a person's
    assert [c.call_id for c in parent.tool_calls] == ["call-task"]
    assert parent.tool_calls[0].spawned_session_id == child.session_id
    assert [c.call_id for c in child.tool_calls] == ["call-in"]
    # no shutdown: each message's own output tokens, in its own session
    assert [u.output_tokens for u in parent.usage] == [10, 5]
    assert [(u.output_tokens, u.model) for u in child.usage] == [(7, "m2")]


def test_subagent_events_marked_only_by_parent_tool_call_id_are_the_subagents(tmp_path: Path) -> None:
    events = Events().start().user("go").say("", [{"toolCallId": "t1", "name": "task", "arguments": {}}])
    events.say("inner answer", parentToolCallId="t1")
    session_file(tmp_path, events)
    parent, child = sessions(tmp_path)
    assert child.session_id == f"copilot-{SID}-agent-t1"
    assert [t.text for t in child.turns] == ["inner answer"]
    assert [t.text for t in parent.turns] == ["go"]


# --- tokens -----------------------------------------------------------------------------------------------------------


def shutdown(events: Events, input_tokens: int, output: int, model: str = "claude-sonnet-4.6") -> Events:
    usage = {"inputTokens": input_tokens, "outputTokens": output, "cacheReadTokens": 100, "cacheWriteTokens": 50}
    return events.add("session.shutdown", {"modelMetrics": {model: {"requests": {"count": 2}, "usage": usage}}})


def test_a_resumed_file_is_one_session_whose_segment_totals_are_summed_once(tmp_path: Path) -> None:
    events = Events().start().user("one").say("a", outputTokens=30)
    shutdown(events, 1000, 30)
    events.add("session.resume", {"resumeTime": "2026-03-01T11:00:00.000Z"}).user("two").say("b", outputTokens=40)
    shutdown(events, 2000, 40)
    session_file(tmp_path, events)
    session = one(tmp_path)
    assert users(session) == ["one", "two"]
    # one row per segment and model, net of the cache: never the per-message counts on top
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) for u in session.usage] == [
        (850, 30, 100, 50),
        (1850, 40, 100, 50),
    ]


def test_a_segment_without_a_shutdown_keeps_its_per_message_tokens(tmp_path: Path) -> None:
    events = Events().start().user("one").say("a", outputTokens=30)
    shutdown(events, 1000, 30)
    events.add("session.resume").user("two").say("b", outputTokens=40)  # still running, or it crashed
    session_file(tmp_path, events)
    assert [(u.input_tokens, u.output_tokens) for u in one(tmp_path).usage] == [(850, 30), (None, 40)]


def test_per_call_usage_events_of_a_stream_replace_every_other_figure(tmp_path: Path) -> None:
    events = Events().start().user("one").say("a", outputTokens=30)
    events.add("assistant.usage", {"model": "gpt-5.4", "inputTokens": 900, "outputTokens": 30, "cacheReadTokens": 800},
               ephemeral=True)  # fmt: skip
    shutdown(events, 1000, 30)
    session_file(tmp_path, events)
    [usage] = one(tmp_path).usage
    assert (usage.model, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == ("gpt-5.4", 100, 30, 800)


def test_an_impossible_token_count_is_counted_not_stored(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("x").say("y", outputTokens=2**70))
    session = one(tmp_path)
    assert session.usage == ()
    assert census(session, "usage/out_of_range") == {Disposition.METADATA: 1}


# --- tool calls -------------------------------------------------------------------------------------------------------


def test_tool_calls_join_their_results_once_with_string_or_object_arguments(tmp_path: Path) -> None:
    calls = [
        {"toolCallId": "a", "name": "bash", "arguments": '{"command":"ls"}'},
        {"toolCallId": "b", "name": "view", "arguments": {"path": "x"}},
    ]
    events = Events().start().user("go").say("", calls)
    events.add("tool.execution_start", {"toolCallId": "a", "toolName": "bash"})
    events.add("tool.execution_complete", {"toolCallId": "a", "success": True, "result": "file\n"})
    events.add("tool.execution_complete", {"toolCallId": "a", "success": True, "result": "again"})
    events.add("tool.execution_complete", {"toolCallId": "b", "success": False, "error": {"message": "no such file"}})
    session_file(tmp_path, events)
    session = one(tmp_path)
    got = [(c.call_id, c.name, c.input, c.output, c.is_error) for c in session.tool_calls]
    assert got == [
        ("a", "bash", '{"command":"ls"}', "file\n", False),
        ("b", "view", '{"path": "x"}', "no such file", True),
    ]
    assert session.tool_calls[0].started_at == datetime(2026, 3, 1, 10, 0, 3, tzinfo=UTC)
    assert census(session, "tool.execution_complete/again") == {Disposition.TOOL: 1}


def test_a_redacted_tool_request_list_takes_the_call_from_its_execution_start(tmp_path: Path) -> None:
    events = Events().start().user("go").say("[REDACTED]", "[REDACTED]")  # type: ignore[arg-type]
    events.add("tool.execution_start", {"toolCallId": "a", "toolName": "skill", "arguments": "[REDACTED]"})
    events.add("tool.execution_complete", {"toolCallId": "a", "success": True, "result": "[REDACTED]"})
    session_file(tmp_path, events)
    [call] = one(tmp_path).tool_calls
    assert (call.call_id, call.turn_index, call.name, call.output) == ("a", 2, "skill", "[REDACTED]")


# --- times and identity -----------------------------------------------------------------------------------------------


def test_times_come_from_the_envelope_and_the_start_time(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("x").say("y"))
    session = one(tmp_path)
    assert session.started_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert session.ended_at == datetime(2026, 3, 1, 10, 0, 2, tzinfo=UTC)
    assert [t.timestamp for t in session.turns] == [
        datetime(2026, 3, 1, 10, 0, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 10, 0, 2, tzinfo=UTC),
    ]
    assert not session.started_at_inferred


def test_a_file_without_any_time_is_rejected(tmp_path: Path) -> None:
    events = Events().start().user("x")
    for record in events.records:
        del record["timestamp"]
    del events.records[0]["data"]["startTime"]
    session_file(tmp_path, events)
    [outcome] = read(tmp_path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.MISSING_TIMESTAMP


def test_a_start_naming_another_session_than_its_folder_is_inconsistent(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start(sid="other").user("x"))
    [outcome] = read(tmp_path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.INCONSISTENT_SOURCE


def test_an_events_file_of_bookkeeping_only_has_no_conversation(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().add("session.info", {"message": "trusted"}))
    [outcome] = read(tmp_path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION


def test_unknown_event_types_are_counted_and_skipped(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("x").add("session.brand_new", {"a": 1}))
    assert census(one(tmp_path), "session.brand_new") == {Disposition.SKIPPED: 1}


def test_a_vscode_agent_log_is_read_as_copilot_and_marked_in_the_census(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start(vscodeVersion="1.125.0", copilotVersion="0.53.0").user("hi").say("hello"))
    session = one(tmp_path)
    assert users(session) == ["hi"]
    assert census(session, "session.start/vscode") == {Disposition.METADATA: 1}


def test_a_stdout_stream_without_session_start_takes_its_id_from_the_result(tmp_path: Path) -> None:
    events = Events().add("session.tools_updated", {"model": "gpt-5.4"}, ephemeral=True).user("go").say("done")
    events.add("result", sessionId="6645082f-2630-4075-b68e-ffc0f53b317f", exitCode=0)
    path = write_jsonl(tmp_path / "run-20260927.jsonl", events.records)
    [outcome] = read_one(AGENT, path)
    assert isinstance(outcome, Loaded)
    assert outcome.session.session_id == "copilot-6645082f-2630-4075-b68e-ffc0f53b317f"
    assert outcome.session.started_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # its first event


def test_a_stream_without_any_session_id_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", Events().user("go").say("done").records)
    [outcome] = read_one(AGENT, path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.MISSING_SESSION_ID


# --- workspace.yaml ---------------------------------------------------------------------------------------------------


def test_workspace_yaml_gives_title_and_fills_what_the_events_lack(tmp_path: Path) -> None:
    yaml = 'id: x\ncwd: /home/u/p\nrepository: u/p\nbranch: dev\nsummary: "Fix \\"it\\""\nname: \'Renamed\'\n'
    session_file(tmp_path, Events().start().user("x"), workspace=yaml)
    session = one(tmp_path)
    assert (session.title, session.cwd, session.git_branch, session.git_repository) == (
        "Renamed",
        "/home/u/p",
        "dev",
        "github.com/u/p",
    )


def test_flat_yaml_reads_top_level_scalars_only() -> None:
    text = "a: 1\nb: 'x'' y'\nc: |\n  block\nd:\n  nested: 2\n# e: 3\nf: \"q\" # note\ng: plain # note\nh: ~\n"
    assert flat_yaml(text) == {"a": "1", "b": "x' y", "f": "q", "g": "plain"}


def test_workspace_yaml_counts_in_the_fingerprint(tmp_path: Path) -> None:
    path = session_file(tmp_path, Events().start().user("x"), workspace="id: x\n")
    sidecar = path.parent / "workspace.yaml"
    os.utime(path, ns=(1_000, 1_000))
    os.utime(sidecar, ns=(9_000, 9_000))
    [source] = discover(tmp_path / ".copilot")
    assert source.size == path.stat().st_size + sidecar.stat().st_size
    assert source.mtime_ns == 9_000


# --- discovery --------------------------------------------------------------------------------------------------------


def test_discovery_finds_folders_and_flat_legacy_files_only(tmp_path: Path) -> None:
    state = tmp_path / ".copilot" / "session-state"
    session_file(tmp_path, Events().start().user("x"))
    write_jsonl(state / "7c0d1e2f-aaaa-4bbb-8ccc-ddddeeeeffff.jsonl", Events().start("7c0d").user("y").records)
    (state / SID / "checkpoints").mkdir()
    (state / SID / "checkpoints" / "index.jsonl").write_text("{}\n")
    (tmp_path / ".copilot" / "history-session-state").mkdir()
    (tmp_path / ".copilot" / "history-session-state" / "a.jsonl").write_text("{}\n")
    found = sorted(os.path.relpath(s.path, tmp_path) for s in discover(tmp_path / ".copilot"))
    assert found == [
        f".copilot/session-state/{SID}/events.jsonl",
        ".copilot/session-state/7c0d1e2f-aaaa-4bbb-8ccc-ddddeeeeffff.jsonl",
    ]


def test_a_flat_legacy_file_is_named_by_its_stem(tmp_path: Path) -> None:
    state = tmp_path / ".copilot" / "session-state"
    write_jsonl(state / "7c0d1e2f.jsonl", Events().start("7c0d1e2f").user("y").records)
    assert one(tmp_path).session_id == "copilot-7c0d1e2f"


def test_the_root_may_be_the_session_state_folder_itself(tmp_path: Path) -> None:
    session_file(tmp_path, Events().start().user("x"))
    assert len(list(discover(tmp_path / ".copilot" / "session-state"))) == 1


@pytest.mark.parametrize(
    ("env", "want"),
    [({}, ".copilot"), ({"COPILOT_HOME": "/elsewhere/cp"}, "/elsewhere/cp"), ({"COPILOT_HOME": "~/cp"}, "cp")],
)
def test_copilot_home_moves_the_root(tmp_path: Path, env: dict[str, str], want: str) -> None:
    [root] = default_roots(tmp_path, env)
    assert root == (tmp_path / want if not want.startswith("/") else Path(want))


def test_an_events_file_under_session_state_is_claimed_by_name(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "backup" / "session-state" / SID / "events.jsonl") == AGENT
    assert detect_format(tmp_path / ".copilot" / "anything.jsonl") == AGENT
    assert copilot.SPEC.claims(tmp_path / "logs" / "events.jsonl") is None
