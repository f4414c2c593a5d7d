"""The extraction pool's fork server and workers: Ctrl-C is the run's to handle, and they die with it."""

from __future__ import annotations

import signal

from flows.etl.workers import extraction_pool


def sigint_disposition() -> str:
    handler = signal.getsignal(signal.SIGINT)
    return "ignored" if handler == signal.SIG_IGN else repr(handler)


def test_the_pool_workers_leave_ctrl_c_to_the_run() -> None:
    """A terminal's Ctrl-C reaches every process of the group: a worker (or the fork server, still loading the
    readers) that took it would print a KeyboardInterrupt traceback beside the run's one line."""
    before = signal.getsignal(signal.SIGINT)
    with extraction_pool(2) as pool:
        assert pool is not None
        assert {pool.submit(sigint_disposition).result(timeout=120) for _ in range(4)} == {"ignored"}
    assert signal.getsignal(signal.SIGINT) == before  # the run itself still takes Ctrl-C
