"""`transcripts run` and `transcripts backfill`: plan first, and go through a Prefect flow only when there is work.

A run with nothing new, changed or deleted is recorded in the ledger and answered without importing Prefect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from extractors.registry import detect_format, extractor, parse_agent, spec, suggestion, unknown_agent
from flows.cli.cmd_data import check_old_corpus
from flows.cli.console import (
    Config,
    DataDir,
    Json,
    UsageError,
    Verbose,
    Wait,
    console,
    count,
    escape,
    human_bytes,
    print_json,
    reported,
    route_logs,
    split_list,
)
from flows.cli.progress import Display, wanted
from flows.etl import runlog
from flows.etl.datahome import SAMPLE_HOME, SAMPLE_MARKER, default_data_dir, holds_corpus, is_sample, sample_data_dir
from flows.etl.settings import SettingsError, check_data_dir, check_paths, load_settings
from flows.etl.status import foreign_warehouse, rejected_label
from flows.etl.workers import start_fork_server
from flows.service import runner
from flows.service.api import quiet_prefect
from flows.service.server import prefect_api
from sinks import ledger
from sinks.ledger import private_dirs
from transforms.schema_version import SCHEMA_VERSION

if TYPE_CHECKING:
    from extractors.model import Source
    from flows.etl.pipeline import Discovery, RunReport
    from flows.etl.settings import Settings
    from sinks.manifest import Plan

NoRedact = Annotated[
    bool, typer.Option("--no-redact", help="Store text as it is: secrets are not redacted (re-derives the corpus).")
]
Sources = Annotated[
    list[str] | None,
    typer.Option(
        "--source", metavar="AGENT[,AGENT]", help="Only these agents: a comma list or repeated (claude,codex)."
    ),
]
Home = Annotated[Path | None, typer.Option("--home", metavar="DIR", help="Resolve default locations under this home.")]
Roots = Annotated[
    list[str] | None,
    typer.Option("--root", metavar="AGENT=PATH", help="AGENT=PATH: read AGENT from PATH (repeatable)."),
]


def sample_home() -> Path:
    return SAMPLE_HOME


def keep_sample_apart(settings: Settings, sample: bool, *, write: bool) -> None:
    """The sample and a real corpus never share a data dir: a sample run refuses a data dir holding a corpus that is
    not the sample, a real run one holding the sample; a sample run that writes marks its data dir as the sample's."""

    data = settings.data_dir
    marked = (data / SAMPLE_MARKER).exists()
    where = settings.origins.get("data_dir", "default")
    if sample and not marked and holds_corpus(data):
        raise SettingsError(
            f"data dir {data} ({where}) holds a corpus that is not the sample; the sample loads into a data dir of "
            f"its own (by default {sample_data_dir(settings.env)}), so that none of it enters a real corpus"
        )
    if not sample and marked:
        raise SettingsError(
            f"data dir {data} ({where}) holds the sample corpus (loaded by `run --sample`); a real run needs a data "
            f"dir of its own (leave out --data-dir for the default, {_default_dir(settings)})"
        )
    if sample and write and not marked:
        private_dirs(data)
        fd = os.open(data / SAMPLE_MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as marker:
            marker.write("This data dir holds the sample corpus (transcripts run --sample); no real run writes here.\n")


def _default_dir(settings: Settings) -> Path:
    return default_data_dir(settings.env)


def run(
    source: Sources = None,
    home: Home = None,
    root: Roots = None,
    data_dir: DataDir = None,
    full: Annotated[bool, typer.Option("--full", help="Re-read every source, changed or not.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what a run would do; write nothing.")] = False,
    sample: Annotated[
        bool,
        typer.Option(
            "--sample",
            help="Load the shipped sample corpus into a data dir of its own (docs/operations.md, 'The sample corpus').",
        ),
    ] = False,
    wait: Wait = None,
    as_json: Json = False,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Read on a Dask cluster: a scheduler ADDRESS, or 'local'.")
    ] = None,
    no_redact: NoRedact = False,
    config: Config = None,
    verbose: Verbose = 0,
) -> None:
    """Discover new and changed sessions and load them into the corpus."""
    _run(source, home, root, data_dir, full, dry_run, sample, wait, as_json, config, dask, no_redact, verbose)


@reported("run")
def _run(
    source: list[str] | None,
    home: Path | None,
    root: list[str] | None,
    data_dir: Path | None,
    full: bool,
    dry_run: bool,
    sample: bool,
    wait: float | None,
    as_json: bool,
    config: Path | None,
    dask: str | None = None,
    no_redact: bool = False,
    verbose: int = 0,
) -> None:
    from flows.etl import pipeline  # here: pyarrow and the sinks, ~0.25 s that `--help` and `status` do without

    start = time.monotonic()
    route_logs(verbose)
    if sample:
        home = sample_home()
    sample = sample or (home is not None and is_sample(home))  # `--home data/sample/home` is the sample too
    if sample and data_dir is None:  # never the configured data dir: that is the real corpus
        data_dir = sample_data_dir()
    options: dict[str, Any] = {
        "data_dir": data_dir,
        "home": home,
        "sources": split_list(source),
        "roots": root or [],
        "config": config,
        "lock_wait": wait,
        "dask": dask,
        "redact": False if no_redact else None,
    }
    settings = load_settings(**options)
    check_paths(settings)
    keep_sample_apart(settings, sample, write=not dry_run)
    if not sample:
        check_old_corpus(settings, refuse=not dry_run)
    options["data_dir"] = settings.data_dir
    say = _Say(as_json)
    say.sample = sample
    say.verbose = verbose
    for agent in [a for a in settings.agents if not extractor(a).SPEC.nightly and a not in settings.explicit_roots]:
        say.line(f"{agent} is not discovered by `run`: load it with `transcripts backfill {agent} PATH`.")
    if dry_run:
        found = pipeline.discover(settings, check_all=full)
        if _nothing_found(settings, found, say):
            return
        _dry_run(settings, found, full, say)
        return
    run_id = pipeline.new_run_id()
    mode = "full" if full else "incremental"
    display = Display() if wanted(as_json, verbose) else None
    try:
        with (
            runlog.run_log(settings.data_dir, run_id) as log,
            ledger.recording(settings.data_dir, run_id, flow="etl", mode=mode, defer=True) as record,
        ):
            say.log = log
            found = pipeline.discover(settings, check_all=full)
            say.found = found
            if _nothing_found(settings, found, say):
                record.skip = True
                return
            record.begin()
            _stage(display, "planning")
            plan = _plan(settings, found, full)
            if plan is not None and not full and _may_skip_flow(settings.data_dir) and pipeline.nothing_to_do(plan):
                record.outcome = "noop"
                record.counts = pipeline.noop_counts(plan)
                pipeline.save_listing(settings, found)  # what this discovery listed: the next one starts from it
                report = pipeline.RunReport(run_id, pipeline.plan_counts(plan), seconds=pipeline.elapsed_since(start))
                if settings.publish_url:  # nothing new, but what an earlier publish failed to send is sent now
                    from flows.etl.publishing import publish_after  # here: pyarrow's S3 layer, for a team folder only

                    _stage(display, "publishing")
                    report.published = publish_after(settings)
                _stop(display)
                _print_report(report, settings, say, outcome="noop")
                return
            fresh = not ledger.lock_held(settings.data_dir)  # else the discovery may be old once the lock is free
            if plan is not None and _uses_a_pool(settings, plan):
                start_fork_server()
            _stage(display, "waiting for another run" if ledger.lock_held(settings.data_dir) else "starting the flow")
            wait_for_writer(settings)
            _stage(display, "starting the flow")
            report = _through_flow(
                settings, options, run_id, full, found if fresh else None, display=display, verbose=verbose
            )
    finally:
        _stop(display)
    _print_report(report, settings, say, outcome="ok" if report.committed is not None else "noop")


def _stage(display: Display | None, name: str) -> None:
    if display is not None:
        display.stage(name)


def _stop(display: Display | None) -> None:
    if display is not None:
        display.stop()


def _plan(settings: Settings, found: Discovery, full: bool) -> Plan[Source] | None:
    """The plan against the current version, read without the lock (versions are swapped in whole)."""
    from flows.etl import pipeline  # here: pyarrow and the sinks, ~0.25 s that `--help` and `status` do without
    from sinks.store import Store

    try:
        return pipeline.plan_run(settings, Store(settings.data_dir), full=full, explicit=found)[1]
    except OSError:  # a run swapped versions while it was read: the flow plans again under the lock
        return None


def _uses_a_pool(settings: Settings, plan: Plan[Source]) -> bool:
    """Whether the flow will read this plan in worker processes (several batches, several workers, no Dask)."""
    from flows.etl import pipeline  # here: pyarrow and the sinks, ~0.25 s that `--help` and `status` do without

    if settings.dask is not None:
        return False
    if any(settings.limits.read_twice(s.size) for s in plan.to_read):
        return True  # a big source is read in a worker process even alone (`etl._extract`)
    if settings.workers <= 1:
        return False
    return len(pipeline.work_of(plan.to_read, settings.batch_bytes, settings.batch_files, settings.workers)) > 1


def wait_for_writer(settings: Settings) -> None:
    """Wait (up to --wait) for another run holding the data directory, before Prefect is started: a busy data
    directory is then the one line it should be, not a Prefect error (the flow takes the lock for itself)."""
    if not (settings.data_dir / ".lock").exists():
        return
    # here: pyarrow through the sinks (~0.15 s): a no-op night ends before it
    from sinks.lock import writer_lock

    with writer_lock(settings.data_dir, settings.lock_wait_seconds):
        pass


def _may_skip_flow(data_dir: Path) -> bool:
    """A no-op may skip the flow only when the corpus is whole: the warehouse exists and was written by the DuckDB
    installed here, no run is writing, and the last run ended well (after a failed or killed run the flow runs, and
    repairs the warehouse)."""

    if not (data_dir / "warehouse.duckdb").exists() or ledger.lock_held(data_dir):
        return False

    records = ledger.runs(data_dir)
    finished = [r for r in records if r["outcome"] not in ("running", "busy")]
    snapshot = next((r["corpus"] for r in records if r.get("corpus")), None)
    if snapshot is None or foreign_warehouse(data_dir / "warehouse.duckdb", snapshot):
        return False  # a warehouse another DuckDB wrote (or one we know nothing of) is rebuilt by the flow
    if snapshot.get("schema") != SCHEMA_VERSION:
        return False  # a corpus of an older schema is brought to this one by the flow, even with no source changed
    return bool(finished) and finished[0]["outcome"] in ("ok", "noop")


class _NoCrashReportOnCtrlC(logging.Filter):
    """Prefect logs "Crash detected! ... interrupt signal" for a Ctrl-C, and "Encountered exception during
    execution" with the traceback of any exception the flow raises: that exception goes on to the command, which
    says it in one line (a failure a person can cause or fix: a Dask worker lost, a disk full) or, for a bug, as
    its own traceback; the ledger records it either way."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "interrupt signal" not in message and not message.startswith("Encountered exception during execution")


def _through_flow(
    settings: Settings,
    options: dict[str, Any],
    run_id: str,
    full: bool,
    found: Discovery | None,
    *,
    display: Display | None = None,
    verbose: int = 0,
) -> Any:
    env = _environment()
    quiet_prefect()
    with prefect_api() as api:
        # Here, after quiet_prefect() and prefect_api(): Prefect (~2 s) reads its settings once, at its import.
        from flows.etl import flow as etl

        route_logs(verbose)  # Prefect, loaded, gave the root logger its stderr handler: the run's file instead
        logging.getLogger("prefect.flow_runs").addFilter(_NoCrashReportOnCtrlC())
        if found is not None:
            etl.hand_over(run_id, found)
        etl.progress_hook = display.update if display is not None else None
        try:
            with etl.foreground():
                return etl.etl_flow(options, full=full, run_id=run_id)
        finally:
            etl.progress_hook = None
            etl.take_back(run_id)  # a flow that never started leaves nothing behind
            _runner_for_next_time(api, env)


def _environment() -> dict[str, str]:
    """The command's environment as it came, before the flow: a Dask LocalCluster's nannies add to it for their
    workers (PYTHONHASHSEED, OMP_NUM_THREADS, ...), and a runner loaded with those declines every later command."""

    return dict(os.environ)


def _runner_for_next_time(api: Any, env: dict[str, str]) -> None:
    """After a command paid for loading Prefect itself, start the command runner so that the next one does not;
    it loads with `env`, the command's environment from before the flow."""
    if api is not None and api.source == "managed":  # None: a test's stand-in for the API
        with contextlib.suppress(OSError):  # no runner costs the next command time, never this one its result
            runner.start_in_background(api.url, env=env)


class _Say:
    """Human lines, or nothing (the JSON document is printed at the end)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.doc: dict[str, Any] = {}
        self.sample = False  # the run loaded the sample: its summary says how to look at the sample's data dir
        self.log: Path | None = None  # the run's log file (flows.etl.runlog): named where the summary warns
        self.found: Discovery | None = None  # the run's discovery: what it passed over is said in the summary
        self.verbose = 0  # -v: the log records are on stderr

    def line(self, text: str) -> None:
        if not self.as_json:
            console.print(text, soft_wrap=True, highlight=False)


def _nothing_found(settings: Settings, found: Discovery, say: _Say) -> bool:
    """No sources and no corpus: say per agent where it looked, point to --sample; True when that is the case."""

    if found.sources or (settings.data_dir / "parquet").is_symlink():
        return False
    looked: dict[str, list[str]] = {}
    for agent in settings.agents:
        if not extractor(agent).SPEC.nightly and agent not in settings.explicit_roots:
            continue
        looked[agent] = [f"{p} (not there)" for p in found.missing_roots.get(agent, [])] + [
            f"{p} (no sessions)" for p in found.scanned.get(agent, [])
        ]
    if say.as_json:
        print_json({"outcome": "nothing_found", "data_dir": str(settings.data_dir), "looked_in": looked})
        return True
    say.line("No agent data found. Looked in:")
    for name, paths in looked.items():
        say.line(f"  {name}: {', '.join(paths) or '(no folders)'}")
    say.line("Nothing to load. Point at data with --home DIR or --root AGENT=PATH, or try --sample.")
    return True


def _dry_run(settings: Settings, found: Discovery, full: bool, say: _Say) -> None:
    from flows.etl import pipeline  # here: pyarrow and the sinks, ~0.25 s that `--help` and `status` do without
    from sinks.store import Store

    _, plan = pipeline.plan_run(settings, Store(settings.data_dir), full=full, explicit=found)
    counts = pipeline.plan_counts(plan)
    if say.as_json:
        print_json({"outcome": "dry_run", "data_dir": str(settings.data_dir), "plan": counts})
        return
    say.line("Dry run: what a run would do (nothing written)")
    say.line(f"  {'agent':<10}{'new':>8}{'changed':>9}{'unchanged':>11}{'deleted':>9}{'to read':>12}")
    for agent, c in counts.items():
        say.line(
            f"  {agent:<10}{c['new']:>8}{c['changed']:>9}{c['unchanged']:>11}{c['deleted']:>9}"
            f"{human_bytes(c['bytes']):>12}"
        )
    say.found = found
    _passed_over(say)


def _where(settings: Settings, sample: bool = False) -> str:
    path = settings.data_dir / "warehouse.duckdb"
    if sample:
        flag = f"--data-dir {shlex.quote(str(settings.data_dir))}"
        return (
            f"Sample corpus: {settings.data_dir} (apart from your own corpus). Look around with {flag}:\n"
            f"  transcripts status {flag}\n"
            f"  transcripts sql {flag}\n"
            f"  transcripts search {flag} WORDS"
        )
    return f"Corpus: {path} (query it: duckdb -readonly {shlex.quote(str(path))}; `transcripts status` for a summary)"


def _print_report(report: RunReport, settings: Settings, say: _Say, *, outcome: str) -> None:
    c = report.committed
    rows = report.plan_counts
    found = sum(v["new"] + v["changed"] + v["unchanged"] for v in rows.values())
    unchanged = sum(v["unchanged"] for v in rows.values())
    if say.as_json:
        print_json(
            {
                "outcome": outcome,
                "run_id": report.run_id,
                "data_dir": str(settings.data_dir),
                "sample": say.sample,
                "warehouse": str(settings.data_dir / "warehouse.duckdb"),
                "seconds": report.seconds,
                "plan": rows,
                "sessions_loaded": c.sessions_loaded if c else 0,
                "sessions_rejected": c.sessions_rejected if c else 0,
                "sources_deferred": c.sources_deferred if c else 0,
                "new_rejections": c.new_rejections if c else 0,
                "turns_loaded": c.turns_loaded if c else 0,
                "bytes_read": c.bytes_read if c else 0,
                "counts_by_agent": c.counts_by_agent if c else {},
                "flow_run_id": report.flow_run_id,
                "redacted": report.redacted,
                "published": report.published,
            }
        )
        return
    if report.published:
        say.line(report.published)
    if c is None:
        say.line(f"sources found {found} · nothing new, changed or deleted · {report.seconds:.2f}s")
    else:
        say.line(
            f"sources found {found} · loaded {c.sessions_loaded} sessions · unchanged {unchanged} · "
            f"{rejected_label(c.sessions_rejected, c.new_rejections)} · deferred {c.sources_deferred} · "
            f"turns {c.turns_loaded} · "
            f"{human_bytes(c.bytes_read)} read · {report.seconds:.1f}s"
        )
        for agent, counts in c.counts_by_agent.items():
            parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
            say.line(f"  {agent}: {parts}")
        if c.new_rejections:
            status = (
                f"transcripts status --data-dir {shlex.quote(str(settings.data_dir))}"
                if say.sample
                else "transcripts status"
            )
            say.line(f"[yellow]{count(c.new_rejections, 'new rejection')}: see `{status}`[/yellow]")
        if not report.redacted:
            say.line("[yellow]unredacted: this run stored text as it is (--no-redact); secrets were kept[/yellow]")
    _passed_over(say)
    say.line(_where(settings, say.sample))


def _passed_over(say: _Say) -> None:
    """What discovery passed over (a root it could not list, a folder it could not read) is for a person to act
    on: said in the summary; the details (which root, which error) are log records, in the run's log."""
    skipped = say.found.skipped if say.found is not None else {}
    if skipped:
        what = ", ".join(f"{reason.replace('_', ' ')} {n}" for reason, n in sorted(skipped.items()))
        where = (
            f" (details: {escape(str(say.log))})"
            if say.log is not None
            else " (details: the records above)"
            if say.verbose
            else " (details: run again with -v)"
        )
        say.line(f"[yellow]passed over while discovering: {what}{where}[/yellow]")


_NOT_FILES = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _not_a_source(path: str) -> str | None:
    """Why an explicitly named path cannot be read (None: a file or a folder). Only stat is asked, never open: an
    open() of a named pipe waits for a writer, and `/dev/zero` never ends."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode  # follows a link: a link to /dev/zero is a device
    except FileNotFoundError:
        return f"no such file or folder: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
    return f"{path} is {kind}, not a file or folder: backfill reads only those."


def _within(source: str, named: str) -> bool:
    """Whether `source` (an absolute path) is the named path or under it."""
    root = str(Path(named).expanduser().absolute())
    return source == root or source.startswith(root.rstrip(os.sep) + os.sep)


def backfill(
    target: Annotated[
        list[str],
        typer.Argument(metavar="[FORMAT] PATH...", help="[FORMAT] PATH...: e.g. `chatgpt ~/Downloads/export.zip`."),
    ],
    write: Annotated[bool, typer.Option("--write", help="Load it. Without --write: a dry run.")] = False,
    fmt: Annotated[
        str | None, typer.Option("--format", metavar="FORMAT", help="The format, whatever the path says.")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Read it again even if unchanged.")] = False,
    data_dir: DataDir = None,
    wait: Wait = None,
    as_json: Json = False,
    no_redact: NoRedact = False,
    config: Config = None,
    verbose: Verbose = 0,
) -> None:
    """Load an explicitly given source, such as a ChatGPT export (.zip or conversations.json)."""
    _backfill(target, write, fmt, full, data_dir, wait, as_json, config, no_redact, verbose)


@reported("backfill")
def _backfill(
    target: list[str],
    write: bool,
    fmt: str | None,
    full: bool,
    data_dir: Path | None,
    wait: float | None,
    as_json: bool,
    config: Path | None,
    no_redact: bool = False,
    verbose: int = 0,
) -> None:
    from flows.etl import pipeline  # here: pyarrow and the sinks, ~0.25 s that `--help` and `status` do without

    route_logs(verbose)
    paths = list(target)
    named = None
    if len(paths) > 1:
        try:
            named = parse_agent(paths[0], "format")
            paths = paths[1:]
        except ValueError:
            named = None
            if not Path(paths[0]).expanduser().exists() and suggestion(paths[0]):
                raise UsageError(unknown_agent(paths[0], "format")) from None  # `backfill chatgtp export.zip`
    for p in paths:
        problem = _not_a_source(p)
        if problem:
            raise UsageError(problem)
    try:
        agents = {detect_format(Path(p), fmt or named) for p in paths}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if len(agents) != 1:
        raise UsageError("these paths are of different formats; give one format at a time (--format).")
    agent = agents.pop()

    sample = all(is_sample(Path(p).expanduser()) for p in paths)  # the shipped ChatGPT export
    if sample and data_dir is None:
        data_dir = sample_data_dir()
    redact = False if no_redact else None
    settings = load_settings(data_dir=data_dir, config=config, lock_wait=wait, redact=redact)
    check_data_dir(settings)
    keep_sample_apart(settings, sample, write=write)
    if not sample:
        check_old_corpus(settings, refuse=write)
    try:
        found = pipeline.explicit_sources(agent, [Path(p) for p in paths])
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    empty = [p for p in paths if not any(_within(source.path, p) for source in found.sources)]
    if empty:  # each path named is loaded, or the command says which is not: nothing is skipped without a word
        raise UsageError(f"nothing to load at {', '.join(empty)} (looked for {agent} sources).")
    say = _Say(as_json)
    say.sample = sample
    if not write:
        pv = pipeline.preview(found, settings)
        _refuse_what_is_not_an_export(agent, pv, paths)
        if as_json:
            print_json(
                {
                    "outcome": "dry_run",
                    "format": agent,
                    "sources": pv.sources,
                    "bytes": pv.bytes,
                    "sessions": pv.sessions,
                    "turns": pv.turns,
                    "tool_calls": pv.tool_calls,
                    "first": pv.first.isoformat() if pv.first else None,
                    "last": pv.last.isoformat() if pv.last else None,
                    "rejected": pv.rejected,
                    "deferred": pv.deferred,
                    "examples": pv.examples,
                }
            )
            return
        span = f"{pv.first:%Y-%m-%d} to {pv.last:%Y-%m-%d}" if pv.first and pv.last else "no dates"
        say.line(f"Dry run ({agent}, nothing written): {pv.sources} source(s), {human_bytes(pv.bytes)}")
        say.line(f"  would load {pv.sessions} sessions, {pv.turns} turns, {pv.tool_calls} tool calls, {span}")
        rejected = ", ".join(f"{code} {n}" for code, n in sorted(pv.rejected.items())) or "none"
        say.line(f"  rejections: {rejected}; deferred sources: {pv.deferred}")
        for line in pv.examples:
            say.line(f"    {line}")
        say.line("Run again with --write to load it.")
        return

    run_id = pipeline.new_run_id()
    env = _environment()
    quiet_prefect()
    display = Display() if wanted(as_json, verbose) else None
    try:
        with (
            runlog.run_log(settings.data_dir, run_id) as log,
            ledger.recording(settings.data_dir, run_id, flow="backfill", mode="backfill"),
        ):
            say.log = log
            _stage(display, "waiting for another run" if ledger.lock_held(settings.data_dir) else "starting the flow")
            wait_for_writer(settings)
            _stage(display, "starting the flow")
            with prefect_api() as api:
                # Here, after quiet_prefect() and prefect_api(): Prefect (~2 s) reads its settings once, at its import.
                from flows.etl import flow as etl

                route_logs(verbose)  # Prefect, loaded, gave the root logger its stderr handler: the run's file instead
                logging.getLogger("prefect.flow_runs").addFilter(_NoCrashReportOnCtrlC())
                etl.progress_hook = display.update if display is not None else None
                try:
                    with etl.foreground():
                        report = etl.backfill_flow(
                            {"data_dir": settings.data_dir, "config": config, "lock_wait": wait, "redact": redact},
                            agent,
                            [s.path for s in found.sources],
                            full=full,
                            run_id=run_id,
                        )
                finally:
                    etl.progress_hook = None
                _runner_for_next_time(api, env)
    finally:
        _stop(display)
    _print_report(report, settings, say, outcome="ok" if report.committed is not None else "noop")


def _refuse_what_is_not_an_export(agent: str, pv: Any, paths: list[str]) -> None:
    """A backfill of an export format (a ChatGPT export) of which nothing is readable (a .zip of something else) is
    a wrong argument."""

    declared = spec(agent)
    if declared.export is None or pv.sessions or pv.deferred:
        return
    if pv.rejected and set(pv.rejected) <= {"source_unreadable", "unsupported_format", "bad_shape", "invalid_json"}:
        detail = f" ({pv.examples[0].split(' — ')[0]})" if pv.examples else ""
        raise UsageError(f"{', '.join(paths)} is not a {declared.display} export{detail}: give {declared.export}")


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(backfill)
