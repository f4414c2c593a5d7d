"""Factory Droid reader rules, one small session file per rule, each test named after the outcome it expects."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from extractors import droid
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Disposition, Loaded, Outcome, Rejected, Role, Session
from tests.support import read_one, write_jsonl

AGENT = Agent("droid")
SID = "7df5bcf0-6cd9-4c89-8925-1bf8b3fb061d"


def at(seconds: int) -> str:
    return f"2026-07-28T17:{17 + seconds // 60:02d}:{seconds % 60:02d}.000Z"


def when(seconds: int) -> datetime:
    return datetime.fromisoformat(at(seconds).replace("Z", "+00:00"))


def header(native: str = SID, **extra: Any) -> dict[str, Any]:
    return {"type": "session_start", "id": native, "title": "Start new chat", "owner": "u", "version": 2,
            "cwd": "/home/u/proj", "hostId": "h", **extra}  # fmt: skip


def message(n: int, role: str, content: Any, **extra: Any) -> dict[str, Any]:
    inner = {"role": role, "content": content, **extra}
    return {"type": "message", "id": f"m{n}", "timestamp": at(n), "message": inner}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "Read", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments or {"file_path": "/a"}}


def result(call_id: str, content: Any = "ok", error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "is_error": error, "content": content}


def write(tmp_path: Path, records: list[Any], settings: Any = None, native: str = SID) -> Path:
    path = write_jsonl(tmp_path / ".factory" / "sessions" / "-home-u-proj" / f"{native}.jsonl", records)
    if settings is not None:
        raw = settings if isinstance(settings, str) else json.dumps(settings)
        (path.parent / f"{native}.settings.json").write_text(raw, encoding="utf-8")
    return path


def one(outcomes: list[Outcome]) -> Session:
    assert [type(o) for o in outcomes] == [Loaded], outcomes
    loaded = outcomes[0]
    assert isinstance(loaded, Loaded)
    return loaded.session


def code(outcomes: list[Outcome]) -> str:
    assert [type(o) for o in outcomes] == [Rejected], outcomes
    rejected = outcomes[0]
    assert isinstance(rejected, Rejected)
    return rejected.code.value


def basic() -> list[Any]:
    return [header(), message(1, "user", [text("hi")]), message(2, "assistant", [text("Hello.")], modelId="m-1")]


def test_a_typed_prompt_is_the_persons_turn_and_the_answer_the_models(tmp_path: Path) -> None:
    session = one(read_one(AGENT, write(tmp_path, basic())))
    assert session.session_id == f"droid-{SID}"
    assert [(t.role, t.text, t.index) for t in session.turns] == [(Role.USER, "hi", 1), (Role.ASSISTANT, "Hello.", 2)]
    assert session.cwd == "/home/u/proj"
    assert session.title == "Start new chat"
    assert session.turns[1].model == "m-1"
    assert session.models == ("m-1",)


def test_llm_only_context_and_user_only_notices_are_harness_never_turns(tmp_path: Path) -> None:
    records = [
        header(),
        message(1, "user", [text("<system-reminder>Today's date is 2026-07-28.</system-reminder>")],
                visibility="llm_only"),
        message(2, "user", [text("hi")]),
        message(3, "user", [text("No active subscription found.")], visibility="user_only"),
        message(4, "user", [text("something new")], visibility="team_only"),
        message(5, "assistant", [text("Hello.")]),
    ]  # fmt: skip
    session = one(read_one(AGENT, write(tmp_path, records)))
    assert [t.text for t in session.turns] == ["hi", "Hello."]
    census = {(kind, d) for (kind, _, d) in session.census}
    assert ("message/user/llm_only", Disposition.HARNESS) in census
    assert ("message/user/user_only", Disposition.HARNESS) in census
    assert ("message/user/team_only", Disposition.SKIPPED) in census  # an unknown visibility: counted, not read


def test_system_reminder_spans_are_taken_out_of_the_persons_text(tmp_path: Path) -> None:
    records = [
        header(),
        message(1, "user", "<system-reminder>autonomy changed</system-reminder>"),
        message(2, "user", ["count the lines", text("<system-reminder>Keep it short.</system-reminder>")]),
        message(3, "assistant", [text("42.")]),
    ]
    session = one(read_one(AGENT, write(tmp_path, records)))
    assert [(t.role, t.text) for t in session.turns] == [(Role.USER, "count the lines"), (Role.ASSISTANT, "42.")]
    assert session.census[("message/user/reminder", "2", Disposition.HARNESS)] == 1


def test_tool_results_join_their_calls_and_are_never_a_persons_turn(tmp_path: Path) -> None:
    records = [
        header(),
        message(1, "user", [text("read a")]),
        message(2, "assistant", [{"type": "thinking", "thinking": "hm", "signature": "s"}, tool_use("c1"),
                                 tool_use("c2", "LS", directory_path="/")]),
        message(3, "user", [result("c1", [text("body")]), result("c2", "denied", error=True), result("c9")]),
        message(4, "assistant", [text("done")]),
    ]  # fmt: skip
    session = one(read_one(AGENT, write(tmp_path, records)))
    assert [t.text for t in session.turns] == ["read a", "done"]
    calls = {c.call_id: c for c in session.tool_calls}
    assert list(calls) == ["c1", "c2"]
    assert (calls["c1"].output, calls["c1"].is_error, calls["c1"].turn_index) == ("body", False, 2)
    assert (calls["c2"].name, calls["c2"].input, calls["c2"].is_error) == ("LS", '{"directory_path": "/"}', True)
    assert calls["c2"].ended_at == when(3)
    assert session.census[("block/tool_result/orphan", "2", Disposition.TOOL)] == 1
    assert session.census[("message/assistant/tool_calls", "2", Disposition.TOOL)] == 1


def test_the_settings_running_total_is_one_usage_row_never_the_inclusive_or_last_call_blocks(tmp_path: Path) -> None:
    totals = {"inputTokens": 18320, "outputTokens": 327, "cacheCreationTokens": 5, "cacheReadTokens": 67072,
              "thinkingTokens": 92, "factoryCredits": 7}  # fmt: skip
    settings = {"model": "custom:GPT-5.4-Mini-[OpenAI-BYOK]-0", "tokenUsage": totals,
                "inclusiveTokenUsage": {**totals, "inputTokens": 99999},
                "lastCallTokenUsage": {"inputTokens": 303, "outputTokens": 46, "cacheReadTokens": 16896}}  # fmt: skip
    records = [*basic(), message(3, "user", [text("more")]), message(4, "assistant", [text("ok")], modelId="m-2")]
    session = one(read_one(AGENT, write(tmp_path, records, settings)))
    [usage] = session.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        18320, 327, 67072, 5)  # fmt: skip
    assert usage.reasoning_tokens == 92
    assert usage.cost_usd is None
    assert usage.model == "custom:GPT-5.4-Mini-[OpenAI-BYOK]-0"
    assert (usage.turn_index, usage.timestamp) == (4, when(4))  # at the last assistant message


def test_an_auto_settings_model_gives_way_to_the_messages_model_id(tmp_path: Path) -> None:
    settings = {"model": "auto", "tokenUsage": {"inputTokens": 1, "outputTokens": 2}}
    session = one(read_one(AGENT, write(tmp_path, basic(), settings)))
    assert session.usage[0].model == "m-1"
    assert session.models == ("m-1",)


def test_all_zero_totals_and_a_missing_settings_file_give_no_usage_row(tmp_path: Path) -> None:
    zeros = {"model": "m", "tokenUsage": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0}}
    assert one(read_one(AGENT, write(tmp_path / "a", basic(), zeros))).usage == ()
    assert one(read_one(AGENT, write(tmp_path / "b", basic()))).usage == ()


def test_a_settings_file_that_is_not_an_object_rejects_the_session(tmp_path: Path) -> None:
    assert code(read_one(AGENT, write(tmp_path / "a", basic(), "[1, 2]"))) == RejectCode.BAD_SHAPE
    assert code(read_one(AGENT, write(tmp_path / "b", basic(), '{"model": '))) in {
        RejectCode.TRUNCATED_TAIL, RejectCode.INVALID_JSON}  # fmt: skip


def test_times_come_from_the_messages_and_lines_without_one_add_none(tmp_path: Path) -> None:
    records = [*basic(), {"type": "agent_turn_outcome", "turnId": "m1", "reason": "completed", "resultKind": "text"}]
    session = one(read_one(AGENT, write(tmp_path, records)))
    assert (session.started_at, session.ended_at) == (when(1), when(2))
    assert session.started_at_inferred is False
    assert session.census[("agent_turn_outcome", "2", Disposition.METADATA)] == 1


def test_a_session_with_no_time_anywhere_is_rejected_never_given_the_file_time(tmp_path: Path) -> None:
    records = [header(), {"type": "message", "id": "m1", "message": {"role": "user", "content": "hi"}}]
    assert code(read_one(AGENT, write(tmp_path, records))) == RejectCode.MISSING_TIMESTAMP


def test_unknown_line_kinds_and_blocks_are_counted_and_skipped(tmp_path: Path) -> None:
    records = [
        *basic(),
        {"type": "todo_state", "id": "t", "timestamp": at(3), "todos": {"todos": "1. [pending] x"}},
        {"type": "hologram", "id": "h", "timestamp": at(4)},
        message(5, "user", [text("look"), {"type": "document", "source": {}}]),
        message(6, "system", [text("you are droid")]),
    ]
    session = one(read_one(AGENT, write(tmp_path, records)))
    assert [t.text for t in session.turns] == ["hi", "Hello.", "look"]
    assert session.census[("hologram", "2", Disposition.SKIPPED)] == 1
    assert session.census[("todo_state", "2", Disposition.SKIPPED)] == 1
    assert session.census[("block/document", "2", Disposition.SKIPPED)] == 1
    assert session.census[("message/system", "2", Disposition.SKIPPED)] == 1


def test_a_header_alone_is_no_conversation(tmp_path: Path) -> None:
    assert code(read_one(AGENT, write(tmp_path, [header(title="New Session")]))) == RejectCode.NO_CONVERSATION


def test_a_first_line_that_is_not_session_start_is_rejected_missing_session_id(tmp_path: Path) -> None:
    assert code(read_one(AGENT, write(tmp_path, basic()[1:]))) == RejectCode.MISSING_SESSION_ID
    bad_id = [header(native="a/b"), *basic()[1:]]
    assert code(read_one(AGENT, write(tmp_path / "x", bad_id))) == RejectCode.MISSING_SESSION_ID


def test_a_droid_exec_stream_capture_is_unsupported_format_not_a_guess(tmp_path: Path) -> None:
    records = [{"type": "system", "subtype": "init", "session_id": "s1", "model": "m"},
               {"type": "message", "role": "user", "text": "hi", "session_id": "s1"},
               {"type": "completion", "finalText": "done", "session_id": "s1"}]  # fmt: skip
    assert code(read_one(AGENT, write(tmp_path, records))) == RejectCode.UNSUPPORTED_FORMAT


def test_a_second_header_with_another_id_is_inconsistent(tmp_path: Path) -> None:
    records = [*basic(), header(native="other")]
    assert code(read_one(AGENT, write(tmp_path, records))) == RejectCode.INCONSISTENT_SOURCE


def test_a_partial_last_line_of_a_fresh_file_is_deferred(tmp_path: Path) -> None:
    path = write(tmp_path, basic())
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type":"message","id":"m3"')
    os.utime(path, (time.time(), time.time()))
    outcomes = read_one(AGENT, path, Limits(settle_seconds=3600))
    assert len(outcomes) == 1 and isinstance(outcomes[0], Deferred), outcomes
    assert outcomes[0].code is DeferCode.WRITE_IN_PROGRESS


def test_discovery_finds_session_files_in_and_under_the_root_never_settings_or_deeper_files(tmp_path: Path) -> None:
    root = tmp_path / ".factory" / "sessions"
    write(tmp_path, basic(), {"model": "m"})
    flat = write_jsonl(root / "0a9b8c7d-6e5f-4d3c-2b1a-0f9e8d7c6b5a.jsonl", basic())
    deep = write_jsonl(root / "-home-u-proj" / "x" / "deep.jsonl", basic())
    (root.parent / "history.json").write_text("[]")
    (root / "-home-u-proj" / f"{SID}.settings.json.bak").write_text("{}")
    found = sorted(s.path for s in droid.discover(root))
    assert found == sorted([str(root / "-home-u-proj" / f"{SID}.jsonl"), str(flat)])
    assert str(deep) not in found


def test_a_changed_settings_file_changes_the_units_fingerprint(tmp_path: Path) -> None:
    root = tmp_path / ".factory" / "sessions"
    path = write(tmp_path, basic(), {"model": "m"})
    [before] = list(droid.discover(root))
    (path.parent / f"{SID}.settings.json").write_text(json.dumps({"model": "m", "tokenUsage": {"inputTokens": 1}}))
    [after] = list(droid.discover(root))
    assert (before.size, before.path) != (after.size, after.path) or before.mtime_ns != after.mtime_ns


def test_the_default_root_is_factory_sessions_under_the_home(tmp_path: Path) -> None:
    assert droid.default_roots(tmp_path, {}) == [tmp_path / ".factory" / "sessions"]
    assert droid.default_roots(tmp_path, {"FACTORY_HOME": "/elsewhere"}) == [tmp_path / ".factory" / "sessions"]
    assert droid.SPEC.env == ()
