"""One schema: Parquet and DuckDB are generated from it and agree; the table reference in docs/analysis.md is
current."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from flows.cli.docs import PAGE, render
from flows.etl.settings import PROJECT_DIR
from transforms.normalize import to_table
from transforms.schema import TABLES, duckdb_ddl


def test_duckdb_tables_from_the_ddl_read_the_parquet_schema_back_identically(tmp_path: Path) -> None:
    con = duckdb.connect()
    for table in TABLES:
        con.execute(duckdb_ddl(table))
        empty = to_table(table, {c.name: [] for c in table.columns})
        path = tmp_path / f"{table.name}.parquet"
        import pyarrow.parquet as pq

        pq.write_table(empty, path)
        described = con.execute(f"DESCRIBE {table.name}").fetchall()
        from_parquet = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        assert [(r[0], r[1]) for r in described] == [(r[0], r[1]) for r in from_parquet], table.name
        assert [r[2] == "YES" for r in described] == [c.nullable for c in table.columns], table.name
        con.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?)", [str(path)])


def test_every_column_is_documented_and_every_file_carries_the_schema_version() -> None:
    for table in TABLES:
        assert table.doc
        for col in table.columns:
            assert col.doc.strip(), f"{table.name}.{col.name} has no description"
        meta = table.arrow_schema.metadata
        assert meta[b"transcripts.schema_version"]
        assert set(table.sort_by) <= set(table.column_names)
        assert isinstance(table.arrow_schema, pa.Schema)


def test_docs_table_reference_is_current() -> None:
    page = (Path(PROJECT_DIR) / PAGE).read_text(encoding="utf-8")
    assert render(page) == page, f"the tables in {PAGE} are stale: run `uv run python -m flows.cli.docs`"
