"""DuckDB: every table loaded from the current Parquet version, plus views; all SQL and DDL live here.

The warehouse is never written in place: a run copies it (or builds it new) beside the old file, applies the run's
change in one transaction, checkpoints, and renames it over `warehouse.duckdb`. DuckDB refuses a writer while any
reader holds the file, so this is what lets people keep a DuckDB shell or notebook open during the nightly run: the
reader keeps its snapshot, new connections see the new file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from extractors.ids import bucket_of
from sinks import failpoints
from sinks.files import FILE_MODE, replace_atomic
from sinks.store import FileKey, Store
from transforms.redact import redaction_version
from transforms.schema import SCHEMA_VERSION, SESSION_TABLES, TABLES, Table, duckdb_ddl

WAREHOUSE = "warehouse.duckdb"
META = "transcripts_meta"

VIEWS: dict[str, str] = {
    "session_overview": """
        SELECT s.*, coalesce(src.present, true) AS source_present
        FROM sessions s LEFT JOIN sources src USING (source_path)""",
    "prompts": """
        SELECT t.turn_id, t.session_id, t.agent, t.timestamp, s.cwd, s.title, t.text
        FROM turns t JOIN sessions s USING (session_id)
        WHERE t.role = 'user'""",
    "daily_tokens": """
        SELECT CAST(timestamp AS DATE) AS day, agent, model, count(*) AS responses,
               sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
               sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens
        FROM usage GROUP BY ALL""",
    "tool_failures": """
        SELECT agent, tool_name, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
               round(count(*) FILTER (WHERE is_error) / count(*), 3) AS error_rate
        FROM tool_calls GROUP BY ALL""",
    "current_rejects": """
        SELECT r.*, coalesce(src.present, true) AS source_present
        FROM rejects r LEFT JOIN sources src USING (source_path)""",
    "redactions_daily": """
        SELECT agent, CAST(timestamp AS DATE) AS day, rule, sum(count) AS count,
               count(DISTINCT secret_hmac) AS distinct_secrets
        FROM redactions GROUP BY ALL""",
}


def redaction_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """For `status`: secrets redacted per agent and rule, and sessions by redaction mode of their text.

    `sessions` counts, per agent, sessions whose text was redacted under the current rules (`current`), under
    older rules (`older_rules`), or stored raw (`unredacted`: `--no-redact`, or loaded before redaction existed
    and whose source is gone, so it could not be read again). Call with a read-only connection to the warehouse.
    """
    current = f"%+r{redaction_version()}"
    per_rule = con.execute(
        """SELECT agent, rule, sum(count) AS count, count(DISTINCT secret_hmac) AS distinct_secrets
           FROM redactions GROUP BY ALL ORDER BY agent, count DESC, rule"""
    ).fetchall()
    modes = con.execute(
        """SELECT agent,
                  count(*) FILTER (WHERE parser_version LIKE ?) AS current,
                  count(*) FILTER (WHERE regexp_matches(parser_version, '[+]r[0-9]') AND parser_version NOT LIKE ?)
                      AS older_rules,
                  count(*) FILTER (WHERE NOT regexp_matches(parser_version, '[+]r[0-9]')) AS unredacted
           FROM sessions GROUP BY agent ORDER BY agent""",
        [current, current],
    ).fetchall()
    return {
        "rules_version": redaction_version(),
        "redacted": [{"agent": a, "rule": r, "count": int(n), "distinct_secrets": int(d)} for a, r, n, d in per_rule],
        "sessions": {a: {"current": int(c), "older_rules": int(o), "unredacted": int(u)} for a, c, o, u in modes},
    }


def warehouse_path(data_dir: Path) -> Path:
    return data_dir / WAREHOUSE


def _connect(path: Path, data_dir: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET memory_limit = '256MB'")
    spill = data_dir / "staging" / "duckdb-spill"
    con.execute("SET temp_directory = ?", [str(spill)])
    return con


def _files(store: Store, table: Table, version: Path) -> list[str]:
    return [str(p) for p in store.files(table.name, version)]


def _insert_all(con: duckdb.DuckDBPyConnection, store: Store, table: Table, version: Path) -> None:
    files = _files(store, table, version)
    if files:
        con.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?)", [files])


def _meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    try:
        rows = con.execute(f"SELECT key, value FROM {META}").fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(k): str(v) for k, v in rows}


def _set_meta(con: duckdb.DuckDBPyConnection, version_number: int) -> None:
    con.execute(f"DELETE FROM {META}")
    con.execute(
        f"INSERT INTO {META} VALUES ('schema_version', ?), ('parquet_version', ?)",
        [SCHEMA_VERSION, str(version_number)],
    )


def _build(con: duckdb.DuckDBPyConnection, store: Store, version: Path, version_number: int) -> None:
    con.execute("BEGIN")
    for table in TABLES:
        con.execute(duckdb_ddl(table))
        _insert_all(con, store, table, version)
    con.execute(f"CREATE TABLE {META} (key VARCHAR, value VARCHAR)")
    _set_meta(con, version_number)
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    con.execute("COMMIT")


def _apply(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    version: Path,
    version_number: int,
    replaced: Mapping[str, set[str]],
) -> None:
    ids = pa.table({"session_id": pa.array(sorted({s for group in replaced.values() for s in group}), pa.string())})
    layout = store.layout(version)
    con.register("replaced_ids", ids)
    con.execute("BEGIN")
    for table in SESSION_TABLES:
        con.execute(f"DELETE FROM {table.name} WHERE session_id IN (SELECT session_id FROM replaced_ids)")
        files = sorted(
            {
                str(version / FileKey(table.name, agent, bucket).relpath())
                for agent, sids in replaced.items()
                for bucket in {bucket_of(s, layout[agent]) for s in sids}
            }
        )
        files = [f for f in files if os.path.exists(f)]
        if files:
            con.execute(
                f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?) "
                "WHERE session_id IN (SELECT session_id FROM replaced_ids)",
                [files],
            )
    for table in TABLES:
        if table not in SESSION_TABLES:
            con.execute(f"DELETE FROM {table.name}")
            _insert_all(con, store, table, version)
    _set_meta(con, version_number)
    con.execute("COMMIT")
    con.unregister("replaced_ids")


def refresh(
    data_dir: Path,
    store: Store,
    run_id: str,
    *,
    previous_version: int,
    replaced: Mapping[str, set[str]] | None,
) -> None:
    """Bring `warehouse.duckdb` to the current Parquet version and swap it in atomically.

    With `replaced` (the sessions the run replaced) and a warehouse built from `previous_version`, the change is
    applied to a copy; otherwise (first run, a killed run left it behind, a schema change) it is rebuilt.
    """
    version = store.current()
    if version is None:
        return
    number = store.current_number()
    target = warehouse_path(data_dir)
    tmp = data_dir / f"{WAREHOUSE}.tmp-{run_id}"
    for stale in (tmp, Path(f"{tmp}.wal")):
        stale.unlink(missing_ok=True)
    incremental = False
    if replaced is not None and target.exists():
        shutil.copyfile(target, tmp)
        con = _connect(tmp, data_dir)
        meta = _meta(con)
        incremental = meta.get("schema_version") == SCHEMA_VERSION and meta.get("parquet_version") == str(
            previous_version
        )
        if not incremental:
            con.close()
            tmp.unlink()
    if incremental:
        _apply(con, store, version, number, replaced or {})
    else:
        con = _connect(tmp, data_dir)
        _build(con, store, version, number)
    con.execute("CHECKPOINT")
    con.close()
    os.chmod(tmp, FILE_MODE)
    failpoints.reach("warehouse")
    replace_atomic(tmp, target)


def cleanup(data_dir: Path) -> None:
    """Remove temporary warehouse files a killed run left behind."""
    for stray in data_dir.glob(f"{WAREHOUSE}.tmp-*"):
        stray.unlink(missing_ok=True)
