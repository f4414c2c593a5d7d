"""A run that replaces a few sessions does work for those sessions, not for the corpus: the figures status and the
ledger show are updated from the replaced sessions' rows and equal the ones computed from the whole warehouse;
the warehouse copy is a clone where the filesystem can make one."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from extractors.bounded import Limits
from extractors.model import Agent, Source
from extractors.registry import extractor
from flows.etl.flow import run_etl
from flows.etl.prune import run_prune
from flows.etl.settings import Settings, load_settings
from flows.etl.status import corpus_snapshot
from sinks import files, ledger, prices, search, warehouse
from sinks.store import Store
from tests.corpus import S1, S2, S3, T1, claude_exchange, codex_rollout, small_home, write_session
from tests.secrets_planted import PLANTED
from tests.test_pipeline import snapshot

UNPRICED_MODEL = "acme-nonexistent-model-7"  # genai-prices matches no provider's model to it
FIGURES_WHOLE = warehouse.figures  # the from-scratch count, never the spy below


def settings_for(home: Path, data: Path, **extra: Any) -> Settings:
    return load_settings(
        home=home, data_dir=data, sources=["claude", "codex"], env={"HOME": str(home)}, lock_wait=5, **extra
    )


def exchanges(session: str, n: int, *, start: int, text: str = "question", model: str | None = None) -> list[str]:
    """`n` Claude exchanges; `model` replaces the assistant's model (an unpriced one, say)."""
    lines = claude_exchange(session, n, start_minute=start, text=text)
    if model is None:
        return lines
    out = []
    for line in lines:
        record = json.loads(line)
        if record["type"] == "assistant":
            record["message"]["model"] = model
        out.append(json.dumps(record, separators=(",", ":")))
    return out


def home_with_everything(home: Path) -> Path:
    """Two agents; a secret (redactions), an unpriced model, a rejected source (the corrupt S3)."""
    small_home(home)
    write_session(home, S1, exchanges(S1, 3, start=0, text=PLANTED["github-pat"][0]))
    write_session(home, S2, exchanges(S2, 2, start=0, model=UNPRICED_MODEL))
    codex_rollout(home, T1, 2)
    return home


def whole(data: Path) -> dict[str, Any]:
    """The figures computed from the whole warehouse (what the run keeps must equal this)."""
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        return FIGURES_WHOLE(con)
    finally:
        con.close()


def in_the_file(data: Path) -> dict[str, Any]:
    """The figures the warehouse file holds (not the ones this process remembers writing)."""
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT value FROM transcripts_meta WHERE key = ?", [warehouse.FIGURES]).fetchone()
    finally:
        con.close()
    assert row is not None, "the warehouse keeps its figures"
    found: dict[str, Any] = json.loads(row[0])
    return found


def without_time(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "at"}


def snapshot_from_scratch(data: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """corpus_snapshot as it was computed before the figures were kept: every part asked of the whole warehouse."""
    with monkeypatch.context() as patch:
        patch.setattr(warehouse, "stored_figures", lambda path: None)
        return without_time(corpus_snapshot(data))


class Figures:
    """Counts how often a run computed the figures from the whole warehouse (status's read-only look at a
    warehouse from before they were kept is `tolerant`, and not counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.whole = 0
        real = warehouse.figures

        def counted(con: duckdb.DuckDBPyConnection, *, tolerant: bool = False) -> dict[str, Any]:
            self.whole += not tolerant
            return real(con, tolerant=tolerant)

        monkeypatch.setattr(warehouse, "figures", counted)


def assert_figures_exact(data: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The kept figures (in the file and remembered), the last ledger snapshot and a from-scratch one agree."""
    expected = whole(data)
    assert in_the_file(data) == expected
    assert warehouse.stored_figures(data / "warehouse.duckdb") == expected
    last = next(r["corpus"] for r in ledger.runs(data) if r.get("corpus"))
    assert without_time(last) == snapshot_from_scratch(data, monkeypatch)
    snapshot(data)  # and the warehouse holds exactly what the Parquet dataset holds
    return expected


def run(settings: Settings, **kw: Any) -> Any:
    return run_etl(settings, as_tasks=False, **kw)


def test_figures_after_an_append_are_updated_from_the_session_and_equal_the_whole_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    first = assert_figures_exact(settings.data_dir, monkeypatch)
    assert first["unpriced"]["responses"] == 2 and first["redaction"]["redacted"], "the corpus exercises every part"
    rejected = {"agent": "claude", "outcome": "rejected", "reason_code": "invalid_json", "count": 1}
    assert first["rejections"] == [rejected]

    spy = Figures(monkeypatch)
    more = exchanges(S1, 2, start=3, text=PLANTED["aws-access-token"][0]) + exchanges(S1, 1, start=5, model="x-9")
    write_session(home, S1, more, append=True)
    report = run(settings)

    assert report.committed.sessions_loaded == 1
    assert spy.whole == 0, "the figures were updated from the appended session's rows, not counted whole"
    after = assert_figures_exact(settings.data_dir, monkeypatch)
    assert after["counts"]["turns"]["claude"] == first["counts"]["turns"]["claude"] + 6
    assert after["unpriced"] == {"responses": 3, "total_responses": first["unpriced"]["total_responses"] + 3}
    assert after["counts"]["runs"] == {"": 2}


def test_figures_after_sessions_shrink_or_are_stored_raw_equal_the_whole_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    first = whole(settings.data_dir)
    spy = Figures(monkeypatch)
    write_session(home, S1, exchanges(S1, 1, start=0))  # rewritten shorter, without its secret
    run(settings)
    assert spy.whole == 0
    shrunk = assert_figures_exact(settings.data_dir, monkeypatch)
    assert shrunk["counts"]["turns"]["claude"] == first["counts"]["turns"]["claude"] - 4
    assert not shrunk["redaction"]["redacted"], "the session's only secret went with its text"

    run(settings_for(home, settings.data_dir, redact=False))  # every session re-read and stored raw
    assert spy.whole == 0
    raw = assert_figures_exact(settings.data_dir, monkeypatch)
    assert raw["redaction"]["sessions"] == {
        "claude": {"current": 0, "older_rules": 0, "unredacted": 2},
        "codex": {"current": 0, "older_rules": 0, "unredacted": 1},
    }


def test_figures_after_a_source_is_deleted_and_its_sessions_pruned_equal_the_whole_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    first = whole(settings.data_dir)
    spy = Figures(monkeypatch)
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink()
    run(settings)  # the source is gone upstream: its rows stay, the manifest says so
    gone = assert_figures_exact(settings.data_dir, monkeypatch)
    assert gone["counts"]["turns"] == first["counts"]["turns"]

    report = run_prune(settings, older_than=timedelta(days=30), now=datetime(2026, 6, 1, tzinfo=UTC))
    assert [{m.session_id for m in family} for family in report.plan.removed] == [{f"claude-{S2}"}]
    assert spy.whole == 0
    pruned = assert_figures_exact(settings.data_dir, monkeypatch)
    assert pruned["counts"]["turns"]["claude"] == first["counts"]["turns"]["claude"] - 4
    assert pruned["unpriced"] == {"responses": 0, "total_responses": first["unpriced"]["total_responses"] - 2}
    assert "claude" in pruned["counts"]["sessions"]

    write_session(home, S1, exchanges(S1, 1, start=0))
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S1}.jsonl").unlink()
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S3}.jsonl").unlink()
    run(settings)
    run_prune(settings, older_than=timedelta(days=30), now=datetime(2026, 6, 1, tzinfo=UTC))
    empty = assert_figures_exact(settings.data_dir, monkeypatch)
    assert "claude" not in empty["counts"]["sessions"], "an agent with no session left is not listed"
    assert "claude" not in empty["redaction"]["sessions"]


def test_new_redaction_rules_or_prices_count_the_figures_whole_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    spy = Figures(monkeypatch)
    monkeypatch.setattr(prices, "source_version", lambda: "genai-prices 999.0")
    write_session(home, S2, exchanges(S2, 1, start=5, model=UNPRICED_MODEL), append=True)
    run(settings)
    assert spy.whole == 1, "other prices may price every usage row differently: counted whole"
    assert_figures_exact(settings.data_dir, monkeypatch)

    monkeypatch.setattr(warehouse, "redaction_version", lambda: "999")
    write_session(home, S2, exchanges(S2, 1, start=6), append=True)
    run(settings)
    assert spy.whole == 2, "under other rules every session's redaction mode may change: counted whole"
    assert_figures_exact(settings.data_dir, monkeypatch)


def test_a_warehouse_from_before_the_figures_gets_them_on_its_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    path = settings.data_dir / "warehouse.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute("DELETE FROM transcripts_meta WHERE key = ?", [warehouse.FIGURES])
    finally:
        con.close()
    warehouse._written.clear()  # as a later process: it knows only what the file says
    assert warehouse.stored_figures(path) is None
    assert without_time(corpus_snapshot(settings.data_dir)) == snapshot_from_scratch(settings.data_dir, monkeypatch)

    spy = Figures(monkeypatch)
    write_session(home, S1, exchanges(S1, 1, start=3), append=True)
    run(settings)
    assert spy.whole == 1, "counted whole once"
    assert_figures_exact(settings.data_dir, monkeypatch)
    write_session(home, S1, exchanges(S1, 1, start=4), append=True)
    run(settings)
    assert spy.whole == 1, "and kept up from then on"
    assert_figures_exact(settings.data_dir, monkeypatch)


def test_a_rebuilt_warehouse_holds_the_same_figures_and_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    write_session(home, S1, exchanges(S1, 2, start=3, model=UNPRICED_MODEL), append=True)
    run(settings)
    kept, rows = in_the_file(settings.data_dir), snapshot(settings.data_dir)
    (settings.data_dir / "warehouse.duckdb").unlink()
    run(settings)  # nothing new: the warehouse is built whole from the same Parquet version (and one more run)
    rebuilt = in_the_file(settings.data_dir)
    assert (kept["counts"].pop("runs"), rebuilt["counts"].pop("runs")) == ({"": 2}, {"": 3})
    assert rebuilt == kept
    assert snapshot(settings.data_dir) == rows


def test_reader_bugs_in_the_snapshot_are_counted_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    assert corpus_snapshot(settings.data_dir)["reader_bugs"] == 0

    def broken(_source: Source, _limits: Limits) -> Any:
        raise ValueError("a bug")
        yield  # pragma: no cover - a generator, like every reader

    monkeypatch.setattr(extractor(Agent("codex")), "read", broken)
    codex_rollout(home, T1, 3)  # changed: read again, by the broken reader
    run(settings)
    assert_figures_exact(settings.data_dir, monkeypatch)
    assert corpus_snapshot(settings.data_dir)["reader_bugs"] == 1


# --- the copy --------------------------------------------------------------------------------------------------------


def source_file(tmp_path: Path, size: int = 3 * 1024 * 1024 + 17) -> Path:
    src = tmp_path / "warehouse.duckdb"
    src.write_bytes(os.urandom(size))
    return src


def test_the_copy_is_exact_private_and_says_how_it_was_made(tmp_path: Path) -> None:
    src = source_file(tmp_path)
    dst = tmp_path / "copy"
    how = files.clone_or_copy(src, dst)
    assert how in ("clone", "copy_file_range", "copy")
    assert dst.read_bytes() == src.read_bytes()
    assert stat.S_IMODE(dst.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        files.clone_or_copy(src, dst)  # never onto a file that is there


def test_without_a_clone_the_kernel_copies_and_without_that_a_plain_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    monkeypatch.setattr(sys, "platform", "linux")
    src = source_file(tmp_path)
    calls: list[int] = []

    def no_clone(fd: int, request: int, arg: int) -> int:
        calls.append(request)
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")  # as ext4 answers

    monkeypatch.setattr(fcntl, "ioctl", no_clone)
    if hasattr(os, "copy_file_range"):
        assert files.clone_or_copy(src, tmp_path / "a") == "copy_file_range"
        assert (tmp_path / "a").read_bytes() == src.read_bytes()

    def no_range(*args: int) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", no_range, raising=False)
    assert files.clone_or_copy(src, tmp_path / "b") == "copy"
    assert (tmp_path / "b").read_bytes() == src.read_bytes()
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o600
    assert calls == [files.FICLONE, files.FICLONE], "a clone is tried first"


def test_a_clone_is_taken_when_the_filesystem_makes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # This machine's ext4 cannot clone; the call is what a btrfs or XFS would answer with shared blocks.
    import fcntl

    monkeypatch.setattr(sys, "platform", "linux")  # FICLONE is Linux's
    src = source_file(tmp_path)

    def clone(fd: int, request: int, arg: int) -> int:
        assert request == files.FICLONE
        with open(arg, "rb", closefd=False) as source:  # the kernel would share these blocks
            os.pwrite(fd, source.read(), 0)
        return 0

    monkeypatch.setattr(fcntl, "ioctl", clone)
    assert files.clone_or_copy(src, tmp_path / "c") == "clone"
    assert (tmp_path / "c").read_bytes() == src.read_bytes()


def test_refresh_waits_for_the_copy_to_be_flushed_before_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    events: list[str] = []
    real_flush, real_replace = warehouse._flush, warehouse.replace_releasing

    def flush(path: Path) -> None:
        real_flush(path)
        events.append("flushed")

    def replace(src: Path, dst: Path) -> None:
        events.append("swapped")
        real_replace(src, dst)

    monkeypatch.setattr(warehouse, "_flush", flush)
    monkeypatch.setattr(warehouse, "replace_releasing", replace)
    monkeypatch.setattr(warehouse, "clone", lambda src, dst: False)  # as ext4: the warehouse is copied
    write_session(home, S1, exchanges(S1, 1, start=3), append=True)
    run(settings)
    assert events == ["flushed", "swapped"]
    assert not list(settings.data_dir.glob("warehouse.duckdb.tmp-*"))


def test_on_macos_a_clone_is_tried_first_and_a_copy_made_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[tuple[Path, Path]] = []

    def no_clonefile(src: Path, dst: Path) -> bool:
        tried.append((src, dst))
        return False  # not APFS, or no clonefile(2)

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(files, "_clonefile", no_clonefile)
    src = source_file(tmp_path)
    assert files.clone_or_copy(src, tmp_path / "m") in ("copy_file_range", "copy")
    assert tried == [(src, tmp_path / "m")]
    assert (tmp_path / "m").read_bytes() == src.read_bytes()


def test_the_replaced_file_is_freed_after_the_swap_and_readers_keep_theirs(tmp_path: Path) -> None:
    old, new = tmp_path / "warehouse.duckdb", tmp_path / "next"
    old.write_bytes(b"old" * 1000)
    new.write_bytes(b"new")
    with old.open("rb") as reader:  # a person's DuckDB shell on the old file
        files.replace_releasing(new, old)
        assert old.read_bytes() == b"new" and not new.exists()
        assert reader.read() == b"old" * 1000, "a reader keeps its file"
    lone = tmp_path / "lone"
    lone.write_bytes(b"1")
    files.replace_releasing(lone, tmp_path / "fresh")  # nothing to replace
    assert (tmp_path / "fresh").read_bytes() == b"1"


def test_the_index_drops_the_documents_of_deleted_turns_it_was_told_of(tmp_path: Path) -> None:
    # The deleted turns come from the DELETE itself (no comparison of every document with `turns`): after a
    # session shrinks and another is pruned, the index is the one the extension builds from what is left.
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    write_session(home, S1, exchanges(S1, 1, start=0, text="refactor the router"))  # 3 exchanges -> 1
    (home / ".claude" / "projects" / "-home-u-proj" / f"{S2}.jsonl").unlink()
    run(settings)
    run_prune(settings, older_than=timedelta(days=30), now=datetime(2026, 6, 1, tzinfo=UTC))
    rows = _index_is_the_rebuilt_one(settings.data_dir / "warehouse.duckdb")
    assert {r[1] for r in rows} == {f"claude-{S1}", f"codex-{T1}"}


COMMITTED_NOT_CHECKPOINTED = """
import os, signal, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SET checkpoint_threshold = '1GB'")
con.execute("UPDATE transcripts_meta SET value = 'other' WHERE key = 'timezone'")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_later_run_with_nothing_to_do_knows_the_warehouse_and_its_figures_without_opening_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    path = settings.data_dir / "warehouse.duckdb"
    version = Store(settings.data_dir).current_number()
    reading = duckdb.connect(str(path), read_only=True)
    try:
        expected = FIGURES_WHOLE(reading)
    finally:
        reading.close()
    opened: list[str] = []
    real_connect = duckdb.connect

    def counted(database: Any = ":memory:", *args: Any, **kwargs: Any) -> Any:
        opened.append(str(database))
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(warehouse.duckdb, "connect", counted)
    warehouse._written.clear()  # as a later process: it knows what the last run left in data/cache
    assert warehouse.is_current(settings.data_dir, version, settings.timezone)
    assert warehouse.stored_figures(path) == expected
    assert str(path) not in opened, "the memo of the last run stood for the file"

    # A memo that is not one we wrote, or not of this file, is never believed: the warehouse is read instead.
    memo = settings.data_dir / "cache" / "warehouse-meta.json"
    good = json.loads(memo.read_text(encoding="utf-8"))
    other_file = json.dumps({**good, "identity": [*good["identity"][:3], good["identity"][3] + 1]})
    other_duckdb = json.dumps({**good, "engine": "0.9.0"})  # after an upgrade only opening the file says if it reads
    hostile_memos = ("{", "[]", '{"identity": 1, "meta": {}}', '{"identity": [], "meta": {"a": 1}}')
    for hostile in (*hostile_memos, other_file, other_duckdb):
        memo.write_text(hostile, encoding="utf-8")
        warehouse._written.clear()
        opened.clear()
        assert warehouse.is_current(settings.data_dir, version, settings.timezone)
        assert warehouse.stored_figures(path) == expected
        assert str(path) in opened, hostile
    # A change committed to the log and not yet checkpointed into the file (a run killed between the two) leaves
    # the file as the memo knew it: the log beside it is what says the memo is stale.
    memo.write_text(json.dumps(good), encoding="utf-8")
    before = path.stat()
    killed = subprocess.run([sys.executable, "-c", COMMITTED_NOT_CHECKPOINTED, str(path)], check=False)
    assert killed.returncode == -9 and Path(f"{path}.wal").exists()
    assert warehouse._identity(path.stat()) == warehouse._identity(before), "only the log was written"
    warehouse._written.clear()
    opened.clear()
    assert not warehouse.is_current(settings.data_dir, version, settings.timezone)
    assert str(path) in opened
    con = real_connect(str(path))  # the log goes into the file; the timezone is set back
    try:
        con.execute("UPDATE transcripts_meta SET value = ? WHERE key = 'timezone'", [good["meta"]["timezone"]])
    finally:
        con.close()
    assert not Path(f"{path}.wal").exists()
    warehouse._remember(path, good["meta"])
    warehouse._written.clear()
    assert warehouse.is_current(settings.data_dir, version, settings.timezone)

    con = real_connect(str(path))  # written in place: a new mtime, so the memo no longer applies
    try:
        con.execute("UPDATE transcripts_meta SET value = 'other' WHERE key = 'timezone'")
    finally:
        con.close()
    warehouse._written.clear()
    opened.clear()
    assert not warehouse.is_current(settings.data_dir, version, settings.timezone)
    assert str(path) in opened


def _meta_of(path: Path) -> dict[str, str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {str(k): str(v) for k, v in con.execute("SELECT key, value FROM transcripts_meta").fetchall()}
    finally:
        con.close()


def _index_is_the_rebuilt_one(path: Path) -> list[tuple[Any, ...]]:
    """Assert that the warehouse's index is the one the extension builds from its turns; returns the turns."""
    from tests.test_search import _index_contents, _rebuilt

    con = duckdb.connect(str(path), read_only=True)
    try:
        search.load_extension(con)
        ours = _index_contents(con)
        rows = con.execute("SELECT turn_id, session_id, text FROM turns").fetchall()
    finally:
        con.close()
    assert ours == _index_contents(_rebuilt(rows))
    return rows


def test_an_append_takes_the_tokenizer_and_the_views_as_the_meta_table_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index's tokenize macro (a catalog lookup: 15-50 ms) and the DDL of the views are kept in the meta table;
    # a change reads them there, and its index is still the one the extension builds from the rows.
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    path = settings.data_dir / "warehouse.duckdb"
    run(settings)
    _index_is_the_rebuilt_one(path)  # the build's own index (made on a cursor beside the inserts)
    meta = _meta_of(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert meta[warehouse.TOKENIZER] == search.tokenizer_of(con) != ""
    finally:
        con.close()

    def looked_up(con: Any) -> str:
        raise AssertionError("the tokenizer was looked up in the catalog")

    def recreated(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the views were created again")

    installs: list[object] = []
    real_install = prices.install

    def install(*args: Any, **kwargs: Any) -> str:
        installs.append(kwargs.get("views"))
        return real_install(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(search, "tokenizer_of", looked_up)
        patched.setattr(warehouse.views, "create_views", recreated)
        patched.setattr(warehouse.prices, "install", install)
        write_session(home, S1, exchanges(S1, 2, start=3, text="refactor the router"), append=True)
        assert run(settings).committed.sessions_loaded == 1
    assert installs == [False], "the cost views were left as they were"
    assert _meta_of(path) | {warehouse.FIGURES: "", "parquet_version": ""} == meta | {
        warehouse.FIGURES: "",
        "parquet_version": "",
    }
    _index_is_the_rebuilt_one(path)

    # A warehouse from before they were kept: the next change looks them up, makes the views, and keeps both.
    con = duckdb.connect(str(path))
    try:
        con.execute("DELETE FROM transcripts_meta WHERE key IN (?, ?)", [warehouse.TOKENIZER, warehouse.DDL])
        con.execute("DROP VIEW daily_activity")
    finally:
        con.close()
    write_session(home, S1, exchanges(S1, 1, start=9, text="rename the module"), append=True)
    run(settings)
    after = _meta_of(path)
    assert after[warehouse.TOKENIZER] == meta[warehouse.TOKENIZER] and after[warehouse.DDL] == meta[warehouse.DDL]
    _index_is_the_rebuilt_one(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM daily_activity").fetchone() is not None
    finally:
        con.close()


def test_a_view_whose_sql_changed_reaches_the_warehouse_with_the_next_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_everything(tmp_path / "home")
    settings = settings_for(home, tmp_path / "data")
    run(settings)
    monkeypatch.setitem(warehouse.views.VIEWS, "answer_view", "SELECT 42 AS answer")
    write_session(home, S1, exchanges(S1, 1, start=3), append=True)
    assert run(settings).committed.sessions_loaded == 1
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT answer FROM answer_view").fetchall() == [(42,)]
    finally:
        con.close()
