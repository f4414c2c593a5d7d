"""Writing generated files: JSONL streamed to disk with a byte count, and deterministic modification times."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson


class JsonlOut:
    """One JSONL file being written: compact JSON per line (as the CLIs write it), bytes counted as they go."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._handle: BinaryIO = path.open("ab" if append else "wb")
        self.size = path.stat().st_size if append else 0
        self.lines = 0

    def add(self, record: dict[str, Any]) -> None:
        self.add_raw(orjson.dumps(record))

    def add_raw(self, raw: bytes) -> None:
        self._handle.write(raw)
        self._handle.write(b"\n")
        self.size += len(raw) + 1
        self.lines += 1

    def close(self, mtime_ms: int) -> int:
        self._handle.close()
        set_mtime(self.path, mtime_ms)
        return self.size


def set_mtime(path: Path, mtime_ms: int) -> None:
    """Files get the time their session ended (deterministic, and old files look old, as on a real disk)."""
    ns = mtime_ms * 1_000_000
    os.utime(path, ns=(ns, ns))


def write_json(path: Path, value: Any, mtime_ms: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
    path.write_bytes(raw)
    set_mtime(path, mtime_ms)
    return len(raw)


@dataclass(slots=True)
class Written:
    """What one generated session put on disk."""

    agent: str
    session: str  # native id
    main_path: Path
    bytes_sources: int = 0  # bytes of the files the ETL reads (transcripts, summary.json)
    bytes_other: int = 0  # bytes of companion files it must not read (Grok journals, .meta.json)
    files: list[Path] = field(default_factory=list)  # every source file (main first)
