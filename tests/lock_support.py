"""Proving that a step waits for the writer lock: events, not sleeps, decide what happened first."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import pytest

from sinks.lock import writer_lock

T = TypeVar("T")

# A bound on waits that only a broken test reaches (a hang), never a guess at how long a step takes.
HANG = 120.0


# Written while a step waits, by design: the lock itself, and the run ledger, which records that a run started
# (and so, once it ends, that it waited) before it may take the lock.
NOT_CORPUS = frozenset({".lock", "ledger.jsonl"})


def _files(data: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(data.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name not in NOT_CORPUS
    }


def runs_only_after_the_lock_is_free(data: Path, step: Callable[[], T], monkeypatch: pytest.MonkeyPatch) -> T:
    """Hold `data`'s writer lock, start `step` in a thread, and return its result; fail unless it waited.

    "It waited" is seen, not timed: `sinks.lock` sleeps only when the lock is busy, and that sleep sets an event.
    While the step waits, nothing under `data` may change; only then is the lock let go. A step that does not
    take the lock never sleeps there and finishes first: the test fails saying so.
    """
    held, let_go, waiting, done = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    real_sleep = time.sleep

    def busy_sleep(seconds: float) -> None:
        waiting.set()
        real_sleep(min(seconds, 0.02))

    monkeypatch.setattr("sinks.lock.time", SimpleNamespace(monotonic=time.monotonic, sleep=busy_sleep))

    def hold() -> None:
        with writer_lock(data, 0):
            held.set()
            let_go.wait(HANG)

    result: list[T] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            result.append(step())
        except BaseException as exc:  # handed to the test thread below
            failure.append(exc)
        finally:
            done.set()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert held.wait(HANG), "the holder never took the lock"
        assert (data / ".lock").read_text().startswith("pid "), "the lock file names its holder"
        before = _files(data)
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        while not waiting.is_set() and not done.is_set():
            waiting.wait(0.01)
        assert not done.is_set(), "the step finished while another writer held the lock: it does not take the lock" + (
            f" (it raised {failure[0]!r})" if failure else ""
        )
        waited_unchanged = _files(data) == before
    finally:
        let_go.set()
        holder.join(HANG)
    assert done.wait(HANG), "the step never finished after the lock was let go"
    if failure:
        raise failure[0]
    assert waited_unchanged, "the step wrote under the data directory while it waited"
    return result[0]


# A process holding the warehouse open, released when told: read-write with the data directory's writer lock ("run",
# as a run changing it in place does), read-write without it ("shell", a DuckDB shell opened on it), or read-only
# ("reader", a notebook).
HOLDER = """
import sys, time, contextlib, duckdb
from pathlib import Path
from sinks.lock import writer_lock
data, kind = Path(sys.argv[1]), sys.argv[2]
with writer_lock(data, 5) if kind == "run" else contextlib.nullcontext():
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=kind == "reader")
    print("held", flush=True)
    sys.stdin.readline()
    time.sleep(0.3)  # whoever waits for the file is already asking
    con.close()
    print("closed", flush=True)
"""


def holder(data: Path, kind: str) -> subprocess.Popen[str]:
    """A process holding `data`'s warehouse (see HOLDER), once it holds it; the caller kills it, whatever happens."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "held":
        proc.kill()
        proc.wait()
        raise AssertionError("the holder could not open the warehouse")
    return proc
