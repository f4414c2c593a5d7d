"""Qwen Code reader rules, one small chat file per rule, each test named after the outcome it expects."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from extractors import qwen
from extractors.bounded import GLUED_LINE_KIND, Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Disposition, LinkKind, Loaded, Outcome, Rejected, Role, Session
from tests.support import read_one, write_jsonl

AGENT = Agent("qwen")
SID = "5b1f0e2a-7c3d-4e8f-9a10-b2c3d4e5f601"
T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)
HOOK = "<qwen:user-prompt-submit-context>\nProject rules: be brief.\n</qwen:user-prompt-submit-context>"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rec(uuid: str, parent: str | None, seconds: float, kind: str, sid: str = SID, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"uuid": uuid, "parentUuid": parent, "sessionId": sid, "timestamp": at(seconds)}
    record.update(type=kind, cwd="/home/u/proj", version="0.24.4", gitBranch="main", **fields)
    return record


def user(uuid: str, parent: str | None, seconds: float, *parts: Any, **fields: Any) -> dict[str, Any]:
    items = [p if isinstance(p, dict) else {"text": p} for p in parts]
    return rec(uuid, parent, seconds, "user", message={"role": "user", "parts": items}, **fields)


def model(uuid: str, parent: str | None, seconds: float, *parts: Any, **fields: Any) -> dict[str, Any]:
    items = [p if isinstance(p, dict) else {"text": p} for p in parts]
    fields.setdefault("model", "qwen3-coder-plus")
    return rec(uuid, parent, seconds, "assistant", message={"role": "model", "parts": items}, **fields)


def call(call_id: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    return {"functionCall": {"id": call_id, "name": name, "args": args}}


def response(call_id: str, output: Any, name: str = "read_file") -> dict[str, Any]:
    return {"functionResponse": {"id": call_id, "name": name, "response": output}}


def result(
    uuid: str, parent: str, seconds: float, call_id: str, output: Any, status: str = "success"
) -> dict[str, Any]:
    message = {"role": "user", "parts": [response(call_id, output)]}
    return rec(
        uuid, parent, seconds, "tool_result", message=message, toolCallResult={"callId": call_id, "status": status}
    )


def system(uuid: str, parent: str | None, seconds: float, subtype: str, **payload: Any) -> dict[str, Any]:
    return rec(uuid, parent, seconds, "system", subtype=subtype, systemPayload=payload)


def chat_file(root: Path, records: list[Any], sid: str = SID) -> Path:
    return write_jsonl(root / "projects" / "-home-u-proj" / "chats" / f"{sid}.jsonl", records)


def read(path: Path, limits: Limits | None = None) -> list[Outcome]:
    return read_one(AGENT, path) if limits is None else read_one(AGENT, path, limits)


def sessions(path: Path) -> list[Session]:
    outcomes = read(path)
    assert all(isinstance(o, Loaded) for o in outcomes), outcomes
    return [o.session for o in outcomes if isinstance(o, Loaded)]


def only(path: Path) -> Session:
    [session] = sessions(path)
    return session


def code(path: Path) -> RejectCode:
    [outcome] = read(path)
    assert isinstance(outcome, Rejected), outcome
    return outcome.code


def turns(session: Session) -> list[tuple[str, str]]:
    return [(t.role.value, t.text) for t in session.turns]


def census(session: Session) -> dict[str, Disposition]:
    return {kind: d for (kind, _, d) in session.census}


# --- a person's turn and harness ---------------------------------------------------------------------------------


def test_the_typed_text_is_the_persons_turn_and_the_hook_context_part_is_not(tmp_path: Path) -> None:
    payload = {"displayText": "explain @src/app.py", "hookContext": "Project rules: be brief."}
    session = only(
        chat_file(
            tmp_path,
            [
                user(
                    "u1", None, 1, "explain the file below\n--- src/app.py ---\nprint(1)", HOOK, systemPayload=payload
                ),
                user("u2", "u1", 2, "and now without a payload", HOOK),
                model("a1", "u2", 3, "Done."),
            ],
        )
    )
    assert turns(session) == [
        ("user", "explain @src/app.py"),
        ("user", "and now without a payload"),
        ("assistant", "Done."),
    ]
    assert all("Project rules" not in t.text for t in session.turns)
    assert census(session)["user/hook_context"] is Disposition.TURN


def test_a_hook_tag_lookalike_that_is_not_a_whole_final_block_stays_the_persons_words(tmp_path: Path) -> None:
    typed = "what does <qwen:user-prompt-submit-context> mean?"
    session = only(chat_file(tmp_path, [user("u1", None, 1, typed), user("u2", "u1", 2, HOOK, "after the block")]))
    assert turns(session) == [("user", typed), ("user", f"{HOOK}\nafter the block")]


def test_notifications_cron_and_goal_prompts_are_harness_never_a_persons_turn(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "build it"),
                user("n1", "u1", 2, "Background task finished", subtype="notification", provenance="system"),
                user("c1", "n1", 3, "nightly check", subtype="cron"),
                user("g1", "c1", 4, "continue toward the goal", provenance="goal_runtime"),
                user("m1", "g1", 5, "also run the tests", subtype="mid_turn_user_message"),
                model("a1", "m1", 6, "Built."),
            ],
        )
    )
    assert turns(session) == [("user", "build it"), ("user", "also run the tests"), ("assistant", "Built.")]
    kinds = census(session)
    assert kinds["user/notification"] is kinds["user/cron"] is kinds["user/goal_runtime"] is Disposition.HARNESS


def test_thought_parts_are_not_text_and_a_thought_only_response_is_no_turn(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "hi"),
                model("a1", "u1", 2, {"text": "pondering", "thought": True}),
                model("a2", "a1", 3, {"text": "still pondering", "thought": True}, "Hello."),
            ],
        )
    )
    assert turns(session) == [("user", "hi"), ("assistant", "Hello.")]
    assert census(session)["assistant/empty"] is Disposition.SKIPPED


def test_a_slash_command_invocation_is_the_persons_turn_as_typed_and_its_result_is_not(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                system("s1", None, 1, "slash_command", phase="invocation", rawCommand="/stats"),
                system("s2", "s1", 2, "slash_command", phase="result", rawCommand="/stats"),
            ],
        )
    )
    assert turns(session) == [("user", "/stats")]


def test_a_slash_command_written_as_a_user_record_and_an_invocation_is_one_turn(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "/docs"),
                system("s1", "u1", 2, "slash_command", phase="invocation", rawCommand="/docs"),
                system("s2", "s1", 3, "slash_command", phase="result", rawCommand="/docs"),
            ],
        )
    )
    assert turns(session) == [("user", "/docs")]
    assert census(session)["system/slash_command/repeated"] is Disposition.SKIPPED


# --- tools -------------------------------------------------------------------------------------------------------


def test_a_function_call_is_joined_to_its_tool_result_once_with_its_status(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "read two files"),
                model("a1", "u1", 2, "Reading.", call("c1", path="a.py"), call("c2", path="b.py")),
                result("t1", "a1", 3, "c1", {"output": "print(1)"}),
                result("t2", "t1", 4, "c2", {"error": "no such file"}, status="error"),
                model("a2", "t2", 5, "One of them is missing."),
            ],
        )
    )
    calls = {c.call_id: c for c in session.tool_calls}
    assert list(calls) == ["c1", "c2"]
    assert (calls["c1"].input, calls["c1"].output, calls["c1"].is_error) == ('{"path": "a.py"}', "print(1)", False)
    assert (calls["c2"].output, calls["c2"].is_error, calls["c2"].turn_index) == ("no such file", True, 1)
    assert calls["c1"].ended_at == T0 + timedelta(seconds=3)


def test_a_tool_response_carried_in_a_user_message_is_a_tool_result_not_a_turn(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "ls"),
                model("a1", "u1", 2, call("c1", "run_shell_command", command="ls")),
                user("r1", "a1", 3, response("c1", {"output": "a.py"}, "run_shell_command")),
            ],
        )
    )
    assert turns(session) == [("user", "ls")]
    assert session.tool_calls[0].output == "a.py"
    assert census(session)["user/function_response"] is Disposition.TOOL


# --- tokens ------------------------------------------------------------------------------------------------------


def test_usage_is_one_row_per_response_with_the_cached_part_taken_out_of_the_prompt(tmp_path: Path) -> None:
    meta = {"promptTokenCount": 1200, "candidatesTokenCount": 40, "thoughtsTokenCount": 10}
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "hi"),
                model(
                    "a1",
                    "u1",
                    2,
                    {"text": "x", "thought": True},
                    usageMetadata=meta | {"cachedContentTokenCount": 1000},
                ),
                # the same response's second fragment (same uuid) repeats its usage: counted once
                model("a1", "u1", 2.5, "Hello.", usageMetadata=meta | {"cachedContentTokenCount": 1000}),
                model("a2", "a1", 3, "More.", usageMetadata={"promptTokenCount": 1300, "candidatesTokenCount": 5}),
                model("a3", "a2", 4, "No usage."),
            ],
        )
    )
    rows = [
        (u.turn_index, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) for u in session.usage
    ]
    assert rows == [(2, 200, 40, 1000, 10), (3, 1300, 5, None, None)]
    assert {u.model for u in session.usage} == {"qwen3-coder-plus"}
    assert qwen.SPEC.price_provider is None and qwen.SPEC.reasoning_billed_separately


# --- tree, branches, lineage -------------------------------------------------------------------------------------


def test_a_rewind_leaves_a_branch_that_is_a_session_linked_fork_to_the_active_one(tmp_path: Path) -> None:
    main, branch = sessions(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "first"),
                model("a1", "u1", 2, "One."),
                user("u2", "a1", 3, "abandoned question"),
                model("a2", "u2", 4, "Abandoned answer."),
                system("r1", "a1", 5, "rewind", truncatedCount=2),
                user("u3", "r1", 6, "second try"),
                model("a3", "u3", 7, "Two."),
            ],
        )
    )
    assert turns(main) == [("user", "first"), ("assistant", "One."), ("user", "second try"), ("assistant", "Two.")]
    assert [t.index for t in main.turns] == [0, 1, 5, 6]
    assert branch.session_id == f"qwen-{SID}-branch-a2"
    assert turns(branch) == [("user", "abandoned question"), ("assistant", "Abandoned answer.")]
    assert [(link.other_session_id, link.kind) for link in branch.links] == [(main.session_id, LinkKind.FORK)]


def test_a_trailing_artifact_is_never_the_active_leaf_and_titles_follow_their_branch(tmp_path: Path) -> None:
    main, branch = sessions(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "first"),
                model("a1", "u1", 2, "Dead answer."),
                system("t1", "a1", 3, "custom_title", customTitle="Dead title"),
                user("u2", "u1", 4, "again"),
                model("a2", "u2", 5, "Live answer."),
                system("t2", "a2", 6, "custom_title", customTitle="Live title"),
                system("x1", "a1", 7, "session_artifact_snapshot", summary="an artifact"),
            ],
        )
    )
    assert (main.title, turns(main)[-1]) == ("Live title", ("assistant", "Live answer."))
    assert (branch.title, turns(branch)) == ("Dead title", [("assistant", "Dead answer.")])


def test_a_branch_with_nothing_said_is_counted_abandoned_not_a_session(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "hi"),
                system("s1", "u1", 2, "attribution_snapshot"),
                model("a1", "u1", 3, "Hello."),
            ],
        )
    )
    assert census(session)["abandoned/system/attribution_snapshot"] is Disposition.SKIPPED


def test_branch_copies_are_skipped_and_the_fork_links_to_its_parent(tmp_path: Path) -> None:
    parent = "0a0b0c0d-0000-4000-8000-000000000001"
    fork = "7d2e9c41-0b5a-4f63-8e27-1a9b8c7d6e52"
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "copied question", sid=fork, forkedFrom={"sessionId": parent, "messageUuid": "u1"}),
                model("a1", "u1", 2, "Copied answer.", sid=fork, forkedFrom={"sessionId": parent, "messageUuid": "a1"}),
                user("u2", "a1", 60, "the fork's own question", sid=fork),
            ],
            sid=fork,
        )
    )
    assert turns(session) == [("user", "the fork's own question")]
    assert session.started_at == T0 + timedelta(seconds=60)
    assert session.parent_session_id == f"qwen-{parent}"
    assert [(link.other_session_id, link.kind) for link in session.links] == [(f"qwen-{parent}", LinkKind.FORK)]
    assert census(session)["copied/user"] is Disposition.SKIPPED


def test_a_sub_session_links_subagent_to_the_session_that_spawned_it(tmp_path: Path) -> None:
    spawner = "0a0b0c0d-0000-4000-8000-000000000002"
    session = only(
        chat_file(
            tmp_path, [system("p1", None, 1, "parent_session", parentSessionId=spawner), user("u1", "p1", 2, "go")]
        )
    )
    assert session.parent_session_id == f"qwen-{spawner}"
    assert [link.kind for link in session.links] == [LinkKind.SUBAGENT]


def test_sidechain_records_are_counted_and_not_read(tmp_path: Path) -> None:
    session = only(
        chat_file(tmp_path, [user("u1", None, 1, "hi"), model("s1", "u1", 2, "subagent text", isSidechain=True)])
    )
    assert turns(session) == [("user", "hi")]
    assert census(session)["sidechain/assistant"] is Disposition.SKIPPED


def test_a_dangling_parent_hangs_on_the_record_before_it(tmp_path: Path) -> None:
    session = only(chat_file(tmp_path, [user("u1", None, 1, "hi"), model("a1", "gone", 2, "Hello.")]))
    assert turns(session) == [("user", "hi"), ("assistant", "Hello.")]


def test_a_cycle_in_the_record_tree_is_undecidable(tmp_path: Path) -> None:
    path = chat_file(tmp_path, [user("u1", "a1", 1, "hi"), model("a1", "u1", 2, "Hello."), user("x", "x2", 3, "x")])
    assert code(path) is RejectCode.UNDECIDABLE_THREAD


# --- glued lines, times, unknown kinds, rejections ----------------------------------------------------------------


def test_records_glued_onto_one_line_are_read_in_order_and_counted(tmp_path: Path) -> None:
    glued = json.dumps(user("u1", None, 1, 'Inspect {"glued": "objects"}')) + json.dumps(model("a1", "u1", 2, "Ok."))
    session = only(chat_file(tmp_path, [glued, json.dumps(user("u2", "a1", 3, "next"))]))
    assert turns(session) == [("user", 'Inspect {"glued": "objects"}'), ("assistant", "Ok."), ("user", "next")]
    assert session.turns[0].index == 0 and session.turns[2].index == 1
    assert census(session)[GLUED_LINE_KIND] is Disposition.SKIPPED


def test_times_are_the_records_own_and_a_record_without_one_keeps_none(tmp_path: Path) -> None:
    no_time = model("a1", "u1", 2, "Hello.")
    no_time["timestamp"] = "not a time"
    session = only(chat_file(tmp_path, [user("u1", None, 1, "hi"), no_time, user("u2", "a1", 9, "bye")]))
    assert (session.started_at, session.ended_at) == (T0 + timedelta(seconds=1), T0 + timedelta(seconds=9))
    assert session.turns[1].timestamp is None and not session.started_at_inferred


def test_a_file_with_no_time_anywhere_is_rejected_missing_timestamp(tmp_path: Path) -> None:
    record = user("u1", None, 1, "hi")
    del record["timestamp"]
    assert code(chat_file(tmp_path, [record])) is RejectCode.MISSING_TIMESTAMP


def test_unknown_record_types_and_subtypes_are_counted_and_skipped(tmp_path: Path) -> None:
    session = only(
        chat_file(
            tmp_path,
            [
                user("u1", None, 1, "hi"),
                rec("k1", "u1", 2, "session_checkpoint"),
                system("k2", "k1", 3, "quantum_flux", displayText="new"),
                user("k3", "k2", 4, "a new kind of user record", subtype="hologram"),
                model("a1", "k3", 5, "Hello."),
            ],
        )
    )
    assert turns(session) == [("user", "hi"), ("assistant", "Hello.")]
    kinds = census(session)
    assert kinds["session_checkpoint"] is kinds["system/quantum_flux"] is kinds["user/hologram"] is Disposition.SKIPPED


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([{"uuid": "u1", "type": "user", "timestamp": "2026-03-02T10:00:00Z"}], RejectCode.MISSING_SESSION_ID),
        ([user("u1", None, 1, "hi", sid="someone-else")], RejectCode.INCONSISTENT_SOURCE),
        ([user("u1", None, 1, "hi"), user("u2", "u1", 2, "x", sid=f"{SID}-other")], RejectCode.INCONSISTENT_SOURCE),
        ([rec("u1", None, 1, "user", message="text")], RejectCode.BAD_SHAPE),
        ([rec("u1", None, 1, "user", message={"role": "user", "parts": "hi"})], RejectCode.BAD_SHAPE),
        ([rec("", None, 1, "user", message={"role": "user", "parts": [{"text": "hi"}]})], RejectCode.BAD_SHAPE),
        ([model("a1", None, 1, {"functionCall": {"id": "c1"}})], RejectCode.BAD_SHAPE),
        ([system("s1", None, 1, "ui_telemetry")], RejectCode.NO_CONVERSATION),
    ],
    ids=["no session id", "file named for another session", "two session ids", "message not an object",
         "parts not a list", "no uuid", "call without a name", "telemetry alone"],
)  # fmt: skip
def test_a_file_a_person_can_break_is_rejected_with_a_clear_code(
    tmp_path: Path, records: list[Any], expected: RejectCode
) -> None:
    assert code(chat_file(tmp_path, records)) is expected


def test_an_empty_file_is_no_conversation(tmp_path: Path) -> None:
    path = chat_file(tmp_path, [])
    path.write_bytes(b"")
    assert code(path) is RejectCode.NO_CONVERSATION


def test_a_file_being_written_is_deferred(tmp_path: Path) -> None:
    path = chat_file(tmp_path, [json.dumps(user("u1", None, 1, "hi")), '{"uuid":"a'])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    [outcome] = read(path, Limits())
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.WRITE_IN_PROGRESS


def test_an_old_partial_tail_is_truncated(tmp_path: Path) -> None:
    path = chat_file(tmp_path, [json.dumps(user("u1", None, 1, "hi")), '{"uuid":"a'])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    old = time.time() - 3600
    os.utime(path, (old, old))
    assert code(path) is RejectCode.TRUNCATED_TAIL


def test_a_big_line_under_tiny_limits_is_rejected_without_loading(tmp_path: Path) -> None:
    path = chat_file(tmp_path, [user("u1", None, 1, "x" * 5000)])
    [outcome] = read(path, Limits(settle_seconds=0.0, max_line_bytes=1000))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


def test_role_is_user_for_every_persons_turn_only(tmp_path: Path) -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "aGk="}}
    session = only(chat_file(tmp_path, [user("u1", None, 1, image), model("a1", "u1", 2, "A cat.")]))
    assert [t.role for t in session.turns] == [Role.USER, Role.ASSISTANT]
    assert session.turns[0].attachments == ("image/png",)


# --- discovery and roots -----------------------------------------------------------------------------------------


def test_default_roots_follow_qwen_runtime_dir_then_qwen_home_then_the_home(tmp_path: Path) -> None:
    home = tmp_path
    assert qwen.default_roots(home, {}) == [home / ".qwen/projects"]
    assert qwen.default_roots(home, {"QWEN_HOME": "/opt/qwen"}) == [Path("/opt/qwen/projects"), home / ".qwen/projects"]
    both = qwen.default_roots(home, {"QWEN_RUNTIME_DIR": "~/rt", "QWEN_HOME": "/opt/qwen"})
    assert both == [home / "rt/projects", Path("/opt/qwen/projects"), home / ".qwen/projects"]
    assert qwen.default_roots(home, {"QWEN_RUNTIME_DIR": "  "}) == [home / ".qwen/projects"]


def test_discovery_takes_chat_files_and_archived_ones_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    good = chat_file(tmp_path, [user("u1", None, 1, "hi")])
    archived = write_jsonl(good.parent / "archive" / f"{SID}.jsonl", [user("u1", None, 1, "hi")])
    (good.parent.parent / "notes.jsonl").write_text("{}\n")
    write_jsonl(good.parent / "archive" / "deeper" / "x.jsonl", ["{}"])
    write_jsonl(root / "-other" / "logs" / "x.jsonl", ["{}"])
    (good.parent / "x.json").write_text("{}\n")
    found = sorted(os.path.relpath(s.path, root) for s in qwen.discover(root))
    assert found == sorted([os.path.relpath(archived, root), os.path.relpath(good, root)])
    assert sorted(s.path for s in qwen.discover(good.parent.parent)) == sorted([str(archived), str(good)])
    assert sorted(s.path for s in qwen.discover(good.parent)) == sorted([str(archived), str(good)])
    assert only(archived).archived and not only(good).archived


def test_only_a_path_with_a_dot_qwen_folder_is_claimed() -> None:
    assert qwen.SPEC.claims(Path("/home/u/.qwen/projects/-p/chats/x.jsonl")) is not None
    assert qwen.SPEC.claims(Path("/home/u/qwen/projects/-p/chats/x.jsonl")) is None
    assert qwen.SPEC.claims(Path("/home/u/.gemini/tmp/x/chats/x.json")) is None
