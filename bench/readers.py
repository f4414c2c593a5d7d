"""Each reader's speed alone: MB of one agent's sources read per second, against the Claude reader's.

    uv run python bench/readers.py --mb 50 [--seed 1] [--repeat 3] [--keep DIR] [--agents claude,cursor]

For every agent the generator writes (`bench/generate.py` AGENTS), a corpus of `--mb` MB of that agent alone, then,
in this process, discovery under the agent's default roots and `read_source` of every unit, timed together: the
extractor's work without planning, staging, Parquet or DuckDB (the full load in `bench/run.py` times those). Best of
`--repeat` rounds, each round reading every agent's corpus in turn, so that a busy moment of the machine falls on
every reader alike rather than on the ones read after Claude. The target (issue 30): no reader slower than half of
the Claude reader's MB/s (wall clock). The CPU time of the same reads (`time.process_time`: the readers are single
threaded) is printed beside it: on a shared machine it says what the wall clock's noise hides. Results also go to
bench/out/readers.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import AGENTS, MANIFEST, MB, generate, load_summary, stale

OUT = Path(__file__).resolve().parent / "out"
BASELINE = "claude"
TARGET_SHARE = 0.5  # of the baseline reader's MB/s


def corpus(work: Path, agent: str, mb: float, seed: int) -> Path:
    """The agent's corpus under `work/<agent>`, generated unless one with the same arguments is there."""
    home = work / agent
    if (home / MANIFEST).exists():
        summary = load_summary(home)
        if summary["mb"] != mb or summary["seed"] != seed or summary["mix"] != {agent: 1.0}:
            raise SystemExit(f"{home} holds a corpus generated with other arguments; use another --keep folder")
        if not stale(summary):
            return home
        print(f"{home}: written by another version of the generator; writing it again", file=sys.stderr)
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    generate(home, mb, seed, {agent: 1.0})
    return home


def read_all(agent: str, home: Path) -> tuple[float, int, Counter[str], float]:
    """Discover and read every unit of `agent` under `home`: (seconds, bytes of the units, outcomes by kind, CPU
    seconds)."""
    from extractors.bounded import Limits
    from extractors.model import Agent
    from extractors.registry import extractor, read_source

    module = extractor(Agent(agent))
    roots = [r for r in module.default_roots(home, {}) if r.exists()] or [home]  # an agent with no home folder
    limits = Limits(settle_seconds=0.0)
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    size = 0
    outcomes: Counter[str] = Counter()
    for root in roots:
        for source in module.discover(root):
            size += source.size
            for outcome in read_source(source, limits):
                outcomes[type(outcome).__name__] += 1
    return time.perf_counter() - started, size, outcomes, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="MB of each agent's corpus (default 50)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="read each corpus N times; report the best")
    parser.add_argument("--keep", type=Path, help="work folder to keep the corpora in (reused by the next run)")
    parser.add_argument("--agents", help="a comma list of agents (default: every agent the generator writes)")
    parser.add_argument("--out", type=Path, default=OUT / "readers.json")
    args = parser.parse_args(argv)
    agents = [a.strip() for a in args.agents.split(",")] if args.agents else list(AGENTS)
    unknown = [a for a in agents if a not in AGENTS]
    if unknown:
        raise SystemExit(f"no generator for {', '.join(unknown)}; the generator writes {', '.join(AGENTS)}")
    if BASELINE not in agents:
        agents.insert(0, BASELINE)
    with tempfile.TemporaryDirectory(prefix="bench-readers-") as tmp:
        work = args.keep or Path(tmp)
        homes = {agent: corpus(work, agent, args.mb, args.seed) for agent in agents}
        runs: dict[str, list[tuple[float, int, Counter[str], float]]] = {agent: [] for agent in agents}
        for _ in range(max(1, args.repeat)):  # a round reads every corpus once, in turn
            for agent in agents:
                runs[agent].append(read_all(agent, homes[agent]))
        rows: dict[str, dict[str, Any]] = {}
        for agent in agents:
            seconds, size, outcomes, _ = min(runs[agent], key=lambda r: r[0])
            cpu = min(r[3] for r in runs[agent])
            rows[agent] = {
                "mb": round(size / MB, 2),
                "seconds": round(seconds, 3),
                "mbps": round(size / MB / seconds, 1) if seconds > 0 else None,
                "cpu_seconds": round(cpu, 3),
                "cpu_mbps": round(size / MB / cpu, 1) if cpu > 0 else None,
                "outcomes": dict(outcomes),
            }
    base = rows[BASELINE]["mbps"] or 0.0
    cpu_base = rows[BASELINE]["cpu_mbps"] or 0.0
    print(f"{'reader':10s} {'MB':>7s} {'s':>7s} {'MB/s':>7s} {'x claude':>8s} {'CPU s':>7s} {'x (CPU)':>8s}  outcomes")
    slow = []
    for agent, row in rows.items():
        share = (row["mbps"] or 0.0) / base if base else 0.0
        cpu_share = (row["cpu_mbps"] or 0.0) / cpu_base if cpu_base else 0.0
        row["share_of_claude"] = round(share, 2)
        row["cpu_share_of_claude"] = round(cpu_share, 2)
        if share < TARGET_SHARE:
            slow.append(agent)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(row["outcomes"].items()))
        print(
            f"{agent:10s} {row['mb']:7.1f} {row['seconds']:7.2f} {row['mbps'] or 0:7.1f} {share:8.2f}"
            f" {row['cpu_seconds']:7.2f} {cpu_share:8.2f}  {kinds}"
        )
    verdict = "PASS" if not slow else f"FAIL: slower than {TARGET_SHARE:.0%} of Claude's: {', '.join(slow)}"
    print(f"target: every reader at least {TARGET_SHARE:.0%} of the Claude reader's MB/s: {verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = {"mb": args.mb, "seed": args.seed, "repeat": args.repeat, "readers": rows, "slow": slow}
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
