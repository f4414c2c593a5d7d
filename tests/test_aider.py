"""Aider's `.aider.chat.history.md`: one test per rule of docs/agents/aider.md, each on a small hand-written history."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors.aider import default_roots, discover, tables
from extractors.bounded import Limits, text_lines
from extractors.model import Deferred, Disposition, Loaded, Outcome, Rejected, Role, Session, Source
from extractors.registry import detect_format, read_source
from tests.support import SETTLED

H = "  "  # the hard break aider ends its own lines with
BANNER = f"> Aider v0.86.1{H}\n> Main model: anthropic/claude-sonnet-4-5 with diff edit format{H}\n"


def run(when: str = "2026-01-02 10:00:00", body: str = f"\n#### hello{H}\n\nHi.\n\n") -> str:
    return f"\n# aider chat started at {when}\n\n{BANNER}{body}"


def history(tmp_path: Path, text: str, name: str = ".aider.chat.history.md") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def read(path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    st = path.stat()
    return list(read_source(Source("aider", str(path), st.st_size, st.st_mtime_ns), limits))  # type: ignore[arg-type]


def sessions(path: Path) -> list[Session]:
    outcomes = read(path)
    assert all(isinstance(o, Loaded) for o in outcomes), outcomes
    return [o.session for o in outcomes if isinstance(o, Loaded)]


def only(path: Path) -> Session:
    [session] = sessions(path)
    return session


def said(session: Session) -> list[tuple[str, str]]:
    return [(t.role.value, t.text) for t in session.turns]


def census(session: Session, kind: str) -> tuple[Disposition, int]:
    [(disposition, n)] = [(d, n) for (k, _, d), n in session.census.items() if k == kind]
    return disposition, n


# --- the person's turns ----------------------------------------------------------------------------------------------


def test_consecutive_prompt_lines_are_one_persons_turn(tmp_path: Path) -> None:
    body = f"\n#### fix the parser{H}\n####   {H}\n#### \tand its tests{H}\n\nDone.\n\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "fix the parser\n  \n\tand its tests"), ("assistant", "Done.")]
    assert session.turns[0].index == 6  # the first `####` line, counted from the file's first line


def test_a_typed_command_is_one_turn_as_typed(tmp_path: Path) -> None:
    body = f"\n#### /add src/a.py{H}\n> Added src/a.py to the chat{H}\n\n#### !ls{H}\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "/add src/a.py"), ("user", "!ls")]
    assert census(session, "command") == (Disposition.TURN, 2)


def test_aiders_echo_of_a_yes_no_question_is_not_a_persons_turn(tmp_path: Path) -> None:
    question = "Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: skip"
    body = f"\n#### hello{H}\n\nHi.\n\n> a.py{H}\n\n#### {question}{H}\n> b.py{H}\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "hello"), ("assistant", "Hi.")]
    assert census(session, "confirm_answer") == (Disposition.HARNESS, 1)


def test_the_architects_reply_handed_to_the_editor_is_not_a_persons_turn(tmp_path: Path) -> None:
    plan = "# Plan\n\n1. Add the flag.  \n2. Test it."
    handed = "".join(f"#### {line}{H}\n" for line in plan.splitlines())
    body = f"\n#### plan a flag{H}\n\n{plan}\n\n> Tokens: 1.0k sent, 20 received.{H}\n\n{handed}\nsrc/a.py edited.\n\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "plan a flag"), ("assistant", plan), ("assistant", "src/a.py edited.")]
    assert census(session, "architect_handoff") == (Disposition.HARNESS, 4)


def test_a_hand_off_of_a_reply_whose_first_line_is_indented_is_not_a_persons_turn(tmp_path: Path) -> None:
    # The usual exchange (a usage report with its cost after the reply) is taken in one match: its reply's first
    # character that is not a space is what a hand-off is told by, as for a reply read a line at a time.
    usage = f"> Tokens: 1.0k sent, 20 received. Cost: $0.01 message, $0.02 session.{H}"
    body = f"\n#### plan it{H}\n\n\t- add the flag\n\n{usage}\n\n#### \t- add the flag{H}\n\nDone.\n\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "plan it"), ("assistant", "\t- add the flag"), ("assistant", "Done.")]
    assert census(session, "architect_handoff") == (Disposition.HARNESS, 1)


def test_the_message_of_a_command_logged_again_is_not_a_second_turn(tmp_path: Path) -> None:
    body = f"\n#### /code add a flag{H}\n\n#### add a flag{H}\n\nDone.\n\n#### add a flag{H}\n\nAgain.\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [
        ("user", "/code add a flag"),
        ("assistant", "Done."),
        ("user", "add a flag"),  # typed again later: the person's
        ("assistant", "Again."),
    ]
    assert census(session, "command_message") == (Disposition.HARNESS, 1)


def test_an_empty_input_is_skipped(tmp_path: Path) -> None:
    session = only(history(tmp_path, run(body=f"\n#### <blank>{H}\n\n#### hello{H}\n")))
    assert said(session) == [("user", "hello")]
    assert census(session, "blank_input") == (Disposition.SKIPPED, 1)


# --- harness and the model's reply -----------------------------------------------------------------------------------


def test_aiders_output_and_its_continuation_lines_are_harness(tmp_path: Path) -> None:
    body = f"\n#### hello{H}\n> Warning: first line\nsecond line{H}\n\nHi.\n\n> Applied edit to a.py{H}\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "hello"), ("assistant", "Hi.")]
    assert census(session, "tool_output") == (Disposition.HARNESS, 3)


def test_a_message_of_aiders_of_several_lines_with_blank_lines_is_harness_to_its_hard_break(tmp_path: Path) -> None:
    failed = (
        "> # 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch: in a.py\n<<<<<<< SEARCH\nx = 1"
    )
    body = f"\n#### edit a.py{H}\n\nHere.\n\n> Tokens: 1.0k sent, 5 received.{H}\n{failed}{H}\n\nFixed.\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "edit a.py"), ("assistant", "Here."), ("assistant", "Fixed.")]
    assert census(session, "tool_output") == (Disposition.HARNESS, 4)


def test_a_heading_and_a_quote_in_a_reply_stay_in_the_reply(tmp_path: Path) -> None:
    reply = "#### Steps\n\n> Note: keep it short.\n\nDone."
    session = only(history(tmp_path, run(body=f"\n#### hello{H}\n\n{reply}\n\n")))
    assert said(session) == [("user", "hello"), ("assistant", reply)]


def test_a_line_of_spaces_alone_in_a_reply_is_a_blank_line_whatever_the_spaces(tmp_path: Path) -> None:
    # Spaces as `str.isspace` takes them, the reader looking for them in the bytes (tables.SPACE_BYTES): `\u3000`,
    # `\x1c`, `\u2028` (no line end where the file's lines are cut at newlines alone).
    reply = "First.\n\u3000 \nSecond.\n\x1c\u2028\nThird."
    session = only(history(tmp_path, run(body=f"\n#### hello{H}\n\n{reply}\n\n")))
    assert said(session) == [("user", "hello"), ("assistant", "First.\n\nSecond.\n\nThird.")]
    assert census(session, "assistant") == (Disposition.TURN, 3)


def test_the_blank_line_pattern_takes_the_characters_str_isspace_takes() -> None:
    spaces = re.compile(tables.SPACE_BYTES + rb"+\Z")
    wrong = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if c != 0x0A and not 0xD800 <= c < 0xE000 and bool(spaces.match(chr(c).encode())) != chr(c).isspace()
    ]
    assert wrong == []


def test_reasoning_is_cut_from_the_reply_and_counted_as_harness(tmp_path: Path) -> None:
    tag = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"
    body = f"\n#### hello{H}\n\n<{tag}>\n\nThe person greets me.\n\n</{tag}>\n\nHi.\n\n"
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [("user", "hello"), ("assistant", "Hi.")]
    assert census(session, "reasoning") == (Disposition.HARNESS, 3)


def test_think_tags_are_reasoning_and_an_unclosed_one_ends_at_aiders_next_line(tmp_path: Path) -> None:
    body = (
        f"\n#### one{H}\n\n<think>\nLet me see.\n</think>\n\nA.\n\n"
        f"#### two{H}\n\n<think>\nHmm, a rate limit cuts me\n> The API provider has rate limited you.{H}\n"
        f"\n#### three{H}\n\nC.\n"
    )
    session = only(history(tmp_path, run(body=body)))
    assert said(session) == [
        ("user", "one"),
        ("assistant", "A."),
        ("user", "two"),
        ("user", "three"),
        ("assistant", "C."),
    ]
    assert census(session, "reasoning") == (Disposition.HARNESS, 5)


def test_the_banner_gives_versions_models_and_the_working_directory(tmp_path: Path) -> None:
    banner = f"> Cur working dir: /home/u/proj/sub{H}\n> Git working dir: /home/u/proj{H}\n"
    body = f"{banner}\n#### hello{H}\n\nHi.\n\n> Aider v0.86.2{H}\n> Model: openai/gpt-4.1 with diff edit format{H}\n"
    session = only(history(tmp_path, run(body=body) + f"\n#### again{H}\n\nYes.\n"))
    assert session.cli_versions == ("0.86.1", "0.86.2")
    assert session.models == ("anthropic/claude-sonnet-4-5", "openai/gpt-4.1")
    assert [t.model for t in session.turns if t.role is Role.ASSISTANT] == [
        "anthropic/claude-sonnet-4-5",
        "openai/gpt-4.1",
    ]
    assert session.cwd == "/home/u/proj/sub"
    assert {v for (_, v, _) in session.census} == {"0.86.1"}  # the run's first version is its writer version


# --- tokens ----------------------------------------------------------------------------------------------------------


def test_usage_takes_each_messages_figures_never_the_session_total(tmp_path: Path) -> None:
    body = (
        f"\n#### one{H}\n\nA.\n\n> Tokens: 2.3k sent, 120 received. Cost: $0.01 message, $0.01 session.{H}\n"
        f"\n#### two{H}\n\nB.\n\n> Tokens: 3.1k sent, 80 received. Cost: $0.02 message, $0.03 session.{H}\n"
    )
    session = only(history(tmp_path, run(body=body)))
    assert [(u.turn_index, u.input_tokens, u.output_tokens, u.cost_usd) for u in session.usage] == [
        (8, 2300, 120, 0.01),
        (14, 3100, 80, 0.02),
    ]
    assert {u.model for u in session.usage} == {"anthropic/claude-sonnet-4-5"}


def test_usage_leaves_the_cached_parts_out_of_the_input_and_reads_the_cost_on_the_next_line(tmp_path: Path) -> None:
    report = "> Tokens: 12k sent, 1.2k cache write, 3.4k cache hit, 45 received.\nCost: $0.05 message, $0.06 session."
    session = only(history(tmp_path, run(body=f"\n#### one{H}\n\nA.\n\n{report}{H}\n")))
    [usage] = session.usage
    assert (usage.input_tokens, usage.cache_write_tokens, usage.cache_read_tokens) == (7400, 1200, 3400)
    assert (usage.output_tokens, usage.cost_usd) == (45, 0.05)
    assert said(session) == [("user", "one"), ("assistant", "A.")]


def test_older_exact_figures_and_request_costs_are_read(tmp_path: Path) -> None:
    report = f"> Tokens: 12,450 sent, 3,200 received. Cost: $0.052 request, $0.187 session.{H}\n"
    session = only(history(tmp_path, run(body=f"\n#### one{H}\n\nA.\n\n{report}")))
    [usage] = session.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (12450, 3200, 0.052)


def test_a_report_without_a_reply_keeps_its_own_line(tmp_path: Path) -> None:
    session = only(history(tmp_path, run(body=f"\n#### one{H}\n> Tokens: 900 sent, 0 received.{H}\n")))
    [usage] = session.usage
    assert (usage.turn_index, usage.input_tokens, usage.cost_usd) == (7, 900, None)


# --- times and ids ---------------------------------------------------------------------------------------------------


@pytest.fixture
def paris() -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Paris"
    time.tzset()
    yield
    os.environ["TZ"] = before or "UTC"
    time.tzset()


@pytest.mark.usefixtures("paris")
def test_the_header_is_local_time_read_in_the_machines_zone(tmp_path: Path) -> None:
    session = only(history(tmp_path, run("2026-07-01 10:00:00")))
    assert session.started_at == datetime(2026, 7, 1, 8, 0, tzinfo=UTC)  # Paris in summer: UTC+2
    assert session.session_id.startswith("aider-20260701T100000-")  # the id keeps the time as written


def test_turns_have_no_times_and_the_end_is_unknown(tmp_path: Path) -> None:
    session = only(history(tmp_path, run()))
    assert session.started_at == datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
    assert session.ended_at is None and not session.started_at_inferred
    assert [t.timestamp for t in session.turns] == [None, None]


def test_each_run_is_a_session_and_a_run_that_only_started_is_a_benign_no_conversation(tmp_path: Path) -> None:
    started_only = f"\n# aider chat started at 2026-01-02 09:00:00\n\n{BANNER}> ^C KeyboardInterrupt{H}\n"
    outcomes = read(history(tmp_path, started_only + run() + run("2026-01-02 11:00:00")))
    assert [type(o).__name__ for o in outcomes] == ["Rejected", "Loaded", "Loaded"]
    rejected = outcomes[0]
    assert isinstance(rejected, Rejected) and rejected.code == "no_conversation" and rejected.line == 1
    assert rejected.session_hint and rejected.session_hint.startswith("aider-20260102T090000-")


def test_session_ids_stay_when_the_run_and_the_file_grow(tmp_path: Path) -> None:
    path = history(tmp_path, run())
    first = only(path).session_id
    history(tmp_path, run(body=f"\n#### hello{H}\n\nHi.\n\n#### more{H}\n\nYes.\n") + run("2026-01-03 08:00:00"))
    assert sessions(path)[0].session_id == first
    (tmp_path / "clone").mkdir()  # the same run in another folder (a clone of the repository): the same session
    assert only(history(tmp_path / "clone", run())).session_id == first


def test_two_runs_with_the_same_opening_get_distinct_ids(tmp_path: Path) -> None:
    ids = [s.session_id for s in sessions(history(tmp_path, run() + run()))]
    assert ids[1] == f"{ids[0]}-2"


# --- rejections ------------------------------------------------------------------------------------------------------


def test_a_file_without_a_header_is_rejected_as_bad_shape(tmp_path: Path) -> None:
    [outcome] = read(history(tmp_path, "# My notes\n\nNothing from aider here.\n"))
    assert isinstance(outcome, Rejected) and outcome.code == "bad_shape"


def test_text_before_the_first_header_is_rejected_on_its_own_and_the_runs_load(tmp_path: Path) -> None:
    outcomes = read(history(tmp_path, f"#### a cut-off prompt{H}\n" + run()))
    assert [type(o).__name__ for o in outcomes] == ["Rejected", "Loaded"]
    assert isinstance(outcomes[0], Rejected) and outcomes[0].code == "bad_shape" and outcomes[0].line == 0


def test_windows_line_ends_and_a_byte_order_mark_read_as_the_same_session(tmp_path: Path) -> None:
    plain = only(history(tmp_path, run()))
    path = tmp_path / "windows" / ".aider.chat.history.md"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf" + run().replace("\n", "\r\n").encode())
    windows = only(path)
    assert said(windows) == said(plain) and windows.session_id == plain.session_id


def test_binary_garbage_is_rejected_as_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00garbage\n")
    [outcome] = read(path)
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_utf8"


def test_a_last_line_being_written_is_deferred_and_an_old_one_rejects_its_run(tmp_path: Path) -> None:
    path = history(tmp_path, run() + run("2026-01-02 11:00:00", "\n#### hel"))
    [outcome] = read(path, Limits())  # just written: aider is still writing it
    assert isinstance(outcome, Deferred) and outcome.code == "write_in_progress"
    outcomes = read(path)  # settled
    assert [type(o).__name__ for o in outcomes] == ["Loaded", "Rejected"]
    assert isinstance(outcomes[1], Rejected) and outcomes[1].code == "truncated_tail"


def test_a_history_of_more_lines_than_max_records_loads_every_run(tmp_path: Path) -> None:
    # max_records bounds what is held at once: a run, not a history that grows for years.
    text = "".join(run(f"2026-01-02 10:00:{second:02d}") for second in range(6))
    assert text.count("\n") > 40
    outcomes = read(history(tmp_path, text), Limits(settle_seconds=0, max_records=12))
    assert [type(o).__name__ for o in outcomes] == ["Loaded"] * 6


def test_a_run_of_more_lines_than_max_records_is_rejected_and_the_next_loads(tmp_path: Path) -> None:
    long = run(body="".join(f"\n#### line {i}{H}\n\nok\n" for i in range(5)))
    text = run() + long + run("2026-01-02 11:00:00")
    outcomes = read(history(tmp_path, text), Limits(settle_seconds=0, max_records=12))
    assert [type(o).__name__ for o in outcomes] == ["Loaded", "Rejected", "Loaded"]
    rejected = outcomes[1]
    assert isinstance(rejected, Rejected) and rejected.code == "limit_exceeded"
    assert rejected.line == run().count("\n") + 1  # the long run's header: the line after the first run's
    third = outcomes[2]
    assert isinstance(third, Loaded) and third.session.turns[0].index == (run() + long).count("\n") + 6


@pytest.mark.parametrize("chunk", [1 << 20, 16], ids=["one chunk", "chunks of 16 bytes"])
def test_rejected_lines_say_their_number_in_the_file_however_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    # Chunks of 16 bytes (a scale knob): every run and line spans blocks, which are not numbered.
    monkeypatch.setattr(text_lines, "CHUNK_BYTES", chunk)
    before = f"#### a cut-off prompt{H}\n" * 3
    runs = run() + run("2026-01-02 11:00:00") + run("2026-01-02 12:00:00", f"\n#### hel{H}\n\nok\n\nstill writ")
    outcomes = read(history(tmp_path, "\n\n" + before + runs))
    assert [(type(o).__name__, getattr(o, "code", None), getattr(o, "line", None)) for o in outcomes] == [
        ("Rejected", "bad_shape", 2),
        ("Loaded", None, None),
        ("Loaded", None, None),
        ("Rejected", "truncated_tail", ("\n\n" + before + runs).count("\n")),
    ]
    loaded = [o.session for o in outcomes if isinstance(o, Loaded)]
    assert [s.turns[0].index for s in loaded] == [5 + 6, 5 + run().count("\n") + 6]
    bad = tmp_path / "not utf-8" / ".aider.chat.history.md"
    bad.parent.mkdir()
    bad.write_bytes(runs.encode().replace(b"\nok\n", b"\nok \xff\n"))
    outcomes = read(bad)
    assert [type(o).__name__ for o in outcomes] == ["Loaded", "Loaded", "Rejected"]
    assert isinstance(outcomes[2], Rejected) and outcomes[2].code == "invalid_utf8"
    assert outcomes[2].line == runs[: runs.index("\nok\n")].count("\n") + 1


def test_a_run_over_max_conversation_bytes_is_rejected_and_the_next_loads(tmp_path: Path) -> None:
    big = run(body=f"\n#### {'x' * 3000}{H}\n\nHi.\n")
    outcomes = read(
        history(tmp_path, big + run("2026-01-02 11:00:00")), Limits(settle_seconds=0, max_conversation_bytes=1000)
    )
    assert [type(o).__name__ for o in outcomes] == ["Rejected", "Loaded"]
    assert isinstance(outcomes[0], Rejected) and "max_conversation_bytes" in outcomes[0].detail


def test_a_header_time_that_is_no_date_rejects_its_run(tmp_path: Path) -> None:
    outcomes = read(history(tmp_path, run("2026-02-30 10:00:00") + run()))
    assert [type(o).__name__ for o in outcomes] == ["Rejected", "Loaded"]
    assert isinstance(outcomes[0], Rejected) and outcomes[0].code == "missing_timestamp"


# --- discovery -------------------------------------------------------------------------------------------------------


def test_discovery_finds_histories_a_few_folders_deep_and_skips_hidden_and_dependency_folders(tmp_path: Path) -> None:
    wanted = [tmp_path / "proj", tmp_path / "src" / "github.com" / "owner" / "repo" / "sub"]
    skipped = [
        tmp_path / ".cache" / "proj",
        tmp_path / "proj" / "node_modules" / "dep",
        tmp_path / "proj" / "venv" / "lib",
        tmp_path / "a" / "b" / "c" / "d" / "e" / "f",  # six folders deep
    ]
    for folder in wanted + skipped:
        folder.mkdir(parents=True, exist_ok=True)
        history(folder, run())
    history(tmp_path / "proj", "x\n", ".aider.input.history")
    found = sorted(s.path for s in discover(tmp_path))
    assert found == sorted(str(f / ".aider.chat.history.md") for f in wanted)


def test_a_root_that_is_a_file_is_that_one_source_whatever_its_name(tmp_path: Path) -> None:
    path = history(tmp_path, run(), "aider-chat.txt")
    [source] = discover(path)
    assert (source.path, source.root) == (str(path), str(tmp_path))


def test_default_roots_are_the_home_and_the_file_aider_is_told_to_use(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_roots(home, {}) == [home]
    env = "AIDER_CHAT_HISTORY_FILE"
    assert default_roots(home, {env: "/var/log/aider-history.txt"}) == [home, Path("/var/log/aider-history.txt")]
    assert default_roots(home, {env: "~/notes/aider-history.txt"}) == [home, home / "notes" / "aider-history.txt"]
    assert default_roots(home, {env: "relative/aider-history.txt"}) == [home]  # relative to where aider ran: unknown


def test_a_file_named_like_aiders_history_is_detected_by_its_name(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "repo" / ".aider.chat.history.md") == "aider"
    with pytest.raises(ValueError, match="--format"):
        detect_format(tmp_path / "repo" / "chat-history.markdown")


def test_the_objects_made_in_line_are_the_models_own_with_every_field_set(tmp_path: Path) -> None:
    # parse.py makes the usual exchange's turns and usage, and the Session, without their __init__ (`_Turn`,
    # `_Usage`, `_Session`): each must be what the class's own __init__ makes of the same fields, none left unset.
    body = (
        f"\n#### /add a.py{H}\n> Added a.py to the chat{H}\n\n#### fix it{H}\n\nDone.\n\n"
        f"> Tokens: 2.3k sent, 120 received. Cost: $0.01 message, $0.02 session.{H}\n> Applied edit to a.py{H}\n"
    )
    session = only(history(tmp_path, run(body=body)))
    values: list[Any] = [session, *session.turns, *session.usage]
    assert [type(v).__name__ for v in values] == ["Session", "Turn", "Turn", "Turn", "Usage"]
    for value in values:
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # an unset slot: AttributeError
        assert set(fields) == set(type(value).__slots__)
        assert type(value)(**fields) == value
