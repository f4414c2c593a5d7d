"""One writer at a time: an advisory lock on `data/.lock`, released by the kernel when the holder dies."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from sinks.files import FILE_MODE


class LockBusy(RuntimeError):
    """Another run holds the data directory."""


@contextlib.contextmanager
def writer_lock(data_dir: Path, wait_seconds: float) -> Iterator[None]:
    """Hold the data directory's writer lock; wait up to `wait_seconds` for it, then raise LockBusy.

    A run killed with SIGKILL leaves the file but not the lock (flock dies with the process), so a stale lock is
    recovered without guessing from pids or timestamps.
    """
    path = data_dir / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another run"
                    raise LockBusy(
                        f"{data_dir} is being written by {holder}; waited {wait_seconds:g}s. "
                        "Try again when it finishes (or raise --wait)."
                    ) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock
