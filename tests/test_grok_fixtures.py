"""Grok over the shared fixtures (laid out in tmp_path as a real Grok home), golden output, and arbitrary bytes in a
discovered chat_history.jsonl give a classified outcome."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.errors import RejectCode
from extractors.grok import discover
from extractors.model import Agent, Loaded, Outcome, Rejected, Role, Session
from tests.support import SETTLED, SHARED_FIXTURES, assert_golden, outcomes_under, read_one, shared_fixtures

GROK = SHARED_FIXTURES / "grok"
SESSION = GROK / "jazzyalex__agent-sessions" / "session"
SID = "019f6851-7ec4-7ef0-97d3-03f3eee38755"
BUCKET = "%2Ftmp%2Fas-agent-lab%2Fgrok%2Fproject"

# Shared fixture files that are not sources of their own.
NOT_SOURCES = {
    # The sidecar of chat_history.jsonl: read as part of that unit (times, ids, title).
    "jazzyalex__agent-sessions/session/summary.json": "companion of chat_history.jsonl",
}


def _needs_fixtures() -> None:
    shared_fixtures()


def _home(tmp_path: Path) -> Path:
    """A Grok home with the shared session copied into its real place (copied at test time, never committed)."""
    home = tmp_path / ".grok"
    target = home / "sessions" / BUCKET / SID
    target.mkdir(parents=True)
    for name in ("chat_history.jsonl", "summary.json"):
        shutil.copy(SESSION / name, target / name)
    return home


def _session(tmp_path: Path) -> Session:
    found = outcomes_under(Agent("grok"), _home(tmp_path))
    assert list(found) == [f"sessions/{BUCKET}/{SID}/chat_history.jsonl"]
    [outcome] = found[f"sessions/{BUCKET}/{SID}/chat_history.jsonl"]
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def test_contract_every_shared_fixture_reaches_a_defined_outcome(tmp_path: Path) -> None:
    _needs_fixtures()
    files = sorted(p.relative_to(GROK).as_posix() for p in GROK.rglob("*") if p.is_file())
    assert files == ["jazzyalex__agent-sessions/session/chat_history.jsonl", *NOT_SOURCES]
    # Read where it lies, its folder is named `session`, not the id in summary.json: an inconsistent source.
    [in_place] = read_one(Agent("grok"), SESSION / "chat_history.jsonl")
    assert isinstance(in_place, Rejected) and in_place.code is RejectCode.INCONSISTENT_SOURCE
    # Laid out as Grok writes it, it loads.
    assert _session(tmp_path).session_id == f"grok-{SID}"


def test_fixture_counts_verified_by_hand(tmp_path: Path) -> None:
    """The 11 lines of chat_history.jsonl, read by eye: line 0 system; 1 user with synthetic_reason
    environment_context; 2 user prompt_index 0; 3 and 9 reasoning; 4 assistant with text and 1 tool call;
    5 tool_result; 6 backend_tool_call (web search); 7 assistant with empty text and 1 tool call; 8 tool_result;
    10 user prompt_index 1 with an image and text. So: 2 user turns, 1 assistant turn, 3 tool calls (2 with output)."""
    _needs_fixtures()
    session = _session(tmp_path)
    assert [t.index for t in session.turns if t.role is Role.USER] == [2, 10]
    assert [t.index for t in session.turns if t.role is Role.ASSISTANT] == [4]
    assert [(c.turn_index, c.name, c.output is not None) for c in session.tool_calls] == [
        (4, "read_file", True),
        (6, "web_search", False),
        (7, "run_terminal_cmd", True),
    ]
    assert session.started_at == datetime(2026, 7, 31, 10, 13, 27, 574131, tzinfo=UTC)
    assert session.ended_at == datetime(2026, 7, 31, 10, 15, 2, 118940, tzinfo=UTC)
    assert session.cwd == "/tmp/as-agent-lab/grok/project" and session.models == ("grok-4.5",)
    assert len(session.turns[2].attachments) == 1 and sum(session.census.values()) == 11


def test_golden_fixture_session(tmp_path: Path) -> None:
    _needs_fixtures()
    assert_golden("grok_agent_sessions_019f6851", _session(tmp_path))


GOOD = "019f6851-7ec4-7ef0-97d3-03f3eee387aa"
# What broken bytes may give: the reader names the fault; never a session made of garbage.
BROKEN = {RejectCode.INVALID_JSON, RejectCode.INVALID_UTF8, RejectCode.TRUNCATED_TAIL, RejectCode.BAD_SHAPE}


def _outcomes_with_good_beside(root: Path) -> list[Outcome]:
    """Read the root (the hostile session and a good one beside it); the good one must load."""
    good = root / "sessions" / BUCKET / GOOD
    good.mkdir(parents=True, exist_ok=True)
    (good / "chat_history.jsonl").write_text('{"type":"user","content":"hi","prompt_index":0}\n')
    (good / "summary.json").write_text(json.dumps({"info": {"id": GOOD}, "created_at": "2026-07-31T10:13:27Z"}))
    found = outcomes_under(Agent("grok"), root, SETTLED)
    hostile = f"sessions/{BUCKET}/{SID}/chat_history.jsonl"
    assert sorted(found) == sorted([hostile, f"sessions/{BUCKET}/{GOOD}/chat_history.jsonl"])
    [good_outcome] = found[f"sessions/{BUCKET}/{GOOD}/chat_history.jsonl"]
    assert isinstance(good_outcome, Loaded) and good_outcome.session.session_id == f"grok-{GOOD}", good_outcome
    return found[hostile]


def _jsonl_objects(data: bytes) -> bool:
    """Every non-blank line is a JSON object (what the reader accepts before looking at the records)."""
    try:
        return all(isinstance(json.loads(line), dict) for line in data.splitlines() if line.strip())
    except ValueError:
        return False


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), with_summary=st.booleans())
def test_property_arbitrary_bytes_give_the_outcome_they_must(tmp_path: Path, data: bytes, with_summary: bool) -> None:
    folder = tmp_path / "sessions" / BUCKET / SID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat_history.jsonl").write_bytes(data)
    summary = folder / "summary.json"
    if with_summary:
        summary.write_text(json.dumps({"info": {"id": SID}, "created_at": "2026-07-31T10:13:27Z"}))
    elif summary.exists():
        summary.unlink()
    [outcome] = _outcomes_with_good_beside(tmp_path)
    if not with_summary:  # times come only from summary.json: rejected whatever the history holds
        assert isinstance(outcome, Rejected) and outcome.code is RejectCode.MISSING_TIMESTAMP, outcome
    elif not _jsonl_objects(data):
        assert isinstance(outcome, Rejected) and outcome.code in BROKEN, outcome
    else:
        assert isinstance(outcome, Loaded | Rejected), outcome
    if isinstance(outcome, Loaded):
        records = sum(1 for line in data.splitlines() if line.strip())
        assert sum(outcome.session.census.values()) == records


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_property_arbitrary_summary_bytes_give_the_outcome_they_must(tmp_path: Path, data: bytes) -> None:
    folder = tmp_path / "sessions" / BUCKET / SID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat_history.jsonl").write_text('{"type":"user","content":"hi","prompt_index":0}\n')
    (folder / "summary.json").write_bytes(data)
    sizes = {Path(s.path).parent.name: s.size for s in discover(tmp_path)}
    [outcome] = _outcomes_with_good_beside(tmp_path)
    assert sizes[SID] == 48 + len(data)
    try:
        summary = json.loads(data)
    except ValueError:
        summary = None
    if summary is None:  # not JSON: the summary's fault is named, or the times it should give are missing
        assert isinstance(outcome, Rejected), outcome
        assert outcome.code in BROKEN | {RejectCode.MISSING_TIMESTAMP}, outcome
    else:  # JSON without a usable created_at and the matching id: rejected, never stamped with the clock
        assert isinstance(outcome, Rejected), outcome
        assert outcome.code in {RejectCode.MISSING_TIMESTAMP, RejectCode.BAD_SHAPE, RejectCode.INCONSISTENT_SOURCE}
