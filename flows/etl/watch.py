"""`transcripts watch`: follow the agents' roots with OS file events and load what changed within seconds.

One process and one loop, no thread of ours: watchfiles (Rust `notify`: inotify, FSEvents, kqueue) waits for
events in short ticks, and between ticks the loop
- maps each changed path to the agents whose roots hold it (`Pending`: the one place the changed paths are kept);
- loads an agent once its roots were quiet for `watch_quiet_seconds`, or at the latest `watch_max_delay_seconds`
  after its first change, so that an agent appending many times a second is still loaded every few seconds;
- every `watch_check_minutes` checks every agent as `run` does (incremental), for an event the OS did not deliver
  (a full inotify queue, a network filesystem, a root too broad to watch): this light check also runs at start,
  catching up with what was written while nothing watched;
- looks every ROOTS_SECONDS at which roots exist, and whether each is still the same folder: a root that appears
  (or is made again) is watched from then on and its agent checked whole; one that disappears is let go.

A load is `flows.etl.flow.load` (`run_etl` without its publish: a team folder gets the nightly run's, not one
every few seconds) in this process with its steps as plain functions: one Prefect flow run per load would flood
the Prefect UI with hundreds of runs a day. It is recorded in the ledger (and the `runs` table) as flow `watch`, and
takes the writer lock of `run` without waiting: while another run holds it, the changed paths stay pending and the
load is tried again a second later. A check that finds nothing new is not recorded (no ledger line per quarter
hour). A session being written (a last line without its newline) is deferred by its reader as in any run; the
event of the line's end, or the next light check, reads it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extractors.model import Agent
from extractors.registry import extractor
from flows.etl import pipeline
from flows.etl.settings import Settings
from sinks import ledger, warehouse
from sinks.lock import LockBusy
from sinks.store import Store

log = logging.getLogger("transcripts.watch")

FLOW = "watch"  # the runs' flow name in the ledger and the `runs` table
TICK_SECONDS = 0.25  # the longest the loop waits for events before it looks at what is due
ROOTS_SECONDS = 2.0  # how often the roots' existence is looked at
BUSY_RETRY_SECONDS = 1.0  # another run holds the writer lock: try again this much later
WATCH_AGAIN_SECONDS = 60.0  # the OS refused to watch the roots: try again this much later (the check meanwhile)
FAILED_RETRY_SECONDS = 30.0  # a load failed (its error is in the ledger and the log): try again this much later


@dataclass(frozen=True, slots=True)
class Root:
    agent: Agent
    path: Path
    watched: bool  # False: the home itself or above it (a recursive watch costs one kernel watch per folder)


def roots_of(settings: Settings) -> list[Root]:
    """The roots of the agents `run` discovers, in their order; the home or an ancestor of it (Aider's default
    root, the whole home) is found by the light check only."""
    home = settings.home.expanduser().absolute()
    found: list[Root] = []
    for agent in settings.agents:
        module = extractor(agent)
        if not module.SPEC.nightly and agent not in settings.explicit_roots:
            continue
        for path in (r.expanduser().absolute() for r in settings.roots(agent, module)):
            found.append(Root(agent, path, watched=not home.is_relative_to(path)))
    return found


@dataclass(slots=True)
class Pending:
    """The paths that changed since their agent was last loaded, per agent, with when its first and last change
    was seen (time.monotonic). An agent whose root appeared is pending with the root itself as its path."""

    paths: dict[Agent, set[str]] = field(default_factory=dict)
    first: dict[Agent, float] = field(default_factory=dict)
    last: dict[Agent, float] = field(default_factory=dict)

    def add(self, agent: Agent, path: str, now: float) -> None:
        self.paths.setdefault(agent, set()).add(path)
        self.first.setdefault(agent, now)
        self.last[agent] = now

    def due(self, now: float, quiet: float, max_delay: float) -> tuple[Agent, ...]:
        """The agents to load now: quiet for `quiet` seconds, or waiting `max_delay` seconds since the first change."""
        return tuple(a for a in self.paths if now - self.last[a] >= quiet or now - self.first[a] >= max_delay)

    def take(self, agents: tuple[Agent, ...]) -> Taken:
        taken = Taken(
            {a: self.paths.pop(a, set()) for a in agents}, {a: self.first.pop(a) for a in agents if a in self.first}
        )
        for agent in agents:
            self.last.pop(agent, None)
        return taken

    def put_back(self, taken: Taken) -> None:
        """Pending again, as early as they were: a load that could not happen loses none of its paths."""
        for agent, paths in taken.paths.items():
            self.paths.setdefault(agent, set()).update(paths)
            since = taken.first.get(agent, 0.0)
            self.first[agent] = min(self.first.get(agent, since), since)
            self.last.setdefault(agent, since)


@dataclass(frozen=True, slots=True)
class Taken:
    paths: dict[Agent, set[str]]
    first: dict[Agent, float]


@dataclass(frozen=True, slots=True)
class Load:
    """One load's outcome, for the line a terminal shows."""

    reason: str  # "change" (events) or "check" (the light check)
    report: pipeline.RunReport


class Watch:
    """One `transcripts watch`: call `serve()`; it returns the name of the signal that stopped it."""

    def __init__(
        self,
        settings: Settings,
        *,
        on_load: Callable[[Load], None] | None = None,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.roots = roots_of(settings)
        self.on_load = on_load or (lambda _load: None)
        self.on_problem = on_problem or (lambda _text: None)
        self.pending = Pending()
        self.stop = threading.Event()
        self.stopped_by: str | None = None
        self.abandoned = False  # a load was in progress when the signal came, and was abandoned
        self.working = False  # in a load (or deciding one): a signal abandons it rather than waiting for it
        self.next_check = 0.0  # the light check is due at once: catch up with what was written meanwhile
        self.retry_at = 0.0
        self.told_busy = False
        self._identities: dict[Path, tuple[int, int]] = {}
        self._watcher: Iterator[set[tuple[Any, str]]] | None = None
        self._roots_looked: float | None = None  # when the roots were last looked at (None: not yet)
        self._unwatchable: str | None = None  # why the OS refused to watch the current roots (said once)
        self._watch_again_at = 0.0

    # --- signals ---------------------------------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        """Stop: at once when waiting for events; in a load, by abandoning it (the commit is atomic: the corpus
        stays as it was, the ledger records the load as interrupted, and the next start loads it again).

        The abandon is a KeyboardInterrupt raised wherever the load is, whatever the signal: the exception the
        libraries on the way (DuckDB, concurrent.futures, the import system) are made to let through, or to turn
        into one of their own (DuckDB's RuntimeError "Query interrupted"). Which one reaches the ledger does not
        matter: `ledger.interrupt` marks the load interrupted first, and `_load_due` ends it quietly."""
        if self.stopped_by is not None:
            return  # a second signal: the first one's abandon is under way; let it clean up
        self.stopped_by = signal.Signals(signum).name
        self.stop.set()
        if self.working:
            # A load under way (its run begun in the ledger, its end not yet recorded) is abandoned; before it
            # (deciding whether there is anything to load) or after its end is recorded, nothing is.
            self.abandoned = ledger.interrupt(f"interrupted ({self.stopped_by}: the watch was stopped during the load)")
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        for signum in previous:
            signal.signal(signum, self._on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    # --- the loop --------------------------------------------------------------------------------------------------

    def serve(self) -> str:
        """Watch until SIGINT, SIGTERM or SIGHUP; returns the signal's name."""
        with self._signals():
            try:
                # here: Prefect and the steps of the flow (~2.5 s), paid at start, not by the first change's load
                import flows.etl.flow  # noqa: F401

                while not self.stop.is_set():
                    self._follow_roots(time.monotonic())
                    changed = self._wait()
                    now = time.monotonic()
                    for path in changed:
                        for agent in self._agents_of(path):
                            self.pending.add(agent, path, now)
                    if not self.stop.is_set():
                        self._load_due(now)
            except (KeyboardInterrupt, SystemExit):
                if self.stopped_by is None:
                    raise  # not one of our signals: not ours to swallow
            finally:
                self._close_watcher()
        return self.stopped_by or "ended"

    def _agents_of(self, path: str) -> list[Agent]:
        if path.startswith(str(self.settings.data_dir) + os.sep):
            return []  # our own writes, should the data dir be under a root
        return sorted(
            {r.agent for r in self.roots if path == str(r.path) or path.startswith(str(r.path).rstrip(os.sep) + os.sep)}
        )

    def _wait(self) -> set[str]:
        """The paths changed during one tick (or less, when a signal comes)."""
        if self._watcher is None:
            self.stop.wait(TICK_SECONDS)
            return set()
        try:
            changes = next(self._watcher)
        except StopIteration:  # the stop event was set
            self._watcher = None
            return set()
        except (OSError, RuntimeError) as exc:
            # The OS refused to watch (a root gone as it was added: FileNotFoundError; the inotify limits, an event
            # queue lost: watchfiles' WatchfilesRustInternalError, a RuntimeError): the check finds the changes, and
            # watching is tried again a minute later.
            self._close_watcher()
            self._watch_again_at = time.monotonic() + WATCH_AGAIN_SECONDS
            self._unwatched(f"{type(exc).__name__}: {exc}")
            return set()
        return {path for _change, path in changes}

    def _unwatched(self, why: str) -> None:
        if self._unwatchable != why:
            self._unwatchable = why
            text = (
                f"cannot watch the agents' folders ({why}); changes are found by the check every "
                f"{self.settings.watch_check_minutes:g} min"
            )
            log.warning("event=watch_unavailable error=%r", why)
            self.on_problem(text)

    def _follow_roots(self, now: float) -> None:
        """(Re)start the watcher when the set of existing roots changed: a root that appears is watched and its
        agent checked whole (what was written before the watch began is found that way)."""
        first = self._roots_looked is None
        if self._roots_looked is not None and now - self._roots_looked < ROOTS_SECONDS:
            return
        self._roots_looked = now
        identities: dict[Path, tuple[int, int]] = {}
        for root in self.roots:
            if not root.watched:
                continue
            try:
                st = root.path.stat()
            except OSError:
                continue
            if os.path.isdir(root.path):
                identities[root.path] = (st.st_dev, st.st_ino)
        if identities == self._identities and (
            self._watcher is not None or not identities or now < self._watch_again_at
        ):
            return
        if identities != self._identities:
            for root in self.roots:
                came = identities.get(root.path)
                if came is not None and came != self._identities.get(root.path) and not first:
                    self.pending.add(root.agent, str(root.path), now)
                    log.info("event=watch_root_appeared agent=%s root=%s", root.agent, root.path)
            for path in set(self._identities) - set(identities):
                log.info("event=watch_root_gone root=%s", path)
            self._unwatchable = None
        self._identities = identities
        self._close_watcher()
        if identities:
            self._watcher = self._open_watcher(sorted(identities))

    def _open_watcher(self, paths: list[Path]) -> Iterator[set[tuple[Any, str]]]:
        import watchfiles  # here: the Rust extension, only for a command that watches

        log.info("event=watch_roots roots=%s", ",".join(str(p) for p in paths))
        return watchfiles.watch(
            *paths,
            watch_filter=None,  # every file an agent writes counts; discovery decides what is a source
            debounce=int(TICK_SECONDS * 1000),
            step=50,
            rust_timeout=int(TICK_SECONDS * 1000),
            yield_on_timeout=True,
            stop_event=self.stop,
            raise_interrupt=False,
            ignore_permission_denied=True,  # a folder we may not read inside a root costs that folder
        )

    def _close_watcher(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            with contextlib.suppress(Exception):
                watcher.close()  # type: ignore[attr-defined]  # a generator: closing it closes the OS watch

    # --- loads -----------------------------------------------------------------------------------------------------

    def _load_due(self, now: float) -> None:
        checking = now >= self.next_check
        agents = (
            tuple(dict.fromkeys(r.agent for r in self.roots))
            if checking
            else self.pending.due(now, self.settings.watch_quiet_seconds, self.settings.watch_max_delay_seconds)
        )
        if not agents or now < self.retry_at:
            return
        if ledger.lock_held(self.settings.data_dir, by_another=True):
            if not self.told_busy:
                log.info("event=watch_waiting reason=another run holds the data directory")
                self.told_busy = True
            self.retry_at = now + BUSY_RETRY_SECONDS
            return
        self.told_busy = False
        taken = self.pending.take(tuple(self.pending.paths) if checking else agents)
        self.working = True
        try:
            report = self._load(agents, taken)
        except Exception as exc:
            if self.stopped_by is not None:  # the signal's KeyboardInterrupt, turned into another on its way out
                log.info("event=watch_abandoned agents=%s error=%r", ",".join(agents), f"{type(exc).__name__}: {exc}")
                return
            self.pending.put_back(taken)
            if isinstance(exc, LockBusy):  # taken between our look and the load: wait as for a held lock
                self.retry_at = time.monotonic() + BUSY_RETRY_SECONDS
                return
            self.retry_at = time.monotonic() + FAILED_RETRY_SECONDS
            log.error("event=watch_load_failed agents=%s error=%r", ",".join(agents), f"{type(exc).__name__}: {exc}")
            self.on_problem(
                f"load of {', '.join(agents)} failed: {type(exc).__name__}: {exc}; the previous corpus is intact "
                f"(tried again in {FAILED_RETRY_SECONDS:g} s)"
            )
            return
        finally:
            self.working = False
        # Ended well though a signal came during it (its interrupt swallowed on the way: sinks/search.py `_Ahead.wait`
        # did once): the load is whole and recorded `ok`, so nothing was abandoned.
        self.abandoned = False
        if checking:
            self.next_check = time.monotonic() + self.settings.watch_check_minutes * 60
            log.info("event=watch_checked agents=%s loaded=%s", ",".join(agents), report is not None)
        if report is not None:
            self.on_load(Load("check" if checking else "change", report))

    def _load(self, agents: tuple[Agent, ...], taken: Taken) -> pipeline.RunReport | None:
        """Load `agents` incrementally, as `run` would (their sources only: other agents' are neither read nor
        taken for deleted); None when there was nothing new, changed or deleted (then nothing is recorded)."""
        from flows.etl.flow import load  # here: imported by serve() at start (Prefect, ~2.5 s)

        subset = dataclasses.replace(self.settings, agents=agents, lock_wait_seconds=0.0)
        # The changed paths (a root that appeared is its own path) are stat'd and their folders listed again whatever
        # the listing record says (pipeline.discover): an append to a cold session is found by its event.
        touched = sorted({path for paths in taken.paths.values() for path in paths})
        found = pipeline.discover(subset, touched=touched)
        if self._nothing_to_do(subset, found) or self.stop.is_set():
            return None
        log.info("event=watch_load agents=%s paths=%d", ",".join(agents), sum(len(p) for p in taken.paths.values()))
        return load(subset, as_tasks=False, discovered=found, flow_name=FLOW)  # no publish: the nightly run's

    @staticmethod
    def _nothing_to_do(settings: Settings, found: pipeline.Discovery) -> bool:
        """Nothing new, changed or deleted, and the warehouse whole (the test `run_etl` makes under the lock)."""
        if not found.sources and not pipeline.data_dir_exists(settings.data_dir):
            return True  # no agent data and no corpus: nothing to start one with (as `run` says, and writes nothing)
        store = Store(settings.data_dir)
        try:
            _, plan = pipeline.plan_run(settings, store, full=False, explicit=found)
        except OSError:  # a run swapped versions while it was read: let the load plan again under the lock
            return False
        return pipeline.nothing_to_do(plan) and warehouse.is_current(
            settings.data_dir, store.current_number(), settings.timezone
        )


def describe(load: Load) -> str:
    """The line a terminal shows for a load, in the words of `run`'s summary: per agent what was loaded, then the
    turns and the seconds (`14:02:07 loaded claude 1 session · 2 turns · 0.9s`)."""
    c = load.report.committed
    stamp = time.strftime("%H:%M:%S")
    why = " (check)" if load.reason == "check" else ""
    if c is None:
        return f"{stamp} nothing new{why} · {load.report.seconds:.1f}s"
    parts = []
    for agent, counts in c.counts_by_agent.items():
        said = [count(counts.get("sessions_loaded", 0), "session")]
        if counts.get("sessions_rejected"):
            said.append(f"{counts['sessions_rejected']} rejected")
        if counts.get("sources_deferred"):
            said.append(f"{counts['sources_deferred']} deferred (being written)")
        if counts.get("sources_deleted"):
            said.append(f"{count(counts['sources_deleted'], 'source')} gone")
        parts.append(f"{agent} {', '.join(said)}")
    return f"{stamp} loaded{why} {'; '.join(parts)} · {count(c.turns_loaded, 'turn')} · {load.report.seconds:.1f}s"


def count(n: int, one: str) -> str:
    return f"{n} {one if n == 1 else one + 's'}"
