"""Test-wide settings: Prefect in a temporary home, quiet; no test reads the real home's agent data."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="transcripts-prefect-")
for key, value in {
    "PREFECT_HOME": _PREFECT_HOME,
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_LOGGING_TO_API_ENABLED": "false",
}.items():
    os.environ[key] = value
# Agents' own overrides must never leak a developer's real data into a test.
for key in (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GROK_HOME",
    "XDG_DATA_HOME",
    "TRANSCRIPTS_CONFIG",
    "TRANSCRIPTS_DATA_DIR",
):
    os.environ.pop(key, None)
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="transcripts-xdg-")
# The default data dir (and the sample's) is under the data home: a test that names none never writes the real one.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="transcripts-data-home-")
# The managed Prefect server of a test lives here, never in the real ~/.local/state (stopped at the end).
_STATE_DIR = tempfile.mkdtemp(prefix="transcripts-state-")
os.environ["TRANSCRIPTS_STATE_DIR"] = _STATE_DIR
# The command runner (flows.service.runner) only where a test asks for it (tests/test_runner.py): the rest run here.
os.environ["TRANSCRIPTS_RUNNER"] = "off"


@pytest.fixture(scope="session", autouse=True)
def _no_managed_server_outlives_the_tests() -> Iterator[None]:
    try:
        yield
    finally:
        from flows.service import server

        server.stop(server.state_dir({"TRANSCRIPTS_STATE_DIR": _STATE_DIR}))


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A temporary Prefect API for tests that run the real flow (started once: it costs seconds)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(autouse=True)
def _prefect_loggers_as_they_were() -> Iterator[None]:
    """A command interrupted in this process (an in-process CLI test) silences Prefect's loggers for the rest of the
    process, as the command's own process would be ending (flows.cli.console._silence_prefect): put them back."""
    import logging

    levels = {
        name: logging.getLogger(name).level for name in list(logging.root.manager.loggerDict) if "prefect" in name
    }
    levels["prefect"] = logging.getLogger("prefect").level
    yield
    for name in list(logging.root.manager.loggerDict):
        if name == "prefect" or name.startswith("prefect."):
            logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))
