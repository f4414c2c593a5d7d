"""A big Codex rollout read in two passes (issue 12): the same rows as one pass, and complete-or-reject.

The threshold (`stream_source_bytes`) and the part size (`stream_part_bytes`) are lowered so that small
hand-written rollouts take the two-pass path and come out in many parts. Texts longer than `INLINE_CHARS` are
the ones pass 2 reads again, so the rollouts below hold long and short texts of every kind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from extractors import registry
from extractors.bounded import Limits, iter_jsonl
from extractors.codex import parse, read, read_streaming, stream
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Rejected, Role, Source, Streamed
from flows.etl import flow as etl
from flows.etl.flow import run_etl
from flows.etl.settings import Settings
from tests import stream_support
from tests.secrets_planted import PLANTED
from tests.stream_support import (
    KEY,
    STREAMED,
    assert_deferred_when_a_line_changes,
    assert_streamed_as_one_pass,
    stream_settings,
)
from tests.support import SETTLED, shared_fixture_files, shared_fixtures, write_jsonl
from tests.test_codex import (
    OWN,
    PARENT,
    agent_event,
    assistant,
    call,
    env,
    meta,
    rolled_back,
    tokens,
    turn_context,
    user_event,
    user_item,
    v7,
)
from tests.test_pipeline import snapshot, table_rows
from transforms.redact import Redactor

PAT_TEXT, PAT = PLANTED["github-pat"]
LONG = " - and this sentence is here only to make the text longer than the inline limit of the first pass"
NAME = f"rollout-2026-05-11T13-46-40-{OWN}.jsonl"
IDE = (
    "# Context from my IDE setup:\n\n## Active file: a.py\n\n## Open tabs:\n- a.py: a.py\n\n## My request for Codex:\n"
)


def big_rollout_records() -> list[dict[str, Any]]:
    """One rollout with every decision pass 1 takes on texts it then leaves out (each asserted in the first test)."""
    return [
        meta(),
        turn_context(v7(1_778_500_001_000, 3)),
        # The person's turns come from the events; the item copies of the same texts are duplicates.
        user_event(IDE + "rename the parser" + LONG),
        user_item(IDE + "rename the parser" + LONG),
        user_item("<environment_context>\n<cwd>/w</cwd>\n</environment_context>" + LONG),  # contextual: harness
        assistant("I'll rename it." + LONG),
        agent_event("I'll rename it." + LONG),  # the event copy: a duplicate, not a turn
        call("function_call", "c1", name="exec_command", arguments=json.dumps({"cmd": "rg parser" + LONG})),
        call(
            "function_call_output",
            "c1",
            output="Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nboom" + LONG,
        ),
        # An interrupted call written again (openai/codex#24425): its long input is replaced by a short one.
        call("custom_tool_call", "c2", name="apply_patch", input="*** Begin Patch" + LONG),
        call("custom_tool_call", "c2", name="apply_patch", input="*** End Patch"),
        call("custom_tool_call_output", "c2", output=[{"type": "input_text", "text": "patched" + LONG}]),
        call("function_call_output", "c2", output="ok"),  # a later short output replaces the long one
        call("function_call", "c3", name="js", arguments={"code": "x" * 200}),
        call("function_call_output", "c3", output={"content": f"token {PAT_TEXT}" + LONG, "success": False}),
        tokens(1200, 200, 80),
        user_event("   \n\t" + " " * 100),  # long but blank: dropped, as one pass drops it
        user_event("a second question" + LONG),
        assistant(f"Your token {PAT} was in the output." + LONG),
        user_event("a question the person took back" + LONG),
        assistant("an answer left behind" + LONG),
        rolled_back(1),
        user_event("the question put well" + LONG),
        assistant("short"),
        env("event_msg", {"type": "thread_name_updated", "thread_name": "Rename the parser"}),
        tokens(2400, 400, 160),
    ]


def source_of(path: Path) -> Source:
    st = path.stat()
    return Source(Agent("codex"), str(path), st.st_size, st.st_mtime_ns, str(path.parent))


def write_rollout(tmp_path: Path, records: list[dict[str, Any]] | list[str], name: str = NAME) -> Path:
    return write_jsonl(tmp_path / "sessions" / "2026" / "05" / "11" / name, records)


@pytest.mark.parametrize(("part_bytes", "least_parts"), [(40, 5), (700, 2), (10**6, 1)])
def test_ok_streamed_rollout_rows_equal_one_pass_row_for_row(tmp_path: Path, part_bytes: int, least_parts: int) -> None:
    path = write_rollout(tmp_path, big_rollout_records())
    (loaded,) = list(read(source_of(path), SETTLED))
    assert isinstance(loaded, Loaded)
    ses = loaded.session
    # The rollout holds what it claims: an unwrapped IDE request, duplicates, a harness part, a rollback, a call
    # written twice, outputs replaced, error flags from a header and from `success`, a title, and secrets.
    users = [t.text for t in ses.turns if t.role is Role.USER]
    assert users == ["rename the parser" + LONG, "a second question" + LONG, "the question put well" + LONG]
    assert [t.text for t in ses.turns if t.role is Role.ASSISTANT][-1] == "short"
    calls = {c.call_id: c for c in ses.tool_calls}
    assert calls["c1"].is_error is True and calls["c3"].is_error is True
    assert (calls["c2"].input, calls["c2"].output) == ("*** End Patch", "ok")
    assert ses.title == "Rename the parser" and len(ses.usage) == 2
    assert sum(n for (kind, _, _), n in ses.census.items() if kind.endswith("/rolled_back")) == 2

    # Pass 1 left the long texts out and noted them; the short ones stayed.
    plan = parse.Plan()
    parse.parse_rollout(iter_jsonl(str(path), SETTLED, checksums=True), SETTLED, plan=plan)
    assert len(plan.texts) >= 5 and set(plan.inputs) == {"c1", "c3"} and set(plan.outputs) == {"c1", "c3"}

    for redactor in (Redactor(None), Redactor(KEY)):
        expected = one_pass_rows(path, redactor)
        got, parts = streamed_rows(path, redactor, dataclasses.replace(STREAMED, stream_part_bytes=part_bytes))
        assert got == expected
        assert parts >= least_parts  # small parts: the rows really came in pieces
    redacted = one_pass_rows(path, Redactor(KEY))
    assert len(redacted["redactions"]) >= 2 and not any(
        PAT in row for row in redacted["turns"] + redacted["tool_calls"]
    )


def test_ok_pre_envelope_rollout_streamed_equals_one_pass(tmp_path: Path) -> None:
    # Bare response items: the texts are in the record itself, not in a payload.
    records = [
        {"id": OWN, "timestamp": "2025-08-20T13:20:47.060Z", "instructions": "AGENTS"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": IDE + "index it" + LONG}]},
        {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["ls" + LONG]}), "call_id": "k"},
        {
            "type": "function_call_output",
            "call_id": "k",
            "output": '{"output":"a' + LONG + '","metadata":{"exit_code":1}}',
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "listed" + LONG}]},
    ]
    path = write_rollout(tmp_path, records, name=f"rollout-{OWN}.jsonl")
    (loaded,) = list(read(source_of(path), SETTLED))
    assert isinstance(loaded, Loaded) and len(loaded.session.turns) == 2
    assert loaded.session.turns[0].text == "index it" + LONG  # the IDE wrapper unwrapped, in both passes
    assert loaded.session.tool_calls[0].is_error is True
    got, parts = streamed_rows(path, Redactor(KEY))
    assert got == one_pass_rows(path, Redactor(KEY)) and parts >= 2


def test_ok_small_rollouts_keep_one_pass(tmp_path: Path) -> None:
    path = write_rollout(tmp_path, big_rollout_records())
    limits = dataclasses.replace(SETTLED, stream_source_bytes=path.stat().st_size)
    (outcome,) = list(read_streaming(source_of(path), limits))
    assert isinstance(outcome, Loaded)
    (outcome,) = list(read_streaming(source_of(path), dataclasses.replace(limits, stream_source_bytes=100)))
    assert isinstance(outcome, Streamed)


def test_reject_an_archived_copy_of_a_live_rollout_in_either_pass(tmp_path: Path) -> None:
    live = write_rollout(tmp_path, big_rollout_records())
    archived = write_jsonl(tmp_path / "archived_sessions" / NAME, big_rollout_records())
    assert live.exists()
    for limits in (SETTLED, STREAMED):
        (outcome,) = list(registry.read_streaming(source_of(archived), limits))
        assert isinstance(outcome, Rejected) and outcome.code is RejectCode.DUPLICATE


@pytest.mark.parametrize("path", shared_fixture_files("codex", "*.jsonl"), ids=lambda p: p.name)
def test_ok_shared_fixture_streamed_equals_one_pass(path: Path) -> None:
    shared_fixtures()
    assert_streamed_as_one_pass(source_of(path))


def test_reject_invalid_json_found_in_pass_one_as_one_pass(tmp_path: Path) -> None:
    lines = [
        *(json.dumps(r) for r in big_rollout_records()[:6]),
        '{"type": "event_msg", "payload": ',
        json.dumps(meta()),
    ]
    path = write_rollout(tmp_path, lines)
    (one,) = list(registry.read_streaming(source_of(path), SETTLED))
    (two,) = list(registry.read_streaming(source_of(path), STREAMED))
    assert isinstance(one, Rejected) and isinstance(two, Rejected)
    assert (two.code, two.line, two.offset, two.detail) == (one.code, one.line, one.offset, one.detail)
    assert two.code is RejectCode.INVALID_JSON and two.line == 6


def test_deferred_when_a_line_changes_between_passes_with_size_and_mtime_kept(tmp_path: Path) -> None:
    path = write_rollout(tmp_path, big_rollout_records())
    (item,) = list(read_streaming(source_of(path), STREAMED))
    assert isinstance(item, Streamed)
    assert_deferred_when_a_line_changes(path, item, b"a second question", b"a SECOND question")


def test_ok_glued_line_texts_are_read_again_from_their_record(tmp_path: Path) -> None:
    # Two records on one physical line (docs/design.md "Records glued onto one line"): the second one's text is found by
    # its place on the line.
    records = [json.dumps(r) for r in big_rollout_records()]
    glued = [*records[:7], records[7] + records[8], *records[9:]]
    path = write_rollout(tmp_path, glued)
    (loaded,) = list(read(source_of(path), SETTLED))
    assert isinstance(loaded, Loaded) and any(kind == "glued_line" for kind, _, _ in loaded.session.census)
    got, _ = streamed_rows(path, Redactor(KEY))
    assert got == one_pass_rows(path, Redactor(KEY))


# --- through the pipeline: the corpus, and nothing kept of a source that fails in pass 2 -----------------------------


def codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    sessions = home / ".codex" / "sessions" / "2026" / "05" / "11"
    write_jsonl(sessions / NAME, big_rollout_records())
    small = [meta(PARENT), user_event("a small one"), assistant("small answer")]
    write_jsonl(sessions / f"rollout-2026-05-11T12-46-40-{PARENT}.jsonl", small)
    return home


def test_ok_pipeline_corpus_streamed_equals_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, data = codex_home(tmp_path), tmp_path / "data"
    run_etl(settings_for(home, data, SETTLED), as_tasks=False)
    first = snapshot(data)
    streamed: list[str] = []
    real = stream.read_in_two_passes

    def counted(source: Source, limits: Limits, *, archived: bool) -> Streamed:
        streamed.append(source.path)
        return real(source, limits, archived=archived)

    monkeypatch.setattr(stream, "read_in_two_passes", counted)
    # Read in this process, where the spy is (a big source is otherwise read in a worker process even alone).
    monkeypatch.setattr(etl, "extraction_pool", lambda workers, apart=False, log=None: contextlib.nullcontext(None))
    big_only = dataclasses.replace(STREAMED, stream_source_bytes=2000)  # the small rollout keeps one pass
    run_etl(settings_for(home, data, big_only), full=True, as_tasks=False)  # same data dir: same redaction key
    second = snapshot(data)
    assert [Path(p).name for p in streamed] == [NAME]
    assert len(first["sessions"]) == 2 and len(first["turns"]) >= 8 and len(first["tool_calls"]) == 3
    for table in first:
        assert second[table] == first[table], table


def test_failure_in_pass_two_keeps_nothing_of_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, data = codex_home(tmp_path), tmp_path / "data"
    path = home / ".codex" / "sessions" / "2026" / "05" / "11" / NAME
    calls = 0
    real_text = parse.turn_text

    def changing_text(ref: parse.Ref, payload: dict[str, Any], limits: Limits) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:  # after some parts were staged
            with path.open("a") as handle:
                handle.write(json.dumps(user_event("appended")) + "\n")
        return real_text(ref, payload, limits)

    monkeypatch.setattr(stream, "turn_text", changing_text)
    monkeypatch.setattr(etl, "extraction_pool", lambda workers, apart=False, log=None: contextlib.nullcontext(None))
    run_etl(settings_for(home, data, dataclasses.replace(STREAMED, stream_source_bytes=2000)), as_tasks=False)
    assert calls > 3
    assert [row[0] for row in table_rows(data, "sessions")] == [f"codex-{PARENT}"]  # only the small rollout
    for table in ("turns", "tool_calls", "usage", "record_kinds", "redactions", "session_links"):
        assert all(f"codex-{OWN}" not in repr(row) for row in table_rows(data, table)), table
    rejects = [row for row in table_rows(data, "rejects") if OWN in repr(row)]
    assert len(rejects) == 1 and "changed_during_read" in repr(rejects[0])


def one_pass_rows(path: Path, redactor: Redactor) -> dict[str, list[str]]:
    return stream_support.one_pass_rows(read, source_of(path), redactor)


def streamed_rows(path: Path, redactor: Redactor, limits: Limits = STREAMED) -> tuple[dict[str, list[str]], int]:
    return stream_support.streamed_rows(read_streaming, source_of(path), redactor, limits)


def settings_for(home: Path, data: Path, limits: Limits) -> Settings:
    return stream_settings(home, data, limits, "codex")
