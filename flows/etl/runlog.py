"""A run's log file: every log record of a run (ours, Prefect's, Dask's), in `<data dir>/logs/run-<run id>.log`.

A command prints its summary, not log records (flows.cli.console.route_logs keeps them off the terminal unless
`-v`); the records go here, whichever way the run was started: `transcripts run` and `backfill`, or the nightly
schedule's flow run (`flows.etl.flow.run_etl` opens the file when its caller did not). The file is 0600 in a 0700
folder, created at the run's first record only (a no-op run that logs nothing leaves none, nor a data dir), and the
folder keeps the newest `KEEP` runs' files: a run's first record removes the older ones. Worker processes (the
extraction pool's, a local Dask cluster's) append to the same file (`current()` tells them where and at which level).

Standard library only: on the path of a no-op `run`.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from sinks.ledger import private_dirs

LOGS = "logs"  # the folder in the data dir
KEEP = 30  # run logs kept: the newest, by run id (which begins with the run's start time)
FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"
# The loggers a run's level applies to (others log from WARNING up): ours, Prefect's and Dask's.
FAMILIES = ("transcripts", "prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.client", "distributed")

_level = logging.INFO  # the command's level (flows.cli.console.route_logs: -vv is DEBUG)
_terminal = False  # -v: the records on stderr too
_handler: logging.Handler | None = None  # the run's file, while a run is under way in this process
_path: Path | None = None


def folder(data_dir: Path) -> Path:
    return data_dir / LOGS


def path_of(data_dir: Path, run_id: str) -> Path:
    return folder(data_dir) / f"run-{run_id}.log"


class Destination(NamedTuple):
    """Where a run's records go: its file, from `level` up, and stderr too (`terminal`, the command's -v)."""

    path: Path
    level: int
    terminal: bool


def set_level(level: int, terminal: bool = False) -> None:
    """The level of this process's runs (and of the worker processes they start), and whether their records
    reach stderr as well (said to worker processes: this process's own stderr handler is the command's)."""
    global _level, _terminal
    _level, _terminal = level, terminal
    if _handler is not None:
        _handler.setLevel(level)


def level() -> int:
    return _level


def current() -> Destination | None:
    """Where the records of the run under way in this process go (None: no run), for its worker processes."""
    return Destination(_path, _level, _terminal) if _path is not None else None


def in_worker(where: Destination | None) -> None:
    """In a worker process of the run (the extraction pool's, a local Dask cluster's), as it starts: its records
    into the run's file (and on stderr with -v), ours, Prefect's and Dask's at the run's level; with no run,
    nowhere (never logging's last resort, which writes to stderr)."""
    root = logging.getLogger()
    if where is None:
        root.addHandler(logging.NullHandler())
        return
    root.addHandler(file_handler(where.path, where.level))
    if where.terminal:
        terminal = logging.StreamHandler()
        terminal.setFormatter(logging.Formatter(FORMAT))
        terminal.setLevel(where.level)
        root.addHandler(terminal)
    levels(where.level)


class PrivateFileHandler(logging.FileHandler):
    """A FileHandler whose file is created 0600 whatever the umask (log records may name sources and projects).

    Public by name on purpose: Prefect, loaded in a process whose root logger has a handler like this one (no
    leading underscore), leaves the root logger's handlers alone instead of putting its stderr handler there
    (prefect.logging.configuration.setup_logging), as in a Dask worker."""

    def _open(self) -> Any:
        where = Path(self.baseFilename).parent
        if not os.path.exists(self.baseFilename):  # the run's first record: the folder, and room in it
            private_dirs(where)
            prune(where, KEEP - 1)
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", encoding="utf-8")


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """PrivateFileHandler's 0600 file, kept under `maxBytes` by rolling it over to `<name>.1` (one old file): for a
    log that lives as long as its process does (a watch runs for weeks)."""

    def _open(self) -> Any:
        private_dirs(Path(self.baseFilename).parent)
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", encoding="utf-8")


def file_handler(path: Path, level: int) -> logging.Handler:
    """A handler appending records to `path` (created at the first record, 0600): the run's, in any process."""
    handler = PrivateFileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    return handler


def attach() -> None:
    """Put the run's file back on the root logger if it is gone: importing Prefect (the first time in a process)
    configures logging anew and replaces the root logger's handlers."""
    root = logging.getLogger()
    if _handler is not None and _handler not in root.handlers:
        root.addHandler(_handler)


def levels(level: int) -> None:
    """Our, Prefect's and Dask's loggers at `level`: what they log at it reaches the run's file."""
    for name in FAMILIES:
        logging.getLogger(name).setLevel(level)


def run_log(data_dir: Path, run_id: str) -> contextlib.AbstractContextManager[Path]:
    """Every record logged in this process while the run lasts goes to its file (nested: the caller's stands)."""
    return log_to(path_of(data_dir, run_id))


@contextlib.contextmanager
def log_to(path: Path, max_bytes: int | None = None) -> Iterator[Path]:
    """Every record logged in this process meanwhile goes to `path`, and the runs under way in it log there too
    instead of opening files of their own: `transcripts watch` keeps one log (`watch.log`, at most `max_bytes`
    and one rolled-over file) for all its loads."""
    global _handler, _path
    if _path is not None:  # the command opened it for this run already (or a run is under way: one file per run)
        yield _path
        return
    if max_bytes is None:
        handler = file_handler(path, _level)
    else:
        handler = PrivateRotatingFileHandler(path, maxBytes=max_bytes, backupCount=1, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.setLevel(_level)
    root = logging.getLogger()
    ours = logging.getLogger("transcripts")  # Prefect's and Dask's levels are the command's (route_logs) or theirs
    saved = ours.level
    if saved == logging.NOTSET or saved > _level:
        ours.setLevel(_level)
    _handler, _path = handler, path
    root.addHandler(handler)
    try:
        yield path
    finally:
        for logger in (root, *_loggers()):
            if handler in logger.handlers:
                logger.removeHandler(handler)
        handler.close()
        _handler = _path = None
        ours.setLevel(saved)


def _loggers() -> list[logging.Logger]:
    return [x for x in logging.root.manager.loggerDict.values() if isinstance(x, logging.Logger)]


def prune(where: Path, keep: int) -> None:
    """Remove all but the newest `keep` run logs in `where` (their names sort by the runs' start)."""
    try:
        logs = sorted(p for p in os.listdir(where) if p.startswith("run-") and p.endswith(".log"))
    except OSError:
        return
    for name in logs[: max(0, len(logs) - keep)]:
        with contextlib.suppress(OSError):
            os.unlink(where / name)
