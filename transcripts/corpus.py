"""One Parquet snapshot of the corpus as polars LazyFrames (see the package's docstring)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from flows.etl.settings import load_settings
from sinks import store as parquet_store
from transforms.schema import BY_NAME, TABLES, duckdb_type

if TYPE_CHECKING:
    import duckdb


class NoCorpus(FileNotFoundError):
    """The data directory has no Parquet snapshot yet; the message says how to make one."""


class Corpus:
    """The tables of one snapshot (`version`), as LazyFrames: `corpus.sessions`, `.turns`, `.tool_calls`, `.usage`,
    `.session_links`, ... (`corpus.table(name)` for any). A run that commits meanwhile publishes a new snapshot and
    never changes this one: the corpus holds its version (`sinks.store.pin`) until `close()` (or the end of a
    `with` block, or of the process)."""

    def __init__(self, data_dir: Path) -> None:
        store = parquet_store.Store(data_dir)
        version = store.current()
        if version is None:
            raise NoCorpus(
                f"no corpus in {data_dir} yet: run `transcripts run` (or `transcripts run --sample` to try the sample)"
            )
        self.data_dir = data_dir
        self.path = version.resolve()  # the version's own folder: a later swap of `parquet` changes nothing here
        self.version = store.current_number()
        self._pin = parquet_store.pin(self.path)
        self._files = {t.name: [str(p) for p in store.files(t.name, self.path)] for t in TABLES}

    # ---- tables ----------------------------------------------------------------------------------------------

    def table(self, name: str) -> pl.LazyFrame:
        """Table `name` of this snapshot, hive-partitioned by agent where the table is; an empty frame with the
        table's columns when the snapshot has no file of it."""
        if name not in BY_NAME:
            raise KeyError(f"no table {name!r}; tables: {', '.join(BY_NAME)}")
        files = self._files[name]
        empty = pl.from_arrow(BY_NAME[name].arrow_schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        if not files:
            return empty.lazy()
        hive = BY_NAME[name].partitioned
        return pl.scan_parquet(
            files,
            hive_partitioning=hive,
            hive_schema={"agent": pl.String} if hive else None,
            missing_columns="insert",  # a file from before a column existed reads it as nulls
            schema=empty.schema,
        )

    @property
    def sessions(self) -> pl.LazyFrame:
        return self.table("sessions")

    @property
    def turns(self) -> pl.LazyFrame:
        return self.table("turns")

    @property
    def tool_calls(self) -> pl.LazyFrame:
        return self.table("tool_calls")

    @property
    def usage(self) -> pl.LazyFrame:
        return self.table("usage")

    @property
    def session_links(self) -> pl.LazyFrame:
        return self.table("session_links")

    # ---- the warehouse's views, in polars ----------------------------------------------------------------------

    def daily_activity(self, zone: str = "UTC") -> pl.LazyFrame:
        """As the warehouse's `daily_activity`: per local day of `zone` and agent, the sessions active, new
        sessions, prompts, responses and tool calls (a call with no time of its own is dated at its session's
        start)."""
        sessions = self.sessions.select("agent", "session_id", ts="started_at")
        events = pl.concat(
            [
                sessions.with_columns(new=pl.lit(1), prompt=pl.lit(0), response=pl.lit(0), call=pl.lit(0)),
                self.turns.select(
                    "agent",
                    "session_id",
                    ts="timestamp",
                    new=pl.lit(0),
                    prompt=(pl.col("role") == "user").cast(pl.Int32),
                    response=(pl.col("role") == "assistant").cast(pl.Int32),
                    call=pl.lit(0),
                ),
                self.tool_calls.join(sessions.select("session_id", start="ts"), on="session_id").select(
                    "agent",
                    "session_id",
                    ts=pl.coalesce("started_at", "start"),
                    new=pl.lit(0),
                    prompt=pl.lit(0),
                    response=pl.lit(0),
                    call=pl.lit(1),
                ),
            ],
            how="vertical_relaxed",
        )
        return (
            events.with_columns(day=pl.col("ts").dt.convert_time_zone(zone).dt.date())
            .group_by("day", "agent")
            .agg(
                sessions=pl.col("session_id").n_unique(),
                new_sessions=pl.col("new").sum().cast(pl.Int64),
                prompts=pl.col("prompt").sum().cast(pl.Int64),
                responses=pl.col("response").sum().cast(pl.Int64),
                tool_calls=pl.col("call").sum().cast(pl.Int64),
            )
            .sort("day", "agent")
        )

    def tool_usage(self) -> pl.LazyFrame:
        """As the warehouse's `tool_usage`: per agent and tool, calls, errors, calls of unknown outcome, the error
        rate over the calls whose outcome is known, sessions, first and last use."""
        known = pl.col("is_error").is_not_null()
        return (
            self.tool_calls.group_by("agent", "tool_name")
            .agg(
                calls=pl.len(),
                errors=pl.col("is_error").sum(),
                unknown=pl.col("is_error").is_null().sum(),
                known=known.sum(),
                sessions=pl.col("session_id").n_unique(),
                first_used=pl.col("started_at").min(),
                last_used=pl.col("started_at").max(),
            )
            .with_columns(error_rate=pl.when(pl.col("known") > 0).then((pl.col("errors") / pl.col("known")).round(3)))
            .drop("known")
            .sort("agent", "calls", descending=[False, True])
        )

    def session_costs(self) -> pl.LazyFrame:
        """As the warehouse's `session_costs`: per session, tokens by kind and the computed cost in USD (null when a
        response has no known price). The price of each response comes from `to_duckdb()`'s `usage_costs` (the
        dated-price rules live in SQL, `sinks.prices`), over this same snapshot; the sums are polars'."""
        con = self.to_duckdb()
        try:
            costed = con.sql(
                "SELECT usage_id, billed_output_tokens, computed_cost_usd, reported_cost_usd, priced FROM usage_costs"
            ).pl()
        finally:
            con.close()
        return (
            self.usage.join(costed.lazy(), on="usage_id", how="left")
            .group_by("session_id", "agent")
            .agg(
                models=pl.col("model").drop_nulls().unique().sort(),
                responses=pl.len(),
                input_tokens=_sum("input_tokens"),
                output_tokens=_sum("billed_output_tokens").cast(pl.Int64),
                cache_read_tokens=_sum("cache_read_tokens"),
                cache_write_tokens=_sum("cache_write_tokens"),
                computed_cost_usd=pl.when(pl.col("priced").all()).then(pl.col("computed_cost_usd").sum()),
                reported_cost_usd=_sum("reported_cost_usd"),
                priced=pl.col("priced").all(),
                unpriced_responses=(~pl.col("priced")).sum(),
            )
        )

    # ---- everything else ---------------------------------------------------------------------------------------

    def to_duckdb(self, zone: str = "UTC") -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with a view of every table over this snapshot's files and the warehouse's
        views (per-day ones in `zone`) and cost views (prices from the installed price database, offline). Close it
        when done."""
        # here: DuckDB and the price database only for the views polars does not have
        import duckdb

        from sinks import prices, views
        from sinks.search import sql_string

        con = duckdb.connect()
        con.execute(f"SET TimeZone = {sql_string(zone)}")
        for table in TABLES:
            files = self._files[table.name]
            if files:
                listed = "[" + ", ".join(sql_string(f) for f in files) + "]"
                hive = "true" if table.partitioned else "false"
                con.execute(
                    f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet({listed}, "
                    f"hive_partitioning = {hive}, union_by_name = true)"
                )
            else:
                columns = ", ".join(
                    f"NULL::{duckdb_type(table.arrow_schema.field(c.name).type)} AS {c.name}" for c in table.columns
                )
                con.execute(f"CREATE VIEW {table.name} AS SELECT {columns} WHERE false")
        for sql in views.statements(zone):
            con.execute(sql)
        prices.install(con)
        return con

    def close(self) -> None:
        """Let runs clean this snapshot up (frames collected after this may find its files gone)."""
        if self._pin is not None:
            with contextlib.suppress(OSError):
                os.close(self._pin)
            self._pin = None

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Corpus {self.path} (version {self.version})>"


def _sum(column: str) -> pl.Expr:
    """A sum that is null when every value is (as SQL's `sum`), not 0."""
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum())


def open_corpus(data_dir: str | Path | None = None, *, config: str | Path | None = None) -> Corpus:
    """The newest snapshot of the corpus in `data_dir` (default: the data dir the settings name, as `transcripts
    data where` prints it). Raises NoCorpus before the first run."""
    settings = load_settings(
        data_dir=Path(data_dir).expanduser() if data_dir is not None else None,
        config=Path(config).expanduser() if config is not None else None,
    )
    return Corpus(settings.data_dir)
