"""One benchmark phase in its own process: run the ETL once and print what it measured as one JSON line.

    python bench/phase.py --home HOME --data DATA --sources claude[,codex,...] [--full] [--prefect]
                          [--dask local|ADDRESS] [--profile FILE.prof] [--stages] [--no-redact] [--texts FILE]

`bench/run.py` starts this once per phase, so that each phase's peak RSS is its own (the parent reads it with
`os.wait4`). Without `--prefect` the pipeline runs as plain functions (`run_etl(..., as_tasks=False)`: no Prefect
API, no server); with it, through the real flow `etl_flow`, which starts Prefect's temporary API server.

Printed fields: import_seconds (interpreter and library imports), call_seconds (the run_etl / etl_flow call),
pipeline_seconds (`RunReport.seconds`: inside run_etl, from the lock to the warehouse swap), the run's counts, and
maxrss of this process and of its reaped children (the Prefect server), in MiB.

`--texts FILE` (with TRANSCRIPTS_WORKERS=1, so that every text passes through this process) also writes every text
the redactor was given, in order, to FILE (a pickled list): `bench/run.py --compare-redaction` times the redactor
alone over them.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

STARTED = time.monotonic()

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# Steps of a run timed by --stages: (module, attribute, label). Wrapped before flows.etl.flow is imported, so that the
# names it binds are the timed ones. A step that no longer exists is reported as missing, never an error.
STAGES = (
    ("flows.etl.pipeline", "plan_run", "discover + plan"),
    ("flows.etl.batch", "read_batch", "extract batches (all of the below)"),
    ("flows.etl.batch", "_hash", "  content hash of each source"),
    ("flows.etl.batch", "read_source", "  read sources (extractors)"),
    ("flows.etl.batch", "session_tables", "  sessions -> Arrow tables"),
    ("transforms.redact", "Redactor.redact", "    redaction of every text (part of the above)"),
    ("sinks.staging", "write_scratch", "  write staged files"),
    ("sinks.commit", "commit_run", "commit (all of the below; steps on merge threads are summed over threads)"),
    ("sinks.commit", "read_scratch", "  read staged files back"),
    ("pyarrow.parquet", "read_table", "  Parquet reads (old buckets; also the manifest, in plan)"),
    ("sinks.store", "write_parquet", "  write the next version (Parquet, fsync)"),
    ("sinks.store", "NextVersion.publish", "  publish (hard links, fsync, swap)"),
    ("sinks.warehouse", "refresh", "DuckDB warehouse"),
    ("sinks.store", "Store.cleanup", "cleanup (staging, old versions)"),
)


PACKAGES = ("flows", "sinks", "extractors", "transforms")


def time_stages() -> dict[str, list[float]]:
    """Wrap the STAGES with wall-clock timers; returns label -> [seconds, calls] (filled as the run goes)."""
    import importlib
    import inspect

    totals: dict[str, list[float]] = {}
    for module_name, attribute, label in STAGES:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            totals[label] = [-1.0, 0]  # missing
            continue
        slot = totals.setdefault(label, [0.0, 0])
        wrapper = _timed(original, slot, inspect.isgeneratorfunction(original))
        setattr(owner, name, wrapper)
        if not path and getattr(original, "__module__", None) == module_name:
            # Defined here: modules already imported that bound the name (`from x import f`) call the timed one.
            # A helper imported from elsewhere (write_parquet) is timed only where it is named in STAGES.
            for loaded in list(sys.modules.values()):
                if getattr(loaded, "__name__", "").startswith(PACKAGES) and getattr(loaded, name, None) is original:
                    setattr(loaded, name, wrapper)
    return totals


_LOCK = threading.Lock()  # the commit merges buckets on threads


def _timed(original: Any, slot: list[float], generator: bool) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            with _LOCK:
                slot[0] += time.perf_counter() - started
                slot[1] += 1

    def iterate(*args: Any, **kwargs: Any) -> Any:
        slot[1] += 1
        items = original(*args, **kwargs)
        while True:  # only the time inside the generator counts, not the consumer's
            started = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                slot[0] += time.perf_counter() - started
                return
            slot[0] += time.perf_counter() - started
            yield item

    return iterate if generator else call


def _maxrss_mib(who: int) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux: KiB


def run_phase(
    home: Path,
    data: Path,
    sources: list[str],
    *,
    full: bool,
    prefect: bool,
    dask: str | None = None,
    redact: bool = True,
) -> dict[str, Any]:
    from flows.etl.flow import etl_flow, run_etl
    from flows.etl.settings import load_settings

    imported = time.monotonic()
    options: dict[str, Any] = {"home": home, "data_dir": data, "sources": sources, "redact": redact}
    if dask is not None:
        options["dask"] = dask  # the extraction tasks on a Dask cluster: only through the flow
    # The real flow (Prefect's temporary API server, tasks), or plain functions with no Prefect API.
    report = etl_flow(options, full=full) if prefect else run_etl(load_settings(**options), full=full, as_tasks=False)
    called = time.monotonic()
    committed = report.committed
    return {
        "import_seconds": round(imported - STARTED, 3),
        "call_seconds": round(called - imported, 3),
        "pipeline_seconds": report.seconds,
        "bytes_read": committed.bytes_read if committed else 0,
        "sessions_loaded": committed.sessions_loaded if committed else 0,
        "sessions_rejected": committed.sessions_rejected if committed else 0,
        "new_rejections": committed.new_rejections if committed else 0,
        "sources_deferred": committed.sources_deferred if committed else 0,
        "turns_loaded": committed.turns_loaded if committed else 0,
        "plan_counts": report.plan_counts,
        "flow_run_id": report.flow_run_id,
    }


def record_texts() -> list[str]:
    """Wrap Redactor.redact so that it also keeps every text it is given (before flows.etl.flow is imported)."""
    from transforms.redact import Redactor

    texts: list[str] = []
    original = Redactor.redact

    def recording(self: Redactor, text: str) -> Any:
        texts.append(text)
        return original(self, text)

    Redactor.redact = recording  # type: ignore[method-assign]
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one benchmark phase (started by bench/run.py)")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sources", required=True, help="comma list of agents to load")
    parser.add_argument("--full", action="store_true", help="re-read every source (run --full)")
    parser.add_argument("--prefect", action="store_true", help="through the Prefect flow (temporary API server)")
    parser.add_argument("--dask", help="extract on a Dask cluster (`local` or a scheduler address); implies --prefect")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the run to this file")
    parser.add_argument("--stages", action="store_true", help="time the steps of the run (wall clock)")
    parser.add_argument("--no-redact", action="store_true", help="store text raw (run --no-redact)")
    parser.add_argument("--texts", type=Path, help="write every text given to the redactor to this file (pickle)")
    args = parser.parse_args(argv)
    if args.stages:  # the timers live in this process: a worker process would neither run nor pickle them
        os.environ["TRANSCRIPTS_WORKERS"] = "1"
    sources = [s for s in args.sources.split(",") if s]
    stages = time_stages() if args.stages else None
    texts = record_texts() if args.texts else None
    import flows.etl.flow  # noqa: F401 - imported before the profiler starts: imports are not the pipeline's time

    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    result = run_phase(
        args.home,
        args.data,
        sources,
        full=args.full,
        prefect=args.prefect or args.dask is not None,
        dask=args.dask,
        redact=not args.no_redact,
    )
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    if texts is not None:
        import pickle

        args.texts.write_bytes(pickle.dumps(texts, protocol=pickle.HIGHEST_PROTOCOL))
        result["texts"] = len(texts)
    if stages is not None:
        result["stages"] = {label: [round(seconds, 3), int(calls)] for label, (seconds, calls) in stages.items()}
    result["maxrss_self_mib"] = _maxrss_mib(resource.RUSAGE_SELF)
    result["maxrss_children_mib"] = _maxrss_mib(resource.RUSAGE_CHILDREN)
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
