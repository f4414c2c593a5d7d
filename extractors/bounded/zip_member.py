"""Reading one member of a zip archive as a stream, without extracting to disk, with zip-bomb checks first.

Before a byte is decompressed: every member name is checked for path tricks (absolute, `..`, drive letters), the
wanted member is found (at the top or under a single top folder), it must not be encrypted, and its declared size
and compression ratio must pass `Limits`. While reading, the decompressed bytes are counted against the declared
size (a lying header cannot inflate past it).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from extractors.bounded import Limits, check_source_size
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; the end record of an empty archive
# What a damaged or unsupported archive raises inside zipfile/zlib; each becomes `source_unreadable`.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError)


def looks_like_zip(path: str | Path) -> bool:
    """True when the file starts with a zip signature (JSON never starts with `PK`). Raises RejectError."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) in _ZIP_MAGIC
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc


@dataclass(slots=True)
class MemberStream:
    """A zip member being read: `read(n)` returns decompressed bytes, counted against the declared size."""

    name: str
    declared: int
    _raw: IO[bytes]
    count: int = 0

    def read(self, size: int = -1, /) -> bytes:
        want = self.declared - self.count + 1 if size < 0 else size
        try:
            data = self._raw.read(want)
        except _ZIP_ERRORS as exc:
            raise RejectError(
                RejectCode.SOURCE_UNREADABLE,
                f"{self.name}: damaged zip data after {self.count} bytes ({exc})",
                offset=self.count,
            ) from exc
        self.count += len(data)
        if self.count > self.declared:
            raise RejectError(
                RejectCode.LIMIT_EXCEEDED,
                f"{self.name} decompresses past its declared size of {self.declared} bytes",
                offset=self.declared,
            )
        if not data and size != 0 and self.count != self.declared:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"{self.name} ends after {self.count} bytes but declares {self.declared}",
                offset=self.count,
            )
        return data


def unsafe_name(name: str) -> bool:
    """A member name that would escape an extraction folder: absolute, a drive letter, or a `..` part."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts


def find_member(infos: list[zipfile.ZipInfo], basename: str) -> zipfile.ZipInfo:
    """The member called `basename` at the top, else the only one under a single top folder.

    Raises RejectError(source_unreadable) when there is none, (inconsistent_source) when several could be meant.
    """
    top = [i for i in infos if i.filename == basename]
    nested = [i for i in infos if i.filename.count("/") == 1 and i.filename.split("/")[1] == basename]
    if len(top) == 1:
        return top[0]
    if len(top) > 1 or len(nested) > 1:
        names = ", ".join(sorted(i.filename for i in top + nested))
        raise RejectError(RejectCode.INCONSISTENT_SOURCE, f"several {basename} in the archive: {names}")
    if nested:
        return nested[0]
    raise RejectError(RejectCode.SOURCE_UNREADABLE, f"no {basename} in the archive (not a ChatGPT export?)")


def check_member(info: zipfile.ZipInfo, limits: Limits) -> None:
    """Refuse an encrypted member, or one whose declared size or compression ratio passes the limits."""
    if info.flag_bits & 0x1:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"{info.filename} is encrypted")
    if info.file_size > limits.max_archive_member_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"{info.filename} declares {info.file_size} bytes, over "
            f"max_archive_member_bytes={limits.max_archive_member_bytes}",
        )
    if info.file_size > 0 and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"{info.filename} expands {info.compress_size} -> {info.file_size} bytes, over "
            f"max_compression_ratio={limits.max_compression_ratio} (zip bomb?)",
        )


@contextmanager
def open_member(path: str | Path, basename: str, limits: Limits) -> Iterator[MemberStream]:
    """Open the archive at `path` and stream its member `basename` (see `find_member`), checked first.

    Raises RejectError(limit_exceeded | source_unreadable | inconsistent_source) and DeferError(changed_during_read).
    """
    before = check_source_size(path, limits)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open: {exc.strerror}") from exc
    try:
        try:
            archive = zipfile.ZipFile(handle)
        except _ZIP_ERRORS as exc:
            raise RejectError(RejectCode.SOURCE_UNREADABLE, f"not a readable zip archive: {exc}") from exc
        with archive:
            infos = archive.infolist()
            if len(infos) > limits.max_records:
                raise RejectError(
                    RejectCode.LIMIT_EXCEEDED, f"{len(infos)} members, over max_records={limits.max_records}"
                )
            for info in infos:
                if unsafe_name(info.filename):
                    raise RejectError(RejectCode.SOURCE_UNREADABLE, f"unsafe member name {info.filename!r}")
            info = find_member(infos, basename)
            check_member(info, limits)
            try:
                raw = archive.open(info)
            except _ZIP_ERRORS as exc:
                raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot open {info.filename}: {exc}") from exc
            with raw:
                yield MemberStream(info.filename, info.file_size, raw)
        st = os.fstat(handle.fileno())
        if (st.st_size, st.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise DeferError(DeferCode.CHANGED_DURING_READ, "archive changed while it was read")
    finally:
        handle.close()
