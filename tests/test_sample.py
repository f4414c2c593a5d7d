"""The sample corpus shipped in data/sample loads as the README says."""

from __future__ import annotations

from pathlib import Path

from flows.cli import SAMPLE_HOME
from flows.settings import load_settings
from tests.test_pipeline import run, table_rows


def test_sample_home_loads_every_agent_and_shows_a_rejection(tmp_path: Path) -> None:
    data = tmp_path / "data"
    report = run(load_settings(home=SAMPLE_HOME, data_dir=data, env={}))
    loaded = {agent: c["sessions_loaded"] for agent, c in report.committed.counts_by_agent.items()}
    assert loaded == {"claude": 3, "codex": 1, "gemini": 1, "grok": 1, "opencode": 1}
    assert sorted(r[4] for r in table_rows(data, "rejects")) == ["invalid_json", "no_conversation"]
    prompts = {r[5] for r in table_rows(data, "turns") if r[4] == "user"}
    assert "/review src/forms" in prompts
    assert not any("system-reminder" in p for p in prompts)
    sessions = {r[0]: r[3] for r in table_rows(data, "sessions")}
    parent = "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01"
    assert sessions[f"{parent}-agent-a7c41d2"] == parent
