"""The warehouse as a long-running reader holds it (the MCP server): one read-only connection to one snapshot, renewed
between calls when a run has swapped a new file in, and each call interrupted after its time limit.

The reader always holds a connection, so a run never changes the file in place under it: DuckDB's lock would refuse
the run's read-write open, so the run builds the new warehouse beside it and renames it over the path
(`sinks.warehouse.refresh`). A call in flight keeps reading the old file; the next call sees the new one. A run never
waits for a call; a call waits for a run only in the moment it reopens the file (the old one closed, a run that
starts just then may change a big warehouse in place, about a second, which `sinks.readonly` waits out).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

from sinks import query, warehouse
from sinks.readonly import first_line
from sinks.sessions import REDACTED

T = TypeVar("T")


class NotServed(RuntimeError):
    """No corpus to serve (none yet, or one this DuckDB cannot open), or a call past its time limit; the message
    says what to do."""


class Served:
    """A read-only, locked-down (`query.lock_down`) connection to the newest warehouse of `data_dir` in `zone`."""

    def __init__(self, data_dir: Path, zone: str) -> None:
        self.data_dir = data_dir
        self.zone = zone
        self._path = warehouse.warehouse_path(data_dir)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._identity: tuple[int, int, int, int] | None = None
        self._unredacted = 0
        self._lock = threading.Lock()  # one call at a time on the connection

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _current(self) -> duckdb.DuckDBPyConnection:
        identity = self._stat()
        if self._con is not None and (identity is None or identity == self._identity):
            return self._con
        # DuckDB keeps one database per path in a process: a connect while the old file is open would hand back the
        # old file's database. So the old connection is closed first (no call is in flight: the caller holds _lock).
        if self._con is not None:
            self._con.close()
            self._con = None
        try:
            con = query.connect(self.data_dir, self.zone)
        except query.NoWarehouse as exc:
            raise NotServed(str(exc)) from None
        except (warehouse.WarehouseUnreadable, duckdb.Error) as exc:
            raise NotServed(first_line(exc)) from None
        query.lock_down(con)
        row = con.execute(f"SELECT count(*) FROM sessions s WHERE NOT {REDACTED.format(alias='s')}").fetchone()
        self._con, self._identity = con, identity
        self._unredacted = int(row[0]) if row else 0
        return con

    @property
    def unredacted(self) -> int:
        """Sessions of the snapshot served whose text was loaded with redaction off."""
        return self._unredacted

    def call(self, work: Callable[[duckdb.DuckDBPyConnection], T], *, seconds: float) -> T:
        """`work(connection)` on the newest snapshot, interrupted after `seconds` (NotServed then)."""
        with self._lock:
            con = self._current()
            expired = threading.Event()

            def stop() -> None:
                expired.set()
                con.interrupt()

            timer = threading.Timer(seconds, stop)
            timer.start()
            try:
                return work(con)
            except duckdb.Error:
                if expired.is_set():
                    raise NotServed(f"the call ran past its time limit of {seconds:g} s and was stopped") from None
                raise
            finally:
                timer.cancel()

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
