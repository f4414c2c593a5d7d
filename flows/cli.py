"""The `transcripts` command: a thin layer that turns results and errors into messages and exit codes."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from flows.server import ServerError, prefect_api
from flows.settings import PROJECT_DIR, Settings, SettingsError, load_settings
from sinks.lock import LockBusy

if TYPE_CHECKING:
    from sinks.prune import PrunePlan

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Agent transcripts -> Parquet + DuckDB.")
console = Console(stderr=False)
err = Console(stderr=True)

SAMPLE_HOME = PROJECT_DIR / "data" / "sample" / "home"

DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Where the corpus lives (default: data/).")]
Config = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
NoRedact = Annotated[
    bool, typer.Option("--no-redact", help="Store text as it is: secrets are not redacted (re-derives the corpus).")
]


def _quiet_prefect() -> None:
    """Prefect settings for a quiet, robust run without a server (each can be overridden in the environment)."""
    for key, value in {
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        "PREFECT_LOGGING_TO_API_ENABLED": "false",
    }.items():
        os.environ.setdefault(key, value)


def _settings(**kwargs: Any) -> Settings:
    try:
        return load_settings(**kwargs)
    except SettingsError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


@contextlib.contextmanager
def _reporting_failures(what: str) -> Iterator[None]:
    """Turn the failures a person can act on into a message and an exit code (1 failed, 3 busy)."""
    try:
        yield
    except LockBusy as exc:
        err.print(f"[red]busy:[/red] {exc}")
        raise typer.Exit(3) from None
    except ServerError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    except OSError as exc:
        where = getattr(exc, "filename", None)
        err.print(
            f"[red]{what} failed:[/red] {exc.strerror or exc}{f' ({where})' if where else ''}; "
            "the previous corpus is intact."
        )
        raise typer.Exit(1) from None


def _structured_logs() -> None:
    """Send our `event=...` lines to stderr (once per command: a handler from an earlier call is replaced)."""
    import logging

    ours = logging.getLogger("transcripts")  # Prefect configures the root logger; ours stays independent
    for old in [h for h in ours.handlers if getattr(h, "transcripts_cli", False)]:
        ours.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.transcripts_cli = True  # type: ignore[attr-defined]
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


@app.command()
def run(
    source: Annotated[list[str] | None, typer.Option("--source", help="Only these agents (repeatable).")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Resolve default locations under this home.")] = None,
    root: Annotated[list[str] | None, typer.Option("--root", help="AGENT=PATH: read AGENT from PATH.")] = None,
    data_dir: DataDir = None,
    full: Annotated[bool, typer.Option("--full", help="Re-read every source, changed or not.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what a run would do; write nothing.")] = False,
    sample: Annotated[bool, typer.Option("--sample", help="Load the sample corpus shipped in data/sample.")] = False,
    wait: Annotated[float | None, typer.Option("--wait", help="Seconds to wait for another run.")] = None,
    no_redact: NoRedact = False,
    config: Config = None,
) -> None:
    """Discover new and changed sessions and load them into the corpus."""
    if sample:
        home = SAMPLE_HOME
    options: dict[str, Any] = {
        "data_dir": data_dir,
        "home": home,
        "sources": source or [],
        "roots": root or [],
        "config": config,
        "lock_wait": wait,
        "redact": False if no_redact else None,  # None: the setting decides
    }
    settings = _settings(**options)
    from extractors.registry import extractor
    from flows import pipeline

    explicit_only = [a for a in settings.agents if not extractor(a).NIGHTLY and a not in settings.explicit_roots]
    for agent in explicit_only:
        console.print(f"{agent} is not discovered by `run`: load it with `transcripts backfill {agent} PATH`.")
    found = pipeline.discover(settings)
    if not found.scanned:
        looked = [p for paths in found.missing_roots.values() for p in paths]
        if looked:
            console.print("No agent data found. Looked in:")
            for path in looked:
                console.print(f"  {path} (not there)")
        console.print("Nothing to load. Point at data with --home DIR or --root AGENT=PATH, or try --sample.")
        return
    if dry_run:
        _dry_run(settings, full)
        return
    _quiet_prefect()
    from flows import etl

    progress = None
    if sys.stdout.isatty():
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        bar = progress.add_task("loading", total=None)

        def hook(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        etl.progress_hook = hook
        progress.start()
    else:  # cron, systemd, a pipe: one structured line per step instead of a bar
        _structured_logs()
    try:
        options["data_dir"] = settings.data_dir
        with _reporting_failures("run"), prefect_api():
            report = etl.etl_flow(options, full=full)
    finally:
        if progress is not None:
            progress.stop()
    _print_report(report)


def _dry_run(settings: Settings, full: bool) -> None:
    from flows import pipeline
    from sinks.store import Store

    _, plan = pipeline.plan_run(settings, Store(settings.data_dir), full=full)
    table = Table(title="Dry run: what a run would do (nothing written)")
    for col in ("agent", "new", "changed", "unchanged", "deleted", "to read"):
        table.add_column(col, justify="right" if col != "agent" else "left")
    for agent, c in pipeline.plan_counts(plan).items():
        table.add_row(
            agent, str(c["new"]), str(c["changed"]), str(c["unchanged"]), str(c["deleted"]), _human_bytes(c["bytes"])
        )
    console.print(table)


def _print_report(report: Any) -> None:
    c = report.committed
    rows = report.plan_counts
    found = sum(v["new"] + v["changed"] + v["unchanged"] for v in rows.values())
    unchanged = sum(v["unchanged"] for v in rows.values())
    console.print(
        f"sources found {found} · loaded {c.sessions_loaded} sessions · unchanged {unchanged} · "
        f"rejected {c.sessions_rejected} · deferred {c.sources_deferred} · turns {c.turns_loaded} · "
        f"{_human_bytes(c.bytes_read)} read · {report.seconds:.1f}s"
    )
    for agent, counts in c.counts_by_agent.items():
        parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
        console.print(f"  {agent}: {parts}")
    if c.new_rejections:
        console.print(f"[yellow]{c.new_rejections} new rejection(s): see `transcripts status`[/yellow]")
    if not getattr(report, "redacted", True):
        console.print("[yellow]redaction is off: this corpus holds unredacted text (secrets as they were)[/yellow]")


@app.command()
def status(
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if the last run failed or found rejections.")] = False,
    config: Config = None,
) -> None:
    """Last runs, rows per table and agent, and every current rejection."""
    from flows.status import is_benign, read_status

    settings = _settings(data_dir=data_dir, config=config)
    st = read_status(settings.data_dir)
    problems = st.problems()
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "data_dir": st.data_dir,
                    "runs": st.runs,
                    "counts": st.counts,
                    "rejects": st.rejects,
                    "skipped": st.skipped,
                    "problems": problems,
                },
                default=str,
            )
        )
    elif not st.exists:
        console.print(f"No corpus yet in {st.data_dir}. Run `transcripts run` first.")
    else:
        runs = Table(title="Last runs")
        for col in (
            "started",
            "mode",
            "outcome",
            "seen",
            "new",
            "changed",
            "deleted",
            "loaded",
            "rejected",
            "deferred",
            "turns",
        ):
            runs.add_column(col)
        for r in st.runs:
            runs.add_row(
                str(r["started_at"])[:19],
                r["mode"],
                r["outcome"],
                str(r["sources_seen"]),
                str(r["sources_new"]),
                str(r["sources_changed"]),
                str(r["sources_deleted"]),
                str(r["sessions_loaded"]),
                str(r["sessions_rejected"]),
                str(r["sources_deferred"]),
                str(r["turns_loaded"]),
            )
        console.print(runs)
        counts = Table(title="Rows per table and agent")
        agents = sorted({a for per in st.counts.values() for a in per if a})
        counts.add_column("table")
        for a in agents:
            counts.add_column(a, justify="right")
        for name, per in st.counts.items():
            if "" in per:
                counts.add_row(name, *[str(per[""]) if i == 0 else "" for i in range(len(agents))])
            else:
                counts.add_row(name, *[str(per.get(a, 0)) for a in agents])
        console.print(counts)
        if st.rejects:
            rej = Table(title="Current rejections and deferrals")
            for col in ("agent", "outcome", "code", "source", "session", "line", "detail"):
                rej.add_column(col, overflow="fold")
            for r in st.rejects:
                code = r["reason_code"] + (" (benign)" if is_benign(r["reason_code"]) else "")
                src = r["source_path"] + ("" if r["source_present"] else " [gone]")
                rej.add_row(
                    r["agent"],
                    r["outcome"],
                    code,
                    src,
                    r["session_id"] or "",
                    "" if r["line"] is None else str(r["line"]),
                    r["detail"],
                )
            console.print(rej)
        else:
            console.print("No current rejections.")
        if st.skipped:
            skipped = Table(title="Skipped records (not conversation), most frequent kinds")
            for col in ("agent", "record kind", "writer version", "records", "sessions"):
                skipped.add_column(col)
            for r in st.skipped:
                skipped.add_row(
                    r["agent"], r["record_kind"], r["writer_version"], str(r["records"]), str(r["sessions"])
                )
            console.print(skipped)
        for p in problems:
            console.print(f"[red]check:[/red] {p}")
    if check and problems:
        raise typer.Exit(1)


@app.command()
def prune(
    older_than: Annotated[
        str, typer.Option("--older-than", help="Age past which a gone session may go: 48h, 30d, 12w, 6m, 1y.")
    ],
    agent: Annotated[list[str] | None, typer.Option("--agent", help="Only these agents' sessions can go.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Remove them. Without --write: a dry run.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would go (the default).")] = False,
    data_dir: DataDir = None,
    wait: Annotated[float | None, typer.Option("--wait", help="Seconds to wait for another run.")] = None,
    config: Config = None,
) -> None:
    """Remove old sessions whose sources the agents deleted, whole families at a time (dry run by default).

    A family (a session, its subagents, compactions, forks) goes only when no member is recent or still present.
    """
    from extractors.registry import parse_agent
    from flows import pipeline
    from flows import prune as pruning
    from sinks.prune import DurationError, parse_duration

    if write and dry_run:
        err.print("[red]error:[/red] --write and --dry-run contradict each other; give one.")
        raise typer.Exit(2)
    try:
        age = parse_duration(older_than)
        agents = sorted({parse_agent(a).value for a in agent}) if agent else None
    except (DurationError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    settings = _settings(data_dir=data_dir, config=config, lock_wait=wait)
    if not pipeline.data_dir_exists(settings.data_dir):
        console.print(f"No corpus yet in {settings.data_dir}; nothing to prune.")
        return
    if not write:
        try:
            plan = pruning.preview_prune(settings, older_than=age, agents=agents)
        except OSError as exc:  # a run swapped versions and removed the one being read
            err.print(f"[red]error:[/red] the corpus changed while it was read ({exc}); try again.")
            raise typer.Exit(1) from None
        _print_prune(plan, older_than, dry=True)
        if not plan.empty:
            console.print("Run again with --write to remove them.")
        return
    with _reporting_failures("prune"):
        report = pruning.run_prune(settings, older_than=age, agents=agents)
    _print_prune(report.plan, older_than, dry=False)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _print_prune(plan: PrunePlan, older_than: str, *, dry: bool, examples: int = 5) -> None:
    counts = plan.counts_by_agent()
    verb = "would go" if dry else "removed"
    head = "Dry run (nothing written)" if dry else "Pruned"
    scope = f" of {', '.join(plan.agents)}" if plan.agents else ""
    console.print(
        f"{head}: sessions{scope} older than {older_than} (last activity before {plan.cutoff:%Y-%m-%d %H:%M} UTC) "
        "whose sources are gone, with every session linked to them.",
        soft_wrap=True,
    )
    if plan.empty:
        console.print("  Nothing to prune.")
    for name, c in counts.items():
        console.print(
            f"  {name}: {_count(c['families_pruned'], 'family', 'families')}, "
            f"{_count(c['sessions_pruned'], 'session')}, {_count(c['turns_pruned'], 'turn')} {verb}; "
            f"{_count(c['sources_forgotten'], 'gone source')} forgotten",
            soft_wrap=True,
        )
        members = sorted((m for family in plan.removed for m in family if m.agent == name), key=lambda m: m.last_at)
        for m in members[:examples]:
            console.print(f"    {m.session_id}  {m.last_at:%Y-%m-%d}", soft_wrap=True)
        if len(members) > examples:
            console.print(f"    ... and {len(members) - examples} more")
    if plan.held:
        sessions = sum(len(f) for f in plan.held)
        console.print(
            f"  kept: {_count(len(plan.held), 'family', 'families')} ({_count(sessions, 'session')}) with old, gone "
            "sessions, held by a member that is recent, still present, or of an agent not chosen.",
            soft_wrap=True,
        )


@app.command()
def backfill(
    target: Annotated[list[str], typer.Argument(help="[FORMAT] PATH...: e.g. `chatgpt ~/Downloads/export.zip`.")],
    write: Annotated[bool, typer.Option("--write", help="Load it. Without --write: a dry run.")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="The format, whatever the path says.")] = None,
    full: Annotated[bool, typer.Option("--full", help="Read it again even if unchanged.")] = False,
    data_dir: DataDir = None,
    wait: Annotated[float | None, typer.Option("--wait", help="Seconds to wait for another run.")] = None,
    no_redact: NoRedact = False,
    config: Config = None,
) -> None:
    """Load an explicitly given source, such as a ChatGPT export (.zip or conversations.json)."""
    from extractors.registry import detect_format, parse_agent
    from flows import pipeline

    paths = list(target)
    named = None
    if len(paths) > 1:
        try:
            named = parse_agent(paths[0])
            paths = paths[1:]
        except ValueError:
            named = None
    try:
        agents = {detect_format(Path(p), fmt or (named.value if named else None)) for p in paths}
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if len(agents) != 1:
        err.print("[red]error:[/red] these paths are of different formats; give one format at a time (--format).")
        raise typer.Exit(2)
    agent = agents.pop()
    settings = _settings(data_dir=data_dir, config=config, lock_wait=wait)
    try:
        found = pipeline.explicit_sources(agent, [Path(p) for p in paths])
    except FileNotFoundError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if not found.sources:
        err.print(f"[red]error:[/red] nothing to load at {', '.join(paths)} (looked for {agent} sources).")
        raise typer.Exit(2)
    if not write:
        pv = pipeline.preview(found, settings)
        span = f"{pv.first:%Y-%m-%d} to {pv.last:%Y-%m-%d}" if pv.first and pv.last else "no dates"
        console.print(f"Dry run ({agent}, nothing written): {pv.sources} source(s), {_human_bytes(pv.bytes)}")
        console.print(f"  would load {pv.sessions} sessions, {pv.turns} turns, {pv.tool_calls} tool calls, {span}")
        rejected = ", ".join(f"{code} {n}" for code, n in sorted(pv.rejected.items())) or "none"
        console.print(f"  rejections: {rejected}; deferred sources: {pv.deferred}")
        for line in pv.examples:
            console.print(f"    {line}")
        console.print("Run again with --write to load it.")
        return
    _quiet_prefect()
    _structured_logs()
    from flows import etl

    with _reporting_failures("backfill"), prefect_api():
        report = etl.backfill_flow(
            {
                "data_dir": settings.data_dir,
                "config": config,
                "lock_wait": wait,
                "redact": False if no_redact else None,
            },
            agent.value,
            [s.path for s in found.sources],
            full=full,
        )
    _print_report(report)


@app.command()
def schedule(
    cron: Annotated[str | None, typer.Option("--cron", help="Cron expression (default: 0 3 * * *).")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", help="IANA time zone (default: the server's).")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Only these agents (repeatable).")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Resolve default locations under this home.")] = None,
    root: Annotated[list[str] | None, typer.Option("--root", help="AGENT=PATH: read AGENT from PATH.")] = None,
    data_dir: DataDir = None,
    config: Config = None,
) -> None:
    """Serve the nightly run on a cron through a running Prefect server (Ctrl-C stops serving)."""
    import dataclasses

    from flows.schedule import NO_SERVER, configured_api, serve_arguments

    options: dict[str, Any] = {
        "data_dir": data_dir,
        "home": home,
        "sources": source or [],
        "roots": root or [],
        "config": config,
    }
    settings = _settings(**options)
    settings = dataclasses.replace(
        settings, schedule_cron=cron or settings.schedule_cron, schedule_timezone=timezone or settings.schedule_timezone
    )
    options["data_dir"] = settings.data_dir
    _quiet_prefect()
    if configured_api() is None:
        err.print(f"[red]error:[/red] {NO_SERVER}")
        raise typer.Exit(2)
    from flows import etl

    where = f" ({settings.schedule_timezone})" if settings.schedule_timezone else ""
    console.print(f"Serving the nightly run at '{settings.schedule_cron}'{where} into {settings.data_dir}.")
    etl.etl_flow.serve(**serve_arguments(settings, options))


def main() -> None:
    from flows.server import exit_on_sigterm

    exit_on_sigterm()
    app()
