"""`transcripts report`: one self-contained HTML file whose charts render in a real headless Chromium, offline."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extractors import ids
from extractors.model import Agent, Loaded, Role, Session, Source, ToolCall, Turn, Usage
from flows.cli.app import app
from sinks import report, warehouse
from sinks.store import FileKey, NextVersion, Store
from tests.browser_support import DevTools, chromium
from transforms.normalize import session_tables
from transforms.redact import Redactor

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
EVIL = "</script><script>alert(1)</script>"


def _session(agent: Agent, native: str, start: datetime, *, minutes: int, model: str, cwd: str, **kw: Any) -> Session:
    at = [start + timedelta(minutes=m) for m in range(0, minutes + 1, max(1, minutes // 3))]
    turns = tuple(
        Turn(i, Role.USER if i % 2 == 0 else Role.ASSISTANT, f"turn {i}", t, None if i % 2 == 0 else model)
        for i, t in enumerate(at)
    )
    calls = (
        ToolCall("c1", 1, "Bash", '{"command": "ls"}', "ok", False, at[1], at[1]),
        ToolCall("c2", 1, "Read", '{"file": "x"}', "missing", True, at[1], at[1]),
    )
    usage = tuple(Usage(t.index, model, 100, 50, 1000, 10, timestamp=t.timestamp) for t in turns if t.model)
    return Session(
        agent,
        ids.session_id(agent, native),
        native,
        start,
        ended_at=at[-1],
        cwd=cwd,
        models=(model,),
        turns=turns,
        tool_calls=calls,
        usage=usage,
        **kw,
    )


def corpus() -> list[Session]:
    return [
        _session(Agent("claude"), "a1", T0, minutes=90, model="claude-opus-4-6", cwd="/home/dev/webapp", title=EVIL),
        _session(
            Agent("claude"), "a2", T0 + timedelta(days=1), minutes=20, model="claude-opus-4-6", cwd="/home/dev/api"
        ),
        _session(
            Agent("codex"), "b1", T0 + timedelta(days=1, hours=3), minutes=40, model="gpt-5.4", cwd="/home/dev/api"
        ),
        # 23:30 UTC: the 2nd in UTC, the 3rd in Berlin
        _session(
            Agent("gemini"),
            "c1",
            datetime(2026, 3, 2, 23, 30, tzinfo=UTC),
            minutes=6,
            model="gemini-2.5-pro",
            cwd="/home/dev/webapp",
        ),
        _session(Agent("opencode"), "d1", T0 + timedelta(days=4), minutes=12, model="no-such-model-x", cwd="/srv/tool"),
    ]


def build_warehouse(data: Path, sessions: list[Session]) -> None:
    store = Store(data)
    version = NextVersion(store, "t")
    for agent in sorted({s.agent for s in sessions}):
        mine = [s for s in sessions if s.agent == agent]
        source = Source(agent, f"/x/{agent}", 1, 1)
        tables = session_tables([Loaded(source, s) for s in mine], {agent: "1"}, Redactor(None))
        version.buckets[agent] = 1
        for name, table in tables.items():
            if table.num_rows:
                version.put(FileKey(name, agent, 0), table)
    version.publish()
    warehouse.refresh(data, store, "t", previous_version=0, replaced=None)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("data")
    build_warehouse(data, corpus())
    return data


@pytest.fixture(scope="module")
def page(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out") / "report.html"
    report.write(data_dir, out, timezone="Europe/Berlin", since=None, now=NOW)
    return out


def _tags(text: str) -> list[tuple[str, dict[str, str | None]]]:
    from html.parser import HTMLParser

    found: list[tuple[str, dict[str, str | None]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(text)  # script and style bodies are CDATA to HTMLParser: their contents are not tags
    return found


def test_report_is_one_file_with_every_script_inline(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    tags = _tags(text)  # nothing to fetch: no element of the page refers to another file
    assert {name for name, _ in tags} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "p",
        "div",
        "span",
        "section",
        "script",
        "header",
        "form",
        "label",
        "input",
        "small",
    }
    assert [attrs for name, attrs in tags if name == "script" and ("src" in attrs or "href" in attrs)] == []
    assert sum(name == "script" for name, _ in tags) == 3
    assert "window.vegaEmbed=" in text  # the bundle itself, not a reference to it
    assert "days are in Europe/Berlin" in text
    # A title holding a closing script tag stays data, both in the figures and in the chart specs.
    assert EVIL not in text
    assert "<\\/script><script>alert(1)<\\/script>" in text


def test_report_groups_days_in_the_given_zone(data_dir: Path) -> None:
    import duckdb

    con = duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)
    try:
        berlin = report.build(con, timezone="Europe/Berlin", since=None, now=NOW)
        utc = report.build(con, timezone="UTC", since=None, now=NOW)
        since = report.build(con, timezone="UTC", since=date(2026, 3, 3), now=NOW)
    finally:
        con.close()

    def gemini_days(r: report.Report) -> set[str]:
        (activity,) = [c for c in r.charts if c.key == "activity"]
        values = activity.spec["data"]["values"]
        return {v["period"] for v in values if v["agent"] == "gemini" and v["bin"] == "day"}

    assert gemini_days(utc) == {"2026-03-02"}
    assert gemini_days(berlin) == {"2026-03-03"}
    assert since.summary["sessions"] == 3  # a2, b1 and d1 start on or after the 3rd (UTC)
    assert berlin.summary["unpriced_responses"] == 2  # no-such-model-x: never priced as zero
    (cost,) = [c for c in berlin.charts if c.key == "cost"]
    assert {v["model"] for v in cost.spec["data"]["values"]} == {"claude-opus-4-6", "gpt-5.4", "gemini-2.5-pro"}


def test_report_command_errors_are_one_message_and_an_exit_code(tmp_path: Path, data_dir: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "r.html"
    bad_zone = runner.invoke(app, ["report", "--data-dir", str(data_dir), "--out", str(out), "--timezone", "Mars/X"])
    assert (bad_zone.exit_code, "unknown time zone 'Mars/X'" in bad_zone.output) == (2, True)
    bad_day = runner.invoke(app, ["report", "--data-dir", str(data_dir), "--out", str(out), "--since", "2026-13-01"])
    assert (bad_day.exit_code, "is not a date" in bad_day.output) == (2, True)
    empty = runner.invoke(app, ["report", "--data-dir", str(tmp_path / "none"), "--out", str(out)])
    assert (empty.exit_code, "run `transcripts run` first" in empty.output) == (1, True)
    assert not out.exists()
    ok = runner.invoke(app, ["report", "--data-dir", str(data_dir), "--out", str(out), "--timezone", "UTC"])
    assert ok.exit_code == 0, ok.output
    assert "days in UTC" in ok.output and "2 of 10 responses unpriced" in ok.output
    assert out.exists()


# ---- the page in a real browser --------------------------------------------------------------------------------


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    with chromium(tmp_path / "profile") as client:
        yield client


def test_every_chart_renders_in_headless_chromium_with_no_console_error_and_no_fetch(
    browser: DevTools, page: Path
) -> None:
    for domain in ("Runtime", "Log", "Network", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=page.as_uri())
    deadline = time.monotonic() + 90
    while browser.evaluate("document.body && document.body.dataset.rendered") is None:
        assert time.monotonic() < deadline, "the charts did not finish rendering within 90 s"
        time.sleep(0.2)
    charts = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-chart]')).map(e => [e.dataset.chart,"
        " e.querySelectorAll('svg').length, e.querySelectorAll('svg path, svg rect, svg line').length])"
    )
    browser.evaluate("1")  # drain: events that arrived with the last answers are recorded
    errors = [
        e
        for e in browser.events
        if e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
    ]
    fetched = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
        and not e["params"]["request"]["url"].startswith(("file:", "data:", "blob:", "about:"))
    ]
    assert errors == []
    assert fetched == []
    assert [c[0] for c in charts] == ["activity", "tokens", "cost", "tools", "longest", "projects"]
    for key, svgs, marks in charts:
        assert svgs >= 1 and marks > 5, (key, svgs, marks)
    assert browser.evaluate("document.querySelectorAll('.chart-error').length") == 0


def test_a_broken_chart_shows_as_a_console_error_in_the_same_harness(browser: DevTools, tmp_path: Path) -> None:
    # The harness above can fail: a spec vega-embed rejects is reported as a console error and no SVG.
    broken = report.Report(timezone="UTC", since=None, generated_at=NOW)
    broken.summary = {k: 0 for k in ("sessions", "prompts", "responses", "tool_calls", "tokens", "unpriced_responses")}
    broken.summary.update(computed_cost_usd=None, reported_cost_usd=None)
    broken.charts = [report.Chart("bad", "Bad", "A mark that does not exist.", {"mark": "no-such-mark"}, 1)]
    out = tmp_path / "broken.html"
    out.write_text(report.render(broken), encoding="utf-8")
    for domain in ("Runtime", "Log"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=out.as_uri())
    deadline = time.monotonic() + 60
    while browser.evaluate("document.body && document.body.dataset.rendered") is None:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    browser.evaluate("1")
    assert any(e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error" for e in browser.events)
    assert browser.evaluate("document.querySelectorAll('.chart-error').length") == 1


def test_chart_rows_are_plain_json(data_dir: Path) -> None:
    # Chart rows go into the page as JSON: dates as ISO strings, decimals as numbers.
    import duckdb

    con = duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)
    try:
        built = report.build(con, timezone="UTC", since=None, now=NOW)
    finally:
        con.close()
    for chart in built.charts:
        json.dumps(chart.spec)  # raises on a Decimal, a date or a datetime
