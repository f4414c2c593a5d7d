"""Full-text search on a generated corpus: what the BM25 index costs a load, and how long a search takes."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows.etl import run_etl
from flows.settings import load_settings
from sinks import query, search, warehouse

QUERIES = ["login form password", "refactor router", "failing test on CI", "database migration", "TODO"]


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


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
    copy = args.data / "search-bench.duckdb"
    shutil.copyfile(target, copy)
    con = duckdb.connect(str(copy))
    con.execute("SET memory_limit = '256MB'")
    out["turns"] = con.execute("SELECT count(*) FROM turns").fetchone()[0]  # type: ignore[index]
    out["turn_text_mb"] = round(con.execute("SELECT sum(strlen(text)) FROM turns").fetchone()[0] / 1e6, 1)  # type: ignore[index]
    search.load_extension(con)
    if search.has_index(con):
        con.execute("PRAGMA drop_fts_index('turns')")
    con.execute("CHECKPOINT")
    size_without = copy.stat().st_size
    out["index_build_seconds"], _ = _timed(lambda: search.build_index(con))
    con.execute("CHECKPOINT")
    con.close()
    out["warehouse_mb_without_index"] = round(size_without / 1e6, 1)
    out["warehouse_mb_with_index"] = round(copy.stat().st_size / 1e6, 1)
    copy.unlink()
    reader = query.connect(args.data, "UTC")
    latencies: dict[str, Any] = {}
    for words in QUERIES:
        runs = []
        hits = 0
        for _ in range(args.repeat):
            seconds, found = _timed(lambda w=words: search.search(reader, w, limit=20))
            runs.append(seconds)
            hits = len(found)
        latencies[words] = {
            "median_ms": round(statistics.median(runs) * 1000),
            "max_ms": round(max(runs) * 1000),
            "hits": hits,
        }
    reader.close()
    out["search"] = latencies
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
