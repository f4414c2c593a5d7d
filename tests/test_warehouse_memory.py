"""The warehouse's DuckDB connections: memory capped (`sinks.warehouse.MEMORY_LIMIT`) and spilled beyond the cap, and
the row group size every writing connection gives (`ROW_GROUP_ROWS`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from sinks import warehouse
from tests.corpus import claude_exchange, small_home, write_session


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


def test_a_warehouse_built_whole_has_small_row_groups_and_a_change_adds_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build writes row groups of `ROW_GROUP_ROWS` rows (DuckDB's default, 122,880 rows of tool calls, was ~120 MB
    of text held while filled), and a change keeps them: opened with the default size, its checkpoint merged every
    table's row groups into default-size ones (3.8 s at 1 GB, once)."""
    monkeypatch.setattr(warehouse, "ROW_GROUP_ROWS", 2048)  # DuckDB's smallest: a small corpus fills several
    home = small_home(tmp_path / "home")
    sid = "dddddddd-0000-4000-8000-000000000001"
    words = " ".join(f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}" for i in range(500))
    write_session(home, sid, claude_exchange(sid, 20, text=words))
    data = tmp_path / "data"
    settings = load_settings(home=home, data_dir=data, sources=["claude"], env={"HOME": str(home)}, lock_wait=5)
    run_etl(settings, as_tasks=False)
    path = data / "warehouse.duckdb"

    def groups() -> tuple[int, int, int]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            row = con.execute(
                "SELECT count(*), max(n), sum(n) FROM (SELECT row_group_id, sum(count) AS n "
                "FROM pragma_storage_info('fts_main_turns.terms') WHERE column_path = '[0]' GROUP BY ALL)"
            ).fetchone()
        finally:
            con.close()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    count, largest, rows = groups()
    assert rows > 4 * 2048 and count > rows // 2048 and largest == 2048, (count, largest, rows)
    write_session(home, sid, claude_exchange(sid, 2, start_minute=30, text="more words later"), append=True)
    run_etl(settings, as_tasks=False)
    count_after, largest_after, rows_after = groups()
    assert rows_after > rows, "the change's rows are in the file"
    assert largest_after == 2048 and count_after >= count, (count_after, largest_after)
