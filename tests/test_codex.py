"""Codex extractor rules, one small rollout per rule, named after the outcome."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors.codex import default_roots, discover
from extractors.codex.tables import CONTEXTUAL_FRAGMENTS, contextual_fragment, unwrap_ide_context
from extractors.errors import RejectCode
from extractors.ids import session_id
from extractors.model import Agent, Disposition, LinkKind, Loaded, Rejected, Role, Session
from tests.support import outcomes_under, read_one, write_jsonl

FORK_MS = 1_778_500_000_000  # 2026-05-11T11:46:40Z


def v7(ms: int, tail: int = 1) -> str:
    """A UUIDv7 string minted at `ms`."""
    digits = f"{ms:012x}7000{8000 + tail:04x}{tail:012x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


OWN = v7(FORK_MS, 1)
PARENT = v7(FORK_MS - 3_600_000, 2)
TS = "2026-05-11T11:46:40.000Z"


def env(kind: str, payload: dict[str, Any], ts: str | None = TS) -> dict[str, Any]:
    record: dict[str, Any] = {"type": kind, "payload": payload}
    if ts is not None:
        record["timestamp"] = ts
    return record


def meta(native: str = OWN, ts: str | None = TS, **extra: Any) -> dict[str, Any]:
    payload = {"id": native, "timestamp": ts, "cwd": "/w", "cli_version": "0.129.0", **extra}
    return env("session_meta", payload)


def turn_context(turn_id: str | None, model: str = "gpt-5.4") -> dict[str, Any]:
    payload: dict[str, Any] = {"cwd": "/w", "model": model}
    if turn_id is not None:
        payload["turn_id"] = turn_id
    return env("turn_context", payload)


def user_event(text: str, **extra: Any) -> dict[str, Any]:
    return env("event_msg", {"type": "user_message", "message": text, "images": [], "local_images": [], **extra})


def user_item(*texts: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": t} for t in texts]
    return env("response_item", {"type": "message", "role": "user", "content": content})


def assistant(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return env("response_item", {"type": "message", "role": "assistant", "content": content})


def agent_event(text: str) -> dict[str, Any]:
    return env("event_msg", {"type": "agent_message", "message": text})


def tokens(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, Any]:
    usage = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }
    info = {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": 258400}
    return env("event_msg", {"type": "token_count", "info": info})


def rollout(tmp_path: Path, records: list[Any], name: str = f"rollout-2026-05-11T13-46-40-{OWN}.jsonl") -> Path:
    return write_jsonl(tmp_path / "sessions" / "2026" / "05" / "11" / name, records)


def load(path: Path) -> Session:
    outcomes = read_one(Agent("codex"), path)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded), outcomes
    return outcomes[0].session


def reject(path: Path) -> Rejected:
    outcomes = read_one(Agent("codex"), path)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Rejected), outcomes
    return outcomes[0]


def texts(session: Session, role: Role) -> list[str]:
    return [t.text for t in session.turns if t.role is role]


# ---- roots and discovery --------------------------------------------------------------------------------------


def test_ok_default_roots_are_sessions_and_archived_under_codex_home(tmp_path: Path) -> None:
    assert default_roots(tmp_path, {}) == [tmp_path / ".codex/sessions", tmp_path / ".codex/archived_sessions"]
    roots = default_roots(tmp_path, {"CODEX_HOME": "/a, ~/b"})
    assert roots == [
        Path("/a/sessions"),
        Path("/a/archived_sessions"),
        tmp_path / "b/sessions",
        tmp_path / "b/archived_sessions",
    ]


def test_ok_discover_finds_dated_and_flat_rollouts_only(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    write_jsonl(root / "2026/05/11" / f"rollout-2026-05-11T13-46-40-{OWN}.jsonl", [meta()])
    write_jsonl(root / f"rollout-{PARENT}.jsonl", [meta(PARENT)])
    write_jsonl(root / "2026/05/11" / "notes.jsonl", [{}])
    (root / "history.jsonl").write_text("{}\n")
    found = sorted(Path(s.path).relative_to(root).as_posix() for s in discover(root))
    assert found == [f"2026/05/11/rollout-2026-05-11T13-46-40-{OWN}.jsonl", f"rollout-{PARENT}.jsonl"]


def test_reject_duplicate_archived_copy_when_the_live_rollout_exists(tmp_path: Path) -> None:
    name = f"rollout-2026-05-11T13-46-40-{OWN}.jsonl"
    records = [meta(), user_event("hello"), assistant("hi")]
    write_jsonl(tmp_path / "sessions/2026/05/11" / name, records)
    write_jsonl(tmp_path / "archived_sessions" / name, records)
    live = outcomes_under(Agent("codex"), tmp_path / "sessions")
    archived = outcomes_under(Agent("codex"), tmp_path / "archived_sessions")
    assert [type(o) for outs in live.values() for o in outs] == [Loaded]
    [[dup]] = archived.values()
    assert isinstance(dup, Rejected) and dup.code is RejectCode.DUPLICATE
    assert dup.session_hint == session_id(Agent("codex"), OWN)


def test_ok_archived_rollout_without_a_live_copy_is_loaded_as_archived(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "archived_sessions" / f"rollout-{OWN}.jsonl", [meta(), user_event("hello")])
    session = load(path)
    assert session.archived is True and texts(session, Role.USER) == ["hello"]


# ---- identity, times, format generations ----------------------------------------------------------------------


def test_ok_identity_and_metadata_from_the_first_session_meta(tmp_path: Path) -> None:
    records = [
        meta(git={"branch": "main", "commit_hash": "abc"}),
        turn_context(v7(FORK_MS + 1), "gpt-5.4"),
        user_event("one"),
        assistant("two"),
        turn_context(v7(FORK_MS + 2), "gpt-5.5"),
        env("event_msg", {"type": "thread_name_updated", "thread_id": OWN, "thread_name": "A title"}),
        env("event_msg", {"type": "task_complete"}, ts="2026-05-11T12:00:00.000Z"),
    ]
    session = load(rollout(tmp_path, records))
    assert session.session_id == f"codex-{OWN}" and session.native_id == OWN
    assert session.started_at == datetime(2026, 5, 11, 11, 46, 40, tzinfo=UTC)
    assert session.ended_at == datetime(2026, 5, 11, 12, 0, tzinfo=UTC)
    assert (session.cwd, session.git_branch, session.title) == ("/w", "main", "A title")
    assert session.models == ("gpt-5.4", "gpt-5.5") and session.cli_versions == ("0.129.0",)
    assert [t.model for t in session.turns if t.role is Role.ASSISTANT] == ["gpt-5.4"]


def test_ok_start_falls_back_to_the_earliest_envelope_time(tmp_path: Path) -> None:
    records = [meta(ts=None), user_event("hi")]
    records[0]["timestamp"] = "2026-05-11T11:00:00.000Z"
    session = load(rollout(tmp_path, records))
    assert session.started_at == datetime(2026, 5, 11, 11, 0, tzinfo=UTC)


def test_reject_missing_timestamp_when_no_time_anywhere(tmp_path: Path) -> None:
    first = meta(ts=None)
    del first["timestamp"]
    assert reject(rollout(tmp_path, [first, env("event_msg", {"type": "task_started"}, ts=None)])).code is (
        RejectCode.MISSING_TIMESTAMP
    )


def test_reject_missing_session_id_without_session_meta(tmp_path: Path) -> None:
    assert reject(rollout(tmp_path, [user_event("hi")])).code is RejectCode.MISSING_SESSION_ID
    assert reject(rollout(tmp_path, [meta(native="")])).code is RejectCode.MISSING_SESSION_ID


def test_reject_no_conversation_for_an_empty_rollout(tmp_path: Path) -> None:
    path = rollout(tmp_path, [])
    path.write_text("")
    assert reject(path).code is RejectCode.NO_CONVERSATION


def test_ok_pre_envelope_rollout_with_header_state_markers_and_bare_items(tmp_path: Path) -> None:
    records = [
        {"id": OWN, "timestamp": "2025-08-20T13:20:47.060Z", "instructions": "AGENTS", "git": {"branch": "dev"}},
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<user_instructions>\nx\n</user_instructions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}],
        },
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": "index the rollouts"}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "call_1"},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"output":"README.md","metadata":{"exit_code":0}}',
        },
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "listed"}]},
    ]
    session = load(rollout(tmp_path, records, name=f"rollout-{OWN}.jsonl"))
    assert session.started_at == datetime(2025, 8, 20, 13, 20, 47, 60000, tzinfo=UTC)
    assert [(t.index, t.role, t.text, t.timestamp) for t in session.turns] == [
        (4, Role.USER, "index the rollouts", None),
        (9, Role.ASSISTANT, "listed", None),
    ]
    assert session.git_branch == "dev" and session.cli_versions == ()
    [call] = session.tool_calls
    assert (call.name, call.is_error, call.turn_index) == ("shell", False, 6)
    assert session.census[("legacy/state", "", Disposition.SKIPPED)] == 2
    assert session.census[("response_item/message/user/contextual", "", Disposition.HARNESS)] == 2


def test_reject_unsupported_format_for_codex_exec_json_output(tmp_path: Path) -> None:
    records = [
        {"type": "thread.started", "thread_id": OWN},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "hi"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}},
    ]
    rejected = reject(rollout(tmp_path, records))
    assert rejected.code is RejectCode.UNSUPPORTED_FORMAT and "exec --json" in rejected.detail


def test_ok_unknown_record_and_event_kinds_are_skipped_and_counted(tmp_path: Path) -> None:
    records = [
        meta(),
        env("hologram_state", {"x": 1}),
        env("event_msg", {"type": "telepathy_started"}),
        env("response_item", {"type": "quantum_call", "id": "q"}),
        user_event("still here"),
    ]
    session = load(rollout(tmp_path, records))
    assert texts(session, Role.USER) == ["still here"]
    for kind in ("hologram_state", "event_msg/telepathy_started", "response_item/quantum_call"):
        assert session.census[(kind, "0.129.0", Disposition.SKIPPED)] == 1


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (env("response_item", "not an object"), "payload"),  # type: ignore[arg-type]
        (env("response_item", {"type": "message", "role": "user", "content": 7}), "content"),
        (env("event_msg", {"type": "user_message", "message": 42}), "message"),
        (env("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": "9"}}}), "token"),
        (env("response_item", {"type": "function_call", "name": "x", "arguments": "{}"}), "call_id"),
    ],
)
def test_reject_bad_shape_for_a_known_kind_with_a_broken_shape(tmp_path: Path, record: Any, why: str) -> None:
    rejected = reject(rollout(tmp_path, [meta(), record, user_event("after")]))
    assert rejected.code is RejectCode.BAD_SHAPE and rejected.line == 1, why


def test_ok_resumed_session_repeating_the_same_meta_is_not_an_inconsistency(tmp_path: Path) -> None:
    records = [meta(), user_event("one"), assistant("a"), meta(), meta(cli_version="0.130.0"), user_event("two")]
    session = load(rollout(tmp_path, records))
    assert texts(session, Role.USER) == ["one", "two"]
    assert session.census[("session_meta", "0.129.0", Disposition.METADATA)] == 2
    assert session.cli_versions == ("0.129.0", "0.130.0")
    assert session.census[("event_msg/user_message", "0.130.0", Disposition.TURN)] == 1


def test_reject_inconsistent_source_for_another_thread_meta_after_own_records(tmp_path: Path) -> None:
    records = [meta(), user_event("one"), meta(PARENT), user_event("two")]
    rejected = reject(rollout(tmp_path, records))
    assert rejected.code is RejectCode.INCONSISTENT_SOURCE and rejected.line == 2


# ---- person's turn versus injected context --------------------------------------------------------------------


FRAGMENT_SAMPLES: dict[str, str] = {
    "user_instructions": "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>",
    "user_instructions_legacy": "<user_instructions>\nbe nice\n</user_instructions>",
    "environment_context": "<environment_context>\n  <cwd>/w</cwd>\n  <shell>zsh</shell>\n</environment_context>",
    "extension_context": "<extension_context>\nsteer\n</extension_context>",
    "skill": "<skill>\n<name>x</name>\n<path>/s/SKILL.md</path>\nbody\n</skill>",
    "user_shell_command": "<user_shell_command>\n<command>ls</command>\n<result>a</result>\n</user_shell_command>",
    "turn_aborted": "<turn_aborted>\nThe user interrupted.\n</turn_aborted>",
    "subagent_notification": '<subagent_notification>\n{"agent_id":"x","status":"done"}\n</subagent_notification>',
    "hook_prompt": '<hook_prompt hook_run_id="r1">check the tests</hook_prompt>',
    "internal_model_context": '<codex_internal_context source="goals">\nkeep going\n</codex_internal_context>',
    "legacy_goal_context": "<goal_context>\nobjective\n</goal_context>",
    "next_prompt_suggestion": "<next_prompt_suggestion>\n[SUGGESTION MODE: Suggest what the user might naturally "
    "type next into Codex.]\n</next_prompt_suggestion>",
    "agent_message_board_notification": "<agent_message_board_notification>\nNew post 0190 in discussion 0191. Use "
    "collaboration.read_post or collaboration.read_thread to read it.\n</agent_message_board_notification>",
    "additional_context": "<external_calendar>meeting at 3</external_calendar>",
    "legacy_warning": "Warning: The maximum number of unified exec processes you can keep open is 8.",
}


def test_every_table_fragment_has_a_sample() -> None:
    names = {f.name for f in CONTEXTUAL_FRAGMENTS} | {"additional_context", "legacy_warning"}
    assert names == set(FRAGMENT_SAMPLES)


@pytest.mark.parametrize("name", sorted(FRAGMENT_SAMPLES))
def test_ok_contextual_fragment_is_harness_not_a_turn(tmp_path: Path, name: str) -> None:
    sample = FRAGMENT_SAMPLES[name]
    assert contextual_fragment(sample) == name
    # Fallback stream (no event user messages): the fragment is harness, the person's message a turn.
    session = load(rollout(tmp_path, [meta(), user_item(sample), user_item("real question"), assistant("ok")]))
    assert texts(session, Role.USER) == ["real question"]
    assert session.census[("response_item/message/user/contextual", "0.129.0", Disposition.HARNESS)] == 1
    # Event stream: a user_message carrying only the fragment is harness too.
    session = load(rollout(tmp_path, [meta(), user_event(sample), user_event("real question")]))
    assert texts(session, Role.USER) == ["real question"]
    assert session.census[("event_msg/user_message/contextual", "0.129.0", Disposition.HARNESS)] == 1


def test_ok_legacy_apply_patch_warning_and_plain_text_classification() -> None:
    warning = "Warning: apply_patch was requested via exec_command. Use the apply_patch tool instead of exec_command."
    assert contextual_fragment(warning) == "legacy_warning"
    assert contextual_fragment("please read <environment_context> docs") is None
    assert contextual_fragment("<ENVIRONMENT_CONTEXT>x</environment_context>") == "environment_context"


def test_ok_message_with_agents_md_and_a_person_part_keeps_only_the_person_part(tmp_path: Path) -> None:
    mixed = user_item(FRAGMENT_SAMPLES["user_instructions"], FRAGMENT_SAMPLES["environment_context"], "fix the bug")
    session = load(rollout(tmp_path, [meta(), mixed]))
    assert texts(session, Role.USER) == ["fix the bug"]


def test_ok_event_user_messages_are_the_turns_and_the_item_copy_is_a_duplicate(tmp_path: Path) -> None:
    records = [
        meta(),
        env(
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "<permissions instructions>x</permissions instructions>"}],
            },
        ),
        user_item(FRAGMENT_SAMPLES["environment_context"]),
        user_item("Hello"),
        user_event("Hello"),
        env("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}),
        agent_event("Hi"),
        assistant("Hi"),
    ]
    session = load(rollout(tmp_path, records))
    assert [(t.index, t.role, t.text) for t in session.turns] == [(4, Role.USER, "Hello"), (7, Role.ASSISTANT, "Hi")]
    census = session.census
    assert census[("response_item/message/user", "0.129.0", Disposition.SKIPPED)] == 1
    assert census[("event_msg/agent_message", "0.129.0", Disposition.SKIPPED)] == 1
    assert census[("response_item/message/developer", "0.129.0", Disposition.HARNESS)] == 1
    assert census[("response_item/reasoning", "0.129.0", Disposition.HARNESS)] == 1


def test_ok_legacy_user_message_kinds_for_instructions_are_harness(tmp_path: Path) -> None:
    records = [meta(), user_event("AGENTS text", kind="user_instructions"), user_event("go", kind="plain")]
    assert texts(load(rollout(tmp_path, records)), Role.USER) == ["go"]


def test_ok_agent_message_events_are_the_fallback_without_assistant_items(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, [meta(), user_event("q"), agent_event("answer")]))
    assert texts(session, Role.ASSISTANT) == ["answer"]


def test_ok_ide_wrapper_is_unwrapped_to_the_request(tmp_path: Path) -> None:
    ide = (
        "# Context from my IDE setup:\n\n## Active file: a.py\n\n## Open tabs:\n- a.py: a.py\n\n"
        "## My request for Codex:\nfix it\n"
    )
    short = "# Context from my IDE setup:\n\n## Open tabs:\n- a.py\n\n## My request:\nand this"
    files = (
        "\n# Files mentioned by the user:\n\n## demo.vtt: /tmp/demo.vtt\n\n## shot.png:\nC:/t/shot.png\n\n"
        "## My request for Codex:\nsummarize\n"
    )
    session = load(rollout(tmp_path, [meta(), user_event(ide), user_event(short), user_event(files)]))
    assert [t.text.strip() for t in session.turns] == ["fix it", "and this", "summarize"]
    assert session.turns[2].attachments == ("file /tmp/demo.vtt", "file C:/t/shot.png")


def test_ok_request_header_without_an_ide_opener_is_left_alone() -> None:
    text = "how do I parse\n## My request for Codex:\nlines like this?"
    assert unwrap_ide_context(text).text == text


def test_ok_inline_images_become_references_never_text(tmp_path: Path) -> None:
    blob = "iVBORw0KGgo" + "A" * 4000
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{blob}"}
    item = env(
        "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"}, image]}
    )
    event = user_event("see", images=[f"data:image/png;base64,{blob}"], local_images=["/tmp/a.png"])
    session = load(rollout(tmp_path, [meta(), item, event]))
    [turn] = session.turns
    assert turn.attachments[0].startswith("image/png sha256:") and turn.attachments[1] == "image /tmp/a.png"
    assert blob not in repr(session)


def test_ok_empty_turns_are_dropped_and_others_keep_their_index(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, [meta(), user_event("  "), user_event("real"), assistant("")]))
    assert [(t.index, t.text) for t in session.turns] == [(2, "real")]


# ---- usage -----------------------------------------------------------------------------------------------------


def test_ok_cumulative_token_counts_become_deltas_and_identical_totals_count_once(tmp_path: Path) -> None:
    records = [
        meta(),
        turn_context(v7(FORK_MS + 1), "gpt-5.4"),
        user_event("q"),
        env("event_msg", {"type": "token_count", "info": None}),
        tokens(1000, 400, 50, 10),
        tokens(1000, 400, 50, 10),  # re-emitted identical total
        tokens(1600, 900, 80, 25),
    ]
    session = load(rollout(tmp_path, records))
    rows = [
        (u.turn_index, u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) for u in session.usage
    ]
    # input is stored net of cache: 1000 - 400, then (1600 - 1000) - (900 - 400).
    assert rows == [(4, 600, 400, 50, 10), (6, 100, 500, 30, 15)]
    assert {u.model for u in session.usage} == {"gpt-5.4"}
    assert session.census[("event_msg/token_count", "0.129.0", Disposition.SKIPPED)] == 2
    assert session.census[("event_msg/token_count", "0.129.0", Disposition.METADATA)] == 2


def test_ok_a_total_that_goes_down_is_a_restarted_counter(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, [meta(), tokens(1000, 0, 50), tokens(300, 0, 20)]))
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(1000, 50), (300, 20)]


# ---- forks and subagents ------------------------------------------------------------------------------------------


def fork_records(*, own_turn_id: str | None = None, parent_turn_id: str | None = None) -> list[dict[str, Any]]:
    """A forked rollout: own meta, the parent's meta and REPLAYED history (re-stamped), then the fork's own turn."""
    parent_turn = parent_turn_id if parent_turn_id is not None else v7(FORK_MS - 60_000, 3)
    return [
        meta(forked_from_id=PARENT),
        meta(PARENT, ts="2026-05-11T10:46:40.000Z"),
        turn_context(parent_turn, "gpt-5.2"),
        user_event("parent question"),
        user_item("parent question"),
        assistant("parent answer"),
        tokens(5000, 1000, 300),
        env("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "p1"}),
        env("response_item", {"type": "function_call_output", "call_id": "p1", "output": "x"}),
        env(
            "event_msg",
            {"type": "task_started", "turn_id": v7(FORK_MS + 100, 4) if own_turn_id is None else own_turn_id},
        ),
        turn_context(v7(FORK_MS + 100, 4) if own_turn_id is None else own_turn_id, "gpt-5.4"),
        user_event("fork question"),
        assistant("fork answer"),
        tokens(5000, 1000, 300),  # the parent's total re-emitted: nothing new
        tokens(5600, 1200, 350),
    ]


def test_ok_fork_rollout_loads_only_its_own_turns_and_tokens(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, fork_records()))
    assert session.session_id == f"codex-{OWN}"
    assert [(t.index, t.text) for t in session.turns] == [(11, "fork question"), (12, "fork answer")]
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens) for u in session.usage] == [(400, 200, 50)]
    assert session.tool_calls == () and session.models == ("gpt-5.4",)
    assert session.links[0].other_session_id == f"codex-{PARENT}" and session.links[0].kind is LinkKind.FORK
    census = session.census
    assert census[("replayed/session_meta", "0.129.0", Disposition.SKIPPED)] == 1
    assert census[("replayed/event_msg/user_message", "0.129.0", Disposition.SKIPPED)] == 1
    assert census[("replayed/event_msg/token_count", "0.129.0", Disposition.SKIPPED)] == 1
    assert census[("replayed/response_item/function_call", "0.129.0", Disposition.SKIPPED)] == 1
    assert sum(census.values()) == len(fork_records())


def test_ok_subagent_rollout_keeps_its_own_id_and_links_its_parent(tmp_path: Path) -> None:
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": PARENT, "depth": 1, "agent_role": "explorer"}}}
    records = [meta(source=spawn), turn_context(v7(FORK_MS + 5)), user_event("review code"), assistant("done")]
    session = load(rollout(tmp_path, records))
    assert session.session_id == f"codex-{OWN}" and session.parent_session_id == f"codex-{PARENT}"
    assert [(link.other_session_id, link.kind) for link in session.links] == [(f"codex-{PARENT}", LinkKind.SUBAGENT)]
    assert texts(session, Role.USER) == ["review code"]


def test_ok_subagent_with_replayed_parent_history_is_gated_too(tmp_path: Path) -> None:
    records = fork_records()
    records[0] = meta(parent_thread_id=PARENT, source={"subagent": {"other": "x"}})
    session = load(rollout(tmp_path, records))
    assert texts(session, Role.USER) == ["fork question"] and session.parent_session_id == f"codex-{PARENT}"


def test_reject_undecidable_thread_when_the_replay_never_ends(tmp_path: Path) -> None:
    # Older replayed turn markers without a UUIDv7 turn id, and no own turn that can be dated.
    records = fork_records(own_turn_id="rollout-5", parent_turn_id="0f8c2a3e-1111-4111-8111-111111111111")
    rejected = reject(rollout(tmp_path, records))
    assert rejected.code is RejectCode.UNDECIDABLE_THREAD and rejected.session_hint == f"codex-{OWN}"


def test_reject_undecidable_thread_for_a_replay_without_any_turn_marker(tmp_path: Path) -> None:
    records = [meta(forked_from_id=PARENT), meta(PARENT), user_event("parent question"), assistant("answer")]
    assert reject(rollout(tmp_path, records)).code is RejectCode.UNDECIDABLE_THREAD


def test_ok_fork_of_an_empty_parent_loads_with_no_turns(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, [meta(forked_from_id=PARENT), meta(PARENT)]))
    assert session.turns == () and session.links[0].kind is LinkKind.FORK


def test_ok_fork_never_continued_loads_with_no_turns(tmp_path: Path) -> None:
    session = load(rollout(tmp_path, fork_records()[:9]))
    assert session.turns == () and session.usage == ()


# ---- tool calls ----------------------------------------------------------------------------------------------------


def call(kind: str, call_id: str | None, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"type": kind, **fields}
    if call_id is not None:
        payload["call_id"] = call_id
    return env("response_item", payload)


@pytest.mark.parametrize(
    ("header", "error"),
    [
        ("Exit code: -0", False),
        ("Exit code: 000", False),
        ("Exit code: -1", True),
        ("Exit code: 100", True),
        ("Process exited with code " + "9" * 5000, True),
        ("Exit code: " + "0" * 5000, False),
    ],
    ids=["minus-zero", "zeros", "minus-one", "hundred", "5000-digits", "5000-zeros"],
)
def test_ok_an_exit_code_header_of_any_length_gives_the_error_flag(tmp_path: Path, header: str, error: bool) -> None:
    # int() refuses more than 4,300 digits: a long code in an output's header cost the whole session as a reader bug.
    records = [
        meta(),
        call("function_call", "c1", name="exec_command", arguments='{"cmd":"x"}'),
        call("function_call_output", "c1", output=f"{header}\nWall time: 1s\nOutput:\na"),
    ]
    [tool] = load(rollout(tmp_path, records)).tool_calls
    assert tool.is_error is error


def test_ok_tool_calls_are_joined_to_outputs_with_error_flags(tmp_path: Path) -> None:
    unified_fail = (
        "Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 2\nOriginal token count: 3\nOutput:\nboom"
    )
    records = [
        meta(),
        call("function_call", "c1", name="exec_command", arguments='{"cmd":"false"}'),
        call("function_call_output", "c1", output=unified_fail),
        call("custom_tool_call", "c2", name="apply_patch", input="*** Begin Patch\n*** End Patch"),
        call(
            "custom_tool_call_output",
            "c2",
            output='{"output":"Done!","metadata":{"exit_code":0,"duration_seconds":0.1}}',
        ),
        call("local_shell_call", None, id="ls1", status="completed", action={"type": "exec", "command": ["ls"]}),
        call("function_call_output", "ls1", output="Exit code: 0\nWall time: 1s\nOutput:\na"),
        call("web_search_call", None, id="ws1", status="completed", action={"type": "search", "query": "x"}),
        call("function_call", "c3", name="js", namespace="mcp__node_repl__", arguments="{}"),
        call("function_call_output", "c3", output=[{"type": "input_text", "text": "tabs"}]),
        call("function_call", "c4", name="exec_command", arguments="{}"),
        env("event_msg", {"type": "exec_command_end", "call_id": "c4", "exit_code": 1}),
        call("function_call", "c5", name="spawn_agent", arguments="{}"),
        env("event_msg", {"type": "collab_agent_spawn_end", "call_id": "c5", "new_thread_id": PARENT}),
        call("function_call_output", "nobody", output="orphan"),
    ]
    session = load(rollout(tmp_path, records))
    got = {c.call_id: (c.name, c.is_error, c.output) for c in session.tool_calls}
    assert got["c1"] == ("exec_command", True, unified_fail)
    assert got["c2"][:2] == ("apply_patch", False)
    assert got["ls1"] == ("local_shell", False, "Exit code: 0\nWall time: 1s\nOutput:\na")
    assert got["ws1"] == ("web_search", None, None)
    assert got["c3"] == ("mcp__node_repl__js", None, "tabs")
    assert got["c4"] == ("exec_command", True, None)
    [spawn] = [c for c in session.tool_calls if c.call_id == "c5"]
    assert spawn.spawned_session_id == f"codex-{PARENT}" and spawn.turn_index == 12
    assert session.census[("response_item/function_call_output/orphan", "0.129.0", Disposition.TOOL)] == 1
    assert all(c.started_at is not None for c in session.tool_calls)


# ---- going back: thread_rolled_back ------------------------------------------------------------------------------


def rolled_back(turns: int) -> dict[str, Any]:
    return env("event_msg", {"type": "thread_rolled_back", "num_turns": turns})


def test_ok_rolled_back_prompt_and_answer_are_left_behind_and_the_edit_is_the_turn(tmp_path: Path) -> None:
    # Esc Esc: the person edits their last prompt; Codex drops it (and the answer) from context and writes the edit.
    records = [
        meta(),
        user_event("first question"),  # 1
        assistant("first answer"),  # 2
        user_event("second question, badly put"),  # 3
        call("function_call", "c1", name="shell", arguments='{"cmd":"ls"}'),  # 4
        assistant("second answer"),  # 5
        rolled_back(1),  # 6
        user_event("second question, put well"),  # 7
        assistant("better answer"),  # 8
    ]
    session = load(rollout(tmp_path, records))
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (1, Role.USER, "first question"),
        (2, Role.ASSISTANT, "first answer"),
        (7, Role.USER, "second question, put well"),
        (8, Role.ASSISTANT, "better answer"),
    ]
    assert [c.call_id for c in session.tool_calls] == ["c1"]  # it ran: tool calls and usage stay
    assert session.census[("event_msg/user_message/rolled_back", "0.129.0", Disposition.SKIPPED)] == 1
    assert session.census[("response_item/message/assistant/rolled_back", "0.129.0", Disposition.SKIPPED)] == 1
    assert session.census[("event_msg/thread_rolled_back", "0.129.0", Disposition.METADATA)] == 1
    assert session.census[("event_msg/user_message", "0.129.0", Disposition.TURN)] == 2


def test_ok_rollbacks_apply_in_order_and_never_past_the_first_prompt(tmp_path: Path) -> None:
    records = [
        meta(),
        user_event("q1"),  # 1
        user_event("q2"),  # 2
        user_event("q3"),  # 3
        rolled_back(2),  # 4: drops q2, q3
        user_event("q4"),  # 5
        rolled_back(0),  # 6: nothing
        rolled_back(9),  # 7: more than there are: drops q1 and q4
        user_item("fallback stream is not read here"),  # 8 (a duplicate copy: event stream wins)
        user_event("q5"),  # 9
    ]
    session = load(rollout(tmp_path, records))
    assert [(t.index, t.text) for t in session.turns] == [(9, "q5")]
    assert session.census[("event_msg/user_message/rolled_back", "0.129.0", Disposition.SKIPPED)] == 4


def test_ok_rollback_in_a_rollout_without_event_user_messages_uses_the_item_stream(tmp_path: Path) -> None:
    records = [meta(), user_item("old"), assistant("a"), rolled_back(1), user_item("new"), assistant("b")]
    session = load(rollout(tmp_path, records))
    assert texts(session, Role.USER) == ["new"] and texts(session, Role.ASSISTANT) == ["b"]


def test_reject_bad_shape_for_a_rollback_without_a_count(tmp_path: Path) -> None:
    bad = env("event_msg", {"type": "thread_rolled_back", "num_turns": "one"})
    rejected = reject(rollout(tmp_path, [meta(), user_event("q"), bad]))
    assert rejected.code is RejectCode.BAD_SHAPE and rejected.line == 2
