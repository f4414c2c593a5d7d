"""The warehouse's views: the common questions as SQL, per-day ones in a time zone chosen at load or query time.

Every per-day view converts times with `timezone(transcripts_timezone(), ts)`, never with a plain cast to DATE,
which would follow whatever session time zone the reader happens to have. `transcripts_timezone()` is a macro
created with the zone of the load (the `timezone` setting, else the machine's zone) and overridden per connection
by `SET VARIABLE transcripts_timezone = 'Asia/Tokyo'` (what `--timezone` does), so a view answers in one zone
however and wherever it is read.
"""

from __future__ import annotations

import duckdb

ZONE_VARIABLE = "transcripts_timezone"


def zone_macro(zone: str) -> str:
    """DDL of the macro every per-day view reads its zone from (`zone` must be valid: see `check_zone`)."""
    literal = zone.replace("'", "''")
    return f"CREATE OR REPLACE MACRO transcripts_timezone() AS coalesce(getvariable('{ZONE_VARIABLE}'), '{literal}')"


def _local(ts: str) -> str:
    return f"timezone(transcripts_timezone(), {ts})"


def _day(ts: str) -> str:
    return f"CAST({_local(ts)} AS DATE)"


def _folder_name(path: str) -> str:
    """The last folder of a path, as people name their projects ("/home/me/src/shop/" -> "shop")."""
    return f"regexp_extract(rtrim({path}, '/\\'), '[^/\\\\]+$')"


PROJECT = _folder_name("s.cwd")

VIEWS: dict[str, str] = {
    "session_overview": """
        SELECT s.*, coalesce(src.present, true) AS source_present
        FROM sessions s LEFT JOIN sources src USING (source_path)""",
    "prompts": """
        SELECT t.turn_id, t.session_id, t.agent, t.timestamp, s.cwd, s.title, t.text
        FROM turns t JOIN sessions s USING (session_id)
        WHERE t.role = 'user'""",
    "daily_tokens": f"""
        SELECT {_day("timestamp")} AS day, agent, model, count(*) AS responses,
               sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
               sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens
        FROM usage GROUP BY ALL""",
    "redactions_daily": f"""
        SELECT agent, {_day("timestamp")} AS day, rule, sum(count) AS count,
               count(DISTINCT secret_hmac) AS distinct_secrets
        FROM redactions GROUP BY ALL""",
    "tool_failures": """
        SELECT agent, tool_name, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
               round(count(*) FILTER (WHERE is_error) / count(*), 3) AS error_rate
        FROM tool_calls GROUP BY ALL""",
    "current_rejects": """
        SELECT r.*, coalesce(src.present, true) AS source_present
        FROM rejects r LEFT JOIN sources src USING (source_path)""",
    # One row per local day and agent. A session counts on every day it had a turn or a tool call; a tool call
    # without its own time is dated at its session's start.
    "daily_activity": f"""
        WITH events AS (
            SELECT agent, session_id, started_at AS ts, 1 AS new, 0 AS prompt, 0 AS response, 0 AS call
            FROM sessions
            UNION ALL
            SELECT agent, session_id, timestamp, 0, CAST(role = 'user' AS INTEGER),
                   CAST(role = 'assistant' AS INTEGER), 0
            FROM turns
            UNION ALL
            SELECT c.agent, c.session_id, coalesce(c.started_at, s.started_at), 0, 0, 0, 1
            FROM tool_calls c JOIN sessions s USING (session_id)
        )
        SELECT {_day("ts")} AS day, agent, count(DISTINCT session_id) AS sessions,
               CAST(sum(new) AS BIGINT) AS new_sessions,
               CAST(sum(prompt) AS BIGINT) AS prompts, CAST(sum(response) AS BIGINT) AS responses,
               CAST(sum(call) AS BIGINT) AS tool_calls
        FROM events GROUP BY ALL""",
    # A project is its git repository where known, else its working directory. A session's repository is the one it
    # recorded (Codex, Grok), else the one the other sessions of its folder recorded, when they agree on one
    # (Claude, Gemini, OpenCode record none): one clone's sessions are one project whichever agent ran them, and
    # one repository cloned in two folders is one project. One row per session; `project_activity` and the report's
    # "busiest projects" group it by (git_repository, folder).
    "session_projects": f"""
        WITH by_folder AS (
            SELECT cwd, min(git_repository) AS repository
            FROM sessions WHERE cwd IS NOT NULL AND git_repository IS NOT NULL
            GROUP BY cwd HAVING count(DISTINCT git_repository) = 1
        ), placed AS (
            SELECT s.session_id, s.cwd, coalesce(s.git_repository, f.repository) AS repository,
                   s.git_repository IS NULL AND f.repository IS NOT NULL AS inferred
            FROM sessions s LEFT JOIN by_folder f USING (cwd)
        )
        SELECT session_id,
               coalesce(regexp_extract(repository, '[^/]+$'), {_folder_name("folder")}, '(none)') AS project,
               repository AS git_repository, folder, inferred
        FROM (SELECT *, CASE WHEN repository IS NULL THEN cwd END AS folder FROM placed)""",
    # (cwd null when the repository was used in several folders, all of them in `folders`)
    "project_activity": f"""
        SELECT p.project, p.git_repository,
               CASE WHEN count(DISTINCT s.cwd) = 1 THEN min(s.cwd) END AS cwd,
               list(DISTINCT s.cwd ORDER BY s.cwd) FILTER (WHERE s.cwd IS NOT NULL) AS folders,
               count(*) AS sessions, count(*) FILTER (WHERE p.inferred) AS inferred_sessions,
               list(DISTINCT s.agent ORDER BY s.agent) AS agents,
               CAST(sum(s.user_turn_count) AS BIGINT) AS prompts,
               CAST(sum(s.assistant_turn_count) AS BIGINT) AS responses,
               CAST(sum(s.tool_call_count) AS BIGINT) AS tool_calls,
               list(DISTINCT s.git_branch ORDER BY s.git_branch) FILTER (WHERE s.git_branch IS NOT NULL)
                   AS git_branches,
               min({_day("s.started_at")}) AS first_day,
               max({_day("coalesce(s.ended_at, s.started_at)")}) AS last_day
        FROM session_projects p JOIN sessions s USING (session_id)
        GROUP BY p.project, p.git_repository, p.folder""",
    # error_rate is over the calls whose outcome is known (is_error not null); `unknown` counts the others.
    "tool_usage": """
        SELECT agent, tool_name, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
               count(*) FILTER (WHERE is_error IS NULL) AS unknown,
               round(count(*) FILTER (WHERE is_error) / nullif(count(*) FILTER (WHERE is_error IS NOT NULL), 0), 3)
                   AS error_rate,
               count(DISTINCT session_id) AS sessions, min(started_at) AS first_used, max(started_at) AS last_used
        FROM tool_calls GROUP BY ALL""",
    "session_lengths": """
        WITH s AS (
            SELECT agent, turn_count,
                   epoch(coalesce(ended_at, started_at) - started_at) / 60.0 AS minutes
            FROM sessions
        ), b AS (
            SELECT *, CASE WHEN minutes < 1 THEN 1 WHEN minutes < 10 THEN 2 WHEN minutes < 30 THEN 3
                           WHEN minutes < 120 THEN 4 WHEN minutes < 480 THEN 5 ELSE 6 END AS bucket
            FROM s
        )
        SELECT agent, bucket,
               ['< 1 min', '1-10 min', '10-30 min', '30 min-2 h', '2-8 h', '>= 8 h'][bucket] AS duration,
               count(*) AS sessions, median(turn_count) AS median_turns, max(turn_count) AS max_turns,
               round(median(minutes), 1) AS median_minutes
        FROM b GROUP BY ALL""",
    # Responses with visible text from turns; tokens from usage (one row per response, counted once). A session
    # counts for a model when it has a model turn or usage of that model in the month: a response with no text (a
    # tool call alone) has usage and no turn, and its model's row said 0 sessions beside its tokens. Token sums are
    # HUGEINT, as DuckDB's sum() of BIGINT is: a count may be any BIGINT, so their sum may not fit one (no CAST back).
    "model_usage": f"""
        WITH seen AS (
            SELECT date_trunc('month', {_local("timestamp")})::DATE AS month, agent,
                   coalesce(model, '(unknown)') AS model, session_id, timestamp, 1 AS response
            FROM turns WHERE role = 'assistant'
            UNION ALL
            SELECT date_trunc('month', {_local("timestamp")})::DATE, agent, coalesce(model, '(unknown)'), session_id,
                   timestamp, 0
            FROM usage
        ), r AS (
            SELECT month, agent, model, count(DISTINCT session_id) AS sessions,
                   CAST(sum(response) AS BIGINT) AS responses, min({_day("timestamp")}) AS first_day,
                   max({_day("timestamp")}) AS last_day
            FROM seen GROUP BY ALL
        ), u AS (
            SELECT date_trunc('month', {_local("timestamp")})::DATE AS month, agent,
                   coalesce(model, '(unknown)') AS model, sum(input_tokens) AS input_tokens,
                   sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens,
                   sum(cache_write_tokens) AS cache_write_tokens
            FROM usage GROUP BY ALL
        )
        SELECT month, agent, model, r.sessions, r.responses,
               u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, r.first_day, r.last_day
        FROM r LEFT JOIN u USING (month, agent, model)""",
    # Every turn with what a reader needs to place it; what `transcripts search` shows its hits from.
    "turn_context": f"""
        SELECT t.turn_id, t.session_id, t.agent, t.role, t.timestamp, {_day("t.timestamp")} AS day, t.model,
               coalesce({PROJECT}, '(none)') AS project, s.cwd, s.git_branch, s.title, s.parent_session_id, t.text
        FROM turns t JOIN sessions s USING (session_id)""",
}


def statements(zone: str) -> list[str]:
    """The DDL of the zone macro and every view."""
    return [zone_macro(zone), *(f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in VIEWS.items())]


def create_views(con: duckdb.DuckDBPyConnection, zone: str) -> None:
    """(Re)create the zone macro and every view on `con` (inside the caller's transaction)."""
    for sql in statements(zone):
        con.execute(sql)


class ZoneError(ValueError):
    """A time zone DuckDB does not know; the message names close ones."""


def machine_zone(con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The machine's time zone as DuckDB resolves it (TZ, else /etc/localtime), asked of `con` when given (one that
    has not set TimeZone), else of a connection of its own (~10 ms to open)."""
    own = con is None
    con = duckdb.connect() if con is None else con
    try:
        row = con.execute("SELECT current_setting('TimeZone')").fetchone()
    finally:
        if own:
            con.close()
    return str(row[0]) if row else "UTC"


def check_zone(zone: str) -> str:
    """Return `zone` when DuckDB knows it (IANA names such as Europe/Berlin, or UTC); raise ZoneError otherwise."""
    con = duckdb.connect()
    try:
        if con.execute("SELECT 1 FROM pg_timezone_names() WHERE name = ?", [zone]).fetchone():
            return zone
        close = [
            str(r[0])
            for r in con.execute(
                "SELECT name FROM pg_timezone_names() ORDER BY jaro_winkler_similarity(lower(name), lower(?)) DESC "
                "LIMIT 3",
                [zone],
            ).fetchall()
        ]
    finally:
        con.close()
    raise ZoneError(f"unknown time zone {zone!r}; did you mean {', '.join(close)}?")


def resolve_zone(zone: str | None) -> str:
    """The zone to use: `zone` when given (checked), else the machine's."""
    return check_zone(zone) if zone else machine_zone()
