"""The MCP server through a real client: how long `search` and `get_session` of a 1,000-turn session take.

    uv run python bench/mcp_bench.py --mb 200 [--keep DIR] [--repeat 20]

Generates a corpus (`bench/generate.py`, or `--corpus HOME` for one made before) with one extra Claude session of
`--turns` turns, loads it (unless `--data` already holds a warehouse), starts `transcripts mcp` as a client would
(the SDK's stdio client spawning the command) and times each tool call from request to answer, after one warm-up
call. Issue 31's targets: a search under 300 ms, `get_session` of 1,000 turns under 500 ms. Writes
bench/out/mcp.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import generate
from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from sinks import warehouse

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["login form password", "refactor router", "failing test on CI", "database migration", "TODO"]
LONG_ID = "0b0b0b0b-1000-4000-8000-000000001000"
SEARCH_TARGET_MS = 300
SESSION_TARGET_MS = 500


def write_long_session(home: Path, turns: int) -> str:
    """A Claude session of `turns` turns (a person and a model in turn, each answer with a tool call), in `home`."""
    folder = home / ".claude" / "projects" / "-home-bench-long"
    folder.mkdir(parents=True, exist_ok=True)
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/bench/long", "sessionId": LONG_ID}
    base |= {"version": "2.1.38", "gitBranch": "main"}
    lines = []
    for n in range(turns):
        stamp = f"2026-02-01T{(n // 3600) % 24:02d}:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"
        record: dict[str, Any] = {**base, "parentUuid": None, "timestamp": stamp, "uuid": f"u-{n:06d}"}
        if n % 2 == 0:
            text = f"Step {n}: look at the router and the database migration again, then run the failing test."
            record |= {"type": "user", "message": {"role": "user", "content": text}}
        else:
            answer = f"Done with step {n}. " + "The migration adds a column and the test passes. " * 8
            content = [
                {"type": "text", "text": answer},
                {"type": "tool_use", "id": f"toolu_{n:06d}", "name": "Bash", "input": {"command": f"pytest -k s{n}"}},
            ]
            usage = {"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 200}
            message = {"model": "claude-opus-4-6", "id": f"msg_{n}", "type": "message", "role": "assistant"}
            record |= {"type": "assistant", "requestId": f"req_{n}", "message": message | {"content": content}}
            record["message"]["usage"] = usage
        lines.append(json.dumps(record))
    (folder / f"{LONG_ID}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"claude-{LONG_ID}"


async def measure(data: Path, session_id: str, repeat: int) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "flows.cli.app", "mcp", "--data-dir", str(data), "--timezone", "UTC"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRANSCRIPTS_RUNNER": "off"},
        cwd=str(ROOT),
    )
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        start_s = time.perf_counter() - started

        async def timed(tool: str, arguments: dict[str, Any]) -> tuple[float, str]:
            t0 = time.perf_counter()
            result = await session.call_tool(tool, arguments)
            ms = (time.perf_counter() - t0) * 1000
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            if result.isError:
                raise SystemExit(f"{tool} {arguments}: {text}")
            return ms, text

        await timed("search", {"query": "warm up"})  # the first call opens the warehouse and loads fts
        await timed("get_session", {"session_id": session_id, "to_turn": 1})
        searches = [(await timed("search", {"query": q}))[0] for _ in range(repeat) for q in QUERIES]
        gets = []
        size = 0
        for _ in range(repeat):
            ms, text = await timed("get_session", {"session_id": session_id})
            gets.append(ms)
            size = len(text.encode())
        pages = [(await timed("get_session", {"session_id": session_id, "from_turn": 900}))[0] for _ in range(repeat)]
        whole: list[float] = []  # the whole session, page after page as the answers say to continue
        for _ in range(repeat):
            t0, count = time.perf_counter(), 0
            following: int | None = 1
            while following is not None:
                _, text = await timed("get_session", {"session_id": session_id, "from_turn": following})
                found = re.search(r"from_turn=(\d+)\)", text.rsplit("[truncated:", 1)[-1])
                following = int(found.group(1)) if "[truncated:" in text and found else None
                count += 1
            whole.append((time.perf_counter() - t0) * 1000)
        lists = [(await timed("list_sessions", {"order_by": "cost"}))[0] for _ in range(repeat)]
    return {
        "server_start_and_initialize_s": round(start_s, 2),
        "search_ms": _stats(searches),
        "get_session_1000_turns_ms": _stats(gets),
        "get_session_answer_bytes": size,
        "get_session_from_turn_900_ms": _stats(pages),
        "get_session_all_pages_ms": _stats(whole),
        "get_session_pages": count,
        "list_sessions_by_cost_ms": _stats(lists),
    }


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "max": round(ordered[-1], 1),
        "n": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200, help="corpus size to generate")
    parser.add_argument("--corpus", type=Path, help="a HOME generated before (the long session is added to it)")
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    parser.add_argument("--data", type=Path, help="data directory (loaded unless it holds a warehouse)")
    parser.add_argument("--turns", type=int, default=1000, help="turns of the long session")
    parser.add_argument("--repeat", type=int, default=20, help="calls per measurement")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "mcp.json", help="where the figures go")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    home = args.corpus or args.keep or scratch / "home"
    if args.corpus is None:
        generate(home, args.mb)
    session_id = write_long_session(home, args.turns)
    data = args.data or scratch / "data"
    out: dict[str, Any] = {"mb": args.mb, "turns": args.turns}
    if not warehouse.warehouse_path(data).exists():
        settings = load_settings(home=home, data_dir=data, env={"HOME": str(home)}, lock_wait=5)
        t0 = time.perf_counter()
        run_etl(settings, as_tasks=False)
        out["load_s"] = round(time.perf_counter() - t0, 1)
    out["warehouse_mb"] = round(warehouse.warehouse_path(data).stat().st_size / 1e6, 1)
    out |= anyio.run(measure, data, session_id, args.repeat)
    out["targets_met"] = {
        "search_under_300_ms": out["search_ms"]["median"] < SEARCH_TARGET_MS,
        "get_session_under_500_ms": out["get_session_1000_turns_ms"]["median"] < SESSION_TARGET_MS,
    }
    target = args.out
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
