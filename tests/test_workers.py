"""The extraction pool's fork server and workers: Ctrl-C is the run's to handle, and they die with it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

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


EXITS_WITH_A_SEMAPHORE_REGISTERED = """
import os, sys
from flows.etl.workers import extraction_pool
with extraction_pool(2) as pool:
    pool.submit(os.getpid).result(timeout=120)
    pool._mp_context.Semaphore(1)  # as a pool being abandoned leaves its queues' semaphores when the run exits
    sys.stdout.flush()
    os._exit(0)
"""


def test_a_run_that_exits_with_its_pools_semaphores_registered_prints_nothing_from_the_resource_tracker(
    tmp_path: Path,
) -> None:
    """Stopped during a batch, a run exits while its abandoned pool's semaphores are still registered: the resource
    tracker removes them (right) and warned about each on the terminal, beside the run's one line (seen in a stopped
    `transcripts watch`). The run starts it with its warnings off."""
    done = subprocess.run(
        [sys.executable, "-c", EXITS_WITH_A_SEMAPHORE_REGISTERED],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
    )
    # The tracker writes after the run is gone, on the stderr it inherited: read to its end, which waits for it too.
    assert done.returncode == 0
    assert done.stderr == ""


def _write_half_a_result(written: str) -> None:
    """In a pool worker: begin a result message on the pool's results pipe and never finish it, as a worker killed
    while it sends a batch's result leaves it (the header promises 1 MiB, 16 bytes follow); then say so (`written`)."""
    import gc
    import multiprocessing.queues
    import struct
    import time

    queue = next(o for o in gc.get_objects() if isinstance(o, multiprocessing.queues.SimpleQueue))
    with queue._wlock:
        queue._writer._send(struct.pack("!i", 1 << 20) + b"x" * 16)
        Path(written).touch()
        time.sleep(600)  # killed here by the abandon


def test_an_abandoned_pool_whose_worker_died_mid_result_fails_its_futures_instead_of_waiting_forever(
    tmp_path: Path,
) -> None:
    """Abandoned (`_abandon`: a run stopped between two batches), the pool kills its workers; one killed while it
    wrote a batch's result left the pool's reading thread waiting for the rest of it, and every future with it: the
    task waiting on the batch never ended, nor the stopped run (the runner's Ctrl-C test hung in CI). The worker's
    torn message is written here on purpose; the batch's future must fail, promptly, as the pool is broken."""
    import time
    from concurrent.futures.process import BrokenProcessPool

    from flows.etl.workers import _abandon

    with extraction_pool(1, apart=True) as pool:
        assert pool is not None
        assert pool.submit(time.time).result(timeout=120)  # the worker is up
        written = tmp_path / "written"
        torn = pool.submit(_write_half_a_result, str(written))
        deadline = time.monotonic() + 120
        while not written.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert written.exists(), "the worker wrote half a result"
        time.sleep(0.5)  # the pool's thread reads the header and waits for the rest
        _abandon(pool)
        assert isinstance(torn.exception(timeout=30), BrokenProcessPool)
