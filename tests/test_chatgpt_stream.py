"""ChatGPT export containers: the streamed JSON-array reader, the zip member reader, bounded memory, any bytes."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors import chatgpt
from extractors.bounded import Limits
from extractors.bounded.json_array import iter_json_elements
from extractors.bounded.zip_member import MemberStream, unsafe_name
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Loaded, Outcome, Rejected
from extractors.registry import read_source
from tests.support import SETTLED, read_one
from tests.test_chatgpt import conversation, text, turns

# ---------------------------------------------------------------- the streamed array reader
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(JSON, max_size=6), chunk=st.integers(1, 9), pad=st.sampled_from(["", " ", "\n\t "]))
def test_elements_and_offsets_survive_any_chunking(values: list[Any], chunk: int, pad: str) -> None:
    pieces = [json.dumps(v, ensure_ascii=chunk % 2 == 0) for v in values]
    doc = "[" + pad + ("," + pad).join(pieces) + pad + "]"
    raw = doc.encode()
    got = list(iter_json_elements(io.BytesIO(raw), Limits(), chunk_bytes=chunk))
    assert [e.value for e in got] == values
    for element, piece in zip(got, pieces, strict=True):
        assert raw[element.offset : element.offset + element.size] == piece.encode()


def test_brackets_and_escapes_inside_strings_do_not_count() -> None:
    values = [{"a": '}]"[{', "b": ["\\", '"]', '\\"{']}, {"c": 1}]
    raw = json.dumps(values).encode()
    for chunk in (1, 2, 3, 64):
        got = list(iter_json_elements(io.BytesIO(raw), Limits(), chunk_bytes=chunk))
        assert [e.value for e in got] == values


def test_byte_order_mark_is_skipped() -> None:
    got = list(iter_json_elements(io.BytesIO(b'\xef\xbb\xbf[{"a": 1}]'), Limits()))
    assert [(e.offset, e.value) for e in got] == [(4, {"a": 1})]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'[{"a": 1}] trailing', RejectCode.INVALID_JSON),
        (b'[{"a": 1},]', RejectCode.INVALID_JSON),
        (b'[{"a": 1]', RejectCode.INVALID_JSON),
        (b'[{"a": 1} {"b": 2}]', RejectCode.INVALID_JSON),
        (b'[{"a": "unterminated', RejectCode.TRUNCATED_TAIL),
        (b'[{"a": 1}', RejectCode.TRUNCATED_TAIL),
        (b'{"a": 1} {"b": 2}', RejectCode.INVALID_JSON),
    ],
)
def test_broken_structure_raises_after_good_elements(raw: bytes, code: RejectCode) -> None:
    seen: list[Any] = []
    with pytest.raises(RejectError) as err:
        for element in iter_json_elements(io.BytesIO(raw), Limits(), chunk_bytes=3):
            seen.append(element.value)
    assert err.value.code is code and err.value.offset is not None
    assert seen in ([], [{"a": 1}])


def test_invalid_utf8_in_one_element_rejects_only_it() -> None:
    got = list(iter_json_elements(io.BytesIO(b'[{"a": "\xff"}, {"b": 1}]'), Limits()))
    assert got[0].problem is not None and got[0].problem.code is RejectCode.INVALID_UTF8
    assert got[1].value == {"b": 1}


def test_lone_surrogates_are_replaced_not_rejected() -> None:
    got = list(iter_json_elements(io.BytesIO(b'[{"a": "x\\ud83d"}]'), Limits()))
    assert got[0].value == {"a": "x\ufffd"}


def test_oversized_element_is_never_materialised() -> None:
    """A 24 MB element over a 1 MB limit: the buffer stops growing at the limit, the next element still loads."""
    big = b'{"title": "t", "mapping": {"n": "' + b"x" * 24_000_000 + b'"}, "conversation_id": "big"}'
    raw = b"[" + big + b', {"conversation_id": "small"}]'
    limits = Limits(max_conversation_bytes=1_000_000)
    tracemalloc.start()
    try:
        got = list(iter_json_elements(io.BytesIO(raw), limits, chunk_bytes=256 * 1024))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got[0].problem is not None and got[0].problem.code is RejectCode.LIMIT_EXCEEDED
    assert got[0].size == len(big) and got[0].top_fields == {"title": "t", "conversation_id": "big"}
    assert got[1].value == {"conversation_id": "small"}
    assert peak < 4_000_000, peak  # the input alone is 24 MB


def test_export_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    """Many conversations in one line: peak Python memory stays far below the file size."""
    path = tmp_path / "conversations.json"
    one = orjson.dumps(conversation([text("user", "question " * 300), text("assistant", "answer " * 3000)]))
    count = 1800
    with path.open("wb") as handle:
        handle.write(b"[")
        for i in range(count):
            handle.write((b", " if i else b"") + one.replace(b'"c1"', f'"c{i}"'.encode()))
        handle.write(b"]")
    size = path.stat().st_size
    assert size > 40_000_000
    tracemalloc.start()
    try:
        loaded = 0
        for outcome in read_one_streaming(path):
            loaded += isinstance(outcome, Loaded)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded == count
    assert peak < size // 4, (peak, size)


def read_one_streaming(path: Path) -> Any:
    """Like tests.support.read_one, but without collecting the outcomes in a list."""
    source = next(chatgpt.discover(path))
    yield from read_source(source, SETTLED)


# ---------------------------------------------------------------- the zip export
def _zip(path: Path, members: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _export_bytes() -> bytes:
    return orjson.dumps([conversation([text("user", "Q"), text("assistant", "A")], cid=c) for c in ("a", "b")])


@pytest.mark.parametrize("member", ["conversations.json", "chatgpt-export-2025/conversations.json"])
def test_ok_zip_export_at_top_or_under_one_folder(tmp_path: Path, member: str) -> None:
    path = _zip(tmp_path / "export.zip", {"user.json": b"{}", member: _export_bytes(), "chat.html": b"<html>"})
    found = read_one(Agent("chatgpt"), path)
    assert [o.session.session_id for o in found if isinstance(o, Loaded)] == ["chatgpt-a", "chatgpt-b"]
    assert turns(found[0].session) == [(1, "user", "Q"), (2, "assistant", "A")]  # type: ignore[union-attr]


def test_zip_rejects_per_conversation_with_offset_in_the_member(tmp_path: Path) -> None:
    good = orjson.dumps(conversation([text("user", "Q")], cid="a"))
    raw = b"[" + good + b"," + orjson.dumps({"id": "b", "mapping": []}) + b"]"
    found = read_one(Agent("chatgpt"), _zip(tmp_path / "e.zip", {"conversations.json": raw}))
    assert isinstance(found[1], Rejected)
    assert (found[1].code, found[1].offset, found[1].session_hint) == (RejectCode.BAD_SHAPE, len(good) + 2, "chatgpt-b")


def _only_rejection(path: Path, limits: Limits = SETTLED) -> Rejected:
    found = read_one(Agent("chatgpt"), path, limits)
    assert len(found) == 1 and isinstance(found[0], Rejected), found
    return found[0]


def test_reject_zip_without_conversations_json(tmp_path: Path) -> None:
    bad = _only_rejection(_zip(tmp_path / "e.zip", {"user.json": b"{}", "a/b/conversations.json": b"[]"}))
    assert bad.code is RejectCode.SOURCE_UNREADABLE and "no conversations.json" in bad.detail


def test_reject_zip_with_two_candidate_exports(tmp_path: Path) -> None:
    path = _zip(tmp_path / "e.zip", {"a/conversations.json": b"[]", "b/conversations.json": b"[]"})
    assert _only_rejection(path).code is RejectCode.INCONSISTENT_SOURCE


@pytest.mark.parametrize("name", ["../conversations.json", "/etc/conversations.json", "x/../../evil", "C:/x"])
def test_reject_zip_path_tricks(tmp_path: Path, name: str) -> None:
    path = _zip(tmp_path / "e.zip", {"conversations.json": _export_bytes(), name: b"x"})
    bad = _only_rejection(path)
    assert bad.code is RejectCode.SOURCE_UNREADABLE and "unsafe member name" in bad.detail


def test_unsafe_name_rules() -> None:
    assert not unsafe_name("folder/conversations.json") and not unsafe_name("a..b.json")
    assert unsafe_name("..\\x") and unsafe_name("\\abs")


def test_reject_encrypted_member(tmp_path: Path) -> None:
    # The stdlib cannot write ZipCrypto: set the "encrypted" flag bit in the local and central headers instead.
    data = bytearray(_zip(tmp_path / "plain.zip", {"conversations.json": _export_bytes()}).read_bytes())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + flag_at
        data[at] |= 0x1
    path = tmp_path / "e.zip"
    path.write_bytes(bytes(data))
    bad = _only_rejection(path)
    assert bad.code is RejectCode.SOURCE_UNREADABLE and "encrypted" in bad.detail


def test_reject_zip_bomb_by_ratio_before_reading(tmp_path: Path) -> None:
    path = _zip(tmp_path / "e.zip", {"conversations.json": b"[" + b" " * 5_000_000 + b"]"})
    bad = _only_rejection(path)
    assert bad.code is RejectCode.LIMIT_EXCEEDED and "max_compression_ratio" in bad.detail


def test_reject_member_over_declared_size_limit(tmp_path: Path) -> None:
    path = _zip(tmp_path / "e.zip", {"conversations.json": _export_bytes()}, compression=zipfile.ZIP_STORED)
    bad = _only_rejection(path, Limits(settle_seconds=0, max_archive_member_bytes=100))
    assert bad.code is RejectCode.LIMIT_EXCEEDED and "max_archive_member_bytes" in bad.detail


def test_member_stream_checks_actual_against_declared_size() -> None:
    longer = MemberStream("conversations.json", 4, io.BytesIO(b"123456"))
    with pytest.raises(RejectError) as err:
        while longer.read(3):
            pass
    assert err.value.code is RejectCode.LIMIT_EXCEEDED
    shorter = MemberStream("conversations.json", 10, io.BytesIO(b"123"))
    with pytest.raises(RejectError) as err:
        while shorter.read(3):
            pass
    assert err.value.code is RejectCode.INCONSISTENT_SOURCE


def test_reject_damaged_zip(tmp_path: Path) -> None:
    path = _zip(tmp_path / "e.zip", {"conversations.json": _export_bytes() * 20})
    data = bytearray(path.read_bytes())
    data[60:90] = b"\x00" * 30  # inside the deflated data
    path.write_bytes(bytes(data))
    found = read_one(Agent("chatgpt"), path)
    assert isinstance(found[-1], Rejected) and found[-1].code is RejectCode.SOURCE_UNREADABLE


def test_reject_zip_name_that_is_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    path.write_bytes(b"not a zip at all")
    bad = _only_rejection(path)
    assert bad.code is RejectCode.SOURCE_UNREADABLE and "not a zip" in bad.detail


# ---------------------------------------------------------------- any bytes: the outcome each input must give
# What broken bytes may give: the reader names the fault; never a session made of garbage.
BROKEN = {RejectCode.INVALID_JSON, RejectCode.INVALID_UTF8, RejectCode.TRUNCATED_TAIL, RejectCode.BAD_SHAPE}


def _good_export_beside(folder: Path) -> Path:
    """A good export in the same folder (a zip, since the folder's conversations.json is the hostile one)."""
    return _zip(folder / "good.zip", {"conversations.json": orjson.dumps([conversation([text("user", "Q")], cid="g")])})


def _read_folder(folder: Path) -> dict[str, list[Outcome]]:
    found = {Path(s.path).name: list(read_source(s, SETTLED)) for s in chatgpt.discover(folder)}
    assert [o.session.session_id for o in found["good.zip"] if isinstance(o, Loaded)] == ["chatgpt-g"], found
    return found


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.builds(lambda b: b"[" + b, st.binary(max_size=200)))
def test_any_bytes_give_the_outcome_they_must(tmp_path: Path, data: bytes) -> None:
    _good_export_beside(tmp_path)
    for name in ("conversations.json", "export.zip"):
        path = tmp_path / name
        path.write_bytes(data)
        found = _read_folder(tmp_path)
        assert set(found) == {name, "good.zip"}, "the loop below reads the hostile export"
        outcomes = found[name]
        if name == "export.zip" and not data.startswith(b"PK"):
            assert [(type(o), getattr(o, "code", None)) for o in outcomes] == [(Rejected, RejectCode.SOURCE_UNREADABLE)]
        elif name == "conversations.json" and not _is_json(data):
            # The reader goes by content: a file that starts with a zip signature is read as a zip (and is then
            # not a readable one), whatever its name.
            broken = BROKEN | {RejectCode.SOURCE_UNREADABLE} if data.startswith(b"PK") else BROKEN
            assert outcomes and isinstance(outcomes[-1], Rejected) and outcomes[-1].code in broken, outcomes
        else:
            assert outcomes and all(isinstance(o, Loaded | Rejected) for o in outcomes), outcomes
        path.unlink()


FRAGMENTS = [
    b"[", b"]", b"{", b"}", b",", b":", b'"mapping"', b'"current_node"', b'"n1"', b'"parent"', b"null",
    b'"message"', b'"author"', b'{"role":"user"}', b'"content"', b'{"content_type":"text","parts":["x"]}',
    b'"create_time"', b"1700000000.5", b'"id"', b'"c"', b"\\", b'"', b"\xff", b" ",
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_json_like_fragments_give_the_outcome_they_must(tmp_path: Path, pieces: list[bytes]) -> None:
    _good_export_beside(tmp_path)
    raw = b"".join(pieces)
    (tmp_path / "conversations.json").write_bytes(raw)
    outcomes = _read_folder(tmp_path)["conversations.json"]
    assert outcomes
    if not _is_json(raw):
        assert isinstance(outcomes[-1], Rejected) and outcomes[-1].code in BROKEN, outcomes
    else:  # valid JSON built of fragments: each conversation (or the document) gets a reason or loads
        assert all(isinstance(o, Loaded | Rejected) for o in outcomes), outcomes
    for outcome in outcomes[:-1]:  # everything before the last outcome is a whole element: never a parse error
        assert not (isinstance(outcome, Rejected) and outcome.code is RejectCode.TRUNCATED_TAIL), outcomes


MESSAGE_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), MESSAGE_TEXT), min_size=1, max_size=8),
    more=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), MESSAGE_TEXT), min_size=1, max_size=5),
)
def test_id_stability_appending_messages_keeps_turn_ids(
    tmp_path: Path, first: list[tuple[str, str]], more: list[tuple[str, str]]
) -> None:
    def turn_ids(messages: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
        conv = conversation([text(role, words) for role, words in messages])
        path = tmp_path / "conversations.json"
        path.write_bytes(orjson.dumps([conv]))
        found = read_one(Agent("chatgpt"), path)
        return [(t.index, t.role.value, t.text) for o in found if isinstance(o, Loaded) for t in o.session.turns]

    before = turn_ids(first)
    after = turn_ids(first + more)
    assert after[: len(before)] == before
