"""The one definition of every table: columns, Arrow types, nullability, and what each column means.

Parquet writers, DuckDB DDL and the table reference in docs/analysis.md are all generated from `TABLES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa

from transforms import agents
from transforms.schema_version import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported: read here by most

TS = pa.timestamp("us", tz="UTC")
TEXT = pa.large_string()  # free text that can be large (prompts, tool output)
STR = pa.string()
LIST_STR = pa.list_(pa.string())


class Keyed(StrEnum):
    """What a table's rows are replaced by when their input is read again."""

    SESSION = "session"  # all rows of a session are replaced when the session is loaded again
    SOURCE = "source"  # all rows of a source are replaced when the source is read again
    RUN = "run"  # append-only ledger


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    nullable: bool
    doc: str


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    keyed: Keyed
    doc: str
    columns: tuple[Column, ...]
    sort_by: tuple[str, ...]  # deterministic row order in every file
    partitioned: bool = True  # hive-partitioned by agent
    # The columns dictionary-encoded in its Parquet files; None: every column (Arrow's default). A table rewritten
    # whole by every run names its few-valued columns only: encoding a column of unique values (paths, hashes)
    # as a dictionary first is wasted work (the `sources` manifest at 5 GB: 43 ms to write, 29 ms without).
    dictionary: tuple[str, ...] | None = None
    # Rows per Parquet row group; None: Arrow's default (the whole file, for every file this project writes). The
    # manifest, sorted by path, in groups of 8,192 rows: the warehouse reads back the rows of the changed sources,
    # and DuckDB skips every group whose paths' min/max cannot hold them (5 GB: 20 ms -> 7 ms a one-session run).
    row_group_rows: int | None = None

    @property
    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns]
        return pa.schema(
            fields, metadata={"transcripts.schema_version": SCHEMA_VERSION, "transcripts.table": self.name}
        )

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _c(name: str, type_: pa.DataType, doc: str, *, nullable: bool = True) -> Column:
    return Column(name, type_, nullable, doc)


_SESSION_ID = _c(
    "session_id", STR, "`<agent>-<native id>`; subagents `<parent session id>-agent-<agent id>`.", nullable=False
)
_AGENT = _c("agent", STR, f"Source product: {', '.join(agents.names())}.", nullable=False)

SESSIONS = Table(
    "sessions",
    Keyed.SESSION,
    "One row per session (a conversation, or a subagent's run).",
    (
        _SESSION_ID,
        _AGENT,
        _c("native_session_id", STR, "The id the agent itself uses.", nullable=False),
        _c("parent_session_id", STR, "The session that spawned this one (subagents, child sessions)."),
        _c("source_path", STR, "The source unit the session was read from.", nullable=False),
        _c("cwd", STR, "Working directory of the session, as the source records it."),
        _c("git_branch", STR, "Git branch at the start of the session."),
        _c("title", STR, "Title, when the source has a trustworthy one."),
        _c("models", LIST_STR, "Models that answered, in order of first use.", nullable=False),
        _c("cli_versions", LIST_STR, "Versions of the agent CLI that wrote the session.", nullable=False),
        _c("started_at", TS, "Session start (UTC), from the source.", nullable=False),
        _c("ended_at", TS, "Last time recorded in the session (UTC)."),
        _c("archived", pa.bool_(), "Marked archived by the agent (OpenCode, ChatGPT).", nullable=False),
        _c("turn_count", pa.int32(), "Turns loaded (user + assistant).", nullable=False),
        _c("user_turn_count", pa.int32(), "A person's turns.", nullable=False),
        _c("assistant_turn_count", pa.int32(), "Model responses with visible text.", nullable=False),
        _c("tool_call_count", pa.int32(), "Tool calls made.", nullable=False),
        _c("harness_record_count", pa.int32(), "Records of injected harness text (not turns).", nullable=False),
        _c("skipped_record_count", pa.int32(), "Well-formed records that are not conversation.", nullable=False),
        _c("record_count", pa.int32(), "Records read from the source for this session.", nullable=False),
        _c(
            "parser_version",
            STR,
            "Version of the extractor that read it, and the redaction: `+r<rules version>`, or `+raw` when off.",
            nullable=False,
        ),
        # Added in schema 3; last, so that the older columns keep their positions.
        _c(
            "git_repository",
            STR,
            "The git remote, normalised to `host/owner/repo` (`github.com/o/r` for its https and ssh URLs; "
            "credentials, port and `.git` dropped); Codex and Grok record it, null elsewhere and in rows loaded "
            "before it existed.",
        ),
        # Added in schema 4.
        _c(
            "started_at_inferred",
            pa.bool_(),
            "True when the source writes no start time and `started_at` is inferred (a Cursor transcript without "
            "`<timestamp>` tags: its file's time); null in rows loaded before it existed.",
        ),
    ),
    ("session_id",),
)

TURNS = Table(
    "turns",
    Keyed.SESSION,
    "What the two parties said: one row per person's turn or model response with visible text.",
    (
        _c("turn_id", STR, "`<session_id>-<turn_index>`.", nullable=False),
        _SESSION_ID,
        _AGENT,
        _c("turn_index", pa.int64(), "Position of the record in the source, counted before filtering.", nullable=False),
        _c("role", STR, "`user` (a person) or `assistant` (a model's visible text).", nullable=False),
        _c("text", TEXT, "The turn's text, harness spans removed.", nullable=False),
        _c("timestamp", TS, "When it was said (UTC); the session start when the source has no time.", nullable=False),
        _c("timestamp_inferred", pa.bool_(), "True when `timestamp` is the session start.", nullable=False),
        _c("model", STR, "Model of an assistant turn."),
        _c("attachments", LIST_STR, "References to images/files attached (never their bytes).", nullable=False),
    ),
    ("session_id", "turn_index"),
)

TOOL_CALLS = Table(
    "tool_calls",
    Keyed.SESSION,
    "Tool calls the model made, with their results.",
    (
        _c("tool_call_id", STR, "`<session_id>-call-<native call id>`.", nullable=False),
        _SESSION_ID,
        _AGENT,
        _c("turn_id", STR, "The model response that made the call (may have no visible text).", nullable=False),
        _c("turn_index", pa.int64(), "Index of that response in the source.", nullable=False),
        _c("call_id", STR, "The native call id.", nullable=False),
        _c("tool_name", STR, "Tool name.", nullable=False),
        _c("input", TEXT, "Input as JSON text (clipped to max_field_bytes)."),
        _c("output", TEXT, "Result text (clipped to max_field_bytes); null when no result was recorded."),
        _c("is_error", pa.bool_(), "The result was an error; null when unknown."),
        _c("started_at", TS, "When the call was made."),
        _c("ended_at", TS, "When the result came back."),
        _c("spawned_session_id", STR, "The subagent session this call started, where known."),
    ),
    ("session_id", "turn_index", "call_id"),
)

USAGE = Table(
    "usage",
    Keyed.SESSION,
    "Token usage per model response, counted once.",
    (
        _c("usage_id", STR, "`<session_id>-usage-<turn_index>`.", nullable=False),
        _SESSION_ID,
        _AGENT,
        _c("turn_index", pa.int64(), "Index of the response in the source.", nullable=False),
        _c("response_id", STR, "Native response id (Claude `message.id`)."),
        _c("model", STR, "Model that answered."),
        _c("timestamp", TS, "Time of the response.", nullable=False),
        _c("input_tokens", pa.int64(), "Prompt tokens not read from cache."),
        _c("output_tokens", pa.int64(), "Generated tokens."),
        _c("cache_read_tokens", pa.int64(), "Prompt tokens read from cache."),
        _c("cache_write_tokens", pa.int64(), "Prompt tokens written to cache."),
        _c("reasoning_tokens", pa.int64(), "Reasoning tokens, where reported separately."),
        _c("cost_usd", pa.float64(), "Cost as the agent reported it."),
    ),
    ("session_id", "turn_index"),
)

SESSION_LINKS = Table(
    "session_links",
    Keyed.SESSION,
    "Lineage: how a session relates to another (subagent of, fork of, resumed from, compaction of).",
    (
        _SESSION_ID,
        _AGENT,
        _c("other_session_id", STR, "The related session.", nullable=False),
        _c(
            "kind",
            STR,
            "subagent | fork | resume | compaction: what `session_id` is to `other_session_id`.",
            nullable=False,
        ),
        _c("tool_call_id", STR, "The call that spawned it, where known."),
    ),
    ("session_id", "other_session_id", "kind"),
)

RECORD_KINDS = Table(
    "record_kinds",
    Keyed.SESSION,
    "Census of source records per session: kind, writer version and what became of them (format drift shows here).",
    (
        _SESSION_ID,
        _AGENT,
        _c("record_kind", STR, "Record kind as the extractor names it (e.g. `user/tool_result`).", nullable=False),
        _c("writer_version", STR, "Version of the CLI that wrote it ('' when unknown).", nullable=False),
        _c("disposition", STR, "turn | tool | harness | skipped | metadata.", nullable=False),
        _c("record_count", pa.int64(), "How many.", nullable=False),
    ),
    ("session_id", "record_kind", "writer_version", "disposition"),
)

REDACTIONS = Table(
    "redactions",
    Keyed.SESSION,
    "The redaction audit: which rule replaced a secret in which cell, and how often; never the value.",
    (
        _SESSION_ID,
        _AGENT,
        _c(
            "column_name",
            STR,
            "The redacted cell's column: turns.text, tool_calls.input, tool_calls.output, sessions.title, "
            "sessions.cwd, sessions.git_branch or sessions.git_repository.",
            nullable=False,
        ),
        _c("turn_id", STR, "The turn (for a tool call: the response that made it); null for a sessions column."),
        _c("tool_call_id", STR, "The tool call, for its input and output."),
        _c("rule", STR, "The rule that found it (see transforms/rules/secrets.toml).", nullable=False),
        _c(
            "secret_hmac",
            STR,
            "The keyed hash in the marker: the same secret has the same one throughout the corpus.",
            nullable=False,
        ),
        _c("count", pa.int32(), "How often that secret was replaced in that cell.", nullable=False),
        _c("timestamp", TS, "The turn's time, the call's start, or the session start.", nullable=False),
    ),
    ("session_id", "column_name", "turn_id", "tool_call_id", "rule", "secret_hmac"),
)

SOURCES = Table(
    "sources",
    Keyed.SOURCE,
    "The manifest: one row per source unit ever seen, with its fingerprint and outcome.",
    (
        _c("source_path", STR, "Absolute path of the unit.", nullable=False),
        _AGENT,
        _c("kind", STR, "file | directory | database | export.", nullable=False),
        _c("root", STR, "Discovery root it was found under.", nullable=False),
        _c("size_bytes", pa.int64(), "Size at the last read.", nullable=False),
        _c("mtime", TS, "Modification time at the last read.", nullable=False),
        _c("mtime_ns", pa.int64(), "The same in nanoseconds (the change check).", nullable=False),
        _c("content_sha256", STR, "Hash of the content at the last read (null for directories)."),
        _c("parser_version", STR, "Extractor version that read it.", nullable=False),
        _c("outcome", STR, "loaded | partial | rejected | deferred.", nullable=False),
        _c("sessions_loaded", pa.int32(), "Sessions loaded from it.", nullable=False),
        _c("sessions_rejected", pa.int32(), "Sessions (or the whole source) rejected.", nullable=False),
        _c("present", pa.bool_(), "False once the agent deleted it; its rows stay in the corpus.", nullable=False),
    ),
    ("source_path",),
    dictionary=("agent", "kind", "root", "parser_version", "outcome"),
    row_group_rows=8192,
)

REJECTS = Table(
    "rejects",
    Keyed.SOURCE,
    "Current rejections and deferrals: nothing of these sessions was loaded from this version of the source.",
    (
        _c("source_path", STR, "The source.", nullable=False),
        _AGENT,
        _c("session_id", STR, "The session, when known (multi-session sources)."),
        _c("outcome", STR, "rejected | deferred.", nullable=False),
        _c("reason_code", STR, "Stable code (invalid_json, limit_exceeded, write_in_progress, ...).", nullable=False),
        _c("detail", STR, "What exactly was wrong.", nullable=False),
        _c(
            "line",
            pa.int64(),
            "0-based record index in the source, when it has one; `status --rejections` shows it plus 1, the line an "
            "editor shows.",
        ),
        _c("byte_offset", pa.int64(), "Byte offset in the source, when known."),
        _c("parser_version", STR, "Extractor version that decided it.", nullable=False),
    ),
    ("source_path", "session_id", "reason_code", "line"),
)

RUNS = Table(
    "runs",
    Keyed.RUN,
    "The run ledger: one row per run.",
    (
        _c("run_id", STR, "`<started_at>-<pid>`; the only id from the clock (a run is an event).", nullable=False),
        _c("flow", STR, "etl | backfill | prune.", nullable=False),
        _c("mode", STR, "incremental | full | backfill | prune.", nullable=False),
        _c("started_at", TS, "Start (UTC).", nullable=False),
        _c("ended_at", TS, "End (UTC).", nullable=False),
        _c("outcome", STR, "ok | failed.", nullable=False),
        _c("error", STR, "Why it failed."),
        _c("flow_run_id", STR, "Prefect flow run id."),
        _c("sources_seen", pa.int64(), "Sources discovered.", nullable=False),
        _c("sources_new", pa.int64(), "Never seen before.", nullable=False),
        _c("sources_changed", pa.int64(), "Size, mtime or parser version changed.", nullable=False),
        _c("sources_unchanged", pa.int64(), "Not opened.", nullable=False),
        _c("sources_deleted", pa.int64(), "Gone upstream since the last run (rows kept).", nullable=False),
        _c("sessions_loaded", pa.int64(), "Sessions written.", nullable=False),
        _c("sessions_rejected", pa.int64(), "Sessions or sources rejected.", nullable=False),
        _c("sources_deferred", pa.int64(), "Sources left for the next run.", nullable=False),
        _c(
            "new_rejections",
            pa.int64(),
            "Rejections this run found, other than the benign codes (no_conversation, duplicate).",
            nullable=False,
        ),
        _c("turns_loaded", pa.int64(), "Turns written.", nullable=False),
        _c("bytes_read", pa.int64(), "Bytes of sources read.", nullable=False),
        _c(
            "counts_by_agent",
            STR,
            "JSON: per agent and outcome (a prune: families, sessions and turns pruned, gone sources forgotten).",
            nullable=False,
        ),
        _c("limits", STR, "JSON: the limits in force.", nullable=False),
        _c(
            "parser_versions",
            STR,
            "JSON: effective parser version per agent (`+r<rules version>` redacted, `+raw` not).",
            nullable=False,
        ),
    ),
    ("started_at", "run_id"),
    partitioned=False,
)

TABLES: tuple[Table, ...] = (
    SESSIONS,
    TURNS,
    TOOL_CALLS,
    USAGE,
    SESSION_LINKS,
    RECORD_KINDS,
    REDACTIONS,
    SOURCES,
    REJECTS,
    RUNS,
)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
SESSION_TABLES: tuple[Table, ...] = tuple(t for t in TABLES if t.keyed is Keyed.SESSION)
SOURCE_TABLES: tuple[Table, ...] = tuple(t for t in TABLES if t.keyed is Keyed.SOURCE)


def duckdb_type(type_: pa.DataType) -> str:
    """The DuckDB column type for an Arrow type used in `TABLES`."""
    if pa.types.is_timestamp(type_):
        return "TIMESTAMPTZ"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "VARCHAR"
    if pa.types.is_list(type_):
        return f"{duckdb_type(type_.value_type)}[]"
    simple = {pa.bool_(): "BOOLEAN", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}
    return simple[type_]


def duckdb_ddl(table: Table) -> str:
    """CREATE TABLE for `table`, generated from the schema."""
    cols = ",\n  ".join(f"{c.name} {duckdb_type(c.type)}{'' if c.nullable else ' NOT NULL'}" for c in table.columns)
    return f"CREATE TABLE {table.name} (\n  {cols}\n)"


def tables_markdown() -> str:
    """The table reference of docs/analysis.md, generated from `TABLES` (a test fails when the page is stale)."""
    out: list[str] = []
    for table in TABLES:
        where = f"`parquet/{table.name}/agent=<agent>/`" if table.partitioned else f"`parquet/{table.name}/`"
        out.append(f"### `{table.name}`\n\n{table.doc} Rows replaced per {table.keyed.value}; files under {where}.\n")
        out.append("| column | type | null | meaning |\n|---|---|---|---|")
        for col in table.columns:
            out.append(f"| `{col.name}` | {duckdb_type(col.type)} | {'yes' if col.nullable else 'no'} | {col.doc} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ---- what a `metrics` publish keeps (flows: `transcripts publish --level metrics`) ----------------------------------
# A metrics publish is for team analytics where the text must stay home: it keeps every column that holds no text
# (numbers, times, flags) and, of the columns that hold strings (anywhere in their type: a list of strings too), only
# those declared here as ids, names or labels. Anything else is dropped, so a text column added later stays home
# until someone declares it here (tests/test_publish_levels.py checks the declarations and what a publish keeps).
METRIC_SAFE: dict[str, frozenset[str]] = {
    # title: free text a person or model wrote
    "sessions": frozenset(
        {"session_id", "agent", "native_session_id", "parent_session_id", "source_path", "cwd", "git_branch"}
        | {"models", "cli_versions", "parser_version", "git_repository"}
    ),
    "turns": frozenset({"turn_id", "session_id", "agent", "role", "model"}),  # text, attachments: the words
    "tool_calls": frozenset(  # input, output: what the tool was given and said
        {"tool_call_id", "session_id", "agent", "turn_id", "call_id", "tool_name", "spawned_session_id"}
    ),
    "usage": frozenset({"usage_id", "session_id", "agent", "response_id", "model"}),
    "session_links": frozenset({"session_id", "agent", "other_session_id", "kind", "tool_call_id"}),
    "record_kinds": frozenset({"session_id", "agent", "record_kind", "writer_version", "disposition"}),
    "redactions": frozenset({"session_id", "agent", "column_name", "turn_id", "tool_call_id", "rule"}),  # not the HMAC
    "sources": frozenset({"source_path", "agent", "kind", "root", "parser_version", "outcome"}),  # not content hashes
    "rejects": frozenset({"source_path", "agent", "session_id", "outcome", "reason_code", "parser_version"}),  # detail
    "runs": frozenset({"run_id", "flow", "mode", "outcome", "flow_run_id", "counts_by_agent", "limits"})
    | {"parser_versions"},  # error: a message that may quote a path's or a source's text
}


def holds_text(type_: pa.DataType) -> bool:
    """Whether values of `type_` can hold a string anywhere (a string, or a list or struct with one)."""
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_):
        return True
    if pa.types.is_large_binary(type_):
        return True
    return any(holds_text(type_.field(i).type) for i in range(type_.num_fields))


def metrics_columns(table: Table) -> tuple[str, ...]:
    """The columns of `table` a metrics publish keeps: every one that holds no text, and the declared-safe ones."""
    safe = METRIC_SAFE.get(table.name, frozenset())
    return tuple(c.name for c in table.columns if not holds_text(c.type) or c.name in safe)
