"""Extraction on every core: a fork-server process pool whose workers die with the run.

Parsing is Python and holds the GIL, so batches are read in worker processes. The fork server is started clean
(no threads: Prefect's and DuckDB's live in the parent) with the extractors preloaded, so a worker costs a fork,
not an interpreter start. The fork server gets SIGKILL when the run goes, however it goes, and the workers when
the fork server goes (Linux), so a killed run leaves no process behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import process as pool_internals

from flows.etl import runlog


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def die_with_parent() -> None:
    """Ask the kernel for SIGKILL when this process's parent dies (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


PRELOAD = ["flows.etl._forkserver_init", "flows.etl.batch"]
# multiprocessing's resource tracker (a process of its own, started with the fork server or the first pool) removes
# the pool's semaphores when the run exits; a run stopped while its pool was being abandoned (a signal during a
# batch) exits with them still registered, and the tracker, removing them, warned about each on the terminal (seen
# once in a full test run, a stopped watch). The cleanup is right and the run's one line says what happened: the
# tracker is started with its warnings off (it takes the interpreter's -W options).
QUIET_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_tracker() -> None:
    """Give the resource tracker, when it is started from now on, the -W option QUIET_TRACKER."""
    if QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_TRACKER)


def start_fork_server() -> None:
    """Start the pool's fork server now (it loads the readers in its own process, ~0.3 s): a command calls this
    before it imports Prefect, so the two overlap instead of the first batch waiting for the server."""
    # here: only a run with worker processes starts a fork server
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    _quiet_tracker()
    forkserver.ensure_running()


@contextlib.contextmanager
def extraction_pool(
    workers: int, *, apart: bool = False, log: runlog.Destination | None = None
) -> Iterator[ProcessPoolExecutor | None]:
    """A pool of `workers` processes, or None when one process is all the work needs; with `apart`, a pool of one
    process at least (work whose memory should go back to the system when it is done, not stay with the run).
    `log`: the run's log file and level (flows.etl.runlog.current()), where the workers' records go."""
    if workers <= 1 and not apart:
        yield None
        return
    workers = max(1, workers)
    context = multiprocessing.get_context("forkserver")
    # The fork server dies with this process, and each worker with the fork server (its parent).
    context.set_forkserver_preload(PRELOAD)
    _quiet_tracker()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start, initargs=(log,))
    try:
        yield pool
    except BaseException:
        _abandon(pool)
        raise
    else:
        pool.shutdown(wait=True)


def _abandon(pool: ProcessPoolExecutor) -> None:
    """The run failed or was interrupted: its batches are not wanted. Cancel those not started and kill the workers
    reading the others, rather than wait for them (a stopped watch would wait for every batch of its load)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown forgets them
    call_queue = getattr(pool, "_call_queue", None)  # and these
    result_queue = getattr(pool, "_result_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            process.kill()
    if processes and result_queue is not None:
        # A worker killed while it wrote its batch's result leaves part of it in the results pipe, and the pool's
        # thread reading that pipe waits for the rest for good, every batch's future with it: a task waiting on one
        # never ends, nor the stopped run that waits for its tasks (CI: the runner's Ctrl-C test hung, 3.11 and
        # 3.13). The workers' ends of the pipe close as they die; this process's end, which it never writes to,
        # is the last: closed, the read ends, the pool is broken and its futures fail (`extract_batch`: Cancelled).
        with contextlib.suppress(OSError, AttributeError):
            result_queue._writer.close()
    if processes and call_queue is not None and not _CLOSES_ITS_QUEUE:
        # Python before the fix of gh-94777 (Debian 12's 3.11.2): a batch being written to the workers' queue as they
        # are killed blocks the pool's writing thread for good, and the process's exit with it. Close the queue's
        # reading end here as later Pythons do (the pool's own thread never does there): the write fails, and ends.
        with contextlib.suppress(OSError, AttributeError):
            call_queue._reader.close()


def _closes_its_queue() -> bool:
    """Whether this Python's broken pool closes its call queue's reading end itself (gh-94777: 3.11.3+, 3.12+)."""
    queue = getattr(pool_internals, "_SafeQueue", None)
    manager = getattr(pool_internals, "_ExecutorManagerThread", None)
    return hasattr(queue, "_terminate_broken") or (
        manager is not None and "_reader" in manager.terminate_broken.__code__.co_names
    )


_CLOSES_ITS_QUEUE = _closes_its_queue()


def _worker_start(log: runlog.Destination | None) -> None:
    """As a pool worker starts: die with the run, and log into the run's file (a reader's records, such as a
    reader bug's, would otherwise reach the terminal through logging's last resort)."""
    die_with_parent()
    runlog.in_worker(log)
