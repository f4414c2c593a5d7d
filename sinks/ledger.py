"""The run ledger: an append-only JSON-lines file that sees every run that started, whatever ended it.

`data/ledger.jsonl` gets a `started` record when a run begins and an `ended` record with its outcome when it ends
(ok, noop, failed, interrupted, busy). A run killed with SIGKILL leaves only its `started` record: when its
process is gone and the writer lock is free, readers report it as `interrupted`. Each record is one `write` on a
file opened with O_APPEND, so concurrent writers never interleave inside a line; a torn last line (a kill in the
middle of a write) is skipped by readers. Reading needs no DuckDB or Parquet: `status` stays fast.

Kept free of pyarrow and DuckDB on purpose (it is on the path of `status` and of a no-op run).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LEDGER = "ledger.jsonl"
_FILE_MODE = 0o600  # as sinks.files.FILE_MODE (not imported: that module loads pyarrow)
_DIR_MODE = 0o700

OUTCOMES = ("ok", "noop", "failed", "interrupted", "busy", "running")
PROBLEM_OUTCOMES = ("failed", "interrupted")
COUNT_FIELDS = (  # a run's counts, as in the `runs` table
    "sources_seen",
    "sources_new",
    "sources_changed",
    "sources_unchanged",
    "sources_deleted",
    "sessions_loaded",
    "sessions_rejected",
    "sources_deferred",
    "new_rejections",
    "turns_loaded",
    "bytes_read",
)


def ledger_path(data_dir: Path) -> Path:
    return data_dir / LEDGER


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def private_dirs(path: Path) -> None:
    """Create `path` (and missing parents) 0700 whatever the umask. Stdlib only, unlike sinks.files.private_dir
    (which loads pyarrow): for paths of a command that must start fast."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=_DIR_MODE)
        os.chmod(folder, _DIR_MODE)


def append(data_dir: Path, record: Mapping[str, Any]) -> None:
    """Append one record as one line in one write, and make it durable."""
    private_dirs(data_dir)
    line = (json.dumps(record, default=str, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = os.open(ledger_path(data_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
    try:
        os.fchmod(fd, _FILE_MODE)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(data_dir: Path) -> list[dict[str, Any]]:
    """Every readable record in file order (a torn or foreign line is skipped)."""
    try:
        raw = ledger_path(data_dir).read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in raw.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("run_id"), str):
            records.append(record)
    return records


def lock_held(data_dir: Path, *, by_another: bool = False) -> bool:
    """Whether some process holds the writer lock on `data_dir/.lock` right now (sinks.lock); with `by_another`,
    a process other than this one (the holder writes `pid N` into the file once it has the lock)."""
    try:
        fd = os.open(data_dir / ".lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return not by_another or os.pread(fd, 200, 0).decode("utf-8", "replace").strip() != f"pid {os.getpid()}"
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases the probe's shared lock
    return False


def _alive(pid: Any, host: Any) -> bool:
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def runs(data_dir: Path) -> list[dict[str, Any]]:
    """One entry per run, newest first: its started record merged with its ended record.

    A run with no ended record is `running` while its process lives or the writer lock is held, else
    `interrupted` (killed, or the machine went down).
    """
    merged: dict[str, dict[str, Any]] = {}
    for record in read_records(data_dir):
        entry = merged.setdefault(record["run_id"], {"run_id": record["run_id"]})
        if record.get("event") == "started":
            entry.update({k: v for k, v in record.items() if k not in ("event", "at")})
            entry["started_at"] = record.get("at")
        elif record.get("event") == "ended":
            entry.update({k: v for k, v in record.items() if k not in ("event", "at")})
            entry["ended_at"] = record.get("at")
    held = None
    for entry in merged.values():
        if "outcome" not in entry:
            if held is None:
                held = lock_held(data_dir)
            running = held or _alive(entry.get("pid"), entry.get("host"))
            entry["outcome"] = "running" if running else "interrupted"
            if not running:
                entry.setdefault("error", "the run ended without recording an outcome (killed, or the machine stopped)")
        entry.setdefault("started_at", entry.get("ended_at"))
        entry.setdefault("ended_at", None)
        entry.setdefault("error", None)
    return sorted(merged.values(), key=lambda e: (str(e.get("started_at")), e["run_id"]), reverse=True)


# --- recording a run ----------------------------------------------------------------------------------------------

_open: dict[str, Recording] = {}  # runs being recorded in this process, by run id (nested callers share one)


@dataclass(slots=True)
class Recording:
    """A run being recorded; fill in `outcome`, `counts` and `corpus` before it ends."""

    data_dir: Path
    run_id: str
    flow: str
    mode: str
    outcome: str = "ok"
    counts: dict[str, Any] = field(default_factory=dict)
    corpus: dict[str, Any] | None = None  # a snapshot of the corpus after the run (status reads the last one)
    started: bool = False
    skip: bool = False  # nothing happened worth a record (no data found, nothing created)
    interrupted: str | None = None  # a stop signal came while it ran (`interrupt`): it ends interrupted, with this
    ended: bool = False  # its end is recorded (or being written)

    def begin(self) -> None:
        """Write the `started` record (creating the data directory) if it is not written yet."""
        if self.started:
            return
        append(
            self.data_dir,
            {
                "event": "started",
                "run_id": self.run_id,
                "flow": self.flow,
                "mode": self.mode,
                "at": _now(),
                "pid": os.getpid(),
                "host": socket.gethostname(),
            },
        )
        self.started = True

    def end(self, outcome: str, error: str | None = None) -> None:
        self.begin()
        record: dict[str, Any] = {
            "event": "ended",
            "run_id": self.run_id,
            "outcome": outcome,
            "at": _now(),
            "error": error,
            **({"counts": self.counts} if self.counts else {}),
            **({"corpus": self.corpus} if self.corpus is not None else {}),
        }
        self.ended = True  # from here a stop signal abandons nothing: the run is done, its outcome being written
        append(self.data_dir, record)


def interrupt(why: str) -> bool:
    """A stop signal came (called by its handler): every run being recorded in this process ends `interrupted`
    (`why`), whatever the exception the signal raised becomes on its way out. It does not always stay a
    KeyboardInterrupt or SystemExit: DuckDB turns it into RuntimeError("Query interrupted"), an import into an
    ImportError, a process pool into BrokenProcessPool. True when a run was under way (being recorded, its end not
    yet written): a run whose end is written is done whatever comes after it."""
    under_way = False
    for rec in _open.values():
        if not rec.ended:
            rec.interrupted = why
            under_way = True
    return under_way


def _is_lock_busy(exc: BaseException) -> bool:
    lock = sys.modules.get("sinks.lock")
    return lock is not None and isinstance(exc, lock.LockBusy)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def recording(data_dir: Path, run_id: str, *, flow: str, mode: str, defer: bool = False) -> Iterator[Recording]:
    """Record the run `run_id`: `started` now (or, with `defer`, at `Recording.begin`), `ended` however it ends.

    Nested use with the same run id (the CLI around a flow around `run_etl`) shares the outer recording, which
    alone writes. A ledger that cannot be written (the disk is full) never hides the run's own error.
    """
    if run_id in _open:
        yield _open[run_id]
        return
    rec = Recording(data_dir, run_id, flow, mode)
    _open[run_id] = rec  # before its `started` record: a signal as that is written finds the run under way
    try:
        if not defer:
            rec.begin()
    except BaseException:
        _open.pop(run_id, None)
        raise
    try:
        yield rec
    except BaseException as exc:
        if rec.interrupted is not None and not _is_lock_busy(exc):
            _end_quietly(rec, "interrupted", rec.interrupted)
        elif isinstance(exc, KeyboardInterrupt):
            _end_quietly(rec, "interrupted", "interrupted (Ctrl-C)")
        elif isinstance(exc, SystemExit):  # SIGTERM arrives as SystemExit (flows.service.server.exit_on_sigterm)
            if exc.code not in (0, None):
                _end_quietly(rec, "interrupted", f"stopped (exit {exc.code})")
            elif not rec.skip:
                _end_quietly(rec, rec.outcome)
        elif _is_lock_busy(exc):
            _end_quietly(rec, "busy", str(exc))
        else:
            _end_quietly(rec, "failed", _describe(exc), original=exc)
        raise
    else:
        if not rec.skip or rec.started:
            rec.end(rec.outcome)
    finally:
        _open.pop(run_id, None)


def _end_quietly(rec: Recording, outcome: str, error: str | None = None, original: BaseException | None = None) -> None:
    try:
        rec.end(outcome, error)
    except OSError as ledger_error:
        # the run's own error is what the caller re-raises: the ledger's must not replace it
        if original is not None:
            original.add_note(f"the run could not be recorded in the ledger either: {ledger_error}")
