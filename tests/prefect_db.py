"""A Prefect database with Prefect's migrations applied, for the managed servers the tests start.

A managed server's first start in a fresh state folder runs every migration of Prefect's database: measured here,
38 s against 12 s for a start on a migrated one, on a loaded 2-core machine. The tests start a dozen servers of
their own (their life is what they test), so each gets a copy of one database migrated once per test run, made by
Prefect's own `prefect server database upgrade`. Nothing else is in it: no flow run, no deployment. `tests/
test_install.py` keeps the fresh first start a person's first run meets.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# One per test run, shared by the xdist workers (they share the run's id); per process without xdist.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
_FOLDER = Path(tempfile.gettempdir()) / f"transcripts-prefect-db-{_RUN if _RUN.isalnum() else os.getpid()}"


def _template() -> Path:
    database = _FOLDER / "prefect.db"
    _FOLDER.mkdir(mode=0o700, exist_ok=True)
    with open(_FOLDER / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker makes it; the others wait for it
        if not database.exists():
            home = _FOLDER / "making"
            shutil.rmtree(home, ignore_errors=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
            subprocess.run(
                [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                env=env,
                check=True,
                capture_output=True,
                timeout=300,
            )
            (home / "prefect.db").replace(database)  # whole, or not there: the next caller makes it again
    return database


def migrated(state_base: Path) -> Path:
    """Give the managed server of the state folder `state_base` (TRANSCRIPTS_STATE_DIR) a migrated database, unless
    it has one; returns `state_base`."""
    home = state_base / "prefect" / "home"
    if not (home / "prefect.db").exists():
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(_template(), home / "prefect.db")
    return state_base
