"""Grok Build's updates.jsonl (issue 33): the rules by which the reader takes a session from it, one per test, each
named after the outcome it expects. Small sessions written inline; the contract's fixture session is in
tests/agents/grok/home (docs/agents/grok.md "updates.jsonl")."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from extractors.bounded import json_text
from extractors.errors import DeferCode, RejectCode
from extractors.grok import discover
from extractors.model import Agent, Deferred, Disposition, Loaded, Rejected, Role, Session
from extractors.registry import read_source
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from tests.support import SETTLED, outcomes_under, write_jsonl

SID = "019f7000-0000-7000-8000-000000000001"
BUCKET = "%2Ftmp%2Fproj"
T0 = 1_790_000_000_000  # ms: 2026-09-21T14:13:20Z
FIXTURE_HOME = Path(__file__).parent / "agents" / "grok" / "home" / ".grok"


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def summary(**extra: Any) -> dict[str, Any]:
    return {
        "info": {"id": SID, "cwd": "/tmp/proj"},
        "created_at": "2026-09-21T14:13:00.000000Z",
        "updated_at": "2026-09-21T14:13:10.000000Z",
        "current_model_id": "grok-4.5",
        "chat_format_version": 2,
        **extra,
    }


def line(update: dict[str, Any], ms: int | None, *, xai: bool = False, stamp: int | None = None) -> dict[str, Any]:
    """One envelope; `ms` is `_meta.agentTimestampMs` (None: absent), `stamp` the envelope's unix seconds."""
    params: dict[str, Any] = {"sessionId": SID, "update": update}
    if ms is not None:
        params["_meta"] = {"eventId": f"e-{ms}", "agentTimestampMs": ms}
    envelope_time = stamp if stamp is not None else (ms // 1000 if ms is not None else T0 // 1000)
    method = "_x.ai/session/update" if xai else "session/update"
    return {"timestamp": envelope_time, "method": method, "params": params}


def user(text: str, prompt: int | None, ms: int, **meta: Any) -> dict[str, Any]:
    chunk_meta = {"modelId": "grok-4.5", **meta} | ({} if prompt is None else {"promptIndex": prompt})
    return line(
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}, "_meta": chunk_meta}, ms
    )


def say(text: str, ms: int) -> dict[str, Any]:
    return line({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}, ms)


def done(prompt_id: str, ms: int, **usage: Any) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "turn_completed", "prompt_id": prompt_id, "stop_reason": "end_turn"}
    if usage:
        update["usage"] = usage
    return line(update, ms, xai=True)


def session_dir(home: Path, updates: list[Any] | None, chat: list[Any] | None = None, **meta: Any) -> Path:
    folder = home / "sessions" / BUCKET / SID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary(**meta)), encoding="utf-8")
    if updates is not None:
        write_jsonl(folder / "updates.jsonl", updates)
    if chat is not None:
        write_jsonl(folder / "chat_history.jsonl", chat)
    return folder


def outcomes(home: Path, limits: Any = SETTLED) -> list[Any]:
    return [o for outs in outcomes_under(Agent("grok"), home, limits).values() for o in outs]


def load(home: Path) -> Session:
    found = outcomes(home)
    assert len(found) == 1 and isinstance(found[0], Loaded), found
    return found[0].session


def said(session: Session) -> list[tuple[str, str]]:
    return [(t.role.value, t.text) for t in session.turns]


def census(session: Session) -> dict[tuple[str, Disposition], int]:
    return {(kind, d): n for (kind, _, d), n in session.census.items()}


# --- which file is the record ------------------------------------------------------------------------------------


def test_compaction_loses_no_turns_when_updates_jsonl_holds_them(tmp_path: Path) -> None:
    # chat_history.jsonl after a compaction: the summary as compaction_meta, then only the last prompt.
    chat = [
        {"type": "user", "content": "<summary>earlier work</summary>", "synthetic_reason": "compaction_meta"},
        {"type": "user", "content": [{"type": "text", "text": "third"}], "prompt_index": 2},
        {"type": "assistant", "content": "answer three", "tool_calls": []},
    ]
    updates = [
        user("first", 0, T0), say("answer one", T0 + 1), done("p0", T0 + 2),
        user("second", 1, T0 + 3), say("answer two", T0 + 4), done("p1", T0 + 5),
        line({"sessionUpdate": "compaction_checkpoint", "checkpoint_id": "c1"}, T0 + 6, xai=True),
        user("third", 2, T0 + 7), say("answer three", T0 + 8), done("p2", T0 + 9),
    ]  # fmt: skip
    session_dir(tmp_path, updates, chat)
    session = load(tmp_path)
    assert said(session) == [
        ("user", "first"), ("assistant", "answer one"), ("user", "second"), ("assistant", "answer two"),
        ("user", "third"), ("assistant", "answer three"),
    ]  # fmt: skip
    assert census(session)[("compaction_checkpoint", Disposition.SKIPPED)] == 1
    assert not any(kind == "user" for kind, _ in census(session)), "chat_history.jsonl is not read as well"


def test_older_session_without_updates_jsonl_reads_chat_history_as_before(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = FIXTURE_HOME / "sessions" / "%2Fhome%2Fu%2Fproj" / "019b7e2b-1111-7222-8333-444455556666"
    folder = home / "sessions" / "%2Fhome%2Fu%2Fproj" / old.name
    folder.mkdir(parents=True)
    for name in ("chat_history.jsonl", "summary.json"):
        (folder / name).write_bytes((old / name).read_bytes())
    [source] = discover(home)
    assert source.path.endswith("chat_history.jsonl")
    session = load(home)
    assert said(session) == [
        ("user", "list the files in this folder"), ("assistant", "I will run ls."),
        ("assistant", "There are two entries: README.md and src."), ("user", "thanks, that is all"),
        ("assistant", "You are welcome."),
    ]  # fmt: skip
    assert [t.index for t in session.turns] == [2, 4, 6, 8, 9]
    assert all(t.timestamp is None for t in session.turns), "chat_history.jsonl records carry no times"
    assert session.usage == ()
    assert census(session)[("user/synthetic/environment_context", Disposition.HARNESS)] == 1


def test_a_stream_that_never_stamps_a_prompt_leaves_chat_history_the_record(tmp_path: Path) -> None:
    chat = [
        {"type": "user", "content": "<user_info>os</user_info>", "synthetic_reason": "environment_context"},
        {"type": "user", "content": [{"type": "text", "text": "hello"}], "prompt_index": 0},
        {"type": "assistant", "content": "hi", "tool_calls": []},
    ]
    legacy = [{"sessionId": SID, "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text",
              "text": "<user_info>os</user_info>"}}}, {"sessionId": SID, "update": {"sessionUpdate":
              "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}]  # fmt: skip
    session_dir(tmp_path, legacy, chat)
    session = load(tmp_path)
    assert said(session) == [("user", "hello"), ("assistant", "hi")]
    assert census(session)[("legacy_updates/user_message_chunk", Disposition.SKIPPED)] == 1


def test_a_session_folder_with_only_updates_jsonl_is_discovered_and_loaded(tmp_path: Path) -> None:
    session_dir(tmp_path, [user("only here", 0, T0), say("yes", T0 + 1)])
    assert [Path(s.path).name for s in discover(tmp_path)] == ["updates.jsonl"]
    session = load(tmp_path)
    assert session.session_id == f"grok-{SID}"
    assert said(session) == [("user", "only here"), ("assistant", "yes")]


def test_one_unit_per_folder_whose_fingerprint_grows_with_updates_jsonl(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, [user("q", 0, T0)], [{"type": "system", "content": "s"}])
    [before] = discover(tmp_path)
    assert Path(before.path).name == "updates.jsonl"
    sizes = sum(os.path.getsize(folder / n) for n in ("updates.jsonl", "chat_history.jsonl", "summary.json"))
    assert before.size == sizes
    with open(folder / "updates.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(say("more", T0 + 1)) + "\n")
    [after] = discover(tmp_path)
    assert after.path == before.path and after.size > before.size
    # An empty updates.jsonl leaves chat_history.jsonl the unit.
    (folder / "updates.jsonl").write_bytes(b"")
    assert [Path(s.path).name for s in discover(tmp_path)] == ["chat_history.jsonl"]


# --- turns ---------------------------------------------------------------------------------------------------------


def test_chunks_coalesce_into_one_turn_per_message(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        user("fix ", 0, T0), user("this", 0, T0 + 1),
        line({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}, T0 + 2),
        say("Do", T0 + 3), say("ne.", T0 + 4),
        line({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t"}, T0 + 5),
        say("\n\n", T0 + 6),
        line({"sessionUpdate": "tool_call", "toolCallId": "d", "title": "t"}, T0 + 7),
    ])  # fmt: skip
    session = load(tmp_path)
    assert said(session) == [("user", "fix this"), ("assistant", "Done.")], "whitespace alone is no turn"
    assert census(session)[("agent_message_chunk/empty", Disposition.SKIPPED)] == 1
    assert [t.index for t in session.turns] == [0, 3]
    assert census(session)[("agent_thought_chunk", Disposition.HARNESS)] == 1
    assert census(session)[("agent_message_chunk", Disposition.TURN)] == 2


def test_rewind_drops_the_superseded_prompt_and_the_last_marker_wins(tmp_path: Path) -> None:
    rewind = {"sessionUpdate": "rewind_marker", "target_prompt_index": 1, "created_at": "2026-09-21T14:13:30Z"}
    session_dir(tmp_path, [
        user("one", 0, T0), say("a1", T0 + 1),
        user("two", 1, T0 + 2), say("a2", T0 + 3),
        line({"sessionUpdate": "tool_call", "toolCallId": "c-2", "title": "grep"}, T0 + 4),
        line(rewind, T0 + 5, xai=True),
        user("two again", 1, T0 + 6), say("a2'", T0 + 7),
        line(rewind, T0 + 8, xai=True),
        user("two, third try", 1, T0 + 9), say("a2''", T0 + 10),
    ])  # fmt: skip
    session = load(tmp_path)
    assert said(session) == [("user", "one"), ("assistant", "a1"), ("user", "two, third try"), ("assistant", "a2''")]
    assert session.tool_calls == (), "the rewound prompt's tool call went with it"
    counts = census(session)
    assert counts[("user_message_chunk/rewound", Disposition.SKIPPED)] == 2
    assert counts[("tool_call/rewound", Disposition.SKIPPED)] == 1
    assert counts[("rewind_marker", Disposition.METADATA)] == 2


def test_harness_user_chunks_are_never_the_persons_turns(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        user("<system-reminder>host</system-reminder>", None, T0, hostTurn=True),
        user("real prompt", 0, T0 + 1),
        say("working", T0 + 2),
        user("Background task finished: build ok", None, T0 + 3),  # injected mid-turn: no promptIndex
        user("The user sent a message while you were working:\n<user_query>\nstop after this\n</user_query>", None,
             T0 + 4),
        say("ok", T0 + 5),
        line({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "ls",
              "_meta": {"bash_command": "ls"}}, "_meta": {"modelId": "grok-4.5"}}, T0 + 6),
        user("<fork-context>the parent's history</fork-context>\nnext prompt", 1, T0 + 7),
        line({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Loaded hooks (9)"},
              "_meta": {"hostTurn": True}}, T0 + 8),
        user("Background task task-1 finished", 2, T0 + 9, hideFromScrollback=True),
        say("The build is done.", T0 + 10),
    ])  # fmt: skip
    session = load(tmp_path)
    assert [t for r, t in said(session) if r == "user"] == ["real prompt", "stop after this", "next prompt"]
    counts = census(session)
    assert counts[("user_message_chunk/host_turn", Disposition.HARNESS)] == 1
    assert counts[("user_message_chunk/unmarked", Disposition.HARNESS)] == 1
    assert counts[("user_message_chunk/interjection", Disposition.TURN)] == 1
    assert counts[("user_message_chunk/bash_command", Disposition.SKIPPED)] == 1
    assert counts[("user_message_chunk/context_wrapper", Disposition.TURN)] == 1
    assert counts[("agent_message_chunk/host_turn", Disposition.HARNESS)] == 1
    assert counts[("user_message_chunk/auto_prompt", Disposition.HARNESS)] == 1
    assert said(session)[-1] == ("assistant", "The build is done.")


def test_a_streaming_attempt_reset_drops_the_text_streamed_before_it(tmp_path: Path) -> None:
    reset = line({"sessionUpdate": "streaming_attempt_reset"}, T0 + 3, xai=True)
    session_dir(
        tmp_path, [user("q", 0, T0), say("half an ans", T0 + 1), say("wer", T0 + 2), reset, say("final", T0 + 4)]
    )
    session = load(tmp_path)
    assert said(session) == [("user", "q"), ("assistant", "final")]
    assert census(session)[("agent_message_chunk/reset", Disposition.SKIPPED)] == 2


# --- tools -----------------------------------------------------------------------------------------------------------


def test_tool_result_is_replaced_by_the_terminal_update_not_appended(tmp_path: Path) -> None:
    def update(status: str, text: str, ms: int) -> dict[str, Any]:
        content = [{"type": "content", "content": {"type": "text", "text": text}}]
        return line(
            {"sessionUpdate": "tool_call_update", "toolCallId": "c-1", "status": status, "content": content}, ms
        )

    session_dir(tmp_path, [
        user("run it", 0, T0), say("Running.", T0 + 1),
        line({"sessionUpdate": "tool_call", "toolCallId": "c-1", "title": "run_terminal_cmd", "status": "pending",
              "rawInput": {"command": "make"}}, T0 + 2),
        update("in_progress", "compiling", T0 + 3),
        update("in_progress", "compiling\nlinking", T0 + 4),
        update("failed", "error: missing symbol", T0 + 5),
        line({"sessionUpdate": "tool_call_update", "toolCallId": "c-1", "title": "make (failed)"}, T0 + 6),
        line({"sessionUpdate": "tool_call_update", "toolCallId": "ghost", "status": "completed"}, T0 + 7),
    ])  # fmt: skip
    session = load(tmp_path)
    [call] = session.tool_calls
    assert (call.call_id, call.name, call.input) == ("c-1", "run_terminal_cmd", '{"command":"make"}')
    assert call.output == "error: missing symbol" and call.is_error is True
    assert call.turn_index == 1, "the call belongs to the assistant text it follows"
    assert (call.started_at, call.ended_at) == (at(T0 + 2), at(T0 + 5))
    assert census(session)[("tool_call_update/orphan", Disposition.TOOL)] == 1


def test_repeated_tool_outputs_are_never_accumulated(tmp_path: Path) -> None:
    """Each update repeats a 2 MiB output; the memory a read needs does not grow with how often (4 or 20 times)."""
    big = "y" * (2 * 1024 * 1024)
    limits = dataclasses.replace(SETTLED, max_field_bytes=64 * 1024)

    def peak_reading(repeats: int) -> int:
        home = tmp_path / str(repeats)
        updates = [user("go", 0, T0), line({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t"}, T0 + 1)]
        updates += [
            line({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed",
                  "content": [{"type": "content", "content": {"type": "text", "text": f"{i}{big}"}}]}, T0 + 2 + i)
            for i in range(repeats)
        ]  # fmt: skip
        session_dir(home, updates)
        [source] = discover(home)
        tracemalloc.start()
        try:
            found = list(read_source(source, limits))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        [loaded] = found
        assert isinstance(loaded, Loaded)
        [call] = loaded.session.tool_calls
        assert call.output is not None and call.output.startswith(f"{repeats - 1}y") and "clipped" in call.output
        return peak

    few, many = peak_reading(4), peak_reading(20)
    assert many < few + 4 * 1024 * 1024, f"peak {many} bytes for 20 repeats against {few} for 4: outputs were held"


# --- usage and models --------------------------------------------------------------------------------------------


def test_usage_is_counted_once_per_prompt_from_turn_completed(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        user("q1", 0, T0), say("a1", T0 + 1),
        done("p1", T0 + 2, inputTokens=1000, cachedReadTokens=800, cacheCreationTokens=50, outputTokens=40,
             reasoningTokens=10, costUsdTicks=25_000_000),
        done("p1", T0 + 3, inputTokens=1000, cachedReadTokens=800, outputTokens=40),  # written again: not twice
        user("q2", 1, T0 + 4), say("a2", T0 + 5),
        done("p2", T0 + 6, inputTokens=500, cachedReadTokens=100, outputTokens=5, costUsdTicks=9,
             usageIsIncomplete=True, modelUsage={"grok-code-fast": {"inputTokens": 500, "outputTokens": 5}}),
        done("p3", T0 + 7),  # a cancelled prompt without usage
    ])  # fmt: skip
    session = load(tmp_path)
    first, second = session.usage
    assert (first.input_tokens, first.cache_read_tokens, first.cache_write_tokens) == (200, 800, 50)
    assert (first.output_tokens, first.reasoning_tokens, first.cost_usd) == (40, 10, 0.0025)
    assert (first.response_id, first.model, first.timestamp) == ("p1", "grok-4.5", at(T0 + 2))
    assert (second.input_tokens, second.model, second.cost_usd) == (400, "grok-code-fast", None)
    assert census(session)[("turn_completed", Disposition.METADATA)] == 4


def test_model_comes_from_the_chunks_and_model_changed(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        user("q", 0, T0), say("a", T0 + 1),
        line({"sessionUpdate": "model_changed", "model_id": "grok-code-fast"}, T0 + 2, xai=True),
        user("q2", 1, T0 + 3, modelId="grok-code-fast"), say("b", T0 + 4),
    ])  # fmt: skip
    session = load(tmp_path)
    assert [t.model for t in session.turns if t.role is Role.ASSISTANT] == ["grok-4.5", "grok-code-fast"]
    assert session.models == ("grok-4.5", "grok-code-fast")


# --- time --------------------------------------------------------------------------------------------------------


def test_agent_timestamp_ms_is_preferred_over_the_envelope_timestamp(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        line({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "q"},
              "_meta": {"promptIndex": 0}}, T0 + 500, stamp=T0 // 1000 + 100),
        line({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}}, None,
             stamp=T0 // 1000 + 7),
    ])  # fmt: skip
    session = load(tmp_path)
    assert [t.timestamp for t in session.turns] == [at(T0 + 500), at(T0 + 7000)]


def test_a_forks_copied_lines_are_dated_by_agent_timestamp_ms(tmp_path: Path) -> None:
    fork_time = T0 // 1000 + 3600  # the copy re-stamps every envelope with the time of the fork
    session_dir(tmp_path, [
        line({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "parent prompt"},
              "_meta": {"promptIndex": 0}}, T0, stamp=fork_time),
        line({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "parent answer"}},
             T0 + 1000, stamp=fork_time),
        user("the fork's own prompt", 1, T0 + 3_600_000 + 5000),
    ], session_kind="fork")  # fmt: skip
    session = load(tmp_path)
    assert [t.timestamp for t in session.turns] == [at(T0), at(T0 + 1000), at(T0 + 3_605_000)]


def test_a_torn_last_line_of_a_recent_updates_jsonl_is_deferred(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, [user("q", 0, T0), say("a", T0 + 1)])
    with open(folder / "updates.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"timestamp":1,"method":"session/update","params":{"update":{"sessionUp')
    found = outcomes(tmp_path, dataclasses.replace(SETTLED, settle_seconds=600.0))
    assert [type(o) for o in found] == [Deferred] and found[0].code is DeferCode.WRITE_IN_PROGRESS
    old = time.time() - 3600
    os.utime(folder / "updates.jsonl", (old, old))
    [rejected] = outcomes(tmp_path, dataclasses.replace(SETTLED, settle_seconds=600.0))
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.TRUNCATED_TAIL


# --- unknown shapes ------------------------------------------------------------------------------------------------


def test_unknown_update_kinds_are_counted_and_skipped(tmp_path: Path) -> None:
    session_dir(tmp_path, [
        user("q", 0, T0),
        line({"sessionUpdate": "hologram", "text": "not a turn"}, T0 + 1),
        line({"sessionUpdate": "quantum_state"}, T0 + 2, xai=True),
        {"timestamp": 1, "method": "_x.ai/session/other", "params": {"update": {"sessionUpdate": "x"}}},
        say("a", T0 + 3),
    ])  # fmt: skip
    session = load(tmp_path)
    assert said(session) == [("user", "q"), ("assistant", "a")]
    counts = census(session)
    assert counts[("hologram", Disposition.SKIPPED)] == 1
    assert counts[("quantum_state", Disposition.SKIPPED)] == 1
    assert counts[("method/_x.ai/session/other", Disposition.SKIPPED)] == 1


def test_an_updates_jsonl_that_is_not_an_update_stream_is_rejected_unsupported_format(tmp_path: Path) -> None:
    session_dir(tmp_path, [user("q", 0, T0), {"type": "update", "payload": 1}])
    [rejected] = outcomes(tmp_path)
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.UNSUPPORTED_FORMAT
    assert rejected.line == 1


def test_a_tool_input_nested_too_deep_to_store_is_bad_shape_and_one_that_can_be_stored_is(tmp_path: Path) -> None:
    """1,020 levels: within what the JSON parser accepts; whether it can be written back depends on the interpreter
    (Python 3.11's JSON writer recurses past its limit there, 3.13's does not): stored whole where it can be, a
    `bad_shape` rejection where it cannot, never a crash."""
    deep = "[" * 1020 + "]" * 1020
    call = json.dumps(line({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "rawInput": 0}, T0 + 1))
    session_dir(tmp_path, [user("q", 0, T0), call.replace('"rawInput": 0', f'"rawInput": {deep}')])
    [outcome] = outcomes(tmp_path)
    try:
        stored = json_text(json.loads(deep))
    except RecursionError:
        assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE, outcome
        assert "rawInput nested too deep" in outcome.detail, outcome
    else:
        assert isinstance(outcome, Loaded), outcome
        assert [c.input for c in outcome.session.tool_calls] == [stored]


def test_a_known_update_with_a_wrong_field_type_is_bad_shape(tmp_path: Path) -> None:
    session_dir(tmp_path, [user("q", 0, T0), line({"sessionUpdate": "rewind_marker", "target_prompt_index": "1"},
                                                   T0 + 1, xai=True)])  # fmt: skip
    [rejected] = outcomes(tmp_path)
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.BAD_SHAPE


def test_a_symlinked_updates_jsonl_is_never_read_and_chat_history_stays_the_unit(tmp_path: Path) -> None:
    outside = write_jsonl(tmp_path / "elsewhere" / "updates.jsonl", [user("not this session's", 0, T0)])
    chat = [{"type": "user", "content": [{"type": "text", "text": "hello"}], "prompt_index": 0}]
    folder = session_dir(tmp_path / "home", None, chat)
    os.symlink(outside, folder / "updates.jsonl")
    assert [Path(s.path).name for s in discover(tmp_path / "home")] == ["chat_history.jsonl"]
    assert said(load(tmp_path / "home")) == [("user", "hello")]


def test_a_session_that_gains_updates_jsonl_is_the_same_session_after_the_next_run(tmp_path: Path) -> None:
    """Its unit moves from chat_history.jsonl to updates.jsonl: the run loads it again under the same id, no
    duplicate, with the turns the compaction had dropped."""
    home = tmp_path / "home"
    chat = [{"type": "user", "content": [{"type": "text", "text": "second"}], "prompt_index": 1}]
    folder = session_dir(home / ".grok", None, chat)
    settings = load_settings(
        home=home, data_dir=tmp_path / "data", sources=["grok"], env={"HOME": str(home)}, lock_wait=5
    )

    def corpus() -> list[tuple[Any, ...]]:
        con = duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True)
        try:
            return con.execute("SELECT session_id, role, text FROM turns ORDER BY turn_index").fetchall()
        finally:
            con.close()

    run_etl(settings, as_tasks=False)
    assert corpus() == [(f"grok-{SID}", "user", "second")]
    write_jsonl(folder / "updates.jsonl", [user("first", 0, T0), say("one", T0 + 1), user("second", 1, T0 + 2)])
    run_etl(settings, as_tasks=False)
    sid = f"grok-{SID}"
    assert corpus() == [(sid, "user", "first"), (sid, "assistant", "one"), (sid, "user", "second")]
    con = duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
    finally:
        con.close()
