"""A run's progress on a terminal: the stage, sources and bytes done of the plan, the rate and the time left.

Drawn with rich on stderr, only on a terminal, and only for a run that lasts: it appears once the run has gone on
for `TRANSCRIPTS_PROGRESS_AFTER` seconds (2 by default), so that a short run prints its summary and nothing else;
rich itself is imported then, not before (a no-op run stays fast). Transient: gone when the summary prints.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

AFTER_ENV = "TRANSCRIPTS_PROGRESS_AFTER"
AFTER_SECONDS = 2.0


def wanted(as_json: bool, verbose: int) -> bool:
    """A display for a person at a terminal: stdout and stderr both terminals, not --json, not -v (whose log
    records on stderr say how far the run is)."""
    return not as_json and not verbose and sys.stdout.isatty() and sys.stderr.isatty()


def delay() -> float:
    try:
        return max(0.0, float(os.environ.get(AFTER_ENV, AFTER_SECONDS)))
    except ValueError:
        return AFTER_SECONDS


class Display:
    """The progress of one run. `stage()` and `update()` may be called from any thread; `stop()` ends it."""

    def __init__(self, after: float | None = None) -> None:
        self._lock = threading.Lock()
        self._stage = "discovering"
        self._sources = (0, 0)  # done, total (total 0: not known yet)
        self._bytes = (0, 0)
        self._reading_since: float | None = None  # when the first bytes were asked for: the rate is over that time
        self._progress: Any = None
        self._task: Any = None
        self._stopped = False
        self._timer = threading.Timer(delay() if after is None else after, self._start)
        self._timer.daemon = True
        self._timer.start()

    def stage(self, name: str) -> None:
        with self._lock:
            self._stage = name
            self._show()

    def update(self, stage: str, sources_done: int, sources_total: int, bytes_done: int, bytes_total: int) -> None:
        """The flow's progress (flows.etl.flow.progress_hook)."""
        with self._lock:
            if stage == "reading" and self._reading_since is None:
                self._reading_since = time.monotonic()
            self._stage = stage
            self._sources = (sources_done, sources_total)
            self._bytes = (bytes_done, bytes_total)
            self._show()

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._stopped = True
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def _start(self) -> None:
        # here: rich (~80 ms), only once a run has lasted long enough to show its progress
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        with self._lock:
            if self._stopped:
                return
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(bar_width=12),
                TextColumn("{task.fields[figures]}"),
                console=Console(stderr=True),
                transient=True,
                refresh_per_second=4,
            )
            self._task = self._progress.add_task(self._stage, total=None, figures="")
            self._progress.start()
            self._show()

    def _show(self) -> None:
        if self._progress is None:
            return
        done, total = self._bytes
        self._progress.update(
            self._task,
            description=self._stage,
            completed=done,
            total=total or None,
            figures=_figures(self._stage, self._sources, self._bytes, self._reading_since),
        )
        self._progress.refresh()


def _figures(stage: str, sources: tuple[int, int], done: tuple[int, int], since: float | None) -> str:
    """`340/1082 sources · 20.1/57.4 MB · 12.3 MB/s · ETA 0:04`: what is known so far (nothing before the plan);
    the rate is over the time since reading began, and the time left is the bytes left at that rate."""
    sources_done, sources_total = sources
    if not sources_total:
        return ""
    mb = 1024 * 1024
    parts = [f"{sources_done}/{sources_total} sources", f"{done[0] / mb:.1f}/{done[1] / mb:.1f} MB"]
    if stage == "reading":
        seconds = time.monotonic() - since if since is not None else 0.0
        rate = done[0] / seconds if seconds > 0 and done[0] else 0.0
        parts.append(f"{rate / mb:.1f} MB/s" if rate else "… MB/s")
        left = int((done[1] - done[0]) / rate) if rate else None
        parts.append(f"ETA {left // 60}:{left % 60:02d}" if left is not None else "ETA …")
    return " · ".join(parts)
