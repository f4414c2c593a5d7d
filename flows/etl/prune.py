"""`transcripts prune` as a plain step (no Prefect flow: it is a rare, manual operation): plan, or lock, write
the pruned version, record the run in the ledger and bring the warehouse along, like `flows.etl.flow.run_etl`."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from flows.etl import pipeline
from flows.etl.settings import Settings
from flows.etl.status import corpus_snapshot
from sinks import ledger, prune, warehouse
from sinks.files import private_umask
from sinks.lock import writer_lock
from sinks.store import Store

log = logging.getLogger("transcripts.prune")


@dataclass(slots=True)
class PruneReport:
    """What a prune did (or, in a dry run, would do)."""

    plan: prune.PrunePlan
    written: bool
    run_id: str | None = None
    version_number: int = 0
    seconds: float = 0.0


def preview_prune(
    settings: Settings, *, older_than: timedelta, agents: Collection[str] | None = None, now: datetime | None = None
) -> prune.PrunePlan:
    """The plan of a prune, read from the current version without the lock; writes nothing, creates nothing."""
    moment = now or datetime.now(UTC)
    corpus = prune.read_corpus(Store(settings.data_dir))
    return prune.plan_prune(corpus, now=moment, older_than=older_than, agents=agents)


def run_prune(
    settings: Settings, *, older_than: timedelta, agents: Collection[str] | None = None, now: datetime | None = None
) -> PruneReport:
    """Prune under the writer lock: a new Parquet version, a `runs` row (flow and mode `prune`), the warehouse.

    `now` sets the age cutoff (tests inject it); the ledger's times are the clock's, a run being an event. With no
    corpus yet, nothing is created. Raises LockBusy when another run holds the data directory; on any other error
    the failed run is recorded in the ledger and the error raised.
    """
    moment = now or datetime.now(UTC)
    start = time.monotonic()
    if not pipeline.data_dir_exists(settings.data_dir):
        chosen = None if agents is None else tuple(sorted(agents))
        empty = prune.PrunePlan(cutoff=prune.cutoff_of(moment, older_than), agents=chosen)
        return PruneReport(plan=empty, written=False)
    run_id = pipeline.new_run_id()
    with (
        ledger.recording(settings.data_dir, run_id, flow="prune", mode="prune") as record,
        private_umask(),
        writer_lock(settings.data_dir, settings.lock_wait_seconds),
    ):
        store = pipeline.prepare(settings)
        warehouse.cleanup(settings.data_dir)
        row = pipeline.run_row(run_id, settings, flow="prune", mode="prune", started=datetime.now(UTC))
        previous_version = store.current_number()
        try:
            plan = prune.plan_prune(prune.read_corpus(store), now=moment, older_than=older_than, agents=agents)
            row.update(ended_at=datetime.now(UTC), counts_by_agent=json.dumps(plan.counts_by_agent(), sort_keys=True))
            number = prune.commit_prune(store, run_id, plan, row)
            warehouse.refresh(
                settings.data_dir,
                store,
                run_id,
                previous_version=previous_version,
                replaced=plan.session_ids(),
                timezone=settings.timezone,
            )
            record.counts = pipeline.ledger_counts(row)
            record.corpus = corpus_snapshot(settings.data_dir)
            log.info(
                "event=pruned run=%s cutoff=%s families=%d sessions=%d sources=%d seconds=%.2f",
                run_id,
                plan.cutoff.isoformat(),
                len(plan.removed),
                sum(len(f) for f in plan.removed),
                len(plan.sources),
                time.monotonic() - start,
            )
        except Exception as exc:
            pipeline.record_failure(store, run_id, row, exc)
            raise
        finally:
            store.cleanup()
    return PruneReport(
        plan=plan, written=True, run_id=run_id, version_number=number, seconds=pipeline.elapsed_since(start)
    )
