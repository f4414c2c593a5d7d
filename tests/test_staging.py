"""Staging files each batch's rows by (table, agent, bucket), one record batch each, for the commit to read alone."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa

from sinks.files import ScratchFile
from sinks.staging import stage_tables
from sinks.store import FileKey, Store
from transforms import ids

BUCKETS = {"claude": 4, "codex": 2}


def _rows(order: list[tuple[str, str, int]]) -> pa.Table:
    agents, sessions, lines = zip(*order, strict=True)
    return pa.table({"session_id": list(sessions), "agent": list(agents), "line": list(lines)})


def _filed(
    tmp_path: Path, name: str, rows: pa.Table, *, mapped: bool = False
) -> dict[FileKey, list[tuple[str, str, int]]]:
    staged = stage_tables(Store(tmp_path / name), "run", 0, 1, {"turns": rows}, BUCKETS)
    filed: dict[FileKey, list[tuple[str, str, int]]] = {}
    assert all(len(pieces) == 1 for pieces in staged.values())  # one record batch per key: its rows together
    for key, pieces in staged.items():
        for piece in pieces:
            opened = ScratchFile(piece.path, mapped=mapped)
            try:
                batch = opened.read(piece.offset, piece.size)
            finally:
                opened.close()
            assert batch.num_rows == piece.length
            filed.setdefault(key, []).extend(
                zip(
                    batch.column("agent").to_pylist(),
                    batch.column("session_id").to_pylist(),
                    batch.column("line").to_pylist(),
                    strict=True,
                )
            )
    return filed


def test_rows_are_filed_by_agent_and_bucket_in_the_order_they_came_whether_they_came_grouped_or_not(
    tmp_path: Path,
) -> None:
    rng = random.Random(5)
    sessions = [("claude", f"claude-{n}") for n in range(12)] + [("codex", f"codex-{n}") for n in range(6)]
    came = [(agent, sid, line) for agent, sid in sessions for line in range(rng.randint(1, 4))]
    rng.shuffle(came)  # sessions' rows interleaved, agents and buckets mixed: staging sorts them (a copy)

    def bucket(row: tuple[str, str, int]) -> tuple[str, int]:
        return row[0], ids.bucket_of(row[1], BUCKETS[row[0]])

    grouped = sorted(came, key=bucket)  # as a batch hands them (stable): staging keeps them as they are
    expected: dict[FileKey, list[tuple[str, str, int]]] = {}
    for row in came:
        agent, number = bucket(row)
        expected.setdefault(FileKey("turns", agent, number), []).append(row)
    assert len(expected) > 3  # several agents and buckets, or the test shows nothing

    assert _filed(tmp_path, "shuffled", _rows(came)) == expected
    assert _filed(tmp_path, "grouped", _rows(grouped)) == expected
    assert _filed(tmp_path, "mapped", _rows(came), mapped=True) == expected  # read where the file is mapped
