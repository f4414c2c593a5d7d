"""Kiro CLI reader: one test per rule of docs/agents/kiro.md, on databases built here from the schema the contract
fixtures use (tests/agents/kiro/schema.sql) and on saved conversation files."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extractors import kiro
from extractors.bounded import Limits
from extractors.errors import RejectCode
from extractors.model import Deferred, Disposition, Loaded, Outcome, Rejected, Role, Source
from extractors.registry import read_source
from extractors.spec import Claim

SCHEMA = (Path(__file__).parent / "agents" / "kiro" / "schema.sql").read_text(encoding="utf-8")
T0 = 1767348000000  # 2026-01-02T10:00:00Z
CONTEXT = "--- CONTEXT ENTRY BEGIN ---\nFollow the rules in AGENTS.md.\n--- CONTEXT ENTRY END ---\n\n"


def user(content: dict[str, Any], at: str | None = "2026-01-02T10:00:01+00:00", context: str = "") -> dict[str, Any]:
    env = {"env_state": {"operating_system": "linux", "current_working_directory": "/home/u/proj"}}
    message = {"additional_context": context, "env_context": env, "content": content, "images": None}
    if at is not None:
        message["timestamp"] = at
    return message


def prompt(text: str, **kw: Any) -> dict[str, Any]:
    return user({"Prompt": {"prompt": text}}, **kw)


def results(*items: tuple[str, str, str], **kw: Any) -> dict[str, Any]:
    rows = [{"tool_use_id": i, "content": [{"Text": out}], "status": status} for i, out, status in items]
    return user({"ToolUseResults": {"tool_use_results": rows}}, **kw)


def reply(text: str) -> dict[str, Any]:
    return {"Response": {"message_id": "m", "content": text}}


def tool_use(text: str, *ids: str) -> dict[str, Any]:
    uses = [{"id": i, "name": "execute_bash", "orig_name": "execute_bash", "args": {"command": "ls"}} for i in ids]
    return {"ToolUse": {"message_id": "m", "content": text, "tool_uses": uses}}


def entry(u: dict[str, Any], a: dict[str, Any], end_ms: int | None = T0 + 3000) -> dict[str, Any]:
    meta = None if end_ms is None else {"message_id": "m", "stream_end_timestamp_ms": end_ms, "model_id": "claude-x"}
    return {"user": u, "assistant": a, "request_metadata": meta}


def state(cid: str, *history: Any, **extra: Any) -> dict[str, Any]:
    return {"conversation_id": cid, "next_message": None, "history": list(history),
            "valid_history_range": [0, len(history)], "transcript": [], **extra}  # fmt: skip


def database(
    path: Path,
    v2: Sequence[tuple[str, str, dict[str, Any] | str, int]] = (),
    legacy: Sequence[tuple[str, dict[str, Any]]] = (),
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(SCHEMA)
        for key, cid, value, updated in v2:
            text = value if isinstance(value, str) else json.dumps(value)
            conn.execute("INSERT INTO conversations_v2 VALUES (?, ?, ?, ?, ?)", (key, cid, text, T0, updated))
        for key, value in legacy:
            conn.execute("INSERT INTO conversations VALUES (?, ?)", (key, json.dumps(value)))
        conn.commit()
    return path


def read(path: Path, limits: Limits | None = None) -> list[Outcome]:
    sources = list(kiro.discover(path.parent))
    if not sources:  # a saved file, given explicitly
        st = path.stat()
        sources = [Source(kiro.SPEC.name, str(path), st.st_size, st.st_mtime_ns, str(path.parent), "file")]
    return [o for s in sources for o in read_source(s, limits or Limits())]


def only(outcomes: list[Outcome]) -> Any:
    assert len(outcomes) == 1, outcomes
    outcome = outcomes[0]
    return outcome.session if isinstance(outcome, Loaded) else outcome


def test_a_persons_turn_is_the_typed_prompt_and_never_the_additional_context(tmp_path: Path) -> None:
    conv = state("c1", entry(prompt("fix the build", context=CONTEXT), reply("Done.")))
    session = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0 + 5000)])))
    assert [(t.role, t.text, t.index) for t in session.turns] == [
        (Role.USER, "fix the build", 0),
        (Role.ASSISTANT, "Done.", 1),
    ]
    assert all("AGENTS.md" not in t.text for t in session.turns)
    assert session.session_id == "kiro-c1" and session.cwd == "/home/u/proj" and session.models == ("claude-x",)


def test_tool_results_sent_back_as_a_user_message_fill_the_call_and_are_no_turn(tmp_path: Path) -> None:
    conv = state(
        "c1",
        entry(prompt("list"), tool_use("", "tu_1", "tu_2")),
        entry(results(("tu_1", "a\nb", "Success"), ("tu_2", "denied", "Error")), reply("Two files.")),
    )
    session = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0 + 5000)])))
    assert [(t.role, t.index) for t in session.turns] == [(Role.USER, 0), (Role.ASSISTANT, 3)]
    assert [(c.call_id, c.turn_index, c.output, c.is_error) for c in session.tool_calls] == [
        ("tu_1", 1, "a\nb", False),
        ("tu_2", 1, "denied", True),
    ]
    assert session.census[("user/ToolUseResults", "", Disposition.TOOL)] == 1
    assert session.census[("assistant/ToolUse", "", Disposition.TOOL)] == 1  # no visible text in it


def test_a_prompt_typed_instead_of_approving_tools_is_a_persons_turn(tmp_path: Path) -> None:
    cancelled = user(
        {"CancelledToolUses": {"prompt": "no, use git", "tool_use_results": [
            {"tool_use_id": "tu_1", "content": [{"Text": "Tool use was cancelled by the user"}], "status": "Error"}]}}
    )  # fmt: skip
    conv = state("c1", entry(prompt("list"), tool_use("Let me look.", "tu_1")), entry(cancelled, reply("OK.")))
    session = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0 + 5000)])))
    assert [t.text for t in session.turns if t.role is Role.USER] == ["list", "no, use git"]
    assert session.tool_calls[0].is_error is True


def test_the_newest_row_of_a_conversation_under_several_folders_wins_and_is_counted_once(tmp_path: Path) -> None:
    old = state("c1", entry(prompt("first"), reply("one")))
    new = state("c1", entry(prompt("first"), reply("one")), entry(prompt("second"), reply("two")))
    path = database(
        tmp_path / "kiro-cli" / "data.sqlite3",
        [("/p", "c1", old, T0 + 2000), ("/p/sub", "c1", new, T0 + 9000)],
        legacy=[("/p", old)],
    )
    session = only(read(path))
    assert [t.text for t in session.turns] == ["first", "one", "second", "two"]
    assert session.census[("row/conversations_v2/superseded", "", Disposition.SKIPPED)] == 1
    assert session.census[("row/conversations/superseded", "", Disposition.SKIPPED)] == 1


def test_a_conversation_only_in_the_amazon_q_table_loads_from_it(tmp_path: Path) -> None:
    conv = state("q1", [prompt("from q"), reply("answer")])  # the older [user, assistant] pair form
    session = only(read(database(tmp_path / "amazon-q" / "data.sqlite3", legacy=[("/p", conv)])))
    assert [t.text for t in session.turns] == ["from q", "answer"]
    assert session.started_at == datetime(2026, 1, 2, 10, 0, 1, tzinfo=UTC)
    assert session.census[("row/conversations", "", Disposition.METADATA)] == 1


def test_a_legacy_row_without_any_time_is_rejected_missing_timestamp(tmp_path: Path) -> None:
    conv = state("q1", [prompt("from q", at=None), reply("answer")])
    rejected = only(read(database(tmp_path / "amazon-q" / "data.sqlite3", legacy=[("/p", conv)])))
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.MISSING_TIMESTAMP


def test_a_v2_row_without_times_in_its_state_starts_at_its_created_at(tmp_path: Path) -> None:
    conv = state("c1", entry(prompt("hi", at=None), reply("hello"), end_ms=None))
    session = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0 + 5000)])))
    assert session.started_at == datetime(2026, 1, 2, 10, 0, tzinfo=UTC) and not session.started_at_inferred
    assert [t.timestamp for t in session.turns] == [None, None]


def test_an_unknown_variant_or_status_is_rejected_unsupported_format_and_the_rest_loads(tmp_path: Path) -> None:
    good = state("c0", entry(prompt("hi"), reply("hello")))
    variant = state("c1", entry(prompt("hi"), {"Thinking": {"content": "hmm"}}))
    status = state("c2", entry(prompt("x"), tool_use("", "t")), entry(results(("t", "o", "Partial")), reply("y")))
    block = state("c3", entry(prompt("x"), tool_use("", "t")), entry(user({"Voice": {"clip": "a.wav"}}), reply("y")))
    rows = [("/p", c["conversation_id"], c, T0 + 1) for c in (good, variant, status, block)]
    outcomes = read(database(tmp_path / "kiro-cli" / "data.sqlite3", rows))
    assert [o.session.session_id for o in outcomes if isinstance(o, Loaded)] == ["kiro-c0"]
    assert [(o.session_hint, o.code) for o in outcomes if isinstance(o, Rejected)] == [
        ("kiro-c1", RejectCode.UNSUPPORTED_FORMAT),
        ("kiro-c2", RejectCode.UNSUPPORTED_FORMAT),
        ("kiro-c3", RejectCode.UNSUPPORTED_FORMAT),
    ]


def test_shapes_that_break_the_known_structure_are_bad_shape(tmp_path: Path) -> None:
    broken = [
        state("b1", {"user": prompt("x")}),  # no assistant
        state("b2", entry(prompt("x"), reply("y")), valid_history_range=[0, 5]),
        {**state("b3"), "history": {"0": 1}},
        state("b4", entry(user({"Prompt": {"prompt": 7}}), reply("y"))),
    ]
    outcomes = read(
        database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", c["conversation_id"], c, 1) for c in broken])
    )
    assert [o.code for o in outcomes if isinstance(o, Rejected)] == [RejectCode.BAD_SHAPE] * 4


def test_a_compacted_conversation_with_an_empty_history_is_no_conversation(tmp_path: Path) -> None:
    conv = state("c1", latest_summary=["The person asked for a port.", {"message_id": "m"}])
    conv["transcript"] = ["> port it", "Done.\n[Tool uses: none]"]
    rejected = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0)])))
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.NO_CONVERSATION


def test_the_summary_and_transcript_are_counted_never_turns(tmp_path: Path) -> None:
    conv = state("c1", entry(prompt("go on"), reply("ok")), latest_summary=["SUMMARY TEXT", {}])
    conv["transcript"] = ["> earlier", "earlier answer", "> go on", "ok"]
    session = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0)])))
    assert [t.text for t in session.turns] == ["go on", "ok"]
    assert session.census[("state/latest_summary", "", Disposition.HARNESS)] == 1
    assert session.census[("state/transcript", "", Disposition.SKIPPED)] == 4


def test_a_row_whose_json_names_another_conversation_is_inconsistent(tmp_path: Path) -> None:
    conv = state("other", entry(prompt("x"), reply("y")))
    rejected = only(read(database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0)])))
    assert rejected.code is RejectCode.INCONSISTENT_SOURCE and rejected.session_hint == "kiro-c1"


def test_a_row_over_max_conversation_bytes_is_rejected_naming_the_bound(tmp_path: Path) -> None:
    conv = state("c1", entry(prompt("x" * 5000), reply("y")))
    path = database(tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", conv, T0)])
    rejected = only(read(path, Limits(max_conversation_bytes=1000)))
    assert rejected.code is RejectCode.LIMIT_EXCEEDED and "max_conversation_bytes=1000" in rejected.detail


def test_a_saved_conversation_without_times_starts_at_its_mtime_marked_inferred(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(state("s1", [prompt("hello", at=None), reply("hi")])))
    os.utime(saved, (1767348000, 1767348000))
    session = only(read(saved))
    assert session.started_at == datetime(2026, 1, 2, 10, 0, tzinfo=UTC) and session.started_at_inferred
    assert [t.text for t in session.turns] == ["hello", "hi"]


def test_reading_writes_nothing_beside_the_database(tmp_path: Path) -> None:
    path = database(
        tmp_path / "kiro-cli" / "data.sqlite3", [("/p", "c1", state("c1", entry(prompt("a"), reply("b"))), 1)]
    )
    before = {p.name: p.stat().st_mtime_ns for p in path.parent.iterdir()}
    assert [t.text for t in only(read(path)).turns] == ["a", "b"]
    assert {p.name: p.stat().st_mtime_ns for p in path.parent.iterdir()} == before


def test_default_roots_follow_xdg_data_home_and_name_the_macos_folders(tmp_path: Path) -> None:
    roots = kiro.default_roots(tmp_path, {"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert roots == [
        tmp_path / "xdg" / "kiro-cli",
        tmp_path / "xdg" / "amazon-q",
        tmp_path / "Library" / "Application Support" / "kiro-cli",
        tmp_path / "Library" / "Application Support" / "amazon-q",
        tmp_path / ".kiro" / "sessions" / "cli",
    ]
    assert kiro.default_roots(tmp_path, {})[0] == tmp_path / ".local" / "share" / "kiro-cli"


def test_a_data_home_given_as_root_finds_both_databases_and_nothing_else(tmp_path: Path) -> None:
    share = tmp_path / "share"
    a = database(share / "kiro-cli" / "data.sqlite3")
    b = database(share / "amazon-q" / "data.sqlite3")
    database(share / "other-app" / "data.sqlite3")  # another program's database of the same name
    (share / "kiro-cli" / "settings.json").write_text("{}")
    assert [s.path for s in kiro.discover(share)] == [str(b), str(a)]
    assert [s.path for s in kiro.discover(share / "kiro-cli")] == [str(a)]


def test_a_database_of_another_program_is_source_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "kiro-cli" / "data.sqlite3"
    path.parent.mkdir()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER)")
        conn.commit()
    rejected = only(read(path))
    assert rejected.code is RejectCode.SOURCE_UNREADABLE and "conversations_v2" in rejected.detail


# ---- the JSONL session files (`~/.kiro/sessions/cli/<id>.jsonl` + `<id>.json`): peer-only shape, strict reader
def jline(kind: str, *content: dict[str, Any], at: float | None = None) -> str:
    data: dict[str, Any] = {"content": list(content)}
    if at is not None:
        data["meta"] = {"timestamp": at}
    return json.dumps({"kind": kind, "data": data})


def session_files(folder: Path, lines: list[str], *, sidecar: dict[str, Any] | None = None, end: str = "\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "0b7d1f0e-0000-4000-8000-000000000001.jsonl"
    path.write_text("\n".join(lines) + end)
    if sidecar is not None:
        path.with_suffix(".json").write_text(json.dumps(sidecar))
    return path


JSONL_LINES = [
    jline("Prompt", {"kind": "text", "data": "what is in here"}, at=1767348001),
    jline("AssistantMessage", {"kind": "text", "data": "Looking."},
          {"kind": "toolUse", "data": {"toolUseId": "tu_1", "name": "read", "input": {"path": "."}}}),
    jline("ToolResults", {"kind": "toolResult", "data": {"toolUseId": "tu_1", "status": "Success",
                                                         "content": [{"kind": "text", "data": "a.txt"}]}}),
    jline("AssistantMessage", {"kind": "text", "data": "One file: a.txt."}),
]  # fmt: skip
SIDECAR = {"session_id": "0b7d1f0e-0000-4000-8000-000000000001", "cwd": "/home/u/proj", "title": "Listing",
           "created_at": "2026-01-02T10:00:00Z", "updated_at": "2026-01-02T10:00:09Z"}  # fmt: skip


def test_a_jsonl_session_loads_prompts_answers_and_tool_results(tmp_path: Path) -> None:
    folder = tmp_path / ".kiro" / "sessions" / "cli"
    session_files(folder, JSONL_LINES, sidecar=SIDECAR)
    [source] = list(kiro.discover(folder))
    session = only(list(read_source(source, Limits())))
    assert [(t.role, t.text, t.index) for t in session.turns] == [
        (Role.USER, "what is in here", 0),
        (Role.ASSISTANT, "Looking.", 1),
        (Role.ASSISTANT, "One file: a.txt.", 3),
    ]
    assert [(c.call_id, c.turn_index, c.output, c.is_error) for c in session.tool_calls] == [
        ("tu_1", 1, "a.txt", False)
    ]
    assert session.session_id == "kiro-0b7d1f0e-0000-4000-8000-000000000001"
    assert (session.cwd, session.title) == ("/home/u/proj", "Listing")
    assert session.started_at == datetime(2026, 1, 2, 10, 0, 1, tzinfo=UTC)
    assert session.census[("line/ToolResults", "", Disposition.TOOL)] == 1


def test_an_unknown_line_or_content_kind_in_a_jsonl_session_is_unsupported_format(tmp_path: Path) -> None:
    folder = tmp_path / ".kiro" / "sessions" / "cli"
    for odd in (jline("Compaction", {"kind": "text", "data": "x"}), jline("Prompt", {"kind": "image", "data": "x"})):
        session_files(folder, [*JSONL_LINES, odd], sidecar=SIDECAR)
        [source] = list(kiro.discover(folder))
        rejected = only(list(read_source(source, Limits())))
        assert isinstance(rejected, Rejected) and rejected.code is RejectCode.UNSUPPORTED_FORMAT


def test_a_jsonl_session_being_written_is_deferred(tmp_path: Path) -> None:
    folder = tmp_path / ".kiro" / "sessions" / "cli"
    session_files(folder, [*JSONL_LINES, '{"kind": "Prom'], sidecar=SIDECAR, end="")
    [source] = list(kiro.discover(folder))
    outcome = only(list(read_source(source, Limits())))
    assert isinstance(outcome, Deferred)


def test_jsonl_files_are_discovered_only_in_a_sessions_cli_folder(tmp_path: Path) -> None:
    session_files(tmp_path / "elsewhere", JSONL_LINES, sidecar=SIDECAR)
    assert list(kiro.discover(tmp_path / "elsewhere")) == []
    assert kiro.default_roots(tmp_path, {})[-1] == tmp_path / ".kiro" / "sessions" / "cli"


def test_explicit_paths_are_claimed_only_in_kiros_own_folders(tmp_path: Path) -> None:
    assert kiro.claims(tmp_path / ".local" / "share" / "kiro-cli" / "data.sqlite3") is Claim.FOLDER
    assert kiro.claims(tmp_path / ".local" / "share" / "amazon-q" / "data.sqlite3") is Claim.FOLDER
    assert kiro.claims(tmp_path / ".kiro" / "sessions" / "cli" / "a.jsonl") is Claim.FOLDER
    assert kiro.claims(tmp_path / "other" / "data.sqlite3") is None
    assert kiro.claims(tmp_path / "saved.json") is None
