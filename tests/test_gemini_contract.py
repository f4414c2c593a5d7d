"""Contract over the shared Gemini CLI fixtures, golden output, and "any bytes in, a classified outcome out"."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Outcome, Rejected, Role
from tests.support import SHARED_FIXTURES, assert_golden, loaded_sessions, outcomes_under, read_one, shared_fixtures

FIXTURES = SHARED_FIXTURES / "gemini"
REAL = "codemie-ai__codemie-code/chats/session-2025-12-01T21-45-5b959dae.json"

NOT_SOURCES = {
    "codemie-ai__codemie-code/logs.json": "prompt history (typed prompts of all sessions, no answers): not a session",
    # hand-written samples that do not sit in a chats/ folder, so discovery does not list them; read explicitly below
    "jazzyalex__agent-sessions/jsonl_v040.jsonl": "not under chats/: read explicitly",
    "jazzyalex__agent-sessions/small.json": "not under chats/ nor named session-*: read explicitly",
}


def _tree() -> dict[str, str]:
    return {
        str(p.relative_to(FIXTURES)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(FIXTURES.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def shared() -> dict[str, list[Outcome]]:
    shared_fixtures()
    before = _tree()
    outcomes = outcomes_under(Agent("gemini"), FIXTURES)
    for rel in ("jazzyalex__agent-sessions/jsonl_v040.jsonl", "jazzyalex__agent-sessions/small.json"):
        outcomes[rel] = read_one(Agent("gemini"), FIXTURES / rel)
    assert _tree() == before
    return outcomes


def test_contract_every_shared_file_reaches_an_outcome_or_is_listed(shared: dict[str, list[Outcome]]) -> None:
    for rel in _tree():
        assert rel in shared or rel in NOT_SOURCES, f"{rel}: no outcome and not listed"
    assert list(outcomes_under(Agent("gemini"), FIXTURES)) == [REAL]  # logs.json is never discovered
    assert {rel: [type(o).__name__ for o in found] for rel, found in shared.items()} == {
        REAL: ["Loaded"],
        "jazzyalex__agent-sessions/jsonl_v040.jsonl": ["Loaded"],
        "jazzyalex__agent-sessions/small.json": ["Loaded"],
    }


def test_contract_real_session_counts(shared: dict[str, list[Outcome]]) -> None:
    # Verified independently with jq over the file: sessionId 5b959dae-...; 14 messages; user messages at
    # positions 0, 2, 9; gemini messages with non-empty content at 1, 8, 13 (the others only call tools);
    # 10 toolCalls (list_directory, read_file x7, write_file, replace), all status "success"; 11 messages with
    # tokens, summing input 101630, cached 56538, output 2734, thoughts 1493 (and total = input + output + thoughts
    # on every message, so input includes cached).
    [session] = loaded_sessions(shared[REAL])
    assert session.session_id == "gemini-5b959dae-8655-4cd1-b10f-720b8c336ea2"
    assert [t.index for t in session.turns if t.role is Role.USER] == [0, 2, 9]
    assert [t.index for t in session.turns if t.role is Role.ASSISTANT] == [1, 8, 13]
    assert [t.text for t in session.turns if t.role is Role.USER][:2] == ["hi", "Explain what this is"]
    assert len(session.tool_calls) == 10
    assert [c.name for c in session.tool_calls].count("read_file") == 7
    assert {c.is_error for c in session.tool_calls} == {False}
    assert len(session.usage) == 11
    assert sum(u.input_tokens or 0 for u in session.usage) == 101630 - 56538
    assert sum(u.cache_read_tokens or 0 for u in session.usage) == 56538
    assert sum(u.output_tokens or 0 for u in session.usage) == 2734
    assert sum(u.reasoning_tokens or 0 for u in session.usage) == 1493
    assert session.models == ("gemini-3-pro-image-preview",)
    assert_golden("gemini_codemie_session-2025-12-01T21-45-5b959dae", session)


def test_contract_hand_written_jsonl_sample(shared: dict[str, list[Outcome]]) -> None:
    [session] = loaded_sessions(shared["jazzyalex__agent-sessions/jsonl_v040.jsonl"])
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (1, Role.USER, "Say hello and list files."),
        (4, Role.ASSISTANT, "Hello! I listed the files."),
    ]
    [call] = session.tool_calls
    # status "success" in the sample; the output is the functionResponse's output text
    assert (call.name, call.is_error, call.output) == (
        "run_shell_command",
        False,
        "Output: AgentSessions/\nREADME.md\nProcess Group PGID: 12345",
    )


# --- any bytes in, a classified outcome out ----------------------------------------------------------------------


GOOD = "session-2026-01-01T00-00-gggggggg.json"
# What broken bytes may give: the reader names the fault; never a session made of garbage.
BROKEN = {
    RejectCode.INVALID_JSON, RejectCode.INVALID_UTF8, RejectCode.TRUNCATED_TAIL, RejectCode.BAD_SHAPE,
    RejectCode.MISSING_SESSION_ID, RejectCode.MISSING_TIMESTAMP, RejectCode.NO_CONVERSATION,
}  # fmt: skip


def _with_good_beside(chats: Path) -> None:
    record = {"sessionId": "good", "startTime": "2026-01-01T00:00:00Z", "messages": [{"id": "m", "type": "user",
              "content": "hi"}]}  # fmt: skip
    (chats / GOOD).write_text(json.dumps(record), encoding="utf-8")


def _good_loaded(found: dict[str, list[Outcome]]) -> None:
    [good] = [v for k, v in found.items() if k.endswith(GOOD)]
    assert [o.session.session_id for o in good if isinstance(o, Loaded)] == ["gemini-good"], good


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=2048), st.sampled_from(["session-2026-01-01T00-00-aaaaaaaa.json", "s.jsonl", "p/c.jsonl"]))
def test_property_arbitrary_bytes_as_a_recording_are_rejected_with_a_reason(raw: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "proj" / "chats" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        _with_good_beside(Path(tmp) / "proj" / "chats")
        found = outcomes_under(Agent("gemini"), Path(tmp))
        _good_loaded(found)
        [outcomes] = [v for k, v in found.items() if k.endswith(name)]
        assert len(outcomes) == 1 and isinstance(outcomes[0], Rejected), outcomes
        assert outcomes[0].code in BROKEN, outcomes


_MESSAGE = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "c"]),
        "type": st.sampled_from(["user", "gemini", "info", "x"]),
        "content": st.one_of(
            st.text(max_size=5), st.lists(st.fixed_dictionaries({"text": st.text(max_size=5)}), max_size=2)
        ),
    }
)
_REWIND = st.fixed_dictionaries({"$rewindTo": st.sampled_from(["a", "b", "z"])})
_SET = st.fixed_dictionaries(
    {
        "$set": st.fixed_dictionaries(
            {
                "messages": st.lists(
                    st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "d"]), "type": st.just("user")}), max_size=3
                )
            }
        )
    }
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(_MESSAGE, _REWIND, _SET), max_size=8))
def test_property_any_fold_gives_unique_turn_indexes(records: list[dict[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chats" / "s.jsonl"
        path.parent.mkdir(parents=True)
        meta = {"sessionId": "s", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z"}
        path.write_text("".join(json.dumps(r) + "\n" for r in [meta, *records]), encoding="utf-8")
        [outcome] = read_one(Agent("gemini"), path)
        # The metadata line is valid and every record is well-formed: the fold always gives a session.
        assert isinstance(outcome, Loaded), outcome
        indexes = [t.index for t in outcome.session.turns]
        assert len(indexes) == len(set(indexes))
        assert sum(outcome.session.census.values()) == len(records) + 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "text",
                    "thought",
                    "functionResponse",
                    "response",
                    "output",
                    "error",
                    "inlineData",
                    "data",
                    "mimeType",
                    "fileData",
                    "fileUri",
                    "id",
                    "name",
                ]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["content", "displayContent", "toolCalls", "tokens", "model", "thoughts", "timestamp"]),
        _JSON,
        max_size=5,
    ),
    st.sampled_from(["user", "gemini", "info"]),
)
def test_property_any_json_in_message_fields_is_classified(fields: dict[str, object], kind: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chats" / "session-x.json"
        path.parent.mkdir(parents=True)
        message = {"id": "m", "type": kind, **fields}
        path.write_text(json.dumps({"sessionId": "s", "startTime": "2026-01-01T00:00:00Z", "messages": [message]}))
        [outcome] = read_one(Agent("gemini"), path)
        # Any JSON in a message field: the session loads, or is rejected as bad_shape naming the field.
        assert isinstance(outcome, Loaded) or (
            isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE
        ), outcome
