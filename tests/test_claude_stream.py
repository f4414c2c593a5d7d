"""A big Claude Code session read in two passes (issue 12): the same rows as one pass, and complete-or-reject.

The threshold (`stream_source_bytes`) and the part size (`stream_part_bytes`) are lowered so that small
hand-written files take the two-pass path and come out in many parts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from extractors import registry
from extractors.bounded import Limits
from extractors.claude import read, read_streaming, stream
from extractors.errors import DeferCode, DeferError, RejectCode
from extractors.model import Agent, Loaded, Rejected, Role, Source, Streamed
from flows.etl import batch, pipeline
from flows.etl import flow as etl
from flows.etl.flow import run_etl
from flows.etl.settings import Settings
from tests import stream_support
from tests.claude_records import OTHER, SID, assistant, envelope, said, text, tool_result, tool_use, usage, user
from tests.secrets_planted import PLANTED
from tests.stream_support import (
    KEY,
    STREAMED,
    assert_deferred_when_a_line_changes,
    assert_streamed_as_one_pass,
    stream_settings,
)
from tests.support import SETTLED, shared_fixture_files, shared_fixtures, write_jsonl
from tests.test_pipeline import snapshot, table_rows
from transforms.redact import Redactor

PAT_TEXT, PAT = PLANTED["github-pat"]


def ts(second: int) -> str:
    return f"2026-02-10T21:{second // 60:02d}:{second % 60:02d}.000Z"


def big_session_records() -> list[dict[str, Any]]:
    """One session with every decision that needs the whole file (each is asserted in the first test)."""
    return [
        # Copied from the session it resumes: counted, never this session's turns.
        user("an older question", sid=OTHER, ts=ts(0)),
        assistant([text("an older answer")], sid=OTHER, msg_id="msg_old", request_id="req_old", ts=ts(1)),
        user("start the server and run the tests", ts=ts(2)),
        # One response written as three lines (text, text, tool_use), with a multi-line text.
        assistant([text("I'll start it.\nThen the tests,\nthen a report.")], msg_id="msg_1", ts=ts(3)),
        assistant([text("Starting now.")], msg_id="msg_1", ts=ts(3), usage=usage(4)),
        assistant([tool_use("toolu_1", command="mix phx.server")], msg_id="msg_1", ts=ts(4), usage=usage(9)),
        # A prompt queued while the tool runs, removed, never written again: a turn of its own.
        {
            "type": "queue-operation",
            "operation": "enqueue",
            "sessionId": SID,
            "timestamp": ts(5),
            "content": "and the README",
        },
        {"type": "queue-operation", "operation": "remove", "sessionId": SID, "timestamp": ts(6)},
        user([tool_result("toolu_1", f"running\n{PAT_TEXT}")], ts=ts(7), toolUseResult={"stdout": ""}),
        assistant([text(f"Running. Your token {PAT} is in the log.")], msg_id="msg_2", request_id="req_2", ts=ts(8)),
        assistant(
            [tool_use("toolu_2", "Edit", file_path="README.md", new="x" * 120)],
            msg_id="msg_2",
            request_id="req_2",
            ts=ts(9),
        ),
        user(
            [tool_result("toolu_2", [{"type": "text", "text": "edited"}, {"type": "text", "text": "saved"}])], ts=ts(10)
        ),
        envelope("progress", data={"type": "hook_progress"}, ts=ts(11)),
        assistant([text("Done, and the README too.")], msg_id="msg_3", request_id="req_3", ts=ts(12), usage=usage(7)),
        # A late line of the second response (same requestId), far from its other lines.
        assistant(
            [text("(one more word on the server)")], msg_id="msg_2", request_id="req_2", ts=ts(13), usage=usage(20)
        ),
        assistant([tool_use("toolu_3", "Read", file_path="mix.exs")], msg_id="msg_4", request_id="req_4", ts=ts(14)),
        {"type": "custom-title", "customTitle": "Server and tests", "sessionId": SID},
    ]


def source_of(path: Path) -> Source:
    st = path.stat()
    return Source(Agent("claude"), str(path), st.st_size, st.st_mtime_ns, str(path.parent.parent))


def write_session(tmp_path: Path, records: list[dict[str, Any]] | list[str]) -> Path:
    return write_jsonl(tmp_path / "claude" / "-home-u-proj" / f"{SID}.jsonl", records)


@pytest.mark.parametrize(("part_bytes", "least_parts"), [(40, 5), (700, 2), (10**6, 1)])
def test_ok_streamed_rows_equal_one_pass_row_for_row(tmp_path: Path, part_bytes: int, least_parts: int) -> None:
    path = write_session(tmp_path, big_session_records())
    (loaded,) = list(read(source_of(path), SETTLED))
    assert isinstance(loaded, Loaded)
    ses = loaded.session
    # The fixture holds what it claims: copies, a joined multi-line response, a split request, a queued prompt,
    # tool results (one of two text blocks), a title, and a secret in a text and in a tool output.
    assert any(kind.startswith("copied/") for kind, _, _ in ses.census)
    assistants = dict(said(ses, Role.ASSISTANT))
    assert assistants[3] == "I'll start it.\nThen the tests,\nthen a report.\n\nStarting now."
    assert assistants[9].endswith("\n\n(one more word on the server)")
    assert "and the README" in dict(said(ses, Role.USER)).values()
    assert ses.title == "Server and tests"
    outputs = {c.call_id: c.output for c in ses.tool_calls}
    assert outputs["toolu_2"] is not None and "saved" in outputs["toolu_2"]
    assert outputs["toolu_3"] is None and len(ses.tool_calls) == 3

    for redactor in (Redactor(None), Redactor(KEY)):
        expected = one_pass_rows(path, redactor)
        got, parts = streamed_rows(path, redactor, dataclasses.replace(STREAMED, stream_part_bytes=part_bytes))
        assert got == expected
        assert parts >= least_parts  # small parts: the rows really came in pieces
    redacted = one_pass_rows(path, Redactor(KEY))
    assert len(redacted["redactions"]) >= 2 and not any(PAT in row for row in redacted["turns"])


def test_ok_small_files_keep_one_pass(tmp_path: Path) -> None:
    path = write_session(tmp_path, big_session_records())
    limits = dataclasses.replace(SETTLED, stream_source_bytes=path.stat().st_size)
    (outcome,) = list(read_streaming(source_of(path), limits))
    assert isinstance(outcome, Loaded)
    (outcome,) = list(read_streaming(source_of(path), dataclasses.replace(limits, stream_source_bytes=100)))
    assert isinstance(outcome, Streamed)


@pytest.mark.parametrize("path", shared_fixture_files("claude-code", "*.jsonl"), ids=lambda p: p.name)
def test_ok_shared_fixture_streamed_equals_one_pass(path: Path) -> None:
    shared_fixtures()
    assert_streamed_as_one_pass(source_of(path))


def test_reject_invalid_json_found_in_pass_one_as_one_pass(tmp_path: Path) -> None:
    lines = [*(_json(r) for r in big_session_records()[:6]), '{"type": "user", "message": ', _json(user("later"))]
    path = write_session(tmp_path, lines)
    (one,) = list(registry.read_streaming(source_of(path), SETTLED))
    (two,) = list(registry.read_streaming(source_of(path), STREAMED))
    assert isinstance(one, Rejected) and isinstance(two, Rejected)
    assert (two.code, two.line, two.offset, two.detail) == (one.code, one.line, one.offset, one.detail)
    assert two.code is RejectCode.INVALID_JSON and two.line == 6


def _json(record: dict[str, Any]) -> str:
    return json.dumps(record)


def test_deferred_when_a_line_changes_between_passes_with_size_and_mtime_kept(tmp_path: Path) -> None:
    path = write_session(tmp_path, big_session_records())
    (item,) = list(read_streaming(source_of(path), STREAMED))
    assert isinstance(item, Streamed)
    assert_deferred_when_a_line_changes(path, item, b"Starting now.", b"Starting NOW.")


def test_deferred_when_the_file_grows_between_passes(tmp_path: Path) -> None:
    path = write_session(tmp_path, big_session_records())
    (item,) = list(read_streaming(source_of(path), STREAMED))
    assert isinstance(item, Streamed)
    with path.open("a") as handle:
        handle.write(_json(user("appended")) + "\n")
    with pytest.raises(DeferError) as caught:
        next(item.parts)
    assert caught.value.code is DeferCode.CHANGED_DURING_READ


# --- through the pipeline: the corpus, and nothing kept of a source that fails in pass 2 -----------------------------


def claude_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_jsonl(home / ".claude" / "projects" / "-home-u-proj" / f"{SID}.jsonl", big_session_records())
    small = [user("a small one", sid=OTHER, ts=ts(1)), assistant([text("small answer")], sid=OTHER, ts=ts(2))]
    write_jsonl(home / ".claude" / "projects" / "-home-u-proj" / f"{OTHER}.jsonl", small)
    return home


def test_ok_pipeline_corpus_streamed_equals_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, data = claude_home(tmp_path), tmp_path / "data"
    run_etl(settings_for(home, data, SETTLED), as_tasks=False)
    first = snapshot(data)
    streamed: list[str] = []
    real = stream.read_in_two_passes

    def counted(source: Source, limits: Limits) -> Streamed:
        streamed.append(source.path)
        return real(source, limits)

    monkeypatch.setattr(stream, "read_in_two_passes", counted)
    # Read in this process, where the spy is (a big source is otherwise read in a worker process even alone).
    monkeypatch.setattr(etl, "extraction_pool", lambda workers, apart=False, log=None: contextlib.nullcontext(None))
    big_only = dataclasses.replace(STREAMED, stream_source_bytes=2000)  # the small session keeps one pass
    run_etl(settings_for(home, data, big_only), full=True, as_tasks=False)  # same data dir: same redaction key
    second = snapshot(data)
    assert [Path(p).name for p in streamed] == [f"{SID}.jsonl"]
    assert len(first["turns"]) == 7 and len(first["tool_calls"]) == 3 and len(first["sessions"]) == 2
    assert len(first["redactions"]) >= 2
    for table in first:
        assert second[table] == first[table], table


@pytest.mark.parametrize("failure", ["changed", "bug"])
def test_failure_in_pass_two_keeps_nothing_of_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    home = claude_home(tmp_path)
    path = home / ".claude" / "projects" / "-home-u-proj" / f"{SID}.jsonl"
    calls = 0
    real_text = stream._text

    def failing_text(reread: Any, value: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 6:  # after some parts were staged
            if failure == "changed":
                with path.open("a") as handle:
                    handle.write(_json(user("appended")) + "\n")
            else:
                raise KeyError("a bug in pass 2")
        return real_text(reread, value)

    monkeypatch.setattr(stream, "_text", failing_text)
    staged_before: list[int] = []
    real_stage = batch.stage_tables

    def counted_stage(*args: Any) -> Any:
        if calls < 6:
            staged_before.append(args[4]["turns"].num_rows)
        return real_stage(*args)

    monkeypatch.setattr(batch, "stage_tables", counted_stage)
    monkeypatch.setattr(
        etl, "extraction_pool", lambda workers, apart=False, log=None: contextlib.nullcontext(None)
    )  # spies
    data = tmp_path / "data"
    big_only = dataclasses.replace(STREAMED, stream_source_bytes=2000)
    run_etl(settings_for(home, data, big_only), as_tasks=False)
    assert calls > 6 if failure == "changed" else calls == 6
    assert sum(staged_before) >= 2  # turns of the big session were staged before pass 2 failed
    sessions = table_rows(data, "sessions")
    assert [row[0] for row in sessions] == [f"claude-{OTHER}"]  # only the small session
    for table in ("turns", "tool_calls", "usage", "record_kinds", "redactions", "session_links"):
        assert all(f"claude-{SID}" not in repr(row) for row in table_rows(data, table)), table
    rejects = [row for row in table_rows(data, "rejects") if SID in repr(row)]
    assert len(rejects) == 1
    expected = "changed_during_read" if failure == "changed" else "source_unreadable"
    assert expected in repr(rejects[0])


def test_ok_glued_line_texts_are_read_again_from_their_record(tmp_path: Path) -> None:
    # Two records on one physical line (docs/design.md "Records glued onto one line"): the second one's text is found by
    # its place on the line.
    records = [_json(r) for r in big_session_records()]
    glued = [*records[:9], records[9] + records[10], *records[11:]]
    path = write_session(tmp_path, glued)
    (loaded,) = list(read(source_of(path), SETTLED))
    assert isinstance(loaded, Loaded) and any(kind == "glued_line" for kind, _, _ in loaded.session.census)
    for part_bytes in (40, 10**6):
        got, _ = streamed_rows(path, Redactor(KEY), dataclasses.replace(STREAMED, stream_part_bytes=part_bytes))
        assert got == one_pass_rows(path, Redactor(KEY))


def test_ok_dry_run_preview_reads_a_big_session_in_two_passes_with_one_pass_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = claude_home(tmp_path)
    one_pass = settings_for(home, tmp_path / "data", SETTLED)
    expected = pipeline.preview(pipeline.discover(one_pass), one_pass)
    streamed: list[str] = []
    real = stream.read_in_two_passes

    def counted(source: Source, limits: Limits) -> Streamed:
        streamed.append(Path(source.path).name)
        return real(source, limits)

    monkeypatch.setattr(stream, "read_in_two_passes", counted)
    two_pass = settings_for(home, tmp_path / "data", dataclasses.replace(STREAMED, stream_source_bytes=2000))
    got = pipeline.preview(pipeline.discover(two_pass), two_pass)
    assert streamed == [f"{SID}.jsonl"]
    assert (got.sessions, got.turns, got.tool_calls, got.first, got.last) == (2, 7, 3, expected.first, expected.last)
    assert got == expected

    def changing(source: Source, limits: Limits) -> Streamed:
        item = real(source, limits)
        with Path(source.path).open("a") as handle:
            handle.write(_json(user("appended")) + "\n")  # the file moves between the passes
        return item

    monkeypatch.setattr(stream, "read_in_two_passes", changing)
    moved = pipeline.preview(pipeline.discover(two_pass), two_pass)
    assert (moved.sessions, moved.deferred) == (1, 1)


def one_pass_rows(path: Path, redactor: Redactor) -> dict[str, list[str]]:
    return stream_support.one_pass_rows(read, source_of(path), redactor)


def streamed_rows(path: Path, redactor: Redactor, limits: Limits = STREAMED) -> tuple[dict[str, list[str]], int]:
    return stream_support.streamed_rows(read_streaming, source_of(path), redactor, limits)


def settings_for(home: Path, data: Path, limits: Limits) -> Settings:
    return stream_settings(home, data, limits, "claude")
