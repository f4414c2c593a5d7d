"""The warehouse's DuckDB connection is capped (`sinks.warehouse.MEMORY_LIMIT`) and spills beyond the cap."""

from __future__ import annotations

from pathlib import Path

from sinks import warehouse


def test_the_warehouse_connection_spills_when_no_run_has_staged_anything(tmp_path: Path) -> None:
    """DuckDB spills to `staging/duckdb-spill` and makes that folder, not its parent. `staging/` exists only while a
    run has staged rows, so a change that stages nothing (a deleted source) failed as soon as DuckDB spilled."""
    data = tmp_path / "data"
    data.mkdir()
    con = warehouse._connect(data / "warehouse.duckdb", data)
    try:
        con.execute("SET memory_limit = '32MB'")  # a table of ~200 MB cannot stay in memory
        con.execute("CREATE TEMP TABLE big AS SELECT i, repeat('x', 200) || i AS s FROM range(1000000) t(i)")
        assert con.execute("SELECT count(*), max(i) FROM big").fetchone() == (1000000, 999999)
    finally:
        con.close()
    assert (data / "staging").is_dir()
