"""`transcripts status`: readable at 80 columns, from the ledger (fast, no DuckDB), with `--check` for monitoring."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from extractors.registry import agents as known_agents
from flows.cli.cmd_data import check_old_corpus
from flows.cli.console import FAILED, Config, DataDir, Json, UsageError, console, count, print_json, reported
from flows.etl.settings import load_settings
from flows.etl.status import read_status, rejected_label

if TYPE_CHECKING:
    from flows.etl.status import Status

BENIGN = ("no_conversation", "duplicate")


def status(
    data_dir: DataDir = None,
    as_json: Json = False,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if there is no corpus, or the last run failed or found rejections.")
    ] = False,
    rejections: Annotated[
        bool, typer.Option("--rejections", help="List every rejection and deferral, benign ones included.")
    ] = False,
    utc: Annotated[bool, typer.Option("--utc", help="Show times in UTC (default: local time).")] = False,
    runs: Annotated[int, typer.Option("--runs", min=1, metavar="N", help="How many of the last runs to show.")] = 5,
    config: Config = None,
) -> None:
    """The last runs, the corpus per agent, and rejections by reason code."""
    _status(data_dir, as_json, check, rejections, utc, runs, config)


@reported("status")
def _status(
    data_dir: Path | None, as_json: bool, check: bool, rejections: bool, utc: bool, runs: int, config: Path | None
) -> None:
    settings = load_settings(data_dir=data_dir, config=config)
    check_old_corpus(settings, refuse=False)  # a corpus left in a checkout: where it is, and the command moving it
    if settings.data_dir.exists() and not settings.data_dir.is_dir():
        raise UsageError(f"data dir {settings.data_dir} is a file, not a folder")
    st = read_status(settings.data_dir, last_runs=runs, details=rejections)
    problems = st.problems()
    if as_json:
        print_json(st.as_json())
    elif not st.exists:
        console.print(f"No corpus in {st.data_dir} (nothing there yet). Run `transcripts run` first.", soft_wrap=True)
    else:
        _print(st, utc=utc, rejections=rejections)
        if st.unreadable and not check:
            console.print(f"warehouse: {st.unreadable}", soft_wrap=True, highlight=False)
    if check:
        for p in problems:
            if not as_json:
                console.print(f"check: {p}", soft_wrap=True, highlight=False)
        if problems:
            raise typer.Exit(FAILED)


def _when(value: Any, utc: bool) -> str:
    if not value:
        return "?"
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)[:19]
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC) if utc else moment.astimezone()
    return f"{moment:%Y-%m-%d %H:%M} {moment.tzname() or ''}".rstrip()


def _what(r: dict[str, Any]) -> str:
    if r["outcome"] in ("failed", "interrupted", "busy"):
        return (r.get("error") or "")[:60]
    if r["outcome"] == "running":
        return "still going"
    if r["outcome"] == "noop":
        return f"{r['sources_seen']} seen, nothing new"
    bits = [f"{r['sessions_loaded']} loaded"]
    if r["sessions_rejected"]:
        bits.append(rejected_label(r["sessions_rejected"], r.get("new_rejections", 0), "{} rejected"))
    if r["sources_deferred"]:
        bits.append(f"{r['sources_deferred']} deferred")
    bits.append(f"{r['turns_loaded']} turns")
    return ", ".join(bits)


def _run_line(r: dict[str, Any], utc: bool) -> str:
    return f"  {_when(r.get('started_at'), utc):<22} {r.get('flow', '?'):<8} {r['outcome']:<11} {_what(r)}"


def _print(st: Status, *, utc: bool, rejections: bool) -> None:
    say = console.print
    say(f"Corpus in {st.data_dir}", soft_wrap=True, highlight=False)
    say("Last runs:", highlight=False)
    for r in st.runs:
        say(_run_line(r, utc), soft_wrap=True, highlight=False)
    if st.last_loaded is not None:
        say("Last run that loaded something:", highlight=False)
        say(_run_line(st.last_loaded, utc), soft_wrap=True, highlight=False)
    # Every source the reader knows, in its order, so one with nothing loaded shows as 0 rather than as absent;
    # then any other agent partition in the corpus (written by another version), by name.
    seen = {a for per in st.counts.values() for a in per if a}
    agents = [*known_agents(), *sorted(seen - set(known_agents()))]
    if seen:
        say("", highlight=False)
        say(f"  {'agent':<10}{'sessions':>10}{'turns':>10}{'tool calls':>12}{'rejected':>10}{'deferred':>10}")
        for a in agents:
            # Every rejection, benign ones too, as the run summary and `Last runs` count them; the lines below
            # split them by reason, benign apart.
            rej = sum(r["count"] for r in st.rejections if r["agent"] == a and r["outcome"] == "rejected")
            dfr = sum(r["count"] for r in st.rejections if r["agent"] == a and r["outcome"] == "deferred")
            c = {t: st.counts.get(t, {}).get(a, 0) for t in ("sessions", "turns", "tool_calls")}
            say(
                f"  {a:<10}{c['sessions']:>10}{c['turns']:>10}{c['tool_calls']:>12}{rej:>10}{dfr:>10}",
                highlight=False,
            )
    by_code: dict[str, int] = {}
    benign: dict[str, int] = {}
    for r in st.rejections:
        target = benign if r["reason_code"] in BENIGN else by_code
        key = r["reason_code"] if r["outcome"] == "rejected" else f"{r['reason_code']} (deferred)"
        target[key] = target.get(key, 0) + int(r["count"])
    say("", highlight=False)
    if by_code:
        say("Rejections by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(by_code.items())), soft_wrap=True)
        # and per agent, so that a new version of one agent's format shows as that agent's number
        for agent, codes in _per_agent(st.rejections).items():
            say(f"  {agent}: " + ", ".join(f"{k} {v}" for k, v in sorted(codes.items())), soft_wrap=True)
    else:
        say("No current rejections.", highlight=False)
    if benign:
        say("Benign (not errors): " + ", ".join(f"{k} {v}" for k, v in sorted(benign.items())), highlight=False)
    if (by_code or benign) and not rejections:
        say("  `transcripts status --rejections` lists every one with its source.", highlight=False)
    for line in _audit_lines(st.audit):
        say(line, soft_wrap=True, highlight=False)
    if rejections and st.rejects is not None:
        _print_rejects(st)
    zone = "UTC" if utc else "local time (--utc for UTC)"
    say(f"Times in {zone}.", highlight=False)


def _per_agent(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The rejections that are not benign, by agent (in the readers' order) and reason code."""
    order = {str(a): n for n, a in enumerate(known_agents())}
    found: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["reason_code"] in BENIGN:
            continue
        key = r["reason_code"] if r["outcome"] == "rejected" else f"{r['reason_code']} (deferred)"
        codes = found.setdefault(str(r["agent"]), {})
        codes[key] = codes.get(key, 0) + int(r["count"])
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def _audit_lines(audit: dict[str, Any]) -> list[str]:
    """Reader bugs, secrets redacted, text stored raw and unpriced usage, as of the last load."""
    lines = []
    if audit.get("reader_bugs"):
        lines.append(
            f"Reader bugs: {count(audit['reader_bugs'], 'source')} rejected as `unexpected ...` (a bug to report)"
        )
    redaction = audit.get("redaction")
    if redaction:
        per_rule: dict[str, int] = {}
        for r in redaction.get("redacted", []):
            per_rule[r["rule"]] = per_rule.get(r["rule"], 0) + int(r["count"])
        top = ", ".join(f"{rule} {n}" for rule, n in sorted(per_rule.items(), key=lambda x: (-x[1], x[0]))[:4])
        lines.append(f"Secrets redacted: {sum(per_rule.values())}" + (f" ({top})" if top else ""))
        raw = sum(v.get("unredacted", 0) for v in redaction.get("sessions", {}).values())
        if raw:
            lines.append(f"Unredacted: {count(raw, 'session')} hold text stored as it is (--no-redact)")
    unpriced = audit.get("unpriced")
    if unpriced and unpriced.get("responses"):
        lines.append(
            f"Unpriced usage: {unpriced['responses']} of {unpriced['total_responses']} responses (unknown model)"
        )
    return lines


def _print_rejects(st: Status) -> None:
    say = console.print
    say(f"Every rejection and deferral ({count(len(st.rejects or []), 'source')}):", highlight=False)
    for r in st.rejects or []:
        # `rejects.line` is the 0-based record index ids are built on; a person reads lines as an editor counts them.
        where = "" if r["line"] is None else f" line {r['line'] + 1}"
        gone = "" if r["source_present"] else " [source gone]"
        say(f"  {r['agent']} {r['outcome']} {r['reason_code']}: {r['source_path']}{where}{gone}", soft_wrap=True)
        if r["detail"]:
            say(f"    {r['detail']}", soft_wrap=True, highlight=False)
    if st.skipped:
        say("Skipped records (not conversation), most frequent kinds:", highlight=False)
        for r in st.skipped:
            say(
                f"  {r['agent']} {r['record_kind']} ({r['writer_version'] or '?'}): "
                f"{r['records']} records in {count(r['sessions'], 'session')}",
                soft_wrap=True,
                highlight=False,
            )


def register(app: typer.Typer) -> None:
    app.command()(status)
