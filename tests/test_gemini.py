"""Gemini CLI recordings: discovery, turn rules, the JSONL fold ($set / $rewindTo / rewrites), rejections."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from extractors import gemini
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Disposition, LinkKind, Loaded, Rejected, Role, Session, SessionLink
from tests.support import loaded_sessions, outcomes_under, read_one, write_jsonl

META = {
    "sessionId": "s-1",
    "projectHash": "ab" * 32,
    "startTime": "2026-01-02T03:04:05.000Z",
    "lastUpdated": "2026-01-02T03:10:00.000Z",
    "kind": "main",
}


def msg(mid: str, kind: str, content: Any = "", **extra: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-01-02T03:05:00.000Z", "type": kind, "content": content, **extra}


def legacy(path: Path, messages: list[dict[str, Any]], **meta: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {k: v for k, v in META.items() if k != "kind"} | meta | {"messages": messages}
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def one(path: Path) -> Session:
    [session] = loaded_sessions(read_one(Agent("gemini"), path))
    return session


def rejected(path: Path) -> Rejected:
    [outcome] = read_one(Agent("gemini"), path)
    assert isinstance(outcome, Rejected), outcome
    return outcome


# --- roots and discovery -----------------------------------------------------------------------------------------


def test_default_roots_honour_gemini_cli_home(tmp_path: Path) -> None:
    assert gemini.default_roots(tmp_path, {}) == [tmp_path / ".gemini" / "tmp"]
    assert gemini.default_roots(tmp_path, {"GEMINI_CLI_HOME": "/iso"}) == [
        Path("/iso/.gemini/tmp"),
        tmp_path / ".gemini" / "tmp",
    ]


def test_ok_discovers_recordings_but_not_logs_or_checkpoints(tmp_path: Path) -> None:
    chats = tmp_path / "abc123" / "chats"
    legacy(chats / "session-2026-01-02T03-04-aaaaaaaa.json", [msg("m1", "user", "hi")])
    write_jsonl(chats / "session-2026-01-02T03-04-bbbbbbbb.jsonl", [META])
    write_jsonl(chats / "parent-1" / "child-1.jsonl", [META])
    (tmp_path / "abc123" / "logs.json").write_text("[]", encoding="utf-8")
    (tmp_path / "abc123" / "checkpoint-mytag.json").write_text("[]", encoding="utf-8")
    (chats / "notes.json").write_text("{}", encoding="utf-8")
    found = [os.path.relpath(s.path, tmp_path) for s in gemini.discover(tmp_path)]
    assert found == [
        "abc123/chats/parent-1/child-1.jsonl",
        "abc123/chats/session-2026-01-02T03-04-aaaaaaaa.json",
        "abc123/chats/session-2026-01-02T03-04-bbbbbbbb.jsonl",
    ]


# --- turns ----------------------------------------------------------------------------------------------------------


def test_ok_legacy_turns_harness_and_indexes(tmp_path: Path) -> None:
    session = one(
        legacy(
            tmp_path / "chats" / "session-x.json",
            [
                msg("m0", "user", "typed with @a.py expanded", displayContent="typed with @a.py"),
                msg("m1", "info", "Request cancelled."),
                msg(
                    "m2",
                    "gemini",
                    [{"text": "secret plan", "thought": True}, {"text": "Hello "}, {"text": "there"}],
                    thoughts=[{"subject": "s", "description": "private"}],
                    model="gemini-2.5-pro",
                ),
                msg("m3", "gemini", ""),
                msg("m4", "error", "API error"),
                msg("m5", "warning", "careful"),
                msg("m6", "user", [{"text": "plain list content"}]),
            ],
        )
    )
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (0, Role.USER, "typed with @a.py"),
        (2, Role.ASSISTANT, "Hello there"),
        (6, Role.USER, "plain list content"),
    ]
    assert session.turns[1].model == "gemini-2.5-pro" and session.models == ("gemini-2.5-pro",)
    assert "secret plan" not in repr(session) and "private" not in repr(session)
    assert session.census[("message/info", "", Disposition.HARNESS)] == 1
    assert session.census[("message/error", "", Disposition.HARNESS)] == 1
    assert session.session_id == "gemini-s-1"
    assert session.started_at.isoformat() == "2026-01-02T03:04:05+00:00"
    assert session.ended_at is not None and session.ended_at.isoformat() == "2026-01-02T03:10:00+00:00"


def test_ok_inline_data_is_an_attachment_reference(tmp_path: Path) -> None:
    blob = base64.b64encode(bytes(range(256)) * 8).decode()
    session = one(
        legacy(
            tmp_path / "chats" / "session-x.json",
            [
                msg("m0", "user", [{"text": "what is this?"}, {"inlineData": {"mimeType": "image/png", "data": blob}}]),
            ],
        )
    )
    [turn] = session.turns
    assert turn.attachments[0].startswith("image/png sha256:") and turn.attachments[0].endswith(f"{len(blob)} bytes")
    assert blob[:40] not in repr(session)


def test_ok_tool_calls_and_usage(tmp_path: Path) -> None:
    calls = [
        {
            "id": "c1",
            "name": "read_file",
            "args": {"path": "a"},
            "status": "success",
            "timestamp": "2026-01-02T03:05:01.000Z",
            "result": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "file body"}}}],
        },
        {
            "id": "c2",
            "name": "run_shell_command",
            "args": {"command": "false"},
            "status": "error",
            "result": [
                {"functionResponse": {"id": "c2", "name": "run_shell_command", "response": {"error": "exit 1"}}}
            ],
        },
        {"id": "c3", "name": "write_file", "args": {}, "status": "cancelled", "result": None},
    ]
    tokens = {"input": 1000, "output": 50, "cached": 600, "thoughts": 30, "tool": 5, "total": 1085}
    session = one(
        legacy(
            tmp_path / "chats" / "session-x.json",
            [
                msg("m0", "user", "go"),
                msg("m1", "gemini", "", toolCalls=calls, tokens=tokens, model="gemini-2.5-flash"),
            ],
        )
    )
    c1, c2, c3 = session.tool_calls
    assert (c1.call_id, c1.turn_index, c1.name, c1.input, c1.output, c1.is_error) == (
        "c1",
        1,
        "read_file",
        '{"path":"a"}',
        "file body",
        False,
    )
    assert c1.started_at is not None
    assert (c2.is_error, c2.output) == (True, "exit 1")
    assert (c3.is_error, c3.output) == (None, None)
    [usage] = session.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens, usage.reasoning_tokens) == (
        405,
        600,
        50,
        30,
    )
    assert (usage.turn_index, usage.model, usage.response_id) == (1, "gemini-2.5-flash", "m1")
    assert [t.role for t in session.turns] == [Role.USER]  # a gemini message with only tool calls is no turn


def test_reject_duplicate_legacy_json_continued_in_jsonl(tmp_path: Path) -> None:
    path = legacy(tmp_path / "chats" / "session-x.json", [msg("m0", "user", "hi")])
    write_jsonl(tmp_path / "chats" / "session-x.jsonl", [META, msg("m0", "user", "hi")])
    outcome = rejected(path)
    assert outcome.code is RejectCode.DUPLICATE
    assert len(loaded_sessions(read_one(Agent("gemini"), tmp_path / "chats" / "session-x.jsonl"))) == 1


# --- the JSONL fold -------------------------------------------------------------------------------------------------


def test_ok_jsonl_rewritten_message_last_version_wins_at_first_position(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / "s.jsonl",
        [
            META,  # 0
            msg("u1", "user", "question"),  # 1
            msg("g1", "gemini", "draft"),  # 2
            {"$set": {"lastUpdated": "2026-01-02T03:20:00.000Z"}},  # 3
            msg("u2", "user", "second question"),  # 4
            msg("g1", "gemini", "final answer", tokens={"input": 10, "output": 2, "cached": 0}),  # 5
        ],
    )
    session = one(path)
    assert [(t.index, t.text) for t in session.turns] == [(1, "question"), (2, "final answer"), (4, "second question")]
    assert [u.turn_index for u in session.usage] == [2]
    assert session.ended_at is not None and session.ended_at.isoformat() == "2026-01-02T03:20:00+00:00"
    assert session.census[("message/gemini/superseded", "", Disposition.SKIPPED)] == 1
    assert sum(session.census.values()) == 6  # every line counted once


def test_ok_jsonl_rewind_drops_the_target_and_what_follows(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / "s.jsonl",
        [
            META,
            msg("u1", "user", "keep me"),
            msg("g1", "gemini", "kept answer"),
            msg("u2", "user", "rewound question"),
            msg("g2", "gemini", "rewound answer"),
            {"$rewindTo": "u2"},
            msg("u3", "user", "new question"),
        ],
    )
    session = one(path)
    assert [(t.index, t.text) for t in session.turns] == [(1, "keep me"), (2, "kept answer"), (6, "new question")]
    assert session.census[("message/user/removed", "", Disposition.SKIPPED)] == 1
    assert session.census[("$rewindTo", "", Disposition.METADATA)] == 1


def test_ok_jsonl_rewind_to_unknown_id_clears_history_like_gemini(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / "s.jsonl",
        [META, msg("u1", "user", "gone"), {"$rewindTo": "nope"}, msg("u2", "user", "after")],
    )
    assert [t.text for t in one(path).turns] == ["after"]


def test_ok_jsonl_set_messages_replaces_history(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / "s.jsonl",
        [
            META,
            msg("u1", "user", "first question"),
            msg("g1", "gemini", "first answer"),
            msg("u2", "user", "second question"),
            {
                "$set": {
                    "messages": [
                        msg("sum", "user", "<state_snapshot>compressed summary</state_snapshot>"),
                        msg("u2", "user", "second question"),
                    ]
                }
            },
            msg("g2", "gemini", "second answer"),
        ],
    )
    session = one(path)
    # u1/g1 were replaced away; `sum` only ever lived inside $set.messages (harness-made): not a turn
    assert [(t.index, t.text) for t in session.turns] == [(3, "second question"), (5, "second answer")]
    assert "compressed summary" not in repr(session)


def test_ok_jsonl_unknown_record_kind_is_skipped_and_counted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [META, {"$future": 1}, msg("u1", "user", "hi")])
    session = one(path)
    assert session.census[("unknown", "", Disposition.SKIPPED)] == 1 and len(session.turns) == 1


def test_ok_subagent_recording_links_to_parent_from_its_path(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / "parent-uuid" / "child-uuid.jsonl",
        [META | {"sessionId": "child-uuid", "kind": "subagent"}, msg("u1", "user", "delegated task")],
    )
    session = one(path)
    assert session.session_id == "gemini-parent-uuid-agent-child-uuid"
    assert session.parent_session_id == "gemini-parent-uuid"
    assert session.links == (SessionLink("gemini-parent-uuid", LinkKind.SUBAGENT),)


def test_ok_start_falls_back_to_the_earliest_message(tmp_path: Path) -> None:
    meta = {k: v for k, v in META.items() if k not in ("startTime", "lastUpdated")}
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [meta, msg("u1", "user", "hi")])
    assert one(path).started_at.isoformat() == "2026-01-02T03:05:00+00:00"


def test_reject_missing_timestamp_nowhere(tmp_path: Path) -> None:
    meta = {k: v for k, v in META.items() if k not in ("startTime", "lastUpdated")}
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [meta, {"id": "u1", "type": "user", "content": "hi"}])
    assert rejected(path).code is RejectCode.MISSING_TIMESTAMP


def test_reject_missing_session_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [msg("u1", "user", "hi")])
    assert rejected(path).code is RejectCode.MISSING_SESSION_ID
    assert rejected(legacy(tmp_path / "chats" / "session-x.json", [], sessionId=None)).code is (
        RejectCode.MISSING_SESSION_ID
    )


def test_reject_inconsistent_source_two_session_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [META, msg("u1", "user", "hi"), {"$set": {"sessionId": "s-2"}}])
    outcome = rejected(path)
    assert (outcome.code, outcome.line) == (RejectCode.INCONSISTENT_SOURCE, 2)


def test_reject_bad_shape_message_without_type(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [META, {"id": "u1", "content": "hi"}])
    assert rejected(path).code is RejectCode.BAD_SHAPE
    assert rejected(legacy(tmp_path / "chats" / "session-x.json", [{"type": "user"}])).code is RejectCode.BAD_SHAPE


def test_reject_bad_shape_legacy_without_messages_list(tmp_path: Path) -> None:
    path = tmp_path / "chats" / "session-x.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"sessionId": "s", "messages": {}}), encoding="utf-8")
    assert rejected(path).code is RejectCode.BAD_SHAPE


def test_reject_invalid_json_before_the_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [json.dumps(META), '{"id": "u1", "type": ', json.dumps(META)])
    outcome = rejected(path)
    assert (outcome.code, outcome.line) == (RejectCode.INVALID_JSON, 1)


def test_defer_write_in_progress_partial_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats" / "s.jsonl", [json.dumps(META), '{"id": "u1", "ty'], newline_at_end=False)
    [outcome] = read_one(Agent("gemini"), path, Limits(settle_seconds=3600))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.WRITE_IN_PROGRESS
    old = time.time() - 7200
    os.utime(path, (old, old))
    [late] = read_one(Agent("gemini"), path, Limits(settle_seconds=3600))
    assert isinstance(late, Rejected) and late.code is RejectCode.TRUNCATED_TAIL


def test_reject_limit_exceeded_too_many_legacy_messages(tmp_path: Path) -> None:
    path = legacy(tmp_path / "chats" / "session-x.json", [msg(f"m{i}", "user", "x") for i in range(5)])
    [outcome] = read_one(Agent("gemini"), path, Limits(settle_seconds=0, max_records=4))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


def test_ok_outcomes_under_a_project_tree(tmp_path: Path) -> None:
    legacy(tmp_path / "p" / "chats" / "session-x.json", [msg("m0", "user", "hi")])
    outcomes = outcomes_under(Agent("gemini"), tmp_path)
    assert [type(o) for o in outcomes["p/chats/session-x.json"]] == [Loaded]


def test_ok_odd_tool_results_are_text_not_crashes(tmp_path: Path) -> None:
    calls = [
        {"id": "c1", "name": "t", "status": "success", "result": [{"functionResponse": "not an object"}]},
        {"id": "c2", "name": "t", "status": "success", "result": "plain text result"},
        {"id": "c3", "name": "t", "status": "success", "result": {"text": "one part"}},
        {"id": "c4", "name": "t", "status": "success", "result": [{"functionResponse": {"response": {"n": 1}}}]},
    ]
    session = one(legacy(tmp_path / "chats" / "session-x.json", [msg("m1", "gemini", "", toolCalls=calls)]))
    assert [c.output for c in session.tool_calls] == [
        '{"functionResponse":"not an object"}',
        "plain text result",
        "one part",
        '{"functionResponse":{"response":{"n":1}}}',
    ]


def test_ok_integers_past_64_bits_in_tool_args_do_not_crash(tmp_path: Path) -> None:
    # NaN sends the document through bounded.parse_json's stdlib fallback, which keeps the exact big integer
    # (orjson would read it as a float); orjson.dumps then refuses it and the stdlib writes it.
    path = tmp_path / "chats" / "session-x.json"
    path.parent.mkdir(parents=True)
    call = '{"id": "c1", "name": "t", "status": "success", "args": {"n": 123456789012345678901234567890, "x": NaN}}'
    path.write_text(
        '{"sessionId": "s", "startTime": "2026-01-01T00:00:00Z", "messages": '
        f'[{{"id": "m", "type": "gemini", "content": "", "toolCalls": [{call}]}}]}}',
        encoding="utf-8",
    )
    [tool_call] = one(path).tool_calls
    assert tool_call.input == '{"n":123456789012345678901234567890,"x":NaN}'


# --- text Gemini CLI writes as the user (USER_INJECTIONS) ------------------------------------------------------------

PROMPT = msg("u0", "user", "fix the failing test")
REPLY = msg("g1", "gemini", "Looking at it.")


@pytest.mark.parametrize(
    ("fixture", "content", "name"),
    [
        ("ok_harness_next_speaker_please_continue", "Please continue.", "next_speaker"),
        ("ok_harness_invalid_stream_retry", [{"text": "System: Please continue."}], "invalid_stream_retry"),
        (
            "ok_harness_loop_recovery",
            "System: Potential loop detected. Details: Repeated tool call: read_file. Please take a step back.",
            "loop_recovery",
        ),
        (
            "ok_harness_ide_context_full",
            "Here is the user's editor context as a JSON object. This is for your information only.\n```json\n{}\n```",
            "ide_context",
        ),
        (
            "ok_harness_ide_context_delta",
            "Here is a summary of changes in the user's editor context, in JSON format. This is for your information "
            'only.\n```json\n{"changes": {}}\n```',
            "ide_context",
        ),
        (
            "ok_harness_compression_summary",
            "<state_snapshot>\n<overall_goal>x</overall_goal>\n</state_snapshot>",
            "compression_summary",
        ),
        (
            "ok_harness_session_context_tagged",
            [
                {
                    "text": "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                    "My operating system is: linux\n</session_context>"
                }
            ],
            "session_context",
        ),
        (
            "ok_harness_session_context_untagged",
            "This is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Monday.",
            "session_context",
        ),
        ("ok_harness_hook_context_only", [{"text": "<hook_context>branch: main</hook_context>"}], "hook_context"),
    ],
)
def test_injected_user_text_is_harness_not_a_turn(tmp_path: Path, fixture: str, content: Any, name: str) -> None:
    for path in (
        legacy(
            tmp_path / fixture / "chats" / "session-x.json",
            [PROMPT, REPLY, msg("u2", "user", content), REPLY | {"id": "g3"}],
        ),
        write_jsonl(
            tmp_path / fixture / "chats" / "session-y.jsonl",
            [META, PROMPT, REPLY, msg("u2", "user", content), REPLY | {"id": "g3"}],
        ),
    ):
        session = one(path)
        assert [(t.index, t.role, t.text) for t in session.turns] == [
            (PROMPT_INDEX[path.suffix], Role.USER, "fix the failing test"),
            (PROMPT_INDEX[path.suffix] + 1, Role.ASSISTANT, "Looking at it."),
            (PROMPT_INDEX[path.suffix] + 3, Role.ASSISTANT, "Looking at it."),
        ], path
        assert session.census[(f"message/user/{name}", "", Disposition.HARNESS)] == 1
        assert session.census[("message/user", "", Disposition.TURN)] == 1


PROMPT_INDEX = {".json": 0, ".jsonl": 1}  # JSONL indexes are line numbers: line 0 is the metadata record


def test_ok_harness_retry_carrying_the_previous_display_content_does_not_double_the_prompt(tmp_path: Path) -> None:
    # Newer GEM passes the person's displayContent on into its recursive "System: Please continue." request; read
    # by displayContent, the person's prompt would appear twice.
    retry = msg("u2", "user", [{"text": "System: Please continue."}], displayContent=[{"text": "fix the failing test"}])
    session = one(write_jsonl(tmp_path / "chats" / "s.jsonl", [META, PROMPT, REPLY, retry]))
    assert [t.text for t in session.turns if t.role is Role.USER] == ["fix the failing test"]
    assert session.census[("message/user/invalid_stream_retry", "", Disposition.HARNESS)] == 1


def test_ok_person_text_that_only_resembles_an_injection_is_a_turn(tmp_path: Path) -> None:
    texts = ["Please continue. And add tests.", "please continue", "Here is the user's editor", "System: hi"]
    session = one(
        write_jsonl(tmp_path / "chats" / "s.jsonl", [META, *(msg(f"u{i}", "user", t) for i, t in enumerate(texts))])
    )
    assert [t.text for t in session.turns] == texts


def test_ok_hook_context_part_is_cut_out_of_the_prompt(tmp_path: Path) -> None:
    record = msg("u1", "user", [{"text": "deploy it"}, {"text": "<hook_context>on-call: ana</hook_context>"}])
    session = one(write_jsonl(tmp_path / "chats" / "s.jsonl", [META, record]))
    assert [(t.index, t.text) for t in session.turns] == [(1, "deploy it")]
    assert session.census[("message/user", "", Disposition.TURN)] == 1


def test_ok_session_context_block_before_a_prompt_in_one_message_leaves_the_prompt(tmp_path: Path) -> None:
    block = "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"
    record = msg("u1", "user", [{"text": block}, {"text": "\nwhy does the build fail?"}])
    session = one(write_jsonl(tmp_path / "chats" / "s.jsonl", [META, record]))
    assert [t.text for t in session.turns] == ["\nwhy does the build fail?"]
    assert "setting up the context" not in repr(session.turns)


def test_ok_harness_subagent_task_is_not_a_person_turn(tmp_path: Path) -> None:
    nested = write_jsonl(
        tmp_path / "chats" / "parent-uuid" / "child-uuid.jsonl",
        [META | {"sessionId": "child-uuid"}, msg("u1", "user", "Investigate the auth module"), REPLY],
    )
    flagged = legacy(
        tmp_path / "other" / "chats" / "session-z.json",
        [msg("u1", "user", "Investigate the auth module"), REPLY],
        kind="subagent",
    )
    for path in (nested, flagged):
        session = one(path)
        assert [t.role for t in session.turns] == [Role.ASSISTANT], path
        assert session.census[("message/user/subagent_prompt", "", Disposition.HARNESS)] == 1


def test_ok_referenced_file_contents_are_cut_when_there_is_no_display_content(tmp_path: Path) -> None:
    # Older builds record only what was sent; the @-file bodies are not the person's words (GEM's rewind viewer cuts
    # them the same way). With displayContent, that is what the person typed.
    block = "\n--- Content from referenced files ---\nContent from @a.py:\nprint(1)\n--- End of content ---"
    unterminated = "and @b.py\n--- Content from referenced files ---\nContent from @b.py:\nx = 2\n"
    records = [
        META,
        msg("u1", "user", [{"text": "explain @a.py please"}, {"text": block}]),
        msg("u2", "user", unterminated),
        msg("u3", "user", "explain @a.py" + block, displayContent="explain @a.py please!"),
    ]
    session = one(write_jsonl(tmp_path / "chats" / "s.jsonl", records))
    assert [t.text for t in session.turns] == ["explain @a.py please", "and @b.py", "explain @a.py please!"]
    assert "print(1)" not in repr(session.turns)
    assert session.census[("message/user", "", Disposition.TURN)] == 3
