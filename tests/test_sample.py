"""The sample corpus shipped in data/sample loads as the README says, into a data dir of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.etl import datahome
from flows.etl.datahome import SAMPLE_HOME
from flows.etl.settings import load_settings
from tests.corpus import small_home
from tests.test_cli import invoke, one_line
from tests.test_pipeline import run, table_rows


def test_sample_home_loads_every_agent_and_shows_a_rejection(tmp_path: Path) -> None:
    data = tmp_path / "data"
    report = run(load_settings(home=SAMPLE_HOME, data_dir=data, env={}))
    loaded = {agent: c["sessions_loaded"] for agent, c in report.committed.counts_by_agent.items()}
    assert loaded == {"claude": 3, "codex": 1, "gemini": 1, "grok": 1, "opencode": 1, "cursor": 1, "aider": 1}
    assert sorted(r[4] for r in table_rows(data, "rejects")) == ["invalid_json", "no_conversation"]
    prompts = {r[5] for r in table_rows(data, "turns") if r[4] == "user"}
    assert "/review src/forms" in prompts
    assert not any("system-reminder" in p for p in prompts)
    sessions = {r[0]: r[3] for r in table_rows(data, "sessions")}
    parent = "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01"
    assert sessions[f"{parent}-agent-a7c41d2"] == parent


@pytest.mark.usefixtures("prefect_harness")
def test_a_sample_run_then_a_real_run_keep_every_sample_session_out_of_the_real_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(datahome, "PROJECT_DIR", tmp_path)  # whatever this checkout's data/ holds
    monkeypatch.chdir(tmp_path)
    sample, real = tmp_path / "xdg" / "transcripts-sample", tmp_path / "xdg" / "transcripts"
    code, out = invoke("run", "--sample")
    assert code == 0, out
    assert f"transcripts status --data-dir {sample}" in out, "the summary says how to look at the sample"
    assert not real.exists()
    code, out = invoke("backfill", "chatgpt", str(SAMPLE_HOME.parent / "chatgpt" / "conversations.json"), "--write")
    assert code == 0, out
    home = small_home(tmp_path / "home")
    code, out = invoke("run", "--home", str(home))
    assert code == 0, out
    assert f"Corpus: {real / 'warehouse.duckdb'}" in out
    sample_sessions = {r[0] for r in table_rows(sample, "sessions")}
    real_sessions = {r[0] for r in table_rows(real, "sessions")}
    assert len(sample_sessions) == 11, "9 sessions of the sample home and the export's 2 conversations"
    assert real_sessions and not real_sessions & sample_sessions
    shipped = SAMPLE_HOME.parent.resolve()
    assert all(Path(r[0]).resolve().is_relative_to(shipped) for r in table_rows(sample, "sources"))
    assert not any(Path(r[0]).resolve().is_relative_to(shipped) for r in table_rows(real, "sources"))

    code, out = invoke("run", "--home", str(SAMPLE_HOME))  # the sample by its path: its own data dir too
    assert code == 0 and str(sample) in out, out
    code, out = invoke("run", "--home", str(home), "--data-dir", str(sample))
    assert code == 2 and "holds the sample corpus" in one_line(out), out
    code, out = invoke("run", "--sample", "--data-dir", str(real))
    assert code == 2 and "not the sample" in one_line(out), out
    assert {r[0] for r in table_rows(real, "sessions")} == real_sessions
    code, out = invoke("status", "--data-dir", str(sample))
    assert code == 0 and str(sample) in out, out
