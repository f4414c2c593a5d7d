"""Whole commands as a person types them: `transcripts run` (full load, nothing to do) and `transcripts status`.

`bench/run.py --commands` calls `command_phases` after its pipeline phases. The commands run against the
managed Prefect server of a private state directory (started first, its start-up timed apart, stopped at the
end whatever happens), as on a machine where the server already runs: what a command costs beyond the pipeline
is then its imports, planning and the flow's own bookkeeping, which is what the targets of issue 10 bound.

Python may cache bytecode here (PYTHONDONTWRITEBYTECODE is dropped from the commands' environment), as on a
person's machine: without the cache every command would compile its modules again (Prefect alone: ~2 s more).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGETS = {"noop_run_wall_seconds": 1.0, "status_wall_seconds": 0.5, "full_load_overhead_seconds": 3.0}


def _executable() -> Path:
    """The `transcripts` entry point of the environment running the benchmark (no `uv run` in between)."""
    return Path(sys.executable).parent / "transcripts"


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str, str]:
    os.sync()
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd[1:])}` failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stdout, proc.stderr


def command_phases(
    home: Path, work: Path, sources: list[str], env: dict[str, str], *, repeat: int, plain_full_seconds: float
) -> dict[str, Any]:
    """Time the commands (the full load `repeat` times, best reported); `plain_full_seconds` is the pipeline time of
    the full-load phase run without Prefect."""
    exe = _executable()
    cwd = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_STATE_HOME"] = str(work / "state")
    data = work / "data-commands"
    shutil.rmtree(data, ignore_errors=True)
    run = [str(exe), "run", "--home", str(home), "--data-dir", str(data), "--source", ",".join(sources), "--json"]
    results: dict[str, Any] = {"executable": str(exe), "load_before": round(os.getloadavg()[0], 2)}
    started, _, _ = _timed([str(exe), "server", "start"], env, cwd)
    results["server_start_seconds"] = round(started, 2)
    try:
        warm = [str(exe), "status", "--data-dir", str(work / "nothing-here")]  # bytecode and page cache, once
        subprocess.run(warm, env=env, cwd=cwd, capture_output=True, check=False)
        loads = []  # (overhead, wall, the run's JSON): each full load into an empty data dir; the best is reported
        for _ in range(max(repeat, 1)):
            shutil.rmtree(data, ignore_errors=True)
            wall, out, _ = _timed(run, env, cwd)
            doc = json.loads(out)
            loads.append((wall - float(doc["seconds"]), wall, doc))
        _, full_wall, full = min(loads, key=lambda load: load[0])
        noop = []
        for _ in range(max(repeat, 3)):
            wall, out, _ = _timed(run, env, cwd)
            if json.loads(out)["outcome"] != "noop":
                raise SystemExit(f"the rerun was not a no-op: {out[:500]}")
            noop.append(wall)
        status = [_timed([str(exe), "status", "--data-dir", str(data)], env, cwd)[0] for _ in range(max(repeat, 3))]
        log = work / "state" / "transcripts" / "prefect" / "runner.log"
        served = log.read_text(encoding="utf-8").count("event=serving") if log.exists() else 0
    finally:
        subprocess.run([str(exe), "server", "stop"], env=env, cwd=cwd, capture_output=True, check=False)
        shutil.rmtree(data, ignore_errors=True)
    results["runs_through_the_runner"] = served  # flows.service.runner: the full load and the no-ops, when it was ready
    results.update(
        full_load_wall_seconds=round(full_wall, 2),
        full_load_pipeline_seconds=round(float(full["seconds"]), 2),
        full_load_overhead_seconds=round(full_wall - float(full["seconds"]), 2),
        full_load_over_plain_pipeline_seconds=round(full_wall - plain_full_seconds, 2),
        full_load_overheads=[round(load[0], 2) for load in loads],
        sessions_loaded=full["sessions_loaded"],
        noop_run_wall_seconds=round(min(noop), 3),
        noop_run_walls=[round(w, 3) for w in noop],
        noop_run_median_seconds=round(statistics.median(noop), 3),
        status_wall_seconds=round(min(status), 3),
        status_walls=[round(w, 3) for w in status],
        status_median_seconds=round(statistics.median(status), 3),
    )
    results["targets"] = {
        name: {"value": results[name], "target": f"<= {bound}", "ok": results[name] <= bound}
        for name, bound in TARGETS.items()
    }
    return results


def print_commands(results: dict[str, Any]) -> None:
    print(
        f"\nwhole commands ({results['executable']}, managed Prefect server running; started in "
        f"{results['server_start_seconds']:.1f} s, once per machine):"
    )
    print(f"  {'command':<34}{'wall s':>8}{'pipeline s':>12}{'overhead s':>12}")
    print(
        f"  {'run (full load)':<34}{results['full_load_wall_seconds']:>8.2f}"
        f"{results['full_load_pipeline_seconds']:>12.2f}{results['full_load_overhead_seconds']:>12.2f}"
        f"   (over the pipeline phase without Prefect: {results['full_load_over_plain_pipeline_seconds']:+.2f} s;"
        f" overheads of the runs {', '.join(f'{o:.2f}' for o in results['full_load_overheads'])})"
    )
    print(
        f"  {'run (nothing to do), best':<34}{results['noop_run_wall_seconds']:>8.3f}"
        f"   runs {', '.join(f'{w:.2f}' for w in results['noop_run_walls'])}"
    )
    print(
        f"  {'status, best':<34}{results['status_wall_seconds']:>8.3f}"
        f"   runs {', '.join(f'{w:.2f}' for w in results['status_walls'])}"
    )
    print(f"  runs served by the command runner (Prefect loaded once): {results.get('runs_through_the_runner', 0)}")
    for name, check in results["targets"].items():
        print(f"  {'PASS' if check['ok'] else 'FAIL'}  {name}: {check['value']} (target {check['target']})")
