"""A series of one-session changes on a corpus loaded once: the append-one figure at sizes where a full load per
measurement is too slow (5 GB: minutes), and its spread over many changes (a change in place leaves DuckDB's log
beside the warehouse; one change in ~15 folds it into the file, sinks/warehouse.py `LOG_THRESHOLD`).

    python bench/append_series.py --work WORK [--changes 6] [--stages]

WORK holds `home/` (a corpus from `bench/generate.py --out WORK/home`) and `data/` (its data dir). The first run
loads the corpus when `data/` is empty (or settles what changed). The append candidate is made hot, as in
`bench/run.py`; then, per round, a no-change run, an append to it (`bench/run.py`'s `append_one`), and the run that
sees it truncated back (also a one-session change). Each run is `bench/phase.py` in its own process (pipeline
seconds as `bench/run.py` prints them). The candidate is left as generated.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import HOT_AGE_SECONDS, append_one, child_env, restore

ROOT = Path(__file__).resolve().parent.parent


def phase(work: Path, stages: bool = False) -> dict[str, Any]:
    """One run of the pipeline on WORK's corpus in its own process; its printed JSON line."""
    command = [sys.executable, str(ROOT / "bench" / "phase.py"), "--home", str(work / "home")]
    command += ["--data", str(work / "data"), "--sources", "claude"] + (["--stages"] if stages else [])
    done = subprocess.run(command, check=True, env=child_env(work), capture_output=True, text=True, cwd=ROOT)
    result: dict[str, Any] = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return result


def series(work: Path, changes: int, stages: bool) -> dict[str, list[float]]:
    home = work / "home"
    summary = json.loads((home / "bench-corpus.json").read_text(encoding="utf-8"))
    candidate = home / str(summary["append_candidate"])
    generated = candidate.stat().st_mtime_ns
    hot = time.time_ns() - HOT_AGE_SECONDS * 10**9
    os.utime(candidate, ns=(hot, hot))
    out: dict[str, list[float]] = {"settle": [], "no-change": [], "append": [], "truncate back": []}
    try:
        out["settle"].append(phase(work)["pipeline_seconds"])
        for n in range(changes):
            out["no-change"].append(phase(work)["pipeline_seconds"])
            path, size, _mtime, _note = append_one(home, summary, n + 1)
            try:
                result = phase(work, stages)
                out["append"].append(result["pipeline_seconds"])
                if stages:
                    print(json.dumps({"append": n + 1, "stages": result.get("stages")}), flush=True)
            finally:
                restore(path, size, hot)
                os.utime(path)  # truncated now: a change the next run must see
            out["truncate back"].append(phase(work)["pipeline_seconds"])
            print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in out.items() if v), flush=True)
    finally:
        os.utime(candidate, ns=(generated, generated))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="folder with home/ (a generated corpus) and data/")
    parser.add_argument("--changes", type=int, default=6, help="rounds of no-change, append, truncate back")
    parser.add_argument("--stages", action="store_true", help="also time the steps of each append")
    args = parser.parse_args(argv)
    if not (args.work / "home" / "bench-corpus.json").exists():
        raise SystemExit(f"{args.work}/home is not a generated corpus (bench/generate.py --out {args.work}/home)")
    out = series(args.work, args.changes, args.stages)
    one_session = out["append"] + out["truncate back"]
    print(
        f"one-session changes: {len(one_session)}, median {statistics.median(one_session):.3f} s, "
        f"min {min(one_session):.3f}, max {max(one_session):.3f}; no-change median "
        f"{statistics.median(out['no-change']):.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
