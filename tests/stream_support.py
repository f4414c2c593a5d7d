"""What the two-pass tests of every reader share (tests/test_claude_stream.py, tests/test_codex_stream.py): the
lowered limits, and the comparison of a two-pass read with one pass, row for row."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from extractors import registry
from extractors.bounded import Limits
from extractors.errors import DeferCode, DeferError
from extractors.model import Deferred, Loaded, Outcome, Rejected, Source, Streamed
from extractors.registry import agents
from flows.etl.settings import Settings, load_settings
from tests.support import SETTLED
from transforms.normalize import SessionStream, session_tables
from transforms.redact import Redactor

STREAMED = dataclasses.replace(SETTLED, stream_source_bytes=0, stream_part_bytes=40)  # every file, tiny parts
VERSIONS = {agent: "1" for agent in agents()}
KEY = bytes(range(32))

Reader = Callable[[Source, Limits], Iterator[Outcome]]
StreamingReader = Callable[[Source, Limits], Iterator[Outcome | Streamed]]


def rows(tables: list[dict[str, pa.Table]]) -> dict[str, list[str]]:
    """Every row of every table, as sorted reprs: the corpus a load would write, whatever the order of parts."""
    names = tables[0].keys()
    return {name: sorted(repr(r) for t in tables for r in t[name].to_pylist()) for name in names}


def one_pass_rows(read: Reader, source: Source, redactor: Redactor) -> dict[str, list[str]]:
    outcomes = list(read(source, SETTLED))
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded), outcomes
    return rows([session_tables(outcomes, VERSIONS, redactor, source_column="_source")])


def streamed_rows(
    read_streaming: StreamingReader, source: Source, redactor: Redactor, limits: Limits = STREAMED
) -> tuple[dict[str, list[str]], int]:
    """The rows of the two-pass read, and how many parts it came in."""
    outcomes = list(read_streaming(source, limits))
    assert len(outcomes) == 1 and isinstance(outcomes[0], Streamed), outcomes
    item = outcomes[0]
    assert item.head.turns == () and item.head.tool_calls == ()
    session_rows = SessionStream(item, VERSIONS, redactor, source_column="_source")
    tables = [session_rows.part_tables(part) for part in item.parts]
    return rows([*tables, session_rows.head_tables()]), len(tables)


def problem(outcome: object) -> tuple[str, str, str] | None:
    if isinstance(outcome, Rejected | Deferred):
        return (type(outcome).__name__, outcome.code.value, outcome.detail)
    return None


def assert_streamed_as_one_pass(source: Source) -> None:
    """A file read in two passes gives the rows one pass gives, or the same rejection."""
    one = list(registry.read_streaming(source, SETTLED))  # under the default threshold: one pass
    two = list(registry.read_streaming(source, STREAMED))
    loaded = [o for o in one if isinstance(o, Loaded)]
    if not loaded:
        assert len(one) == len(two) == 1 and problem(two[0]) == problem(one[0]) is not None
        return
    assert len(loaded) == len(one) == len(two) == 1 and isinstance(two[0], Streamed)
    redactor = Redactor(KEY)
    expected = rows([session_tables(loaded, VERSIONS, redactor)])
    session_rows = SessionStream(two[0], VERSIONS, redactor)
    got = rows([*(session_rows.part_tables(p) for p in two[0].parts), session_rows.head_tables()])
    assert got == expected


def stream_settings(home: Path, data: Path, limits: Limits, agent: str) -> Settings:
    names = ("stream_source_bytes", "stream_part_bytes", "settle_seconds")
    return load_settings(
        home=home,
        data_dir=data,
        sources=[agent],
        env={"HOME": str(home)},
        lock_wait=5,
        limits={name: getattr(limits, name) for name in names},
    )


def assert_deferred_when_a_line_changes(path: Path, item: Streamed, old: bytes, new: bytes) -> None:
    """Rewrite `old` as `new` (the same length) in the file between the passes, keeping its size and mtime: only
    the CRC of the line read again can tell, and pass 2 defers the source."""
    assert len(old) == len(new) and old in path.read_bytes()
    st = path.stat()
    path.write_bytes(path.read_bytes().replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(DeferError) as caught:
        list(item.parts)
    assert caught.value.code is DeferCode.CHANGED_DURING_READ and "between the two passes" in caught.value.detail
