"""What a person reads about rejections agrees: the run summary and `status` give the same counts under the same
words, and a rejected line is numbered as an editor numbers it."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from extractors.registry import agents
from flows.etl.settings import load_settings
from tests.corpus import S3, claude_exchange, write_session
from tests.test_cli import invoke, one_line
from tests.test_pipeline import run, settings_for


@pytest.mark.usefixtures("prefect_harness")
def test_the_run_summary_and_status_count_the_sample_rejections_alike(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, summary = invoke("run", "--sample", "--data-dir", str(data))
    assert code == 0, summary
    [(rejected, benign)] = re.findall(r"· rejected (\d+) \((\d+) benign\) ·", summary)
    assert (int(rejected), int(benign)) == (2, 1)  # the sample's invalid_json and its no_conversation
    code, status = invoke("status", "--data-dir", str(data))
    assert code == 0, status
    assert f"{rejected} rejected ({benign} benign)" in status  # `Last runs`, in the summary's words
    table = [r for r in (line.split() for line in status.splitlines()) if len(r) == 6 and r[1].isdigit()]
    assert [r[0] for r in table] == list(agents()), status  # one row per agent the readers know
    assert sum(int(r[4]) for r in table) == int(rejected)  # the table's `rejected` column, every agent
    reasons = re.findall(r"(?:Rejections by reason|Benign \(not errors\)): (.*)", status)
    counted = [int(n) for line in reasons for n in re.findall(r" (\d+)(?:,|$)", line)]
    assert sum(counted) == int(rejected)
    benign_line = next(line for line in status.splitlines() if line.startswith("Benign"))
    assert sum(int(n) for n in re.findall(r" (\d+)(?:,|$)", benign_line)) == int(benign)


def test_a_rejected_line_is_shown_as_the_line_an_editor_shows(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    lines = claude_exchange(S3, 3)
    lines.insert(5, '{"type":"user","broken')  # the file's sixth line
    write_session(home, S3, lines)
    run(settings_for(home, data))
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        [(stored, detail)] = con.execute("SELECT line, detail FROM rejects").fetchall()
    finally:
        con.close()
    assert stored == 5  # the 0-based record index, as documented (ids are built on it)
    assert "line 1" not in detail and "at column" in detail  # json's own "line 1" was the record's, not the file's
    code, out = invoke("status", "--rejections", "--data-dir", str(data))
    assert code == 0
    assert re.search(rf"{S3}\.jsonl line 6\b", one_line(out)), out


def test_a_dry_run_backfill_names_a_rejected_line_as_an_editor_does(tmp_path: Path) -> None:
    lines = claude_exchange(S3, 3)
    lines.insert(5, '{"type":"user","broken')
    path = write_session(tmp_path / "home", S3, lines)
    code, out = invoke("backfill", "claude", str(path), "--data-dir", str(tmp_path / "data"))
    assert code == 0, out
    assert f"{path} line 6" in one_line(out)


def test_rejections_are_counted_per_agent_by_reason_so_a_new_format_version_shows_as_its_agents_number(
    tmp_path: Path,
) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    lines = claude_exchange(S3, 3)
    lines.insert(2, '{"type":"user","broken')
    write_session(home, S3, lines)
    rollout = home / ".codex" / "sessions" / "2026" / "05" / "11" / "rollout-2026-05-11T09-00-00-bad.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text('{"not": "a rollout"}\n', encoding="utf-8")
    run(load_settings(home=home, data_dir=data, sources=["claude", "codex"], env={"HOME": str(home)}, lock_wait=5))
    code, status = invoke("status", "--data-dir", str(data))
    assert code == 0, status
    per_agent = dict(re.findall(r"^  (claude|codex): (.*)$", status, flags=re.M))
    assert per_agent["claude"] == "invalid_json 1", status
    assert set(per_agent) == {"claude", "codex"}, status
    assert re.fullmatch(r"[a-z_]+ 1", per_agent["codex"]), status
