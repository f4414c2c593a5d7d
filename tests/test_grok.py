"""Grok Build extractor rules, one small session directory per rule, named after the outcome."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors import grok
from extractors.errors import RejectCode
from extractors.grok import default_roots, discover
from extractors.model import Agent, Disposition, LinkKind, Loaded, Rejected, Role, Session
from tests.support import outcomes_under, write_jsonl

SID = "019f6851-7ec4-7ef0-97d3-03f3eee38755"
CHILD = "019f6852-0000-7000-8000-000000000002"
BUCKET = "%2Ftmp%2Fproj"


def summary(native: str = SID, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "info": {"id": native, "cwd": "/tmp/proj"},
        "created_at": "2026-07-31T10:13:27.574131Z",
        "updated_at": "2026-07-31T10:15:02.118940Z",
        "last_active_at": "2026-07-31T10:14:00.000000Z",
        "generated_title": "A title",
        "current_model_id": "grok-4.5",
        "head_branch": "main",
        "chat_format_version": 1,
    }
    data.update(extra)
    return data


def user(text: str, prompt_index: int | None = 0, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "user", "content": [{"type": "text", "text": text}], **extra}
    if prompt_index is not None:
        record["prompt_index"] = prompt_index
    return record


def assistant(text: str, calls: list[dict[str, Any]] | None = None, model: str = "grok-4.5") -> dict[str, Any]:
    return {"type": "assistant", "content": text, "tool_calls": calls or [], "model_id": model}


def session_dir(
    home: Path, records: list[Any], meta: dict[str, Any] | None = None, native: str = SID, bucket: str = BUCKET
) -> Path:
    folder = home / "sessions" / bucket / native
    write_jsonl(folder / "chat_history.jsonl", records)
    if meta is not None:
        (folder / "summary.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def outcomes(home: Path) -> list[Any]:
    return [o for outs in outcomes_under(Agent("grok"), home).values() for o in outs]


def load(home: Path) -> Session:
    found = outcomes(home)
    assert len(found) == 1 and isinstance(found[0], Loaded), found
    return found[0].session


def reject(home: Path) -> Rejected:
    found = outcomes(home)
    assert len(found) == 1 and isinstance(found[0], Rejected), found
    return found[0]


# ---- roots and discovery ---------------------------------------------------------------------------------------


def test_ok_default_root_is_the_grok_home(tmp_path: Path) -> None:
    assert default_roots(tmp_path, {}) == [tmp_path / ".grok"]
    assert default_roots(tmp_path, {"GROK_HOME": "/g"}) == [Path("/g")]
    assert default_roots(tmp_path, {"GROK_HOME": "~/g"}) == [tmp_path / "g"]


def test_ok_discover_lists_session_units_and_prunes_journals(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, [user("hi")], summary())
    write_jsonl(folder / "events.jsonl", [{"x": 1}])
    for sub in ("subagents/a", "terminal", "compaction"):
        write_jsonl(folder / sub / "chat_history.jsonl", [user("nested")])
    write_jsonl(tmp_path / "sessions" / BUCKET / "chat_history.jsonl", [user("not a session dir")])
    (tmp_path / "sessions" / "session_search.sqlite").write_bytes(b"SQLite format 3\x00")
    found = [Path(s.path).relative_to(tmp_path).as_posix() for s in discover(tmp_path)]
    assert found == [f"sessions/{BUCKET}/{SID}/chat_history.jsonl"]
    # A `sessions` folder given as the root works too.
    assert [s.path for s in discover(tmp_path / "sessions")] == [str(folder / "chat_history.jsonl")]


def test_ok_fingerprint_covers_chat_history_and_summary(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, [user("hi")], summary())
    chat, side = folder / "chat_history.jsonl", folder / "summary.json"
    os.utime(chat, ns=(1_000_000_000_000, 1_000_000_000_000))
    os.utime(side, ns=(2_000_000_000_000, 2_000_000_000_000))
    [source] = discover(tmp_path)
    assert (source.size, source.mtime_ns) == (chat.stat().st_size + side.stat().st_size, 2_000_000_000_000)
    side.write_text(json.dumps(summary(generated_title="Renamed")), encoding="utf-8")
    os.utime(side, ns=(3_000_000_000_000, 3_000_000_000_000))
    [changed] = discover(tmp_path)
    assert (changed.size, changed.mtime_ns) != (source.size, source.mtime_ns)


def test_reject_unsupported_format_for_the_community_grok_db(tmp_path: Path) -> None:
    db = tmp_path / "grok.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    before = db.read_bytes()
    session_dir(tmp_path, [user("hi")], summary())
    found = outcomes_under(Agent("grok"), tmp_path)
    [rejected] = found["grok.db"]
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.UNSUPPORTED_FORMAT
    assert "grok.db from superagent-ai/grok-cli is not supported yet" in rejected.detail
    assert rejected.source.kind == "database" and db.read_bytes() == before
    assert isinstance(found[f"sessions/{BUCKET}/{SID}/chat_history.jsonl"][0], Loaded)


# ---- times, identity, metadata ---------------------------------------------------------------------------------


def test_ok_times_and_metadata_come_from_summary(tmp_path: Path) -> None:
    session = load(session_dir(tmp_path, [user("hi"), assistant("hello")], summary()).parents[2])
    assert session.session_id == f"grok-{SID}" and session.native_id == SID
    assert session.started_at == datetime(2026, 7, 31, 10, 13, 27, 574131, tzinfo=UTC)
    assert session.ended_at == datetime(2026, 7, 31, 10, 15, 2, 118940, tzinfo=UTC)
    assert (session.cwd, session.title, session.git_branch, session.models) == (
        "/tmp/proj",
        "A title",
        "main",
        ("grok-4.5",),
    )
    assert all(t.timestamp is None for t in session.turns)


def test_ok_cwd_from_the_bucket_and_title_from_the_summary_text(tmp_path: Path) -> None:
    meta = summary(info={"id": SID}, generated_title=None, session_summary="Summary title")
    session = load(session_dir(tmp_path, [user("hi")], meta, bucket="%2FUsers%2Fme%2Fmy%20proj").parents[2])
    assert (session.cwd, session.title) == ("/Users/me/my proj", "Summary title")


def test_reject_missing_timestamp_without_summary(tmp_path: Path) -> None:
    rejected = reject(session_dir(tmp_path, [user("hi")], None).parents[2])
    assert rejected.code is RejectCode.MISSING_TIMESTAMP and rejected.session_hint == f"grok-{SID}"


def test_reject_missing_timestamp_for_an_unparseable_created_at(tmp_path: Path) -> None:
    home = session_dir(tmp_path, [user("hi")], summary(created_at="yesterday")).parents[2]
    assert reject(home).code is RejectCode.MISSING_TIMESTAMP


def test_reject_inconsistent_source_when_summary_id_differs_from_the_directory(tmp_path: Path) -> None:
    home = session_dir(tmp_path, [user("hi")], summary(native=CHILD)).parents[2]
    assert reject(home).code is RejectCode.INCONSISTENT_SOURCE


# ---- genuine turns ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        user("<user_info>\nOS Version: macos\n</user_info>", None, synthetic_reason="environment_context"),
        user("# AGENTS.md\nrules", None, synthetic_reason="project_instructions"),
        user("<system-reminder>x</system-reminder>", 3, synthetic_reason="system_reminder"),
        user("[Request interrupted by user]", None, synthetic_reason="interrupt"),
        user("no prompt index at all", None),
        {"type": "system", "content": "You are Grok."},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}],
            "status": "completed",
        },
    ],
    ids=[
        "environment_context",
        "project_instructions",
        "system_reminder",
        "interrupt",
        "no_prompt_index",
        "system",
        "reasoning",
    ],
)
def test_ok_injected_records_are_harness_not_turns(tmp_path: Path, record: dict[str, Any]) -> None:
    session = load(session_dir(tmp_path, [record, user("real prompt", 1)], summary()).parents[2])
    assert [(t.index, t.role, t.text) for t in session.turns] == [(1, Role.USER, "real prompt")]
    assert session.count(Disposition.HARNESS) == 1


def test_ok_genuine_prompt_with_an_interrupt_flag_and_an_image_is_a_turn(tmp_path: Path) -> None:
    image = {"type": "image", "url": "data:image/png;base64,iVBORw0KGgoAAAA="}
    record = {
        "type": "user",
        "content": [image, {"type": "text", "text": "look"}],
        "prompt_index": 2,
        "prior_turn_interrupt": "mid_turn_abort",
    }
    session = load(session_dir(tmp_path, [record], summary()).parents[2])
    [turn] = session.turns
    assert turn.text == "look" and turn.attachments[0].startswith("image/png sha256:")
    assert "iVBORw0KGgo" not in repr(session)


def test_ok_tool_calls_join_results_and_backend_calls_have_no_output(tmp_path: Path) -> None:
    records = [
        user("run it"),
        assistant("", [{"id": "c1", "name": "run_terminal_cmd", "arguments": '{"command":"ls"}'}]),
        {"type": "tool_result", "tool_call_id": "c1", "content": "a.txt\n"},
        {
            "type": "backend_tool_call",
            "kind": {"tool_type": "web_search", "action": {"type": "search", "query": "q"}, "id": "ws_1"},
        },
        {"type": "tool_result", "tool_call_id": "ghost", "content": "orphan"},
        assistant("done", model="grok-code-fast"),
    ]
    session = load(session_dir(tmp_path, records, summary()).parents[2])
    assert [(t.index, t.role, t.text, t.model) for t in session.turns] == [
        (0, Role.USER, "run it", None),
        (5, Role.ASSISTANT, "done", "grok-code-fast"),
    ]
    calls = {c.call_id: (c.turn_index, c.name, c.input, c.output) for c in session.tool_calls}
    assert calls == {
        "c1": (1, "run_terminal_cmd", '{"command":"ls"}', "a.txt\n"),
        "ws_1": (3, "web_search", '{"query": "q", "type": "search"}', None),
    }
    assert session.census[("tool_result/orphan", "1", Disposition.TOOL)] == 1
    assert session.census[("assistant/tool_calls", "1", Disposition.TOOL)] == 1
    assert session.models == ("grok-4.5", "grok-code-fast")


@pytest.mark.parametrize(
    "record",
    [
        {"type": "user", "content": 7, "prompt_index": 0},
        {"type": "user", "content": [], "prompt_index": "zero"},
        {"type": "assistant", "content": "x", "tool_calls": {"id": "c"}},
        {"type": "assistant", "content": "x", "tool_calls": [{"name": "no id"}]},
        {"type": "tool_result", "content": "no call id"},
        {"type": "backend_tool_call", "kind": "web_search"},
    ],
)
def test_reject_bad_shape_for_a_known_record_kind(tmp_path: Path, record: dict[str, Any]) -> None:
    rejected = reject(session_dir(tmp_path, [user("hi"), record], summary()).parents[2])
    assert rejected.code is RejectCode.BAD_SHAPE and rejected.line == 1


def test_ok_unknown_record_kinds_are_skipped_and_counted(tmp_path: Path) -> None:
    session = load(session_dir(tmp_path, [{"type": "hologram"}, {"no": "type"}, user("hi")], summary()).parents[2])
    assert session.census[("hologram", "1", Disposition.SKIPPED)] == 1
    assert session.census[("(untyped)", "1", Disposition.SKIPPED)] == 1
    assert len(session.turns) == 1


# ---- subagents ---------------------------------------------------------------------------------------------------


def test_ok_subagent_session_is_linked_to_its_parent_through_meta_json(tmp_path: Path) -> None:
    parent = session_dir(tmp_path, [user("spawn a helper")], summary())
    meta = {"parent_session_id": SID, "subagent_type": "explore", "description": "look around"}
    (parent / "subagents" / CHILD).mkdir(parents=True)
    (parent / "subagents" / CHILD / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    session_dir(tmp_path, [user("explore the repo")], summary(native=CHILD, session_kind="subagent"), native=CHILD)
    found = {s.session_id: s for s in (o.session for o in outcomes(tmp_path) if isinstance(o, Loaded))}
    child = found[f"grok-{CHILD}"]
    assert child.parent_session_id == f"grok-{SID}"
    assert [(link.other_session_id, link.kind) for link in child.links] == [(f"grok-{SID}", LinkKind.SUBAGENT)]
    assert found[f"grok-{SID}"].parent_session_id is None


def test_reject_inconsistent_source_when_meta_json_names_another_parent(tmp_path: Path) -> None:
    parent = session_dir(tmp_path, [user("spawn")], summary())
    (parent / "subagents" / CHILD).mkdir(parents=True)
    (parent / "subagents" / CHILD / "meta.json").write_text(json.dumps({"parent_session_id": "someone-else"}))
    session_dir(tmp_path, [user("x")], summary(native=CHILD, session_kind="subagent"), native=CHILD)
    codes = {o.code for o in outcomes(tmp_path) if isinstance(o, Rejected)}
    assert codes == {RejectCode.INCONSISTENT_SOURCE}


# ---- text Grok writes as the user (SYNTHETIC_REASONS, PERSON_REASONS, USER_QUERY_SPAN) -----------------------------


def test_every_known_synthetic_reason_is_harness(tmp_path: Path) -> None:
    for n, reason in enumerate(sorted(grok.SYNTHETIC_REASONS)):
        home = session_dir(
            tmp_path / str(n), [user("injected", 0, synthetic_reason=reason), user("real", 1)], summary()
        )
        session = load(home.parents[2])
        assert [t.text for t in session.turns] == ["real"], reason
        assert session.census[(f"user/synthetic/{reason}", "1", Disposition.HARNESS)] == 1


def test_ok_synthetic_reason_human_is_a_person_turn(tmp_path: Path) -> None:
    home = session_dir(tmp_path, [user("typed by me", 0, synthetic_reason="human")], summary())
    assert [(t.index, t.role, t.text) for t in load(home.parents[2]).turns] == [(0, Role.USER, "typed by me")]


def test_ok_interjection_typed_while_the_model_worked_is_a_person_turn(tmp_path: Path) -> None:
    # Grok marks it synthetic (it wraps the text in a lead-in), but the words inside <user_query> are the person's.
    records = [
        user("<user_query>\nfix the parser\n</user_query>", 0),
        assistant("on it"),
        user(
            "The user sent a message while you were working:\n<user_query>\nalso the tests\n</user_query>",
            None,
            synthetic_reason="interjection",
        ),
        user("Background task finished", 1, synthetic_reason="task_completed"),
        user(
            "The user interrupted the previous turn:\n<user_query>\nstop, use tabs\n</user_query>\nIf the user is "
            "asking you to change course, do so.",
            2,
        ),
    ]
    session = load(session_dir(tmp_path, records, summary()).parents[2])
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (0, Role.USER, "fix the parser"),
        (1, Role.ASSISTANT, "on it"),
        (2, Role.USER, "also the tests"),
        (4, Role.USER, "stop, use tabs"),
    ]
    assert session.census[("user/interjection/user_query", "1", Disposition.TURN)] == 1
    assert session.census[("user/synthetic/task_completed", "1", Disposition.HARNESS)] == 1


def test_ok_an_unhashable_synthetic_reason_is_harness_not_a_crash(tmp_path: Path) -> None:
    home = session_dir(tmp_path, [user("x", 0, synthetic_reason=["odd"]), user("real", 1)], summary())
    assert [t.text for t in load(home.parents[2]).turns] == ["real"]


def test_ok_user_query_envelope_keeps_only_the_typed_prompt(tmp_path: Path) -> None:
    wrapped = {
        "type": "user",
        "content": [
            {"type": "text", "text": "<user_info>\nOS Version: linux\nWorkspace Path: /w\n</user_info>"},
            {"type": "text", "text": "<user_query>\nrename the flag\n</user_query>"},
        ],
        "prompt_index": 0,
    }
    session = load(
        session_dir(
            tmp_path, [wrapped, user("<user_query>a</user_query> and <user_query>b</user_query>", 1)], summary()
        ).parents[2]
    )
    assert [(t.index, t.text) for t in session.turns] == [(0, "rename the flag"), (1, "a\nb")]
    assert session.census[("user/user_query", "1", Disposition.TURN)] == 2
    assert "OS Version" not in repr(session.turns)
