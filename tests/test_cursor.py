"""Cursor agent transcripts (docs/agents/cursor.md): one test per rule, on small inline transcripts."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors import cursor
from extractors.cursor import parse
from extractors.cursor.parse import _CURSOR_CLOCK, _CURSOR_TAG, _WALL_CLOCK, tag_time
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Disposition, LinkKind, Loaded, Outcome, Rejected, Session, Source
from extractors.registry import detect_format, read_source
from tests.support import SETTLED

AGENT = Agent("cursor")
S = "7f3c1a2e-0b4d-4c5e-9f61-2a3b4c5d6e7f"
CHILD = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
TAG = "<timestamp>Sunday, Sep 20, 2026, 12:31 AM (UTC+3)</timestamp>"
AT_TAG = datetime(2026, 9, 19, 21, 31, tzinfo=UTC)
MTIME = 1_790_000_000  # 2026-09-21T...: a file time, far from the tags


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "message": {"content": [{"type": "text", "text": text}]}}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "message": {"content": list(blocks)}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": args}


def transcripts(home: Path) -> Path:
    return home / ".cursor" / "projects" / "home-u-proj" / "agent-transcripts"


def write(path: Path, rows: list[dict[str, Any]] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = rows if isinstance(rows, str) else "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(body, encoding="utf-8")
    os.utime(path, (MTIME, MTIME))
    return path


def nested(home: Path, rows: list[dict[str, Any]] | str, sid: str = S) -> Path:
    return write(transcripts(home) / sid / f"{sid}.jsonl", rows)


def outcomes(path: Path) -> list[Outcome]:
    st = path.stat()
    return list(read_source(Source(AGENT, str(path), st.st_size, st.st_mtime_ns), SETTLED))


def one(path: Path) -> Session:
    [outcome] = outcomes(path)
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def rejected(path: Path) -> Rejected:
    [outcome] = outcomes(path)
    assert isinstance(outcome, Rejected), outcome
    return outcome


def said(session: Session) -> list[tuple[str, str]]:
    return [(t.role.value, t.text) for t in session.turns]


def census(session: Session) -> dict[tuple[str, Disposition], int]:
    return {(kind, disposition): n for (kind, _, disposition), n in session.census.items()}


# --- a person's turn -------------------------------------------------------------------------------------------------


def test_the_persons_turn_is_the_interior_of_user_query_without_the_tag_or_the_context(tmp_path: Path) -> None:
    context = "<context>\n<open_files>a.py</open_files>\n</context>"
    body = f"{TAG}\n<user_query>\nfix @src/app.py:10-12 please\n</user_query>\n{context}"
    session = one(nested(tmp_path, [user(body), assistant(text("Done."))]))
    assert said(session) == [("user", "fix @src/app.py:10-12 please"), ("assistant", "Done.")]
    assert census(session)[("user/user_query", Disposition.TURN)] == 1


@pytest.mark.parametrize(
    "injected",
    [
        "<system_reminder>\nkeep answers short\n</system_reminder>",
        "<user_info>OS: linux</user_info>",
        "<context>x</context>",
    ],
)
def test_a_user_row_of_injected_context_is_harness_never_a_turn(tmp_path: Path, injected: str) -> None:
    session = one(nested(tmp_path, [user(injected), user("<user_query>hi</user_query>"), assistant(text("Hello."))]))
    assert said(session) == [("user", "hi"), ("assistant", "Hello.")]
    assert census(session)[("user/injected", Disposition.HARNESS)] == 1


def test_a_user_row_without_user_query_is_the_persons_text_without_its_tag(tmp_path: Path) -> None:
    session = one(nested(tmp_path, [user(f"{TAG}\nList the files."), assistant(text("Two files."))]))
    assert said(session)[0] == ("user", "List the files.")
    assert session.turns[0].timestamp == AT_TAG
    assert census(session)[("user/untagged", Disposition.TURN)] == 1


def test_a_user_row_empty_without_redacted_markers_is_skipped(tmp_path: Path) -> None:
    session = one(nested(tmp_path, [user("<user_query>[REDACTED]</user_query>"), assistant(text("ok"))]))
    assert said(session) == [("assistant", "ok")]
    assert census(session)[("user/empty", Disposition.SKIPPED)] == 1


# --- a reply ---------------------------------------------------------------------------------------------------------


def test_consecutive_assistant_rows_are_one_reply_at_the_line_of_its_first_row(tmp_path: Path) -> None:
    rows = [
        user("<user_query>why?</user_query>"),
        assistant(text("[REDACTED]")),
        assistant(text("Reading.\n\n[REDACTED]"), tool("Read", path="a.py")),
        assistant(text("[REDACTED]")),
        assistant(text("Because.\n\n[REDACTED]")),
        user("<user_query>thanks</user_query>"),
        assistant(text("You are welcome.")),
    ]
    session = one(nested(tmp_path, rows))
    assert said(session) == [
        ("user", "why?"),
        ("assistant", "Reading.\n\nBecause."),
        ("user", "thanks"),
        ("assistant", "You are welcome."),
    ]
    assert [t.index for t in session.turns] == [0, 1, 5, 6]
    assert all(t.timestamp is None for t in session.turns)


def test_rows_of_only_redacted_are_no_text_and_are_counted_as_harness(tmp_path: Path) -> None:
    rows = [user("<user_query>go</user_query>"), assistant(text("[REDACTED]")), assistant(text("[REDACTED]"))]
    session = one(nested(tmp_path, [*rows, assistant(text("Done. [REDACTED]"))]))
    assert said(session) == [("user", "go"), ("assistant", "Done.")]
    assert census(session)[("assistant/redacted", Disposition.HARNESS)] == 2
    assert census(session)[("assistant", Disposition.TURN)] == 1


def test_tool_use_blocks_get_ids_from_their_line_and_block_and_belong_to_the_reply(tmp_path: Path) -> None:
    rows = [
        user("<user_query>go</user_query>"),
        assistant(text("[REDACTED]"), tool("Grep", path="/p", pattern="x"), tool("Read", path="a.py")),
        assistant(text("[REDACTED]"), tool("Shell", command="make")),
    ]
    session = one(nested(tmp_path, rows))
    assert [(c.call_id, c.turn_index, c.name) for c in session.tool_calls] == [
        ("1.1", 1, "Grep"),
        ("1.2", 1, "Read"),
        ("2.1", 1, "Shell"),
    ]
    assert json.loads(session.tool_calls[0].input or "") == {"path": "/p", "pattern": "x"}
    assert all(c.output is None for c in session.tool_calls)  # the transcripts keep no results
    assert said(session) == [("user", "go")]  # a reply of [REDACTED] and calls only is no turn; its calls stay
    assert census(session)[("assistant/tool_use", Disposition.TOOL)] == 2


def test_turn_ended_is_a_marker_counted_by_status_that_ends_the_reply(tmp_path: Path) -> None:
    rows = [
        user("<user_query>a</user_query>"),
        assistant(text("one")),
        {"type": "turn_ended", "status": "success"},
        assistant(text("two")),
        {"type": "turn_ended", "status": "error", "error": "User aborted request."},
    ]
    session = one(nested(tmp_path, rows))
    assert said(session) == [("user", "a"), ("assistant", "one"), ("assistant", "two")]
    assert census(session)[("turn_ended/success", Disposition.SKIPPED)] == 1
    assert census(session)[("turn_ended/error", Disposition.SKIPPED)] == 1


def test_tool_results_join_the_oldest_open_call_and_do_not_end_the_reply(tmp_path: Path) -> None:
    result = {
        "role": "user",
        "message": {"content": [{"type": "tool_result", "content": [text("file1\nfile2")], "is_error": False}]},
    }
    rows = [
        user("<user_query>ls</user_query>"),
        assistant(text("Listing."), tool("Shell", command="ls"), tool("Shell", command="pwd")),
        result,
        assistant(text("Two files.")),
    ]
    session = one(nested(tmp_path, rows))
    assert said(session) == [("user", "ls"), ("assistant", "Listing.\n\nTwo files.")]
    assert [(c.output, c.is_error) for c in session.tool_calls] == [("file1\nfile2", False), (None, None)]
    assert census(session)[("user/tool_result", Disposition.TOOL)] == 1


def test_an_unknown_type_or_role_is_skipped_under_its_own_name(tmp_path: Path) -> None:
    rows = [user("<user_query>a</user_query>"), {"type": "hologram"}, {"role": "system", "message": {}}]
    session = one(nested(tmp_path, [*rows, assistant(text("b"))]))
    assert said(session) == [("user", "a"), ("assistant", "b")]
    assert census(session)[("hologram", Disposition.SKIPPED)] == 1
    assert census(session)[("role/system", Disposition.SKIPPED)] == 1


def test_there_is_no_usage_and_no_model(tmp_path: Path) -> None:
    session = one(nested(tmp_path, [user("<user_query>a</user_query>"), assistant(text("b"))]))
    assert session.usage == () and session.models == ()
    assert all(t.model is None for t in session.turns)


# --- times -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Sunday, Sep 20, 2026, 12:31 AM (UTC+3)", datetime(2026, 9, 19, 21, 31, tzinfo=UTC)),
        ("Tuesday, May 26, 2026, 10:57 PM (UTC+2)", datetime(2026, 5, 26, 20, 57, tzinfo=UTC)),
        ("Friday, Aug 21, 2026, 2:00 PM (UTC)", datetime(2026, 8, 21, 14, 0, tzinfo=UTC)),
        ("Monday, Jun 22, 2026, 12:09 PM (UTC-5)", datetime(2026, 6, 22, 17, 9, tzinfo=UTC)),
        ("Monday, Jun 22, 2026, 11:09 AM (UTC+5:30)", datetime(2026, 6, 22, 5, 39, tzinfo=UTC)),
        ("2026-01-02T03:04:05.000Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("Someday, Foo 40, 2026, 99:00 PM (UTC+3)", None),
        ("yesterday", None),
    ],
)
def test_the_timestamp_tag_is_the_local_wall_clock_with_its_offset(body: str, expected: datetime | None) -> None:
    assert tag_time(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # a day's local midnight is read once and the time of day added (years 1991-2198): the same instants
        ("Mon, Dec 31, 2198, 11:59:59 PM (UTC-23:59)", datetime(2199, 1, 1, 23, 58, 59, tzinfo=UTC)),
        ("Tue, Jan 1, 1991, 12:00 AM (UTC+23:59)", datetime(1990, 12, 31, 0, 1, tzinfo=UTC)),
        ("Thu, Feb 29, 2024, 1:05 PM (GMT-05:30)", datetime(2024, 2, 29, 18, 35, tzinfo=UTC)),
        ("Thu, Feb 29, 2025, 1:05 PM (UTC)", None),  # not a date
        ("Thu, Feb 28, 2025, 1:60 PM (UTC)", None),  # not a time
        ("Thu, Feb 28, 2025, 1:05:60 PM (UTC)", None),
        ("Thu, Feb 28, 2025, 13:05 PM (UTC)", None),
        ("Thu, Feb 28, 2025, 13:05 (UTC+24)", None),
        # other years go through `datetime` whole: kept when their instant lies in the usable years
        ("Mon, Jan 1, 1990, 10:00 AM (UTC+3)", datetime(1990, 1, 1, 7, 0, tzinfo=UTC)),
        ("Mon, Jan 1, 1990, 1:00 AM (UTC+3)", None),
        ("Wed, Dec 31, 2199, 11:00 PM (UTC+3)", datetime(2199, 12, 31, 20, 0, tzinfo=UTC)),
        ("Wed, Dec 31, 2199, 11:00 PM (UTC-3)", None),
        ("Mon, Jan 1, 0001, 10:00 AM (UTC+3)", None),
    ],
)
def test_a_tag_time_is_the_same_instant_whichever_way_it_is_computed(body: str, expected: datetime | None) -> None:
    got = tag_time(body)
    assert got == expected
    assert got is None or got.tzinfo is UTC


@pytest.mark.parametrize(
    "body",
    [
        "Sunday, Sep 20, 2026, 12:31 AM (UTC+3)",
        "Monday, Jun 22, 2026, 9:09 PM (UTC-12)",
        "Friday, Aug 21, 2026, 02:00 PM (UTC)",
        "Sun, September 31, 2026, 13:00 PM (UTC-24)",  # groups of a time that is then no time: None either way
    ],
)
def test_the_form_cursor_writes_is_read_to_the_groups_of_the_general_pattern(body: str) -> None:
    fast, general = _CURSOR_CLOCK.fullmatch(body), _WALL_CLOCK.match(body)
    assert fast is not None and general is not None
    month, day, year, hour, minute, second, ampm, sign, oh, om = general.groups()
    assert second is None and om is None
    assert fast.groups() == (month, day, year, hour, minute, ampm, sign, oh)


@pytest.mark.parametrize(
    "body",
    [
        "Sunday, Sep 20, 2026, 12:31 AM (UTC+3)",
        "Monday, Jun 22, 2026, 09:09 PM (UTC-12)",
        "Friday, Aug 21, 2026, 0:00 PM (UTC)",
        "Sun, September 31, 2026, 13:60 PM (UTC-24)",
        "Sunday, Sep 20, 2026, 12:31 AM (UTC+3:00)",  # neither: offset minutes are `_WALL_CLOCK`'s
        "Sunday, Sep 20, 2026, 12:31:07 AM (UTC+3)",
        "Sunday, Sep 20, 2026, 12:31 am (UTC+3)",
    ],
)
def test_the_tag_pattern_reads_the_strings_of_cursors_form_to_its_day_clock_and_offset(body: str) -> None:
    tag, clock = _CURSOR_TAG.fullmatch(body), _CURSOR_CLOCK.fullmatch(body)
    assert (tag is None) == (clock is None)
    if tag is not None and clock is not None:
        month, day, year, hour, minute, half, sign, oh = clock.groups()
        assert tag.groups() == (
            f"{month} {day}, {year}",
            f"{hour}:{minute} {half[0]}",
            None if sign is None else sign + oh,
        )


def test_a_tag_time_is_the_same_once_its_day_is_read_and_after_the_days_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bodies = [
        f"Sunday, {day}, {clock} (UTC{zone})"
        for day in ("Sep 20, 2026", "Feb 29, 2025", "Jan 1, 2199")
        for clock in ("12:31 AM", "01:59 PM", "0:31 AM", "11:60 PM")
        for zone in ("+3", "-03", "", "+24")
    ]
    monkeypatch.setattr(parse, "_DAYS", {})
    first = [tag_time(b) for b in bodies]
    assert first == [parse._tag_time(b) for b in bodies]  # the general way, without `_DAYS` and `_CLOCKS`
    assert [tag_time(b) for b in bodies] == first  # each day from `_DAYS` now
    monkeypatch.setattr(parse, "_DAYS", {})
    monkeypatch.setattr(parse, "_MAX_DAYS", 2)
    assert [tag_time(b) for b in reversed(bodies)] == first[::-1] and len(parse._DAYS) <= 2
    assert first[0] == AT_TAG and first[0].tzinfo is UTC and first.count(None) < len(bodies)


def test_turn_times_and_the_session_times_come_only_from_the_tags(tmp_path: Path) -> None:
    later = "<timestamp>Sunday, Sep 20, 2026, 12:47 AM (UTC+3)</timestamp>"
    rows = [
        user(f"{TAG}\n<user_query>a</user_query>"),
        assistant(text("b")),
        user(f"{later}\n<user_query>c</user_query>"),
        assistant(text("d")),
    ]
    session = one(nested(tmp_path, rows))
    assert [t.timestamp for t in session.turns] == [AT_TAG, None, datetime(2026, 9, 19, 21, 47, tzinfo=UTC), None]
    assert (session.started_at, session.ended_at) == (AT_TAG, datetime(2026, 9, 19, 21, 47, tzinfo=UTC))
    assert session.started_at_inferred is False


def test_without_any_tag_the_start_is_the_file_mtime_marked_inferred(tmp_path: Path) -> None:
    session = one(nested(tmp_path, [user("<user_query>a</user_query>"), assistant(text("b"))]))
    assert session.started_at == datetime.fromtimestamp(MTIME, UTC)
    assert session.started_at_inferred is True
    assert session.ended_at is None
    assert all(t.timestamp is None for t in session.turns)


def test_one_tag_gives_a_start_and_no_end(tmp_path: Path) -> None:
    session = one(nested(tmp_path, [user(f"{TAG}\n<user_query>a</user_query>"), assistant(text("b"))]))
    assert (session.started_at, session.ended_at, session.started_at_inferred) == (AT_TAG, None, False)


# --- identity and lineage ----------------------------------------------------------------------------------------


def test_a_subagent_is_linked_to_the_folder_that_holds_it_and_its_first_prompt_is_harness(tmp_path: Path) -> None:
    rows = [
        user(f"{TAG}\n<user_query>\nFind where foo is imported.\n</user_query>"),
        assistant(tool("Grep", path="/p", pattern="foo")),
        assistant(text("In tests/test_app.py.")),
        user("<user_query>\nand bar?\n</user_query>"),
        assistant(text("Nowhere.")),
    ]
    session = one(write(transcripts(tmp_path) / S / "subagents" / f"{CHILD}.jsonl", rows))
    assert session.session_id == f"cursor-{CHILD}"
    assert session.parent_session_id == f"cursor-{S}"
    assert [(link.other_session_id, link.kind) for link in session.links] == [(f"cursor-{S}", LinkKind.SUBAGENT)]
    assert said(session) == [("assistant", "In tests/test_app.py."), ("user", "and bar?"), ("assistant", "Nowhere.")]
    assert session.started_at == AT_TAG  # the delegation prompt's tag still dates the session
    assert census(session)[("user/subagent_prompt", Disposition.HARNESS)] == 1


def test_the_objects_made_in_line_are_the_models_own_with_every_field_set(tmp_path: Path) -> None:
    # parse.py makes the calls, the turns and the Session without their __init__ (`_Call`, `_Turn`, `_Session`):
    # each must be what its class's own __init__ makes of the same fields, none left unset.
    rows = [user(f"{TAG}\n<user_query>a</user_query>"), assistant(text("b"), tool("Shell", command="ls"))]
    session = one(nested(tmp_path, rows))
    values: list[Any] = [session, *session.turns, *session.tool_calls]
    assert [type(v).__name__ for v in values] == ["Session", "Turn", "Turn", "ToolCall"]
    for value in values:
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # an unset slot: AttributeError
        assert set(fields) == set(type(value).__slots__)
        assert type(value)(**fields) == value


def test_the_session_id_is_the_file_stem_or_the_nested_folder(tmp_path: Path) -> None:
    rows = [user("<user_query>a</user_query>")]
    assert one(write(transcripts(tmp_path) / f"{S}.jsonl", rows)).session_id == f"cursor-{S}"
    assert one(write(transcripts(tmp_path) / CHILD / "transcript.jsonl", rows)).session_id == f"cursor-{CHILD}"


# --- rejections ------------------------------------------------------------------------------------------------------


def test_a_claude_code_file_is_rejected_as_unsupported_format_naming_the_format(tmp_path: Path) -> None:
    claude = {
        "type": "user",
        "uuid": "u1",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "hi"},
    }
    problem = rejected(nested(tmp_path, [claude]))
    assert problem.code is RejectCode.UNSUPPORTED_FORMAT and "--format claude" in problem.detail


def test_a_transcript_of_markers_and_redactions_only_is_no_conversation(tmp_path: Path) -> None:
    rows = [assistant(text("[REDACTED]")), {"type": "turn_ended", "status": "success"}]
    assert rejected(nested(tmp_path, rows)).code is RejectCode.NO_CONVERSATION


@pytest.mark.parametrize(
    "row",
    [
        {"role": "user", "message": "hi"},
        {"role": "user", "message": {"content": 5}},
        {"role": "assistant", "message": {"content": [{"type": "tool_use", "input": {}}]}},
        {"role": "assistant", "message": {"content": ["text"]}},
    ],
)
def test_a_known_row_of_the_wrong_shape_is_bad_shape(tmp_path: Path, row: dict[str, Any]) -> None:
    assert rejected(nested(tmp_path, [row])).code is RejectCode.BAD_SHAPE


# --- the legacy .txt form --------------------------------------------------------------------------------------------

LEGACY = """user:
<user_query>
rename the helper to load_config
</user_query>

assistant:
[Thinking] The helper lives in src/config.py.
  it is used twice
[Tool call] StrReplace
  path: src/config.py
  old_string: def load(
[Tool result] StrReplace
  ok
Renamed it.
[Tool call] Shell
  {"command": "make test"}

assistant:
Tests pass.
[REDACTED]
user:
thanks
"""


def test_a_legacy_txt_transcript_gives_turns_tool_calls_and_results(tmp_path: Path) -> None:
    session = one(write(transcripts(tmp_path) / f"{S}.txt", LEGACY))
    assert said(session) == [
        ("user", "rename the helper to load_config"),
        ("assistant", "Renamed it.\n\nTests pass."),
        ("user", "thanks"),
    ]
    assert [t.index for t in session.turns] == [0, 5, 20]
    calls = [(c.call_id, c.turn_index, c.name, c.input, c.output) for c in session.tool_calls]
    assert calls == [
        ("5.8", 5, "StrReplace", '{"path":"src/config.py","old_string":"def load("}', "ok"),
        ("5.14", 5, "Shell", '{"command": "make test"}', None),
    ]
    assert session.started_at_inferred is True
    assert {version for _, version, _ in session.census} == {"txt"}


def test_an_empty_tool_result_body_leaves_the_call_without_output(tmp_path: Path) -> None:
    legacy = "user:\nread it\n\nassistant:\n[Tool call] Read\n  path: a.json\n\n[Tool result] Read\n\nassistant:\n"
    legacy += "It is empty.\n"
    session = one(write(transcripts(tmp_path) / f"{S}.txt", legacy))
    assert said(session) == [("user", "read it"), ("assistant", "It is empty.")]
    assert [(c.name, c.input, c.output) for c in session.tool_calls] == [("Read", '{"path":"a.json"}', None)]


def test_a_recent_txt_without_a_final_newline_is_deferred(tmp_path: Path) -> None:
    path = transcripts(tmp_path) / f"{S}.txt"
    path.parent.mkdir(parents=True)
    path.write_text("user:\n<user_query>hi</user_query>", encoding="utf-8")  # mtime: now
    st = path.stat()
    [outcome] = read_source(
        Source(AGENT, str(path), st.st_size, st.st_mtime_ns), dataclasses.replace(SETTLED, settle_seconds=600)
    )
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.WRITE_IN_PROGRESS


def test_a_txt_line_over_the_limit_is_rejected_before_it_is_held(tmp_path: Path) -> None:
    path = write(transcripts(tmp_path) / f"{S}.txt", "user:\n" + "x" * 5000 + "\n")
    st = path.stat()
    tiny = dataclasses.replace(SETTLED, max_line_bytes=100)
    [outcome] = read_source(Source(AGENT, str(path), st.st_size, st.st_mtime_ns), tiny)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


# --- discovery, roots and claims ---------------------------------------------------------------------------------


def layout(home: Path) -> Path:
    """Every layout and the files beside them that are not sessions; returns the projects folder."""
    rows = [user("<user_query>a</user_query>")]
    folder = transcripts(home)
    nested(home, rows)
    write(folder / S / "subagents" / f"{CHILD}.jsonl", rows)
    write(folder / "11111111-1111-4111-8111-111111111111.jsonl", rows)
    write(folder / "11111111-1111-4111-8111-111111111111.txt", LEGACY)  # the .jsonl of the same session wins
    write(folder / "22222222-2222-4222-8222-222222222222.txt", LEGACY)
    write(folder / S / "notes.jsonl", rows)  # not the folder's own name: not a session
    write(folder.parent / "terminals" / "3.txt", "$ make\n")
    write(folder.parent / "worker.log", "started\n")
    write(folder.parent / "mcps" / "x" / "agent-transcripts.jsonl", rows)
    write(home / ".cursor" / "projects" / "empty-window" / "agent-transcripts" / f"{S}.jsonl", rows)
    write(home / ".cursor" / "chats" / "abc" / S / "meta.json", "{}")
    return home / ".cursor" / "projects"


def found(root: Path, base: Path) -> list[str]:
    return sorted(os.path.relpath(s.path, base) for s in cursor.discover(root))


SESSIONS = [
    f"home-u-proj/agent-transcripts/{S}/subagents/{CHILD}.jsonl",
    f"home-u-proj/agent-transcripts/{S}/{S}.jsonl",
    "home-u-proj/agent-transcripts/11111111-1111-4111-8111-111111111111.jsonl",
    "home-u-proj/agent-transcripts/22222222-2222-4222-8222-222222222222.txt",
]


def test_discovery_lists_every_layout_prefers_jsonl_and_skips_what_is_not_a_session(tmp_path: Path) -> None:
    projects = layout(tmp_path)
    assert found(projects, projects) == sorted(SESSIONS)


@pytest.mark.parametrize(
    "where", [".cursor", ".cursor/projects/home-u-proj", ".cursor/projects/home-u-proj/agent-transcripts"]
)
def test_discovery_takes_the_cursor_home_a_project_or_an_agent_transcripts_folder(tmp_path: Path, where: str) -> None:
    projects = layout(tmp_path)
    expected = sorted(SESSIONS) if where == ".cursor" else sorted(s for s in SESSIONS if s.startswith("home-u-proj/"))
    assert found(tmp_path / where, projects) == expected


def test_default_roots_are_the_cursor_home_and_cursor_config_dir_before_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    default = home / ".cursor" / "projects"
    assert cursor.default_roots(home, {}) == [default]
    assert cursor.default_roots(home, {"CURSOR_CONFIG_DIR": "/srv/cursor"}) == [Path("/srv/cursor/projects"), default]
    assert cursor.default_roots(home, {"CURSOR_CONFIG_DIR": "~/alt"}) == [home / "alt" / "projects", default]
    assert cursor.default_roots(home, {"CURSOR_CONFIG_DIR": str(home / ".cursor")}) == [default]
    assert cursor.default_roots(home, {"CURSOR_CONFIG_DIR": "  "}) == [default]


def test_a_path_under_cursor_folders_is_cursors_and_a_claude_path_is_not(tmp_path: Path) -> None:
    assert detect_format(tmp_path / ".cursor" / "projects" / "p" / "agent-transcripts" / f"{S}.jsonl") == AGENT
    assert detect_format(tmp_path / "copy" / "agent-transcripts" / f"{S}.jsonl") == AGENT
    assert detect_format(tmp_path / ".claude" / "projects" / "-home-u" / f"{S}.jsonl") == Agent("claude")
    assert detect_format(tmp_path / "x.jsonl", "cursor-agent") == AGENT
