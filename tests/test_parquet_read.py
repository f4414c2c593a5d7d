"""`sinks.files.read_parquet`: a file decoded in the calling thread (the project's files, buckets of a few MB) gives
the table the thread pool gives (a file of `THREADED_READ_BYTES` or more), whole or some of its columns."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sinks import files
from sinks.files import read_parquet, write_parquet


def test_a_file_reads_the_same_in_one_thread_and_on_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = 50_000
    table = pa.table(
        {
            "session_id": pa.array([f"s{i % 97}" for i in range(rows)], pa.string()),
            "n": pa.array(range(rows), pa.int64()),
            "text": pa.array([None if i % 11 == 0 else "é🚀" * (i % 7) for i in range(rows)], pa.string()),
        }
    )
    path = tmp_path / "part-000.parquet"
    write_parquet(table, path, row_group_rows=7_000)
    threads: list[bool] = []
    real_read = files.pq.ParquetFile.read

    def read(self: object, *args: object, **kwargs: bool) -> pa.Table:
        threads.append(kwargs["use_threads"])
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files.pq.ParquetFile, "read", read)
    alone = (read_parquet(path), read_parquet(path, ["text", "n"]))
    monkeypatch.setattr(files, "THREADED_READ_BYTES", 1)  # a scale knob: this small file counts as big
    pooled = (read_parquet(path), read_parquet(path, ["text", "n"]))
    assert threads == [False, False, True, True]
    assert alone[0].equals(table) and pooled[0].equals(table)
    assert alone[1].equals(table.select(["text", "n"])) and pooled[1].equals(alone[1])
