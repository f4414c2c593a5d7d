"""Claude Code extractor over the shared fixtures (real captures and hand-written samples), golden output, and
Hypothesis properties: any bytes give an outcome, and appending lines never moves an existing turn."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors import claude
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Outcome, Rejected, Role
from tests.claude_records import SID, assistant, envelope, text, tool_result, tool_use, usage, user
from tests.support import (
    SETTLED,
    SHARED_FIXTURES,
    assert_golden,
    outcomes_under,
    read_one,
    shared_fixtures,
    write_jsonl,
)

CLAUDE_FIXTURES = SHARED_FIXTURES / "claude-code"

# Files under the fixture folder that are not sources, and why.
_SUBAGENT_DIR = "jazzyalex__agent-sessions/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents"
NOT_SOURCES = {
    f"{_SUBAGENT_DIR}/agent-a0ad4f44468bdf20d.meta.json": (
        "companion of agent-a0ad4f44468bdf20d.jsonl ({agentType, spawnDepth}); the Session has no field for it"
    ),
}

# Real captures (PROVENANCE.tsv: real). The counts were verified by hand with a throwaway script that does not use
# the extractor: it loads each line with json.loads and counts (a) user lines that are not isMeta, have no
# toolUseResult, no tool_result block, and whose text does not start with "[Request interrupted", "Caveat:" or a
# "<" tag other than <command-name>/<command-message>, plus `system` local_command lines holding <command-name>
# (none in subagent files); (b) distinct message.id with a non-blank text block, model not "<synthetic>";
# (c) distinct tool_use ids; (d) tool results whose toolUseResult carries an agentId (9eda1058: a693a87 and
# a46b9c3 for its two Task calls; subagent.jsonl: afb92ff). Each count was then checked against a line-by-line
# dump of the file (e.g. short.jsonl: user l.3 "mix phx.server doesnt seem to start" and l.13 "/model";
# one response msg_01MKH1… over lines 4-9 with the Bash and Glob calls).
# relpath: (session id, user turns, assistant turns, tool calls, parent session id, tool calls that spawned a session)
REAL: dict[str, tuple[str, int, int, int, str | None, int]] = {
    "marot__spotter/short.jsonl": ("claude-55604662-cf2a-4331-851a-ec234028f8ca", 2, 1, 2, None, 0),
    "marot__spotter/subagent.jsonl": ("claude-491e126e-1e71-469c-ade2-fcc8af567c74", 2, 7, 16, None, 1),
    "marot__spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl": (
        "claude-258c7280-ae70-4798-800f-63464d01a85d-agent-a881341",
        0,
        3,
        2,
        "claude-258c7280-ae70-4798-800f-63464d01a85d",
        0,
    ),
    "marot__spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl": (
        "claude-258c7280-ae70-4798-800f-63464d01a85d-agent-acompact-fffbd0",
        0,
        1,
        0,
        "claude-258c7280-ae70-4798-800f-63464d01a85d",
        0,
    ),
    "codemie-ai__codemie-code/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl": (
        "claude-4c2ddfdc-b619-4525-8d03-1950fb1b0257",
        3,
        4,
        6,
        None,
        0,
    ),
    "codemie-ai__codemie-code/-tmp-private/agent-36541525.jsonl": (
        "claude-4c2ddfdc-b619-4525-8d03-1950fb1b0257-agent-36541525",
        0,
        1,
        0,
        "claude-4c2ddfdc-b619-4525-8d03-1950fb1b0257",
        0,
    ),
    "codemie-ai__codemie-code/-tmp-private/agent-50243ee8.jsonl": (
        "claude-4c2ddfdc-b619-4525-8d03-1950fb1b0257-agent-50243ee8",
        0,
        1,
        0,
        "claude-4c2ddfdc-b619-4525-8d03-1950fb1b0257",
        0,
    ),
    "codemie-ai__codemie-code/session-9eda1058.jsonl": (
        "claude-9eda1058-9706-484a-b992-d03f9cfa2546",
        3,
        5,
        3,
        None,
        2,
    ),
    "codemie-ai__codemie-code/session-196820da.jsonl": (
        "claude-196820da-1026-4b6f-a513-a6aae42da1a6",
        14,
        21,
        65,
        None,
        0,
    ),
}

# Hand-written samples: only their outcome is asserted.
HAND_WRITTEN: dict[str, str | RejectCode] = {
    "jazzyalex__agent-sessions/schema_drift.jsonl": "claude-ses_stage0_drift",
    # Three different sessionIds ("ses_stage0_small", "stage0-session", "[trimmed for fixture]"), none the stem.
    "jazzyalex__agent-sessions/small.jsonl": RejectCode.INCONSISTENT_SOURCE,
    "jazzyalex__agent-sessions/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl": (
        "claude-0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f"
    ),
    "jazzyalex__agent-sessions/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/agent-a0ad4f44468bdf20d.jsonl": (
        "claude-0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f-agent-a0ad4f44468bdf20d"
    ),
}


@pytest.fixture(scope="module")
def shared() -> dict[str, list[Outcome]]:
    shared_fixtures()
    return outcomes_under(Agent("claude"), CLAUDE_FIXTURES)


def test_every_shared_fixture_file_is_a_source_with_an_outcome_or_listed_as_not_one(
    shared: dict[str, list[Outcome]],
) -> None:
    on_disk = {
        os.path.relpath(Path(folder) / name, CLAUDE_FIXTURES)
        for folder, _, names in os.walk(CLAUDE_FIXTURES)
        for name in names
        if name != "PROVENANCE.tsv"
    }
    assert set(shared) == on_disk - set(NOT_SOURCES)
    assert set(shared) == set(REAL) | set(HAND_WRITTEN)
    assert all(len(outcomes) == 1 for outcomes in shared.values())


@pytest.mark.parametrize("relpath", sorted(REAL))
def test_real_capture_counts(shared: dict[str, list[Outcome]], relpath: str) -> None:
    session_id, users, assistants, calls, parent, spawned = REAL[relpath]
    [outcome] = shared[relpath]
    assert isinstance(outcome, Loaded), outcome
    session = outcome.session
    assert session.session_id == session_id
    assert sum(t.role is Role.USER for t in session.turns) == users
    assert sum(t.role is Role.ASSISTANT for t in session.turns) == assistants
    assert len(session.tool_calls) == calls
    assert session.parent_session_id == parent
    assert sum(c.spawned_session_id is not None for c in session.tool_calls) == spawned
    assert sum(session.census.values()) == _records_in(CLAUDE_FIXTURES / relpath)


def test_real_task_call_names_the_subagent_it_spawned(shared: dict[str, list[Outcome]]) -> None:
    [outcome] = shared["marot__spotter/subagent.jsonl"]
    assert isinstance(outcome, Loaded)
    [task] = [c for c in outcome.session.tool_calls if c.name == "Task"]
    # progress l.36: data.agentId "afb92ff", parentToolUseID "toolu_01Cz2Pnv7qNcnK1ZiocxWhQX"
    assert (task.call_id, task.spawned_session_id) == (
        "toolu_01Cz2Pnv7qNcnK1ZiocxWhQX",
        "claude-491e126e-1e71-469c-ade2-fcc8af567c74-agent-afb92ff",
    )


@pytest.mark.parametrize("relpath", sorted(HAND_WRITTEN))
def test_hand_written_sample_outcome(shared: dict[str, list[Outcome]], relpath: str) -> None:
    [outcome] = shared[relpath]
    expected = HAND_WRITTEN[relpath]
    if isinstance(expected, RejectCode):
        assert isinstance(outcome, Rejected) and outcome.code is expected, outcome
    else:
        assert isinstance(outcome, Loaded) and outcome.session.session_id == expected, outcome


def _records_in(path: Path) -> int:
    return sum(1 for raw in path.read_bytes().splitlines() if raw.strip())


@pytest.mark.parametrize(
    ("golden", "relpath"),
    [
        ("claude_spotter_short", "marot__spotter/short.jsonl"),
        ("claude_codemie_v2_0_64", "codemie-ai__codemie-code/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"),
    ],
)
def test_golden_real_session(shared: dict[str, list[Outcome]], golden: str, relpath: str) -> None:
    [outcome] = shared[relpath]
    assert isinstance(outcome, Loaded)
    assert_golden(golden, outcome.session)


# --- properties -----------------------------------------------------------------------------------------------------


# What broken bytes may give: the reader names the fault; never a session made of garbage.
BROKEN = {RejectCode.INVALID_JSON, RejectCode.INVALID_UTF8, RejectCode.TRUNCATED_TAIL, RejectCode.BAD_SHAPE}
GOOD = "aaaaaaaa-0000-4000-8000-00000000000a"


def _jsonl_objects(data: bytes) -> bool:
    try:
        return all(isinstance(json.loads(line), dict) for line in data.splitlines() if line.strip())
    except ValueError:
        return False


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000) | st.lists(st.binary(max_size=200), max_size=6).map(b"\n".join))
def test_any_bytes_give_the_outcome_they_must_and_the_good_session_loads(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hostile = (f"-p/{SID}.jsonl", f"-p/{SID}/subagents/agent-a1.jsonl", "-p/agent-b2.jsonl")
        for rel in hostile:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        write_jsonl(root / "-p" / f"{GOOD}.jsonl", [user("hi", sid=GOOD), assistant([text("hello")], sid=GOOD)])
        found = outcomes_under(Agent("claude"), root)
        assert sorted(found) == sorted([*hostile, f"-p/{GOOD}.jsonl"])
        [good] = found[f"-p/{GOOD}.jsonl"]
        assert isinstance(good, Loaded) and good.session.session_id == f"claude-{GOOD}", good
        for rel in hostile:
            [outcome] = found[rel]
            if not _jsonl_objects(data):
                assert isinstance(outcome, Rejected) and outcome.code in BROKEN, (rel, outcome)
            elif not data.strip():  # an empty file holds no session
                assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION, (rel, outcome)
            else:
                assert isinstance(outcome, Loaded | Rejected), (rel, outcome)


def _line(kind: int, n: int) -> dict[str, object]:
    """A record of one of the shapes a session is made of; `n` varies ids and text."""
    ts = f"2026-02-10T21:{n % 60:02d}:00Z"
    msg = f"msg_{n % 4}"  # few ids: lines of one response are often apart
    return [
        lambda: user(f"prompt {n}", ts=ts),
        lambda: assistant([text(f"answer {n}")], msg_id=msg, usage=usage(n), ts=ts),
        lambda: assistant([tool_use(f"toolu_{n}", command="ls")], msg_id=msg, ts=ts),
        lambda: user([tool_result(f"toolu_{n - 1}", "out")], ts=ts),
        lambda: envelope("progress", data={"type": "hook_progress"}, ts=ts),
        lambda: user("<command-name>/x</command-name><command-args>a</command-args>", ts=ts),
        lambda: user("body", isMeta=True, ts=ts),
        lambda: {"type": "summary", "summary": "t", "leafUuid": "u"},
    ][kind]()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 200)), min_size=1, max_size=25), st.data())
def test_appending_lines_never_changes_existing_turn_ids(spec: list[tuple[int, int]], data: st.DataObject) -> None:
    records = [_line(kind, n) for kind, n in spec]
    cut = data.draw(st.integers(1, len(records)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "-p" / f"{SID}.jsonl"
        write_jsonl(path, records[:cut])
        before = read_one(Agent("claude"), path, SETTLED)
        write_jsonl(path, records)
        after = read_one(Agent("claude"), path, SETTLED)
    [old], [new] = before, after
    for outcome in (old, new):  # a prefix, or all of it, may hold no conversation (yet): that, and nothing else
        if not isinstance(outcome, Loaded):
            assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION, outcome
    if not isinstance(old, Loaded):
        return
    assert isinstance(new, Loaded), "appending lines never unloads a session"
    assert new.session.session_id == old.session.session_id
    assert {(t.index, t.role) for t in old.session.turns} <= {(t.index, t.role) for t in new.session.turns}
    old_users = {(t.index, t.text) for t in old.session.turns if t.role is Role.USER}
    assert old_users <= {(t.index, t.text) for t in new.session.turns if t.role is Role.USER}
    assert {c.call_id: c.turn_index for c in old.session.tool_calls}.items() <= {
        c.call_id: c.turn_index for c in new.session.tool_calls
    }.items()


def test_module_reads_through_the_registry() -> None:
    from extractors.registry import extractor

    assert extractor(Agent("claude")) is claude
    assert json.dumps(claude.SPEC.parser_version) == '"3"'


def test_real_response_usage_is_its_last_snapshot(shared: dict[str, list[Outcome]]) -> None:
    # 4c2ddfdc l.2-5: one response msg_bdrk_013SYv… over four lines, output_tokens 4, 4, 4, 395 (by hand).
    [outcome] = shared["codemie-ai__codemie-code/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"]
    assert isinstance(outcome, Loaded)
    first = outcome.session.usage[0]
    assert (first.turn_index, first.output_tokens, first.response_id) == (2, 395, "msg_bdrk_013SYvCzWGkVVXBeihWmL3gF")
