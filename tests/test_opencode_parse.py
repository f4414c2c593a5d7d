"""OpenCode turn rules (message-v2 model): who said what, tools, usage, links, census."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from extractors.errors import RejectCode
from extractors.model import Disposition, LinkKind, Rejected, Role, Session, SessionLink
from extractors.opencode.records import SYNTHETIC_TEXTS
from tests.opencode_support import T0, add_message, add_part, add_session, assistant, create_db, text, user
from tests.support import loaded_sessions
from tests.test_opencode_db import read_db


def one_session(
    tmp_path: Path, messages: list[tuple[str, int, dict[str, Any], list[dict[str, Any]]]], **session: Any
) -> Session:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_1", **session)
    for mid, created, data, parts in messages:
        add_message(conn, "ses_1", mid, created, data)
        for i, part in enumerate(parts):
            add_part(conn, "ses_1", mid, f"{mid}_p{i}", part)
    conn.close()
    [found] = loaded_sessions(read_db(db))
    return found


def outcome_of(tmp_path: Path, data: dict[str, Any] | str, parts: list[dict[str, Any] | str]) -> list[Any]:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_1")
    add_message(conn, "ses_1", "m1", T0, data)
    for i, part in enumerate(parts):
        add_part(conn, "ses_1", "m1", f"p{i}", part)
    conn.close()
    return read_db(db)


def test_ok_user_text_excludes_synthetic_and_ignored_parts(tmp_path: Path) -> None:
    session = one_session(
        tmp_path,
        [
            (
                "m1",
                T0,
                user(T0),
                [
                    text("look at @src/app.py please"),
                    text('Called the Read tool with the following input: {"filePath":"src/app.py"}', synthetic=True),
                    text("<file>print(1)</file>", synthetic=True),
                    text("an ignored note", ignored=True),
                ],
            ),
        ],
    )
    [turn] = session.turns
    assert (turn.index, turn.role, turn.text) == (0, Role.USER, "look at @src/app.py please")
    # The @-mention text is named from SYNTHETIC_TEXTS; the file body is synthetic without a known text.
    assert session.census[("part/text/synthetic/file_mention", "1.2.3", Disposition.HARNESS)] == 1
    assert session.census[("part/text/synthetic", "1.2.3", Disposition.HARNESS)] == 1
    assert session.census[("part/text/ignored", "1.2.3", Disposition.HARNESS)] == 1


@pytest.mark.parametrize(("prefix", "name"), [(prefix, name) for prefix, name, _ in SYNTHETIC_TEXTS])
def test_ok_harness_known_synthetic_text_is_named_in_the_census(tmp_path: Path, prefix: str, name: str) -> None:
    parts = [text("fix it"), text(prefix + " ...", synthetic=True)]
    session = one_session(tmp_path, [("m1", T0, user(T0), parts)])
    assert [t.text for t in session.turns] == ["fix it"]
    assert session.census[(f"part/text/synthetic/{name}", "1.2.3", Disposition.HARNESS)] == 1


def test_ok_person_text_that_starts_like_a_synthetic_text_stays_a_turn(tmp_path: Path) -> None:
    # The flag decides, not the text: an unflagged part is the person's even when it quotes OpenCode's wording.
    quoted = "Continue if you have next steps, otherwise stop"
    session = one_session(tmp_path, [("m1", T0, user(T0), [text(quoted)])])
    assert [t.text for t in session.turns] == [quoted]


def test_ok_all_synthetic_user_message_makes_no_turn_and_indexes_stay(tmp_path: Path) -> None:
    session = one_session(
        tmp_path,
        [
            ("m1", T0, user(T0), [text("hello")]),
            ("m2", T0 + 1, user(T0 + 1), [text("Attached image(s) from tool result:", synthetic=True)]),
            ("m3", T0 + 2, assistant(T0 + 2), [text("hi there")]),
        ],
    )
    assert [(t.index, t.role) for t in session.turns] == [(0, Role.USER), (2, Role.ASSISTANT)]


def test_ok_assistant_visible_text_only(tmp_path: Path) -> None:
    session = one_session(
        tmp_path,
        [
            ("m1", T0, user(T0), [text("q")]),
            (
                "m2",
                T0 + 1,
                assistant(T0 + 1),
                [
                    {"type": "step-start", "snapshot": "abc"},
                    {"type": "reasoning", "text": "private thoughts", "time": {"start": T0}},
                    text("first part"),
                    text("Continue if you have next steps", synthetic=True),
                    text("second part"),
                    {"type": "snapshot", "snapshot": "def"},
                    {"type": "patch", "hash": "h", "files": ["a.py"]},
                    {"type": "compaction", "auto": True},
                ],
            ),
        ],
    )
    assert [t.text for t in session.turns] == ["q", "first part\n\nsecond part"]
    assert session.turns[1].model == "claude-sonnet-4-5"
    assert "private thoughts" not in repr(session)
    assert session.census[("part/reasoning", "1.2.3", Disposition.HARNESS)] == 1
    assert session.census[("part/step-start", "1.2.3", Disposition.SKIPPED)] == 1


def test_ok_file_part_is_an_attachment_reference_never_base64(tmp_path: Path) -> None:
    payload = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 4).decode()
    session = one_session(
        tmp_path,
        [
            (
                "m1",
                T0,
                user(T0),
                [
                    text("what is in this screenshot?"),
                    {
                        "type": "file",
                        "mime": "image/png",
                        "filename": "shot.png",
                        "url": f"data:image/png;base64,{payload}",
                    },
                    {"type": "file", "mime": "text/plain", "filename": "a.txt", "url": "file:///w/a.txt"},
                ],
            ),
        ],
    )
    [turn] = session.turns
    assert turn.attachments[0].startswith("image/png sha256:")
    assert turn.attachments[0].endswith(f" {len(payload)} bytes shot.png")
    assert turn.attachments[1] == "text/plain a.txt file:///w/a.txt"
    assert payload[:40] not in repr(session)


def test_ok_tool_parts_become_tool_calls(tmp_path: Path) -> None:
    ok = {
        "type": "tool",
        "callID": "call_1",
        "tool": "bash",
        "state": {
            "status": "completed",
            "input": {"command": "ls"},
            "output": "a.txt\n",
            "title": "ls",
            "metadata": {},
            "time": {"start": T0 + 10, "end": T0 + 20},
        },
    }
    failed = {
        "type": "tool",
        "callID": "call_2",
        "tool": "read",
        "state": {
            "status": "error",
            "input": {"filePath": "/nope"},
            "error": "File not found",
            "time": {"start": T0, "end": T0},
        },
    }
    task = {
        "type": "tool",
        "callID": "call_3",
        "tool": "task",
        "state": {
            "status": "completed",
            "input": {"prompt": "explore"},
            "output": "done",
            "title": "t",
            "metadata": {"sessionId": "ses_child"},
            "time": {"start": T0, "end": T0 + 1},
        },
    }
    session = one_session(
        tmp_path,
        [
            ("m1", T0, user(T0), [text("q")]),
            ("m2", T0 + 1, assistant(T0 + 1), [ok, failed, task]),
        ],
    )
    first, second, third = session.tool_calls
    assert (first.call_id, first.turn_index, first.name, first.input, first.output, first.is_error) == (
        "call_1",
        1,
        "bash",
        '{"command":"ls"}',
        "a.txt\n",
        False,
    )
    assert first.started_at is not None and first.ended_at is not None
    assert (first.ended_at - first.started_at).total_seconds() == 0.01
    assert (second.is_error, second.output) == (True, "File not found")
    assert third.spawned_session_id == "opencode-ses_child"
    assert [t.role for t in session.turns] == [Role.USER]  # tool parts are never turns


def test_ok_duplicate_call_ids_stay_unique(tmp_path: Path) -> None:
    call = {"type": "tool", "callID": "call_0", "tool": "bash", "state": {"status": "running", "input": {}}}
    session = one_session(tmp_path, [("m1", T0, assistant(T0), [call, call])])
    assert [c.call_id for c in session.tool_calls] == ["call_0", "call_0#m1_p1"]


def step_finish(inp: int, out: int, cost: float) -> dict[str, Any]:
    return {
        "type": "step-finish",
        "reason": "stop",
        "cost": cost,
        "tokens": {"input": inp, "output": out, "reasoning": 1, "cache": {"read": 10, "write": 2}},
    }


def test_ok_usage_from_step_finish_parts_summed_never_with_message_totals(tmp_path: Path) -> None:
    totals = {"tokens": {"input": 999, "output": 999, "reasoning": 0, "cache": {"read": 0, "write": 0}}, "cost": 9.0}
    session = one_session(
        tmp_path,
        [
            ("m1", T0, user(T0), [text("q")]),
            (
                "m2",
                T0 + 1,
                assistant(T0 + 1, **totals),
                [step_finish(100, 20, 0.5), text("a"), step_finish(50, 5, 0.25)],
            ),
        ],
    )
    [usage] = session.usage
    assert (usage.turn_index, usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (1, 150, 25, 2)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.cost_usd) == (20, 4, 0.75)
    assert (usage.model, usage.response_id) == ("claude-sonnet-4-5", "m2")


def test_ok_usage_from_message_tokens_when_no_step_finish(tmp_path: Path) -> None:
    totals = {"tokens": {"input": 7, "output": 3, "reasoning": 0, "cache": {"read": 1, "write": 0}}, "cost": 0.1}
    session = one_session(tmp_path, [("m1", T0, assistant(T0, **totals), [text("a")])])
    [usage] = session.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cost_usd) == (7, 3, 1, 0.1)


def test_ok_turn_index_is_position_in_time_created_then_id_order(tmp_path: Path) -> None:
    session = one_session(
        tmp_path,
        [
            ("m_a", T0 + 5, assistant(T0 + 5), [text("third")]),  # smallest id, latest time
            ("m_c", T0, user(T0), [text("second (same time, larger id)")]),
            ("m_b", T0, user(T0), [text("first")]),
        ],
    )
    assert [(t.index, t.text) for t in session.turns] == [
        (0, "first"),
        (1, "second (same time, larger id)"),
        (2, "third"),
    ]
    assert session.turns[0].timestamp is not None and session.turns[0].timestamp.timestamp() * 1000 == T0


def test_ok_child_session_links_to_parent_and_archived_and_metadata(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = create_db(db)
    add_session(conn, "ses_parent", title="Parent", directory="/w/p", version="1.2.10")
    add_message(conn, "ses_parent", "m1", T0, user(T0))
    add_part(conn, "ses_parent", "m1", "p1", text("spawn a helper"))
    add_session(conn, "ses_child", parent="ses_parent", archived=T0 + 9, updated=None, created=T0 + 1)
    add_message(conn, "ses_child", "m2", T0 + 1, assistant(T0 + 1))
    add_part(conn, "ses_child", "m2", "p2", text("helper answer"))
    conn.close()
    parent, child = loaded_sessions(read_db(db))
    assert (parent.title, parent.cwd, parent.cli_versions, parent.archived) == ("Parent", "/w/p", ("1.2.10",), False)
    assert parent.models == ("claude-sonnet-4-5",)
    assert (child.session_id, child.parent_session_id) == ("opencode-ses_child", "opencode-ses_parent")
    assert child.links == (SessionLink("opencode-ses_parent", LinkKind.SUBAGENT),)
    assert child.archived is True
    assert child.ended_at == child.started_at  # time_updated NULL falls back to time_created


def test_ok_unknown_part_and_role_are_skipped_and_counted_once(tmp_path: Path) -> None:
    session = one_session(
        tmp_path,
        [
            ("m1", T0, user(T0), [text("q"), {"type": "hologram", "x": 1}]),
            ("m2", T0 + 1, {"role": "system", "time": {"created": T0 + 1}}, [text("injected")]),
        ],
    )
    assert [t.text for t in session.turns] == ["q"]
    assert session.census[("part/hologram", "1.2.3", Disposition.SKIPPED)] == 1
    assert session.census[("message/system", "1.2.3", Disposition.SKIPPED)] == 1
    assert session.census[("part/text", "1.2.3", Disposition.SKIPPED)] == 1
    assert sum(session.census.values()) == 5  # 2 messages + 3 parts, each counted exactly once


def test_reject_bad_shape_part_without_type(tmp_path: Path) -> None:
    [outcome] = outcome_of(tmp_path, user(T0), [{"text": "no type"}])
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE
    assert outcome.session_hint == "opencode-ses_1"


def test_reject_bad_shape_message_without_role(tmp_path: Path) -> None:
    [outcome] = outcome_of(tmp_path, {"time": {"created": T0}}, [text("x")])
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE


def test_reject_bad_shape_tool_without_state(tmp_path: Path) -> None:
    [outcome] = outcome_of(tmp_path, assistant(T0), [{"type": "tool", "callID": "c", "tool": "bash"}])
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE


def test_reject_bad_shape_text_part_without_text(tmp_path: Path) -> None:
    [outcome] = outcome_of(tmp_path, user(T0), [{"type": "text", "text": 42}])
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE


def test_ok_integers_past_64_bits_in_tool_input_do_not_crash(tmp_path: Path) -> None:
    # NaN sends the part through bounded.parse_json's stdlib fallback, which keeps the exact big integer.
    part = (
        '{"type": "tool", "callID": "c", "tool": "t", "state": {"status": "completed", '
        '"input": {"n": 123456789012345678901234567890, "x": NaN}, "output": "ok"}}'
    )
    [outcome] = outcome_of(tmp_path, assistant(T0), [part])
    [call] = outcome.session.tool_calls
    assert call.input == '{"n":123456789012345678901234567890,"x":NaN}'
