"""The nightly ETL as a Prefect 3 flow: tasks over batches of sources, not one task per file."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
from prefect.states import Cancelled
from prefect.utilities.annotations import quote

from extractors.model import Agent, Source
from flows.etl import pipeline, runlog
from flows.etl.batch import read_batch
from flows.etl.cluster import dask_runner
from flows.etl.publishing import publish_after
from flows.etl.run import Run
from flows.etl.settings import Settings, load_settings
from flows.etl.status import corpus_snapshot
from flows.etl.workers import extraction_pool
from sinks import failpoints, ledger, warehouse
from sinks.commit import Committed, changed_sources, replaced_sessions
from sinks.files import private_dir, private_umask
from sinks.lock import writer_lock
from sinks.manifest import Plan
from sinks.results import BatchResult, Previous
from sinks.store import Store

log = logging.getLogger("transcripts.etl")
T = TypeVar("T")

# Set by the CLI to show a run's progress: called as each stage begins and after each batch read, with
# (stage, sources done, sources total, bytes done, bytes total); the stages are "planning", "reading", "committing"
# and "loading the warehouse".
progress_hook: Callable[[str, int, int, int, int], None] | None = None


def _progress(stage: str, sources: tuple[int, int], done: tuple[int, int]) -> None:
    if progress_hook is not None:
        progress_hook(stage, sources[0], sources[1], done[0], done[1])


# Discoveries the CLI made for a run it hands to the flow (run_id -> Discovery), so that the flow does not walk the
# roots a second time a few seconds later. Kept in the process, not passed as a flow parameter: Prefect would store
# thousands of paths with the flow run.
_handed_over: dict[str, pipeline.Discovery] = {}


def hand_over(run_id: str, found: pipeline.Discovery) -> None:
    _handed_over[run_id] = found


def take_back(run_id: str) -> None:
    """Forget what was handed over for `run_id` (a flow that never started did not take it)."""
    _handed_over.pop(run_id, None)


# The run's extraction pool, when it has one (set by run_etl for the duration of the extraction).
_pool: ProcessPoolExecutor | None = None


@task(name="extract-batch", cache_policy=NO_CACHE)
def extract_batch(run: Run, batch_no: int, sources: list[Source], previous: dict[str, Previous]) -> BatchResult:
    """Read a batch of sources and stage their rows (in a worker process when the run has a pool).

    A run stopped or failed meanwhile abandons its pool (`_extract`): this batch, no longer wanted, ends Cancelled, not
    Failed with the pool's BrokenProcessPool and its traceback in the log."""
    pool = _pool
    if pool is None:
        return read_batch(run, batch_no, sources, previous)
    try:
        return pool.submit(read_batch, run, batch_no, sources, previous).result()
    except (BrokenProcessPool, CancelledError, RuntimeError):  # RuntimeError: submitted after the pool's shutdown
        if _pool is pool:
            raise  # the pool broke under a run still going: a failure
        return Cancelled(message="the run was stopped or failed: its batches are not wanted")  # type: ignore[return-value]


@task(name="commit", cache_policy=NO_CACHE)
def commit(
    run: Run, plan: Plan[Source], results: list[BatchResult], row: dict[str, Any], winners: dict[str, str]
) -> Committed:
    """Merge the staged rows into the next Parquet version and swap it in."""
    return pipeline.commit(run, plan, results, row, winners)


@task(name="load-warehouse", cache_policy=NO_CACHE)
def load_warehouse(
    run: Run,
    previous_version: int,
    replaced: dict[str, set[str]] | None,
    sources: set[str] | None = None,
    begun: warehouse.Begun | None = None,
) -> None:
    """Apply the run to warehouse.duckdb (a copy swapped in atomically, or one transaction in place), finishing the
    change `begun` during the commit."""
    warehouse.refresh(
        run.data_dir,
        run.store,
        run.run_id,
        previous_version=previous_version,
        replaced=replaced,
        timezone=run.settings.timezone,
        sources=sources,
        begun=begun,
    )


# A change of more sessions than this is begun after the commit, as before: beside it, its DELETEs (and the rows
# they return for the figures and the search index) would hold memory while the commit's merges hold theirs, for a
# gain that matters only to small changes (the one-session change of a big corpus: issue 32).
BEGIN_BESIDE_SESSIONS = 5000


# A run that reads at most this many bytes opens the warehouse as soon as it is planned (`warehouse.Begun` made
# without its change), so that the open overlaps the read: in place, the warehouse is then locked for the read too,
# which for this much is well under a second; a bigger run opens it after its read.
OPEN_BEFORE_READ_BYTES = 64 * 1024 * 1024


def _open_warehouse_early(
    run_id: str, settings: Settings, plan: Plan[Source], previous_version: int, opened: warehouse.Begun | None
) -> warehouse.Begun | None:
    """The warehouse opened on a thread before a small incremental run reads its sources (see OPEN_BEFORE_READ_BYTES),
    or the one `opened` as the plan was made (`_open_when_discovered`), which a bigger run lets go;
    `_begin_warehouse_change` gives it the change, or abandons it."""
    if not previous_version or sum(s.size for s in plan.to_read) > OPEN_BEFORE_READ_BYTES:
        if opened is not None:
            opened.abandon()
        return None
    return opened or warehouse.Begun(settings.data_dir, run_id, previous_version=previous_version)


def _open_when_discovered(
    run_id: str, settings: Settings, previous_version: int, full: bool, opened: list[warehouse.Begun]
) -> Callable[[pipeline.Discovery], None]:
    """What `plan_run` calls once the sources are discovered: when the listing moved since the last run (a source
    grew, came or went, most likely), the warehouse is opened on a thread while the sources are sorted against the
    manifest. At 5 GB that sorting is ~40 ms and the open (DuckDB's log replayed) 40-110 ms, both on a one-session
    change's longest path otherwise. A listing that moved with nothing to load costs the open, on the other core."""

    def discovered(found: pipeline.Discovery) -> None:
        if previous_version and not full and found.listing_changed:
            opened.append(warehouse.Begun(settings.data_dir, run_id, previous_version=previous_version))

    return discovered


def _let_go(*changes: warehouse.Begun | None) -> None:
    """Abandon each warehouse change begun or opened early (a no-op for one the warehouse step took or let go)."""
    for change in changes:
        if change is not None:
            change.abandon()


def _begin_warehouse_change(
    run: Run,
    plan: Plan[Source],
    results: list[BatchResult],
    previous_version: int,
    opened: warehouse.Begun | None = None,
) -> warehouse.Begun | None:
    """The warehouse's part of an incremental run begun on a thread before its commit (`sinks.warehouse.Begun`),
    for the sessions and sources the commit will replace, on the warehouse `opened` early when it was; None for a
    first run (the warehouse is built whole) and for a change of more than BEGIN_BESIDE_SESSIONS sessions."""
    if not previous_version:
        return None
    replaced, sources = replaced_sessions(results), changed_sources(plan, results)
    if sum(len(sids) for sids in replaced.values()) > BEGIN_BESIDE_SESSIONS:
        if opened is not None:
            opened.abandon()
        return None
    if opened is not None:
        opened.apply(replaced, sources)
        return opened
    return warehouse.Begun(
        run.data_dir, run.run_id, previous_version=previous_version, replaced=replaced, sources=sources
    )


def run_etl(settings: Settings, **options: Any) -> pipeline.RunReport:
    """`load` (the run: see there), then, when a team folder is set (`publish_url`), publish the committed corpus to
    it. A failed publish does not fail the run: its corpus is committed and loaded; the report and the log say that
    the publish failed and why, and the next run (or `transcripts publish`) sends what is missing."""
    report = load(settings, **options)
    if settings.publish_url:
        report.published = publish_after(settings)
    return report


def load(
    settings: Settings,
    *,
    full: bool = False,
    flow_run_id: str | None = None,
    as_tasks: bool = True,
    explicit: pipeline.Discovery | None = None,
    run_id: str | None = None,
    discovered: pipeline.Discovery | None = None,
    flow_name: str | None = None,
    check_all: bool = False,
) -> pipeline.RunReport:
    """The body of the flows: lock, plan, extract in batches, commit, load. Raises on failure (after the ledger).

    The run is recorded in the ledger (sinks.ledger) from its start to its end, however it ends; a caller that
    records it already (the CLI, from before the flow starts) passes its `run_id` and the record is shared.

    `explicit` sources (a backfill) replace discovery; no source is marked deleted then. `discovered` is a
    discovery of the configured roots made just before (by the CLI, to decide that there is work): used instead
    of walking them again, with deletions as usual. `flow_name` names the run in the ledger and the `runs` table
    (default `etl`, `backfill` for explicit sources; `transcripts watch` passes `watch`). `check_all` makes the
    discovery a full check (every folder listed, every file stat'd: `pipeline.discover`); `full` does too.
    `as_tasks=False` calls the steps as plain functions (no Prefect API needed): for `transcripts watch` (one flow
    run per load would flood the Prefect UI), tests and the benchmark's pipeline-only timings; the flows always run
    them as tasks.
    """
    commit_step = commit if as_tasks else commit.fn
    load_step = load_warehouse if as_tasks else load_warehouse.fn
    start = time.monotonic()
    run_id = run_id or pipeline.new_run_id()
    mode = "backfill" if explicit is not None else "full" if full else "incremental"
    flow_name = flow_name or ("backfill" if explicit else "etl")
    private_dir(settings.data_dir)
    with (
        runlog.run_log(settings.data_dir, run_id),  # the CLI opened it already; a scheduled run opens it here
        ledger.recording(settings.data_dir, run_id, flow=flow_name, mode=mode) as record,
        private_umask(),
        writer_lock(settings.data_dir, settings.lock_wait_seconds),
        _older_objects_frozen(),
    ):
        store = pipeline.prepare(settings)
        warehouse.cleanup(settings.data_dir)
        row = pipeline.run_row(run_id, settings, flow=flow_name, mode=mode, started=datetime.now(UTC))
        row["flow_run_id"] = flow_run_id
        previous_version = store.current_number()
        sweeper: threading.Thread | None = None
        listing: _Beside[Path | None] | None = None
        begun: warehouse.Begun | None = None
        opened: list[warehouse.Begun] = []  # the warehouse opened as the plan was made (a no-op to abandon once taken)
        try:
            _progress("planning", (0, 0), (0, 0))
            given = explicit if explicit is not None else discovered
            found, plan = pipeline.plan_run(
                settings,
                store,
                full=full,
                explicit=given,
                check_all=check_all,
                locked=True,
                discovered=_open_when_discovered(run_id, settings, previous_version, full, opened),
            )
            begun = opened[0] if opened else None
            log.info(
                "event=plan run=%s new=%d changed=%d unchanged=%d deleted=%d bytes=%d",
                run_id,
                len(plan.new),
                len(plan.changed),
                plan.unchanged_count,
                len(plan.deleted),
                sum(s.size for s in plan.to_read),
            )
            nothing = not full and pipeline.nothing_to_do(plan)
            if nothing and begun is not None:
                begun.abandon()  # opened for nothing: let go before the warehouse is looked at
                begun = None
            if nothing and warehouse.is_current(settings.data_dir, previous_version, settings.timezone):
                # Nothing new, changed or deleted and the warehouse whole: the ledger line is the run's only write
                # (a no-op night must not copy the warehouse, nor write a Parquet version).
                record.outcome = "noop"
                record.counts = pipeline.noop_counts(plan, flow_run_id)
                pipeline.save_listing(settings, found)
                log.info("event=noop run=%s unchanged=%d", run_id, plan.unchanged_count)
                return pipeline.RunReport(
                    run_id=run_id,
                    plan_counts=pipeline.plan_counts(plan),
                    seconds=pipeline.elapsed_since(start),
                    flow_run_id=flow_run_id,
                    redacted=settings.redact,
                )
            total = sum(s.size for s in plan.to_read)
            begun = _open_warehouse_early(run_id, settings, plan, previous_version, begun)
            run = Run(
                settings,
                run_id,
                parser_versions=pipeline.parser_versions(settings.redact),
                buckets=plan.bucket_layout(store.layout()),
                redactor=pipeline.redactor(settings),
            )
            work = pipeline.work_of(plan.to_read, settings.batch_bytes, settings.batch_files, settings.workers)
            results: list[BatchResult] = []
            done = 0
            sources, read = len(plan.to_read), 0
            _progress("reading", (0, sources), (0, total))
            # Closed however the loop ends: a failure or a stop signal between two batches abandons the pool's
            # other batches at once (`extraction_pool`), not when the generator happens to be collected.
            with contextlib.closing(_extract(run, plan, work, as_tasks=as_tasks)) as extracted:
                for number, (batch, last) in enumerate(zip(work, extracted, strict=True)):
                    results.append(last)
                    failpoints.reach("extract")
                    log.info(
                        "event=batch run=%s batch=%d sources=%d bytes=%d sessions=%d rejected=%d deferred=%d",
                        run_id,
                        number,
                        len(batch),
                        sum(s.size for s in batch),
                        sum(len(r.loaded) for r in last.sources),
                        sum(r.rejected for r in last.sources),
                        sum(r.deferred for r in last.sources),
                    )
                    done += sum(s.size for s in batch)
                    read += len(batch)
                    _progress("reading", (read, sources), (done, total))
            big = _opaque if as_tasks else _as_is
            _progress("committing", (read, sources), (done, total))
            winners = pipeline.resolve_duplicates(store, plan, results, run.parser_versions)
            # What the warehouse can do before the version exists (open it, delete the replaced rows) overlaps the
            # commit; rolled back below if the commit or anything after it fails.
            begun = _begin_warehouse_change(run, plan, results, previous_version, begun)
            committed = commit_step(big(run), big(plan), big(results), big(row), big(winners))
            replaced = committed.replaced if previous_version else None
            sweeper = _sweep_old_versions(store)
            _progress("loading the warehouse", (read, sources), (done, total))
            # The listing record is written beside the warehouse's change and put in place once that ends well.
            listing = _Beside(functools.partial(pipeline.write_listing, settings, found), "listing-record")
            load_step(big(run), previous_version, big(replaced), big(committed.sources_changed), big(begun))
            pipeline.install_listing(settings, listing.result())
            record.counts = pipeline.ledger_counts(row)
            record.corpus = corpus_snapshot(settings.data_dir)
            log.info(
                "event=done run=%s sessions=%d rejected=%d deferred=%d turns=%d seconds=%.2f",
                run_id,
                committed.sessions_loaded,
                committed.sessions_rejected,
                committed.sources_deferred,
                committed.turns_loaded,
                time.monotonic() - start,
            )
        except Exception as exc:
            _let_go(*opened, begun)  # rolled back (a no-op once the warehouse step took it)
            if sweeper is not None:
                sweeper.join()  # it removes every version but the current two: not while the failure writes one
            if listing is not None:
                pipeline.discard_listing(listing.value())  # a failed run leaves the record as it was
            if record.interrupted is None:  # a stop signal's exception in disguise is no failure (ledger.interrupt)
                pipeline.record_failure(store, run_id, row, exc)
            raise
        finally:
            _let_go(*opened, begun)  # a stop signal's way out, too
            if sweeper is not None:
                sweeper.join()
            if listing is not None:
                pipeline.discard_listing(listing.value())  # a stop signal's way out (a no-op once it is in place)
            _clean_up(store, run_id)
    failpoints.reach("recorded")
    return pipeline.RunReport(
        run_id=run_id,
        plan_counts=pipeline.plan_counts(plan),
        committed=committed,
        seconds=pipeline.elapsed_since(start),
        flow_run_id=flow_run_id,
        redacted=settings.redact,
    )


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """The objects made before the run (Prefect's, the imports') kept out of the garbage collector's full passes for
    the run (`gc.freeze`), and given back after it (`gc.unfreeze`: nothing is kept for good, which a long-running
    `transcripts watch` would otherwise pile up). A run allocates many containers (the listing record, the manifest's
    columns) and so triggers full passes: each walked every object of the process, ~60 ms at 5 GB of transcripts, in
    about one no-change run in two there."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Beside(Generic[T]):
    """`work()` on a thread beside what the caller does next (~10 ms of a one-session change at 5 GB: the listing
    record, written beside the warehouse's change); `result()` waits for it and gives what it returned or raises
    what it raised, `value()` waits and gives None for an error."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._value = work()
        except BaseException as exc:  # handed to the caller by `result()`
            self._error = exc

    def value(self) -> T | None:
        self._thread.join()
        return self._value

    def result(self) -> T | None:
        value = self.value()
        if self._error is not None:
            raise self._error
        return value


def _sweep_old_versions(store: Store) -> threading.Thread:
    """Remove the version the commit made old (an unlink per Parquet file of the corpus: ~0.1 s at 5 GB) on a thread,
    while the warehouse loads from the new one; `load` waits for it before its `_clean_up`, which removes what it
    could not (and a killed run's next run does: `pipeline.prepare`)."""

    keep = store.current_number()  # the version the commit made

    def sweep() -> None:
        try:
            store.remove_old_versions(keep)
        except OSError as exc:
            log.debug("event=sweep_left error=%r", str(exc))

    sweeper = threading.Thread(target=sweep, name="old-versions", daemon=True)
    sweeper.start()
    return sweeper


def _clean_up(store: Store, run_id: str, attempts: int = 5) -> None:
    """Remove the run's staging folder as the run ends, however it ends. Interrupted (Ctrl-C, SIGTERM), a worker
    process may still be writing a staged file for a moment while the folder is removed ("Directory not empty"):
    try again shortly, and if it still fails, say so in the log and leave it to the next run, which clears what an
    ended run left before it starts (`pipeline.prepare`). The run's own outcome (interrupted, failed, ok) stands."""
    for attempt in range(attempts):
        try:
            store.cleanup()
            return
        except OSError as exc:
            if attempt == attempts - 1:
                log.warning("event=cleanup_left run=%s error=%r (the next run clears it)", run_id, exc)
                return
            time.sleep(0.2)


def _opaque(value: Any) -> Any:
    """A task argument Prefect passes on as it is: without this it walks every element of a parameter looking for
    futures (thousands of sources, plans and batch results: ~2.5 s of a 200 MB load). None of ours holds one."""
    return quote(value)


def _as_is(value: Any) -> Any:
    return value


def _extract(
    run: Run, plan: Plan[Source], work: list[list[Source]], *, as_tasks: bool
) -> Generator[BatchResult, None, None]:
    """Extract every batch, in order; on several processes when there are several batches, or on the Dask
    cluster of `settings.dask` (as Prefect tasks only: a cluster is the flow's business)."""
    global _pool
    settings = run.settings

    def previous(batch: list[Source]) -> dict[str, Previous]:
        return {s.path: plan.previous[s.path] for s in batch if s.path in plan.previous}

    def task_args(number: int, batch: list[Source]) -> tuple[Any, ...]:
        return (_opaque(run), number, _opaque(batch), _opaque(previous(batch)))

    if settings.dask is not None and work:
        if not as_tasks:
            raise ValueError("a Dask cluster runs the extraction as Prefect tasks: run the flow")

        with dask_runner(settings.dask, workers=settings.workers, log=runlog.current()) as runner:
            futures = [
                # Not quoted: Dask takes a tuple (which `quote` is) in a task's arguments for a task of its own.
                runner.submit(
                    extract_batch, parameters={"run": run, "batch_no": n, "sources": b, "previous": previous(b)}
                )
                for n, b in enumerate(work)
            ]
            for future in futures:
                yield future.result()
        return
    # A big source is read in a worker process even alone: what reading it took (a 2 GB session's first pass holds
    # ~0.6 GB of small objects) goes back to the system with that process, before the commit and the warehouse.
    apart = any(run.limits.read_twice(s.size) for batch in work for s in batch)
    with extraction_pool(min(settings.workers, len(work)), apart=apart, log=runlog.current()) as pool:
        if pool is None:
            for number, batch in enumerate(work):
                if as_tasks:
                    yield extract_batch(*task_args(number, batch))
                else:
                    yield extract_batch.fn(run, number, batch, previous(batch))
            return
        _pool = pool
        try:
            if as_tasks:
                futures = [extract_batch.submit(*task_args(n, b)) for n, b in enumerate(work)]
                try:
                    for future in futures:
                        yield future.result()
                finally:
                    for future in futures:  # abandoned: the batches not begun never start (none left when done)
                        future.wrapped_future.cancel()
            else:
                plain = [pool.submit(read_batch, run, n, b, previous(b)) for n, b in enumerate(work)]
                for done in plain:
                    yield done.result()
        finally:
            _pool = None


@contextlib.contextmanager
def foreground() -> Iterator[None]:
    """Settings for a flow run a person started and waits for (`transcripts run`, `backfill`): no flow-run
    heartbeats. Prefect joins its heartbeat thread at the end of every flow, which sleeps in 1 s steps: up to a
    second of nothing per command. Heartbeats let Prefect tell a crashed deployment run from a long one; a
    foreground run's end is in the ledger however it ends (`status --check`), and the scheduled runs keep them."""

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


@flow(name="transcripts-etl", log_prints=False, validate_parameters=False)
def etl_flow(options: dict[str, Any], full: bool = False, run_id: str | None = None) -> pipeline.RunReport:
    """Nightly ETL of every configured agent into Parquet and DuckDB. `options` are `load_settings` arguments."""
    settings = load_settings(**options)
    discovered = _handed_over.pop(run_id, None) if run_id else None
    flow_run_id = str(flow_run.id) if flow_run.id else None
    return run_etl(settings, full=full, run_id=run_id, flow_run_id=flow_run_id, discovered=discovered)


@flow(name="transcripts-backfill", log_prints=False, validate_parameters=False)
def backfill_flow(
    options: dict[str, Any], agent: str, paths: list[str], full: bool = False, run_id: str | None = None
) -> pipeline.RunReport:
    """Load explicitly given sources (a ChatGPT export) into the corpus."""
    settings = load_settings(**options)
    explicit = pipeline.explicit_sources(Agent(agent), [Path(p) for p in paths])
    flow_run_id = str(flow_run.id) if flow_run.id else None
    return run_etl(settings, full=full, explicit=explicit, run_id=run_id, flow_run_id=flow_run_id)
