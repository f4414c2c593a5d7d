"""Each reader's speed alone: MB of one agent's sources read per second, against the Claude reader's.

    uv run python bench/readers.py --mb 50 [--seed 1] [--repeat 3] [--keep DIR] [--agents claude,cursor]

For every agent the generator writes (`bench/generate.py` AGENTS), a corpus of `--mb` MB of that agent alone, then,
in this process, discovery under the agent's default roots and `read_source` of every unit, timed together: the
extractor's work without planning, staging, Parquet or DuckDB (the full load in `bench/run.py` times those). Best of
`--repeat`. The target (issue 30): no reader slower than half of the Claude reader's MB/s. Results also go to
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


def read_all(agent: str, home: Path) -> tuple[float, int, Counter[str]]:
    """Discover and read every unit of `agent` under `home`: (seconds, bytes of the units, outcomes by kind)."""
    from extractors.bounded import Limits
    from extractors.model import Agent
    from extractors.registry import extractor, read_source

    module = extractor(Agent(agent))
    roots = [r for r in module.default_roots(home, {}) if r.exists()] or [home]  # an agent with no home folder
    limits = Limits(settle_seconds=0.0)
    gc.collect()
    started = time.perf_counter()
    size = 0
    outcomes: Counter[str] = Counter()
    for root in roots:
        for source in module.discover(root):
            size += source.size
            for outcome in read_source(source, limits):
                outcomes[type(outcome).__name__] += 1
    return time.perf_counter() - started, size, outcomes


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
        rows: dict[str, dict[str, Any]] = {}
        for agent in agents:
            home = corpus(work, agent, args.mb, args.seed)
            runs = [read_all(agent, home) for _ in range(max(1, args.repeat))]
            seconds, size, outcomes = min(runs, key=lambda r: r[0])
            rows[agent] = {
                "mb": round(size / MB, 2),
                "seconds": round(seconds, 3),
                "mbps": round(size / MB / seconds, 1) if seconds > 0 else None,
                "outcomes": dict(outcomes),
            }
    base = rows[BASELINE]["mbps"] or 0.0
    print(f"{'reader':10s} {'MB':>7s} {'s':>7s} {'MB/s':>7s} {'x claude':>8s}  outcomes")
    slow = []
    for agent, row in rows.items():
        share = (row["mbps"] or 0.0) / base if base else 0.0
        row["share_of_claude"] = round(share, 2)
        if share < TARGET_SHARE:
            slow.append(agent)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(row["outcomes"].items()))
        print(f"{agent:10s} {row['mb']:7.1f} {row['seconds']:7.2f} {row['mbps'] or 0:7.1f} {share:8.2f}  {kinds}")
    verdict = "PASS" if not slow else f"FAIL: slower than {TARGET_SHARE:.0%} of Claude's: {', '.join(slow)}"
    print(f"target: every reader at least {TARGET_SHARE:.0%} of the Claude reader's MB/s: {verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = {"mb": args.mb, "seed": args.seed, "repeat": args.repeat, "readers": rows, "slow": slow}
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
