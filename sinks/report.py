"""The HTML report: queries on the warehouse, Vega-Lite charts, and one self-contained file (every script inline).

Charts are Vega-Lite specs written here as plain data, with their rows inline; the Vega, Vega-Lite and
vega-embed JavaScript comes from `vl-convert-python`'s bundle, pasted into the page, so the file shows the same
offline, in a year, from an e-mail attachment: nothing is fetched when it is viewed. Per-day figures are grouped
by the days of the zone given (the report says which).

Time charts draw one bar per day, ISO week (Monday to Sunday) or calendar month of that zone. The rows of all three
are summed in SQL and embedded; the page shows one (`choose_bin`: the finest with at most `MAX_BARS` bars over the
span of the data, or the one asked for) and a control switches between them in the browser, with no new query.
Every headline figure has a value or says why it has none (`Figure.why`), and so does a chart without rows.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import duckdb

from sinks import readonly, search, views
from sinks.files import FILE_MODE
from sinks.warehouse import open_error, warehouse_path

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # an identifier only: never fetched
TOP = 15
EMPTY_CORPUS = "the corpus holds no session yet: `transcripts run` loads your agents' sessions"
MAX_BARS = 120  # the most bars a time chart draws by default: beyond this they turn into hair-thin lines


class ReportError(Exception):
    """Something a person can fix (no warehouse yet, an unknown zone): the message says what."""


class Bin(StrEnum):
    """What one bar of a time chart covers, in the report's zone: a day, an ISO week (Monday to Sunday), a month."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


def bars(first: date, last: date, unit: Bin) -> int:
    """How many bars of `unit` the days `first` to `last` (both included) take at most."""
    if unit is Bin.DAY:
        return (last - first).days + 1
    if unit is Bin.WEEK:
        monday_first, monday_last = first - timedelta(first.weekday()), last - timedelta(last.weekday())
        return (monday_last - monday_first).days // 7 + 1
    return (last.year * 12 + last.month) - (first.year * 12 + first.month) + 1


def choose_bin(first: date | None, last: date | None) -> Bin:
    """The finest bin that draws the span `first`..`last` in at most MAX_BARS bars; months when none does (a span
    of over ten years), days when there is no data."""
    if first is None or last is None:
        return Bin.DAY
    for unit in Bin:
        if bars(first, last, unit) <= MAX_BARS:
            return unit
    return Bin.MONTH


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the report: an id for its element, a title, a sentence on how to read it, the spec; `why` says
    why there is nothing to draw when `rows` is 0; `timed` charts have a bar per period of the chosen bin."""

    key: str
    title: str
    note: str
    spec: dict[str, Any]
    rows: int
    why: str = ""
    timed: bool = False


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure at the top: its value, or None and `why` there is none; `note` is a remark beside a value."""

    key: str
    label: str
    value: str | None
    note: str = ""
    why: str = ""


@dataclass(slots=True)
class Report:
    """What the report shows: the figures at the top and the charts, in order."""

    timezone: str
    since: date | None
    generated_at: datetime
    summary: dict[str, Any] = field(default_factory=dict)
    charts: list[Chart] = field(default_factory=list)
    headline: list[Figure] = field(default_factory=list)
    details: list[Figure] = field(default_factory=list)
    bin: Bin = Bin.DAY
    auto: bool = True  # `bin` chosen from the span (else asked for)
    span: tuple[date, date] | None = None  # the first and last day of the time charts' data
    bar_counts: dict[Bin, int] = field(default_factory=dict)  # the most bars a time chart draws, per bin


# ---- queries -------------------------------------------------------------------------------------------------
# Every query takes $tz (the zone whose days group the figures) and $since (a first day in that zone, or NULL).
# The views read their zone from the `transcripts_timezone` variable, set to $tz on the connection first.

_DAY = "CAST(timezone($tz, {ts}) AS DATE)"
_SINCE = "($since IS NULL OR " + _DAY + " >= $since)"

# Each day's row once per bin, under the first day of its period: ISO weeks (date_trunc's weeks start on Monday) and
# calendar months, of days that are already the zone's.
_BINNED = """
    SELECT b.bin, CAST(CASE b.bin WHEN 'day' THEN d.day ELSE date_trunc(b.bin, d.day) END AS DATE) AS period, d.*
    FROM ({daily}) d, (VALUES ('day'), ('week'), ('month')) b(bin)"""
_PERIOD_END = """CAST(period + CASE bin WHEN 'day' THEN INTERVAL 1 DAY WHEN 'week' THEN INTERVAL 7 DAY
                                   ELSE INTERVAL 1 MONTH END AS DATE)"""
_PERIOD_LABEL = """CASE bin WHEN 'day' THEN strftime(period, '%Y-%m-%d')
                            WHEN 'week' THEN strftime(period, '%G-W%V (from %b %-d)')
                            ELSE strftime(period, '%Y-%m') END"""

_ACTIVITY_DAILY = """
    SELECT day, agent, prompts, responses FROM daily_activity
    WHERE day IS NOT NULL AND ($since IS NULL OR day >= $since) AND prompts + responses > 0"""

ACTIVITY = f"""
    SELECT bin, period, {_PERIOD_END} AS period_end, {_PERIOD_LABEL} AS label, agent,
           CAST(sum(prompts) AS BIGINT) AS prompts, CAST(sum(responses) AS BIGINT) AS responses
    FROM ({_BINNED.format(daily=_ACTIVITY_DAILY)})
    GROUP BY ALL ORDER BY bin, period, agent"""

# Token sums stay HUGEINT (a count may be any BIGINT: views.py "model_usage"), handed to the page as numbers.
_MODEL_DAILY = """
    SELECT day, coalesce(model, '(unknown)') AS model, coalesce(input_tokens, 0) AS input_tokens,
           coalesce(output_tokens, 0) AS output_tokens, coalesce(cache_read_tokens, 0) AS cache_read_tokens,
           coalesce(cache_write_tokens, 0) AS cache_write_tokens, computed_cost_usd, priced
    FROM cost_daily_in($tz) WHERE day IS NOT NULL AND ($since IS NULL OR day >= $since)"""

MODELS = f"""
    SELECT bin, period, {_PERIOD_END} AS period_end, {_PERIOD_LABEL} AS label, model,
           sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
           CAST(sum(computed_cost_usd) AS DOUBLE) AS cost_usd, bool_and(priced) AS priced
    FROM ({_BINNED.format(daily=_MODEL_DAILY)})
    GROUP BY ALL ORDER BY bin, period, model"""

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

# Grouped as `project_activity` groups (views.py "session_projects"): a repository, else a folder.
PROJECTS = f"""
    SELECT p.project, p.git_repository, p.folder,
           string_agg(DISTINCT s.cwd, ', ' ORDER BY s.cwd) AS folders, count(*) AS sessions,
           CAST(coalesce(sum(s.user_turn_count), 0) AS BIGINT) AS prompts,
           CAST(coalesce(sum(s.assistant_turn_count), 0) AS BIGINT) AS responses,
           string_agg(DISTINCT s.agent, ', ' ORDER BY s.agent) AS agents, count(*) OVER () AS projects
    FROM session_projects p JOIN sessions s USING (session_id)
    WHERE {_SINCE.format(ts="s.started_at")}
    GROUP BY p.project, p.git_repository, p.folder
    ORDER BY prompts + responses DESC, sessions DESC, project, git_repository, folder LIMIT {TOP}"""

SUMMARY = f"""
    SELECT count(*) AS sessions, coalesce(sum(user_turn_count), 0) AS prompts,
           coalesce(sum(assistant_turn_count), 0) AS responses, coalesce(sum(tool_call_count), 0) AS tool_calls,
           min(started_at) AS first_session, max(coalesce(ended_at, started_at)) AS last_activity,
           (SELECT count(*) FROM sessions) AS corpus_sessions,
           (SELECT count(*) FROM usage) AS corpus_usage,
           (SELECT count(*) FROM usage WHERE cost_usd IS NOT NULL) AS corpus_reported,
           (SELECT string_agg(DISTINCT agent, ', ' ORDER BY agent) FROM sessions
            WHERE {_SINCE.format(ts="started_at")} AND agent NOT IN (SELECT DISTINCT agent FROM usage))
               AS agents_without_tokens
    FROM sessions WHERE {_SINCE.format(ts="started_at")}"""

COSTS = """
    SELECT count(*) AS usage_responses, count(*) FILTER (WHERE NOT priced) AS unpriced_responses,
           CAST(sum(computed_cost_usd) AS DOUBLE) AS computed_cost_usd,
           CAST(sum(reported_cost_usd) AS DOUBLE) AS reported_cost_usd,
           count(reported_cost_usd) AS reported_responses,
           string_agg(DISTINCT agent, ', ' ORDER BY agent) FILTER (WHERE reported_cost_usd IS NOT NULL)
               AS reporting_agents,
           coalesce(sum(prompt_tokens + coalesce(billed_output_tokens, 0)), 0) AS tokens
    FROM usage_costs WHERE $since IS NULL OR CAST(timezone($tz, timestamp) AS DATE) >= $since"""

UNPRICED_MODELS = """
    SELECT coalesce(model, '(no model)') AS model, count(*) AS responses
    FROM usage_costs WHERE NOT priced AND ($since IS NULL OR CAST(timezone($tz, timestamp) AS DATE) >= $since)
    GROUP BY ALL ORDER BY responses DESC, model"""

TOP_MODEL = f"""
    SELECT model, count(*) AS responses, count(*) / sum(count(*)) OVER () AS share
    FROM turns WHERE role = 'assistant' AND model IS NOT NULL AND {_SINCE.format(ts="timestamp")}
    GROUP BY model ORDER BY responses DESC, model LIMIT 1"""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    rel = con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    columns = [d[0] for d in rel.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in rel.fetchall()]


def _has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchone() == (1,)


def build(
    con: duckdb.DuckDBPyConnection, *, timezone: str, since: date | None, now: datetime, unit: Bin | None = None
) -> Report:
    """Run the report's queries on an open warehouse; `unit` is the bin to show first (None: `choose_bin`).
    Raises ReportError for an unknown zone."""
    params = {"tz": timezone, "since": since}
    try:
        con.execute("SELECT timezone($tz, TIMESTAMPTZ '2026-01-01 00:00:00+00')", {"tz": timezone})
    except duckdb.Error:
        raise ReportError(f"unknown time zone {timezone!r} (use an IANA name such as Europe/Berlin or UTC)") from None
    con.execute(f"SET VARIABLE {views.ZONE_VARIABLE} = {search.sql_string(timezone)}")
    if not _has_view(con, "session_projects"):  # a warehouse loaded before it: the view until its next change
        con.execute(f"CREATE TEMP VIEW session_projects AS {views.VIEWS['session_projects']}")
    report = Report(timezone=timezone, since=since, generated_at=now)
    summary = _rows(con, SUMMARY, params)[0]
    summary.update(_rows(con, COSTS, params)[0])
    summary["unpriced_models"] = [r["model"] for r in _rows(con, UNPRICED_MODELS, params)]
    top_model = _rows(con, TOP_MODEL, params)
    summary["top_model"] = top_model[0] if top_model else None
    report.summary = summary

    activity, models, projects = (_rows(con, q, params) for q in (ACTIVITY, MODELS, PROJECTS))
    days = [r["period"] for r in (*activity, *models) if r["bin"] == Bin.DAY]
    report.span = (min(days), max(days)) if days else None
    report.auto = unit is None
    report.bin = choose_bin(*(report.span or (None, None))) if unit is None else unit
    report.charts = [
        _activity(activity, timezone, report.bin),
        *_models(models, timezone, report.bin, summary),
        _tools(_rows(con, TOOLS, params)),
        _longest(_rows(con, LONGEST, params)),
        _projects(projects),
    ]
    report.bar_counts = {
        b: max(
            (len({v["period"] for v in c.spec["data"]["values"] if v["bin"] == b}) for c in report.charts if c.timed),
            default=0,
        )
        for b in Bin
    }
    if not summary["corpus_sessions"]:
        report.charts = [replace(c, why=EMPTY_CORPUS) for c in report.charts]
    report.headline, report.details = _figures(summary, projects, since)
    return report


# ---- figures -------------------------------------------------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:,.2f}" if abs(value) >= 1 or value == 0 else f"${value:,.4f}"  # cents hide small sums


def _list(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _unpriced_note(models: list[str]) -> str:
    n = len(models)
    return f"{n} model{'s' if n != 1 else ''} without a price: {_list(models)}" if n else ""


def _figures(s: dict[str, Any], projects: list[dict[str, Any]], since: date | None) -> tuple[list[Figure], ...]:
    """The headline figures (sessions, turns, tokens, cost, top model, top project) and the others, each with a
    value or why it has none."""
    period = f" since {since.isoformat()}" if since else ""
    sessions, prompts, responses = int(s["sessions"]), int(s["prompts"]), int(s["responses"])
    turns = prompts + responses
    empty = sessions == 0
    no_sessions = (
        f"no session started on or after {since.isoformat()}" if since and s["corpus_sessions"] else EMPTY_CORPUS
    )
    if not s["corpus_sessions"]:
        no_tokens = no_sessions
    elif not s["corpus_usage"]:
        no_tokens = "no agent in this corpus records tokens"
    else:
        no_tokens = f"no tokens recorded{period}"
    without = s["agents_without_tokens"]
    unpriced_models = list(s["unpriced_models"])
    usage_rows, unpriced = int(s["usage_responses"]), int(s["unpriced_responses"] or 0)
    headline = [
        Figure("sessions", "sessions", f"{sessions:,}", note=no_sessions if empty else ""),
        Figure(
            "turns",
            "turns",
            f"{turns:,}" if not empty else None,
            note=f"{prompts:,} prompts, {responses:,} responses" if not empty else "",
            why=no_sessions if empty else "",
        ),
    ]
    tokens = int(s["tokens"])
    headline.append(
        Figure(
            "tokens",
            "tokens",
            f"{tokens:,}" if usage_rows else None,
            note=f"not recorded by {without}" if usage_rows and without else "",
            why="" if usage_rows else no_tokens,
        )
    )
    if not usage_rows:
        unpriceable = no_tokens if not s["corpus_sessions"] else f"{no_tokens}, so none can be priced"
        cost = Figure("cost", "computed cost", None, why=unpriceable)
    elif s["computed_cost_usd"] is None:
        cost = Figure(
            "cost", "computed cost", None, why="no model here has a price: " + _unpriced_note(unpriced_models)
        )
    else:
        # left out of the sum; how many responses that is: "unpriced responses" below
        note = _unpriced_note(unpriced_models) if unpriced else "from genai-prices' dated prices"
        cost = Figure("cost", "computed cost", _money(float(s["computed_cost_usd"])), note=note)
    headline.append(cost)
    top = s["top_model"]
    headline.append(
        Figure(
            "top_model",
            "top model",
            str(top["model"]) if top else None,
            note=f"{float(top['share']):.0%} of the responses with a model" if top else "",
            why="" if top else (no_sessions if empty else "no agent here records which model answered"),
        )
    )
    if projects:
        first = projects[0]
        share = (int(first["prompts"]) + int(first["responses"])) / turns if turns else 0.0
        where = first["git_repository"] or _clip(first["folders"] or "no folder recorded", 60)
        headline.append(
            Figure("top_project", "top project", str(first["project"]), note=f"{where} · {share:.0%} of turns")
        )
    else:
        headline.append(Figure("top_project", "top project", None, why=no_sessions))

    details = [
        Figure("prompts", "prompts", f"{prompts:,}"),
        Figure("responses", "responses", f"{responses:,}"),
        Figure("tool_calls", "tool calls", f"{int(s['tool_calls']):,}"),
    ]
    if s["reported_cost_usd"] is not None:
        details.append(
            Figure(
                "reported_cost",
                "cost the agents reported",
                _money(float(s["reported_cost_usd"])),
                note=f"by {s['reporting_agents']}, on {int(s['reported_responses']):,} of {usage_rows:,} responses",
            )
        )
    else:
        if not s["corpus_sessions"]:
            why = EMPTY_CORPUS
        elif not s["corpus_reported"]:
            why = "no agent in this corpus reports cost"
        else:
            why = f"no cost reported{period}"
        details.append(Figure("reported_cost", "cost the agents reported", None, why=why))
    if usage_rows:
        share = unpriced / usage_rows
        details.append(
            Figure(
                "unpriced",
                "unpriced responses",
                f"{unpriced:,} of {usage_rows:,} ({share:.0%})",
                note=_unpriced_note(unpriced_models),
            )
        )
    else:
        details.append(Figure("unpriced", "unpriced responses", None, why=no_tokens))
    return headline, details


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


def _timed(rows: list[dict[str, Any]], unit: Bin, timezone: str, **encoding: Any) -> dict[str, Any]:
    """A bar per period of the bin the page shows (the param `unit`, which the page's control sets): each bar spans
    its period on a UTC time axis. The periods are the zone's calendar days already; read as UTC, a viewer's own
    zone never shifts a bar to the day before. Over half a year, the labels name the month and its year (the
    default names a year only on a tick at its first of January)."""
    days = [r["period"] for r in rows if r["bin"] == Bin.DAY]
    months = bars(min(days), max(days), Bin.MONTH) if days else 0
    # about a dozen labels, each on a first of the month
    axis = {"format": "%b %Y", "tickCount": {"interval": "month", "step": -(-months // 12)}} if months > 6 else {}
    return _spec(
        rows,
        height=220,
        params=[{"name": "unit", "value": str(unit)}],
        transform=[{"filter": "datum.bin === unit"}],
        mark={"type": "bar", "tooltip": True},
        encoding={
            "x": {
                "field": "period",
                "type": "temporal",
                "scale": {"type": "utc"},
                "title": f"period ({timezone})",
                "axis": axis,
            },
            "x2": {"field": "period_end"},
            **encoding,
        },
    )


def _activity(rows: list[dict[str, Any]], timezone: str, unit: Bin) -> Chart:
    long = [
        {**{k: r[k] for k in ("bin", "period", "period_end", "label", "agent")}, "kind": kind, "turns": r[kind]}
        for r in rows
        for kind in ("prompts", "responses")
    ]
    spec = _timed(
        long,
        unit,
        timezone,
        y={
            "aggregate": "sum",
            "field": "turns",
            "type": "quantitative",
            "title": "turns",
            "axis": {"tickMinStep": 1, "format": "d"},
        },
        color={"field": "agent", "type": "nominal"},
        tooltip=[
            {"field": "label", "title": "period"},
            {"field": "agent"},
            {"aggregate": "sum", "field": "turns", "type": "quantitative", "title": "turns"},
        ],
    )
    return Chart(
        "activity",
        "Activity",
        "Turns (your prompts and the models' responses) per agent.",
        spec,
        len(rows),
        why="no turn in this period",
        timed=True,
    )


def _models(rows: list[dict[str, Any]], timezone: str, unit: Bin, s: dict[str, Any]) -> list[Chart]:
    used = [r for r in rows if r["tokens"]]
    tokens = _timed(
        used,
        unit,
        timezone,
        y={"aggregate": "sum", "field": "tokens", "type": "quantitative", "title": "tokens"},
        color={"field": "model", "type": "nominal"},
        tooltip=[
            {"field": "label", "title": "period"},
            {"field": "model"},
            *(
                {"aggregate": "sum", "field": f, "type": "quantitative", "format": ",", "title": f.replace("_", " ")}
                for f in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
            ),
        ],
    )
    priced = [r for r in rows if r["cost_usd"] is not None]
    cost = _timed(
        priced,
        unit,
        timezone,
        y={"aggregate": "sum", "field": "cost_usd", "type": "quantitative", "title": "USD (computed)"},
        color={"field": "model", "type": "nominal"},
        tooltip=[
            {"field": "label", "title": "period"},
            {"field": "model"},
            {"aggregate": "sum", "field": "cost_usd", "type": "quantitative", "format": "$.4f", "title": "cost"},
        ],
    )
    no_tokens = (
        "no agent in this corpus records tokens" if not s["corpus_usage"] else "no tokens recorded in this period"
    )
    unpriced = _unpriced_note(list(s["unpriced_models"]))
    no_cost = no_tokens + ", so none can be priced" if not used else "no model here has a price: " + unpriced
    return [
        Chart(
            "tokens",
            "Tokens per model",
            "Prompt (uncached, cache read, cache write) and output tokens.",
            tokens,
            len(used),
            why=no_tokens,
            timed=True,
        ),
        Chart(
            "cost",
            "Cost per model",
            "Computed from genai-prices' dated prices; models without a price are left out"
            + (f" ({unpriced})." if unpriced else "."),
            cost,
            len(priced),
            why=no_cost,
            timed=True,
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
        why="no session in this period called a tool",
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
        "longest",
        "Longest sessions",
        "Wall-clock length; subagents are sessions of their own.",
        spec,
        len(rows),
        why="no session in this period records when it ended",
    )


def _projects(rows: list[dict[str, Any]]) -> Chart:
    names = [str(r["project"]) for r in rows]
    long: list[dict[str, Any]] = []
    for r, name in zip(rows, names, strict=True):
        where = r["git_repository"] or r["folder"]
        # Two repositories or folders of one name (acme/api, other/api) are two bars: the repository tells them apart.
        label = _clip(name if names.count(name) == 1 or not where else f"{name} ({where})", 60)
        grouped = "repository" if r["git_repository"] else "folder" if r["folder"] else "neither recorded"
        long.extend(
            {
                "project": label,
                "grouped_by": grouped,
                "repository": r["git_repository"] or "(none recorded)",
                "folders": r["folders"] or "(none recorded)",
                "kind": kind,
                "turns": r[kind] or 0,
                "sessions": r["sessions"],
                "agents": r["agents"],
            }
            for kind in ("prompts", "responses")
        )
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
                {"field": "grouped_by", "title": "grouped by"},
                {"field": "repository"},
                {"field": "folders"},
                {"field": "agents"},
                {"field": "sessions", "type": "quantitative"},
                {"field": "kind"},
                {"field": "turns", "type": "quantitative"},
            ],
        },
    )
    total = int(rows[0]["projects"]) if rows else 0
    shown = f"the {len(rows)} busiest of {total}" if total > len(rows) else "all"
    return Chart(
        "projects",
        "Busiest projects",
        f"Turns per project, {shown}. A project is the git repository its sessions recorded (Codex, Grok), or that "
        "the other sessions of its folder recorded; else its folder's name. The tooltip shows the repository and the "
        "folders.",
        spec,
        len(rows),
        why="no session in this period",
    )


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


def _figure_html(f: Figure) -> str:
    value = (
        f'<span class="value" title="{html.escape(f.value)}">{html.escape(f.value)}</span>'
        if f.value is not None
        else '<span class="value none">—</span>'
    )
    remark = f.why or f.note
    cls = "why" if f.why else "note"
    return (
        f'<div class="figure" data-figure="{f.key}">{value}<span class="label">{html.escape(f.label)}</span>'
        + (f'<span class="{cls}">{html.escape(remark)}</span>' if remark else "")
        + "</div>"
    )


def _bins_html(report: Report) -> str:
    if not any(c.timed and c.rows for c in report.charts):
        return ""
    options = "".join(
        f'<label><input type="radio" name="bin" value="{b}"{" checked" if b is report.bin else ""}> '
        f"{b.value} <small>({report.bar_counts.get(b, 0):,} bars)</small></label>"
        for b in Bin
    )
    if report.span is None:
        why = ""
    elif report.auto:
        first, last = report.span
        why = (
            f"{report.bin.value}s: the finest with at most {MAX_BARS} bars over {(last - first).days + 1:,} days "
            f"({first.isoformat()} to {last.isoformat()})"
        )
    else:
        why = f"{report.bin.value}s, as asked (--bin)"
    return (
        f'<form class="bins" id="bins" aria-label="bars per">Bars per {options}'
        f'<span class="bin-why">{html.escape(why)}</span></form>'
    )


def render(report: Report) -> str:
    """The report as one HTML document with every script and style inline."""
    specs = {c.key: c.spec for c in report.charts if c.rows}
    sections = []
    for chart in report.charts:
        body = (
            f'<div class="chart" id="chart-{chart.key}" data-chart="{chart.key}"></div>'
            if chart.rows
            else f'<p class="empty" data-empty="{chart.key}">Nothing to draw: {html.escape(chart.why)}.</p>'
        )
        per = f' per <span class="bin-name">{report.bin.value}</span>' if chart.timed else ""
        sections.append(
            f'<section id="section-{chart.key}"><h2>{html.escape(chart.title)}{per}</h2>'
            f'<p class="note">{html.escape(chart.note)}</p>{body}</section>'
        )
    since = f" since {report.since.isoformat()}" if report.since else ""
    return _template().substitute(
        title="Agent transcripts report",
        subtitle=html.escape(
            f"Generated {report.generated_at:%Y-%m-%d %H:%M %Z}{since}; days are in {report.timezone}."
        ),
        headline="\n".join(_figure_html(f) for f in report.headline),
        details="\n".join(_figure_html(f) for f in report.details),
        bins=_bins_html(report),
        sections="\n".join(sections),
        bundle=_bundle(),
        # JSON inside <script>: `</` written as `<\/` so no value can close the element.
        specs=json.dumps(specs, sort_keys=True, default=str).replace("</", "<\\/"),
    )


def write(
    data_dir: Path, out: Path, *, timezone: str, since: date | None, now: datetime, unit: Bin | None = None
) -> Report:
    """Build the report from the warehouse under `data_dir` and write it to `out` (0600: transcripts are private).
    `unit` is the bin the time charts show first (None: chosen from the span).

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
        if not _has_view(con, "usage_costs"):
            raise ReportError(f"the warehouse in {data_dir} predates cost views: run `transcripts run` once")
        return write_from(con, out, timezone=timezone, since=since, now=now, unit=unit)
    finally:
        con.close()


def write_from(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    *,
    timezone: str,
    since: date | None,
    now: datetime,
    unit: Bin | None = None,
) -> Report:
    """`write` from an open connection with the warehouse's tables and views (a team's corpus: sinks/team.py)."""
    report = build(con, timezone=timezone, since=since, now=now, unit=unit)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(render(report), encoding="utf-8")
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, out)
    return report
