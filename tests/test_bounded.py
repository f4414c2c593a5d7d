"""The bounded JSONL reader: complete or reject, defer a live tail, limits before materialising."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from extractors.bounded import (
    GLUED_INDEX_BASE,
    GLUED_MAX_VALUES,
    READ_BUFFER_BYTES,
    Limits,
    clip,
    glued_index,
    iter_jsonl,
    iter_jsonl_fields,
    parse_json,
    parse_json_values,
    read_json_document,
)
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError
from tests.support import write_jsonl


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_ok_reads_every_record_with_index_and_offset(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', "", '{"b":2}'])
    lines = list(iter_jsonl(path, Limits()))
    assert [(x.index, x.offset, x.record) for x in lines] == [(0, 0, {"a": 1}), (2, 9, {"b": 2})]


def test_ok_whitespace_only_lines_are_blank_and_keep_their_index(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n \t\r\n\x0b\x0c\n{"b":2}\n  {"c":3}  \r\n')
    lines = list(iter_jsonl(path, Limits()))
    assert [(x.index, x.record) for x in lines] == [(0, {"a": 1}), (3, {"b": 2}), (4, {"c": 3})]


def test_ok_lines_longer_than_the_read_buffer_are_read_whole(tmp_path: Path) -> None:
    big = "x" * (3 * READ_BUFFER_BYTES)
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"big":"' + big + '"}', '{"b":2}'])
    lines = list(iter_jsonl(path, Limits()))
    assert [x.record for x in lines] == [{"a": 1}, {"big": big}, {"b": 2}]
    assert lines[2].offset == path.stat().st_size - len('{"b":2}\n')


def test_ok_a_known_line_yields_the_record_given_for_it_and_the_same_fields_as_parsing(tmp_path: Path) -> None:
    given = {"k": 1}
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"k":1}\n{"k": 1}\n{"k":1}\n{"k":1}')  # the same record spelled otherwise; a last line
    _age(path, 3600)  # without newline: read as a tail, never as the known line
    plain = list(iter_jsonl_fields(path, Limits()))
    known = list(iter_jsonl_fields(path, Limits(), known={b'{"k":1}\n': given}))
    assert known == plain
    assert [fields[2] is given for fields in known] == [True, False, True, False]


def test_reject_invalid_json_before_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"pr-link","prNu{"parentUuid":1}', '{"b":2}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert (err.value.code, err.value.line, err.value.offset) == (RejectCode.INVALID_JSON, 1, 8)


def test_reject_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":"\xff"}\n')
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert err.value.code is RejectCode.INVALID_UTF8


def test_ok_lone_surrogate_is_replaced_not_rejected() -> None:
    assert parse_json(b'{"a":"\\ud83d x"}') == {"a": "\ufffd x"}


def test_reject_non_object_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ["[1,2]"])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert err.value.code is RejectCode.BAD_SHAPE


def test_defer_partial_last_line_of_a_fresh_file(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":'], newline_at_end=False)
    with pytest.raises(DeferError) as err:
        list(iter_jsonl(path, Limits(settle_seconds=3600)))
    assert err.value.code is DeferCode.WRITE_IN_PROGRESS


def test_reject_truncated_tail_of_a_settled_file(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":'], newline_at_end=False)
    _age(path, 7200)
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits(settle_seconds=3600)))
    assert (err.value.code, err.value.line) == (RejectCode.TRUNCATED_TAIL, 1)


def test_ok_complete_last_line_without_newline_once_settled(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":2}'], newline_at_end=False)
    _age(path, 7200)
    assert [x.record for x in iter_jsonl(path, Limits(settle_seconds=3600))] == [{"a": 1}, {"b": 2}]


def test_reject_line_over_limit_without_reading_it_whole(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"big":"' + "x" * 5000 + '"}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits(max_line_bytes=100)))
    assert (err.value.code, err.value.line) == (RejectCode.LIMIT_EXCEEDED, 1)


def opens_of(path: Path) -> list[str]:
    """Every open of `path` from now on, seen by an audit hook ("open" events: `open()`, `os.open`, ...).

    Counting opens holds for root too, where a chmod 0 file would still open.
    """
    seen: list[str] = []
    _WATCHED[os.fspath(path)] = seen
    return seen


_WATCHED: dict[str, list[str]] = {}


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        name = os.fsdecode(args[0])
        if name in _WATCHED:
            _WATCHED[name].append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; it records only paths a test registered


def test_reject_source_over_limit_before_opening(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}'] * 10)
    opens = opens_of(path)
    try:
        with pytest.raises(RejectError) as err:
            list(iter_jsonl(path, Limits(max_source_bytes=20)))
        assert err.value.code is RejectCode.LIMIT_EXCEEDED
        assert opens == [], "the size check comes before any open"
        assert list(iter_jsonl(path, Limits())) and opens, "the audit hook does see an open of the file"
    finally:
        _WATCHED.pop(os.fspath(path))


def test_reject_too_many_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}'] * 5)
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits(max_records=3)))
    assert (err.value.code, err.value.line) == (RejectCode.LIMIT_EXCEEDED, 3)


def test_defer_when_the_file_grows_while_read(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":2}'])
    reader = iter_jsonl(path, Limits())
    next(reader)
    with path.open("a") as handle:
        handle.write('{"c":3}\n')
    with pytest.raises(DeferError) as err:
        list(reader)
    assert err.value.code is DeferCode.CHANGED_DURING_READ


def test_reject_document_over_limit(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"a":"' + "x" * 100 + '"}')
    with pytest.raises(RejectError) as err:
        read_json_document(path, Limits(max_document_bytes=50))
    assert err.value.code is RejectCode.LIMIT_EXCEEDED


def test_a_document_read_with_the_callers_stat_is_checked_against_it(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"a": 1}')
    assert read_json_document(path, Limits(), stat_result=os.stat(path)) == {"a": 1}
    seen = os.stat(path)  # the caller's stat, then the file is rewritten before the read: deferred
    path.write_text('{"a": 12}')
    with pytest.raises(DeferError) as deferred:
        read_json_document(path, Limits(), stat_result=seen)
    assert deferred.value.code is DeferCode.CHANGED_DURING_READ
    with pytest.raises(RejectError) as err:  # checked as its own stat would be
        read_json_document(path, Limits(max_source_bytes=4), stat_result=os.stat(path))
    assert err.value.code is RejectCode.LIMIT_EXCEEDED
    with pytest.raises(RejectError) as err:
        read_json_document(path, Limits(), stat_result=os.stat(tmp_path))
    assert err.value.code is RejectCode.SOURCE_UNREADABLE


def test_clip_keeps_short_text_and_marks_cut_text() -> None:
    limits = Limits(max_field_bytes=10)
    assert clip("short", limits) == "short"
    clipped = clip("é" * 20, limits)
    assert clipped.startswith("ééééé\n[… clipped: 40 bytes")


# --- records glued onto one line ------------------------------------------------------------------------------------


def test_ok_glued_records_are_read_in_order_and_the_next_line_keeps_its_index(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"type":"progress"}{"type":"summary"} {"c":3}', '{"d":4}'])
    lines = list(iter_jsonl(path, Limits()))
    assert [(x.index, x.line, x.part, x.parts, x.offset, x.record) for x in lines] == [
        (0, 0, 0, 1, 0, {"a": 1}),
        (1, 1, 0, 3, 8, {"type": "progress"}),
        (GLUED_INDEX_BASE + 1 * 1000 + 1, 1, 1, 3, 8, {"type": "summary"}),
        (GLUED_INDEX_BASE + 1 * 1000 + 2, 1, 2, 3, 8, {"c": 3}),
        (2, 2, 0, 1, 54, {"d": 4}),
    ]
    assert [x.starts_glued_line for x in lines] == [False, True, False, False, False]


def test_ok_glued_index_is_the_line_for_the_first_value_and_outside_every_line_number_after() -> None:
    assert glued_index(7, 0) == 7
    assert glued_index(0, 1) == GLUED_INDEX_BASE + 1 > 2**40  # no file under a petabyte has that many lines
    assert glued_index(7, GLUED_MAX_VALUES - 1) < glued_index(8, 1)  # unique per (line, part)


def test_ok_glued_records_with_lone_surrogates_are_scrubbed() -> None:
    assert parse_json_values(b'{"a":"\\ud83d"}{"b":1}\n') == [{"a": "\ufffd"}, {"b": 1}]


def test_ok_glued_last_line_without_newline_once_settled(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":2}{"c":3}'], newline_at_end=False)
    _age(path, 7200)
    assert [x.record for x in iter_jsonl(path, Limits(settle_seconds=3600))] == [{"a": 1}, {"b": 2}, {"c": 3}]


@pytest.mark.parametrize(
    "line",
    [
        '{"a":1}{"b":',  # a complete record, then a cut one (a crash, anthropics/claude-code#52387)
        '{"a":1} trailing',
        '{"a":1}{"b":2}]',
    ],
)
def test_reject_invalid_json_when_the_rest_of_the_line_is_not_complete_values(tmp_path: Path, line: str) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"x":0}', line, '{"y":2}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert (err.value.code, err.value.line, err.value.offset) == (RejectCode.INVALID_JSON, 1, 8)
    assert "Extra data" in err.value.detail


def test_reject_a_glued_value_that_is_not_an_object(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}[2]', '{"b":2}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert (err.value.code, err.value.line) == (RejectCode.BAD_SHAPE, 0)


def test_reject_more_glued_values_than_the_bound(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ["{}" * (GLUED_MAX_VALUES + 1)])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert (err.value.code, err.value.line) == (RejectCode.LIMIT_EXCEEDED, 0)
    at_the_bound = write_jsonl(tmp_path / "t.jsonl", ["{}" * GLUED_MAX_VALUES])
    assert len(list(iter_jsonl(at_the_bound, Limits()))) == GLUED_MAX_VALUES


def test_reject_glued_values_past_max_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"a":1}', '{"b":2}{"c":3}{"d":4}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits(max_records=3)))
    assert (err.value.code, err.value.line) == (RejectCode.LIMIT_EXCEEDED, 1)


# --- numbers the stdlib refuses (issue 14.1) -------------------------------------------------------------------------

_HUGE = "9" * 4301  # one digit past the interpreter's int_max_str_digits: the stdlib raises ValueError


@pytest.mark.parametrize(
    "raw",
    [
        f'{{"usage":{{"output_tokens":{_HUGE}}}}}',  # orjson reads it as infinity and refuses it
        f'{{"a":"\\ud83d","n":{_HUGE}}}',
        f'{{"a":1}}{{"n":-{_HUGE}}}',  # in a glued record
    ],
)
def test_reject_huge_integer_literal_as_invalid_json_never_a_value_error(tmp_path: Path, raw: str) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ['{"x":0}', raw, '{"y":2}'])
    with pytest.raises(RejectError) as err:
        list(iter_jsonl(path, Limits()))
    assert (err.value.code, err.value.line, err.value.offset) == (RejectCode.INVALID_JSON, 1, 8)
    assert "integer literal of more than 4300 digits" in err.value.detail


def test_reject_huge_integer_in_a_whole_document(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(f'{{"tokens":{_HUGE}}}')
    with pytest.raises(RejectError) as err:
        read_json_document(path, Limits())
    assert err.value.code is RejectCode.INVALID_JSON


def test_reject_nesting_past_the_recursion_limit_as_invalid_json() -> None:
    with pytest.raises(RejectError) as err:
        parse_json(b"[" * 100_000 + b"]" * 100_000)
    assert err.value.code is RejectCode.INVALID_JSON
