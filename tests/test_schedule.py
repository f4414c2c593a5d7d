"""`transcripts schedule`: the cron and time zone reach Prefect; without a server it says what to do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.schedule import serve_arguments
from flows.settings import load_settings


def test_serve_arguments_carry_the_configured_cron_and_time_zone(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[schedule]\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"\n')
    settings = load_settings(config=config, data_dir=tmp_path / "d", home=tmp_path, env={})
    args = serve_arguments(settings, {"data_dir": settings.data_dir, "home": None, "sources": ["claude"]})
    (cron,) = args["schedules"]
    assert (cron.cron, cron.timezone) == ("30 2 * * *", "Europe/Berlin")
    assert args["pause_on_shutdown"] is False
    assert args["parameters"] == {"options": {"data_dir": str(settings.data_dir), "home": None, "sources": ["claude"]}}
    later = dataclasses.replace(settings, schedule_cron="0 4 * * 1")
    assert serve_arguments(later, {})["schedules"][0].cron == "0 4 * * 1"


def test_schedule_without_a_prefect_server_explains_how_to_start_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's Prefect test harness may be active: pretend no server is configured.
    monkeypatch.setattr("flows.schedule.configured_api", lambda: None)
    result = CliRunner().invoke(app, ["schedule", "--data-dir", str(tmp_path / "d"), "--home", str(tmp_path)])
    assert result.exit_code == 2
    assert "prefect server start" in result.output.replace("\n", " ")
