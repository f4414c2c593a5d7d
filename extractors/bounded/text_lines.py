"""Lines of a plain-text source (a Markdown chat log), complete or not at all, within `Limits`.

The text counterpart of `iter_jsonl`: a line is never read past `max_line_bytes` (a bounded readline), the lines are
counted against `max_records`, and the file's tail decides whether it is being written. A last line without a newline
in a file changed within `settle_seconds` is a write under way: the read is deferred before any line is handed on,
so a reader of a multi-session file never yields sessions and then a deferral. An older one is handed on flagged
(`TextLine.complete` False) and the reader decides (a truncated session, usually). Bytes are decoded as UTF-8 per
line (a byte-order mark at the start is dropped, `\r\n` line ends are read as `\n`); a line that does not decode is
`invalid_utf8` with its line and offset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
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


def iter_text_lines(path: str | Path, limits: Limits) -> Iterator[TextLine]:
    """Stream the lines of a UTF-8 text file (blank lines included). Raises:
    - RejectError(limit_exceeded) for a source, line or line count over the limits, before reading past the bound;
    - RejectError(invalid_utf8) for a line that does not decode;
    - RejectError(source_unreadable) when the file cannot be opened;
    - DeferError(write_in_progress) when the file ends without a newline and changed within `settle_seconds`;
    - DeferError(changed_during_read) when the file's size or mtime moved while it was read.
    """
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb", buffering=max(8192, min(1 << 20, before.st_size + 1)))  # noqa: SIM115 - closed below
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        after_open = os.fstat(handle.fileno())
        if (after_open.st_size, after_open.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed between discovery and open")
        if not _ends_with_newline(handle, before.st_size) and time.time() - before.st_mtime < limits.settle_seconds:
            raise DeferError(DeferCode.WRITE_IN_PROGRESS, "last line has no newline and the file changed recently")
        index = 0
        offset = 0
        while True:
            raw = handle.readline(limits.max_line_bytes + 1)
            if not raw:
                break
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
            complete = raw.endswith(b"\n")
            body = raw[:-1] if complete else raw
            if body.endswith(b"\r"):
                body = body[:-1]
            if index == 0 and body.startswith(b"\xef\xbb\xbf"):
                body = body[3:]  # a byte-order mark (an editor's, or `--encoding utf-8-sig`) is not text
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RejectError(
                    RejectCode.INVALID_UTF8,
                    f"invalid UTF-8 at byte {exc.start} of the line",
                    line=index,
                    offset=offset,
                ) from exc
            yield TextLine(index, offset, text, len(raw), complete)
            offset += len(raw)
            index += 1
        after = os.fstat(handle.fileno())
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or offset != before.st_size:
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    finally:
        handle.close()
