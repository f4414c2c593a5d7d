"""The benchmark's corpus generator: deterministic bytes, and a corpus every extractor loads without rejections.

No timing here: how fast the pipeline is depends on the machine (bench/run.py measures it).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from bench import codex_gen
from bench.claude_gen import append_exchange
from bench.generate import AGENTS, MANIFEST, generate, load_summary, parse_mix
from bench.material import Material
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Rejected
from extractors.registry import extractor, registered
from tests.support import outcomes_under

MIX = {"claude": 0.7, "codex": 0.2, "grok": 0.1}
ALL = {
    "claude": 0.5,
    "codex": 0.2,
    "grok": 0.1,
    "gemini": 0.1,
    "opencode": 0.1,
    "cursor": 0.1,
    "copilot": 0.1,
    "cline": 0.1,
    "aider": 0.1,
    "amp": 0.1,
    "kiro": 0.1,
}


def _digests(home: Path) -> dict[str, tuple[str, int]]:
    """Every file under `home`: sha256 and mtime."""
    return {
        str(path.relative_to(home)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("mix", [MIX, ALL])
def test_same_seed_same_bytes(tmp_path: Path, mix: dict[str, float]) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    generate(first, 1.0, seed=7, mix=mix)
    generate(second, 1.0, seed=7, mix=mix)
    a, b = _digests(first), _digests(second)
    a.pop(MANIFEST), b.pop(MANIFEST)  # it records the generation time
    assert a == b  # opencode.db included: the same rows in the same order with the same page size
    assert len(a) > 10


def test_opencode_db_is_self_contained_and_canonical(tmp_path: Path) -> None:
    generate(tmp_path, 1.0, seed=7, mix={"opencode": 1.0})
    data = tmp_path / ".local" / "share" / "opencode"
    assert sorted(p.name for p in data.iterdir()) == ["opencode.db", "storage"]  # no -wal / -shm / -journal
    with closing(sqlite3.connect(f"file:{data / 'opencode.db'}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        kinds = {row[0] for row in conn.execute("SELECT DISTINCT json_extract(data, '$.type') FROM part")}
        assert {"text", "reasoning", "tool", "step-start", "step-finish"} <= kinds
        assert conn.execute("SELECT count(*) FROM session WHERE parent_id IS NOT NULL").fetchone()[0] > 0
        assert conn.execute("SELECT count(*) FROM session WHERE time_archived IS NOT NULL").fetchone()[0] > 0


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


def test_size_and_layout_of_gemini_and_opencode(tmp_path: Path) -> None:
    summary = generate(tmp_path, 4.0, seed=1, mix=ALL)
    assert set(summary.agents) == set(ALL)
    for agent in ("gemini", "opencode"):
        assert 0.3e6 <= summary.agents[agent].bytes_sources <= 0.6e6, agent
    chats = tmp_path / ".gemini" / "tmp"
    assert list(chats.glob("*/chats/session-*.json")) and list(chats.glob("*/chats/session-*.jsonl"))
    recorded = b"".join(path.read_bytes() for path in chats.glob("*/chats/*.jsonl"))
    assert b'{"$set":' in recorded and b'"status":"executing"' in recorded
    data = tmp_path / ".local" / "share" / "opencode"
    assert (data / "opencode.db").is_file()
    assert list((data / "storage" / "session").glob("*/ses_*.json"))
    assert summary.agents["opencode"].expected_duplicates > 0


def test_mix_parsing() -> None:
    assert parse_mix("claude=0.7,codex=0.2,grok=0.1") == pytest.approx(MIX)
    assert parse_mix("claude=2,grok=2") == {"claude": 0.5, "grok": 0.5}
    with pytest.raises(ValueError, match="AGENT"):
        parse_mix("nonesuch=1")


@pytest.mark.parametrize("agent", [Agent(name) for name in AGENTS])
def test_every_generated_session_loads(tmp_path: Path, agent: Agent) -> None:
    """Zero rejections, except the `duplicate`s the generator means: OpenCode JSON sessions also in opencode.db."""
    if agent not in registered():
        pytest.skip(f"no extractors/{agent}.py on this branch yet")
    # An agent in neither mix (the newer ones) is generated alone.
    mix = MIX if agent in MIX else ALL if agent in ALL else {agent: 1.0}
    summary = generate(tmp_path, 3.0 if agent in MIX else 6.0, seed=3, mix=mix)
    roots = [root for root in extractor(agent).default_roots(tmp_path, {}) if root.exists()]
    assert roots
    outcomes = [o for root in roots for group in outcomes_under(agent, root).values() for o in group]
    duplicates = [o for o in outcomes if isinstance(o, Rejected) and o.code is RejectCode.DUPLICATE]
    problems = [o for o in outcomes if not isinstance(o, Loaded) and o not in duplicates]
    assert not problems, problems[:3]
    assert len(duplicates) == summary.agents[agent].expected_duplicates
    if agent == Agent("opencode"):
        assert duplicates
        assert all("/storage/session/" in o.source.path for o in duplicates)
    sessions = [o.session for o in outcomes if isinstance(o, Loaded)]
    assert len(sessions) >= 3
    assert sum(len(s.turns) for s in sessions) > len(sessions)
    if agent != Agent("aider"):  # Aider records no tool calls: edits are in the reply (docs/agents/aider.md "Lines")
        assert any(s.tool_calls for s in sessions)
    # Cursor's transcripts have no token counts; Grok's come from updates.jsonl, which newer builds write
    # (docs/agents/grok.md "Token usage"), and older ones (chat_history.jsonl only) have none. Kiro CLI's
    # conversation state has none the reader can confirm (docs/agents/kiro.md "Tokens").
    if agent not in (Agent("cursor"), Agent("kiro")):
        assert any(s.usage for s in sessions)
    if agent == Agent("grok"):
        assert any(not s.usage for s in sessions), "the generator writes sessions of older builds too"


def test_appended_session_still_loads_as_the_same_session(tmp_path: Path) -> None:
    summary = generate(tmp_path, 1.0, seed=5)
    path = tmp_path / summary.append_candidate
    before = outcomes_under(Agent("claude"), path.parent)[path.name]
    added = append_exchange(Material(5), random.Random("append"), path)
    after = outcomes_under(Agent("claude"), path.parent)[path.name]
    assert added > 0
    (old,), (new,) = before, after
    assert isinstance(old, Loaded) and isinstance(new, Loaded)
    assert new.session.session_id == old.session.session_id
    assert len(new.session.turns) > len(old.session.turns)
    assert new.session.turns[: len(old.session.turns)] == old.session.turns


def test_small_shape_puts_many_sessions_with_subagents_in_one_project_folder(tmp_path: Path) -> None:
    summary = generate(tmp_path, 1.0, seed=4, shape="small")
    assert summary.shape == "small" and set(summary.agents) == {"claude", "grok"}
    claude_folders = [p for p in (tmp_path / ".claude" / "projects").iterdir() if p.is_dir()]
    grok_folders = [p for p in (tmp_path / ".grok" / "sessions").iterdir() if p.is_dir()]
    assert len(claude_folders) == len(grok_folders) == 1, "every session of an agent in one project folder"
    mains = [p for p in claude_folders[0].glob("*.jsonl") if not p.name.startswith("agent-")]
    subagents = list(claude_folders[0].rglob("agent-*.jsonl"))
    assert len(mains) == summary.agents["claude"].sessions >= 8
    assert len(subagents) >= len(mains), "every Claude session spawned a subagent"
    assert any((grok_folders[0] / d.name / "subagents").is_dir() for d in grok_folders[0].iterdir())
    for agent in (Agent("claude"), Agent("grok")):
        roots = [root for root in extractor(agent).default_roots(tmp_path, {}) if root.exists()]
        outcomes = [o for root in roots for group in outcomes_under(agent, root).values() for o in group]
        assert outcomes and all(isinstance(o, Loaded) for o in outcomes), agent


def test_big_shape_is_one_claude_session_of_the_size(tmp_path: Path) -> None:
    summary = generate(tmp_path, 3.0, seed=4, shape="big")
    stats = summary.agents["claude"]
    assert stats.sessions == 1
    assert 3_000_000 <= stats.bytes_sources < 3_500_000
    with pytest.raises(ValueError):
        generate(tmp_path / "other", 1.0, mix={"claude": 0.5, "codex": 0.5}, shape="big")


def test_big_codex_shape_is_one_rollout_and_takes_an_appended_exchange(tmp_path: Path) -> None:
    summary = generate(tmp_path, 2.0, seed=4, mix={"codex": 1.0}, shape="big")
    stats = summary.agents["codex"]
    assert stats.sessions == stats.files == 1 and 2_000_000 <= stats.bytes_sources < 2_500_000
    path = tmp_path / summary.append_candidate
    assert path.name.startswith("rollout-")
    (old,) = outcomes_under(Agent("codex"), path.parent)[path.name]
    added = codex_gen.append_exchange(Material(4), random.Random("append"), path)
    (new,) = outcomes_under(Agent("codex"), path.parent)[path.name]
    assert added > 4_000 and isinstance(old, Loaded) and isinstance(new, Loaded)
    assert new.session.session_id == old.session.session_id
    assert len(new.session.turns) == len(old.session.turns) + 2
    assert new.session.turns[: len(old.session.turns)] == old.session.turns
    assert len(new.session.usage) == len(old.session.usage) + 1  # the totals grew: one more usage row


def test_shapes_are_deterministic(tmp_path: Path) -> None:
    for shape in ("small", "big"):
        generate(tmp_path / f"{shape}-1", 1.0, seed=9, shape=shape)
        generate(tmp_path / f"{shape}-2", 1.0, seed=9, shape=shape)
        a, b = _digests(tmp_path / f"{shape}-1"), _digests(tmp_path / f"{shape}-2")
        a.pop(MANIFEST), b.pop(MANIFEST)  # it records the generation time
        assert a == b and len(a) > 1


def test_readers_bench_reads_every_generated_agent_alone(tmp_path: Path) -> None:
    """`bench/readers.py` times each reader on a corpus of its agent alone: every agent the generator writes gets a
    row of loaded sessions and its share of the Claude reader's MB/s (the figures themselves are the bench's)."""
    import json

    from bench import readers

    out = tmp_path / "readers.json"
    readers.main(["--mb", "0.5", "--repeat", "1", "--keep", str(tmp_path / "work"), "--out", str(out)])
    rows = json.loads(out.read_text(encoding="utf-8"))["readers"]
    assert list(rows) == list(AGENTS)
    for agent, row in rows.items():
        assert row["outcomes"].get("Loaded", 0) >= 1, agent
        assert row["mb"] > 0 and row["mbps"] > 0 and row["share_of_claude"] > 0, agent
    assert rows["claude"]["share_of_claude"] == 1.0


def test_a_kept_corpus_written_by_another_version_of_the_generator_is_written_again_never_measured(
    tmp_path: Path,
) -> None:
    """`--keep` reuses a corpus made with the same arguments; one made by other generator code is stale (a Grok
    corpus kept from before the generator wrote Grok's real updates.jsonl read as a thousand rejections)."""

    from bench.generate import generator_digest
    from bench.readers import corpus
    from bench.run import ensure_corpus

    home = tmp_path / "home"
    first, generated = ensure_corpus(home, 0.3, 1, {"grok": 1.0})
    assert generated is not None and first["generator"] == generator_digest()
    assert ensure_corpus(home, 0.3, 1, {"grok": 1.0})[1] is None, "the same generator: reused"
    summary = json.loads((home / MANIFEST).read_text(encoding="utf-8"))
    (home / MANIFEST).write_text(json.dumps({**summary, "generator": "0123456789abcdef"}), encoding="utf-8")
    (home / "left-by-the-old-generator").write_text("x", encoding="utf-8")
    again, generated = ensure_corpus(home, 0.3, 1, {"grok": 1.0})
    assert generated is not None and again["generator"] == generator_digest()
    assert not (home / "left-by-the-old-generator").exists()

    kept = corpus(tmp_path / "readers", "grok", 0.3, 1)
    summary = json.loads((kept / MANIFEST).read_text(encoding="utf-8"))
    del summary["generator"]  # written before the digest was kept
    (kept / MANIFEST).write_text(json.dumps(summary), encoding="utf-8")
    corpus(tmp_path / "readers", "grok", 0.3, 1)
    assert load_summary(kept)["generator"] == generator_digest()
