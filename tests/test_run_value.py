"""One run as one value (flows.etl.run.Run): what travels to worker processes and Dask workers with every batch."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from pathlib import Path

from flows.etl.run import Run
from flows.etl.settings import load_settings
from transforms.redact import Redactor


def test_a_run_sent_to_its_workers_leaves_the_environment_behind(tmp_path: Path) -> None:
    """A Dask cluster may be another machine: the tokens a person keeps in the environment stay in the flow's
    process, while everything a batch reads goes with the run."""
    env = {"HOME": str(tmp_path), "GITHUB_TOKEN": "ghp_do_not_send_me", "TRANSCRIPTS_LIMIT_MAX_LINE_BYTES": "4096"}
    settings = load_settings(data_dir=tmp_path / "data", env=env)
    assert settings.env["GITHUB_TOKEN"] == "ghp_do_not_send_me"
    run = Run(settings, "run-1", {"claude": "v1"}, {"claude": 4}, Redactor(None))
    sent = pickle.dumps(run)
    assert b"ghp_do_not_send_me" not in sent
    there = pickle.loads(sent)
    assert there.settings.env == {}
    assert (there.data_dir, there.limits.max_line_bytes) == (tmp_path / "data", 4096)
    assert (there.run_id, there.parser_versions, there.buckets) == ("run-1", {"claude": "v1"}, {"claude": 4})
    assert there.store.data_dir == tmp_path / "data"


def test_a_run_tells_the_time_by_its_clock(tmp_path: Path) -> None:
    fixed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = Run(load_settings(data_dir=tmp_path, env={"HOME": str(tmp_path)}), "r", {}, {}, Redactor(None), lambda: fixed)
    assert run.clock() == fixed
    assert Run(run.settings, "r", {}, {}, Redactor(None)).clock().tzinfo is UTC
