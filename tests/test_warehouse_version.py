"""A warehouse this DuckDB cannot open (a user's DuckDB 2.0 file) is rebuilt from Parquet by the next run."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from flows.etl.status import read_status
from sinks import query, search, warehouse
from tests.test_warehouse_views import load_sample

MASK = (1 << 64) - 1
CHECKSUM_FACTOR = 0xBF58476D1CE4E5B9  # DuckDB's checksum: 5381 xor (each 8-byte word * this), mod 2**64


def pretend_newer_storage(path: Path, version: int = 69) -> None:
    """Rewrite the file header's storage version to `version` (69 is DuckDB 2.0's), keeping its checksum valid.

    The main header is `checksum u64 | "DUCK" | version u64 | ...`; the checksum covers everything after itself, word
    by word, so changing the first word (magic + the version's low half) changes it by those two words' terms.
    """
    with path.open("r+b") as handle:
        head = bytearray(handle.read(24))
        (checksum,) = struct.unpack_from("<Q", head, 0)
        (old_word,) = struct.unpack_from("<Q", head, 8)
        struct.pack_into("<I", head, 12, version)
        (new_word,) = struct.unpack_from("<Q", head, 8)
        checksum ^= (old_word * CHECKSUM_FACTOR) & MASK
        checksum ^= (new_word * CHECKSUM_FACTOR) & MASK
        struct.pack_into("<Q", head, 0, checksum)
        handle.seek(0)
        handle.write(head[:16])


def table_counts(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [
            r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
        ]
        return {n: int(con.execute(f"SELECT count(*) FROM {n} WHERE true").fetchone()[0]) for n in names}  # type: ignore[index]
    finally:
        con.close()


def test_the_fake_is_refused_exactly_as_duckdb_refuses_a_2_0_file(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    duckdb.connect(str(path)).close()
    pretend_newer_storage(path)
    with pytest.raises(duckdb.IOException, match="database file with version number 69, but we can only read"):
        duckdb.connect(str(path), read_only=True)


def test_a_warehouse_of_another_duckdb_version_is_reported_then_rebuilt_by_the_next_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    target = load_sample(data)
    before = table_counts(target)
    pretend_newer_storage(target)

    status = read_status(data)
    assert status.unreadable is not None
    assert "written by another DuckDB version than 1.5.5" in status.unreadable
    assert "the next `transcripts run` rebuilds it from the Parquet snapshot" in status.unreadable
    assert status.problems() == [status.unreadable]
    result = CliRunner().invoke(app, ["status", "--data-dir", str(data)], catch_exceptions=False)
    assert "rebuilds it from the Parquet snapshot" in " ".join(result.output.split())
    assert "Traceback" not in result.output
    with pytest.raises(warehouse.WarehouseUnreadable):
        query.connect(data, "UTC")

    load_sample(data)  # sources unchanged: the run would only apply its ledger row, but must rebuild instead
    after = table_counts(target)
    assert after.pop("runs") == before.pop("runs") + 1
    assert after == before
    assert read_status(data).unreadable is None
    con = duckdb.connect(str(target), read_only=True)
    try:
        assert search.has_index(con)
        assert con.execute("SELECT count(*) FROM daily_activity").fetchone() == (8,)
    finally:
        con.close()
    assert not list(data.glob("warehouse.duckdb.tmp-*"))


def test_a_warehouse_without_a_search_index_gets_one_on_the_next_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    target = load_sample(data)
    con = duckdb.connect(str(target))
    search.load_extension(con)
    con.execute("PRAGMA drop_fts_index('turns')")
    assert not search.has_index(con)
    con.close()
    load_sample(data)
    con = duckdb.connect(str(target), read_only=True)
    try:
        assert search.has_index(con)
    finally:
        con.close()


def test_the_registry_duckdb_cli_opens_the_warehouse_and_searches_it_offline(tmp_path: Path) -> None:
    exe = query.bundled_cli()  # the package's binary: found also when the venv's bin is not on PATH
    assert exe is not None, "duckdb-cli is a dev dependency: `uv sync` installs it"
    target = load_sample(tmp_path / "data")
    sql = (
        f"{query.session_sql('UTC')} LOAD '{search.extension_path()}'; "
        "SELECT count(*) FROM daily_activity; "
        "SELECT turn_id FROM (SELECT turn_id, fts_main_turns.match_bm25(turn_id, 'passwords') AS s FROM turns) "
        "WHERE s IS NOT NULL ORDER BY s DESC LIMIT 1;"
    )
    out = subprocess.run(
        [exe, "-readonly", "-csv", "-noheader", str(target), "-c", sql], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["8", "claude-5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01-1"]
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith(f"v{duckdb.__version__} ")
