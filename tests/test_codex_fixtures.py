"""Codex over the shared fixtures: every file reaches a defined outcome, the real rollout's counts, golden output,
and arbitrary bytes in a discovered rollout give a classified outcome."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.codex import discover
from extractors.errors import RejectCode
from extractors.model import Agent, Deferred, Disposition, Loaded, Rejected, Role, Session
from tests.support import SETTLED, SHARED_FIXTURES, assert_golden, outcomes_under, read_one, shared_fixtures

CODEX = SHARED_FIXTURES / "codex"
REAL = "codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"

# Expected outcome per shared fixture file (the fixtures are not in the real directory layout; each is read directly).
EXPECTED: dict[str, str] = {
    REAL: "loaded",
    "codemie-ai__codemie-code/turn-2.jsonl": "loaded",
    "codemie-ai__codemie-code/turn-spawn-skill.jsonl": "loaded",
    # A schema-coverage collage: records of several rollouts in one file; line 28 is another thread's session_meta
    # after this thread's own turns.
    "jazzyalex__agent-sessions/small.jsonl": "rejected:inconsistent_source",
}


def _needs_fixtures() -> None:
    shared_fixtures()


def _session(relative: str) -> Session:
    [outcome] = read_one(Agent("codex"), CODEX / relative)
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def test_contract_every_shared_fixture_reaches_its_outcome() -> None:
    _needs_fixtures()
    files = sorted(p.relative_to(CODEX).as_posix() for p in CODEX.rglob("*") if p.is_file())
    assert files == sorted(EXPECTED), "a shared Codex fixture without an expected outcome"
    for relative, expected in EXPECTED.items():
        outcomes = read_one(Agent("codex"), CODEX / relative)
        assert len(outcomes) == 1
        [outcome] = outcomes
        if expected == "loaded":
            assert isinstance(outcome, Loaded), (relative, outcome)
        else:
            assert isinstance(outcome, Rejected) and f"rejected:{outcome.code}" == expected, (relative, outcome)


def test_contract_discovery_over_a_real_layout_copy(tmp_path: Path) -> None:
    _needs_fixtures()
    day = tmp_path / "sessions/2026/05/11"
    day.mkdir(parents=True)
    shutil.copy(CODEX / REAL, day / Path(REAL).name)
    shutil.copy(CODEX / REAL, tmp_path / "sessions" / "rollout-2026-05-11T13-28-45-legacy-flat-copy.jsonl")
    assert len(list(discover(tmp_path / "sessions"))) == 2
    outcomes = outcomes_under(Agent("codex"), tmp_path / "sessions")
    assert all(isinstance(o, Loaded) for outs in outcomes.values() for o in outs)


def test_real_rollout_counts_verified_by_hand() -> None:
    """The real (FILTERED) Codex Desktop rollout: no turn_context, no user response_items, no token_count.

    Counted with a throwaway script over the raw JSON lines (not this extractor): `event_msg` `user_message` at lines
    1, 30, 32; `response_item` message role assistant at lines 29, 31, 98; 38 `function_call` (35 exec_command,
    3 js in namespace mcp__node_repl__) and 38 `function_call_output`, every call_id matched; outputs saying
    "Process exited with code N": 34 with 0, 1 with 1, and 3 (the js calls) without an exit code.
    """
    _needs_fixtures()
    session = _session(REAL)
    assert session.session_id == "codex-019e1695-0522-7c83-8b39-0dd379793f80"
    assert session.started_at == datetime(2026, 5, 11, 10, 28, 45, 482000, tzinfo=UTC)
    assert [t.index for t in session.turns if t.role is Role.USER] == [1, 30, 32]
    assert [t.index for t in session.turns if t.role is Role.ASSISTANT] == [29, 31, 98]
    assert len(session.tool_calls) == 38 and all(c.output is not None for c in session.tool_calls)
    assert Counter(c.name for c in session.tool_calls) == {"exec_command": 35, "mcp__node_repl__js": 3}
    assert Counter(c.is_error for c in session.tool_calls) == {False: 34, True: 1, None: 3}
    assert session.usage == () and session.models == ()
    # Line 1 is a Codex Desktop wrapper: "# Files mentioned by the user: ... ## My request for Codex:\nanalyze ..."
    first = session.turns[0]
    assert first.text.startswith("analyze trascript and summarzie action items")
    assert first.attachments == ("file /Users/Sample_User/Downloads/Sample Project Demo Prep.vtt",)
    assert sum(session.census.values()) == 99  # every line counted once
    assert session.census[("response_item/reasoning", "0.128.0-alpha.1", Disposition.HARNESS)] == 16


def test_golden_real_rollout() -> None:
    _needs_fixtures()
    assert_golden("codex_real_rollout_019e1695", _session(REAL))


def test_hand_written_turn_2_usage_and_duplicates() -> None:
    _needs_fixtures()
    session = _session("codemie-ai__codemie-code/turn-2.jsonl")
    assert [(t.index, t.role) for t in session.turns] == [
        (6, Role.USER),
        (10, Role.ASSISTANT),
        (18, Role.USER),
        (22, Role.ASSISTANT),
    ]
    # Totals 1024/512/12/8 then 1100/512/20/10: deltas, input net of cache.
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) for u in session.usage] == [
        (512, 512, 12, 8),
        (76, 0, 8, 2),
    ]


def test_hand_written_spawn_links_the_spawned_thread() -> None:
    _needs_fixtures()
    session = _session("codemie-ai__codemie-code/turn-spawn-skill.jsonl")
    spawned = {c.call_id: c.spawned_session_id for c in session.tool_calls}
    assert spawned == {"call_skill1": None, "call_spawn1": "codex-child-thread-uuid", "call_wait1": None}


def test_schema_coverage_prefix_of_small_loads(tmp_path: Path) -> None:
    """Lines 0-27 of small.jsonl are one coherent rollout (the rest is a collage): read them in tmp_path."""
    _needs_fixtures()
    lines = (CODEX / "jazzyalex__agent-sessions/small.jsonl").read_text(encoding="utf-8").splitlines()[:28]
    path = tmp_path / "rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-000000000000.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    [outcome] = read_one(Agent("codex"), path)
    assert isinstance(outcome, Loaded), outcome
    session = outcome.session
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (3, Role.USER, "List the files"),
        (22, Role.ASSISTANT, "Found 2 files."),
    ]
    assert session.turns[1].attachments == ("image",)
    calls = {c.call_id: (c.name, c.output) for c in session.tool_calls}
    assert calls["call-1"] == ("shell", "a.txt\nb.txt\n") and calls["call-2"] == ("shell", "a.txt\n")
    assert calls["ws-1"] == ("web_search", None) and calls["call-3"][0] == "tool_search"
    [usage] = session.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (16341 - 3584, 3584, 0)
    assert session.models == ("gpt-5.6-luna",) and usage.model == "gpt-5.6-luna"
    assert sum(session.census.values()) == 28


# ---- arbitrary input never crashes -------------------------------------------------------------------------------

_KINDS = ["session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state", "x"]
_SUBTYPES = [
    "message",
    "function_call",
    "function_call_output",
    "user_message",
    "agent_message",
    "token_count",
    "task_started",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "collab_agent_spawn_end",
    None,
]
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=8)
    | st.sampled_from(["user", "assistant", "019e1695-0522-7c83-8b39-0dd379793f80"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "text",
                    "type",
                    "role",
                    "content",
                    "id",
                    "call_id",
                    "info",
                    "total_token_usage",
                    "input_tokens",
                    "message",
                    "turn_id",
                    "timestamp",
                    "forked_from_id",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_records = st.fixed_dictionaries(
    {"type": st.sampled_from(_KINDS), "timestamp": st.sampled_from(["2026-05-11T10:00:00Z", "bad", None])},
    optional={
        "payload": st.one_of(
            _values,
            st.fixed_dictionaries(
                {"type": st.sampled_from(_SUBTYPES)},
                optional={
                    "role": st.sampled_from(["user", "assistant", "developer", 3]),
                    "content": _values,
                    "id": _values,
                    "call_id": _values,
                    "info": _values,
                    "message": _values,
                    "turn_id": _values,
                    "output": _values,
                    "name": _values,
                    "timestamp": _values,
                    "forked_from_id": _values,
                },
            ),
        )
    },
)


def _classified(path: Path) -> None:
    outcomes = read_one(Agent("codex"), path, SETTLED)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded | Rejected | Deferred)
    if isinstance(outcomes[0], Loaded):
        # The census counts every record exactly once.
        records = sum(1 for line in path.read_bytes().splitlines() if line.strip())
        assert sum(outcomes[0].session.census.values()) == records


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_property_arbitrary_bytes_give_a_classified_outcome(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "sessions" / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    assert [Path(s.path) for s in discover(tmp_path / "sessions")] == [path]
    _classified(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_records, max_size=8))
def test_property_arbitrary_rollout_shaped_records_give_a_classified_outcome(
    tmp_path: Path, records: list[object]
) -> None:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    _classified(path)


def test_reject_invalid_json_mid_file_is_classified(tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text('{"type":"session_meta","payload":{"id":"a","timestamp":"2026-05-11T10:00:00Z"}}\n{nope\n{}\n')
    [outcome] = read_one(Agent("codex"), path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.INVALID_JSON and outcome.line == 1
