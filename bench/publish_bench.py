"""Publishing to a team folder and querying the team: a generated corpus published to a local S3 endpoint (moto's
server, as the tests start it), a publish with nothing changed, and a team query over three machines against the
same query on the local warehouse.

    uv run python bench/publish_bench.py --mb 200 [--corpus HOME] [--data DIR] [--repeat 3]

The three machines publish the same data directory under three labels (every session on all three: the team query
dedups every session, its worst case), so the team's answers must equal the local warehouse's, which is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import generate
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from sinks import query, remote, team, warehouse
from sinks.publish import publish
from tests.s3_endpoint import BUCKET, s3_endpoint

ROOT = Path(__file__).resolve().parent.parent
QUERIES = {
    "sessions_by_agent": "SELECT agent, count(*) AS n, sum(turn_count) AS t FROM sessions GROUP BY ALL ORDER BY agent",
    "daily_tokens": "SELECT day, sum(output_tokens) AS out FROM daily_tokens GROUP BY ALL ORDER BY day",
    "tool_usage": "SELECT tool_name, sum(calls) AS calls FROM tool_usage GROUP BY ALL ORDER BY calls DESC, tool_name",
}


def _cli(*args: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli.app", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode:
        raise SystemExit(f"transcripts {' '.join(args[:2])} failed: {proc.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200, help="corpus size to generate")
    parser.add_argument("--corpus", type=Path, help="a HOME generated before (generated there when it does not exist)")
    parser.add_argument("--data", type=Path, help="data directory (loaded unless it holds a warehouse)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query figure (median)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "out" / "publish.json", help="where the figures go"
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="publish-bench-"))
    home = args.corpus or scratch / "home"
    if not home.exists():
        generate(home, args.mb)
    data = args.data or scratch / "data"
    out: dict[str, Any] = {"mb": args.mb}
    if not warehouse.warehouse_path(data).exists():
        settings = load_settings(
            home=home, data_dir=data, env={"HOME": str(home), "TRANSCRIPTS_TIMEZONE": "UTC"}, lock_wait=5
        )
        t0 = time.perf_counter()
        run_etl(settings, as_tasks=False)
        out["load_s"] = round(time.perf_counter() - t0, 1)
    with s3_endpoint(scratch) as endpoint:
        env = endpoint.env()
        os.environ.update(env)  # the AWS SDK's credential chain reads this process's environment
        url = f"s3://{BUCKET}/bench"
        target = remote.open_target(url, env)
        (data / "cache" / "publish-hashes.json").unlink(missing_ok=True)  # a first publish hashes every file
        t0 = time.perf_counter()
        done = publish(data, target, "m1")
        seconds = time.perf_counter() - t0
        out["publish"] = {
            "files": done.files,
            "mb": round(done.bytes_total / 1e6, 1),
            "seconds": round(seconds, 2),
            "mb_per_s": round(done.bytes_total / 1e6 / seconds, 1),
        }
        # the same through the CLI (a process of its own, as a script or the nightly run calls it)
        before = len(endpoint.requests())
        cli_s = _cli("publish", url, "--machine", "m1", "--data-dir", str(data), env=env)
        requests = endpoint.requests()[before:]
        out["no_change_publish"] = {
            "cli_seconds": round(cli_s, 2),
            "requests": len(requests),
            "request_lines": [r.split("?")[0] for r in requests],
        }
        t0 = time.perf_counter()
        publish(data, target, "m1")
        out["no_change_publish"]["in_process_seconds"] = round(time.perf_counter() - t0, 3)
        for label in ("m2", "m3"):
            publish(data, target, label)
        reader = scratch / "reader"
        t0 = time.perf_counter()
        fetched = team.fetch(target, reader)
        out["team_fetch"] = {
            "objects": fetched.fetched,
            "mb": round(fetched.bytes_fetched / 1e6, 1),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        timings: dict[str, dict[str, float]] = {}
        local = query.connect(data, "UTC")
        try:
            for name, sql in QUERIES.items():
                local_s, team_s, open_s = [], [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    want = local.execute(sql).fetchall()
                    local_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    cached = team.fetch(target, reader)  # the manifests again; every object from the cache
                    con = team.connect(cached, "UTC", reader / "cache")
                    open_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    got = con.execute(sql).fetchall()
                    team_s.append(time.perf_counter() - t0)
                    con.close()
                    if got != want:
                        raise SystemExit(f"{name}: the team's answer differs from the local warehouse's")
                timings[name] = {
                    "local_ms": round(statistics.median(local_s) * 1000, 1),
                    "team_ms": round(statistics.median(team_s) * 1000, 1),
                    "team_open_ms": round(statistics.median(open_s) * 1000, 1),
                }
        finally:
            local.close()
        out["queries"] = timings
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
