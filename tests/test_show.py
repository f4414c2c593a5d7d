"""`transcripts show`: one session's turns in order for every agent, in each format; mistakes are one message and
exit code 2; the HTML page is checked in a real headless Chromium, as the report is."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from sinks.sessions import Session, Step
from sinks.transcript import markdown
from tests.test_report import DevTools, browser  # noqa: F401 (the fixture)
from tests.test_warehouse_views import load_sample

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("show") / "data"
    load_sample(data, "UTC")
    return data


def turns(data: Path) -> dict[str, list[tuple[str, str, str]]]:
    """Every session's turns (turn id, role, text) in source order, from the warehouse itself."""
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT session_id, turn_id, role, text FROM turns ORDER BY session_id, turn_index"
        ).fetchall()
        ids = [r[0] for r in con.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()]
    finally:
        con.close()
    out: dict[str, list[tuple[str, str, str]]] = {i: [] for i in ids}
    for session_id, turn_id, role, text in rows:
        out[session_id].append((turn_id, role, text))
    return out


def show(data: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["show", *args, "--data-dir", str(data), "--timezone", "UTC"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_every_agents_session_round_trips_its_turns_in_order(data: Path) -> None:
    expected = turns(data)
    agents = {session_id.split("-")[0] for session_id in expected}
    assert len(agents) >= 5, agents  # the sample has every agent
    for session_id, want in expected.items():
        code, out, err = show(data, session_id, "--format", "json")
        assert code == 0, err
        shown = json.loads(out)
        got = [(s["turn_id"], s["role"], s["text"]) for s in shown["steps"] if s["role"] is not None]
        assert got == want, session_id
        assert [s["number"] for s in shown["steps"] if s["role"]] == list(range(1, len(want) + 1))
        code, text, _ = show(data, session_id)
        assert code == 0
        positions = [text.index(t) for _, _, t in want]
        assert positions == sorted(positions), session_id  # the terminal text keeps the order too
        code, markdown, _ = show(data, session_id, "--format", "markdown")
        assert code == 0 and markdown.startswith("# ") and all(t in markdown for _, _, t in want)


@pytest.fixture(scope="module")
def every_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of every nightly agent's contract fixtures (tests/agents/<agent>/home), all in one home."""
    from extractors.registry import specs
    from flows.etl.flow import run_etl
    from flows.etl.settings import load_settings
    from tests.test_contract import materialise

    base = tmp_path_factory.mktemp("every-agent")
    home = base / "home"
    for spec in specs():
        if spec.nightly:
            shutil.copytree(materialise(spec.name, base / spec.name), home, dirs_exist_ok=True)
    data = base / "data"
    run_etl(load_settings(home=home, data_dir=data, env={"TRANSCRIPTS_TIMEZONE": "UTC"}, lock_wait=5), as_tasks=False)
    return data


def test_every_registered_agents_fixture_sessions_round_trip_in_order(every_agent: Path) -> None:
    from extractors.registry import specs

    expected = turns(every_agent)
    loaded = {session_id.split("-")[0] for session_id, want in expected.items() if want}
    assert loaded == {spec.name for spec in specs() if spec.nightly}, loaded  # a session with turns of each
    for session_id, want in expected.items():
        code, out, err = show(every_agent, session_id, "--format", "json")
        assert code == 0, err
        got = [(s["turn_id"], s["role"], s["text"]) for s in json.loads(out)["steps"] if s["role"] is not None]
        assert got == want, session_id


def test_a_prefix_and_last_find_a_session_and_subagents_are_marked(data: Path) -> None:
    code, out, _ = show(data, "claude-5f0c2a1e-7b3d")
    assert code == 0
    assert "▸ Task" in out and "⇒ subagent claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01-agent-a7c41d2" in out
    assert "link     subagent claude-5f0c2a1e" in out
    code, child, _ = show(data, "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01-agent-a7c41d2")
    assert code == 0 and "subagent of claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01" in child
    code, last, _ = show(data, "--last")
    assert code == 0 and last.strip()


def test_mistakes_are_one_message_and_exit_code_2(data: Path, tmp_path: Path) -> None:
    code, out, err = show(data, "no-such-session")
    assert code == 2 and "transcripts sql" in err and "--last" in err and "Traceback" not in err + out
    code, _, err = show(data, "claude-")
    assert code == 2 and "more than one session" in err
    code, _, err = show(data)
    assert code == 2 and "--last" in err
    code, _, err = show(data, "x", "--last")
    assert code == 2
    code, _, err = show(tmp_path / "none", "--last")
    assert code == 2 and "transcripts run" in err


def test_open_writes_one_page_and_opens_it(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    out = tmp_path / "s.html"
    code, _, err = show(data, "--last", "--open", "--out", str(out))
    assert code == 0, err
    assert opened == [out.resolve().as_uri()] and out.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_the_html_page_shows_every_turn_and_tool_call_in_headless_chromium(
    data: Path,
    tmp_path: Path,
    browser: DevTools,  # noqa: F811 (the fixture)
) -> None:
    session_id = "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01"
    want = turns(data)[session_id]
    page = tmp_path / "session.html"
    code, _, err = show(data, session_id, "--format", "html", "--out", str(page))
    assert code == 0, err
    for domain in ("Runtime", "Log", "Network", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=page.as_uri())
    deadline = time.monotonic() + 60
    while browser.evaluate("document.readyState") != "complete":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    roles = browser.evaluate(
        "Array.from(document.querySelectorAll('section.step')).filter(s => s.dataset.role !== 'tools')"
        ".map(s => [s.dataset.role, s.querySelector('.text').innerText])"
    )
    assert [tuple(r) for r in roles] == [(role, text) for _, role, text in want]
    assert browser.evaluate("document.querySelectorAll('details.call').length") == 2
    assert browser.evaluate("document.querySelector('details.call').open") is False  # folded
    browser.evaluate("1")
    errors = [e for e in browser.events if e.get("method") in ("Runtime.exceptionThrown", "Log.entryAdded")]
    fetched = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent" and not e["params"]["request"]["url"].startswith("file:")
    ]
    assert errors == [] and fetched == []


def test_markdown_stays_within_its_byte_budget_and_says_where_to_go_on() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    meta = {"session_id": "x-1", "agent": "x", "project": "p", "cwd": None, "started_at": at, "ended_at": at}
    meta |= {"models": [], "tool_call_count": 0, "title": None}
    steps = [Step(n, f"x-1-{n}", n, "user", at, None, "ü" * 3000) for n in range(1, 11)]
    text, following = markdown(Session(meta, steps, 10, 1, 10), "UTC", max_bytes=20_000)
    assert len(text.encode()) <= 20_000 and following is not None and 2 <= following <= 10
    assert f"## {following - 1} · user" in text and f"## {following} · user" not in text
    huge = [Step(1, "x-1-1", 1, "user", at, None, "ü" * 50_000)]
    text, following = markdown(Session(meta, huge, 1, 1, 1), "UTC", max_bytes=20_000)
    assert len(text.encode()) <= 20_000 and "more characters of this turn" in text and following is None
