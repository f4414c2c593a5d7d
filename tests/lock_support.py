"""Proving that a step waits for the writer lock: events, not sleeps, decide what happened first."""

from __future__ import annotations

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


def _files(data: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(data.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != ".lock"
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
