"""Prototype, measured: stage Arrow IPC instead of per-bucket Parquet, and extract batches in two processes.

    uv run python bench/try_staging.py --corpus HOME [--sources claude] [--repeat 3]

Runs the full load into fresh data dirs, alternating three variants in their own processes, and prints the best
pipeline time of each; then checks that every variant wrote the same dataset as the current code.
- `current`: the pipeline as it is.
- `ipc`: each staging flush writes ONE Arrow IPC file per table (uncompressed, not fsynced: staging is scratch, a
  killed run discards it) holding one record batch per (agent, bucket), instead of one zstd Parquet file per
  (table, agent, bucket), fsynced; the commit reads a bucket's record batch back without a Parquet dataset.
- `ipc+2proc`: the same, with the extraction batches run by two worker processes (the machine has two cores).

This monkeypatches private functions of sinks/ and flows/ (`sinks.staging._flush`, the commit's Parquet read, the
extract step): it is a measuring tool for the proposed change, to delete once sinks/ stages this way itself.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("current", "ipc", "ipc+2proc")
BUCKET_MARK = "::"  # a staged "path" `<file>::<record batch index>` names one bucket's rows in an IPC file


def patch_ipc_staging() -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    import sinks.staging as staging
    from extractors import ids
    from extractors.model import Agent, Loaded
    from sinks.store import BUCKETS, FileKey, Store
    from transforms.normalize import session_tables

    def flush(
        store: Store, run_id: str, batch: Any, loaded: list[Loaded], parser_versions: Mapping[Agent, str]
    ) -> None:
        if not loaded:
            return
        tables = session_tables(loaded, parser_versions)
        origin = {item.session.session_id: item.source.path for item in loaded}
        batch.turns += tables["turns"].num_rows
        part_no = sum(len(paths) for paths in batch.staged.values())
        base = staging.staging_dir(store, run_id)
        base.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            if not table.num_rows:
                continue
            sids = table.column("session_id")
            unique = pc.unique(sids)
            position = pc.index_in(sids, value_set=unique)
            bucket_of = pa.array([ids.bucket_of(s, BUCKETS) for s in unique.to_pylist()], type=pa.int32())
            table = table.append_column(
                staging.SOURCE_COLUMN, pc.take(pa.array([origin[s] for s in unique.to_pylist()]), position)
            )
            table = table.append_column("_bucket", pc.take(bucket_of, position))
            table = table.sort_by([("agent", "ascending"), ("_bucket", "ascending")])
            agents, buckets = table.column("agent").to_pylist(), table.column("_bucket").to_pylist()
            table = table.drop_columns(["_bucket"])
            path = base / f"{name}-{batch.batch_no:06d}-{part_no:06d}.arrow"
            keys: list[FileKey] = []
            with ipc.new_file(str(path), table.schema) as writer:
                start = 0
                for i in range(1, len(buckets) + 1):
                    if i == len(buckets) or (agents[i], buckets[i]) != (agents[start], buckets[start]):
                        writer.write_table(table.slice(start, i - start))
                        keys.append(FileKey(name, agents[start], buckets[start]))
                        start = i
            for number, key in enumerate(keys):
                batch.staged.setdefault(key, []).append(Path(f"{path}{BUCKET_MARK}{number}"))
        del tables
        pa.default_memory_pool().release_unused()

    parquet_read = pq.read_table

    def read_table(source: Any, *args: Any, **kwargs: Any) -> Any:
        text = str(source)
        if BUCKET_MARK not in text:
            return parquet_read(source, *args, **kwargs)
        file, number = text.rsplit(BUCKET_MARK, 1)
        with pa.OSFile(file) as handle:
            return pa.Table.from_batches([ipc.open_file(handle).get_batch(int(number))])

    staging._flush = flush
    pq.read_table = read_table  # the commit calls pq.read_table through the module


def _work(data_dir: Path, run_id: str, number: int, batch: list[Any], limits: Any, versions: Any) -> Any:
    from sinks.staging import stage_batch
    from sinks.store import Store

    return stage_batch(Store(data_dir), run_id, number, batch, limits, versions, {})


def patch_two_processes() -> None:
    """Extract every batch of the run in a pool of two processes (a fresh full load: no previous manifest)."""
    import flows.etl as etl
    import flows.pipeline as pipeline

    planned: list[list[Any]] = []
    futures: dict[int, Future[Any]] = {}
    batches = pipeline.batches

    def capture(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        planned[:] = list(batches(*args, **kwargs))
        return iter(planned)

    class Step:
        @staticmethod
        def fn(
            data_dir: Path, run_id: str, number: int, batch: list[Any], limits: Any, versions: Any, previous: Any
        ) -> Any:
            if previous:
                raise SystemExit("the two-process prototype only measures a full load into a fresh data dir")
            if not futures:
                pool = ProcessPoolExecutor(2)  # fork: the IPC patch is inherited
                for n in sorted(range(len(planned)), key=lambda n: -sum(s.size for s in planned[n])):
                    futures[n] = pool.submit(_work, data_dir, run_id, n, planned[n], limits, versions)
            return futures[number].result()

    pipeline.batches = capture
    etl.extract_batch = Step  # type: ignore[assignment]


def child(variant: str, home: Path, data: Path, sources: list[str]) -> None:
    if variant in ("ipc", "ipc+2proc"):
        patch_ipc_staging()
    if variant == "ipc+2proc":
        patch_two_processes()
    from flows.etl import run_etl
    from flows.settings import load_settings

    report = run_etl(load_settings(home=home, data_dir=data, sources=sources), as_tasks=False)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(json.dumps({"pipeline_seconds": report.seconds, "rss_mib": rss, "workers_rss_mib": workers}))


def same_dataset(a: Path, b: Path) -> list[str]:
    """Files of the current Parquet versions that differ (the runs ledger is per run, not compared)."""
    import pyarrow.parquet as pq

    left, right = (a / "parquet").resolve(), (b / "parquet").resolve()
    names = sorted(str(p.relative_to(left)) for p in left.rglob("*.parquet"))
    if names != sorted(str(p.relative_to(right)) for p in right.rglob("*.parquet")):
        return ["(the file lists differ)"]
    return [
        n for n in names if not n.startswith("runs") and not pq.read_table(left / n).equals(pq.read_table(right / n))
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a HOME written by bench/generate.py")
    parser.add_argument("--sources", default="claude")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sources = args.sources.split(",")
    if args.child:
        child(args.child, args.corpus, args.data, sources)
        return 0
    work = Path(tempfile.mkdtemp(prefix="transcripts-try-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRANSCRIPTS_", "PREFECT_"))}
    env.update(XDG_CONFIG_HOME=str(work / "xdg"), PREFECT_HOME=str(work / "prefect"), DO_NOT_TRACK="1")
    best: dict[str, dict[str, Any]] = {}
    try:
        for _ in range(args.repeat):
            for variant in VARIANTS:
                data = work / variant.replace("+", "-")
                shutil.rmtree(data, ignore_errors=True)
                os.sync()
                cmd = [sys.executable, __file__, "--corpus", str(args.corpus), "--sources", args.sources]
                out = subprocess.run(
                    [*cmd, "--child", variant, "--data", str(data)], env=env, capture_output=True, text=True, check=True
                )
                got = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{variant:10s} pipeline {got['pipeline_seconds']:6.2f} s  RSS {got['rss_mib']} MiB", flush=True)
                if variant not in best or got["pipeline_seconds"] < best[variant]["pipeline_seconds"]:
                    best[variant] = got
        print(f"best of {args.repeat}:")
        for variant, got in best.items():
            extra = f" + workers {got['workers_rss_mib']} MiB each" if got["workers_rss_mib"] else ""
            print(f"  {variant:10s} {got['pipeline_seconds']:6.2f} s  RSS {got['rss_mib']} MiB{extra}")
        for variant in VARIANTS[1:]:
            differ = same_dataset(work / "current", work / variant.replace("+", "-"))
            print(
                f"dataset of {variant} vs current: {'identical' if not differ else 'DIFFERS: ' + ', '.join(differ[:5])}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
