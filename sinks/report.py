"""The HTML report: queries on the warehouse, Vega-Lite charts, and one self-contained file (every script inline).

Charts are Vega-Lite specs written here as plain data, with their rows inline; the Vega, Vega-Lite and
vega-embed JavaScript comes from `vl-convert-python`'s bundle, pasted into the page, so the file shows the same
offline, in a year, from an e-mail attachment: nothing is fetched when it is viewed. Per-day figures are grouped
by the days of the zone given (the report says which).
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import duckdb

from sinks import prices, readonly
from sinks.files import FILE_MODE
from sinks.warehouse import open_error, warehouse_path

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # an identifier only: never fetched
TOP = 15


class ReportError(Exception):
    """Something a person can fix (no warehouse yet, an unknown zone): the message says what."""


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the report: an id for its element, a title, a sentence on how to read it, the spec."""

    key: str
    title: str
    note: str
    spec: dict[str, Any]
    rows: int


@dataclass(slots=True)
class Report:
    """What the report shows: the figures at the top and the charts, in order."""

    timezone: str
    since: date | None
    generated_at: datetime
    summary: dict[str, Any] = field(default_factory=dict)
    charts: list[Chart] = field(default_factory=list)


# ---- queries -------------------------------------------------------------------------------------------------
# Every query takes $tz (the zone whose days group the figures) and $since (a first day in that zone, or NULL).

_DAY = "CAST(timezone($tz, {ts}) AS DATE)"
_SINCE = "($since IS NULL OR " + _DAY + " >= $since)"

ACTIVITY = f"""
    SELECT {_DAY.format(ts="timestamp")} AS day, agent,
           count(*) FILTER (WHERE role = 'user') AS prompts, count(*) FILTER (WHERE role = 'assistant') AS responses
    FROM turns WHERE {_SINCE.format(ts="timestamp")} GROUP BY ALL ORDER BY day, agent"""

MODEL_DAILY = """
    SELECT day, model, sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
           CAST(sum(computed_cost_usd) AS DOUBLE) AS cost_usd, bool_and(priced) AS priced
    FROM (SELECT day, coalesce(model, '(unknown)') AS model, coalesce(input_tokens, 0) AS input_tokens,
                 coalesce(output_tokens, 0) AS output_tokens, coalesce(cache_read_tokens, 0) AS cache_read_tokens,
                 coalesce(cache_write_tokens, 0) AS cache_write_tokens, computed_cost_usd, priced
          FROM cost_daily_in($tz) WHERE $since IS NULL OR day >= $since)
    GROUP BY ALL ORDER BY day, model"""

TOOLS = f"""
    SELECT tool_name AS tool, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
           count(*) FILTER (WHERE is_error) / count(*) AS error_rate,
           string_agg(DISTINCT t.agent, ', ' ORDER BY t.agent) AS agents
    FROM tool_calls t JOIN sessions s USING (session_id)
    WHERE {_SINCE.format(ts="coalesce(t.started_at, s.started_at)")}
    GROUP BY tool_name ORDER BY calls DESC, tool LIMIT {TOP}"""

LONGEST = f"""
    SELECT session_id, agent, coalesce(title, cwd, session_id) AS label, cwd,
           round(epoch(ended_at - started_at) / 60.0, 1) AS minutes, turn_count AS turns,
           strftime(timezone($tz, started_at), '%Y-%m-%d %H:%M') AS started
    FROM sessions WHERE ended_at IS NOT NULL AND {_SINCE.format(ts="started_at")}
    ORDER BY minutes DESC, session_id LIMIT 10"""

PROJECTS = f"""
    SELECT coalesce(cwd, '(unknown)') AS project, count(*) AS sessions, sum(user_turn_count) AS prompts,
           sum(assistant_turn_count) AS responses, sum(tool_call_count) AS tool_calls,
           string_agg(DISTINCT agent, ', ' ORDER BY agent) AS agents
    FROM sessions WHERE {_SINCE.format(ts="started_at")}
    GROUP BY ALL ORDER BY prompts + responses DESC, sessions DESC, project LIMIT {TOP}"""

SUMMARY = f"""
    SELECT count(*) AS sessions, coalesce(sum(user_turn_count), 0) AS prompts,
           coalesce(sum(assistant_turn_count), 0) AS responses, coalesce(sum(tool_call_count), 0) AS tool_calls,
           min(started_at) AS first_session, max(coalesce(ended_at, started_at)) AS last_activity
    FROM sessions WHERE {_SINCE.format(ts="started_at")}"""

COSTS = """
    SELECT count(*) AS responses, count(*) FILTER (WHERE NOT priced) AS unpriced_responses,
           CAST(sum(computed_cost_usd) AS DOUBLE) AS computed_cost_usd,
           CAST(sum(reported_cost_usd) AS DOUBLE) AS reported_cost_usd,
           coalesce(sum(prompt_tokens + coalesce(billed_output_tokens, 0)), 0) AS tokens
    FROM usage_costs WHERE $since IS NULL OR CAST(timezone($tz, timestamp) AS DATE) >= $since"""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    rel = con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    columns = [d[0] for d in rel.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in rel.fetchall()]


def build(con: duckdb.DuckDBPyConnection, *, timezone: str, since: date | None, now: datetime) -> Report:
    """Run the report's queries on an open warehouse. Raises ReportError for an unknown zone."""
    params = {"tz": timezone, "since": since}
    try:
        con.execute("SELECT timezone($tz, TIMESTAMPTZ '2026-01-01 00:00:00+00')", {"tz": timezone})
    except duckdb.Error:
        raise ReportError(f"unknown time zone {timezone!r} (use an IANA name such as Europe/Berlin or UTC)") from None
    report = Report(timezone=timezone, since=since, generated_at=now)
    summary = _rows(con, SUMMARY, params)[0]
    summary.update(_rows(con, COSTS, params)[0])
    report.summary = summary
    report.charts = [
        _activity(_rows(con, ACTIVITY, params), timezone),
        *_models(_rows(con, MODEL_DAILY, params), timezone),
        _tools(_rows(con, TOOLS, params)),
        _longest(_rows(con, LONGEST, params)),
        _projects(_rows(con, PROJECTS, params)),
    ]
    return report


# ---- charts --------------------------------------------------------------------------------------------------


def _spec(rows: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "data": {"values": [_jsonable(r) for r in rows]},
        "config": {"view": {"stroke": None}, "axis": {"labelLimit": 320}},
        **spec,
    }


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, date | datetime) else v for k, v in row.items()}


def _day_axis(timezone: str) -> dict[str, Any]:
    # Days are calendar dates already grouped in the report's zone; read them as UTC so a viewer's own zone
    # never shifts a bar to the day before.
    return {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate", "title": f"day ({timezone})"}


def _activity(rows: list[dict[str, Any]], timezone: str) -> Chart:
    long = [
        {"day": r["day"], "agent": r["agent"], "kind": kind, "turns": r[kind]}
        for r in rows
        for kind in ("prompts", "responses")
    ]
    spec = _spec(
        long,
        height=220,
        mark={"type": "bar", "tooltip": True},
        encoding={
            "x": _day_axis(timezone),
            "y": {"aggregate": "sum", "field": "turns", "type": "quantitative", "title": "turns"},
            "color": {"field": "agent", "type": "nominal"},
            "tooltip": [
                {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate"},
                {"field": "agent"},
                {"field": "kind"},
                {"field": "turns", "type": "quantitative"},
            ],
        },
    )
    return Chart(
        "activity", "Activity per day", "Turns (your prompts and the models' responses) per agent.", spec, len(rows)
    )


def _models(rows: list[dict[str, Any]], timezone: str) -> list[Chart]:
    tokens = _spec(
        rows,
        height=220,
        mark={"type": "bar", "tooltip": True},
        encoding={
            "x": _day_axis(timezone),
            "y": {"aggregate": "sum", "field": "tokens", "type": "quantitative", "title": "tokens"},
            "color": {"field": "model", "type": "nominal"},
            "tooltip": [
                {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate"},
                {"field": "model"},
                {"field": "input_tokens", "type": "quantitative", "format": ","},
                {"field": "cache_read_tokens", "type": "quantitative", "format": ","},
                {"field": "cache_write_tokens", "type": "quantitative", "format": ","},
                {"field": "output_tokens", "type": "quantitative", "format": ","},
            ],
        },
    )
    priced = [r for r in rows if r["cost_usd"] is not None]
    cost = _spec(
        priced,
        height=220,
        mark={"type": "bar", "tooltip": True},
        encoding={
            "x": _day_axis(timezone),
            "y": {"aggregate": "sum", "field": "cost_usd", "type": "quantitative", "title": "USD (computed)"},
            "color": {"field": "model", "type": "nominal"},
            "tooltip": [
                {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate"},
                {"field": "model"},
                {"field": "cost_usd", "type": "quantitative", "format": "$.4f"},
                {"field": "priced", "type": "nominal", "title": "every response priced"},
            ],
        },
    )
    return [
        Chart(
            "tokens",
            "Tokens per model",
            "Prompt (uncached, cache read, cache write) and output tokens.",
            tokens,
            len(rows),
        ),
        Chart(
            "cost",
            "Cost per model",
            "Computed from genai-prices' dated prices; models without a price are left out (see the figures above).",
            cost,
            len(priced),
        ),
    ]


def _tools(rows: list[dict[str, Any]]) -> Chart:
    spec = _spec(
        rows,
        height={"step": 22},
        mark={"type": "bar", "tooltip": True},
        encoding={
            "y": {"field": "tool", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "field": "calls",
                "type": "quantitative",
                "title": "calls",
                "axis": {"tickMinStep": 1, "format": "d"},
            },
            "color": {
                "field": "error_rate",
                "type": "quantitative",
                "title": "error rate",
                "scale": {"domain": [0, 1], "scheme": "orangered"},
                "legend": {"format": ".0%"},
            },
            "tooltip": [
                {"field": "tool"},
                {"field": "agents"},
                {"field": "calls", "type": "quantitative"},
                {"field": "errors", "type": "quantitative"},
                {"field": "error_rate", "type": "quantitative", "format": ".1%"},
            ],
        },
    )
    return Chart(
        "tools",
        "Top tools",
        f"The {TOP} most called tools; the colour is the share of calls that failed.",
        spec,
        len(rows),
    )


def _longest(rows: list[dict[str, Any]]) -> Chart:
    seen: set[str] = set()
    for r in rows:
        # The label is the y axis' key: two untitled sessions in one folder must not become one bar.
        label = f"{r['started']}  {_clip(str(r['label']), 50)}"
        while label in seen:
            label += " "
        seen.add(label)
        r["label"] = label
    spec = _spec(
        rows,
        height={"step": 22},
        mark={"type": "bar", "tooltip": True},
        encoding={
            "y": {"field": "label", "type": "nominal", "sort": "-x", "title": None},
            "x": {"field": "minutes", "type": "quantitative", "title": "minutes from first to last record"},
            "color": {"field": "agent", "type": "nominal"},
            "tooltip": [
                {"field": "session_id"},
                {"field": "cwd"},
                {"field": "started"},
                {"field": "minutes", "type": "quantitative"},
                {"field": "turns", "type": "quantitative"},
            ],
        },
    )
    return Chart(
        "longest", "Longest sessions", "Wall-clock length; subagents are sessions of their own.", spec, len(rows)
    )


def _projects(rows: list[dict[str, Any]]) -> Chart:
    long = [
        {
            "project": _clip(str(r["project"]), 60),
            "kind": kind,
            "turns": r[kind] or 0,
            "sessions": r["sessions"],
            "agents": r["agents"],
        }
        for r in rows
        for kind in ("prompts", "responses")
    ]
    spec = _spec(
        long,
        height={"step": 22},
        mark={"type": "bar", "tooltip": True},
        encoding={
            "y": {"field": "project", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "aggregate": "sum",
                "field": "turns",
                "type": "quantitative",
                "title": "turns",
                "axis": {"tickMinStep": 1, "format": "d"},
            },
            "color": {"field": "kind", "type": "nominal"},
            "tooltip": [
                {"field": "project"},
                {"field": "agents"},
                {"field": "sessions", "type": "quantitative"},
                {"field": "kind"},
                {"field": "turns", "type": "quantitative"},
            ],
        },
    )
    return Chart("projects", "Busiest projects", "Turns per working directory.", spec, len(rows))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


# ---- the file ------------------------------------------------------------------------------------------------


@cache
def _bundle() -> str:
    import vl_convert

    # Pasted into a <script>: a closing tag inside would end it early (the bundle has none today; be sure).
    return str(vl_convert.javascript_bundle("window.vegaEmbed = vegaEmbed;")).replace("</script", "<\\/script")


def _template() -> Template:
    return Template(files("sinks").joinpath("report_template.html").read_text(encoding="utf-8"))


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.2f}" if abs(value) >= 1 or value == 0 else f"${value:,.4f}"  # cents hide small sums


def _summary_html(report: Report) -> str:
    s = report.summary
    unpriced, responses = int(s["unpriced_responses"] or 0), int(s["responses"] or 0)
    share = f"{unpriced / responses:.0%}" if responses else "0%"
    cells = [
        ("sessions", f"{s['sessions']:,}"),
        ("prompts", f"{s['prompts']:,}"),
        ("responses", f"{s['responses']:,}"),
        ("tool calls", f"{s['tool_calls']:,}"),
        ("tokens", f"{int(s['tokens']):,}"),
        ("computed cost", _money(s["computed_cost_usd"])),
        ("unpriced responses", f"{unpriced:,} of {responses:,} ({share})"),
        ("cost the agents reported", _money(s["reported_cost_usd"])),
    ]
    models = [m or "(no model)" for m in s.get("unpriced_models", [])]
    if models:
        cells.append(("models without a price", ", ".join(models[:8]) + (" …" if len(models) > 8 else "")))
    return "\n".join(
        f'<div class="figure"><span class="value">{html.escape(v)}</span>'
        f'<span class="label">{html.escape(k)}</span></div>'
        for k, v in cells
    )


def render(report: Report) -> str:
    """The report as one HTML document with every script and style inline."""
    specs = {c.key: c.spec for c in report.charts if c.rows}
    sections = []
    for chart in report.charts:
        body = (
            f'<div class="chart" id="chart-{chart.key}" data-chart="{chart.key}"></div>'
            if chart.rows
            else '<p class="empty">No data for this period.</p>'
        )
        sections.append(
            f'<section><h2>{html.escape(chart.title)}</h2><p class="note">{html.escape(chart.note)}</p>{body}</section>'
        )
    since = f" since {report.since.isoformat()}" if report.since else ""
    return _template().substitute(
        title="Agent transcripts report",
        subtitle=html.escape(
            f"Generated {report.generated_at:%Y-%m-%d %H:%M %Z}{since}; days are in {report.timezone}."
        ),
        summary=_summary_html(report),
        sections="\n".join(sections),
        bundle=_bundle(),
        # JSON inside <script>: `</` written as `<\/` so no value can close the element.
        specs=json.dumps(specs, sort_keys=True, default=str).replace("</", "<\\/"),
    )


def write(data_dir: Path, out: Path, *, timezone: str, since: date | None, now: datetime) -> Report:
    """Build the report from the warehouse under `data_dir` and write it to `out` (0600: transcripts are private).

    Raises ReportError when there is no warehouse yet or the zone is unknown.
    """
    path = warehouse_path(data_dir)
    if not path.exists():
        raise ReportError(f"no warehouse in {data_dir}: run `transcripts run` first")
    try:
        con = readonly.connect(path)
    except duckdb.Error as exc:
        raise ReportError(str(open_error(exc, path))) from None
    try:
        if not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'usage_costs'").fetchone() == (1,):
            raise ReportError(f"the warehouse in {data_dir} predates cost views: run `transcripts run` once")
        return write_from(con, out, timezone=timezone, since=since, now=now)
    finally:
        con.close()


def write_from(
    con: duckdb.DuckDBPyConnection, out: Path, *, timezone: str, since: date | None, now: datetime
) -> Report:
    """`write` from an open connection with the warehouse's tables and views (a team's corpus: sinks/team.py)."""
    report = build(con, timezone=timezone, since=since, now=now)
    unpriced = prices.unpriced(con)
    report.summary["unpriced_models"] = [m for _, m, _ in unpriced.models]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(render(report), encoding="utf-8")
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, out)
    return report
