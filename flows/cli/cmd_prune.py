"""`transcripts prune`: plan (no lock, no Prefect) or, with --write, remove old gone sessions by family."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from extractors.registry import parse_agent
from flows.cli.console import Config, DataDir, Json, UsageError, Wait, console, count, print_json, reported, split_list
from flows.etl.settings import load_settings

if TYPE_CHECKING:
    from sinks.prune import PrunePlan


def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="DURATION", help="Age past which a gone session may go: 48h, 30d, 12w, 6mo, 1y."
        ),
    ],
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent", metavar="AGENT[,AGENT]", help="Only these agents' sessions can go (comma list or repeated)."
        ),
    ] = None,
    write: Annotated[bool, typer.Option("--write", help="Remove them. Without --write: a dry run.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would go (the default).")] = False,
    data_dir: DataDir = None,
    wait: Wait = None,
    as_json: Json = False,
    config: Config = None,
) -> None:
    """Remove old sessions whose sources the agents deleted, whole families at a time (dry run by default).

    A family (a session, its subagents, compactions, forks) goes only when no member is recent or still present.
    """
    _prune(older_than, agent, write, dry_run, data_dir, wait, as_json, config)


@reported("prune")
def _prune(
    older_than: str,
    agent: list[str] | None,
    write: bool,
    dry_run: bool,
    data_dir: Path | None,
    wait: float | None,
    as_json: bool,
    config: Path | None,
) -> None:
    # Here: pyarrow, DuckDB and the sinks (~0.3 s) that `--help` and every other command do without.
    from flows.etl import prune as pruning
    from sinks.prune import DurationError, parse_duration

    if write and dry_run:
        raise UsageError("--write and --dry-run contradict each other; give one.")
    try:
        age = parse_duration(older_than)
        agents = sorted({parse_agent(a) for a in split_list(agent)}) if agent else None
    except (DurationError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    settings = load_settings(data_dir=data_dir, config=config, lock_wait=wait)
    if not (settings.data_dir / "parquet").is_symlink():
        if as_json:
            print_json({"outcome": "no_corpus", "data_dir": str(settings.data_dir), "written": False})
        else:
            console.print(f"No corpus yet in {settings.data_dir}; nothing to prune.", soft_wrap=True)
        return
    if not write:
        try:
            plan = pruning.preview_prune(settings, older_than=age, agents=agents)
        except OSError as exc:  # a run swapped versions and removed the one being read
            raise UsageError(f"the corpus changed while it was read ({exc}); try again.") from None
        _print_prune(plan, older_than, dry=True, as_json=as_json)
        if not plan.empty and not as_json:
            console.print("Run again with --write to remove them.")
        return
    report = pruning.run_prune(settings, older_than=age, agents=agents)
    _print_prune(report.plan, older_than, dry=False, as_json=as_json)


def _print_prune(plan: PrunePlan, older_than: str, *, dry: bool, as_json: bool, examples: int = 5) -> None:
    counts = plan.counts_by_agent()
    if as_json:
        doc: dict[str, Any] = {
            "outcome": "dry_run" if dry else "pruned",
            "written": not dry,
            "older_than": older_than,
            "cutoff": plan.cutoff.isoformat(),
            "agents": list(plan.agents) if plan.agents else None,
            "counts": counts,
            "sessions": sorted(m.session_id for family in plan.removed for m in family),
            "held_families": len(plan.held),
        }
        print_json(doc)
        return
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
            f"  {name}: {count(c['families_pruned'], 'family', 'families')}, "
            f"{count(c['sessions_pruned'], 'session')}, {count(c['turns_pruned'], 'turn')} {verb}; "
            f"{count(c['sources_forgotten'], 'gone source')} forgotten",
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
            f"  kept: {count(len(plan.held), 'family', 'families')} ({count(sessions, 'session')}) with old, gone "
            "sessions, held by a member that is recent, still present, or of an agent not chosen.",
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    app.command()(prune)
