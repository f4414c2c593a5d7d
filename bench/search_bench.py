"""Full-text search on a generated corpus: what the BM25 index costs a load, and how long a search takes."""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from sinks import query, search, warehouse

QUERIES = ["login form password", "refactor router", "failing test on CI", "database migration", "TODO"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(fn: Any) -> tuple[dict[str, float], Any]:
    """Wall and CPU seconds (on a shared machine the CPU time is the steadier figure)."""
    start, cpu = time.perf_counter(), _cpu()
    value = fn()
    return {"wall": round(time.perf_counter() - start, 3), "cpu": round(_cpu() - cpu, 3)}, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, required=True, help="a HOME from bench/generate.py")
    parser.add_argument("--data", type=Path, required=True, help="data directory (loaded unless it has a warehouse)")
    parser.add_argument("--repeat", type=int, default=5, help="searches per query")
    args = parser.parse_args()
    out: dict[str, Any] = {"duckdb": duckdb.__version__}
    settings = load_settings(home=args.corpus, data_dir=args.data, env={"HOME": str(args.corpus)}, lock_wait=5)
    target = warehouse.warehouse_path(args.data)
    if not target.exists():
        out["full_load_seconds"], _ = _timed(lambda: run_etl(settings, as_tasks=False))
    # The index as a load builds it: the extension's scaffold on an empty table, filled by update_index.
    scratch = args.data / "search-bench.duckdb"
    scratch.unlink(missing_ok=True)
    con = duckdb.connect(str(scratch))
    con.execute("SET memory_limit = '256MB'")
    con.execute(f"ATTACH '{target}' AS w (READ_ONLY)")
    con.execute("CREATE TABLE turns AS SELECT * FROM w.turns LIMIT 0")
    search.create_index(con)
    con.execute("INSERT INTO turns SELECT * FROM w.turns")
    out["turns"] = con.execute("SELECT count(*) FROM turns").fetchone()[0]  # type: ignore[index]
    out["turn_text_mb"] = round(con.execute("SELECT sum(strlen(text)) FROM turns").fetchone()[0] / 1e6, 1)  # type: ignore[index]
    out["index_full_build_seconds"], _ = _timed(
        lambda: search.update_index(con, "SELECT DISTINCT session_id FROM turns")
    )
    # An append-one-session run: one mid-size session's turns replaced, then re-indexed.
    session = con.execute(
        "SELECT session_id FROM turns GROUP BY session_id ORDER BY count(*) DESC LIMIT 1 OFFSET 50"
    ).fetchone()[0]  # type: ignore[index]
    con.execute("CREATE TEMP TABLE keep AS SELECT * FROM turns WHERE session_id = ?", [session])
    con.execute("DELETE FROM turns WHERE session_id = ?", [session])
    con.execute("INSERT INTO turns SELECT * FROM keep")
    out["index_update_one_session_seconds"], _ = _timed(lambda: search.update_index(con, f"SELECT '{session}'"))
    # The extension's own build of the same index, for comparison.
    out["extension_create_fts_index_seconds"], _ = _timed(lambda: search.create_index(con))
    con.close()
    scratch.unlink()
    reader = query.connect(args.data, "UTC")
    latencies: dict[str, Any] = {}
    for words in QUERIES:
        walls, cpus = [], []
        hits = 0
        for _ in range(args.repeat):
            took, found = _timed(lambda w=words: search.search(reader, w, limit=20))
            walls.append(took["wall"])
            cpus.append(took["cpu"])
            hits = len(found)
        latencies[words] = {
            "median_ms": round(statistics.median(walls) * 1000),
            "median_cpu_ms": round(statistics.median(cpus) * 1000),
            "hits": hits,
        }
    reader.close()
    out["search"] = latencies
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
