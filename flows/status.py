"""What `transcripts status` reports: last runs, counts per table and agent, current rejections."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from extractors.errors import BENIGN_REJECT_CODES
from sinks import warehouse
from transforms.schema import TABLES


@dataclass(slots=True)
class Status:
    data_dir: str
    exists: bool
    runs: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> agent -> rows
    rejects: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # census of records that are not conversation
    unreadable: str | None = None  # why the warehouse cannot be opened (e.g. written by another DuckDB version)

    def problems(self) -> list[str]:
        """Why `status --check` fails: the warehouse cannot be opened, the last run failed or found new rejections."""
        if self.unreadable:
            return [self.unreadable]
        if not self.runs:
            return []
        last = self.runs[0]
        found = []
        if last["outcome"] != "ok":
            found.append(f"the last run ({last['run_id']}) failed: {last['error']}")
        if last["new_rejections"]:
            found.append(f"the last run ({last['run_id']}) found {last['new_rejections']} new rejection(s)")
        return found


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_status(data_dir: Path, *, last_runs: int = 5) -> Status:
    """Read the warehouse (read-only): safe while a run is going on."""
    path = warehouse.warehouse_path(data_dir)
    status = Status(str(data_dir), path.exists())
    if not path.exists():
        return status
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        status.unreadable = str(warehouse.open_error(exc, path))
        return status
    try:
        status.runs = _rows(
            con,
            f"""SELECT run_id, flow, mode, started_at, ended_at, outcome, error, flow_run_id, sources_seen,
                       sources_new, sources_changed, sources_unchanged, sources_deleted, sessions_loaded,
                       sessions_rejected, sources_deferred, new_rejections, turns_loaded, bytes_read
                FROM runs ORDER BY started_at DESC, run_id DESC LIMIT {int(last_runs)}""",
        )
        for table in TABLES:
            if table.partitioned:
                for agent, n in con.execute(
                    f"SELECT agent, count(*) FROM {table.name} GROUP BY agent ORDER BY agent"
                ).fetchall():
                    status.counts.setdefault(table.name, {})[str(agent)] = int(n)
            else:
                status.counts[table.name] = {"": int(con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0])}  # type: ignore[index]
        status.rejects = _rows(
            con,
            """SELECT r.agent, r.outcome, r.reason_code, r.source_path, r.session_id, r.line, r.byte_offset, r.detail,
                      coalesce(s.present, true) AS source_present
               FROM rejects r LEFT JOIN sources s USING (source_path)
               ORDER BY r.agent, r.outcome, r.reason_code, r.source_path, r.session_id""",
        )
        status.skipped = _rows(
            con,
            """SELECT agent, record_kind, writer_version, sum(record_count) AS records, count(*) AS sessions
               FROM record_kinds WHERE disposition = 'skipped'
               GROUP BY ALL ORDER BY records DESC, agent, record_kind, writer_version LIMIT 25""",
        )
    finally:
        con.close()
    return status


def is_benign(code: str) -> bool:
    return code in {c.value for c in BENIGN_REJECT_CODES}
