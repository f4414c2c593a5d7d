"""DuckDB: every table loaded from the current Parquet version, plus views; all SQL and DDL live here.

The warehouse is never written in place: a run copies it (or builds it new) beside the old file, applies the run's
change in one transaction, checkpoints, and renames it over `warehouse.duckdb`. DuckDB refuses a writer while any
reader holds the file, so this is what lets people keep a DuckDB shell or notebook open during the nightly run: the
reader keeps its snapshot, new connections see the new file.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from sinks import failpoints, prices, search, views
from sinks.files import FILE_MODE, replace_atomic
from sinks.store import FileKey, Store
from transforms.ids import bucket_of
from transforms.redact import redaction_version
from transforms.schema import SCHEMA_VERSION, SESSION_TABLES, TABLES, TURNS, Table, duckdb_ddl

WAREHOUSE = "warehouse.duckdb"
PRICE_CACHE = "cache"  # derived files kept between runs (the price table per genai-prices version)
META = "transcripts_meta"
VERSION_ERROR = "Trying to read a database file with version number"

log = logging.getLogger("transcripts.warehouse")


class WarehouseUnreadable(RuntimeError):
    """The warehouse file cannot be opened by this DuckDB (another version wrote it, or it is damaged)."""


def open_error(exc: duckdb.Error, path: Path) -> WarehouseUnreadable:
    """Say why `path` cannot be opened, in one line, and that the next run rebuilds it from Parquet."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if VERSION_ERROR in first:
        why = f"it was written by another DuckDB version than {duckdb.__version__} ({first.removeprefix('IO Error: ')})"
    else:
        why = first
    return WarehouseUnreadable(
        f"{path} cannot be opened: {why}; the next `transcripts run` rebuilds it from the Parquet snapshot"
    )


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


def _set_meta(con: duckdb.DuckDBPyConnection, version_number: int, zone: str, prices_from: str) -> None:
    con.execute(f"DELETE FROM {META}")
    con.execute(
        f"INSERT INTO {META} VALUES ('schema_version', ?), ('parquet_version', ?), ('timezone', ?), ('prices', ?)",
        [SCHEMA_VERSION, str(version_number), zone, prices_from],
    )


def _build(con: duckdb.DuckDBPyConnection, store: Store, version: Path, version_number: int, zone: str) -> None:
    con.execute("BEGIN")
    for table in TABLES:
        con.execute(duckdb_ddl(table))
    search.create_index(con)  # on the empty table: the scaffold, filled below much faster than the extension does
    for table in TABLES:
        _insert_all(con, store, table, version)
    search.build_index(con, _files(store, TURNS, version))  # from the Parquet files just loaded, on every core
    con.execute(f"CREATE TABLE {META} (key VARCHAR, value VARCHAR)")
    views.create_views(con, zone)
    _set_meta(con, version_number, zone, prices.install(con, cache=store.data_dir / PRICE_CACHE))
    con.execute("COMMIT")


def _apply(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    version: Path,
    version_number: int,
    replaced: Mapping[str, set[str]],
    zone: str,
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
    if not search.has_index(con):
        search.create_index(con)  # a warehouse from before search: built once, whole
    elif ids.num_rows:
        search.update_index(con, "SELECT session_id FROM replaced_ids")
    views.create_views(con, zone)  # every load: new views reach old warehouses, a changed zone is applied
    _set_meta(con, version_number, zone, prices.install(con, _meta(con).get("prices"), store.data_dir / PRICE_CACHE))
    con.execute("COMMIT")
    con.unregister("replaced_ids")


def is_current(data_dir: Path, version_number: int, timezone: str | None) -> bool:
    """Whether `warehouse.duckdb` already holds Parquet version `version_number` under the current schema, with
    its per-day views in `timezone`'s zone and a search index: then a run with nothing to do need not touch it.
    A file this DuckDB cannot open, or one a killed run left behind at an older version, is not current."""
    path = warehouse_path(data_dir)
    if not path.exists():
        return False
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        meta = _meta(con)
        indexed = search.has_index(con)
    finally:
        con.close()
    return (
        indexed
        and meta.get("schema_version") == SCHEMA_VERSION
        and meta.get("parquet_version") == str(version_number)
        and meta.get("timezone") == views.resolve_zone(timezone)
    )


def refresh(
    data_dir: Path,
    store: Store,
    run_id: str,
    *,
    previous_version: int,
    replaced: Mapping[str, set[str]] | None,
    timezone: str | None = None,
) -> None:
    """Bring `warehouse.duckdb` to the current Parquet version and swap it in atomically.

    With `replaced` (the sessions the run replaced) and a warehouse built from `previous_version`, the change is
    applied to a copy; otherwise (first run, a killed run left it behind, a schema change, a file this DuckDB
    cannot open, e.g. one written by DuckDB 2.0) it is rebuilt. Per-day views use `timezone` (default: the
    machine's zone). Raises views.ZoneError for an unknown zone.
    """
    zone = views.resolve_zone(timezone)
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
        try:
            con = _connect(tmp, data_dir)
        except duckdb.Error as exc:
            # The warehouse is derived data: one this DuckDB cannot open is rebuilt from Parquet, not repaired.
            log.warning("event=warehouse_rebuild reason=%r", str(open_error(exc, target)))
        else:
            meta = _meta(con)
            incremental = meta.get("schema_version") == SCHEMA_VERSION and meta.get("parquet_version") == str(
                previous_version
            )
            if not incremental:
                con.close()
        if not incremental:
            for stale in (tmp, Path(f"{tmp}.wal")):
                stale.unlink(missing_ok=True)
    if incremental:
        _apply(con, store, version, number, replaced or {}, zone)
    else:
        con = _connect(tmp, data_dir)
        _build(con, store, version, number, zone)
    con.execute("CHECKPOINT")
    con.close()
    os.chmod(tmp, FILE_MODE)
    failpoints.reach("warehouse")
    replace_atomic(tmp, target)


def cleanup(data_dir: Path) -> None:
    """Remove temporary warehouse files a killed run left behind."""
    for stray in data_dir.glob(f"{WAREHOUSE}.tmp-*"):
        stray.unlink(missing_ok=True)
