"""Compare two data dirs: are the Parquet corpus and the DuckDB warehouse the same?

    uv run python bench/compare.py DIR_A DIR_B

Each Parquet file of the current version (`DIR/parquet`, by its path below it) must be byte-identical, except the
tables that record when a run happened (`VOLATILE`): those are compared row by row without those columns. Every
table of `warehouse.duckdb` is compared row by row, ordered by all its columns, the same columns left out. One line
per table says `equal` or how it differs; the exit status is 0 when everything is equal, 1 when not, 2 when a
folder is no data dir. Used to show that a change of code leaves the outputs as they were: load the same home (a
copy with the same paths and mtimes) into two data dirs, with the same redaction key, one with each version.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

# Columns that hold wall-clock values or ids made at run time: the same load made twice differs only there.
VOLATILE: dict[str, tuple[str, ...]] = {"runs": ("run_id", "started_at", "ended_at", "flow_run_id")}


def _parquet_files(data_dir: Path) -> dict[str, Path]:
    current = (data_dir / "parquet").resolve()
    return {str(p.relative_to(current)): p for p in sorted(current.rglob("*.parquet"))}


def _table_of(relative: str) -> str:
    return relative.split("/", 1)[0].removesuffix(".parquet")


def _rows_without(path: Path, drop: tuple[str, ...]) -> list[dict[str, object]]:
    table = pq.read_table(path)
    rows: list[dict[str, object]] = table.drop_columns([c for c in drop if c in table.column_names]).to_pylist()
    return rows


def compare_parquet(a: Path, b: Path) -> list[tuple[str, str]]:
    """(table, verdict) per Parquet table."""
    files_a, files_b = _parquet_files(a), _parquet_files(b)
    problems: dict[str, list[str]] = {}
    for relative in sorted(set(files_a) | set(files_b)):
        table = _table_of(relative)
        found = problems.setdefault(table, [])
        if relative not in files_a or relative not in files_b:
            found.append(f"{relative} only in {'A' if relative in files_a else 'B'}")
        elif table in VOLATILE:
            if _rows_without(files_a[relative], VOLATILE[table]) != _rows_without(files_b[relative], VOLATILE[table]):
                found.append(f"{relative} rows differ")
        elif files_a[relative].read_bytes() != files_b[relative].read_bytes():
            found.append(f"{relative} bytes differ")
    verdicts = []
    for table, found in problems.items():
        files = sum(1 for r in files_a if _table_of(r) == table)
        how = f"equal apart from {', '.join(VOLATILE[table])}" if table in VOLATILE else "byte-identical"
        verdicts.append((table, f"DIFFERENT: {'; '.join(found)}" if found else f"equal ({files} files, {how})"))
    return verdicts


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _ordered_rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[object, ...]]:
    columns = [str(r[0]) for r in con.execute(f'DESCRIBE "{table}"').fetchall()]
    kept = [c for c in columns if c not in VOLATILE.get(table, ())]
    listed = ", ".join(f'"{c}"' for c in kept)
    return con.execute(f'SELECT {listed} FROM "{table}" ORDER BY ALL').fetchall()


def compare_warehouse(a: Path, b: Path) -> list[tuple[str, str]]:
    """(table, verdict) per warehouse table."""
    con_a = duckdb.connect(str(a / "warehouse.duckdb"), read_only=True)
    con_b = duckdb.connect(str(b / "warehouse.duckdb"), read_only=True)
    try:
        tables_a, tables_b = _tables(con_a), _tables(con_b)
        verdicts = []
        for table in sorted(set(tables_a) | set(tables_b)):
            if table not in tables_a or table not in tables_b:
                verdicts.append((table, f"DIFFERENT: only in {'A' if table in tables_a else 'B'}"))
                continue
            rows_a, rows_b = _ordered_rows(con_a, table), _ordered_rows(con_b, table)
            if rows_a == rows_b:
                apart = f", apart from {', '.join(VOLATILE[table])}" if table in VOLATILE else ""
                verdicts.append((table, f"equal ({len(rows_a)} rows{apart})"))
            else:
                first = next((i for i, (x, y) in enumerate(zip(rows_a, rows_b, strict=False)) if x != y), None)
                where = f"first at row {first}" if first is not None else "one has more rows"
                verdicts.append((table, f"DIFFERENT: {len(rows_a)} vs {len(rows_b)} rows, {where}"))
        return verdicts
    finally:
        con_a.close()
        con_b.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python bench/compare.py DIR_A DIR_B", file=sys.stderr)
        return 2
    a, b = Path(argv[0]), Path(argv[1])
    for folder in (a, b):
        if not (folder / "parquet").is_dir() or not (folder / "warehouse.duckdb").is_file():
            print(f"{folder} is no data dir (no parquet/ and warehouse.duckdb in it)", file=sys.stderr)
            return 2
    verdicts = [(f"parquet {t}", v) for t, v in compare_parquet(a, b)]
    verdicts += [(f"duckdb {t}", v) for t, v in compare_warehouse(a, b)]
    for name, verdict in verdicts:
        print(f"{name}: {verdict}")
    same = not any(v.startswith("DIFFERENT") for _, v in verdicts)
    print("SAME" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
