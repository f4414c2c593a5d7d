"""Read-only queries on the warehouse: open it in a zone, run SQL, write the result as a table, CSV or JSON.

The warehouse is opened with `read_only=True`, so a query cannot change the corpus. A reader never makes a run fail (a
run copies a warehouse someone has open); while a run changes a big one in place, the open waits for it
(`sinks.readonly`).
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import duckdb

from sinks import readonly, search, views, warehouse
from sinks.readonly import first_line

FETCH_ROWS = 1000


class NoWarehouse(RuntimeError):
    """There is no warehouse in the data directory yet."""


class QueryError(RuntimeError):
    """DuckDB refused the SQL; the message is DuckDB's first line."""


def session_sql(zone: str) -> str:
    """Statements that put a session in `zone`: displayed times and the per-day views."""
    return f"SET TimeZone = {search.sql_string(zone)}; SET VARIABLE {views.ZONE_VARIABLE} = {search.sql_string(zone)};"


def connect(data_dir: Path, zone: str) -> duckdb.DuckDBPyConnection:
    """Open the warehouse read-only, in `zone`, with fts loaded when available (for `match_bm25` in SQL).

    Raises NoWarehouse, or warehouse.WarehouseUnreadable (e.g. written by another DuckDB version).
    """
    path = warehouse.warehouse_path(data_dir)
    if not path.exists():
        raise NoWarehouse(
            f"no warehouse in {data_dir} yet: run `transcripts run` (or `transcripts run --sample` to try the sample)"
        )
    try:
        con = readonly.connect(path)
    except duckdb.Error as exc:
        raise warehouse.open_error(exc, path) from None
    con.execute(session_sql(zone))
    with contextlib.suppress(search.SearchUnavailable, duckdb.Error):
        search.load_extension(con)  # plain SQL works without it; only match_bm25 needs it
    return con


@dataclass(slots=True)
class Result:
    """A statement's result: column names (unique), DuckDB type names, and a cursor to stream rows from."""

    columns: list[str]
    types: list[str]
    relation: duckdb.DuckDBPyRelation

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        try:
            self.relation.execute()
            while batch := self.relation.fetchmany(FETCH_ROWS):
                yield batch
        except duckdb.Error as exc:
            raise QueryError(first_line(exc)) from None


def _unique(names: Sequence[str]) -> list[str]:
    """DuckDB allows `SELECT 1 AS a, 2 AS a`; JSON objects and CSV headers need distinct names (a, a_1)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}_{n}")
    return out


def execute(con: duckdb.DuckDBPyConnection, sql: str) -> Result | None:
    """Run `sql` (one or more statements; the last one's result is returned, None when it has none).

    Raises QueryError with DuckDB's first line.
    """
    try:
        relation = con.sql(sql)
    except duckdb.Error as exc:
        raise QueryError(first_line(exc)) from None
    if relation is None:
        return None
    return Result(_unique(relation.columns), [str(t) for t in relation.types], relation)


def table_width() -> int:
    """The terminal's width, or 80 when the output is not a terminal."""
    return shutil.get_terminal_size((80, 24)).columns


def render_table(result: Result, *, width: int = 80, max_rows: int = 40) -> str:
    """DuckDB's own box rendering within `width` columns: wide cells cut with an ellipsis, columns that do not
    fit elided in the middle, at most `max_rows` rows (0: all) with a count of what was left out."""
    buffer = io.StringIO()
    try:
        limit = max_rows if max_rows > 0 else max(1, len(result.relation))
        with contextlib.redirect_stdout(buffer):
            result.relation.show(max_width=width, max_rows=limit, max_col_width=max(20, width // 4))
    except duckdb.Error as exc:
        raise QueryError(first_line(exc)) from None
    return buffer.getvalue()


def jsonable(value: Any) -> Any:
    """A DuckDB value as JSON: times in ISO 8601, decimals as numbers, NaN/inf as null, blobs in hex, nested kept."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def write_json(result: Result, out: IO[str]) -> int:
    """An array of objects, keys in column order, one row per line; returns the number of rows."""
    rows = 0
    out.write("[")
    for batch in result.batches():
        for row in batch:
            obj = dict(zip(result.columns, (jsonable(v) for v in row), strict=True))
            out.write(("\n" if rows == 0 else ",\n") + json.dumps(obj, ensure_ascii=False))
            rows += 1
    out.write("\n]\n" if rows else "]\n")
    return rows


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(jsonable(value), ensure_ascii=False)
    converted = jsonable(value)
    return "" if converted is None else converted


def write_csv(result: Result, out: IO[str]) -> int:
    """RFC 4180 CSV with a header; NULL is empty, nested values as JSON text; returns the number of rows."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(result.columns)
    rows = 0
    for batch in result.batches():
        writer.writerows([_csv_cell(v) for v in row] for row in batch)
        rows += len(batch)
    return rows


# ---- interactive use -------------------------------------------------------------------------------------------


CLI_INSTALL = "uv tool install duckdb-cli==1.5.5"  # the CLI of the pinned engine: it also loads the bundled fts


def bundled_cli() -> str | None:
    """The DuckDB binary the `duckdb-cli` package installed beside this Python, if it did (not its wrapper script:
    the binary itself, found where the package is, so also when the environment's `bin` is not on PATH)."""
    try:
        spec = importlib.util.find_spec("duckdb_cli")  # found, not imported: nothing of it runs
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        exe = Path(folder) / "duckdb"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return None


def duckdb_cli(data_dir: Path, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The first DuckDB CLI that can open this warehouse (its storage version may differ): `duckdb` on PATH, else
    the one of the `duckdb-cli` package installed with transcripts (`uv sync` installs it); None when neither can."""
    for exe in dict.fromkeys(e for e in (which("duckdb"), bundled_cli()) if e is not None):
        path = warehouse.warehouse_path(data_dir)
        try:
            probe = subprocess.run(
                [exe, "-readonly", str(path), "-c", "SELECT 1"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return exe
    return None


def cli_command(exe: str, data_dir: Path, zone: str) -> list[str]:
    """The DuckDB CLI on the warehouse, read-only, in `zone`; fts loaded by path when the CLI's version is ours."""
    init = session_sql(zone)
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if version.startswith(f"v{duckdb.__version__} "):
        with contextlib.suppress(search.SearchUnavailable):
            init += f" LOAD {search.sql_string(str(search.extension_path()))};"
    return [exe, "-readonly", "-cmd", init, str(warehouse.warehouse_path(data_dir))]


TABLES_SQL = """
    SELECT name, type FROM (
        SELECT table_name AS name, 'table' AS type FROM duckdb_tables() WHERE schema_name = 'main'
        UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal
    ) ORDER BY type, name"""

SHELL_HELP = """Statements end with `;` and may span lines. `.tables` lists tables and views; `.quit` or Ctrl-D leaves.
Times and per-day views are in {zone}. The warehouse is open read-only."""


def shell(
    con: duckdb.DuckDBPyConnection,
    read: Callable[[str], str],
    write: Callable[[str], None],
    *,
    zone: str,
    width: Callable[[], int] = table_width,
    remember: Callable[[str], None] = lambda sql: None,
    banner: bool = True,
) -> int:
    """A small SQL shell: read lines with `read(prompt)` until a statement ends with `;`, print its result.

    `read` raises EOFError at the end of input, KeyboardInterrupt to drop the statement being typed. A failed
    statement prints DuckDB's first line and the shell goes on. `remember` gets every statement run (history).
    Returns how many statements failed.
    """
    if banner:
        write(SHELL_HELP.format(zone=zone) + "\n")
    pending: list[str] = []
    failed = 0
    while True:
        try:
            line = read("   ...> " if pending else "transcripts> ")
        except EOFError:
            write("\n")
            return failed
        except KeyboardInterrupt:
            pending = []
            write("\n")
            continue
        stripped = line.strip()
        if not pending and stripped.startswith("."):
            command = stripped.split()[0]
            if command in (".quit", ".exit"):
                return failed
            if command == ".tables":
                sql = TABLES_SQL
            else:
                write(SHELL_HELP.format(zone=zone) + "\n" if command == ".help" else f"unknown: {command} (.help)\n")
                continue
        elif not stripped and not pending:
            continue
        else:
            pending.append(line)
            if not stripped.endswith(";"):
                continue
            sql = "\n".join(pending)
            pending = []
            remember(sql)
        try:
            result = execute(con, sql)
            if result is not None:
                write(render_table(result, width=width()))
        except QueryError as exc:
            failed += 1
            write(f"error: {exc}\n")
        except KeyboardInterrupt:  # Ctrl-C while a statement runs: drop it, keep the shell
            write("interrupted\n")


# ---- bounded queries (the MCP server's `sql`) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bounded:
    """A query's result within bounds: columns, rows as JSON-ready values, and why it stopped short (None: whole)."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: str | None


class QueryTimeout(QueryError):
    """The statement ran past its time limit and was interrupted."""


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Keep a read-only connection to the warehouse: no file outside it may be read, written or attached
    (`COPY ... TO`, `ATTACH`, `read_csv('/etc/...')`), and no statement may change a setting back."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def bounded(con: duckdb.DuckDBPyConnection, sql: str, *, rows: int, seconds: float, max_bytes: int) -> Bounded:
    """Run one statement, interrupted after `seconds`, keeping at most `rows` rows and about `max_bytes` of them as
    JSON; `truncated` says which bound cut the result. Raises QueryError (DuckDB's first line, or more than one
    statement) or QueryTimeout."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(first_line(exc)) from None
    if len(statements) != 1:
        raise QueryError(f"give exactly one SQL statement (got {len(statements)})")
    expired = threading.Event()

    def stop() -> None:
        expired.set()
        con.interrupt()

    timer = threading.Timer(seconds, stop)
    timer.start()
    try:
        relation = con.sql(sql)
        if relation is None:
            return Bounded([], [], None)
        columns = _unique(relation.columns)
        relation.execute()
        batch = relation.fetchmany(rows + 1)
    except duckdb.Error as exc:
        if expired.is_set():
            raise QueryTimeout(f"the query ran past its time limit of {seconds:g} s and was stopped") from None
        raise QueryError(first_line(exc)) from None
    finally:
        timer.cancel()
    truncated = f"more than {rows} rows; only the first {rows} are shown" if len(batch) > rows else None
    kept: list[list[Any]] = []
    size = 0
    for row in batch[:rows]:
        values = [jsonable(v) for v in row]
        size += len(json.dumps(values, ensure_ascii=False))
        if size > max_bytes:
            if kept:
                truncated = f"the result is over {max_bytes} bytes; only the first {len(kept)} rows are shown"
                break
            share = max(16, max_bytes // max(1, len(values)))
            values = [v[:share] + "…" if isinstance(v, str) and len(v) > share else v for v in values]
            truncated = f"the first row is over {max_bytes} bytes: its long values are cut"
            kept.append(values)
            break
        kept.append(values)
    return Bounded(columns, kept, truncated)
