"""Every open() of a source and every size limit: bounded, complete-or-reject readers.

Readers here stream; nothing is materialised past a limit. Limits are named constants below, overridable in
settings (`[limits]` in the TOML file, `TRANSCRIPTS_LIMIT_<NAME>`), and injected smaller in tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from extractors.errors import DeferCode, DeferError, RejectCode, RejectError
from extractors.model import Disposition

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds checked before data is materialised. Defaults are chosen so that a real heavy corpus passes.

    - max_source_bytes: real Claude sessions reach hundreds of MB (docs/agents/claude.md "Edge cases in real files"),
      Codex rollouts 100 MB and more; 2 GiB passes all of those and stops a runaway file (a 98 GB rollout) before it is
      opened.
    - max_line_bytes: one JSONL record. Real lines reach tens of MB (base64 screenshots, Read results);
      docs/agents/claude.md "Edge cases in real files": never cap below ~64 MB. 128 MiB passes those; a 500 MB Codex
      image line is rejected, visibly, and the limit can be raised. Checked with a bounded readline: a longer line is
      never read into memory.
    - max_records: records (lines, messages, parts) in one session. The longest real sessions have tens of
      thousands; one million is far past that and still bounds memory.
    - max_document_bytes: a whole-JSON document read at once (Gemini session, summary.json, one OpenCode file).
    - max_conversation_bytes: one element of a streamed JSON array (a ChatGPT conversation) or one session's
      payload in a database: the unit that has to be held in memory.
    - max_field_bytes: not a rejection. Text stored per field (a tool output, a pasted blob) is clipped to this
      many bytes with a marker saying how much was cut; turns are never clipped below it.
    - max_archive_member_bytes / max_compression_ratio: declared sizes of a zip member, checked before reading
      (zip bombs).
    - settle_seconds: a source whose last line has no newline and which changed less than this long ago is
      being written: deferred, not rejected. Older partial tails are rejected as `truncated_tail`.
    - stream_source_bytes: a Claude session file or Codex rollout larger than this is read in two passes, so that
      memory follows the limits and not the session (`extractors.bounded.twopass`); smaller files are read once.
    - stream_part_bytes: the payload text one part of such a session holds before it is handed on to be staged.
    """

    max_source_bytes: int = 2 * GiB
    max_line_bytes: int = 128 * MiB
    max_records: int = 1_000_000
    max_document_bytes: int = 256 * MiB
    max_conversation_bytes: int = 256 * MiB
    max_field_bytes: int = 1 * MiB
    max_archive_member_bytes: int = 8 * GiB
    max_compression_ratio: int = 200
    settle_seconds: float = 600.0
    stream_source_bytes: int = 64 * MiB
    stream_part_bytes: int = 16 * MiB

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.__dataclass_fields__)

    def read_twice(self, size: int) -> bool:
        """Whether a source of `size` bytes is read in two passes (by the readers that can) and, being big, in a
        worker process of its own: over `stream_source_bytes`."""
        return size > self.stream_source_bytes


# Several complete JSON records glued onto one line (`{"type":"progress",...}{"type":"summary",...}`, written by
# Claude Code itself, docs/design.md "Records glued onto one line") are read as those records, in order. The first keeps
# the line's index, so every id that exists today stays what it is; the k-th further one (k >= 1) of line L gets
# GLUED_INDEX_BASE + L * GLUED_INDEX_STRIDE + k: outside the range of line numbers (a line number is below the file's
# size in bytes, and 10**15 bytes is a petabyte), unique, and stable across reruns and appends. GLUED_MAX_VALUES bounds
# the records of one line (and keeps k below the stride).
GLUED_INDEX_BASE = 10**15
GLUED_INDEX_STRIDE = 1000
GLUED_MAX_VALUES = GLUED_INDEX_STRIDE


# The census kind of a line that held several records, the same in every JSONL reader: counted once per line, on
# top of its records (which are counted under their own kinds as usual).
GLUED_LINE_KIND = "glued_line"


def count_glued_line(line: Line, census: Counter[tuple[str, str, Disposition]]) -> None:
    """Count `line` under GLUED_LINE_KIND when it is the first record of a glued line (so once per line)."""
    if line.starts_glued_line:
        census[(GLUED_LINE_KIND, "", Disposition.SKIPPED)] += 1


def glued_index(line: int, part: int) -> int:
    """The record index of value `part` (0-based) of physical line `line`: the line itself for the first."""
    return line if part == 0 else GLUED_INDEX_BASE + line * GLUED_INDEX_STRIDE + part


@dataclass(frozen=True, slots=True)
class Line:
    """One JSONL record: its record index, byte offset, and the parsed object.

    `index` is the 0-based line number, except for the further records of a glued line (see `glued_index`);
    `line` is always the physical line, `part` the record's place on it and `parts` how many records it holds.
    """

    index: int
    offset: int
    record: dict[str, Any]
    line: int = 0
    part: int = 0
    parts: int = 1
    size: int = 0  # bytes of the physical line, newline included
    crc: int | None = None  # CRC-32 of those bytes, when `iter_jsonl(..., checksums=True)` was asked for it

    @property
    def starts_glued_line(self) -> bool:
        """True on the first record of a line that holds several: count glued lines with it, once each."""
        return self.part == 0 and self.parts > 1


def _fingerprint(st: os.stat_result) -> tuple[int, int]:
    return (st.st_size, st.st_mtime_ns)


def check_source_size(path: str | Path, limits: Limits) -> os.stat_result:
    """Stat a regular file and reject it when it passes `max_source_bytes`. Raises RejectError."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot stat: {exc.strerror}") from exc
    return _checked_size(st, limits)


def _checked_size(st: os.stat_result, limits: Limits) -> os.stat_result:
    """`check_source_size` of a stat already taken."""
    if not stat.S_ISREG(st.st_mode):
        raise RejectError(RejectCode.SOURCE_UNREADABLE, "not a regular file")
    if st.st_size > limits.max_source_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"source is {st.st_size} bytes, over max_source_bytes={limits.max_source_bytes}",
        )
    return st


def parse_json(raw: bytes, *, line: int | None = None, offset: int | None = None) -> Any:
    """Parse one JSON value. Raises RejectError(invalid_utf8 | invalid_json).

    orjson first (fast); on failure the stdlib, which accepts the lone UTF-16 surrogates that Claude Code writes
    when it cuts a string mid-emoji (`"\\ud83d…"`, anthropics/claude-code#56064); those are replaced by U+FFFD.
    An integer literal longer than the interpreter converts (`sys.get_int_max_str_digits()`, 4300 by default;
    orjson reads it as infinity and refuses it) is `invalid_json` too, with a detail that says so: no field holds
    such a number, and the stdlib's ValueError must not stop the run.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _parse_json_slowly(raw, line, offset)


def parse_json_values(raw: bytes, *, line: int | None = None, offset: int | None = None) -> list[Any]:
    """Parse one JSONL line: one JSON value, or several complete values glued together (in order).

    Raises RejectError(invalid_utf8 | invalid_json) when the line is neither, and RejectError(limit_exceeded)
    past GLUED_MAX_VALUES values. orjson cannot say where a value ends, so a glued line is split with the
    stdlib's `JSONDecoder.raw_decode`.
    """
    try:
        return [orjson.loads(raw)]
    except orjson.JSONDecodeError:
        return _parse_values_slowly(raw, line, offset)


def _parse_values_slowly(raw: bytes, line: int | None, offset: int | None) -> list[Any]:
    """The stdlib's reading of a line orjson refused: one value, a glued sequence, or a classified rejection."""
    text = _decode(raw, line, offset)
    try:
        return [_loads(text, line, offset)]
    except RejectError as exc:
        cause = exc.__cause__
        if isinstance(cause, json.JSONDecodeError) and cause.msg == "Extra data":
            return _split_glued(text, exc, line, offset)
        raise


def _split_glued(text: str, not_values: RejectError, line: int | None, offset: int | None) -> list[Any]:
    """The complete JSON values of `text`, in order; `not_values` is raised when the text is not only those."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position] in _JSON_WHITESPACE:
            position += 1
        if position == len(text):
            return values
        if len(values) >= GLUED_MAX_VALUES:
            raise RejectError(
                RejectCode.LIMIT_EXCEEDED,
                f"more than {GLUED_MAX_VALUES} JSON records glued onto one line",
                line=line,
                offset=offset,
            )
        try:
            value, position = decoder.raw_decode(text, position)
            values.append(scrub_surrogates(value))
        except json.JSONDecodeError as exc:
            raise not_values from exc
        except (ValueError, RecursionError) as exc:
            raise _unreadable_number_or_depth(exc, line, offset) from exc


_JSON_WHITESPACE = frozenset(" \t\n\r")


def _decode(raw: bytes, line: int | None, offset: int | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RejectError(
            RejectCode.INVALID_UTF8, f"invalid UTF-8 at byte {exc.start} of the record", line=line, offset=offset
        ) from exc


def _loads(text: str, line: int | None, offset: int | None) -> Any:
    try:
        return scrub_surrogates(json.loads(text))
    except json.JSONDecodeError as exc:
        # A record of one line: json's "line 1 column 26" would read as the file's first line; its column is what
        # places the fault within the record's line (`line` is the record's).
        where = f"{exc.msg} at column {exc.colno}" if line is not None and exc.lineno == 1 else str(exc)
        raise RejectError(RejectCode.INVALID_JSON, f"not JSON: {where}", line=line, offset=offset) from exc
    except (ValueError, RecursionError) as exc:
        raise _unreadable_number_or_depth(exc, line, offset) from exc


def _unreadable_number_or_depth(exc: Exception, line: int | None, offset: int | None) -> RejectError:
    """The stdlib's other refusals: nesting past the recursion limit, or an integer literal past the digit limit."""
    if isinstance(exc, RecursionError):
        detail = "not JSON: nested too deeply to read"
    else:
        digits = sys.get_int_max_str_digits()
        detail = f"not JSON this reader can hold: an integer literal of more than {digits} digits"
    return RejectError(RejectCode.INVALID_JSON, detail, line=line, offset=offset)


def _parse_json_slowly(raw: bytes, line: int | None, offset: int | None) -> Any:
    return _loads(_decode(raw, line, offset), line, offset)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """Replace lone surrogates in every string of a parsed JSON value, so that it encodes as UTF-8."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [scrub_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    return value


# The read buffer of a JSONL file: the file's size up to 1 MiB. With the default 8 KiB, a Claude line of a few KB to
# a few MB took several refills per `readline` (the 200 MB corpus's lines: 0.31 s to read from the page cache,
# 0.13 s with this).
READ_BUFFER_BYTES = 1 << 20


def _read_buffer(st: os.stat_result) -> int:
    return max(io.DEFAULT_BUFFER_SIZE, min(READ_BUFFER_BYTES, st.st_size + 1))


def iter_jsonl(path: str | Path, limits: Limits, *, checksums: bool = False) -> Iterator[Line]:
    """Stream the objects of a JSONL file, complete or not at all (`checksums`: each `Line` has its line's CRC-32).

    Yields every non-blank line as a `Line` (blank lines keep their index but yield nothing); a line holding
    several complete records glued together yields each (see `glued_index`). Raises:
    - RejectError(limit_exceeded) for a source, line or record count over the limits, before reading it;
    - RejectError(invalid_json | invalid_utf8 | bad_shape) for a bad line before the last one;
    - RejectError(truncated_tail) for a bad last line without newline older than `settle_seconds`;
    - DeferError(write_in_progress) for a last line without newline in a file changed within `settle_seconds`;
    - DeferError(changed_during_read) when the file's size or mtime moved while it was read.
    """
    for fields in iter_jsonl_fields(path, limits, checksums=checksums):
        yield Line(*fields)


# A `Line`'s fields as a plain tuple, in its order: (index, offset, record, line, part, parts, size, crc).
LineFields = tuple[int, int, dict[str, Any], int, int, int, int, int | None]


def iter_jsonl_fields(
    path: str | Path, limits: Limits, *, checksums: bool = False, known: Mapping[bytes, dict[str, Any]] | None = None
) -> Iterator[LineFields]:
    """`iter_jsonl`, each record as the fields of its `Line` (a tuple, in that order), not as a `Line`: for the
    readers of many small records, where making a `Line` (a frozen dataclass, ~0.8 us) costs as much as parsing
    its JSON (a Cursor transcript's rows: ~650 bytes each). The same records, limits and errors as `iter_jsonl`.

    `known`: whole lines (their newline included) that a format writes byte for byte the same many times, each
    with the record it parses to: such a line is not parsed again, its record is the object given (the same one
    each time: the caller never changes it, and may tell it by identity). Only lengths of those lines are looked
    up, so any other line costs one set look-up."""
    known = known or {}
    known_sizes = frozenset(len(raw) for raw in known)
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb", buffering=_read_buffer(before))  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        if _fingerprint(os.fstat(handle.fileno())) != _fingerprint(before):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed between discovery and open")
        index = 0
        offset = 0
        records = 0
        # Locals, not attribute look-ups: this loop runs once per line of every JSONL session (tens of thousands of
        # small lines in a Cursor corpus, where this loop's own work is a good part of the reading).
        readline = handle.readline
        max_line_bytes = limits.max_line_bytes
        max_records = limits.max_records
        loads = orjson.loads
        cap = max_line_bytes + 1
        while True:
            raw = readline(cap)
            if not raw:
                break
            size = len(raw)
            if size > max_line_bytes:
                raise RejectError(
                    RejectCode.LIMIT_EXCEEDED,
                    f"line longer than max_line_bytes={max_line_bytes}",
                    line=index,
                    offset=offset,
                )
            # `raw` is not empty here; `strip()` copied every line to ask whether it is blank. A line opening with
            # `{` (123), as nearly every record does, is not: asked by one byte, not a method call.
            if raw[0] == 123 or not raw.isspace():
                records += 1
                if records > max_records:
                    raise RejectError(
                        RejectCode.LIMIT_EXCEEDED,
                        f"more than max_records={max_records} records",
                        line=index,
                        offset=offset,
                    )
                values: list[Any] | None = None
                if raw[-1] == 10:  # ends with b"\n"
                    if size in known_sizes and raw in known:
                        value = known[raw]
                    else:
                        try:  # parse_json_values, inline: one record on the line is the rule, glued ones rare
                            value = loads(raw)
                        except orjson.JSONDecodeError:
                            values = _parse_values_slowly(raw, index, offset)
                else:
                    values = _parse_tail(raw, before, limits, index, offset)
                crc = zlib.crc32(raw) if checksums else None
                if values is None:
                    if not isinstance(value, dict):
                        raise RejectError(
                            RejectCode.BAD_SHAPE, "a JSONL record that is not an object", line=index, offset=offset
                        )
                    yield index, offset, value, index, 0, 1, size, crc
                else:
                    yield from _line_values(values, records, limits, index, offset, size, crc)
                    records += len(values) - 1
            offset += size
            index += 1
        if _fingerprint(os.fstat(handle.fileno())) != _fingerprint(before) or offset != before.st_size:
            raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    finally:
        handle.close()


def _line_values(
    values: list[Any], records: int, limits: Limits, index: int, offset: int, size: int, crc: int | None
) -> Iterator[LineFields]:
    """The records of line `index` that did not read as one JSON value (several glued, or a tail), `records` counted
    up to its first. Raises RejectError(limit_exceeded | bad_shape)."""
    if records + len(values) - 1 > limits.max_records:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"more than max_records={limits.max_records} records",
            line=index,
            offset=offset,
        )
    for part, value in enumerate(values):
        if not isinstance(value, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a JSONL record that is not an object", line=index, offset=offset)
        yield glued_index(index, part), offset, value, index, part, len(values), size, crc


def _parse_tail(raw: bytes, before: os.stat_result, limits: Limits, index: int, offset: int) -> list[Any]:
    """The last line has no newline: a session being written now, a crash's partial line, or just no newline."""
    recent = time.time() - before.st_mtime < limits.settle_seconds
    if recent:
        raise DeferError(DeferCode.WRITE_IN_PROGRESS, "last line has no newline and the file changed recently")
    try:
        return parse_json_values(raw, line=index, offset=offset)
    except RejectError as exc:
        raise RejectError(
            RejectCode.TRUNCATED_TAIL,
            f"partial last line older than settle_seconds={limits.settle_seconds:g}: {exc.detail}",
            line=index,
            offset=offset,
        ) from exc


def read_json_document(
    path: str | Path,
    limits: Limits,
    *,
    max_bytes: int | None = None,
    settle: bool = True,
    stat_result: os.stat_result | None = None,
) -> Any:
    """Read and parse one whole JSON document of at most `max_document_bytes` (or `max_bytes`).

    A document that ends early (cut inside a value: a write under way, or a crash) is treated like a partial JSONL
    tail when `settle` is on: deferred (write_in_progress) if the file changed within `settle_seconds`, else
    rejected as truncated_tail. A document broken before its end is invalid_json, however fresh.

    `stat_result`: the file's `os.stat` just taken by the caller (who stats the files of a unit before and after
    reading them), used instead of a new one; it is checked the same way (a regular file within max_source_bytes).

    Raises RejectError(limit_exceeded | source_unreadable | invalid_json | invalid_utf8 | truncated_tail) and
    DeferError(changed_during_read | write_in_progress).
    """
    cap = limits.max_document_bytes if max_bytes is None else max_bytes
    before = check_source_size(path, limits) if stat_result is None else _checked_size(stat_result, limits)
    if before.st_size > cap:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"document is {before.st_size} bytes, over the limit {cap}")
    want = min(cap, before.st_size) + 1  # +1: a document that grew past the limit
    try:
        # One os.read of the known size + 1 (no buffered file object): a regular file reads short only at its end,
        # so it is read on only while short of the size stat'ed (a file that moved is deferred below, by its size
        # or the fstat; one that grew past the cap is caught by the +1 byte).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            raw = os.read(fd, want)
            while len(raw) < min(want, before.st_size):
                more = os.read(fd, want - len(raw))
                if not more:
                    break
                raw += more
            after = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot read: {exc.strerror}") from exc
    if len(raw) > cap:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"document grew past the limit {cap}")
    if _fingerprint(after) != _fingerprint(before) or len(raw) != before.st_size:
        raise DeferError(DeferCode.CHANGED_DURING_READ, "file changed while it was read")
    try:
        return parse_json(raw)
    except RejectError as exc:
        if not settle or not ends_early(raw):
            raise
        if time.time() - before.st_mtime < limits.settle_seconds:
            raise DeferError(DeferCode.WRITE_IN_PROGRESS, "the document ends early and changed recently") from exc
        raise RejectError(
            RejectCode.TRUNCATED_TAIL,
            f"the document ends early and is older than settle_seconds={limits.settle_seconds:g}: {exc.detail}",
        ) from exc


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_TAIL = re.compile(r"(?:\.\d*)?(?:[eE][+-]?\d*)?")  # what is left of a number cut after its digits


def ends_early(raw: bytes) -> bool:
    """Whether `raw`, which does not parse, is cut short: the parser ran out of input (inside a string, an
    object, an array, a literal or a UTF-8 sequence), rather than meeting a wrong byte before the end."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        rest = text[exc.pos :].strip()
        cut_number = exc.pos > 0 and text[exc.pos - 1].isdigit() and _NUMBER_TAIL.fullmatch(rest) is not None
        return (
            not rest
            or cut_number
            or exc.msg.startswith("Unterminated string")
            or any(word.startswith(rest) and word != rest for word in _LITERALS)
        )
    except (RecursionError, ValueError):
        return False
    return False


def json_text(value: Any) -> str:
    """Compact JSON text of a parsed value, for storing a tool's input or output.

    orjson refuses integers past 64 bits (which the stdlib fallback in `parse_json` lets through); the stdlib
    writes those.
    """
    try:
        return orjson.dumps(value).decode("utf-8")
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def clip(text: str, limits: Limits) -> str:
    """Clip a stored text field to `max_field_bytes` (UTF-8), with a marker saying how much was cut."""
    if len(text) * 4 <= limits.max_field_bytes:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limits.max_field_bytes:
        return text
    kept = raw[: limits.max_field_bytes].decode("utf-8", "ignore")
    return f"{kept}\n[… clipped: {len(raw)} bytes in the source, {limits.max_field_bytes} kept]"


def content_sha256(path: str | Path) -> str:
    """SHA-256 of a source file's bytes, streamed (the manifest's content hash). Raises OSError."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
