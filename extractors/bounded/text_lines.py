"""Lines of a plain-text source (a Markdown chat log), complete or not at all, within `Limits`.

The text counterpart of `iter_jsonl`: the file is read in chunks of `CHUNK_BYTES` cut at their last newline, a line
is never held past `max_line_bytes` (the start of a line longer than a chunk is carried to the next read only while
it is within the bound), the lines are counted against `max_records`, and the file's tail decides whether it is being
written. A last line without a newline in a file changed within `settle_seconds` is a write under way: the read is
deferred before any line is handed on, so a reader of a multi-session file never yields sessions and then a deferral.
An older one is handed on flagged (`TextLine.complete` False) and the reader decides (a truncated session, usually).
Bytes are decoded as UTF-8 (a byte-order mark at the start is dropped, `\r\n` line ends are read as `\n`), a chunk
at once; a line that does not decode is `invalid_utf8` with its line and offset, every line before it handed on first.
`iter_text_blocks` hands on a chunk's lines together (`TextBlock`: their text whole, split into lines only when asked,
and their bytes), for readers that take lines a span at a time or look for their marks in the bytes (with
`decode=False` the chunk is checked to be UTF-8 without keeping its text, decoded only if asked for);
`iter_text_lines` one `TextLine` at a time. A reader that numbers its own lines and bounds its own records (Aider:
`max_records` per run, not per file) asks for blocks not numbered (`numbered=False`): no chunk's lines are counted (a
count is one more scan of every byte), and only a rejected line's number is worked out, from the bytes before it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import accumulate, repeat
from operator import add
from pathlib import Path
from typing import BinaryIO

from extractors.bounded import Limits, check_source_size
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError


@dataclass(frozen=True, slots=True)
class TextLine:
    """One line: its 0-based number, the byte offset of its first byte, its text without the line end (`\\n`, and a
    `\\r` before it), its size in bytes with the line end, and whether it ended with a newline."""

    index: int
    offset: int
    text: str
    size: int
    complete: bool = True


def _ends_with_newline(handle: BinaryIO, size: int) -> bool:
    """Whether the file's last byte is a newline (an empty file counts as ending well)."""
    if size == 0:
        return True
    handle.seek(size - 1)
    last = handle.read(1)
    handle.seek(0)
    return last == b"\n"


class TextBlock:
    """Consecutive lines of one read chunk (`index` -1: not numbered, `iter_text_blocks(numbered=False)`; `line(i)`
    is then numbered from -1): `text` is their text (each line as `TextLine.text`, followed by `\\n`; the
    last without it when `complete` is False), `texts[i]` is line `index + i` (split from `text` when first asked
    for), which starts at byte `start(i)` and ends (its line end included) at `start(i + 1)`. `complete` is False only
    for a block whose last line is the file's last and has no newline.

    The byte offsets are worked out when asked for (most readers want a few: where a session starts, where it ends),
    from the text when it is the bytes decoded as they are (no `\\r` dropped, no byte-order mark), else from the
    bytes, all at once."""

    __slots__ = ("_data", "_offset", "_plain", "_raw", "_starts", "_text", "_texts", "complete", "index")

    def __init__(self, index: int, text: str | None, data: bytes, offset: int, complete: bool = True) -> None:
        """`text` None: `data` decoded when first asked for, `data` being checked UTF-8 already, with no `\\r` and no
        byte-order mark (`_block` with decode=False)."""
        self.index = index
        self._text = text
        self.complete = complete
        self._texts: list[str] | None = None
        self._data = data  # the block's bytes: exactly its lines, line ends included
        self._offset = offset
        self._starts: list[int] | None = None
        self._raw: bytes | None = None
        self._plain = not (b"\r" in data or (offset == 0 and data.startswith(b"\xef\xbb\xbf")))
        if not self._plain:
            self.starts()

    @property
    def text(self) -> str:
        """The lines' text, each followed by `\\n` (the last without it when `complete` is False)."""
        if self._text is None:
            self._text = self._data.decode("utf-8")
        return self._text

    @property
    def texts(self) -> list[str]:
        """The lines' texts, without their line ends."""
        if self._texts is None:
            texts = self.text.split("\n")
            if self.complete:
                texts.pop()  # the empty piece after the last newline
            self._texts = texts
        return self._texts

    def starts(self) -> list[int]:
        """Where each line starts, and where the block ends (one more entry than `texts`)."""
        if self._starts is None:
            raws = self._data.split(b"\n")
            if self.complete:
                raws.pop()  # the empty piece after the last newline
            starts = list(accumulate(map(add, map(len, raws), repeat(1)), initial=self._offset))
            starts[-1] = self._offset + len(self._data)  # the file's last line may have no newline to count
            self._starts = starts
        return self._starts

    @property
    def raw(self) -> bytes:
        """`text` as UTF-8: the block's bytes as they are, unless a `\\r` before a newline or a byte-order mark was
        dropped (for readers that look for their lines' marks in the bytes and decode only what they keep)."""
        if self._plain:
            return self._data
        if self._raw is None:
            self._raw = self.text.encode()
        return self._raw

    def offset_at(self, position: int) -> int:
        """The byte offset in the file of `raw[position]`, the start of a line (`len(raw)`: where the block ends)."""
        if self._plain:
            return self._offset + position
        raw = self.raw
        if position >= len(raw):
            return self._offset + len(self._data)
        return self.starts()[raw.count(b"\n", 0, position)]

    def start(self, i: int) -> int:
        """The byte offset of line `index + i`; `i == len(texts)`: where the block ends."""
        if self._starts is not None:
            return self._starts[i]
        texts = self.texts
        if i == len(texts):
            return self._offset + len(self._data)
        return self._offset + (len("\n".join(texts[:i]).encode()) + 1 if i else 0)

    def line(self, i: int) -> TextLine:
        """Line `index + i` as a `TextLine`."""
        start = self.start(i)
        last = i == len(self.texts) - 1
        return TextLine(self.index + i, start, self.texts[i], self.start(i + 1) - start, self.complete or not last)


CHUNK_BYTES = 1 << 20  # what one read takes; a line longer than this is carried over to the next read


def iter_text_lines(path: str | Path, limits: Limits) -> Iterator[TextLine]:
    """Stream the lines of a UTF-8 text file (blank lines included): `iter_text_blocks`, one `TextLine` at a time.
    Raises as `iter_text_blocks`."""
    for block in iter_text_blocks(path, limits):
        index, texts, starts = block.index, block.texts, block.starts()
        last = len(texts) - 1
        for i, text in enumerate(texts):
            yield TextLine(index + i, starts[i], text, starts[i + 1] - starts[i], block.complete or i != last)


def iter_text_blocks(
    path: str | Path, limits: Limits, decode: bool = True, numbered: bool = True
) -> Iterator[TextBlock]:
    """Stream the lines of a UTF-8 text file (blank lines included), a read chunk's lines at a time; with
    decode=False a chunk is checked to be UTF-8 without making its text (`TextBlock.text` decodes it when asked for),
    for a reader that reads the bytes (`TextBlock.raw`): the same blocks, the same errors. With numbered=False the
    lines are not counted: each block's `index` is -1 and `max_records` is not checked (the caller bounds its records
    itself); a rejected line still says its number, the lines before it counted when it is found. Raises:
    - RejectError(limit_exceeded) for a source, line or line count (numbered only) over the limits, before reading
      past the bound;
    - RejectError(invalid_utf8) for a line that does not decode;
    - RejectError(source_unreadable) when the file cannot be opened;
    - DeferError(write_in_progress) when the file ends without a newline and changed within `settle_seconds`;
    - DeferError(changed_during_read) when the file's size or mtime moved while it was read.
    Every line before the one that is rejected is handed on first, as `iter_text_lines` would.
    """
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        after_open = os.fstat(handle.fileno())
        if (after_open.st_size, after_open.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed between discovery and open")
        if not _ends_with_newline(handle, before.st_size) and time.time() - before.st_mtime < limits.settle_seconds:
            raise DeferError(DeferCode.WRITE_IN_PROGRESS, "last line has no newline and the file changed recently")
        index = 0 if numbered else -1
        if not numbered:
            limits = replace(limits, max_records=sys.maxsize)  # the slow path's per-line check: not this file's
        offset = 0
        carried: list[bytes] = []  # the start of a line the reads so far cut, never longer than max_line_bytes
        carried_bytes = 0
        while True:
            data = handle.read(CHUNK_BYTES)
            if not data:
                break
            cut = data.rfind(b"\n") + 1
            if not cut:
                carried.append(data)
                carried_bytes += len(data)
                if carried_bytes > limits.max_line_bytes:  # raises: the line is too long
                    yield from _slow_block(b"".join(carried), index, offset, limits, handle)
                continue
            if carried:
                carried.append(data[:cut])
                whole = b"".join(carried)
            else:
                whole = data[:cut] if cut < len(data) else data
            if numbered:
                lines = whole.count(b"\n")  # every line of `whole` ends with its newline
                yield from _block(whole, index, offset, limits, lines, decode)
                index += lines
            else:
                yield from _block(whole, index, offset, limits, None, decode, handle)
            offset += len(whole)
            carried = [data[cut:]] if cut < len(data) else []
            carried_bytes = len(data) - cut
            if carried_bytes > limits.max_line_bytes:  # raises: the line is too long
                yield from _slow_block(carried[0], index, offset, limits, handle)
        tail = b"".join(carried)
        if tail:
            tail_lines = tail.count(b"\n") + (not tail.endswith(b"\n")) if numbered else None
            yield from _block(tail, index, offset, limits, tail_lines, decode, handle)
            offset += len(tail)
        after = os.fstat(handle.fileno())
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or offset != before.st_size:
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    finally:
        handle.close()


def _block(
    data: bytes,
    index: int,
    offset: int,
    limits: Limits,
    n: int | None,
    decode: bool = True,
    handle: BinaryIO | None = None,
) -> Iterator[TextBlock]:
    """The `n` lines of `data` (whole lines; only the file's last may lack its newline; None: not counted, `index`
    -1, the file open as `handle`), checked and decoded at once (decode=False: checked only, when the bytes are the
    text's as they are: no `\\r`, no byte-order mark); a block with a line over the limits, or one that does not
    decode, is read line by line to say which."""
    complete = data.endswith(b"\n")
    if (n is not None and index + n > limits.max_records) or (
        len(data) > limits.max_line_bytes and max(map(len, data.split(b"\n"))) + 1 > limits.max_line_bytes
    ):
        yield from _slow_block(data, index, offset, limits, handle)
        return
    if not decode and b"\r" not in data and not (offset == 0 and data.startswith(_BOM)) and _is_utf8(data):
        yield TextBlock(index, None, data, offset, complete)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield from _slow_block(data, index, offset, limits, handle)
        return
    if b"\r" in data:  # as `"\r" in text` (a CR byte in UTF-8 is only ever CR), a scan of bytes, not of 1-4 byte chars
        text = text.replace("\r\n", "\n")
        if not complete and text.endswith("\r"):
            text = text[:-1]
    if offset == 0 and text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark (an editor's, or `--encoding utf-8-sig`) is not text
    yield TextBlock(index, text, data, offset, complete)


_BOM = b"\xef\xbb\xbf"


def _number(handle: BinaryIO | None, index: int, offset: int) -> int:
    """The number of the line that starts at byte `offset`: `index` when the lines are numbered, else the newlines
    before it counted (a rejected line of a file read without numbering: read again up to it, a chunk at a time; a
    file that changed meanwhile is deferred after the read as any other)."""
    if index >= 0 or handle is None:
        return index
    fd, lines, position = handle.fileno(), 0, 0
    while position < offset:
        data = os.pread(fd, min(CHUNK_BYTES, offset - position), position)
        if not data:
            break
        lines += data.count(b"\n")
        position += len(data)
    return lines


UTF8_PIECE = 16384  # bytes checked at a time by `_is_utf8`, cut after a newline


def _is_utf8(data: bytes) -> bool:
    """Whether `data` decodes as UTF-8 (`bytes.decode`'s strict reading), without making the whole chunk's text: the
    chunk is taken in pieces of ~UTF8_PIECE bytes cut after a newline (an ASCII byte, never inside a character, so the
    chunk is UTF-8 exactly when every piece is), a piece of ASCII passed by `bytes.isascii` and only the others
    decoded. Decoding the chunk whole made its text 4 bytes a character from its first character past U+FFFF (an
    emoji every few KB in a transcript): 2x the time of the pieces here. False: the caller decodes, which says why."""
    if data.isascii():  # (a scan that stops at the first byte past 0x7F)
        return True
    size, start = len(data), 0
    try:
        while start < size:
            end = data.find(b"\n", start + UTF8_PIECE)
            end = size if end < 0 else end + 1
            piece = data[start:end]
            if not piece.isascii():
                piece.decode("utf-8")
            start = end
    except UnicodeDecodeError:
        return False
    return True


def _slow_block(
    data: bytes, index: int, offset: int, limits: Limits, handle: BinaryIO | None = None
) -> Iterator[TextBlock]:
    """`data` line by line, as a bounded readline reads it: the lines before the first one over the limits (or not
    UTF-8) as one block, then the RejectError (the line's number the file's, `_number`, also when `index` is -1: not
    numbered). A block with no such line is yielded whole."""
    texts: list[str] = []
    position = 0
    first = _number(handle, index, offset)
    while position < len(data):
        end = data.find(b"\n", position, position + limits.max_line_bytes + 1)
        raw = data[position : end + 1] if end >= 0 else data[position : position + limits.max_line_bytes + 1]
        try:
            texts.append(_decode_line(raw, first + len(texts), offset + position, limits))
        except RejectError:
            if texts:
                yield TextBlock(index, "".join(t + "\n" for t in texts), data[:position], offset)
            raise
        position += len(raw)
    if texts:
        complete = data.endswith(b"\n")
        yield TextBlock(index, "\n".join(texts) + ("\n" if complete else ""), data, offset, complete)


def _decode_line(raw: bytes, index: int, offset: int, limits: Limits) -> str:
    """One line read by a bounded readline (`raw`, at most max_line_bytes + 1 bytes) -> its text. Raises
    RejectError(limit_exceeded | invalid_utf8)."""
    if len(raw) > limits.max_line_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"line longer than max_line_bytes={limits.max_line_bytes}",
            line=index,
            offset=offset,
        )
    if index >= limits.max_records:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"more than max_records={limits.max_records} lines",
            line=index,
            offset=offset,
        )
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if body.endswith(b"\r"):
        body = body[:-1]
    if index == 0 and body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]  # a byte-order mark (an editor's, or `--encoding utf-8-sig`) is not text
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RejectError(
            RejectCode.INVALID_UTF8,
            f"invalid UTF-8 at byte {exc.start} of the line",
            line=index,
            offset=offset,
        ) from exc
