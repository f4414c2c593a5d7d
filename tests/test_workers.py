"""The extraction pool's fork server and workers: Ctrl-C is the run's to handle, and they die with it."""

from __future__ import annotations

import signal

from flows.etl.workers import extraction_pool


def stop_dispositions() -> str:
    handlers = {signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    return "ignored" if handlers == {signal.SIG_IGN} else repr(handlers)


def test_the_pool_workers_leave_ctrl_c_and_sigterm_to_the_run() -> None:
    """A terminal's Ctrl-C reaches every process of the group, a service manager's SIGTERM every process of the
    service: a worker (or the fork server, still loading the readers) that took it would print a KeyboardInterrupt
    traceback beside the run's one line, or die first and have the run call its load failed (a broken pool)."""
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with extraction_pool(2) as pool:
        assert pool is not None
        assert {pool.submit(stop_dispositions).result(timeout=120) for _ in range(4)} == {"ignored"}
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == before  # the run still takes them
