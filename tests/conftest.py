"""Test-wide settings: Prefect in a temporary home, quiet; no test reads the real home's agent data."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

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
    "AIDER_CHAT_HISTORY_FILE",
    "GOOSE_PATH_ROOT",
):
    os.environ.pop(key, None)
# Aider's run headers are local times without a zone, read in the machine's zone (docs/agents/aider.md "Times"): the
# tests read them in UTC wherever they run.
os.environ["TZ"] = "UTC"
time.tzset()
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="transcripts-xdg-")
# The default data dir (and the sample's) is under the data home: a test that names none never writes the real one.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="transcripts-data-home-")
# The managed Prefect server of the tests lives here, never in the real ~/.local/state: one for the whole run, shared
# by pytest-xdist's workers (they share the run's id), since starting one costs 20-50 s of CPU on a loaded 2-core
# machine and each worker started its own, and a harness server besides. Stopped by the last worker to finish.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
if _RUN.isalnum():
    _STATE_DIR = os.path.join(tempfile.gettempdir(), f"transcripts-state-{_RUN}")
    os.makedirs(_STATE_DIR, mode=0o700, exist_ok=True)
else:
    _STATE_DIR = tempfile.mkdtemp(prefix="transcripts-state-")
os.environ["TRANSCRIPTS_STATE_DIR"] = _STATE_DIR
# The command runner (flows.service.runner) only where a test asks for it (tests/test_runner.py): the rest run here.
os.environ["TRANSCRIPTS_RUNNER"] = "off"


@pytest.fixture(scope="session", autouse=True)
def _no_managed_server_outlives_the_tests() -> Iterator[None]:
    """Each worker holds the tests' managed server in use (the shared lock every command takes) for its whole
    session; the one that then finds no other worker holding it stops it, whatever happened."""
    import fcntl

    from flows.service import server

    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": _STATE_DIR})
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    held = os.open(folder / server.IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_SH)
    try:
        yield
    finally:
        os.close(held)
        last = os.open(folder / server.IN_USE, os.O_RDWR)
        try:
            fcntl.flock(last, fcntl.LOCK_EX | fcntl.LOCK_NB)
            server.stop(folder)
            if _RUN.isalnum():
                shutil.rmtree(_STATE_DIR, ignore_errors=True)
        except BlockingIOError:
            pass  # another worker is still at work: it stops the server
        finally:
            os.close(last)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A Prefect API for tests that call the real flow in this process: the run's managed server (one for every
    worker, started by the first that needs it), set in Prefect's settings as a harness would set its own."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.service import server
    from tests.prefect_db import migrated

    api = server.start(server.state_dir({"TRANSCRIPTS_STATE_DIR": str(migrated(Path(_STATE_DIR)))}))
    with temporary_settings(updates={PREFECT_API_URL: api.url}):
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
