"""The nightly ETL as plain steps (discover, plan, extract batches, commit, warehouse), used by the Prefect flow.

Kept free of Prefect so that every step can be called and tested on its own; `flows.etl.flow` wraps them as tasks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from extractors.discovery import Listings, drain_skips, listing, take_identities
from extractors.errors import RejectCode
from extractors.model import Agent, Deferred, Loaded, Rejected, Session, Source, Streamed
from extractors.registry import extractor, problem_of, read_streaming, registered
from flows.etl.run import Run
from flows.etl.settings import Settings
from sinks.commit import commit_run, record_failed_run
from sinks.files import private_dir
from sinks.ledger import COUNT_FIELDS
from sinks.listing import Record, discard_record, install_record, load_record, merged, write_record
from sinks.manifest import Plan, make_plan
from sinks.results import BatchResult, SourceResult, agent_of
from sinks.secrets_key import load_or_create_key
from sinks.store import Store
from transforms.normalize import kept_turns, reject_row
from transforms.redact import Redactor, version_suffix

if TYPE_CHECKING:
    from sinks.commit import Committed  # imported when a run commits: a no-op run never pays for it

log = logging.getLogger("transcripts.etl")

Progress = Callable[[int, int], None]  # (bytes done, bytes total)
DAY_NS = 86_400 * 10**9


@dataclass(slots=True)
class Discovery:
    sources: list[Source] = field(default_factory=list)
    scanned: dict[Agent, list[str]] = field(default_factory=dict)
    missing_roots: dict[Agent, list[str]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # entries passed over, by reason (discovery.drain_skips)
    listing: Record | None = None  # what the walk listed, for the next run (None: explicit paths, nothing to keep)
    full_check: bool = False  # every folder listed and every file stat'd (no record used)
    listing_changed: bool = False  # `listing` differs from the record the discovery started from
    quiet: set[str] = field(default_factory=set)  # folders whose sources were not listed: unchanged (make_plan)
    listed: dict[str, int] = field(default_factory=dict)  # folders listed / reused, files stat'd / trusted


@dataclass(slots=True)
class RunReport:
    """What a run did; the CLI prints it, the ledger stores it."""

    run_id: str
    plan_counts: dict[str, dict[str, int]]
    committed: Committed | None = None
    seconds: float = 0.0
    dry_run: bool = False
    bytes_to_read: int = 0
    found_any_root: bool = True
    flow_run_id: str | None = None
    redacted: bool = True  # False: this run stored text as it was (--no-redact)
    published: str | None = None  # what publishing to the team folder (`publish_url`) did, when one is set


def parser_versions(redact: bool) -> dict[Agent, str]:
    """The effective parser version of every agent: its extractor's version and the redaction mode and rules
    version (`3+r1.1.5e2f1a9c`, or `3+raw` without redaction). A source read under another one is read again, so
    changing the rules or the setting re-derives the whole corpus on the next run: it is never half redacted."""
    suffix = version_suffix(redact)
    return {agent: f"{module.SPEC.parser_version}{suffix}" for agent, module in registered().items()}


def redactor(settings: Settings) -> Redactor:
    """The run's redactor: with the corpus's key (created on first use; call under the lock), or raw."""
    return Redactor(load_or_create_key(settings.data_dir)) if settings.redact else Redactor(None)


def _by_value(versions: Mapping[Agent, str]) -> dict[str, str]:
    return {agent: version for agent, version in versions.items()}


def new_run_id(now: datetime | None = None) -> str:
    """A run is an event: its id is its start time (UTC) and process id."""
    moment = now or datetime.now(UTC)
    return f"{moment:%Y%m%dT%H%M%S}{moment.microsecond:06d}Z-{os.getpid()}"


def discover(
    settings: Settings,
    *,
    touched: Iterable[str | os.PathLike[str]] = (),
    check_all: bool = False,
    now_ns: int | None = None,
) -> Discovery:
    """List every source of the selected agents under their roots (nothing is opened).

    A real file is listed once however many roots or links lead to it: sources are keyed by (st_dev, st_ino), and
    the one from the first root in the configured order wins (roots are in preference order: Codex `sessions/`
    before `archived_sessions/`, whose duplicate rule relies on it); each discovery already keeps one path per file
    within its root. A root whose listing fails all the same (an OSError no discovery anticipated, or a bug) is
    logged and left out whole, and not marked scanned, so none of its sources is taken for deleted; the other roots
    load as usual.

    Changes are found in time that grows with the change, not with the corpus (docs/operations.md, "How changes
    are found"): the listing record of the last run (`sinks.listing`) says what each folder held; a folder whose
    mtime has not moved is not listed again, and its files last modified more than `settings.hot_days` ago are
    taken as recorded, without a stat. A full check (every folder listed, every file stat'd) is made when there
    is no usable record, when the last one is `settings.full_check_days` old or more, and when `check_all` is
    given; the discovery's `listing` is what the run saves when it ends well (`save_listing`).

    `touched`: paths the caller knows changed (a watcher's file events): each is stat'd, and its folder (or the
    folder itself) listed again, whatever the record says, so that a file appended since the last run is found
    even when it is cold. `now_ns` (default: the clock) is the time hot and cold are measured from.
    """
    found = Discovery()
    now = time.time_ns() if now_ns is None else now_ns
    record = load_record(settings.data_dir)
    due = settings.full_check_days <= 0 or record is None
    if record is not None and not due:
        due = now - record.checked_at_ns >= settings.full_check_days * DAY_NS or record.version != corpus_version(
            settings
        )
    full_check = check_all or due
    listings = Listings(
        record.folders if record is not None else None,
        now_ns=now,
        hot_ns=int(settings.hot_days * DAY_NS),
        trust=not full_check,
        touched=(os.fspath(p) for p in touched),
    )
    drain_skips()  # count this discovery's skips only
    take_identities()
    seen_paths: set[str] = set()
    seen_files: set[tuple[int, int]] = set()
    with listing(listings):
        for agent in settings.agents:
            module = extractor(agent)
            for root in (r.expanduser().absolute() for r in settings.roots(agent, module)):
                if not root.exists():
                    found.missing_roots.setdefault(agent, []).append(str(root))
                    continue
                try:
                    listed = list(module.discover(root))
                except MemoryError:
                    raise
                except Exception as exc:  # an OSError no discovery anticipated, or a bug: this root, not the night
                    error = f"{type(exc).__name__}: {exc}"
                    log.error("event=discovery_failed agent=%s root=%s error=%r", agent, root, error)
                    log.debug("event=discovery_failed_traceback root=%s", root, exc_info=True)
                    found.skipped["root_unlisted"] = found.skipped.get("root_unlisted", 0) + 1
                    continue
                found.scanned.setdefault(agent, []).append(str(root))
                known = take_identities()  # what the listing stat'ed already
                for source in listed:
                    key = known.get(source.path) or _file_key(source.path)
                    if source.path in seen_paths or (key is not None and key in seen_files):
                        continue  # overlapping roots, or a second name for the same file
                    seen_paths.add(source.path)
                    if key is not None:
                        seen_files.add(key)
                    found.sources.append(source)
    for reason, n in drain_skips().items():
        found.skipped[reason] = found.skipped.get(reason, 0) + n
    if found.skipped:
        log.warning("event=discovery_skips %s", " ".join(f"{k}={v}" for k, v in sorted(found.skipped.items())))
    roots = [root for agent_roots in found.scanned.values() for root in agent_roots]
    found.listing = Record(
        version=0,  # set when it is saved: the version the run leaves
        checked_at_ns=now if full_check else record.checked_at_ns if record is not None else now,
        folders=merged(record.folders if record is not None else {}, listings.finish(), roots),
    )
    found.full_check = full_check
    found.quiet = listings.quiet
    found.listing_changed = full_check or record is None or found.listing.folders != record.folders
    found.listed = {
        "folders_listed": listings.listed,
        "folders_reused": len(listings.reused),
        "folders_quiet": len(listings.quiet),
        "files_stated": listings.stated,
        "files_trusted": listings.trusted,
    }
    log.debug(  # debug: the command's logging is set up after its discovery (flows/cli/cmd_run.py)
        "event=discovered sources=%d full_check=%s %s",
        len(found.sources),
        full_check,
        " ".join(f"{k}={v}" for k, v in found.listed.items()),
    )
    return found


def corpus_version(settings: Settings) -> int:
    """The corpus version in the data dir (0: none), as the listing record names it."""
    return Store(settings.data_dir).current_number() if data_dir_exists(settings.data_dir) else 0


def save_listing(settings: Settings, found: Discovery) -> None:
    """Keep what `found` listed for the next run's discovery, named after the corpus version now in the data dir:
    call once the run has committed (under the lock), or found nothing to do. Not written when it says what the
    record says already; a discovery of explicit paths (a backfill) has nothing to keep. A record saved by a
    run that read an older version than another run left meanwhile names that older version: it is not used, and
    the next run makes a full check (slower, never wrong)."""
    install_listing(settings, write_listing(settings, found))


def write_listing(settings: Settings, found: Discovery) -> Path | None:
    """`save_listing` up to its last step: the record written beside its place, for `install_listing` to put there
    once the run has ended well (or `discard_listing` to remove). None: nothing to save."""
    if found.listing is None or not found.listing_changed:
        return None
    found.listing.version = corpus_version(settings)
    return write_record(settings.data_dir, found.listing)


def install_listing(settings: Settings, written: Path | None) -> None:
    """Put the record `write_listing` wrote in its place."""
    if written is not None:
        install_record(settings.data_dir, written)


def discard_listing(written: Path | None) -> None:
    """Remove the record `write_listing` wrote, when it was not put in place (the run failed or was stopped)."""
    if written is not None:
        discard_record(written)


def _file_key(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a listed source, or None when it is gone already (its reader will say so)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def plan_counts(plan: Plan[Source]) -> dict[str, dict[str, int]]:
    """Per agent: new / changed / unchanged / deleted sources and bytes to read."""
    counts: dict[str, dict[str, int]] = {}

    def bump(agent: str, key: str, n: int = 1) -> None:
        counts.setdefault(agent, {"new": 0, "changed": 0, "unchanged": 0, "deleted": 0, "bytes": 0})[key] += n

    for s in plan.new:
        bump(s.agent, "new")
        bump(s.agent, "bytes", s.size)
    for s in plan.changed:
        bump(s.agent, "changed")
        bump(s.agent, "bytes", s.size)
    for agent, n in Counter(s.agent for s in plan.unchanged).items():  # every source of a quiet night: counted fast
        bump(agent, "unchanged", n)
    for name, n in plan.quiet.items():
        bump(name, "unchanged", n)
    for row in plan.deleted:
        bump(row["agent"], "deleted")
    return dict(sorted(counts.items()))


# Batches per worker a load is cut into, at least: with one batch per worker, the worker that drew the slower batch
# finishes alone while the other core idles; with several, the last ones even out (and a big file goes first).
BATCHES_PER_WORKER = 4
MIN_BATCH_BYTES = 4 * 1024 * 1024  # smaller batches cost more in per-batch work than they even out


def work_of(sources: Sequence[Source], max_bytes: int, max_files: int, workers: int) -> list[list[Source]]:
    """The extraction batches of a run: at most `max_bytes` / `max_files` each, small enough that `workers`
    processes get about BATCHES_PER_WORKER each, in the order they are handed out: the largest first, so that no
    big batch starts last (longest-processing-time first; the commit does not depend on the order)."""
    total = sum(s.size for s in sources)
    if workers > 1:
        max_bytes = min(max_bytes, max(MIN_BATCH_BYTES, -(-total // (workers * BATCHES_PER_WORKER))))
    work = list(batches(sources, max_bytes, max_files))
    return sorted(work, key=lambda batch: -sum(s.size for s in batch))  # stable: equal sizes keep path order


def batches(sources: Sequence[Source], max_bytes: int, max_files: int) -> Iterator[list[Source]]:
    """Group sources into extraction batches of about `max_bytes` or `max_files` (a big file is a batch alone)."""
    batch: list[Source] = []
    size = 0
    for source in sources:
        if batch and (size + source.size > max_bytes or len(batch) >= max_files):
            yield batch
            batch, size = [], 0
        batch.append(source)
        size += source.size
    if batch:
        yield batch


def run_row(run_id: str, settings: Settings, *, flow: str, mode: str, started: datetime) -> dict[str, Any]:
    """The ledger row of a run, before its counts are known."""
    return {
        "run_id": run_id,
        "flow": flow,
        "mode": mode,
        "started_at": started,
        "ended_at": started,
        "outcome": "ok",
        "error": None,
        "flow_run_id": None,
        "sources_seen": 0,
        "sources_new": 0,
        "sources_changed": 0,
        "sources_unchanged": 0,
        "sources_deleted": 0,
        "sessions_loaded": 0,
        "sessions_rejected": 0,
        "sources_deferred": 0,
        "new_rejections": 0,
        "turns_loaded": 0,
        "bytes_read": 0,
        "counts_by_agent": "{}",
        "limits": json.dumps(asdict(settings.limits), sort_keys=True),
        "parser_versions": json.dumps({a: v for a, v in parser_versions(settings.redact).items()}, sort_keys=True),
    }


def ledger_counts(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the ledger keeps of a run's `runs` row: its counts, per agent too, and its Prefect flow run."""
    counts: dict[str, Any] = {name: int(row.get(name) or 0) for name in COUNT_FIELDS}
    by_agent = row.get("counts_by_agent") or "{}"
    counts["counts_by_agent"] = json.loads(by_agent) if isinstance(by_agent, str) else dict(by_agent)
    counts["flow_run_id"] = row.get("flow_run_id")
    return counts


def nothing_to_do(plan: Plan[Source]) -> bool:
    """A plan with nothing new, changed or deleted: the run can be recorded without starting a flow."""
    return not plan.new and not plan.changed and not plan.deleted


def noop_counts(plan: Plan[Source], flow_run_id: str | None = None) -> dict[str, Any]:
    """The ledger counts of a run that had nothing to do."""
    counts: dict[str, Any] = dict.fromkeys(COUNT_FIELDS, 0)
    counts.update(sources_seen=plan.seen, sources_unchanged=plan.unchanged_count, counts_by_agent={})
    counts["flow_run_id"] = flow_run_id
    return counts


def prepare(settings: Settings) -> Store:
    """Create the private data directory and clear what a killed run left behind (call under the lock)."""
    private_dir(settings.data_dir)
    store = Store(settings.data_dir)
    store.cleanup()
    return store


def resolve_duplicates(
    store: Store, plan: Plan[Source], batches: Sequence[BatchResult], versions: Mapping[Agent, str]
) -> dict[str, str]:
    """The one rule for a session that two sources hold: the fuller copy wins (more turns), then the first path.

    The copies are those read by this run, and the copy the corpus holds now when its source is still present and
    not read again (so that a copy added next to a loaded session, e.g. `cp a.jsonl b.jsonl`, never replaces it, and
    a `--full` run gives what the incremental history gave). Every losing copy gets a `duplicate` outcome and is not
    counted as loaded. Returns session id -> the path of the source whose copy this run keeps; a session whose
    incumbent copy wins is absent (nothing staged for it reaches the dataset).
    """
    holders: dict[str, list[tuple[int, str, SourceResult | None]]] = {}
    for batch in batches:
        for result in batch.sources:
            for sid, turns in result.loaded:
                holders.setdefault(sid, []).append((-turns, result.source.path, result))
    read_now = {s.path for s in plan.to_read}
    by_agent: dict[str, set[str]] = {}
    for batch in batches:
        for result in batch.sources:
            by_agent.setdefault(agent_of(result.source), set()).update(sid for sid, _ in result.loaded)
    gone = {row["source_path"] for row in plan.deleted}
    for sid, (path, turns) in store.session_holders(by_agent).items():
        row = plan.manifest.get(path)
        if path not in read_now and path not in gone and row is not None and row["present"]:
            holders[sid].append((-turns, path, None))
    winners: dict[str, str] = {}
    for sid, copies in holders.items():
        copies.sort(key=lambda copy: (copy[0], copy[1]))
        kept_path = copies[0][1]
        if copies[0][2] is not None:
            winners[sid] = kept_path
        for _, _, other in copies[1:]:
            if other is None:
                continue
            other.loaded = [(s, n) for s, n in other.loaded if s != sid]
            source = cast(Source, other.source)
            detail = f"the same session is loaded from {kept_path}"
            duplicate = Rejected(source, RejectCode.DUPLICATE, detail, session_hint=sid)
            other.rejects.append(reject_row(duplicate, versions[source.agent]))
    return winners


def commit(
    run: Run, plan: Plan[Source], results: Sequence[BatchResult], row: dict[str, Any], winners: Mapping[str, str]
) -> Committed:
    """The commit of the run's batches, whose duplicates `resolve_duplicates` settled (`winners`)."""
    row["ended_at"] = run.clock()
    return commit_run(run.store, run.run_id, plan, results, _by_value(run.parser_versions), row, run.buckets, winners)


def record_failure(store: Store, run_id: str, row: dict[str, Any], error: Exception) -> None:
    """Log a failed run and put it in the ledger; if even that fails (the disk is still full), say so on the
    original error, which is what the caller re-raises."""
    log.error("event=failed run=%s error=%r", run_id, f"{type(error).__name__}: {error}")
    row.update(outcome="failed", error=f"{type(error).__name__}: {error}", ended_at=datetime.now(UTC))

    try:
        record_failed_run(store, run_id, row)
    except OSError as ledger_error:
        error.add_note(f"the failed {row['flow']} run could not be recorded in the ledger either: {ledger_error}")


def plan_run(
    settings: Settings,
    store: Store,
    *,
    full: bool,
    explicit: Discovery | None = None,
    check_all: bool = False,
    locked: bool = False,
    discovered: Callable[[Discovery], None] | None = None,
) -> tuple[Discovery, Plan[Source]]:
    """Discover (unless `explicit` sources are given) and sort the sources against the manifest. `full` (read
    everything again) and `check_all` make the discovery a full check. `locked`: the run holds the writer lock, and
    brings the manifest's cache up to date (sinks.manifest.MANIFEST_CACHE); a plan made without it writes nothing.
    `discovered` is called with the discovery before the sources are sorted (a run starts what can overlap that)."""
    found = discover(settings, check_all=full or check_all) if explicit is None else explicit
    if discovered is not None:
        discovered(found)
    scanned: dict[str, list[str]] = {str(agent): roots for agent, roots in found.scanned.items()}
    versions = _by_value(parser_versions(settings.redact))
    plan = make_plan(
        store, found.sources, scanned, versions, full=full, quiet=found.quiet, from_row=_source_of, keep_cache=locked
    )
    return found, plan


def _source_of(row: Mapping[str, Any]) -> Source:
    """The source a manifest row describes, as its discovery made it (for a source of a quiet folder read again)."""
    return Source(Agent(row["agent"]), row["source_path"], row["size_bytes"], row["mtime_ns"], row["root"], row["kind"])


def explicit_sources(agent: Agent, paths: Sequence[Path]) -> Discovery:
    """Sources for explicitly given paths (a file is one source; a folder is discovered like a root).

    Nothing is scanned as a root, so nothing is ever marked deleted by an explicit run.
    """
    found = Discovery()
    module = extractor(agent)
    for path in paths:
        resolved = path.expanduser().absolute()
        if resolved.is_dir() or module.SPEC.export is not None:
            found.sources.extend(module.discover(resolved))
        elif resolved.is_file():
            st = resolved.stat()
            found.sources.append(Source(agent, str(resolved), st.st_size, st.st_mtime_ns, str(resolved.parent)))
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return found


def elapsed_since(start: float) -> float:
    return round(time.monotonic() - start, 3)


def data_dir_exists(path: Path) -> bool:
    return (path / "parquet").is_symlink()


@dataclass(slots=True)
class Preview:
    """What a backfill would load: everything is read and validated, nothing is written."""

    sources: int = 0
    bytes: int = 0
    sessions: int = 0
    turns: int = 0
    tool_calls: int = 0
    first: datetime | None = None
    last: datetime | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    deferred: int = 0
    examples: list[str] = field(default_factory=list)  # a few rejections with their detail


def preview(found: Discovery, settings: Settings, *, examples: int = 10) -> Preview:
    """Read every source as a run would, counting what would be loaded and rejected (no writes). A big session is
    read in two passes as a run reads it, its parts counted and let go, so memory follows the limits here too."""

    out = Preview()
    for source in found.sources:
        out.sources += 1
        out.bytes += source.size
        for read in read_streaming(source, settings.limits):
            outcome = _counted(read) if isinstance(read, Streamed) else read
            if isinstance(outcome, Loaded | _Counted):
                ses = outcome.session
                out.sessions += 1
                out.turns += outcome.turns if isinstance(outcome, _Counted) else kept_turns(ses)
                out.tool_calls += outcome.tool_calls if isinstance(outcome, _Counted) else len(ses.tool_calls)
                out.first = min(filter(None, (out.first, ses.started_at)))
                end = ses.ended_at or ses.started_at
                out.last = max(filter(None, (out.last, end)))
            elif isinstance(outcome, Rejected):
                out.rejected[outcome.code.value] = out.rejected.get(outcome.code.value, 0) + 1
                if len(out.examples) < examples:
                    where = f" (session {outcome.session_hint})" if outcome.session_hint else ""
                    line = "" if outcome.line is None else f" line {outcome.line + 1}"  # as an editor counts
                    out.examples.append(f"{outcome.code}: {outcome.detail}{where} — {source.path}{line}")
            else:
                out.deferred += 1
    return out


@dataclass(frozen=True, slots=True)
class _Counted:
    """A streamed session as the preview counts it: its head, and what its parts held."""

    session: Session
    turns: int
    tool_calls: int


def _counted(item: Streamed) -> _Counted | Rejected | Deferred:
    """Read a streamed session's parts (its second pass), keeping only their counts; a failure on the way is the
    source's outcome, as in a run (`flows.etl.batch`)."""

    turns = calls = 0
    try:
        for part in item.parts:
            turns += kept_turns(part)
            calls += len(part.tool_calls)
    except MemoryError:
        raise
    except Exception as exc:  # pass 2 of the reader runs here: the reader's boundary
        return problem_of(item.source, exc)
    return _Counted(item.head, turns, calls)
