"""Claude Code: queued prompts, slash commands recorded twice, and records glued onto one line (issue 9, 1-3).

Each file is hand-written after the shape of a real capture (named per test); the records are built with
tests/claude_records.py. Every test here fails on the reader before these rules (queued prompts were skipped, a
doubled command gave two turns, a glued line rejected the whole session).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors.bounded import GLUED_LINE_KIND, glued_index
from extractors.claude import tables
from extractors.ids import stable_hash
from extractors.model import Disposition, Role
from tests.claude_records import SID, assistant, envelope, load, said, text, tool_result, tool_use, user

T0 = "2026-02-10T22:57:54.000Z"
T1 = "2026-02-10T22:57:57.000Z"
T_ENQ = "2026-02-10T22:57:58.381Z"
T_OUT = "2026-02-10T22:57:59.116Z"
T2 = "2026-02-10T22:58:02.000Z"
T3 = "2026-02-10T22:58:08.126Z"
T_LATE = "2026-02-10T23:30:00.000Z"


def queue(operation: str, ts: str | None = T_OUT, **extra: Any) -> dict[str, Any]:
    """A queue-operation line as v2.1.38 writes it (no envelope: type, operation, timestamp, sessionId, content?)."""
    record: dict[str, Any] = {"type": "queue-operation", "operation": operation, "sessionId": SID}
    if ts is not None:
        record["timestamp"] = ts
    record.update(extra)
    return record


def enqueue(content: Any, ts: str | None = T_ENQ) -> dict[str, Any]:
    return queue("enqueue", ts, content=content)


def busy(prompt: str = "start phoenix in background") -> list[dict[str, Any]]:
    """A prompt whose answer is a tool call still running: lines 0-1 (SPOTTER tool_heavy l.3-4)."""
    return [
        user(prompt, ts=T0),
        assistant([tool_use("toolu_1", command="mix phx.server")], msg_id="msg_a", ts=T1),
    ]


def answer(msg_id: str = "msg_b", ts: str = T2) -> list[dict[str, Any]]:
    """The tool result and the model's reply after it."""
    return [
        user([tool_result("toolu_1", "running")], ts=T_OUT, toolUseResult={"stdout": ""}),
        assistant([text("Done, and the README too.")], msg_id=msg_id, ts=ts),
    ]


def kinds(session: Any) -> dict[str, int]:
    return {kind: n for (kind, _, _), n in session.census.items() if kind.startswith(tables.QUEUE_TYPE)}


# --- queued prompts -------------------------------------------------------------------------------------------------


def test_ok_removed_queued_prompt_never_written_again_is_a_turn_at_the_enqueue(tmp_path: Path) -> None:
    # 2.1.x mid-turn delivery: enqueue, remove, and no user line with the text (issue 9.1, 66 prompts in 34 sessions).
    records = [*busy(), enqueue("also update the README"), queue("remove"), *answer()]
    session = load(tmp_path, "ok_queued_prompt_delivered_as_turn.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "also update the README")]
    [queued] = [t for t in session.turns if t.index == 2]
    assert queued.timestamp == datetime(2026, 2, 10, 22, 57, 58, 381000, tzinfo=UTC)  # the enqueue's own time
    assert session.census[(tables.QUEUE_DELIVERED_AS_TURN, "", Disposition.TURN)] == 1
    assert session.census[("queue-operation/remove", "", Disposition.SKIPPED)] == 1
    assert sum(session.census.values()) == len(records)


def test_ok_absorbed_mid_turn_prompt_with_its_queued_command_attachment_is_one_turn(tmp_path: Path) -> None:
    # Newer CLIs: remove with a reason, then an attachment of type queued_command carrying the same prompt.
    records = [
        *busy(),
        enqueue("what's 2+2?"),
        queue("remove", reason="absorbed_mid_turn", content="what's 2+2?"),
        envelope(
            "attachment",
            ts=T_OUT,
            attachment={"type": "queued_command", "prompt": "what's 2+2?", "commandMode": "prompt"},
        ),
        *answer(),
    ]
    session = load(tmp_path, "ok_absorbed_mid_turn_prompt.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "what's 2+2?")]


def test_ok_dequeued_prompt_written_as_a_user_line_is_one_turn_the_user_lines(tmp_path: Path) -> None:
    # CODEMIE session-196820da.jsonl l.133-137 (v2.0.76): enqueue, assistant, dequeue, the same text as a user line.
    records = [
        *busy(),
        enqueue("don't produce code, design solution first"),
        assistant([text("Right, the wrapper is ours.")], msg_id="msg_b", ts=T_OUT),
        queue("dequeue"),
        user("don't produce code, design solution first", ts="2026-02-10T22:57:59.130Z"),
    ]
    session = load(tmp_path, "ok_dequeued_prompt_matched.jsonl", records)
    prompt = "don't produce code, design solution first"
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (5, prompt)]
    assert kinds(session) == {tables.QUEUE_MATCHED: 1, "queue-operation/dequeue": 1}


@pytest.mark.parametrize("user_line_first", [False, True], ids=["remove_then_user_line", "user_line_then_remove"])
def test_ok_removed_prompt_also_written_as_a_user_line_is_one_turn_in_either_order(
    tmp_path: Path, user_line_first: bool
) -> None:
    typed = user("  also update the README\n", ts=T_OUT)
    removed = queue("remove", content="also update the README")
    closing = [typed, removed] if user_line_first else [removed, typed]
    records = [*busy(), enqueue("also update the README"), *closing, *answer()]
    session = load(tmp_path, "ok_removed_prompt_matched.jsonl", records)
    where = 3 if user_line_first else 4
    # The user line's turn, its text as written (the match ignores whitespace at the ends).
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (where, "  also update the README\n")]
    assert session.census[(tables.QUEUE_MATCHED, "", Disposition.SKIPPED)] == 1


def test_ok_queued_slash_command_that_runs_and_is_recorded_twice_is_one_turn(tmp_path: Path) -> None:
    # SPOTTER tool_heavy.jsonl (v2.1.38), l.9-24: "/mcp" queued and removed while a tool ran; after an interrupt
    # it runs: caveat, the user command line, its stdout, the same command as a system line, its stdout.
    wrapper = "<command-name>/mcp</command-name>\n            <command-message>mcp</command-message>\n" + (
        "            <command-args></command-args>"
    )
    records = [
        *busy(),
        enqueue("/mcp"),
        queue("remove", ts="2026-02-10T22:57:59.116Z"),
        user([tool_result("toolu_1", "Command running in background")], ts=T_OUT, toolUseResult={"stdout": ""}),
        user([text("[Request interrupted by user]")], ts="2026-02-10T22:58:03.831Z"),
        user("<local-command-caveat>Caveat: ...</local-command-caveat>", isMeta=True, ts=T3),
        user(wrapper, ts=T3),
        user("<local-command-stdout>Reconnected to tidewave.</local-command-stdout>", ts=T3),
        envelope("system", subtype="local_command", content=wrapper, level="info", ts="2026-02-10T22:58:11.673Z"),
        envelope(
            "system",
            subtype="local_command",
            content="<local-command-stdout>MCP dialog dismissed</local-command-stdout>",
            ts="2026-02-10T22:58:11.673Z",
        ),
        user("scrolling back in xterm.js still does not work", ts="2026-02-10T22:59:22.893Z"),
    ]
    session = load(tmp_path, "ok_queued_command_recorded_twice.jsonl", records)
    assert said(session, Role.USER) == [
        (0, "start phoenix in background"),
        (7, "/mcp"),
        (11, "scrolling back in xterm.js still does not work"),
    ]
    assert session.census[(tables.QUEUE_MATCHED, "", Disposition.SKIPPED)] == 1
    assert session.census[(tables.DOUBLED_COMMAND_KIND, "2.1.38", Disposition.SKIPPED)] == 1
    assert sum(session.census.values()) == len(records)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (
            "<task-notification>\n<task-id>bae407b</task-id>\n<status>completed</status>\n</task-notification>",
            "task-notification",
        ),
        ("<system-reminder>hook context</system-reminder>", "system-reminder"),
        ("   ", "empty"),
    ],
)
def test_ok_queued_harness_text_is_not_a_turn(tmp_path: Path, content: str, kind: str) -> None:
    records = [*busy(), enqueue(content), queue("remove", reason="absorbed_mid_turn"), *answer()]
    session = load(tmp_path, "ok_queued_task_notification.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background")]
    assert kinds(session)[f"queue-operation/{kind}"] == 1


def test_ok_withdrawn_prompt_is_not_a_turn_and_its_edited_resend_is_its_own(tmp_path: Path) -> None:
    # popAll: the person pressed Up and took the queued prompts back into the input box.
    records = [*busy(), enqueue("fix teh tests"), enqueue("and lint"), queue("popAll"), *answer()]
    records.append(user("fix the tests and lint", ts="2026-02-10T22:58:30.000Z"))
    session = load(tmp_path, "ok_withdrawn_prompts.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (7, "fix the tests and lint")]
    assert kinds(session) == {tables.QUEUE_NOT_DELIVERED: 2, "queue-operation/popAll": 1}


def test_ok_remove_into_a_subagents_queue_is_not_this_sessions_turn(tmp_path: Path) -> None:
    records = [*busy(), enqueue("check the logs"), queue("remove", reason="delivered_to_agent"), *answer()]
    session = load(tmp_path, "ok_remove_delivered_to_agent.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background")]
    assert kinds(session)[tables.QUEUE_NOT_DELIVERED] == 1


def test_ok_prompt_still_queued_when_the_file_ends_is_not_a_turn_yet(tmp_path: Path) -> None:
    records = [*busy(), enqueue("and then deploy")]
    session = load(tmp_path, "ok_queued_prompt_pending.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background")]
    assert kinds(session) == {tables.QUEUE_PENDING: 1}


def test_ok_fifo_each_operation_takes_the_oldest_waiting_or_the_one_it_names(tmp_path: Path) -> None:
    records = [
        *busy(),
        enqueue("first"),  # 2
        enqueue("second"),  # 3
        queue("remove", content="second"),  # 4: names its prompt
        queue("dequeue"),  # 5: takes the oldest still waiting, "first"
        user("first", ts="2026-02-10T22:57:59.150Z"),  # 6
    ]
    session = load(tmp_path, "ok_queue_fifo.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (3, "second"), (6, "first")]


def test_ok_same_text_typed_long_after_the_delivery_is_a_second_turn(tmp_path: Path) -> None:
    # "continue" absorbed mid-turn, then typed again half an hour later: the person said it twice.
    records = [*busy(), enqueue("continue"), queue("remove"), *answer(), user("continue", ts=T_LATE)]
    session = load(tmp_path, "ok_same_text_later_is_its_own_turn.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "continue"), (6, "continue")]


def test_ok_same_text_typed_before_the_enqueue_is_not_its_record(tmp_path: Path) -> None:
    records = [user("continue", ts=T0), assistant([tool_use("toolu_1")], msg_id="m", ts=T1)]
    records += [enqueue("continue"), queue("remove"), *answer()]
    session = load(tmp_path, "ok_earlier_same_text.jsonl", records)
    assert said(session, Role.USER) == [(0, "continue"), (2, "continue")]


def test_ok_two_identical_queued_prompts_match_one_user_line_each(tmp_path: Path) -> None:
    records = [*busy(), enqueue("yes"), enqueue("yes"), queue("dequeue"), user("yes", ts=T_OUT), queue("remove")]
    session = load(tmp_path, "ok_identical_queued_prompts.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (3, "yes"), (5, "yes")]


def test_ok_queue_lines_without_timestamps_match_by_order_and_text(tmp_path: Path) -> None:
    records = [*busy(), enqueue("go on", ts=None), queue("dequeue", ts=None), user("go on", ts=T_LATE)]
    session = load(tmp_path, "ok_untimed_queue.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (4, "go on")]


def test_ok_queued_prompts_in_a_subagent_file_are_never_a_persons(tmp_path: Path) -> None:
    records = [
        user("Explore the repo", isSidechain=True, ts=T0),
        assistant([text("Found it.")], isSidechain=True, ts=T1),
        enqueue("x"),
        queue("remove"),
    ]
    session = load(tmp_path, f"{SID}/subagents/agent-a1.jsonl", records)
    assert said(session, Role.USER) == []
    assert kinds(session)["queue-operation/subagent_prompt"] == 1


def test_ok_unknown_queue_operation_is_counted_and_closes_nothing(tmp_path: Path) -> None:
    records = [*busy(), enqueue("later"), queue("peek"), queue("remove"), *answer()]
    session = load(tmp_path, "ok_unknown_queue_operation.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "later")]
    assert kinds(session)["queue-operation/peek"] == 1


# --- a slash command recorded twice ---------------------------------------------------------------------------------

_MCP = "<command-name>/mcp</command-name>\n<command-message>mcp</command-message>\n<command-args></command-args>"


def _system_command(content: str, ts: str) -> dict[str, Any]:
    return envelope("system", subtype="local_command", content=content, level="info", ts=ts)


def test_ok_command_as_user_line_then_system_line_is_one_turn_with_the_user_lines_index_and_time(
    tmp_path: Path,
) -> None:
    records = [
        user(_MCP, ts=T3),
        user("<local-command-stdout>Reconnected to tidewave.</local-command-stdout>", ts=T3),
        _system_command(_MCP, "2026-02-10T22:58:11.673Z"),
        _system_command("<local-command-stdout>MCP dialog dismissed</local-command-stdout>", T3),
        user("next", ts=T_LATE),
    ]
    session = load(tmp_path, "ok_command_recorded_twice.jsonl", records)
    assert said(session, Role.USER) == [(0, "/mcp"), (4, "next")]
    assert session.turns[0].timestamp == datetime(2026, 2, 10, 22, 58, 8, 126000, tzinfo=UTC)
    assert session.census[(tables.DOUBLED_COMMAND_KIND, "2.1.38", Disposition.SKIPPED)] == 1


def test_ok_command_run_twice_with_an_answer_between_is_two_turns(tmp_path: Path) -> None:
    records = [
        user(_MCP, ts=T0),
        assistant([text("MCP servers listed.")], ts=T1),
        _system_command(_MCP, T2),
    ]
    session = load(tmp_path, "ok_command_run_twice.jsonl", records)
    assert said(session, Role.USER) == [(0, "/mcp"), (2, "/mcp")]


def test_ok_two_system_command_lines_are_two_runs(tmp_path: Path) -> None:
    records = [_system_command(_MCP, T0), _system_command(_MCP, T1), user("ok", ts=T2)]
    session = load(tmp_path, "ok_system_command_twice.jsonl", records)
    assert said(session, Role.USER) == [(0, "/mcp"), (1, "/mcp"), (2, "ok")]


def test_ok_other_command_after_a_user_command_is_its_own_turn(tmp_path: Path) -> None:
    model = _MCP.replace("mcp", "model")
    records = [user(_MCP, ts=T0), _system_command(model, T1), user("ok", ts=T2)]
    session = load(tmp_path, "ok_two_commands.jsonl", records)
    assert said(session, Role.USER) == [(0, "/mcp"), (1, "/model"), (2, "ok")]


# --- records glued onto one line ------------------------------------------------------------------------------------


def test_ok_glued_records_load_and_every_other_turn_keeps_its_index(tmp_path: Path) -> None:
    # About one real session in fifty: two complete records on one line, e.g. an assistant message and a summary.
    head = [user("q1", ts=T0), assistant([text("a1")], msg_id="m1", ts=T1)]
    glued = json.dumps(assistant([text("a2")], msg_id="m2", ts=T2)) + json.dumps(user("q3", ts=T3))
    tail = [user("q4", ts=T_LATE)]
    lines = [json.dumps(r) for r in head] + [glued] + [json.dumps(r) for r in tail]
    session = load(tmp_path, "ok_glued_records.jsonl", lines)
    assert [(t.index, t.role, t.text) for t in sorted(session.turns, key=lambda t: t.timestamp or 0)] == [
        (0, Role.USER, "q1"),
        (1, Role.ASSISTANT, "a1"),
        (2, Role.ASSISTANT, "a2"),
        (glued_index(2, 1), Role.USER, "q3"),
        (3, Role.USER, "q4"),
    ]
    assert session.census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] == 1
    assert sum(session.census.values()) == 5 + 1  # every record once, plus the one glued line


def test_ok_progress_and_summary_glued_is_not_a_turn(tmp_path: Path) -> None:
    glued = json.dumps(envelope("progress", data={"type": "hook_progress"})) + json.dumps(
        {"type": "summary", "summary": "t", "leafUuid": "elsewhere"}
    )
    lines = [json.dumps(user("q", ts=T0)), glued, json.dumps(assistant([text("a")], ts=T1))]
    session = load(tmp_path, "ok_glued_progress_summary.jsonl", lines)
    assert [(t.index, t.text) for t in session.turns] == [(0, "q"), (2, "a")]


def test_ok_remove_naming_its_prompt_with_nothing_queued_stands_for_its_enqueue(tmp_path: Path) -> None:
    # claude-code-log test data (session_id_steering_order.jsonl): a steering `remove` with content, no enqueue.
    records = [*busy(), queue("remove", content="actually, focus on the parser first"), *answer()]
    session = load(tmp_path, "ok_remove_without_enqueue.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "actually, focus on the parser first")]
    assert session.census[(tables.QUEUE_DELIVERED_AS_TURN, "", Disposition.TURN)] == 1


def test_ok_enqueue_without_content_is_counted_as_empty(tmp_path: Path) -> None:
    records = [*busy(), queue("enqueue"), queue("remove"), *answer()]
    session = load(tmp_path, "ok_enqueue_without_content.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background")]
    assert session.census[("queue-operation/empty", "", Disposition.SKIPPED)] == 1


def _queued_command(prompt: Any) -> dict[str, Any]:
    return envelope("attachment", ts=T_OUT, attachment={"type": "queued_command", "prompt": prompt})


def test_ok_in_a_cli_that_writes_queued_command_attachments_a_remove_without_one_is_the_x(tmp_path: Path) -> None:
    # tugtool's survey of 2.1.133-2.1.177: remove + queued_command attachment is a delivery; a remove alone, the x.
    records = [
        *busy(),
        enqueue("what's 2+2?"),  # 2
        queue("remove"),
        _queued_command("what's 2+2?"),
        enqueue("never mind that"),  # 5
        queue("remove"),
        *answer(),
    ]
    session = load(tmp_path, "ok_remove_without_attachment_is_withdrawn.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "what's 2+2?")]
    assert kinds(session)[tables.QUEUE_NOT_DELIVERED] == 1
    assert session.census[("attachment/queued_command", "2.1.38", Disposition.SKIPPED)] == 1


def test_ok_queued_command_attachment_with_content_blocks_vouches_for_its_prompt(tmp_path: Path) -> None:
    records = [*busy(), enqueue("look at this"), _queued_command([text("look at this")]), queue("remove"), *answer()]
    session = load(tmp_path, "ok_attachment_blocks.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "look at this")]


def test_ok_dequeued_prompt_is_never_a_turn_of_its_own_even_when_its_user_line_reads_differently(
    tmp_path: Path,
) -> None:
    # The idle path: the CLI writes the prompt again as the next user line, here with the paste expanded.
    records = [*busy(), *answer(), enqueue("fix this: [Pasted text #1 +3 lines]"), queue("dequeue")]
    records.append(user("fix this: Traceback (most recent call last):\n  File ...", ts="2026-02-10T22:58:02.040Z"))
    session = load(tmp_path, "ok_dequeued_prompt_rewritten.jsonl", records)
    assert said(session, Role.USER) == [
        (0, "start phoenix in background"),
        (6, "fix this: Traceback (most recent call last):\n  File ..."),
    ]
    assert kinds(session)[tables.QUEUE_WRITTEN_AGAIN] == 1


def test_ok_queued_prompt_with_an_image_is_vouched_for_by_its_attachment(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    prompt = [image, text("look at this")]
    records = [*busy(), enqueue(prompt), queue("remove"), _queued_command(prompt), *answer()]
    session = load(tmp_path, "ok_queued_prompt_with_image.jsonl", records)
    assert said(session, Role.USER) == [(0, "start phoenix in background"), (2, "look at this")]
    [queued] = [t for t in session.turns if t.index == 2]
    assert queued.attachments == ("image/png sha256:" + stable_hash("AAAA") + " 3 bytes",)
