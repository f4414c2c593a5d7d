"""`iter_text_blocks(decode=False)`: a chunk checked to be UTF-8 without making its text gives the same blocks (text,
bytes, lines, offsets) and the same errors as the reading that decodes it; the check takes what `bytes.decode` takes.
Blocks not numbered (`numbered=False`) are the numbered ones, their lines not counted, a rejected line's number
still the file's."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from extractors.bounded import Limits, text_lines
from extractors.bounded.text_lines import _is_utf8, iter_text_blocks
from extractors.errors import DeferError, RejectError

SETTLED = Limits(settle_seconds=0.0)
TINY = Limits(settle_seconds=0.0, max_line_bytes=40, max_records=6)

CASES = {
    "ascii": b"# aider chat started at 2026-01-02 03:04:05\n\n#### hi  \n\nhello\n",
    "wide": "a 🚀 line\n日本語 — é\n\U0010ffff\n".encode(),
    "cut": "no newline at the end 🚀".encode(),
    "crlf": b"one\r\ntwo \xc3\xa9\r\nthree\r\n",
    "bom": b"\xef\xbb\xbfafter a byte-order mark\nnext\n",
    "bom later": b"x\n\xef\xbb\xbfnot the file's start\n",
    "surrogate": b"fine\n\xed\xa0\x80 a surrogate\n",
    "overlong": b"fine\n\xc0\xaf overlong\n",
    "past U+10FFFF": b"fine\n\xf4\x90\x80\x80\n",
    "cut sequence": b"fine\n\xe2\x82\n",
    "lone continuation": b"fine\n\x80\n",
    "long line": b"short\n" + b"x" * 60 + b"\n",
    "many lines": b"a\n" * 10,
}


def _read(path: Path, limits: Limits, decode: bool) -> list[Any]:
    out: list[Any] = []
    try:
        for block in iter_text_blocks(path, limits, decode=decode):
            lines = [block.line(i) for i in range(len(block.texts))]
            out.append((block.index, block.text, block.raw, block.complete, block.starts(), lines))
    except (RejectError, DeferError) as exc:
        out.append((type(exc).__name__, exc.code, exc.detail, getattr(exc, "line", None)))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("limits", [SETTLED, TINY], ids=["settled", "tiny"])
def test_blocks_read_without_decoding_are_the_decoded_ones(tmp_path: Path, name: str, limits: Limits) -> None:
    path = tmp_path / "history.txt"
    path.write_bytes(CASES[name])
    os.utime(path, (1e9, 1e9))
    assert _read(path, limits, decode=False) == _read(path, limits, decode=True)


def test_the_check_takes_what_decode_takes() -> None:
    def decodes(data: bytes) -> bool:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    samples = [bytes(pair) for pair in itertools.product(range(0x80, 0x100), (0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC0))]
    samples += [bytes((lead, second, 0x80)) for lead in (0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5) for second in range(256)]
    samples += [chr(cp).encode("utf-8", "surrogatepass") for cp in (0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10FFFF)]
    for data in samples:
        assert _is_utf8(b"x" + data + b"\n") is decodes(b"x" + data + b"\n"), data


def test_a_block_read_without_decoding_makes_its_text_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "history.txt"
    path.write_bytes(CASES["wide"])
    (block,) = iter_text_blocks(path, SETTLED, decode=False)
    assert block._text is None and block.raw == CASES["wide"]
    assert block.text == CASES["wide"].decode()


def _unnumbered(path: Path, limits: Limits) -> list[Any]:
    """As `_read`, the blocks not numbered: each block's lines numbered again from the lines of the blocks before."""
    out: list[Any] = []
    base = 0
    try:
        for block in iter_text_blocks(path, limits, decode=False, numbered=False):
            assert block.index == -1
            lines = [dataclasses.replace(block.line(i), index=base + i) for i in range(len(block.texts))]
            out.append((base, block.text, block.raw, block.complete, block.starts(), lines))
            base += len(block.texts)
    except (RejectError, DeferError) as exc:
        out.append((type(exc).__name__, exc.code, exc.detail, getattr(exc, "line", None)))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("chunk", [1 << 20, 7], ids=["one chunk", "chunks of 7 bytes"])
def test_blocks_not_numbered_are_the_numbered_ones_and_a_rejected_line_says_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, chunk: int
) -> None:
    # Chunks of 7 bytes (a scale knob): a file of many blocks, its bad line in a later one than the first.
    monkeypatch.setattr(text_lines, "CHUNK_BYTES", chunk)
    path = tmp_path / "history.txt"
    path.write_bytes(CASES[name] * 3)
    os.utime(path, (1e9, 1e9))
    long_lines = Limits(settle_seconds=0.0, max_line_bytes=40)
    for limits in (SETTLED, long_lines):
        numbered = _read(path, limits, decode=False)
        assert _unnumbered(path, limits) == numbered
    if name in ("surrogate", "long line"):  # the rejected line's number and offset are the file's
        with pytest.raises(RejectError) as caught:
            list(iter_text_blocks(path, long_lines, decode=False, numbered=False))
        bad = CASES[name].split(b"\n")[1]
        assert caught.value.line == 1 and caught.value.offset == CASES[name].index(bad)


def test_blocks_not_numbered_do_not_count_lines_against_max_records(tmp_path: Path) -> None:
    path = tmp_path / "history.txt"
    path.write_bytes(b"a\n" * 10)
    os.utime(path, (1e9, 1e9))
    few = Limits(settle_seconds=0.0, max_records=6)
    with pytest.raises(RejectError) as caught:
        list(iter_text_blocks(path, few, decode=False))
    assert caught.value.code == "limit_exceeded" and caught.value.line == 6
    assert b"".join(block.raw for block in iter_text_blocks(path, few, decode=False, numbered=False)) == b"a\n" * 10
