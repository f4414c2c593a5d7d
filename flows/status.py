"""What `transcripts status` reports: the runs (from the ledger), the corpus per agent, rejections by reason.

The default view and `--check` read only the ledger (sinks.ledger): no DuckDB, so they answer in a blink even
while a run is going on. Each run that changed the corpus leaves a snapshot of it in its ledger record (rows per
table and agent, rejections per reason code); listing every rejection (`details=True`) reads the warehouse.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extractors.errors import BENIGN_REJECT_CODES
from sinks import ledger

if TYPE_CHECKING:
    import duckdb

WAREHOUSE = "warehouse.duckdb"  # as sinks.warehouse.warehouse_path (not imported: it loads DuckDB)


@dataclass(slots=True)
class Status:
    data_dir: str
    exists: bool
    runs: list[dict[str, Any]] = field(default_factory=list)  # newest first
    last_loaded: dict[str, Any] | None = None  # the newest run that loaded something, when not among `runs`
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> agent -> rows
    rejections: list[dict[str, Any]] = field(default_factory=list)  # agent, outcome, reason_code, count
    snapshot_at: str | None = None  # when `counts` and `rejections` were taken
    rejects: list[dict[str, Any]] | None = None  # every rejection, with `details`
    skipped: list[dict[str, Any]] | None = None  # census of records that are not conversation, with `details`
    unreadable: str | None = None  # why this DuckDB cannot open the warehouse (another version wrote it)
    audit: dict[str, Any] = field(default_factory=dict)  # reader bugs, redaction, unpriced usage (last load)

    def problems(self) -> list[str]:
        """Why `status --check` fails: no corpus, the last run failed or was interrupted, or it found new
        (non-benign) rejections. A run still going on, or one that found the data directory busy, is skipped."""
        if not self.exists:
            return [f"no corpus in {self.data_dir}"]
        if self.unreadable:
            return [self.unreadable]
        finished = [r for r in self.runs if r["outcome"] not in ("running", "busy")]
        if not finished:
            return []
        last = finished[0]
        found = []
        if last["outcome"] in ledger.PROBLEM_OUTCOMES:
            found.append(f"the last run ({last['run_id']}) {last['outcome']}: {last.get('error') or 'no detail'}")
        if last.get("new_rejections"):
            found.append(f"the last run ({last['run_id']}) found {last['new_rejections']} new rejection(s)")
        if self.audit.get("reader_bugs"):
            found.append(f"{self.audit['reader_bugs']} source(s) rejected by a reader bug (`status --rejections`)")
        return found

    def as_json(self) -> dict[str, Any]:
        """The documented, stable shape of `status --json` (README "Commands")."""
        return {
            "data_dir": self.data_dir,
            "exists": self.exists,
            "runs": self.runs,
            "last_loaded": self.last_loaded,
            "counts": self.counts,
            "rejections": self.rejections,
            "snapshot_at": self.snapshot_at,
            "rejects": self.rejects,
            "skipped": self.skipped,
            "problems": self.problems(),
            "audit": self.audit,
        }


def _flat(run: dict[str, Any]) -> dict[str, Any]:
    """A ledger run with its counts at the top level (the shape of a `runs` table row)."""
    out = {k: v for k, v in run.items() if k not in ("counts", "corpus")}
    counts = dict(run.get("counts") or {})
    out["flow_run_id"] = counts.pop("flow_run_id", None)
    for name in ledger.COUNT_FIELDS:
        out[name] = int(counts.get(name) or 0)
    out["counts_by_agent"] = counts.get("counts_by_agent") or {}
    return out


def read_status(data_dir: Path, *, last_runs: int = 5, details: bool = False) -> Status:
    """Read the ledger (and with `details` the warehouse, read-only): safe while a run is going on."""
    runs = ledger.runs(data_dir)
    warehouse = data_dir / WAREHOUSE
    status = Status(str(data_dir), bool(runs) or warehouse.exists())
    if not status.exists:
        return status
    flat = [_flat(r) for r in runs]
    status.runs = flat[:last_runs]
    loaded = next((r for r in flat if r["sessions_loaded"]), None)
    if loaded is not None and loaded not in status.runs:
        status.last_loaded = loaded
    snapshot = next((r["corpus"] for r in runs if r.get("corpus")), None)
    status.unreadable = foreign_warehouse(warehouse, snapshot)
    if status.unreadable:
        details = False
    if snapshot is None and warehouse.exists():
        try:
            snapshot = corpus_snapshot(data_dir)  # a corpus from before the ledger: ask the warehouse once
        except Exception as exc:  # duckdb.Error; duckdb is imported only here, lazily
            status.unreadable = _foreign(warehouse, str(exc).splitlines()[0])
            return status
    if snapshot is not None:
        status.counts = snapshot.get("counts", {})
        status.rejections = snapshot.get("rejections", [])
        status.snapshot_at = snapshot.get("at")
        status.audit = {k: snapshot[k] for k in ("reader_bugs", "redaction", "unpriced") if k in snapshot}
    if details and warehouse.exists():
        _read_details(status, warehouse)
    return status


def storage_version(warehouse: Path) -> int | None:
    """The storage version number in a DuckDB file's header (`checksum u64 | "DUCK" | version u64`), read without
    DuckDB; None when the file is not a DuckDB file or cannot be read."""
    try:
        with warehouse.open("rb") as handle:
            head = handle.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[8:12] != b"DUCK":
        return None
    return int.from_bytes(head[12:20], "little")


def foreign_warehouse(warehouse: Path, snapshot: dict[str, Any] | None) -> str | None:
    """Why the warehouse is not one the DuckDB installed here wrote (per the last load's snapshot), or None."""
    if snapshot is None or not warehouse.exists():
        return None
    written, storage = snapshot.get("engine"), snapshot.get("storage")
    now = storage_version(warehouse)
    if written is not None and written != engine_version():
        return _foreign(warehouse, f"it was written by DuckDB {written}")
    if storage is not None and now != storage:
        return _foreign(warehouse, f"its file header says storage version {now}, the last load wrote {storage}")
    return None


def engine_version() -> str:
    """The installed DuckDB's version, without importing it (status stays fast)."""
    from importlib.metadata import version

    return version("duckdb")


def _foreign(warehouse: Path, why: str) -> str:
    return (
        f"{warehouse} was written by another DuckDB version than {engine_version()} ({why}): the next "
        "`transcripts run` rebuilds it from the Parquet snapshot (nothing is lost)"
    )


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def corpus_snapshot(data_dir: Path) -> dict[str, Any]:
    """Rows per table and agent and rejections per agent and reason code, from the warehouse (read-only)."""
    from transforms.schema import SCHEMA_VERSION, TABLES

    con = _connect(data_dir / WAREHOUSE)
    try:
        counts: dict[str, dict[str, int]] = {}
        for table in TABLES:
            if table.partitioned:
                counts[table.name] = {
                    str(agent): int(n)
                    for agent, n in con.execute(
                        f"SELECT agent, count(*) FROM {table.name} GROUP BY agent ORDER BY agent"
                    ).fetchall()
                }
            else:
                counts[table.name] = {"": int(con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0])}  # type: ignore[index]
        rejections = _rows(
            con,
            """SELECT agent, outcome, reason_code, count(*) AS count FROM rejects
               GROUP BY ALL ORDER BY agent, outcome, reason_code""",
        )
        extra = _audit(con)
    finally:
        con.close()
    # `engine`: the DuckDB that wrote the warehouse; a no-op run may skip the flow only when it is the one installed.
    storage = storage_version(data_dir / WAREHOUSE)
    return {
        "at": datetime.now(UTC).isoformat(),
        "counts": counts,
        "rejections": rejections,
        "engine": engine_version(),
        "storage": storage,
        "schema": SCHEMA_VERSION,
        **extra,
    }


def _audit(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What status says beyond counts: reader bugs (sources a crashing reader cost), secrets redacted and text
    stored raw, and usage without a price. Each part is left out when the warehouse predates its table."""
    import duckdb

    from extractors.registry import UNEXPECTED_PREFIX
    from sinks import prices, warehouse

    out: dict[str, Any] = {}
    row = con.execute(
        "SELECT count(*) FROM rejects WHERE reason_code = 'source_unreadable' AND starts_with(detail, ?)",
        [UNEXPECTED_PREFIX],
    ).fetchone()
    out["reader_bugs"] = int(row[0]) if row else 0
    with contextlib.suppress(duckdb.Error):  # a warehouse from before redaction
        out["redaction"] = warehouse.redaction_summary(con)
    try:
        missing = prices.unpriced(con)
        out["unpriced"] = {"responses": missing.responses, "total_responses": missing.total_responses}
    except duckdb.Error:
        pass
    return out


def _read_details(status: Status, path: Path) -> None:
    con = _connect(path)
    try:
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


def is_benign(code: str) -> bool:
    return code in {c.value for c in BENIGN_REJECT_CODES}
