"""Scale-out: the flow's extraction tasks on a Dask cluster, through prefect-dask's `DaskTaskRunner`.

Only the extraction tasks go to the cluster; the commit stays in the flow's own process, the one writer, under the
data directory's lock. A Dask worker reads its batch of sources and stages the rows under the data directory's
`staging/` folder, exactly as a local worker process does, and returns the small per-source results: so every node
must see the sources and the data directory at the same paths (a shared filesystem). `local` starts a
`distributed.LocalCluster` on this machine for the run and stops it after.

What `distributed` logs (its cluster's every step, and the tracebacks of a worker whose scheduler went away while
the cluster shuts down) goes to `dask.log` in the tool's state folder from WARNING up, and to the run's log file
(flows.etl.runlog) at the run's level, never to the command's terminal unless `-v`: the command says in one line
what failed, and that line names the file. A local cluster's workers do the same, Prefect's records included.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flows.etl import places, runlog

LOCAL = "local"
LOG_ENV = "TRANSCRIPTS_DASK_LOG"  # set for a local cluster's workers: where they log (see `dask_setup`)
RUN_LOG_ENV = "TRANSCRIPTS_RUN_LOG"  # and the run's log file, its level and whether -v: "LEVEL:0|1:PATH"
_LOGGERS = ("distributed", "tornado")  # distributed's own logging setup gives each a stderr handler of its own
_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


def log_path() -> Path:
    """Where the cluster's logs go: `dask.log` beside the managed server's folder."""
    return places.state_dir().parent / "dask.log"


@contextlib.contextmanager
def dask_runner(address: str, *, workers: int = 2, log: runlog.Destination | None = None) -> Iterator[Any]:
    """A started `DaskTaskRunner` for a scheduler address (`tcp://host:8786`) or `local` (a LocalCluster of
    `workers` single-threaded processes: parsing is Python and holds the GIL), with `distributed`'s logs in
    `log_path()` while it runs (and in the run's log file, `log`)."""
    # here: Dask (~1 s), for `--dask` only
    from prefect_dask.task_runners import DaskTaskRunner

    path = log_path()
    if address == LOCAL:
        runner = DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={
                "n_workers": max(1, workers),
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,  # no dashboard ...
                # ... but the scheduler still serves health and metrics over HTTP, by default on port 8787, and
                # with that port taken (another cluster, a notebook) it warns on stderr and takes another: a free
                # port of 127.0.0.1 from the start.
                "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                # each worker process sends its logs to the same file (`dask_setup` below, run as it starts)
                "preload": [__name__],
                "env": {LOG_ENV: str(path), **_run_log_env(log)},
            },
        )
    else:
        runner = DaskTaskRunner(address=address)  # its workers are someone else's: their logs stay theirs
    with logs_to(path, log), runner:
        yield runner


def _run_log_env(log: runlog.Destination | None) -> dict[str, str]:
    if log is None:
        return {}
    return {RUN_LOG_ENV: f"{log.level}:{int(log.terminal)}:{log.path}", "PREFECT_LOGGING_LEVEL": _name(log.level)}


def _name(level: int) -> str:
    return logging.getLevelName(level) if isinstance(logging.getLevelName(level), str) else "INFO"


def _run_log_from_env() -> runlog.Destination | None:
    level, terminal, path = (os.environ.get(RUN_LOG_ENV) or "::").split(":", 2)
    if not path or not level.isdigit():
        return None
    return runlog.Destination(Path(path), int(level), terminal == "1")


@contextlib.contextmanager
def logs_to(path: Path, log: runlog.Destination | None = None) -> Iterator[None]:
    """`distributed`'s and tornado's records (WARNING and up) into `path` instead of stderr, and at the run's level
    to the root logger's handlers (the run's file; -v's stderr) when a run is under way; then as they were."""
    handler = _file_handler(path)
    level = log.level if log is not None else None
    saved = [state for name in _LOGGERS for state in _route(logging.getLogger(name), handler, level)]
    try:
        yield
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
        handler.close()


def dask_setup(worker: Any) -> None:
    """Run by distributed in each worker process of a local cluster as it starts (the `preload` above): the
    worker's logs into the file its nanny named, never the command's terminal."""
    path = os.environ.get(LOG_ENV)
    run = _run_log_from_env()
    if run is not None:
        # Before Prefect loads here (with the first task): it finds the run's file on the root logger and leaves
        # it there, without its own stderr handler (runlog.PrivateFileHandler); its level is the run's
        # (PREFECT_LOGGING_LEVEL, set for the workers by `dask_runner`).
        runlog.in_worker(run)
    if path:
        handler = _file_handler(Path(path))
        for name in _LOGGERS:
            _route(logging.getLogger(name), handler, run.level if run is not None else None)


def _file_handler(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)  # appended to: a file per machine
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.WARNING)
    return handler


def _route(
    logger: logging.Logger, handler: logging.Handler, level: int | None = None
) -> list[tuple[logging.Logger, list[logging.Handler], int, bool]]:
    """Send `logger`'s records (and its children's: distributed's setup gives some a stderr handler of their own)
    to `handler` only, at WARNING and up; with a run's `level`, on to the root logger's handlers as well (the
    run's file) from that level up. What each had before, to put back."""
    children = [
        c
        for n, c in logging.root.manager.loggerDict.items()
        if n.startswith(f"{logger.name}.") and isinstance(c, logging.Logger) and c.handlers
    ]
    before = [(x, list(x.handlers), x.level, x.propagate) for x in (logger, *children)]
    for child in children:
        child.handlers[:] = []  # distributed.client, tornado.application...: their records reach `logger`
        child.propagate = True
    logger.handlers[:] = [handler]
    if level is None:
        logger.setLevel(max(logger.level, logging.WARNING))
        logger.propagate = False
    else:
        logger.setLevel(level)
        logger.propagate = True
    return before
