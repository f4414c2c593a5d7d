"""DuckDB: every table loaded from the current Parquet version, plus views; all SQL and DDL live here.

A run builds the warehouse new beside the old file, or applies its change in one transaction to a copy (a clone where
the filesystem can), checkpoints, and renames it over `warehouse.duckdb`. DuckDB refuses a writer while any reader
holds the file, so this is what lets people keep a DuckDB shell or notebook open during the nightly run: the reader
keeps its snapshot, new connections see the new file. A big warehouse that cannot be cloned is changed in place
instead when no one has it open (`_open_to_change`): copying gigabytes every night is what that avoids. A change
made in place is committed to DuckDB's log beside the file (`warehouse.duckdb.wal`) and left there: every reader
replays it, and DuckDB folds the log into the file once it passes `LOG_THRESHOLD`. A checkpoint per change cost most
of a one-session change of a 5 GB corpus (0.2-0.5 s of ~1.3 s). A copy or clone takes the log with it
(`_take_copy`).

The corpus figures `status` shows (rows per table and agent, rejections, redaction, unpriced usage) are kept in the
file's meta table beside the data they describe, and a run that replaces a few sessions updates them from those
sessions' rows alone, so that neither the run nor its ledger record scans the whole corpus.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

# DuckDB imports pyarrow.dataset the first time an Arrow table is registered on a connection (7 ms warm, 35 ms when
# the library's files are no longer in the page cache), which a run's change does in its first statements: imported
# with this module instead, so that a run (the runner's and `transcripts watch`'s are long-lived processes) never
# pays it in the middle of its change.
import pyarrow.dataset

from sinks import failpoints, prices, readonly, search, views
from sinks.files import FILE_MODE, clone, copy, fsync_path, private_dir, replace_releasing, write_private_atomic
from sinks.store import FileKey, Store, part_name
from transforms.ids import bucket_of
from transforms.redact import redaction_version
from transforms.schema import REJECTS, RUNS, SCHEMA_VERSION, SESSION_TABLES, SOURCES, TABLES, TURNS, Table, duckdb_ddl

WAREHOUSE = "warehouse.duckdb"
PRICE_CACHE = "cache"  # derived files kept between runs (the price table per genai-prices version)
META = "transcripts_meta"
FIGURES = "corpus_figures"  # meta key: the corpus figures of this file's content, as JSON (see `figures`)
TOKENIZER = "fts_tokenizer"  # meta key: the search index's tokenize macro (`search.tokenizer_of`)
DDL = "ddl_digest"  # meta key: a digest of the views' and macros' DDL (`_ddl_digest`)
INDEX = "fts_index"  # meta key: what the search index was made with (`search.INDEX_SETTINGS`)
VERSION_ERROR = "Trying to read a database file with version number"
# A warehouse this big is changed in place, when the filesystem cannot clone it and no one has it open: its copy
# would cost its size again on disk every night, and time: it reads the whole file, which a night's page cache
# rarely holds (ext4: ~1 s per GB; a 109 MB one took 150-250 ms uncached, ~35 ms cached, and its sync more). A
# 200 MB corpus's append took 0.53 s in place against 0.8-1.0 s copied (medians of 8). Smaller ones are copied:
# there the copy costs little, and it never keeps a reader out, even for a moment.
IN_PLACE_BYTES = 64 * 1024 * 1024
# A change made in place stays in DuckDB's log until the log passes this size; then the COMMIT that passed it folds
# the log into the file (DuckDB's `checkpoint_threshold`, 16 MiB by default). Every reader replays the log when it
# opens the file: at 5 GB of transcripts a one-session change adds ~130 kB to it, and opening the file with a 2 MiB
# log took 60-70 ms against 12-15 ms without (a 16 MiB log would cost every `transcripts sql` about half a second).
# Folding a 2 MiB log there took ~0.5 s, once per ~15 such changes, against 0.2-0.5 s for a checkpoint per change.
LOG_THRESHOLD = "2MiB"

log = logging.getLogger("transcripts.warehouse")
T = TypeVar("T")


class WarehouseUnreadable(RuntimeError):
    """The warehouse file cannot be opened by this DuckDB (another version wrote it, or it is damaged)."""


def open_error(exc: duckdb.Error, path: Path) -> WarehouseUnreadable:
    """Say why `path` cannot be opened, in one line: that another process holds it open for writing, and what to do;
    else that the next run rebuilds it from Parquet."""
    first = readonly.first_line(exc)
    if readonly.is_lock_conflict(exc):
        return WarehouseUnreadable(
            f"{path} is open for writing in another process ({first.removeprefix('IO Error: ')}): close it there, "
            "or open it read-only (`duckdb -readonly`), and try again"
        )
    if VERSION_ERROR in first:
        why = f"it was written by another DuckDB version than {duckdb.__version__} ({first.removeprefix('IO Error: ')})"
    else:
        why = first
    return WarehouseUnreadable(
        f"{path} cannot be opened: {why}; the next `transcripts run` rebuilds it from the Parquet snapshot"
    )


def redaction_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """For `status`: secrets redacted per agent and rule, and sessions by redaction mode of their text.

    `sessions` counts, per agent, sessions whose text was redacted under the current rules (`current`), under
    older rules (`older_rules`), or stored raw (`unredacted`: `--no-redact`, or loaded before redaction existed
    and whose source is gone, so it could not be read again). Call with a read-only connection to the warehouse.
    """
    return {"rules_version": redaction_version(), "redacted": _redacted(con), "sessions": _modes(con, "sessions")}


def _redacted(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    per_rule = con.execute(
        """SELECT agent, rule, sum(count) AS count, count(DISTINCT secret_hmac) AS distinct_secrets
           FROM redactions GROUP BY ALL ORDER BY agent, count DESC, rule"""
    ).fetchall()
    return [{"agent": a, "rule": r, "count": int(n), "distinct_secrets": int(d)} for a, r, n, d in per_rule]


def _modes(con: duckdb.DuckDBPyConnection, sessions: str) -> dict[str, dict[str, int]]:
    """Sessions per agent by redaction mode (see redaction_summary), of `sessions` (a relation like the table)."""
    current = f"%+r{redaction_version()}"
    modes = con.execute(
        f"""SELECT agent,
                  count(*) FILTER (WHERE parser_version LIKE $current) AS current,
                  count(*) FILTER (WHERE regexp_matches(parser_version, '[+]r[0-9]')
                                   AND parser_version NOT LIKE $current) AS older_rules,
                  count(*) FILTER (WHERE NOT regexp_matches(parser_version, '[+]r[0-9]')) AS unredacted
           FROM {sessions} GROUP BY agent ORDER BY agent""",
        {"current": current},
    ).fetchall()
    return {a: {"current": int(c), "older_rules": int(o), "unredacted": int(u)} for a, c, o, u in modes}


# --- corpus figures: what `status` and each run's ledger record show, kept in the file and updated per run ----------

REPLACED = "SELECT session_id FROM replaced_ids"  # the sessions a run replaced (registered by _begin_apply)
_USAGE_SOURCE = "FROM usage u\n"  # where prices.USAGE_COSTS reads `usage`: _costs_of points it at other rows


def figures(con: duckdb.DuckDBPyConnection, *, tolerant: bool = False) -> dict[str, Any]:
    """The corpus figures, computed from the whole warehouse: `counts` (rows per table and agent; agent "" for a
    table not partitioned by agent), `rejections` (per agent, outcome and reason code), `redaction`
    (redaction_summary) and `unpriced` (responses with usage and no price, and all responses with usage).
    `tolerant` (a read-only look at an old warehouse): a part whose table the warehouse predates is left out."""
    out: dict[str, Any] = {"counts": {t.name: _count(con, t) for t in TABLES}, "rejections": _rejections(con)}
    parts = (("redaction", lambda: redaction_summary(con)), ("unpriced", lambda: _unpriced(con, "usage_costs")))
    for name, compute in parts:
        if not tolerant:
            out[name] = compute()
            continue
        with contextlib.suppress(duckdb.Error):  # a warehouse from before redaction or prices
            out[name] = compute()
    return out


def stored_figures(path: Path) -> dict[str, Any] | None:
    """The figures kept in the warehouse at `path` (as `figures` computes them), or None for a warehouse from
    before they were kept. The ones this process just wrote are remembered, so a run reads nothing to get them."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    recalled = _recalled(path, st)
    text = recalled.get(FIGURES) if recalled is not None else _read_figures(path)
    if text is None:
        return None
    found: dict[str, Any] = json.loads(text)
    return found


def _read_figures(path: Path) -> str | None:
    con = readonly.connect(path)
    try:
        text = _meta(con).get(FIGURES)
    finally:
        con.close()
    return text


# The meta table the last run wrote, per warehouse path: (identity, meta), the identity being the file's and its log's
# (`_identity_of`). A file and log with the same device, inode, size and mtime hold exactly that meta: a run replaces
# the file by a rename, or changes it in place and then remembers their new identity, and any other write gives one
# of them a new mtime (a run killed after its COMMIT grew the log). Kept in this process and, for the next one, in MEMO
# beside the price cache: a nightly run with nothing to do then need not open the warehouse at all (~50 ms)
# to see that it is current. The memo names the DuckDB that wrote the file; after an upgrade it is not believed, so
# the file is opened and, if the new DuckDB cannot read it, rebuilt as before.
_written: dict[str, tuple[list[int], dict[str, str]]] = {}
MEMO = "warehouse-meta.json"


def _memo_path(warehouse: Path) -> Path:
    return warehouse.parent / PRICE_CACHE / MEMO


def _remember(warehouse: Path, meta: dict[str, str]) -> None:
    identity = _identity_of(warehouse, warehouse.stat())
    _written[str(warehouse)] = (identity, meta)
    text = json.dumps({"identity": identity, "engine": duckdb.__version__, "meta": meta})
    try:
        write_private_atomic(_memo_path(warehouse), lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError as exc:  # only a read saved: the next process opens the warehouse instead
        log.debug("event=warehouse_memo_unwritten error=%r", str(exc))


def _recalled(warehouse: Path, st: os.stat_result) -> dict[str, str] | None:
    """The meta table of `warehouse` as the run that wrote it left it, when the file and its log are still those."""
    known = _written.get(str(warehouse))
    if known is not None:
        return known[1] if known[0] == _identity_of(warehouse, st) else None
    try:
        found = json.loads(_memo_path(warehouse).read_text(encoding="utf-8"))
        identity, engine, meta = found["identity"], found["engine"], found["meta"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or not one we wrote: the warehouse itself is read
    if identity != _identity_of(warehouse, st) or not isinstance(meta, dict):
        return None
    if engine != duckdb.__version__:
        return None  # another DuckDB may not open the file at all: only opening it says (and a rebuild follows)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        return None
    return meta


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _identity_of(warehouse: Path, st: os.stat_result) -> list[int]:
    """The identity of the warehouse (`st`, its stat) and of the log beside it, if any (a change made in place)."""
    try:
        log_st = os.stat(f"{warehouse}.wal")
    except FileNotFoundError:
        return list(_identity(st))
    return [*_identity(st), *_identity(log_st)]


def _count(con: duckdb.DuckDBPyConnection, table: Table) -> dict[str, int]:
    if not table.partitioned:
        row = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()
        return {"": int(row[0]) if row else 0}
    rows = con.execute(f"SELECT agent, count(*) FROM {table.name} GROUP BY agent ORDER BY agent").fetchall()
    return {str(agent): int(n) for agent, n in rows}


def _rejections(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows = con.execute(
        """SELECT agent, outcome, reason_code, count(*) FROM rejects
           GROUP BY ALL ORDER BY agent, outcome, reason_code"""
    ).fetchall()
    return [{"agent": a, "outcome": o, "reason_code": r, "count": int(n)} for a, o, r, n in rows]


def _unpriced(con: duckdb.DuckDBPyConnection, costs: str) -> dict[str, int]:
    """Responses with usage and no price, and all of them, in `costs` (a relation like the view usage_costs)."""
    row = con.execute(f"SELECT count(*), count(*) FILTER (WHERE NOT priced) FROM {costs}").fetchone()
    total, missing = (int(row[0]), int(row[1])) if row else (0, 0)
    return {"responses": missing, "total_responses": total}


def _costs_of(usage: str) -> str:
    """prices.USAGE_COSTS over the rows of `usage` instead of the whole table: each row is priced on its own
    (its model, time and prompt size against the price tables), so the costs of some rows need only those rows."""
    if prices.USAGE_COSTS.count(_USAGE_SOURCE) != 1:
        raise RuntimeError("prices.USAGE_COSTS no longer reads `FROM usage u` once: update warehouse._costs_of")
    return prices.USAGE_COSTS.replace(_USAGE_SOURCE, f"FROM {usage} u\n")


class _Rows:
    """The rows of the replaced sessions that a run's DELETEs removed, or that its INSERTs added, as their
    RETURNING clauses give them: counted per table and agent, with the sessions' parser versions and the usage
    rows, so that the figures change by what those sessions held and hold, with no further scan of the tables."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], int] = {}
        self.sessions: list[pa.Table] = []
        self.usage: list[pa.Table] = []
        self.turns: list[pa.Table] = []

    @staticmethod
    def returning(table: Table, figures: bool) -> str:
        """The RETURNING clause for `table`'s statements: the turn ids always (the documents the search index
        drops), and with `figures` what the figures need."""
        if table.name == "turns":
            return " RETURNING agent, turn_id"
        if not figures:
            return ""
        if table.name == "usage":
            return " RETURNING *"  # every column the cost view reads
        return " RETURNING agent, parser_version" if table.name == "sessions" else " RETURNING agent"

    def removed_turns(self) -> pa.Table:
        return pa.concat_tables(self.turns) if self.turns else pa.table({"turn_id": pa.array([], pa.string())})

    def add(self, table: Table, returned: pa.Table) -> None:
        if not returned.num_rows:
            return
        for entry in pc.value_counts(returned.column("agent")).to_pylist():
            key = (table.name, str(entry["values"]))
            self.rows[key] = self.rows.get(key, 0) + int(entry["counts"])
        if table.name == "sessions":
            self.sessions.append(returned)
        elif table.name == "usage":
            self.usage.append(returned)
        elif table.name == "turns":
            self.turns.append(returned.select(["turn_id"]))

    def model_pairs(self) -> set[tuple[str, str]]:
        """The (agent, model) pairs of the usage rows (with `figures`: else there are none), named models only."""
        pairs: set[tuple[str, str]] = set()
        for part in self.usage:
            pairs.update(zip(part.column("agent").to_pylist(), part.column("model").to_pylist(), strict=True))
        return {(agent, model) for agent, model in pairs if model is not None}

    def modes(self, con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, int]]:
        return _on(con, self.sessions, lambda name: _modes(con, name), {})

    def unpriced(self, con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        """Priced against the price tables as they are now: call before prices.install for the deleted rows."""
        nothing = {"responses": 0, "total_responses": 0}
        return _on(con, self.usage, lambda name: _unpriced(con, f"({_costs_of(name)})"), nothing)


def _on(con: duckdb.DuckDBPyConnection, parts: list[pa.Table], query: Callable[[str], T], empty: T) -> T:
    """`query(name)` over `parts` registered as one relation `name`; `empty` when there are no rows."""
    if not parts:
        return empty
    con.register("transcripts_replaced_rows", pa.concat_tables(parts))
    try:
        return query("transcripts_replaced_rows")
    finally:
        con.unregister("transcripts_replaced_rows")


def _updated(
    con: duckdb.DuckDBPyConnection,
    old: Mapping[str, Any],
    gone: _Rows,
    gone_unpriced: Mapping[str, int],
    new: _Rows,
) -> dict[str, Any]:
    """The figures after a run that replaced some sessions: `old` (the figures before it) less what those sessions
    held (`gone`, their usage priced before the run changed the price tables: `gone_unpriced`) plus what they hold
    now (`new`); the tables keyed by source or run are small and rewritten by every run anyway, so they are
    counted again, and so are the redactions (one row per secret found)."""
    counts: dict[str, dict[str, int]] = {}
    for table in TABLES:
        if table not in SESSION_TABLES:
            counts[table.name] = _count(con, table)
            continue
        rows = dict(old["counts"].get(table.name, {}))
        for sign, part in ((-1, gone), (1, new)):
            for (name, agent), n in part.rows.items():
                if name == table.name:
                    rows[agent] = rows.get(agent, 0) + sign * n
        counts[table.name] = {a: n for a, n in sorted(rows.items()) if n}
    modes = {a: dict(m) for a, m in old["redaction"]["sessions"].items()}
    for sign, by_agent in ((-1, gone.modes(con)), (1, new.modes(con))):
        for agent, by_mode in by_agent.items():
            mine = modes.setdefault(agent, {"current": 0, "older_rules": 0, "unredacted": 0})
            for mode, n in by_mode.items():
                mine[mode] += sign * n
    now = new.unpriced(con)
    unpriced = {k: old["unpriced"][k] - gone_unpriced[k] + now[k] for k in ("responses", "total_responses")}
    redaction = {
        "rules_version": redaction_version(),
        "redacted": _redacted(con),
        "sessions": {a: m for a, m in sorted(modes.items()) if any(m.values())},
    }
    return {"counts": counts, "rejections": _rejections(con), "redaction": redaction, "unpriced": unpriced}


def warehouse_path(data_dir: Path) -> Path:
    return data_dir / WAREHOUSE


# DuckDB's memory for a build or a change; beyond it, it spills to the data dir's staging. Its RSS is about
# 1.5-2 times this (the allocator keeps what the buffer pool lets go). A 1 GB corpus's build took as long with
# 128, 160 or 256 MB (17.5-18.7 s, alone) and peaked at 310-343 MiB instead of 410-426; at 200 MB, 128 MB cost
# ~0.5 s more and 160 MB nothing measurable.
MEMORY_LIMIT = "160MB"


# Rows per row group of the warehouse; DuckDB's default is 122,880. DuckDB holds a row group's rows while it
# fills it, and 122,880 tool calls are ~120 MB of text on a 1 GB corpus: with MEMORY_LIMIT that made a build's
# insert thrash (the build's inserts took 6.4-7.8 s; 4.0 s with this and one thread, at 302-310 MiB instead of
# 312-394). Every connection that writes gives it: DuckDB's checkpoint merges row groups up to the size of the
# connection, so a change opened with the default rewrote every table the first time (3.8 s at 1 GB). The file
# is a DuckDB 1.5 file whatever the size (the same storage version).
ROW_GROUP_ROWS = 16384


# The connection a run changes the warehouse through runs the tool's own statements only, and its one LOAD is of the
# fts extension by the path `search.extension_path` finds in the installed duckdb-extension-fts wheel. DuckDB would
# verify that file's signature first: a hash of its ~12 MB, 40-70 ms of CPU at every run that touches the index (most
# of a one-session change's spare CPU on 2 cores), and no protection here, since whoever can replace that file can
# replace the `duckdb` package that checks it. Connections that run a user's SQL (`transcripts sql`, `search`,
# the report) keep DuckDB's check.
RUN_CONFIG: dict[str, str | bool | int | float | list[str]] = {"allow_unsigned_extensions": True}


def _connect(path: Path, data_dir: Path) -> duckdb.DuckDBPyConnection:
    """A connection that builds or changes the warehouse at `path`."""
    con = duckdb.connect(config=RUN_CONFIG)
    try:
        con.execute(f"ATTACH {search.sql_string(str(path))} AS warehouse (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
        con.execute("USE warehouse")
        con.execute("SET preserve_insertion_order = false")
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        spill = data_dir / "staging" / "duckdb-spill"
        # DuckDB makes this folder when it first spills, but not its parent: staging is there only while a run has
        # staged something, so a change with nothing staged (a source deleted) failed as soon as DuckDB spilled.
        private_dir(spill.parent)
        con.execute("SET temp_directory = ?", [str(spill)])
    except BaseException:
        con.close()
        raise
    return con


def _files(store: Store, table: Table, version: Path) -> list[str]:
    return [str(p) for p in store.files(table.name, version)]


def _insert_all(con: duckdb.DuckDBPyConnection, store: Store, table: Table, version: Path) -> None:
    files = _files(store, table, version)
    if files:
        con.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?)", [files])


def _meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    try:
        rows = con.execute(f"SELECT key, value FROM {META}").fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(k): str(v) for k, v in rows}


def _ddl_digest(zone: str) -> str:
    """A digest of the DDL of every view and macro in `zone`: a change that finds it in the meta table leaves them."""
    text = "\n".join([*views.statements(zone), *prices.statements()])
    return hashlib.sha256(text.encode()).hexdigest()


def _set_meta(
    con: duckdb.DuckDBPyConnection,
    version_number: int,
    zone: str,
    prices_from: str,
    figures_json: str,
    tokenizer: str,
) -> dict[str, str]:
    """Write the file's meta table; returns what it holds."""
    meta = {
        "schema_version": SCHEMA_VERSION,
        "parquet_version": str(version_number),
        "timezone": zone,
        "prices": prices_from,
        FIGURES: figures_json,
        TOKENIZER: tokenizer,
        DDL: _ddl_digest(zone),
        INDEX: search.INDEX_SETTINGS,
    }
    con.execute(f"DELETE FROM {META}")
    con.execute(f"INSERT INTO {META} SELECT unnest(?), unnest(?)", [list(meta), list(meta.values())])  # one statement
    return meta


def _build(
    con: duckdb.DuckDBPyConnection, store: Store, version: Path, version_number: int, zone: str
) -> dict[str, str]:
    """Build every table, the index, views and prices into a new file; returns the meta it wrote.

    No transaction: the file is not the warehouse until `refresh` swaps it in after the CHECKPOINT, so a build that
    fails half way is a stray file (`cleanup`), never seen by a reader. (One transaction around the build held every
    row in DuckDB's transaction-local storage, which the index statements then read and the COMMIT wrote out again:
    a 200 MB corpus's build took ~1 s longer.)
    """
    for table in TABLES:
        con.execute(duckdb_ddl(table))
    search.create_index(con)  # on the empty table: the scaffold, filled below much faster than the extension does
    tokenizer = search.tokenizer_of(con)
    # One thread: two fill a row group each (at 30,720 rows, 1 GB: 5.3 s and a 602 MB file, against 3.9-4.5 s, 432 MB).
    con.execute("SET threads = 1")
    # The search index is made from the turns' Parquet files while this connection inserts the tables: on cursors,
    # one that adds groups of turns to it and two that tokenize the next groups (`search.build_index`), each on one
    # thread, so that something keeps both cores busy to the end (the build at 200 MB: 1.7-1.8 s instead of
    # 2.1-2.2 with one cursor for the whole index; at 1 GB: 5.9-6.3 s instead of 8.4-9.1).
    files = _files(store, TURNS, version)

    def index(cursor: duckdb.DuckDBPyConnection) -> None:
        cursor.execute("USE warehouse")
        search.build_index(cursor, files, tokenizer=tokenizer)

    indexing = search.OnCursor(con, index, name="fts-build")
    try:
        for table in TABLES:
            _insert_all(con, store, table, version)
    except BaseException:
        indexing.cancel()
        raise
    indexing.wait()
    con.execute("RESET threads")
    # The small statements that follow in one transaction: each would otherwise be a commit of its own, with its
    # log write (~40 of them: views, macros, price tables, meta).
    con.execute("BEGIN")
    con.execute(f"CREATE TABLE {META} (key VARCHAR, value VARCHAR)")
    views.create_views(con, zone)
    prices_from = prices.install(con, cache=store.data_dir / PRICE_CACHE)
    meta = _set_meta(con, version_number, zone, prices_from, json.dumps(figures(con)), tokenizer)
    con.execute("COMMIT")
    return meta


@dataclass(slots=True)
class _Change:
    """A change under way on `con`: its transaction begun and the replaced rows deleted (`_begin_apply`), to be
    finished by `_finish_apply` once the Parquet version it applies exists, or rolled back by `close`."""

    con: duckdb.DuckDBPyConnection
    in_place: bool
    flushing: threading.Thread | None
    replaced: Mapping[str, set[str]]
    sources: set[str] | None
    meta: dict[str, str]
    old: dict[str, Any] | None
    keep_figures: bool
    indexed: bool
    reindex: bool  # sessions were replaced: their documents are made again (where there is an index)
    gone: _Rows = field(default_factory=_Rows)

    def close(self) -> None:
        """Roll the change back (closing the connection ends its open transaction) and wait for its threads."""
        self.con.close()
        if self.flushing is not None:
            self.flushing.join()


def _begin_apply(
    con: duckdb.DuckDBPyConnection,
    in_place: bool,
    flushing: threading.Thread | None,
    replaced: Mapping[str, set[str]],
    sources: set[str] | None,
) -> _Change:
    """Begin the change of a run that replaced the sessions `replaced` (agent -> ids): the transaction, and the
    DELETEs of those sessions' rows and of the changed sources' rows, none of which needs the new Parquet version
    (so `Begun` makes them while the commit writes it).

    With `sources`, the rows of `sources` and `rejects` of those paths alone are replaced (what the commit changed
    in them), so that a change of one session does not rewrite tables that grow with the corpus."""
    ids = pa.table({"session_id": pa.array(sorted({s for group in replaced.values() for s in group}), pa.string())})
    meta = _meta(con)
    old = json.loads(meta[FIGURES]) if FIGURES in meta else None
    keep_figures = (
        old is not None
        and "redaction" in old
        and "unpriced" in old
        and old["redaction"].get("rules_version") == redaction_version()
        and meta.get("prices") == prices.source_version()  # else every usage row may be priced anew
    )
    indexed = search.has_index(con)
    change = _Change(con, in_place, flushing, replaced, sources, meta, old, keep_figures, indexed, bool(ids.num_rows))
    con.register("replaced_ids", ids)
    con.execute("BEGIN")
    change.gone = _delete_sessions(con, figures=keep_figures)
    _delete_per_source(con, sources)
    if indexed:  # their documents too (plain SQL on the index's tables: the extension is not needed yet)
        con.register("removed_turns", change.gone.removed_turns())
        search.drop_documents(con, "SELECT turn_id FROM removed_turns")
        con.unregister("removed_turns")
    return change


def _finish_apply(
    change: _Change,
    store: Store,
    version: Path,
    version_number: int,
    zone: str,
    *,
    before_commit: Callable[[], None] | None = None,
) -> dict[str, str]:
    """Finish `change` with the rows `version` holds for its sessions and sources, the search index, the views,
    the prices and the figures, and commit it; returns the meta it wrote. The figures are updated from the
    replaced sessions' rows when the file holds figures that still apply (same redaction rules and prices), else
    computed whole (once, for a warehouse from before they were kept)."""
    con, meta, old, gone = change.con, change.meta, change.old, change.gone
    indexed = change.indexed
    layout = store.layout(version)
    new = _insert_sessions(con, version, layout, change.replaced, figures=change.keep_figures)
    _insert_per_source(con, store, version, change.sources)
    if not indexed:
        search.create_index(con)  # a warehouse from before search: built once, whole
    # Kept by the run that made the index (a lookup is 15-50 ms); looked up for a warehouse from before it was.
    tokenizer = (indexed and meta.get(TOKENIZER)) or search.tokenizer_of(con)
    if indexed and change.reindex:
        # The documents of the deleted turns were dropped as the change began; the new rows are indexed from the
        # files they were loaded from, which hold only their buckets' sessions.
        texts = _session_files(version, layout, change.replaced, TURNS)
        search.add_documents(con, REPLACED, _loaded_rows(texts, REPLACED), tokenizer=tokenizer)
    # New views reach old warehouses, a changed zone is applied; the same DDL as the file's is not run again.
    same_ddl = meta.get(DDL) == _ddl_digest(zone)
    if not same_ddl:
        views.create_views(con, zone)
    # With the figures, the usage rows removed and added are at hand: their models say what the prices change.
    changed = (gone.model_pairs(), new.model_pairs()) if change.keep_figures else None
    # The removed usage rows priced by the price tables they had, before `install` changes them.
    gone_unpriced = gone.unpriced(con) if change.keep_figures else {}
    prices_from = prices.install(
        con, meta.get("prices"), store.data_dir / PRICE_CACHE, views=not same_ddl, changed=changed
    )
    if change.keep_figures and old is not None:
        figures_json = json.dumps(_updated(con, old, gone, gone_unpriced, new))
    else:
        figures_json = json.dumps(figures(con))
    written = _set_meta(con, version_number, zone, prices_from, figures_json, tokenizer)
    if before_commit is not None:
        before_commit()
    con.execute("COMMIT")
    con.unregister("replaced_ids")
    return written


def _delete_per_source(con: duckdb.DuckDBPyConnection, sources: set[str] | None) -> None:
    """The tables that are not keyed by session (`sources`, `rejects`, `runs`): the rows of the `sources` paths
    deleted from the first two, when they are known, else every row of each (`_insert_per_source` puts them back).
    A change that knows its sources leaves `runs` to `_replace_changed_runs`."""
    for table in TABLES:
        if table in SESSION_TABLES or (sources is not None and table is RUNS):
            continue
        if sources is None or table not in (SOURCES, REJECTS):
            con.execute(f"DELETE FROM {table.name}")
        elif sources:
            with _changed_sources(con, sources):
                con.execute(f"DELETE FROM {table.name} WHERE source_path IN (SELECT source_path FROM changed_sources)")


def _insert_per_source(con: duckdb.DuckDBPyConnection, store: Store, version: Path, sources: set[str] | None) -> None:
    """The rows `_delete_per_source` deleted, as `version` holds them: those of the `sources` paths, or every row;
    and `runs` as `version` holds it (`_replace_changed_runs`)."""
    for table in TABLES:
        if table in SESSION_TABLES:
            continue
        if sources is not None and table is RUNS:
            _replace_changed_runs(con, _files(store, RUNS, version))
            continue
        if sources is None or table not in (SOURCES, REJECTS):
            _insert_all(con, store, table, version)
            continue
        if not sources:
            continue
        files = _source_files(store, version, sources) if table is SOURCES else _files(store, table, version)
        if files:
            with _changed_sources(con, sources):
                con.execute(
                    f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?) "
                    "WHERE source_path IN (SELECT source_path FROM changed_sources)",
                    [files],
                )


def _replace_changed_runs(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """Make `runs` hold the rows of `files` by changing only the rows that differ: the run's own row, and one a
    failed run replaced (sinks.commit.append_run). Deleting every row and inserting them all again wrote them all
    to DuckDB's log at each change in place: at 1,238 runs, 1.4 of the 1.5 MB a one-session change added to it, so
    the log passed `LOG_THRESHOLD` and was folded every third change, and every open replayed it."""
    if not files:
        con.execute("DELETE FROM runs")
        return
    columns = ", ".join(RUNS.column_names)
    # read_parquet twice, not a temp table: creating one in the change's transaction cost ~9 ms, the reads ~1 ms.
    version = f"SELECT {columns} FROM read_parquet(?)"
    con.execute(
        f"DELETE FROM runs WHERE run_id IN (SELECT run_id FROM (SELECT {columns} FROM runs EXCEPT {version}))", [files]
    )
    con.execute(f"INSERT INTO runs ({columns}) {version} EXCEPT SELECT {columns} FROM runs", [files])


def _source_files(store: Store, version: Path, paths: set[str]) -> list[str]:
    """The manifest files of `version` that can hold the rows of `paths`: of an agent whose manifest is in buckets
    (sinks.store.SOURCE_BUCKET_ROWS), the buckets of those paths alone."""
    layout = store.source_layout(version)
    names: dict[int, set[str]] = {}  # bucket count -> the file names of the paths' buckets
    files: list[str] = []
    for path in store.files(SOURCES.name, version):
        count = layout.get(path.parent.name.removeprefix("agent="), 1)
        if count > 1:
            if count not in names:
                names[count] = {part_name(bucket_of(p, count)) for p in paths}
            if path.name not in names[count]:
                continue
        files.append(str(path))
    return files


@contextlib.contextmanager
def _changed_sources(con: duckdb.DuckDBPyConnection, sources: set[str]) -> Iterator[None]:
    con.register("changed_sources", pa.table({"source_path": pa.array(sorted(sources), pa.string())}))
    try:
        yield
    finally:
        con.unregister("changed_sources")


def _delete_sessions(con: duckdb.DuckDBPyConnection, *, figures: bool) -> _Rows:
    """Delete the replaced sessions' rows (`replaced_ids`) from every session table; returns what was deleted (the
    turn ids, and with `figures` what the figures need)."""
    gone = _Rows()
    for table in SESSION_TABLES:
        clause = _Rows.returning(table, figures)
        result = con.execute(f"DELETE FROM {table.name} WHERE session_id IN ({REPLACED}){clause}")
        if clause:
            gone.add(table, result.to_arrow_table())
    return gone


def _insert_sessions(
    con: duckdb.DuckDBPyConnection,
    version: Path,
    layout: Mapping[str, int],
    replaced: Mapping[str, set[str]],
    *,
    figures: bool,
) -> _Rows:
    """Insert the rows `version` holds for the replaced sessions into every session table (from their buckets'
    files only); returns what was inserted (as `_delete_sessions`)."""
    new = _Rows()
    for table in SESSION_TABLES:
        clause = _Rows.returning(table, figures)
        files = _session_files(version, layout, replaced, table)
        if files:
            result = con.execute(
                f"INSERT INTO {table.name} BY NAME SELECT * FROM read_parquet(?) "
                f"WHERE session_id IN ({REPLACED}){clause}",
                [files],
            )
            if clause:
                new.add(table, result.to_arrow_table())
    return new


def _session_files(
    version: Path, layout: Mapping[str, int], replaced: Mapping[str, set[str]], table: Table
) -> list[str]:
    """The files of `table` in `version` that hold the `replaced` sessions (agent -> ids): their buckets'."""
    files = {
        str(version / FileKey(table.name, agent, bucket).relpath())
        for agent, sids in replaced.items()
        for bucket in {bucket_of(s, layout[agent]) for s in sids}
    }
    return [f for f in sorted(files) if os.path.exists(f)]


def _loaded_rows(files: list[str], sessions: str) -> str:
    """A relation of the rows of the sessions `sessions` (SQL yielding session_id) in Parquet `files`, for a
    statement that takes no parameters (an empty one when there are no files: the sessions are gone)."""
    if not files:
        return "(SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS turn_id, NULL::VARCHAR AS text WHERE false) t"
    listed = ", ".join(search.sql_string(f) for f in files)
    return f"(SELECT * FROM read_parquet([{listed}]) WHERE session_id IN ({sessions})) t"


def is_current(data_dir: Path, version_number: int, timezone: str | None) -> bool:
    """Whether `warehouse.duckdb` already holds Parquet version `version_number` under the current schema, with
    its per-day views in `timezone`'s zone and a search index: then a run with nothing to do need not touch it.
    A file this DuckDB cannot open, or one a killed run left behind at an older version, is not current."""
    path = warehouse_path(data_dir)
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    recalled = _recalled(path, st)
    if recalled is not None:
        meta, indexed = recalled, True  # a file a run wrote always has its index
    else:
        try:
            con = readonly.connect(path)
        except duckdb.Error:
            return False
        try:
            meta = _meta(con)
            indexed = search.has_index(con)
        finally:
            con.close()
    return (
        indexed
        and meta.get("schema_version") == SCHEMA_VERSION
        and meta.get("parquet_version") == str(version_number)
        and meta.get("timezone") == views.resolve_zone(timezone)
        and meta.get(INDEX) == search.INDEX_SETTINGS
    )


def refresh(
    data_dir: Path,
    store: Store,
    run_id: str,
    *,
    previous_version: int,
    replaced: Mapping[str, set[str]] | None,
    timezone: str | None = None,
    sources: set[str] | None = None,
    begun: Begun | None = None,
) -> None:
    """Bring `warehouse.duckdb` to the current Parquet version, atomically: a new file swapped in, or one transaction.

    `sources` (the source paths whose manifest and reject rows the run rewrote, `Committed.sources_changed`) lets
    a change replace only those rows of `sources` and `rejects`; without it both tables are loaded whole.

    With `replaced` (the sessions the run replaced) and a warehouse built from `previous_version`, the change is
    applied to a copy, or in place (`_open_to_change`); otherwise (first run, a killed run left it behind, a schema
    change, a file this DuckDB cannot open, e.g. one written by DuckDB 2.0) it is rebuilt. Per-day views use
    `timezone` (default: the machine's zone). Raises views.ZoneError for an unknown zone.

    `begun`: the same change begun while the commit wrote the version (`Begun`, made with the same `replaced` and
    `sources`), finished here; when it could not begin, the change is made here as without it.
    """
    change = begun.take() if begun is not None else None
    try:
        given = views.check_zone(timezone) if timezone else None  # an unknown zone fails before anything is made
        version = store.current()
    except BaseException:
        if change is not None:
            change.close()
        raise
    if version is None:
        if change is not None:
            change.close()
        return
    tmp = _tmp_path(data_dir, run_id)
    try:
        _refresh(data_dir, store, version, tmp, previous_version, replaced, given, sources, change)
    except BaseException:
        # A build or change that failed (a full disk, a view's overflow) leaves nothing behind: the warehouse is as
        # the last run left it, and the run's error (in the ledger and `status`) says why.
        _remove_tmp(tmp)
        raise


def _tmp_path(data_dir: Path, run_id: str) -> Path:
    """Where a run builds a new warehouse, or changes a copy of it."""
    return data_dir / f"{WAREHOUSE}.tmp-{run_id}"


def _remove_tmp(tmp: Path) -> None:
    for stale in (tmp, Path(f"{tmp}.wal")):
        stale.unlink(missing_ok=True)


class Begun:
    """A run's warehouse change begun on a thread while its commit writes the next Parquet version: the warehouse
    opened (its log replayed) or copied, the transaction begun, and the replaced sessions' and changed sources' rows
    deleted. None of that needs the new version, and at 5 GB it is ~0.1-0.15 s of a one-session change that would
    otherwise follow the commit (issue 32). Nothing of it is visible to anyone until `refresh(begun=...)` finishes
    and commits it; `abandon()` rolls it back (the commit failed, or the run was stopped). In place, the warehouse
    is locked from the start of this change rather than from the end of the commit (readers of the tool wait for
    a run's lock: `readonly.connect`).

    Made without `replaced` (a run whose plan is small, before it reads its sources), the thread opens the
    warehouse at once and waits for `apply(replaced, sources)`: the open and its log's replay (~40 ms at 5 GB)
    overlap the read. A `take` or `abandon` with no `apply` closes what it opened.

    When the change cannot begin (no warehouse, one that is not at `previous_version`, an error), nothing is held
    and `refresh` does what it does without it: rebuild, or meet the same error and report it.
    """

    def __init__(
        self,
        data_dir: Path,
        run_id: str,
        *,
        previous_version: int,
        replaced: Mapping[str, set[str]] | None = None,
        sources: set[str] | None = None,
    ) -> None:
        self._tmp = _tmp_path(data_dir, run_id)
        self._change: _Change | None = None
        self._given = threading.Event()  # `apply` (or `take` / `abandon`) was called
        self._replaced: Mapping[str, set[str]] | None = None
        self._sources: set[str] | None = None
        if replaced is not None:
            self.apply(replaced, sources)
        args = (data_dir, previous_version)
        self._thread = threading.Thread(target=self._begin, args=args, name="warehouse-begin", daemon=True)
        self._thread.start()

    def apply(self, replaced: Mapping[str, set[str]], sources: set[str] | None) -> None:
        """The change to begin: the sessions the commit replaces (agent -> ids) and the source paths it rewrites."""
        self._replaced, self._sources = replaced, sources
        self._given.set()

    def _begin(self, data_dir: Path, previous_version: int) -> None:
        target = warehouse_path(data_dir)
        try:
            _remove_tmp(self._tmp)
            if not target.exists():
                return
            con, in_place, flushing = _open_incremental(target, self._tmp, data_dir, previous_version)
            if con is None:
                return

            def release() -> None:
                con.close()
                if flushing is not None:
                    flushing.join()
                if not in_place:
                    _remove_tmp(self._tmp)

            try:
                # The index's update at the end of the change LOADs the extension: done here, its 5-25 ms (mapping
                # a 12 MB library) overlap the read or the commit instead of following them.
                search.load_extension(con)
            except BaseException:
                release()
                raise
            self._given.wait()
            replaced = self._replaced
            if replaced is None:  # taken or abandoned before any change was given: nothing to begin
                release()
                return
            self._change = _begun(con, in_place, flushing, replaced, self._sources)
        except Exception as exc:  # refresh makes the change itself, and says what fails then
            log.info("event=warehouse_begin_failed error=%r", f"{type(exc).__name__}: {exc}")
            _remove_tmp(self._tmp)

    def take(self) -> _Change | None:
        """The change begun (waiting for the thread), handed over once; None when it could not begin (or no change
        was given: then what was opened is closed)."""
        self._given.set()
        self._thread.join()
        change, self._change = self._change, None
        return change

    def abandon(self) -> None:
        """Roll back a change not handed over (a no-op after `take`); the warehouse is as the last run left it."""
        change = self.take()
        if change is not None:
            change.close()
            if not change.in_place:
                _remove_tmp(self._tmp)


def _open_incremental(
    target: Path, tmp: Path, data_dir: Path, previous_version: int
) -> tuple[duckdb.DuckDBPyConnection | None, bool, threading.Thread | None]:
    """`_open_to_change`, when the warehouse holds `previous_version` under the current schema and index settings,
    so that a run's change applies to it; else nothing is held (no connection, no copy left behind)."""
    con, in_place, flushing = _open_to_change(target, tmp, data_dir)
    if con is not None:
        try:
            meta = _meta(con)
        except BaseException:
            con.close()
            raise
        if (
            meta.get("schema_version") == SCHEMA_VERSION
            and meta.get("parquet_version") == str(previous_version)
            and meta.get(INDEX) == search.INDEX_SETTINGS  # an index made otherwise is rebuilt, not updated
        ):
            return con, in_place, flushing
        con.close()
    if flushing is not None:
        flushing.join()
    _remove_tmp(tmp)
    return None, False, None


def _begun(
    con: duckdb.DuckDBPyConnection,
    in_place: bool,
    flushing: threading.Thread | None,
    replaced: Mapping[str, set[str]],
    sources: set[str] | None,
) -> _Change:
    """`_begin_apply` on a connection `_open_incremental` gave; one that fails is closed (rolled back)."""
    try:
        return _begin_apply(con, in_place, flushing, replaced, sources)
    except BaseException:
        con.close()
        if flushing is not None:
            flushing.join()
        raise


def _refresh(
    data_dir: Path,
    store: Store,
    version: Path,
    tmp: Path,
    previous_version: int,
    replaced: Mapping[str, set[str]] | None,
    given: str | None,
    sources: set[str] | None = None,
    change: _Change | None = None,
) -> None:
    number = store.current_number()
    target = warehouse_path(data_dir)
    if change is not None and (change.replaced != replaced or change.sources != sources):
        change.close()  # begun for another change: not this one's (never, from the flows)
        change = None
    if change is None:
        _remove_tmp(tmp)
        if replaced is not None and target.exists():
            con, in_place, flushing = _open_incremental(target, tmp, data_dir, previous_version)
            if con is not None:
                change = _begun(con, in_place, flushing, replaced, sources)
    if change is not None:
        in_place, flushing = change.in_place, change.flushing
        try:
            # In place, the failpoint's moment (the change made, not yet seen) is before the COMMIT.
            before_commit = functools.partial(failpoints.reach, "warehouse") if in_place else None
            zone = given or views.machine_zone(change.con)  # asked of this connection: one of its own is ~10 ms
            meta = _finish_apply(change, store, version, number, zone, before_commit=before_commit)
            if in_place:
                # Committed: the change is in the log, where it stays (see the module's docstring).
                failpoints.reach("warehouse_log")
            else:
                change.con.execute("CHECKPOINT")  # the copy is swapped in whole, without a log
        finally:
            change.con.close()  # a change that failed is rolled back: in place, the file is as the last run left it
        if in_place:
            _remember(target, meta)
            return
    else:
        flushing = None
        con = _connect(tmp, data_dir)
        try:
            meta = _build(con, store, version, number, given or views.machine_zone(con))
            con.execute("CHECKPOINT")
        finally:
            con.close()  # a build that failed leaves a stray file, which `refresh` removes
    if flushing is not None:
        flushing.join()
    os.chmod(tmp, FILE_MODE)
    failpoints.reach("warehouse")
    # A log beside the old file is the old file's (changes made in place, which the copy took, or which a rebuild
    # made anew): DuckDB would replay it onto the new file. Removed first, so that a reader opening in between sees
    # the old file as of its last checkpoint, never a mix.
    Path(f"{target}.wal").unlink(missing_ok=True)
    replace_releasing(tmp, target)
    _remember(target, meta)


def _take_copy(take: Callable[[Path, Path], Any], target: Path, tmp: Path) -> Any:
    """`take(target, tmp)` (a clone or a copy) with the log beside `target`, if any, taken to `tmp`'s log the same
    way: DuckDB replays it when the copy is opened, so the copy holds what readers of the warehouse see. The log is
    taken after the file (DuckDB only appends to it, and no writer runs: the writer lock is held)."""
    taken = take(target, tmp)
    log_path = Path(f"{target}.wal")
    if taken is not False and log_path.exists() and not take(log_path, Path(f"{tmp}.wal")):
        copy(log_path, Path(f"{tmp}.wal"))
    return taken


def _open_to_change(
    target: Path, tmp: Path, data_dir: Path
) -> tuple[duckdb.DuckDBPyConnection | None, bool, threading.Thread | None]:
    """A connection to apply a run's change through, whether it is the warehouse itself, and the thread flushing a
    copy; no connection when the file cannot be opened (it is then rebuilt from Parquet, not repaired).

    A clone where the filesystem makes one (free, whatever the size). Else a warehouse of `IN_PLACE_BYTES` or more is
    changed in place when no other process has it open: DuckDB's lock then keeps everyone out while the change is
    applied, and its transaction and log make the change whole or absent, as the swap does. A warehouse some process
    holds (DuckDB's lock refuses the writer), or one that cannot be opened for writing, is copied, as a small one
    is: for a small one the copy costs less than keeping readers out.
    """
    flushing: threading.Thread | None = None
    try:
        if _take_copy(clone, target, tmp):
            return _connect(tmp, data_dir), False, None
        if target.stat().st_size >= IN_PLACE_BYTES:
            try:
                con = _connect(target, data_dir)
            except duckdb.Error as exc:  # held open (the lock), or not writable: a copy; damaged: the copy says so
                log.info("event=warehouse_copy reason=%r", readonly.first_line(exc))
            else:
                con.execute("PRAGMA disable_checkpoint_on_shutdown")  # the change stays in the log (see above)
                con.execute(f"SET checkpoint_threshold = '{LOG_THRESHOLD}'")
                return con, True, None
        _take_copy(copy, target, tmp)
        # The copy's pages are written back while the change is applied, instead of all at once when the
        # CHECKPOINT syncs the file (on ext4, ~1 ms per MB of warehouse).
        flushing = threading.Thread(target=_flush, args=(tmp,), name="warehouse-flush", daemon=True)
        flushing.start()
        return _connect(tmp, data_dir), False, flushing
    except duckdb.Error as exc:
        log.warning("event=warehouse_rebuild reason=%r", str(open_error(exc, target)))
        return None, False, flushing


def _flush(path: Path) -> None:
    """fsync `path` (a head start for DuckDB's own sync at the checkpoint, which is what makes the file durable)."""
    with contextlib.suppress(OSError):  # gone or unreadable: the checkpoint's sync, or its failure, is what counts
        fsync_path(path)


def cleanup(data_dir: Path) -> None:
    """Remove temporary warehouse files a killed run left behind."""
    for stray in data_dir.glob(f"{WAREHOUSE}.tmp-*"):
        stray.unlink(missing_ok=True)
