"""Redaction through the real pipeline: planted secrets of several agents appear nowhere under the data dir or in
the logs; the key file; the setting; and a change of rules or setting re-derives the whole corpus."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from flows.etl import pipeline
from flows.etl.flow import run_etl
from flows.etl.settings import SettingsError, load_settings
from sinks import secrets_key, warehouse
from tests.corpus import _line, claude_exchange, codex_rollout, grok_session, write_session
from tests.secrets_planted import PLANTED

S1 = "dddddddd-0000-4000-8000-000000000004"
T1 = "019e1695-0522-7c83-8b39-0dd379793f81"
G1 = "019f6851-7ec4-7ef0-97d3-03f3eee38756"

# (agent, where) -> rule whose planted secret goes there
PLACES = {
    ("claude", "prompt"): "aws-access-token",
    ("claude", "answer"): "openai-api-key",
    ("claude", "tool input"): "github-pat",
    ("claude", "tool output"): "private-key",
    ("claude", "title"): "url-password",
    ("codex", "prompt"): "jwt",
    ("codex", "tool input"): "slack-bot-token",
    ("codex", "tool output"): "stripe-access-token",
    ("grok", "prompt"): "anthropic-api-key",
    ("grok", "title"): "huggingface-access-token",
}


def _text(agent: str, where: str) -> str:
    return PLANTED[PLACES[(agent, where)]][0]


def secrets() -> dict[str, str]:
    return {rule: PLANTED[rule][1] for rule in PLACES.values()}


def planted_home(home: Path) -> Path:
    """Claude, Codex and Grok sessions with a planted secret in every kind of text they store."""
    lines = claude_exchange(S1, 1, text=_text("claude", "prompt"))
    base = json.loads(lines[0])
    answer = json.loads(lines[1])
    answer["message"]["content"] = [
        {"type": "text", "text": _text("claude", "answer")},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": _text("claude", "tool input")}},
    ]
    result = {
        **base,
        "uuid": f"{S1}-r",
        "timestamp": "2026-03-01T10:00:30.000Z",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": _text("claude", "tool output")}],
        },
    }
    title = {"type": "custom-title", "customTitle": _text("claude", "title"), "sessionId": S1}
    write_session(home, S1, [lines[0], _line(answer), _line(result), _line(title)])

    path = codex_rollout(home, T1, 1)
    rows = path.read_text().splitlines()
    for i, row in enumerate(rows):
        record = json.loads(row)
        payload = record["payload"]
        if payload.get("type") == "user_message":
            payload["message"] = _text("codex", "prompt")
        if payload.get("type") == "message" and payload.get("role") == "user":
            payload["content"][0]["text"] = _text("codex", "prompt")
        rows[i] = _line(record)
    at = "2026-05-11T09:00:05.000Z"
    call = {"type": "function_call", "name": "exec_command", "call_id": "call_1"}
    call["arguments"] = json.dumps({"cmd": _text("codex", "tool input")})
    rows.append(_line({"timestamp": at, "type": "response_item", "payload": call}))
    output = {"type": "function_call_output", "call_id": "call_1", "output": _text("codex", "tool output")}
    rows.append(_line({"timestamp": at, "type": "response_item", "payload": output}))
    path.write_text("".join(r + "\n" for r in rows))

    folder = grok_session(home, G1, 1)
    history = (folder / "chat_history.jsonl").read_text()
    history = history.replace('"grok question 0"', json.dumps(_text("grok", "prompt")))
    (folder / "chat_history.jsonl").write_text(history)
    summary = json.loads((folder / "summary.json").read_text())
    summary["generated_title"] = _text("grok", "title")
    (folder / "summary.json").write_text(json.dumps(summary))
    return home


def _every_text(data: Path) -> str:
    """Every string value of every Parquet file and of every table of the warehouse (both compress their text,
    so a grep of their bytes alone proves nothing)."""
    parts: list[str] = []
    for path in sorted(data.rglob("*.parquet")):
        for column in pq.read_table(path).columns:
            parts.extend(str(v) for v in column.to_pylist())
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        assert any(schema.startswith("fts_") for schema, _ in tables), "the search index is checked too"
        for schema, name in tables:
            for row in con.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall():
                parts.extend(str(v) for v in row)
    finally:
        con.close()
    return "\n".join(parts)


def _every_byte(data: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file() and not p.is_symlink())


def _settings(home: Path, data: Path, **extra: object):  # type: ignore[no-untyped-def]
    return load_settings(home=home, data_dir=data, env={"HOME": str(home)}, **extra)  # type: ignore[arg-type]


def test_planted_secrets_appear_nowhere_under_the_data_dir_nor_in_the_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    with caplog.at_level(logging.DEBUG):
        report = run_etl(_settings(home, data), as_tasks=False)
    assert report.committed is not None and report.committed.sessions_loaded == 3
    assert report.committed.new_rejections == 0
    text, raw = _every_text(data), _every_byte(data)
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for rule, secret in secrets().items():
        assert secret not in text, rule
        assert secret.encode() not in raw, rule
        assert secret not in logs, rule
        assert f"[REDACTED:{rule}:hmac=" in text, rule

    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        found = {(agent, rule) for agent, rule in con.execute("SELECT DISTINCT agent, rule FROM redactions").fetchall()}
        assert found == {(agent, rule) for (agent, _), rule in PLACES.items()}
        daily = con.execute("SELECT agent, day, rule, count FROM redactions_daily ORDER BY ALL").fetchall()
        assert len(daily) == len(PLACES) and all(n >= 1 for *_, n in daily)
        summary = warehouse.redaction_summary(con)
    finally:
        con.close()
    assert summary["sessions"] == {
        a: {"current": 1, "older_rules": 0, "unredacted": 0} for a in ("claude", "codex", "grok")
    }
    assert {(r["agent"], r["rule"]) for r in summary["redacted"]} == found
    runs = json.loads(pq.read_table(next(data.rglob("runs/*.parquet"))).column("parser_versions")[0].as_py())
    assert all("+r" + summary["rules_version"] in v for v in runs.values())


def test_raw_mode_keeps_the_secrets_so_the_search_above_can_fail(tmp_path: Path) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    report = run_etl(_settings(home, data, redact=False), as_tasks=False)
    assert not report.redacted
    text = _every_text(data)
    for rule, secret in secrets().items():
        assert secret in text, rule
    assert not secrets_key.key_path(data).exists()  # no key is made for a raw corpus
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        summary = warehouse.redaction_summary(con)
    finally:
        con.close()
    assert summary["redacted"] == []
    assert all(s["unredacted"] == 1 and s["current"] == 0 for s in summary["sessions"].values())


def test_switching_the_setting_or_the_rules_re_derives_the_whole_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    first = run_etl(_settings(home, data), as_tasks=False)
    same = run_etl(_settings(home, data), as_tasks=False)
    raw = run_etl(_settings(home, data, redact=False), as_tasks=False)
    back = run_etl(_settings(home, data), as_tasks=False)
    monkeypatch.setattr("transforms.redact.redaction_version", lambda: "9.9.changed")
    rules = run_etl(_settings(home, data), as_tasks=False)

    def changed(report: pipeline.RunReport) -> int:
        return sum(c["new"] + c["changed"] for c in report.plan_counts.values())

    assert changed(first) == 3 and changed(same) == 0
    assert changed(raw) == 3 and changed(back) == 3 and changed(rules) == 3
    versions = {
        row["parser_version"]
        for p in (data / "parquet").resolve().rglob("sessions/**/*.parquet")
        for row in pq.read_table(p).to_pylist()
    }
    assert versions and all(v.endswith("+r9.9.changed") for v in versions)


def test_the_key_is_made_once_private_and_the_markers_stay_the_same(tmp_path: Path) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        run_etl(_settings(home, data), as_tasks=False)
    finally:
        os.umask(old)
    key = secrets_key.key_path(data)
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == 32
    before = key.read_bytes()
    markers = sorted(set(_markers(_every_text(data))))
    run_etl(_settings(home, data), full=True, as_tasks=False)
    assert key.read_bytes() == before
    assert sorted(set(_markers(_every_text(data)))) == markers
    os.chmod(key, 0o644)
    assert secrets_key.read_key(data) == before and key.stat().st_mode & 0o777 == 0o600


def _markers(text: str) -> list[str]:
    import re

    return re.findall(r"\[REDACTED:[a-z0-9-]+:hmac=[0-9a-f]{12}\]", text)


def test_a_damaged_key_stops_the_run_with_a_clear_error(tmp_path: Path) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    run_etl(_settings(home, data), as_tasks=False)
    secrets_key.key_path(data).write_bytes(b"short")
    with pytest.raises(OSError, match="redaction key holds 5 bytes"):
        run_etl(_settings(home, data), full=True, as_tasks=False)


@pytest.mark.parametrize(
    ("env", "toml", "flag", "expected"),
    [
        ({}, "", None, True),
        ({"TRANSCRIPTS_REDACT": "false"}, "", None, False),
        ({"TRANSCRIPTS_REDACT": "0"}, "[redaction]\nenabled = true\n", None, False),
        ({}, "[redaction]\nenabled = false\n", None, False),
        ({"TRANSCRIPTS_REDACT": "yes"}, "[redaction]\nenabled = false\n", None, True),
        ({"TRANSCRIPTS_REDACT": "true"}, "", False, False),
    ],
)
def test_the_redact_setting_flag_beats_environment_beats_file(
    tmp_path: Path, env: dict[str, str], toml: str, flag: bool | None, expected: bool
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(toml)
    settings = load_settings(config=config, redact=flag, env={"HOME": str(tmp_path), **env})
    assert settings.redact is expected


@pytest.mark.parametrize(
    ("env", "toml"), [({"TRANSCRIPTS_REDACT": "maybe"}, ""), ({}, '[redaction]\nenabled = "no"\n')]
)
def test_a_bad_redact_setting_is_refused(tmp_path: Path, env: dict[str, str], toml: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError, match="true or false"):
        load_settings(config=config, env={"HOME": str(tmp_path), **env})
