"""The report at a glance, on a corpus spanning two years loaded by the real `transcripts run`: time charts in bars of
a day, an ISO week or a month (at most 120 by default, a control switches them), projects by repository then
folder, every figure with a value or why not, the headline band above the fold, checked in headless Chromium with a
screenshot of every chart left in the tests' artefacts (tests/browser_support.py `artefacts`)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from extractors import ids
from extractors.model import Agent, Session, Turn
from extractors.model import Role as TurnRole
from flows.cli.app import app
from sinks import report
from sinks.report import MAX_BARS, Bin, bars, choose_bin
from tests import browser_support
from tests.browser_support import DevTools, artefacts, chromium
from tests.test_report import build_warehouse

ROOT = Path(__file__).resolve().parent.parent
FIRST = datetime(2024, 12, 2, 10, 0, tzinfo=UTC)  # a Monday
DAYS = 730
STRIDE = 3  # a session every third day: 244 days with activity, far more than 120
ZONE_SESSION = datetime(2025, 6, 1, 23, 30, tzinfo=UTC)  # a Sunday in UTC, Monday 01:30 in Berlin
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


# ---- the bin for a span ----------------------------------------------------------------------------------------


def test_a_span_of_120_days_is_drawn_in_day_bars() -> None:
    start = date(2026, 1, 1)
    assert choose_bin(start, start + timedelta(days=119)) is Bin.DAY


def test_a_span_of_121_days_is_drawn_in_week_bars() -> None:
    start = date(2026, 1, 1)
    assert choose_bin(start, start + timedelta(days=120)) is Bin.WEEK


def test_two_years_are_drawn_in_at_most_120_week_bars() -> None:
    start = date(2024, 12, 2)
    last = start + timedelta(days=DAYS - 1)
    assert choose_bin(start, last) is Bin.WEEK
    assert bars(start, last, Bin.WEEK) == 105 <= MAX_BARS


def test_three_years_are_drawn_in_month_bars() -> None:
    assert choose_bin(date(2023, 1, 1), date(2025, 12, 31)) is Bin.MONTH


def test_no_data_is_drawn_in_day_bars() -> None:
    assert choose_bin(None, None) is Bin.DAY


def test_weeks_are_iso_weeks_from_monday_to_sunday() -> None:
    sunday, monday = date(2026, 3, 8), date(2026, 3, 9)
    assert bars(date(2026, 3, 2), sunday, Bin.WEEK) == 1
    assert bars(sunday, monday, Bin.WEEK) == 2


def test_months_are_calendar_months() -> None:
    assert bars(date(2026, 1, 31), date(2026, 2, 1), Bin.MONTH) == 2
    assert bars(date(2026, 1, 1), date(2026, 1, 31), Bin.MONTH) == 1


def test_no_span_up_to_3600_days_gets_more_than_120_bars_by_default() -> None:
    start = date(2024, 2, 29)
    for days in range(0, 3600, 7):
        last = start + timedelta(days=days)
        assert bars(start, last, choose_bin(start, last)) <= MAX_BARS, days


# ---- a two-year corpus, loaded by the real `transcripts run` ---------------------------------------------------


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"))


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _claude(home: Path, sid: str, at: datetime, cwd: str, model: str) -> None:
    lines = []
    for i in range(2):
        ts = _iso(at + timedelta(minutes=i))
        base = {"sessionId": sid, "cwd": cwd, "version": "2.1.38", "gitBranch": "main", "isSidechain": False}
        base |= {"userType": "external", "timestamp": ts}
        lines.append(
            _line({**base, "type": "user", "uuid": f"{sid}-u{i}", "message": {"role": "user", "content": "q"}})
        )
        message = {
            "id": f"msg_{sid[:8]}_{i}",
            "role": "assistant",
            "model": model,
            "type": "message",
            "content": [{"type": "text", "text": "a"}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100},
        }
        lines.append(
            _line({**base, "type": "assistant", "uuid": f"{sid}-a{i}", "requestId": f"r{i}", "message": message})
        )
    folder = home / ".claude" / "projects" / cwd.replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{sid}.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _codex(home: Path, thread: str, at: datetime, cwd: str, remote: str) -> None:
    def env(kind: str, payload: dict[str, Any], second: int = 0) -> str:
        return _line({"timestamp": _iso(at + timedelta(seconds=second)), "type": kind, "payload": payload})

    usage = {"input_tokens": 200, "cached_input_tokens": 100, "output_tokens": 20, "total_tokens": 220}
    git = {"branch": "main", "repository_url": remote}
    lines = [
        env("session_meta", {"id": thread, "timestamp": _iso(at), "cwd": cwd, "cli_version": "0.125.0", "git": git}),
        env("turn_context", {"turn_id": "t0", "cwd": cwd, "model": "gpt-5.4"}),
        env("event_msg", {"type": "user_message", "message": "q"}, 1),
        env("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}, 1),
        env(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
            2,
        ),
        env("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}, 2),
        env("response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}, 3),
        env("event_msg", {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage}}, 3),
    ]
    day = at.strftime("%Y-%m-%d")
    folder = home / ".codex" / "sessions" / day[:4] / day[5:7] / day[8:]
    folder.mkdir(parents=True, exist_ok=True)
    name = f"rollout-{day}T{at:%H-%M-%S}-{thread}.jsonl"
    (folder / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def two_year_home(home: Path) -> Path:
    """Claude and Codex sessions every third day for two years, in four folders: /home/u/shop (Codex records
    github.com/acme/shop there; Claude records no remote), /work/api (Codex: github.com/acme/api), /home/u/notes
    (Claude only: a project of its folder's name) and, once, a Claude model without a price. No agent here reports
    cost."""
    for n, day in enumerate(range(0, DAYS, STRIDE)):
        at = FIRST + timedelta(days=day)
        sid = str(uuid.UUID(int=n + 1))
        match n % 4:
            case 0:
                _codex(home, sid, at, "/home/u/shop", "git@github.com:acme/shop.git")
            case 1:
                _claude(home, sid, at, "/home/u/shop", "claude-opus-4-6")
            case 2:
                _codex(home, sid, at, "/work/api", "https://github.com/acme/api")
            case _:
                _claude(home, sid, at, "/home/u/notes", "no-such-model-x" if n == 3 else "claude-opus-4-6")
    _claude(home, str(uuid.UUID(int=10_000)), ZONE_SESSION, "/home/u/notes", "claude-opus-4-6")
    return home


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli.app", *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = two_year_home(tmp_path_factory.mktemp("home"))
    data = tmp_path_factory.mktemp("data")
    done = cli("run", "--home", str(home), "--data-dir", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    return data


@pytest.fixture(scope="module")
def page(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out") / "report.html"
    done = cli("report", "--data-dir", str(data_dir), "--out", str(out), "--timezone", "Europe/Berlin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bars per week, chosen from the span" in done.stdout, done.stdout
    return out


def built(data_dir: Path, zone: str = "Europe/Berlin", **kw: Any) -> report.Report:
    con = duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)
    try:
        return report.build(con, timezone=zone, since=None, now=NOW, **kw)
    finally:
        con.close()


def chart(r: report.Report, key: str) -> report.Chart:
    (found,) = [c for c in r.charts if c.key == key]
    return found


def periods(c: report.Chart, unit: Bin) -> set[str]:
    return {v["period"] for v in c.spec["data"]["values"] if v["bin"] == unit}


def test_two_year_report_draws_weeks_with_at_most_120_bars_per_time_chart(data_dir: Path) -> None:
    r = built(data_dir)
    assert r.span is not None and (r.span[1] - r.span[0]).days + 1 >= DAYS - STRIDE
    assert (r.bin, r.auto) == (Bin.WEEK, True)
    for c in r.charts:
        if c.timed:
            assert c.rows and c.spec["params"] == [{"name": "unit", "value": "week"}], c.key
            assert len(periods(c, Bin.WEEK)) <= MAX_BARS < len(periods(c, Bin.DAY)), c.key
            assert len(periods(c, Bin.MONTH)) == 25, c.key
    assert r.bar_counts[Bin.DAY] == DAYS // STRIDE + 2  # every third day, and the day in Berlin of the zone session
    assert r.bar_counts[Bin.WEEK] <= MAX_BARS


def test_weeks_start_on_monday_and_months_on_the_first_in_the_reports_zone(data_dir: Path) -> None:
    berlin, utc = built(data_dir, "Europe/Berlin"), built(data_dir, "UTC")
    for c in (chart(berlin, "activity"), chart(berlin, "tokens")):
        assert {date.fromisoformat(p).weekday() for p in periods(c, Bin.WEEK)} == {0}
        assert {date.fromisoformat(p).day for p in periods(c, Bin.MONTH)} == {1}

    def turns(r: report.Report, unit: Bin, period: str) -> int:
        values = chart(r, "activity").spec["data"]["values"]
        return sum(v["turns"] for v in values if v["bin"] == unit and v["period"] == period)

    # Sunday 23:30 UTC is Monday in Berlin: its 4 turns move to the next ISO week there, and nothing else moves.
    assert "2025-06-01" in periods(chart(utc, "activity"), Bin.DAY)
    assert "2025-06-02" in periods(chart(berlin, "activity"), Bin.DAY)
    assert turns(utc, Bin.WEEK, "2025-05-26") - turns(berlin, Bin.WEEK, "2025-05-26") == 4
    assert turns(berlin, Bin.WEEK, "2025-06-02") - turns(utc, Bin.WEEK, "2025-06-02") == 4


def test_bin_asked_for_on_the_command_line_is_drawn_first(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "months.html"
    done = cli("report", "--data-dir", str(data_dir), "--out", str(out), "--bin", "month", "--timezone", "UTC")
    assert done.returncode == 0, done.stderr
    assert "6 charts; days in UTC; bars per month;" in done.stdout
    assert '"value": "month"' in out.read_text(encoding="utf-8")
    bad = cli("report", "--data-dir", str(data_dir), "--out", str(out), "--bin", "fortnight")
    assert bad.returncode == 2 and "fortnight" in bad.stderr and "Traceback" not in bad.stderr


def test_report_days_default_to_the_timezone_setting(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "tokyo.html"
    done = CliRunner().invoke(
        app, ["report", "--data-dir", str(data_dir), "--out", str(out)], env={"TRANSCRIPTS_TIMEZONE": "Asia/Tokyo"}
    )
    assert done.exit_code == 0, done.output
    assert "days in Asia/Tokyo" in done.output
    assert "days are in Asia/Tokyo" in out.read_text(encoding="utf-8")


def test_a_warehouse_loaded_before_session_projects_still_reports_projects(data_dir: Path, tmp_path: Path) -> None:
    shutil.copy(data_dir / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    try:
        con.execute("DROP VIEW project_activity")
        con.execute("DROP VIEW session_projects")
    finally:
        con.close()
    before = chart(built(data_dir), "projects").spec["data"]["values"]
    assert chart(built(tmp_path), "projects").spec["data"]["values"] == before


def test_projects_are_repositories_then_folder_names(data_dir: Path) -> None:
    values = chart(built(data_dir), "projects").spec["data"]["values"]
    by_project = {v["project"]: v for v in values}
    assert set(by_project) == {"shop", "api", "notes"}
    assert by_project["shop"]["repository"] == "github.com/acme/shop"
    assert by_project["shop"]["grouped_by"] == "repository"
    assert by_project["shop"]["agents"] == "claude, codex"  # Claude's sessions of the folder join its repository
    assert by_project["api"]["repository"] == "github.com/acme/api"
    assert (by_project["notes"]["grouped_by"], by_project["notes"]["folders"]) == ("folder", "/home/u/notes")


def test_every_figure_has_a_value_or_says_why(data_dir: Path) -> None:
    r = built(data_dir)
    figures = {f.key: f for f in (*r.headline, *r.details)}
    assert [f.key for f in r.headline] == ["sessions", "turns", "tokens", "cost", "top_model", "top_project"]
    for f in figures.values():
        assert (f.value is not None) != bool(f.why), f
    assert figures["reported_cost"].why == "no agent in this corpus reports cost"
    assert figures["cost"].value is not None and "1 model without a price: no-such-model-x" in figures["cost"].note
    assert figures["top_model"].value == "claude-opus-4-6"
    assert figures["top_project"].value in {"shop", "api", "notes"}


def test_an_empty_period_says_why_for_every_figure_and_chart(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "future.html"
    done = cli("report", "--data-dir", str(data_dir), "--out", str(out), "--since", "2030-01-01")
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert 'data-chart="' not in text  # no empty frame
    for key in ("activity", "tokens", "cost", "tools", "longest", "projects"):
        assert re.search(f'data-empty="{key}">Nothing to draw: [^<]+\\.</p>', text), key
    assert text.count("no session started on or after 2030-01-01") >= 4  # sessions, turns, top model and project


def test_an_empty_corpus_says_it_holds_no_session_yet_for_every_figure_and_chart(tmp_path: Path) -> None:
    build_warehouse(tmp_path, [])
    r = built(tmp_path, "UTC")
    for f in (*r.headline, *r.details):
        assert f.value is not None or f.why == report.EMPTY_CORPUS, f
    assert [f.why for f in r.headline[1:]] == [report.EMPTY_CORPUS] * 5
    assert {(c.rows, c.why) for c in r.charts} == {(0, report.EMPTY_CORPUS)}
    assert "Bars per" not in report.render(r)  # no time chart to switch


def test_a_corpus_without_tokens_says_no_agent_records_them(tmp_path: Path) -> None:
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    turns = (Turn(0, TurnRole.USER, "q", start, None), Turn(1, TurnRole.ASSISTANT, "a", start, None))
    session = Session(Agent("chatgpt"), ids.session_id(Agent("chatgpt"), "x1"), "x1", start, turns=turns)
    build_warehouse(tmp_path, [session])
    r = built(tmp_path, "UTC")
    figures = {f.key: f for f in (*r.headline, *r.details)}
    assert figures["tokens"].why == "no agent in this corpus records tokens"
    assert figures["cost"].why == "no agent in this corpus records tokens, so none can be priced"
    assert figures["reported_cost"].why == "no agent in this corpus reports cost"
    assert figures["top_model"].why == "no agent here records which model answered"
    assert (chart(r, "tokens").rows, chart(r, "tokens").why) == (0, "no agent in this corpus records tokens")


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser_support.shutil, "which", lambda name: None)  # no chromium, and no apt-get for it
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true needs a browser"):
        browser_support.find_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no chromium on PATH"):
        browser_support.find_chromium()


# ---- in a real browser -----------------------------------------------------------------------------------------

# The bars of a chart as drawn: one per distinct left edge of the SVG's bar paths (a stacked bar is one bar).
BARS = """((key) => new Set(Array.from(document.querySelectorAll(
    `#chart-${key} svg path[aria-roledescription="bar"]`)).map((p) => p.getAttribute("d").split(",")[0])).size)"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    with chromium(tmp_path / "profile") as client:
        yield client


def test_two_year_report_in_chromium_has_no_chart_over_120_bars_and_the_headline_above_the_fold(
    browser: DevTools, page: Path
) -> None:
    shots = artefacts("report")
    for domain in ("Runtime", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=page.as_uri())
    browser.wait_for("document.body && document.body.dataset.rendered")
    assert browser.evaluate("document.querySelectorAll('.chart-error').length") == 0

    band = browser.evaluate(
        "(() => { const r = document.getElementById('headline').getBoundingClientRect(); return [r.top, r.bottom]; })()"
    )
    assert 0 <= band[0] < band[1] <= 800, band
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#headline [data-figure]')).map(e => [e.dataset.figure, e.innerText])"
    )
    assert [key for key, _ in shown] == ["sessions", "turns", "tokens", "cost", "top_model", "top_project"]
    first_screen = browser.call("Page.captureScreenshot", format="png")  # as a person sees it first
    (shots / "first-screen.png").write_bytes(base64.b64decode(first_screen["data"]))
    browser.screenshot("#headline", shots / "headline.png")

    charts = browser.evaluate("Array.from(document.querySelectorAll('[data-chart]')).map(e => e.dataset.chart)")
    assert charts == ["activity", "tokens", "cost", "tools", "longest", "projects"]
    timed = ["activity", "tokens", "cost"]
    assert browser.evaluate("document.body.dataset.bin") == "week"
    weekly = {key: browser.evaluate(f"{BARS}({json.dumps(key)})") for key in charts}
    for key in charts:
        assert 0 < weekly[key] <= MAX_BARS, (key, weekly[key])
        browser.screenshot(f"#section-{key}", shots / f"{key}.png")

    browser.evaluate("document.querySelector('#bins input[value=day]').click()")
    browser.wait_for("document.body.dataset.bin === 'day'")
    daily = {key: browser.evaluate(f"{BARS}({json.dumps(key)})") for key in timed}
    assert all(daily[key] > MAX_BARS >= weekly[key] for key in timed), (daily, weekly)
    assert browser.evaluate("document.querySelector('#section-activity h2').innerText") == "Activity per day"
    browser.screenshot("#section-activity", shots / "activity-day.png")

    browser.evaluate("document.querySelector('#bins input[value=month]').click()")
    browser.wait_for("document.body.dataset.bin === 'month'")
    monthly = {key: browser.evaluate(f"{BARS}({json.dumps(key)})") for key in timed}
    assert monthly == {key: 25 for key in timed}
    browser.screenshot("#section-activity", shots / "activity-month.png")

    labels = browser.evaluate("document.querySelector('#chart-projects svg').textContent")
    assert all(name in labels for name in ("shop", "api", "notes")) and "/home/u/" not in labels
    text = browser.evaluate("document.body.innerText")
    assert "no agent in this corpus reports cost" in text
    assert "1 model without a price: no-such-model-x" in text
    print(f"screenshots of the report's charts: {shots}")
