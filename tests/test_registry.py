"""One registry: every agent has an extractor with the full contract; formats of explicit paths are detected."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from extractors.model import Agent
from extractors.registry import agents, detect_format, extractor, modules, parse_agent, registered, spec, specs
from extractors.spec import AgentSpec


def test_every_agent_is_registered_with_the_whole_contract() -> None:
    found = registered()
    assert list(found) == list(agents()) == [s.name for s in specs()]
    for agent, module in found.items():
        declared = module.SPEC
        assert isinstance(declared, AgentSpec) and declared.name == agent and spec(agent) is declared
        assert isinstance(declared.parser_version, str) and declared.parser_version
        assert isinstance(declared.nightly, bool) and declared.display
        assert declared.unknown_records in ("skip", "reject")
        for name in ("default_roots", "discover", "read"):
            assert callable(getattr(module, name)), f"{agent}.{name}"
    exports = {Agent("chatgpt"), Agent("claude_ai")}
    assert {a for a, m in found.items() if not m.SPEC.nightly} == exports
    assert {a for a, m in found.items() if m.SPEC.export is not None} == exports


NEW_AGENT = """
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.model import Agent, Outcome, Source
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("zagent"), display="Z Agent", rank=10_000, parser_version="1", env=(), nightly=True, export=None,
    price_provider=None, reasoning_billed_separately=False, unknown_records="skip", aliases=("z-agent",),
    claims=lambda path: Claim.NAME if path.name.endswith(".zz") else None,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    return [home / ".zagent"]


def discover(root: Path) -> Iterator[Source]:
    return iter(())


def read(source, limits) -> Iterator[Outcome]:
    return iter(())
"""


@pytest.fixture
def more_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`extractors` with a second folder of packages, and a registry that looks again."""
    import extractors
    from extractors import registry

    monkeypatch.setattr(extractors, "__path__", [*extractors.__path__, str(tmp_path)])
    registry._packages.cache_clear()
    yield tmp_path
    registry._packages.cache_clear()
    for name in [m for m in sys.modules if m.startswith(("extractors.zagent", "extractors.nospec"))]:
        del sys.modules[name]


def test_a_new_agent_is_one_package_and_a_package_without_a_spec_is_none(more_packages: Path) -> None:
    (more_packages / "zagent").mkdir()
    (more_packages / "zagent" / "__init__.py").write_text(NEW_AGENT, encoding="utf-8")
    (more_packages / "nospec").mkdir()
    (more_packages / "nospec" / "__init__.py").write_text("HELPERS = 1\n", encoding="utf-8")
    from transforms import agents as house

    assert agents()[-1] == "zagent" and "nospec" not in agents() and "bounded" not in agents()
    assert parse_agent("Z-Agent") == "zagent" and detect_format(Path("/x/a.zz")) == "zagent"
    assert "zagent" in extractor("zagent").SPEC.name and house.provider_hints()["zagent"] is None
    assert "extractors.zagent" in modules()


def test_a_spec_must_be_named_as_its_package(more_packages: Path) -> None:
    (more_packages / "zagent").mkdir()
    (more_packages / "zagent" / "__init__.py").write_text(
        NEW_AGENT.replace('name=Agent("zagent")', 'name=Agent("other")'), encoding="utf-8"
    )
    with pytest.raises(TypeError, match=r"extractors\.zagent\.SPEC must be an AgentSpec named 'zagent'"):
        agents()


def test_default_roots_read_only_the_environment_they_declare(tmp_path: Path) -> None:
    class Recording(dict[str, str]):
        def __init__(self) -> None:
            super().__init__()
            self.read: set[str] = set()

        def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
            self.read.add(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            self.read.add(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            self.read.add(str(key))
            return super().__contains__(key)

    for module in registered().values():
        env = Recording()
        module.default_roots(tmp_path, env)
        assert env.read <= set(module.SPEC.env), (module.SPEC.name, env.read, module.SPEC.env)


def test_default_roots_only_follow_the_given_home_and_environment(tmp_path: Path) -> None:
    for agent in agents():
        for root in extractor(agent).default_roots(tmp_path, {}):
            assert root.is_relative_to(tmp_path), (agent, root)


def test_unknown_format_says_did_you_mean() -> None:
    with pytest.raises(ValueError, match="Did you mean 'codex'"):
        parse_agent("codx")
    assert parse_agent("claude-code") == Agent("claude")


@pytest.mark.parametrize(
    ("path", "explicit", "expected"),
    [
        ("/x/rollout-2026-05-11T13-28-45-019e.jsonl", None, Agent("codex")),
        ("/home/u/.codex/old/session.jsonl", None, Agent("codex")),
        ("/home/u/.claude/projects/p/a.jsonl", None, Agent("claude")),
        ("/home/u/.grok/sessions/b/s/chat_history.jsonl", None, Agent("grok")),
        ("/dl/conversations.json", None, Agent("chatgpt")),
        ("/dl/export-2024.zip", None, Agent("chatgpt")),
        ("/dl/dump.json", None, Agent("chatgpt")),
        ("/dl/conversations.json", "codex", Agent("codex")),
    ],
)
def test_format_of_an_explicit_path(path: str, explicit: str | None, expected: Agent) -> None:
    assert detect_format(Path(path), explicit) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/dl/notes.jsonl",
        "/dl/session.txt",
        "/dl/data",
        "/home/u/.gemini/tmp/h/chats/session.json",  # Gemini CLI's JSON is no export; Gemini is never guessed
        "/home/u/.claude/.grok/sessions/s/chat_history.jsonl",  # two agents' folders claim it equally
    ],
)
def test_an_ambiguous_path_fails_closed_naming_format(path: str) -> None:
    with pytest.raises(ValueError, match="--format"):
        detect_format(Path(path))
