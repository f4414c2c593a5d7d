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


def test_schedule_serves_on_the_api_of_the_command_and_prints_the_ui(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib
    from collections.abc import Iterator

    from flows import etl
    from flows.server import Api

    @contextlib.contextmanager
    def managed() -> Iterator[Api]:
        yield Api("http://127.0.0.1:4999/api", "managed", 1, 4999)

    served: list[dict[str, object]] = []
    monkeypatch.setattr("flows.server.prefect_api", managed)
    monkeypatch.setattr(etl.etl_flow, "serve", lambda **kw: served.append(kw))
    (tmp_path / "h").mkdir()
    args = ["schedule", "--cron", "15 4 * * *", "--timezone", "UTC", "--data-dir", str(tmp_path / "d")]
    result = CliRunner().invoke(app, [*args, "--home", str(tmp_path / "h")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:4999" in result.output and "Traceback" not in result.output
    (kwargs,) = served
    assert kwargs["schedules"][0].cron == "15 4 * * *"  # type: ignore[index]
