"""`model_usage` has no model row without sessions: a model whose only response was a tool call (usage, no text)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.claude_records import SID, assistant, text, tool_result, tool_use, user
from tests.support import write_jsonl
from tests.test_pipeline import run, settings_for


def test_a_model_with_tokens_and_no_text_turn_counts_its_session(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    usage = {"input_tokens": 150, "output_tokens": 50}
    records = [
        user("look at the logs", ts="2026-03-02T09:00:00Z"),
        # A response of a small model that only calls a tool: usage, and no model turn with text.
        assistant(
            [tool_use("toolu_1", command="ls")],
            msg_id="msg_a",
            request_id="req_a",
            model="claude-haiku-4-5",
            usage=usage,
            ts="2026-03-02T09:00:01Z",
        ),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:02Z"),
        assistant([text("Done.")], msg_id="msg_b", request_id="req_b", usage=usage, ts="2026-03-02T09:00:03Z"),
    ]
    write_jsonl(home / ".claude" / "projects" / "-home-u-proj" / f"{SID}.jsonl", records)
    run(settings_for(home, data))
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        got = con.execute(
            "SELECT model, sessions, responses, input_tokens + output_tokens, first_day IS NOT NULL FROM model_usage "
            "ORDER BY model"
        ).fetchall()
        [(without_sessions,)] = con.execute("SELECT count(*) FROM model_usage WHERE sessions = 0").fetchall()
    finally:
        con.close()
    assert got == [("claude-haiku-4-5", 1, 0, 200, True), ("claude-opus-4-6", 1, 1, 200, True)]
    assert without_sessions == 0
