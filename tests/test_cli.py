"""The `transcripts` command as a person uses it: messages, exit codes, and the real Prefect flows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.corpus import mixed_home, small_home

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_no_agent_data_is_said_plainly_and_exits_0(tmp_path: Path) -> None:
    code, out = invoke("run", "--home", str(tmp_path / "empty"), "--data-dir", str(tmp_path / "data"))
    assert code == 0
    assert "No agent data found" in out
    assert not (tmp_path / "data").exists()


def test_run_of_a_backfill_only_source_points_to_backfill(tmp_path: Path) -> None:
    code, out = invoke("run", "--source", "chatgpt", "--home", str(tmp_path), "--data-dir", str(tmp_path / "d"))
    assert code == 0
    assert "transcripts backfill chatgpt PATH" in " ".join(out.split())
    assert not (tmp_path / "d").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    home = mixed_home(tmp_path / "home")
    code, out = invoke("run", "--dry-run", "--home", str(home), "--data-dir", str(tmp_path / "data"))
    assert code == 0, out
    assert "claude" in out and "codex" in out and "grok" in out
    assert not (tmp_path / "data").exists()


def test_unknown_source_suggests_the_right_name(tmp_path: Path) -> None:
    code, out = invoke("run", "--source", "clade", "--home", str(tmp_path), "--data-dir", str(tmp_path / "d"))
    assert code == 2
    said = " ".join(out.split())  # the terminal width wraps the message
    assert "unknown format 'clade'" in said and "Did you mean 'claude'?" in said, out
    assert "Traceback" not in out and not (tmp_path / "d").exists()


def test_backfill_of_an_ambiguous_path_fails_closed_naming_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("[]")
    code, _ = invoke("backfill", str(path), "--data-dir", str(tmp_path / "d"))
    assert code == 2
    result = runner.invoke(app, ["backfill", str(path), "--data-dir", str(tmp_path / "d")])
    assert "--format" in result.output.replace("\n", "")


def _export(path: Path, conversations: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conversations), encoding="utf-8")
    return path


def conversation(cid: str, texts: list[str], *, t0: float = 1_700_000_000.0) -> dict[str, object]:
    mapping: dict[str, dict[str, object]] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for i, text in enumerate(texts):
        node = f"{cid}-n{i}"
        role = "user" if i % 2 == 0 else "assistant"
        mapping[node] = {
            "id": node,
            "parent": parent,
            "children": [],
            "message": {
                "id": node,
                "author": {"role": role},
                "create_time": t0 + i,
                "recipient": "all",
                "content": {"content_type": "text", "parts": [text]},
                "metadata": {},
            },
        }
        mapping[parent]["children"] = [node]  # type: ignore[index]
        parent = node
    return {
        "id": cid,
        "conversation_id": cid,
        "title": cid,
        "create_time": t0,
        "update_time": t0 + len(texts),
        "mapping": mapping,
        "current_node": parent,
    }


def test_backfill_dry_run_reads_and_validates_but_writes_nothing(tmp_path: Path) -> None:
    export = _export(tmp_path / "x" / "conversations.json", [conversation("c1", ["hi", "hello"])])
    code, out = invoke("backfill", "chatgpt", str(export), "--data-dir", str(tmp_path / "data"))
    assert code == 0, out
    assert "would load 1 sessions, 2 turns" in out
    assert not (tmp_path / "data").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_run_goes_through_the_prefect_flow_and_status_reports_it(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    data = tmp_path / "data"
    code, out = invoke("run", "--source", "claude", "--home", str(home), "--data-dir", str(data))
    assert code == 0, out
    assert "sources found 3" in out and "rejected 1" in out
    assert out.count("event=done") == 1, "off a terminal: one structured line per step, not a progress bar"
    code, out = invoke("status", "--json", "--data-dir", str(data))
    assert code == 0
    status = json.loads(out)
    assert status["runs"][0]["outcome"] == "ok"
    assert status["runs"][0]["flow_run_id"], "the Prefect flow run id is in the ledger"
    assert status["counts"]["sessions"] == {"claude": 2}
    assert [r["reason_code"] for r in status["rejects"]] == ["invalid_json"]
    assert status["skipped"] == [], "the small corpus has only conversation records"
    code, out = invoke("status", "--check", "--data-dir", str(data))
    assert code == 1 and "new rejection" in out
    code, out = invoke("run", "--source", "claude", "--home", str(home), "--data-dir", str(data))
    assert code == 0
    assert out.count("event=done") == 1
    import logging

    assert len(logging.getLogger("transcripts").handlers) == 1, "a second command does not add a second handler"
    code, _ = invoke("status", "--check", "--data-dir", str(data))
    assert code == 0, "an unchanged rejected source is not a new rejection"


@pytest.mark.usefixtures("prefect_harness")
def test_backfill_write_then_a_newer_export_updates_without_duplicates(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old = _export(
        tmp_path / "old" / "conversations.json",
        [conversation("c1", ["hi", "hello"]), conversation("c2", ["gone later", "ok"])],
    )
    code, out = invoke("backfill", "chatgpt", str(old), "--write", "--data-dir", str(data))
    assert code == 0, out
    new = _export(
        tmp_path / "new" / "conversations.json",
        [conversation("c1", ["hi", "hello", "more", "answer"]), conversation("c3", ["new", "yes"])],
    )
    code, out = invoke("backfill", str(new), "--write", "--data-dir", str(data))
    assert code == 0, out
    import duckdb

    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    sessions = dict(con.execute("SELECT session_id, turn_count FROM sessions ORDER BY 1").fetchall())
    turn_ids = [r[0] for r in con.execute("SELECT turn_id FROM turns WHERE session_id='chatgpt-c1'").fetchall()]
    con.close()
    assert sessions == {"chatgpt-c1": 4, "chatgpt-c2": 2, "chatgpt-c3": 2}
    assert len(turn_ids) == len(set(turn_ids)) == 4


def test_a_failed_run_says_why_and_that_the_corpus_is_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import errno

    def full_disk(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "data"))

    monkeypatch.setattr("flows.cli.prefect_api", contextlib.nullcontext)
    monkeypatch.setattr("flows.etl.etl_flow", full_disk)
    home = small_home(tmp_path / "home")
    result = runner.invoke(app, ["run", "--home", str(home), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 1
    assert "No space left on device" in result.output and "previous corpus is intact" in result.output
