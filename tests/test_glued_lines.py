"""Records glued onto one JSONL line, in every JSONL reader: read in order, counted, and no other turn id moves.

The golden sessions (tests/golden/*.json) are what the readers gave before the glued-line rule. Each golden JSONL
input is read twice here: as it is (its turn ids must be exactly the golden's), and with its last two lines glued
into one, as Claude Code sometimes writes them (every turn id but the last line's must still be the golden's; the
last line's record takes `glued_index(L, 1)`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from extractors.bounded import GLUED_LINE_KIND, glued_index
from extractors.model import Agent, Disposition, Loaded, Session
from tests.support import GOLDEN, SHARED_FIXTURES, read_one, shared_fixtures

_GROK_SESSION = SHARED_FIXTURES / "grok" / "jazzyalex__agent-sessions" / "session"
_GROK_SID = "019f6851-7ec4-7ef0-97d3-03f3eee38755"

# golden file -> (agent, the JSONL input under the shared fixtures)
GOLDEN_JSONL: dict[str, tuple[Agent, Path]] = {
    "claude_spotter_short": (Agent("claude"), SHARED_FIXTURES / "claude-code" / "marot__spotter" / "short.jsonl"),
    "claude_codemie_v2_0_64": (
        Agent("claude"),
        SHARED_FIXTURES
        / "claude-code"
        / "codemie-ai__codemie-code"
        / "-tmp-private"
        / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
    ),
    "codex_real_rollout_019e1695": (
        Agent("codex"),
        SHARED_FIXTURES
        / "codex"
        / "codemie-ai__codemie-code"
        / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
    ),
    "grok_agent_sessions_019f6851": (Agent("grok"), _GROK_SESSION / "chat_history.jsonl"),
}


def _place(agent: Agent, source: Path, tmp_path: Path) -> Path:
    """A copy of the source where its reader expects it (Grok: the session folder with its summary.json)."""
    if agent == Agent("grok"):
        folder = tmp_path / ".grok" / "sessions" / "%2Ftmp%2Fproject" / _GROK_SID
        folder.mkdir(parents=True)
        shutil.copy(_GROK_SESSION / "summary.json", folder / "summary.json")
    elif agent == Agent("claude"):
        folder = tmp_path / "-tmp-project"
        folder.mkdir(parents=True)
    else:
        folder = tmp_path
        folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    shutil.copy(source, target)
    return target


def _read(agent: Agent, path: Path) -> Session:
    [outcome] = read_one(agent, path)
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def _turns_of_golden(name: str) -> list[tuple[int, str, str]]:
    data = json.loads((GOLDEN / f"{name}.json").read_text())
    return [(t["index"], t["role"], t["text"]) for t in data["turns"]]


def _turns(session: Session) -> list[tuple[int, str, str]]:
    return [(t.index, t.role.value, t.text) for t in session.turns]


@pytest.fixture(autouse=True)
def _needs_fixtures() -> None:
    shared_fixtures()


@pytest.mark.parametrize("golden", sorted(GOLDEN_JSONL))
def test_ok_golden_turn_ids_are_unchanged(tmp_path: Path, golden: str) -> None:
    agent, source = GOLDEN_JSONL[golden]
    assert _turns(_read(agent, _place(agent, source, tmp_path))) == _turns_of_golden(golden)


@pytest.mark.parametrize("golden", sorted(GOLDEN_JSONL))
def test_ok_last_two_lines_glued_keep_every_other_turn_id(tmp_path: Path, golden: str) -> None:
    agent, source = GOLDEN_JSONL[golden]
    path = _place(agent, source, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    last = len(lines) - 1
    path.write_bytes(b"".join(lines[:-2]) + lines[-2].rstrip(b"\r\n") + lines[-1])
    session = _read(agent, path)
    moved = glued_index(last - 1, 1)
    expected = [(moved if index == last else index, role, text) for index, role, text in _turns_of_golden(golden)]
    assert sorted(_turns(session)) == sorted(expected)
    assert session.census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] == 1


def test_ok_gemini_jsonl_last_two_lines_glued_keep_every_other_turn_id(tmp_path: Path) -> None:
    # Gemini CLI's `.jsonl` recording has no golden file; its own unglued reading is the reference.
    source = SHARED_FIXTURES / "gemini" / "jazzyalex__agent-sessions" / "jsonl_v040.jsonl"
    plain = _turns(_read(Agent("gemini"), _place(Agent("gemini"), source, tmp_path / "plain")))
    path = _place(Agent("gemini"), source, tmp_path / "glued")
    lines = path.read_bytes().splitlines(keepends=True)
    last = len(lines) - 1
    path.write_bytes(b"".join(lines[:-2]) + lines[-2].rstrip(b"\r\n") + lines[-1])
    session = _read(Agent("gemini"), path)
    moved = glued_index(last - 1, 1)
    assert plain and sorted(_turns(session)) == sorted((moved if i == last else i, r, t) for i, r, t in plain)
    assert session.census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] == 1
