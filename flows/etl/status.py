"""What `transcripts status` reports: the runs (from the ledger), the corpus per agent, rejections by reason.

The default view and `--check` read only the ledger (sinks.ledger): no DuckDB, so they answer in a blink even
while a run is going on. Each run that changed the corpus leaves a snapshot of it in its ledger record (rows per
table and agent, rejections per reason code); listing every rejection (`details=True`) reads the warehouse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extractors.errors import BENIGN_REJECT_CODES
from extractors.registry import UNEXPECTED_PREFIX
from sinks import ledger, readonly

if TYPE_CHECKING:
    import duckdb

WAREHOUSE = "warehouse.duckdb"  # as sinks.warehouse.warehouse_path (not imported: it loads DuckDB)


def rejected_label(rejected: int, problems: int, template: str = "rejected {}") -> str:
    """`rejected 26 (2 benign)`: every rejection, and how many of them are benign (`no_conversation`, `duplicate`:
    not errors), the same words in the run summary, `Last runs` and the table of `status`."""
    benign = max(int(rejected) - int(problems or 0), 0)
    return template.format(rejected) + (f" ({benign} benign)" if benign else "")


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
        """The documented, stable shape of `status --json` (docs/operations.md "JSON output")."""
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
    # here: ~30 ms, when the version is asked for
    from importlib.metadata import version

    return version("duckdb")


def _foreign(warehouse: Path, why: str) -> str:
    return (
        f"{warehouse} was written by another DuckDB version than {engine_version()} ({why}): the next "
        "`transcripts run` rebuilds it from the Parquet snapshot (nothing is lost)"
    )


def _connect(path: Path) -> duckdb.DuckDBPyConnection:

    return readonly.connect(path)


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def corpus_snapshot(data_dir: Path) -> dict[str, Any]:
    """Rows per table and agent, rejections per agent and reason code, and the audit (reader bugs, redaction,
    unpriced usage) of the warehouse: the figures each load keeps in the file (sinks.warehouse.figures, updated
    from the sessions it replaced), computed whole (read-only) only for a warehouse from before they were kept."""
    # here: DuckDB (~0.5 s), only when a warehouse is there to read
    from sinks import warehouse
    from transforms.schema import SCHEMA_VERSION

    path = data_dir / WAREHOUSE
    figures = warehouse.stored_figures(path)
    if figures is None:
        con = _connect(path)
        try:
            figures = warehouse.figures(con, tolerant=True)
        finally:
            con.close()
    # `engine`: the DuckDB that wrote the warehouse; a no-op run may skip the flow only when it is the one installed.
    return {
        "at": datetime.now(UTC).isoformat(),
        "counts": figures["counts"],
        "rejections": figures["rejections"],
        "engine": engine_version(),
        "storage": storage_version(path),
        "schema": SCHEMA_VERSION,
        "reader_bugs": _reader_bugs(path, figures["rejections"]),
        **{k: figures[k] for k in ("redaction", "unpriced") if k in figures},
    }


def _reader_bugs(path: Path, rejections: list[dict[str, Any]]) -> int:
    """Sources a crashing reader cost: `source_unreadable` rejections whose detail the registry gave its prefix
    (asked of the warehouse only when there are such rejections)."""
    if not any(r["reason_code"] == "source_unreadable" for r in rejections):
        return 0

    con = _connect(path)
    try:
        row = con.execute(
            "SELECT count(*) FROM rejects WHERE reason_code = 'source_unreadable' AND starts_with(detail, ?)",
            [UNEXPECTED_PREFIX],
        ).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


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
