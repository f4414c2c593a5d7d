"""Opening the warehouse to read it, beside a run that may be changing it in place.

A run changes a big warehouse in place when nobody has it open (`sinks.warehouse.refresh`); for those seconds DuckDB's
file lock refuses every other connection at once, read-only ones included ("Could not set lock"), and never waits.
The tool's own readers (`sql`, `search`, `report`, `status`) wait for it instead, up to `WAIT_SECONDS`, while a run
holds the data directory; a file held by anything else (a DuckDB shell opened read-write) is refused at once, as
DuckDB refuses it. Only duckdb is imported here, so that `status` stays quick.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

WAIT_SECONDS = 60.0  # far longer than a run holds the file (the change of a 5 GB corpus's append: ~1 s)
LOCK_ERROR = "Could not set lock on file"


def first_line(exc: BaseException) -> str:
    """An error's first line (DuckDB's messages go on with hints and links), or its type when it has no text."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_lock_conflict(exc: BaseException) -> bool:
    """True for DuckDB's refusal because another process holds the file (not for a damaged or foreign file)."""
    return LOCK_ERROR in str(exc)


def connect(path: Path, *, wait: float = WAIT_SECONDS) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(path, read_only=True)`, waiting up to `wait` seconds while a run of this data directory (the
    folder of `path`) holds the file; raises DuckDB's error after that, or at once for any other failure."""
    import duckdb

    deadline = time.monotonic() + wait
    pause = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.IOException as exc:
            if not is_lock_conflict(exc) or time.monotonic() >= deadline or not _run_holds(path.parent):
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def _run_holds(data_dir: Path) -> bool:
    from sinks.ledger import lock_held

    return lock_held(data_dir, by_another=True)
