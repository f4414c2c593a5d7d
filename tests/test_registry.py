"""One registry: every agent has an extractor with the full contract; formats of explicit paths are detected."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors.model import Agent
from extractors.registry import detect_format, extractor, parse_agent, registered


def test_every_agent_is_registered_with_the_whole_contract() -> None:
    found = registered()
    assert set(found) == set(Agent)
    for agent, module in found.items():
        assert module.AGENT is agent
        assert isinstance(module.PARSER_VERSION, str) and module.PARSER_VERSION
        assert isinstance(module.NIGHTLY, bool)
        for name in ("default_roots", "discover", "read"):
            assert callable(getattr(module, name)), f"{agent}.{name}"
    assert {a for a, m in found.items() if not m.NIGHTLY} == {Agent.CHATGPT}


def test_default_roots_only_follow_the_given_home_and_environment(tmp_path: Path) -> None:
    for agent in Agent:
        for root in extractor(agent).default_roots(tmp_path, {}):
            assert root.is_relative_to(tmp_path), (agent, root)


def test_unknown_format_says_did_you_mean() -> None:
    with pytest.raises(ValueError, match="Did you mean 'codex'"):
        parse_agent("codx")
    assert parse_agent("claude-code") is Agent.CLAUDE


@pytest.mark.parametrize(
    ("path", "explicit", "expected"),
    [
        ("/x/rollout-2026-05-11T13-28-45-019e.jsonl", None, Agent.CODEX),
        ("/home/u/.codex/old/session.jsonl", None, Agent.CODEX),
        ("/home/u/.claude/projects/p/a.jsonl", None, Agent.CLAUDE),
        ("/home/u/.grok/sessions/b/s/chat_history.jsonl", None, Agent.GROK),
        ("/dl/conversations.json", None, Agent.CHATGPT),
        ("/dl/export-2024.zip", None, Agent.CHATGPT),
        ("/dl/dump.json", None, Agent.CHATGPT),
        ("/dl/conversations.json", "codex", Agent.CODEX),
    ],
)
def test_format_of_an_explicit_path(path: str, explicit: str | None, expected: Agent) -> None:
    assert detect_format(Path(path), explicit) is expected


@pytest.mark.parametrize("path", ["/dl/notes.jsonl", "/dl/session.txt", "/dl/data"])
def test_an_ambiguous_path_fails_closed_naming_format(path: str) -> None:
    with pytest.raises(ValueError, match="--format"):
        detect_format(Path(path))
