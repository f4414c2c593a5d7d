"""The team's corpus: every machine's latest published manifest, read as one warehouse with a `machine` column.

The objects the manifests name are fetched into a local cache (`data/cache/team/objects/<sha256>.parquet`, checked
against their hash; an object is fetched once, ever) and an in-memory DuckDB gets a view per table over them, the
same views and cost views as the local warehouse on top. Reading from a local cache rather than through DuckDB's
httpfs extension keeps one way of reaching the store (pyarrow's, with the standard credential chain, see
sinks/remote.py), needs no credentials handed to DuckDB, and makes a repeated team query local.

A session found on several machines (the same deterministic id: one home folder synced to two machines) counts once:
the copy with more turns wins, then the one whose last recorded time is later, then the first machine label in
order. Only the winning copy's rows of every session table are seen; `all_<table>` keeps every copy.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from sinks import prices, remote, views
from sinks.files import private_dir
from sinks.publish import UPLOADERS, Level, Manifest, PublishError, machine_dir, machines, read_manifest
from sinks.remote import Target
from transforms.schema import SESSION_TABLES, SOURCES, TABLES, TURNS, Table, duckdb_type

# Which copy of a session counts: more turns, then the later last time, then the machine label (deterministic).
WINNER_ORDER = "turn_count DESC, coalesce(ended_at, started_at) DESC, machine"
# Views whose rows are turns, given a `machine` column here (session_overview and current_rejects have one through
# `s.*` and `r.*`); the others aggregate over the whole team, as over one machine locally.
ROW_VIEWS = ("prompts", "turn_context")


class TeamError(PublishError):
    """The team folder cannot be read as asked; the message says why."""


@dataclass(slots=True)
class Team:
    """The latest manifest of every machine that has published, and where their files are in the local cache."""

    target: Target
    manifests: dict[str, Manifest] = field(default_factory=dict)
    files: dict[str, dict[str, list[Path]]] = field(default_factory=dict)  # machine -> table -> cached files
    fetched: int = 0  # objects downloaded by this read
    bytes_fetched: int = 0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(remote.CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(target: Target, data_dir: Path, *, progress: Callable[[int, int], None] | None = None) -> Team:
    """Read every machine's manifest and bring the objects they name into the cache. Raises TeamError (no machine
    has published; a foreign object; a newer manifest) or remote.RemoteError."""
    labels = machines(target)
    team = Team(target)
    for label in labels:
        manifest = read_manifest(target, label)
        if manifest is not None:  # a machine whose first publish is still under way has none yet
            team.manifests[label] = manifest
    if not team.manifests:
        raise TeamError(f"no machine has published to {target.where()} yet: `transcripts publish {target.url}`")
    cache = private_dir(private_dir(private_dir(data_dir / "cache") / "team") / "objects")
    wanted = {f.sha256: (label, f) for label, m in team.manifests.items() for f in m.files}
    missing = [sha for sha in sorted(wanted) if not (cache / f"{sha}.parquet").exists()]
    total = sum(wanted[sha][1].size for sha in missing)

    def fetch_one(sha: str) -> int:
        label, file = wanted[sha]
        local = cache / f"{sha}.parquet"
        size = remote.download(target, f"{machine_dir(target, label)}/{file.object}", local)
        if _sha256(local) != sha:
            local.unlink()
            raise TeamError(
                f"{machine_dir(target, label)}/{file.object} does not hold what its name says (changed or damaged "
                f"in the store): the next `transcripts publish` on {label} sends it again"
            )
        os.chmod(local, 0o600)
        return size

    pool = ThreadPoolExecutor(UPLOADERS, thread_name_prefix="team-fetch")  # as many at once as a publish sends
    try:
        for done in as_completed([pool.submit(fetch_one, sha) for sha in missing]):
            team.bytes_fetched += done.result()
            team.fetched += 1
            if progress is not None:
                progress(team.bytes_fetched, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for label, manifest in team.manifests.items():
        tables: dict[str, list[Path]] = {}
        for file in manifest.files:
            tables.setdefault(file.table, []).append(cache / f"{file.sha256}.parquet")
        team.files[label] = tables
    for stale in cache.iterdir():  # objects no manifest names any more, and leftovers of killed downloads
        if stale.name.removesuffix(".parquet") not in wanted:
            stale.unlink(missing_ok=True)
    return team


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _all_rows(table: Table, team: Team) -> str:
    """A SELECT of every machine's rows of `table`: the schema's columns (NULL where a machine's files lack one:
    an older schema, or a metrics publish) and `machine`."""
    parts = []
    present: set[str] = set()
    for label in sorted(team.files):
        paths = team.files[label].get(table.name, [])
        if not paths:
            continue
        for path in paths:
            present |= set(pq.read_schema(path).names)
        listed = ", ".join(_sql_string(str(p)) for p in paths)
        parts.append(f"SELECT *, {_sql_string(label)} AS machine FROM read_parquet([{listed}], union_by_name = true)")
    columns = [
        c.name if c.name in present else f"CAST(NULL AS {duckdb_type(c.type)}) AS {c.name}" for c in table.columns
    ]
    if not parts:
        nulls = ", ".join(f"CAST(NULL AS {duckdb_type(c.type)}) AS {c.name}" for c in table.columns)
        return f"SELECT {nulls}, CAST(NULL AS VARCHAR) AS machine WHERE false"
    return f"SELECT {', '.join(columns)}, machine FROM ({' UNION ALL BY NAME '.join(parts)})"


def connect(
    team: Team, zone: str, cache_dir: Path | None = None, *, materialize_turns: bool = False
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB over the team's files: tables (views) with a `machine` column, a session counted once,
    `machines` (what each machine published), the warehouse's views and cost views, in `zone`.

    `materialize_turns` makes `turns` a table (what the full-text index needs) rather than a view."""
    con = duckdb.connect()
    try:
        for table in TABLES:
            con.execute(f"CREATE VIEW all_{table.name} AS {_all_rows(table, team)}")
        con.execute(
            "CREATE TABLE session_winners AS SELECT session_id, machine FROM all_sessions "
            f"QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY {WINNER_ORDER}) = 1"
        )
        for table in TABLES:
            if table in SESSION_TABLES:
                body = (
                    f"SELECT r.* FROM all_{table.name} r SEMI JOIN session_winners w "
                    "ON r.session_id = w.session_id AND r.machine = w.machine"
                )
            elif table is SOURCES:  # one row per source path (a synced folder is on several machines)
                body = (
                    "SELECT * FROM all_sources QUALIFY row_number() OVER "
                    "(PARTITION BY source_path ORDER BY present DESC, machine) = 1"
                )
            else:
                body = f"SELECT * FROM all_{table.name}"
            kind = "TABLE" if materialize_turns and table is TURNS else "VIEW"
            con.execute(f"CREATE {kind} {table.name} AS {body}")
        con.execute(
            "CREATE TABLE machines (machine VARCHAR, level VARCHAR, published_at TIMESTAMPTZ, corpus_version BIGINT, "
            "schema_version VARCHAR, files BIGINT, bytes BIGINT)"
        )
        for label, m in sorted(team.manifests.items()):
            con.execute(
                "INSERT INTO machines VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    label,
                    m.level.value,
                    m.published_at,
                    m.corpus_version,
                    m.schema_version,
                    len(m.files),
                    sum(f.size for f in m.files),
                ],
            )
        views.create_views(con, zone)
        for name in ROW_VIEWS:  # a row of these is one turn: its machine is its session's winning copy's
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT v.*, w.machine FROM ({views.VIEWS[name]}) v "
                "JOIN session_winners w USING (session_id)"
            )
        prices.install(con, None, cache_dir)
        con.execute(f"SET TimeZone = {_sql_string(zone)}; SET VARIABLE {views.ZONE_VARIABLE} = {_sql_string(zone)};")
    except BaseException:
        con.close()
        raise
    return con


def text_machines(team: Team) -> list[str]:
    """The machines that published their text (level full): those `search --team` can search."""
    return sorted(label for label, m in team.manifests.items() if m.level is Level.full)
