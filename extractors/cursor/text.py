"""A bounded reader of a plain-text transcript's lines (Cursor's legacy `<uuid>.txt`), as `iter_jsonl` reads JSONL.

Every limit holds before a line is held: `max_source_bytes`, `max_line_bytes` (a bounded readline), `max_records`
(lines). A file that changes while it is read is deferred; a last line without a newline in a file changed within
`settle_seconds` is deferred too (being written); an older one is read as it is (plain text has no way to tell a
cut line from a last line without newline).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

from extractors.bounded import Limits, check_source_size
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError


def iter_text_lines(path: str | Path, limits: Limits) -> Iterator[tuple[int, str]]:
    """(0-based line number, the line without its newline) for every line. Raises RejectError (limit_exceeded,
    invalid_utf8, source_unreadable) and DeferError (write_in_progress, changed_during_read)."""
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        if _fingerprint(os.fstat(handle.fileno())) != _fingerprint(before):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed between discovery and open")
        index = offset = 0
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
                    RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} lines", line=index
                )
            if not raw.endswith(b"\n") and time.time() - before.st_mtime < limits.settle_seconds:
                raise DeferError(DeferCode.WRITE_IN_PROGRESS, "last line has no newline and the file changed recently")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RejectError(
                    RejectCode.INVALID_UTF8, f"invalid UTF-8 at byte {exc.start} of the line", line=index, offset=offset
                ) from exc
            yield index, text.rstrip("\r\n")
            offset += len(raw)
            index += 1
        if _fingerprint(os.fstat(handle.fileno())) != _fingerprint(before) or offset != before.st_size:
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    finally:
        handle.close()


def _fingerprint(st: os.stat_result) -> tuple[int, int]:
    return (st.st_size, st.st_mtime_ns)
