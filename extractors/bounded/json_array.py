"""Streaming a large JSON array (a ChatGPT export) one element at a time, each element bounded in bytes.

A real `conversations.json` is one line of hundreds of MB: `[{conversation}, {conversation}, ...]`. This reader
finds each element's extent with a bracket scanner (strings are skipped inside the regex engine, so Python only
sees brackets), then parses just that element's bytes with orjson. Memory is bounded by the largest element,
never by the file; an element larger than `Limits.max_conversation_bytes` is noticed while it is being scanned,
dropped without being parsed (the buffer stops growing), and reading goes on with the next element.

Outcomes:
- an element that parses -> `Element(value=...)`; an oversized one or one with invalid UTF-8 ->
  `Element(problem=RejectError(...))`: the structure around it is intact, so the next elements are still read;
- a broken structure (invalid JSON inside or between elements, a truncated file, data after the array) ->
  RejectError raised: the elements already yielded stay valid, the rest of the stream is one rejection.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from extractors.bounded import Limits, check_source_size, parse_json
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError

CHUNK_BYTES = 4 * 1024 * 1024  # one read; the scanner's buffer is at most one element plus one chunk
TOP_FIELD_BYTES = 64 * 1024  # how much of an oversized object's own (depth-1) fields is kept to name it

_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


# No possessive quantifier (`*+`, `++`) and no atomic group (`(?>...)`) in these patterns: both are new in 3.11, and
# before 3.11.5 a possessive repeat of a subpattern that can backtrack accepts what the plain repeat refuses (CPython
# gh-106052, "Possessive quantifier matches where an ordinary quantifier doesn't", fixed in 3.11.5 and 3.12.0 by
# gh-106515; 3.11.5 also fixed gh-100061, other wrong matches of possessive repeats). Debian 12's Python is 3.11.2:
# there the possessive scanner matched `abc"def` whole, an unterminated string taken for a complete one, and every
# ChatGPT export was "not valid JSON". These patterns use greedy repeats only, written so that any text has exactly
# one way to match: a run of plain bytes is whole (what follows is a quote, a bracket or the end), a string is plain
# bytes up to its quote, or escapes and plain bytes (two disjoint alternatives). Greedy then ends where a possessive
# repeat would, and when an item fails (a string or container not complete in the buffer, or nested too deep) the
# engine only gives back what it took, step by step: no other split to try, linear time. tests/test_python_compat.py
# pins them against a plain-Python scanner, on any Python. The price where possessive repeats were right (3.11.5+):
# the reader ~10% slower, a dry-run backfill ~5% (docs/benchmarks.md "Figures: the ChatGPT scanner, 2026-12-03").
_RUN = rb'[^"{}\[\]]*'  # bytes that are neither a quote nor a bracket
# Each `[^"\\]*` is followed by a literal (`"` or a backslash), so giving it back is one tight loop in the engine
# (sre looks back for that byte), not one engine step per byte. On 10 MB of export, strings unrolled as
# `"[^"\\]*(?:\\.[^"\\]*)*"` made the reader 25-30% slower than the possessive patterns, these 6%.
_STRING = rb'"[^"\\]*"|"(?:[^"\\]*\\[\s\S])+[^"\\]*"'


def _skip_pattern(levels: int) -> re.Pattern[bytes]:
    """Outside a string: runs of non-structural bytes, complete strings, and complete containers nested at most
    `levels` deep, all consumed inside the regex engine. It stops at a bracket it could not consume whole (deeper
    nesting, or not complete in the buffer), at the opening quote of a string that does not end inside the buffer,
    or at the buffer's end. Python then handles that one byte: with 4 levels a ChatGPT message node costs ~2 Python
    steps instead of ~20 (measured: 25x fewer, scan ~2x faster). Each level is `RUN (?:ITEM RUN)*`.
    """
    item = _STRING
    for _ in range(levels):
        inside = _RUN + rb"(?:(?:" + item + rb")" + _RUN + rb")*"
        item = _STRING + rb"|\{" + inside + rb"\}|\[" + inside + rb"\]"
    return re.compile(_RUN + rb"(?:(?:" + item + rb")" + _RUN + rb")*")


_SKIP = _skip_pattern(4)
# Inside a string (after its opening quote): stops at the closing quote, or before a backslash at the buffer's end.
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*')
_SCALAR = re.compile(rb"[^,\]\}\s]*")
# One `"key": scalar` of an object's own bytes. `\s*(?:,\s*)?`, not `\s*,?\s*`: that one splits a run of spaces
# between its two `\s*` in every way before it fails: quadratic (16 KB of spaces took 3 s, 64 KB would take ~50 s).
_TOP_FIELD = re.compile(rb'\s*(?:,\s*)?("[^"\\]*(?:\\[\s\S][^"\\]*)*")\s*:\s*("[^"\\]*(?:\\[\s\S][^"\\]*)*"|[^,}"\s]*)')
_OPEN = {ord("{"): ord("}"), ord("["): ord("]")}
_UNPARSED = object()


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Element:
    """One element of the top-level array (or the one top-level object).

    `offset` is its first byte in the stream; `value` the parsed element, or `problem` why it was not parsed.
    `top_fields` holds, for an oversized object only, its own scalar fields (e.g. an id) read while skipping it.
    """

    index: int
    offset: int
    size: int
    value: Any = None
    problem: RejectError | None = None
    top_fields: dict[str, Any] = field(default_factory=dict)


class _Buffer:
    """A growing window over the stream: `data[0]` is stream byte `base`."""

    def __init__(self, stream: Readable, chunk_bytes: int) -> None:
        self.stream = stream
        self.chunk_bytes = chunk_bytes
        self.data = bytearray()
        self.base = 0
        self.eof = False

    def more(self) -> bool:
        """Append one chunk; False at the end of the stream."""
        if self.eof:
            return False
        chunk = self.stream.read(self.chunk_bytes)
        if not chunk:
            self.eof = True
            return False
        self.data += chunk
        return True

    def drop(self, upto: int) -> None:
        """Forget the bytes before buffer position `upto` (positions shift by `upto`)."""
        if upto > 0:
            del self.data[:upto]
            self.base += upto

    def at(self, pos: int) -> int | None:
        """The byte at `pos`, reading more as needed; None at the end of the stream."""
        while pos >= len(self.data):
            if not self.more():
                return None
        return self.data[pos]

    def skip_ws(self, pos: int) -> int:
        while True:
            byte = self.at(pos)
            if byte is None or byte not in _WS:
                return pos
            pos += 1


def iter_json_elements(stream: Readable, limits: Limits, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Element]:
    """Yield each element of a top-level JSON array, or the one top-level object, as an `Element`.

    Raises RejectError(invalid_json | invalid_utf8 | bad_shape | truncated_tail) when the stream is not a JSON
    array/object or its structure breaks; elements yielded before that stay valid.
    """
    buf = _Buffer(stream, chunk_bytes)
    buf.at(len(_BOM) - 1)  # read enough to see a byte-order mark, which some tools write before the JSON
    pos = buf.skip_ws(len(_BOM) if buf.data.startswith(_BOM) else 0)
    first = buf.at(pos)
    if first is None:
        raise RejectError(RejectCode.INVALID_JSON, "empty document: no JSON array or object", offset=0)
    if first == ord("{"):
        element, pos = _scan_element(buf, pos, 0, limits)
        yield element
        pos = buf.skip_ws(pos)
        if buf.at(pos) is not None:
            _fail_structure(buf, pos, "data after the top-level object")
        return
    if first != ord("["):
        _reject_top_level(buf, pos)
    pos = buf.skip_ws(pos + 1)
    if buf.at(pos) == ord("]"):
        _expect_end(buf, pos + 1)
        return
    index = 0
    while True:
        element, pos = _scan_element(buf, pos, index, limits)
        buf.drop(pos)  # the element is done: its bytes are not needed any more
        pos = 0
        yield element
        index += 1
        pos = buf.skip_ws(pos)
        byte = buf.at(pos)
        if byte == ord("]"):
            _expect_end(buf, pos + 1)
            return
        if byte is None:
            _fail_structure(buf, pos, "the document ends inside the array (truncated file?)", truncated=True)
        if byte != ord(","):
            _fail_structure(buf, pos, "expected ',' or ']' after an array element")
        pos = buf.skip_ws(pos + 1)


def _scan_element(buf: _Buffer, start: int, index: int, limits: Limits) -> tuple[Element, int]:
    """Find the end of the element starting at `start` and parse it; returns it and the position after it."""
    first = buf.at(start)
    if first is None:
        _fail_structure(buf, start, "the document ends inside the array (truncated file?)", truncated=True)
    offset = buf.base + start
    if first in _OPEN:
        end, oversized, top = _scan_container(buf, start, limits)
    elif first == ord('"'):
        end, oversized, top = _scan_string(buf, start), False, b""
    else:
        match = _SCALAR.match(buf.data, start)
        assert match is not None  # the pattern matches the empty string
        end = match.end()
        while end == len(buf.data) and buf.more():
            match = _SCALAR.match(buf.data, start)
            assert match is not None
            end = match.end()
        oversized, top = False, b""
        if end == start:
            _fail_structure(buf, start, "expected a JSON value")
    size = buf.base + end - offset  # the buffer may have dropped the start of an oversized element
    if oversized or size > limits.max_conversation_bytes:
        problem = RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"element {index} is {size} bytes, over max_conversation_bytes={limits.max_conversation_bytes}",
            line=index,
            offset=offset,
        )
        return Element(index, offset, size, problem=problem, top_fields=_top_fields(top)), end
    value: Any = _UNPARSED
    # No copy: a view, released before the buffer moves. On failure parse_json below says why (invalid UTF-8 or
    # JSON), and it accepts the lone surrogates orjson refuses.
    with memoryview(buf.data) as view, view[start:end] as raw, contextlib.suppress(orjson.JSONDecodeError):
        value = orjson.loads(raw)
    if value is _UNPARSED:
        try:
            value = parse_json(bytes(buf.data[start:end]), line=index, offset=offset)
        except RejectError as exc:
            if exc.code is RejectCode.INVALID_UTF8:
                return Element(index, offset, size, problem=exc), end
            raise RejectError(
                RejectCode.INVALID_JSON,
                f"element {index} at byte {offset} is not valid JSON ({exc.detail}); the rest was not read",
                line=index,
                offset=offset,
            ) from exc
    return Element(index, offset, size, value=value), end


def _scan_container(buf: _Buffer, start: int, limits: Limits) -> tuple[int, bool, bytes]:
    """Scan an object/array from `start`; returns (end position, oversized, its depth-1 bytes if oversized).

    Once the element passes `max_conversation_bytes`, the bytes already scanned are dropped as the scan goes on,
    so the buffer never holds more than the limit plus one chunk.
    """
    stack = bytearray([_OPEN[buf.data[start]]])
    pos = start + 1
    seg = pos  # start of the current depth-1 stretch (the element's own fields)
    top = bytearray(buf.data[start:pos])
    oversized = False
    in_string = False
    while True:
        if in_string:
            match = _STRING_BODY.match(buf.data, pos)
            assert match is not None
            pos = match.end()
            if pos < len(buf.data) and buf.data[pos] == ord('"'):
                pos += 1
                in_string = False
                continue
        else:
            match = _SKIP.match(buf.data, pos)
            assert match is not None
            pos = match.end()
            if pos < len(buf.data):
                byte = buf.data[pos]
                if byte == ord('"'):
                    in_string = True
                    pos += 1
                    continue
                if byte in _OPEN:
                    if len(stack) == 1:
                        _keep(top, buf.data, seg, pos)
                    stack.append(_OPEN[byte])
                    pos += 1
                    continue
                if byte != stack[-1]:
                    _fail_structure(buf, pos, f"'{chr(byte)}' does not close '{chr(stack[-1])}'")
                stack.pop()
                pos += 1
                if not stack:
                    _keep(top, buf.data, seg, pos)
                    return pos, oversized, bytes(top)
                if len(stack) == 1:
                    seg = pos
                continue
        # The buffer ran out inside the element: check the bound, then read on.
        if not oversized and pos - start > limits.max_conversation_bytes:
            oversized = True
        if oversized:
            # Keep only what is not scanned yet: the buffer stops growing, the element is never parsed.
            if len(stack) == 1:
                _keep(top, buf.data, seg, pos)
            buf.drop(pos)
            pos = seg = 0
        if not buf.more():
            _fail_structure(buf, pos, "the document ends inside an element (truncated file?)", truncated=True)


def _keep(top: bytearray, data: bytearray, begin: int, end: int) -> None:
    if len(top) < TOP_FIELD_BYTES and end > begin:
        top += data[begin : min(end, begin + TOP_FIELD_BYTES - len(top))]


def _scan_string(buf: _Buffer, start: int) -> int:
    pos = start + 1
    while True:
        match = _STRING_BODY.match(buf.data, pos)
        assert match is not None
        pos = match.end()
        if pos < len(buf.data) and buf.data[pos] == ord('"'):
            return pos + 1
        if not buf.more():
            _fail_structure(buf, pos, "the document ends inside a string (truncated file?)", truncated=True)


def _top_fields(top: bytes) -> dict[str, Any]:
    """The scalar fields of an object from its depth-1 bytes (nested values cut out): `{"id":"x","m":,...`."""
    fields: dict[str, Any] = {}
    pos = 1
    while True:
        match = _TOP_FIELD.match(top, pos)
        if match is None or match.end() == pos:
            return fields
        pos = match.end()
        if not match.group(2):
            continue
        with contextlib.suppress(orjson.JSONDecodeError):
            # Only a hint for naming a skipped (oversized) conversation: a field that is not plain JSON names nothing.
            fields[orjson.loads(match.group(1))] = orjson.loads(match.group(2))


def _expect_end(buf: _Buffer, pos: int) -> None:
    pos = buf.skip_ws(pos)
    if buf.at(pos) is not None:
        _fail_structure(buf, pos, "data after the top-level array")


def _fail_structure(buf: _Buffer, pos: int, why: str, *, truncated: bool = False) -> Any:
    offset = buf.base + pos
    code = RejectCode.TRUNCATED_TAIL if truncated else RejectCode.INVALID_JSON
    raise RejectError(code, f"{why} at byte {offset}; the rest was not read", offset=offset)


def _reject_top_level(buf: _Buffer, pos: int) -> Any:
    """Not `[` or `{`: a small document that is valid JSON is the wrong shape; anything else is not JSON."""
    while len(buf.data) <= CHUNK_BYTES and buf.more():
        pass
    if buf.eof:
        value = parse_json(bytes(buf.data))  # raises invalid_json / invalid_utf8
        raise RejectError(
            RejectCode.BAD_SHAPE, f"top level is a JSON {type(value).__name__}, not an array or object", offset=pos
        )
    raise RejectError(RejectCode.INVALID_JSON, "not a JSON array or object", offset=buf.base + pos)


def iter_json_file(path: str | Path, limits: Limits, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Element]:
    """Stream the elements of a JSON file (see `iter_json_elements`), within `max_source_bytes`.

    Raises RejectError(limit_exceeded | source_unreadable | invalid_json | invalid_utf8 | bad_shape |
    truncated_tail) and DeferError(changed_during_read) when the file moved while it was read, or
    DeferError(write_in_progress) when it ends early and changed within `settle_seconds` (being downloaded).
    """
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in the finally below; a generator owns it
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        st = os.fstat(handle.fileno())
        if (st.st_size, st.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed between discovery and open")
        try:
            yield from iter_json_elements(handle, limits, chunk_bytes=chunk_bytes)
        except RejectError as exc:
            # An export cut short that changed within the settle time is still being written (a download in
            # progress): read again next run, as a JSONL file's partial last line is. Older, it is truncated_tail.
            if exc.code is RejectCode.TRUNCATED_TAIL and time.time() - before.st_mtime < limits.settle_seconds:
                raise DeferError(
                    DeferCode.WRITE_IN_PROGRESS, f"the document ends early and changed recently: {exc.detail}"
                ) from exc
            raise
        st = os.fstat(handle.fileno())
        if (st.st_size, st.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    finally:
        handle.close()
