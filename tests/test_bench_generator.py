"""The benchmark's corpus generator: deterministic bytes, and a corpus every extractor loads without rejections.

No timing here: how fast the pipeline is depends on the machine (bench/run.py measures it).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from bench.claude_gen import append_exchange
from bench.generate import MANIFEST, generate, load_summary, parse_mix
from bench.material import Material
from extractors.model import Agent, Loaded
from extractors.registry import extractor, registered
from tests.support import outcomes_under

MIX = {"claude": 0.7, "codex": 0.2, "grok": 0.1}


def _digests(home: Path) -> dict[str, tuple[str, int]]:
    """Every file under `home`: sha256 and mtime."""
    return {
        str(path.relative_to(home)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    generate(first, 1.0, seed=7, mix=MIX)
    generate(second, 1.0, seed=7, mix=MIX)
    a, b = _digests(first), _digests(second)
    a.pop(MANIFEST), b.pop(MANIFEST)  # it records the generation time
    assert a == b
    assert len(a) > 10


def test_another_seed_other_bytes(tmp_path: Path) -> None:
    generate(tmp_path / "a", 0.3, seed=1)
    generate(tmp_path / "b", 0.3, seed=2)
    assert _digests(tmp_path / "a").keys().isdisjoint(_digests(tmp_path / "b").keys() - {MANIFEST})


def test_size_and_layout(tmp_path: Path) -> None:
    summary = generate(tmp_path, 2.0, seed=1, mix=MIX)
    assert 1.9e6 <= summary.bytes_sources <= 2.6e6
    assert set(summary.agents) == set(MIX)
    assert list((tmp_path / ".claude" / "projects").glob("*/*.jsonl"))
    assert list((tmp_path / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    assert list((tmp_path / ".grok" / "sessions").glob("*/*/chat_history.jsonl"))
    assert list((tmp_path / ".grok" / "sessions").glob("*/*/summary.json"))
    assert load_summary(tmp_path)["append_candidate"]


def test_mix_parsing() -> None:
    assert parse_mix("claude=0.7,codex=0.2,grok=0.1") == pytest.approx(MIX)
    assert parse_mix("claude=2,grok=2") == {"claude": 0.5, "grok": 0.5}
    with pytest.raises(ValueError, match="AGENT"):
        parse_mix("gemini=1")


@pytest.mark.parametrize("agent", [Agent.CLAUDE, Agent.CODEX, Agent.GROK])
def test_every_generated_session_loads(tmp_path: Path, agent: Agent) -> None:
    if agent not in registered():
        pytest.skip(f"no extractors/{agent.value}.py on this branch yet")
    generate(tmp_path, 3.0, seed=3, mix=MIX)
    roots = [root for root in extractor(agent).default_roots(tmp_path, {}) if root.exists()]
    assert roots
    outcomes = [o for root in roots for group in outcomes_under(agent, root).values() for o in group]
    problems = [o for o in outcomes if not isinstance(o, Loaded)]
    assert not problems, problems[:3]
    sessions = [o.session for o in outcomes if isinstance(o, Loaded)]
    assert len(sessions) >= 3
    assert sum(len(s.turns) for s in sessions) > len(sessions)
    assert any(s.tool_calls for s in sessions)
    if agent is not Agent.GROK:  # Grok's chat_history.jsonl has no token counts (FORMATS.md 3.1)
        assert any(s.usage for s in sessions)


def test_appended_session_still_loads_as_the_same_session(tmp_path: Path) -> None:
    summary = generate(tmp_path, 1.0, seed=5)
    path = tmp_path / summary.append_candidate
    before = outcomes_under(Agent.CLAUDE, path.parent)[path.name]
    added = append_exchange(Material(5), random.Random("append"), path)
    after = outcomes_under(Agent.CLAUDE, path.parent)[path.name]
    assert added > 0
    (old,), (new,) = before, after
    assert isinstance(old, Loaded) and isinstance(new, Loaded)
    assert new.session.session_id == old.session.session_id
    assert len(new.session.turns) > len(old.session.turns)
    assert new.session.turns[: len(old.session.turns)] == old.session.turns
