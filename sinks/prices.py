"""Dated model prices from `genai-prices` as warehouse tables, and the cost views that join them at query time.

Every load writes two small tables beside the corpus, from the `genai-prices` package's bundled data (offline: its
auto-update is never started):

- `prices`: one row per provider, model, price period and prompt-size tier, USD per million tokens per kind, with
  the dates it is in force and its source. A price change is a new row, so a cost is always computed with the
  price of the day the tokens were used: history is never rewritten, and upgrading the package only fills in or
  corrects prices.
- `price_models`: which priced model each `(agent, model)` of `usage` is, as `genai-prices`' own matcher decides
  (with the agent's provider as the hint: a Claude Code session's `claude-opus-4-6` is Anthropic's). A model it
  cannot match has no row: its usage is unpriced, and shows as NULL cost, never as 0.

The views (`usage_costs`, `cost_daily`, `session_costs`, `unpriced_usage`, and the table macro
`cost_daily_in(tz)`) apply the price the way `genai-prices` does (`calc_price`, tested against it): the last
price period in force at the response's time wins (the first when none is), a tier applies when the response's
whole prompt is over its threshold, and a kind without its own price (cache reads or writes) is charged at the
input price.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, time
from decimal import Decimal
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from transforms import agents

PACKAGE = "genai-prices"

# The provider a model name is looked up under first, per agent partition (then without a hint: OpenCode and
# gateways name models of any provider), as each agent declares it (`AgentSpec.price_provider`).
PROVIDER_HINTS: dict[str, str | None] = agents.provider_hints()

# Agents whose `output_tokens` do NOT include the reasoning tokens, which are billed as output (each agent declares
# it: `AgentSpec.reasoning_billed_separately`). Gemini's `output` is candidatesTokenCount, its `thoughts` are billed
# on top; OpenCode stores `reasoning` beside `output`. Claude's output_tokens include thinking; Codex's (OpenAI's)
# include reasoning_output_tokens.
REASONING_BILLED_SEPARATELY = agents.reasoning_billed_separately()

KINDS = ("input", "output", "cache_read", "cache_write")
_PRICE_KEYS = {"input": "input_mtok", "output": "output_mtok", "cache_read": "cache_read_mtok"}
# Anthropic publishes 5-minute and 1-hour cache writes; the sources record one cache-write count, priced at the
# standard (5-minute) write price, which is what `genai-prices` uses for an undivided count.
_CACHE_WRITE_KEYS = ("cache_write_mtok", "cache_write_5m_mtok")

PRICE_SCHEMA = pa.schema(
    [
        pa.field("provider_id", pa.string(), nullable=False),
        pa.field("provider_name", pa.string(), nullable=False),
        pa.field("model_id", pa.string(), nullable=False),
        pa.field("model_name", pa.string()),
        pa.field("model_match", pa.string(), nullable=False),
        pa.field("price_index", pa.int32(), nullable=False),
        pa.field("effective_from", pa.date32()),
        pa.field("effective_to", pa.date32()),
        pa.field("utc_time_from", pa.time64("us")),
        pa.field("utc_time_to", pa.time64("us")),
        pa.field("prompt_tokens_over", pa.int64(), nullable=False),
        *(pa.field(f"{kind}_usd_per_mtok", pa.decimal128(38, 18)) for kind in KINDS),
        pa.field("source", pa.string(), nullable=False),
    ]
)

PRICE_MODEL_SCHEMA = pa.schema(
    [
        pa.field("agent", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("provider_id", pa.string(), nullable=False),
        pa.field("model_id", pa.string(), nullable=False),
    ]
)

_REASONING_AGENTS = ", ".join(f"'{a}'" for a in REASONING_BILLED_SEPARATELY)


def _cost(tokens: str, price: str) -> str:
    # Tokens of a kind that is not used cost nothing even when it has no price; used and unpriced is NULL.
    # The price per token is DECIMAL(38, 12) (exact for prices per million given to 6 places): a count times the
    # price per million (DECIMAL(38, 18)) times 0.000001 was DECIMAL(38, 24), which holds 14 digits before the point
    # and overflowed for a count near 2**63 at $15 per million. With 12 places a cost holds 26 digits: the largest
    # count at $1,000 per million is 9.2e15 dollars, and a sum of a billion of them fits.
    return f"CASE WHEN coalesce({tokens}, 0) = 0 THEN 0 ELSE {tokens} * CAST({price} * 0.000001 AS DECIMAL(38, 12)) END"


# A count is any BIGINT (`extractors.bounded.numbers`: up to 2**63 - 1), so the sum of two can leave BIGINT: the counts
# added up per row are HUGEINT first (a 2**63 Gemini count's uncached input plus its cache read stopped every
# warehouse build with "Overflow in addition of INT64"). HUGEINT, not DOUBLE: a count stays exact, and a sum of
# HUGEINTs cannot overflow (2**127 would need 2**64 rows of the largest count). sum() of a BIGINT is HUGEINT in DuckDB.
USAGE_COSTS = f"""
    WITH u AS (
        SELECT u.*, timezone('UTC', u.timestamp) AS at_utc,
               CAST(coalesce(u.input_tokens, 0) AS HUGEINT) + coalesce(u.cache_read_tokens, 0)
                   + coalesce(u.cache_write_tokens, 0) AS prompt_tokens,
               CASE WHEN u.agent IN ({_REASONING_AGENTS})
                    THEN CAST(coalesce(u.output_tokens, 0) AS HUGEINT) + coalesce(u.reasoning_tokens, 0)
                    ELSE u.output_tokens END AS billed_output_tokens
        FROM usage u
    ), candidates AS (
        SELECT u.usage_id, u.prompt_tokens, p.*,
               (p.effective_from IS NULL OR CAST(u.at_utc AS DATE) >= p.effective_from)
               AND (p.utc_time_from IS NULL
                    OR (p.utc_time_from <= p.utc_time_to
                        AND CAST(u.at_utc AS TIME) >= p.utc_time_from AND CAST(u.at_utc AS TIME) < p.utc_time_to)
                    OR (p.utc_time_from > p.utc_time_to
                        AND (CAST(u.at_utc AS TIME) >= p.utc_time_from OR CAST(u.at_utc AS TIME) < p.utc_time_to)))
                   AS in_force
        FROM u
        JOIN price_models m ON m.agent = u.agent AND m.model = u.model
        JOIN prices p ON p.provider_id = m.provider_id AND p.model_id = m.model_id
    ), priced AS (
        -- genai-prices' rule: the last period in force wins, the first when none is; then the highest tier the
        -- whole prompt is over.
        SELECT usage_id, provider_id, model_id, price_index, effective_from, prompt_tokens_over,
               input_usd_per_mtok, output_usd_per_mtok,
               coalesce(cache_read_usd_per_mtok, input_usd_per_mtok) AS cache_read_usd_per_mtok,
               coalesce(cache_write_usd_per_mtok, input_usd_per_mtok) AS cache_write_usd_per_mtok,
               source
        FROM candidates
        WHERE (in_force OR price_index = 0) AND (prompt_tokens_over = 0 OR prompt_tokens > prompt_tokens_over)
        QUALIFY row_number() OVER (
            PARTITION BY usage_id ORDER BY in_force DESC, price_index DESC, prompt_tokens_over DESC) = 1
    ), costed AS (
        SELECT u.usage_id, u.session_id, u.agent, u.model, u.timestamp, u.response_id,
               u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens,
               u.prompt_tokens, u.billed_output_tokens,
               p.provider_id AS price_provider, p.model_id AS price_model, p.effective_from AS price_from,
               p.prompt_tokens_over AS price_tier_over, p.source AS price_source,
               CASE WHEN p.usage_id IS NOT NULL THEN {_cost("u.input_tokens", "p.input_usd_per_mtok")} END
                   AS input_cost_usd,
               CASE WHEN p.usage_id IS NOT NULL THEN {_cost("u.billed_output_tokens", "p.output_usd_per_mtok")} END
                   AS output_cost_usd,
               CASE WHEN p.usage_id IS NOT NULL
                    THEN {_cost("u.cache_read_tokens", "p.cache_read_usd_per_mtok")} END AS cache_read_cost_usd,
               CASE WHEN p.usage_id IS NOT NULL
                    THEN {_cost("u.cache_write_tokens", "p.cache_write_usd_per_mtok")} END AS cache_write_cost_usd,
               u.cost_usd AS reported_cost_usd
        FROM u LEFT JOIN priced p USING (usage_id)
    )
    SELECT *, input_cost_usd + output_cost_usd + cache_read_cost_usd + cache_write_cost_usd AS computed_cost_usd,
           (input_cost_usd + output_cost_usd + cache_read_cost_usd + cache_write_cost_usd) IS NOT NULL AS priced
    FROM costed"""


def _daily(day: str) -> str:
    return f"""
        SELECT {day} AS day, agent, model, count(*) AS responses,
               sum(input_tokens) AS input_tokens, sum(billed_output_tokens) AS output_tokens,
               sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
               sum(input_cost_usd) AS input_cost_usd, sum(output_cost_usd) AS output_cost_usd,
               sum(cache_read_cost_usd) AS cache_read_cost_usd, sum(cache_write_cost_usd) AS cache_write_cost_usd,
               sum(computed_cost_usd) AS computed_cost_usd, sum(reported_cost_usd) AS reported_cost_usd,
               bool_and(priced) AS priced, count(*) FILTER (WHERE NOT priced) AS unpriced_responses
        FROM usage_costs GROUP BY ALL"""


VIEWS: dict[str, str] = {
    "usage_costs": USAGE_COSTS,
    # `day` is the UTC day here, for a stable view; `cost_daily_in('Europe/Berlin')` groups by a zone's days.
    "cost_daily": _daily("CAST(timezone('UTC', timestamp) AS DATE)"),
    "session_costs": """
        SELECT session_id, agent, list(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL) AS models,
               count(*) AS responses,
               sum(input_tokens) AS input_tokens, sum(billed_output_tokens) AS output_tokens,
               sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
               sum(computed_cost_usd) AS computed_cost_usd, sum(reported_cost_usd) AS reported_cost_usd,
               bool_and(priced) AS priced, count(*) FILTER (WHERE NOT priced) AS unpriced_responses
        FROM usage_costs GROUP BY ALL""",
    "unpriced_usage": """
        SELECT agent, model, count(*) AS responses, min(timestamp) AS first_seen, max(timestamp) AS last_seen,
               sum(prompt_tokens) AS prompt_tokens, sum(billed_output_tokens) AS output_tokens,
               sum(reported_cost_usd) AS reported_cost_usd
        FROM usage_costs WHERE NOT priced GROUP BY ALL""",
}

MACROS: dict[str, str] = {"cost_daily_in(tz)": _daily("CAST(timezone(tz, timestamp) AS DATE)")}


@dataclass(frozen=True, slots=True)
class Unpriced:
    """How much of the corpus' usage has no price: responses, and their share of all responses with usage."""

    responses: int
    total_responses: int
    models: tuple[tuple[str, str | None, int], ...]  # (agent, model or None, responses), most first

    @property
    def share(self) -> float:
        return self.responses / self.total_responses if self.total_responses else 0.0


def source_version() -> str:
    """Which price data a warehouse's tables came from (kept in its meta: an upgrade of the package re-reads it)."""
    return f"{PACKAGE} {version(PACKAGE)}"


def statements() -> list[str]:
    """The DDL of the cost views and macros."""
    return [
        *(f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in VIEWS.items()),
        *(f"CREATE OR REPLACE MACRO {signature} AS TABLE {sql}" for signature, sql in MACROS.items()),
    ]


def install(
    con: duckdb.DuckDBPyConnection,
    installed_from: str | None = None,
    cache: Path | None = None,
    *,
    views: bool = True,
    changed: tuple[set[tuple[str, str]], set[tuple[str, str]]] | None = None,
) -> str:
    """(Re)create `prices`, `price_models` and the cost views in the open transaction of a warehouse build.

    `installed_from` is what the warehouse's tables were made from (`source_version()` of an earlier load): when it
    is the package installed now, `prices` is kept and only (agent, model) pairs new to `usage` are looked up, so
    a small load does not pay for reading the whole price database (~0.8 s). A warehouse built whole reads the
    prices from `cache` (a folder) when an earlier build of the same package version left them there. Returns the
    source to record. `views=False` leaves the views and macros as they are (the caller knows they are current).

    `changed`: the (agent, model) pairs of the usage rows a change removed and of those it added, when the change
    knows them (a run's change of a few sessions): a pair can only fall out of use if it was among the removed and
    is not among the added, and only an added pair can be new to the lookups, so `usage` is scanned for the first
    kind alone and only when there is one (a one-session change at 5 GB: three scans of `usage`, ~10 ms, saved).
    """
    current = source_version()
    kept = installed_from == current and _has_tables(con, "prices", "price_models", "price_lookups")
    if not kept:
        con.register("genai_prices_rows", cached_price_table(cache) if cache is not None else price_table())
        con.execute("CREATE OR REPLACE TABLE prices AS SELECT * FROM genai_prices_rows ORDER BY ALL")
        con.unregister("genai_prices_rows")
        con.execute(
            "CREATE OR REPLACE TABLE price_models (agent VARCHAR, model VARCHAR, provider_id VARCHAR, model_id VARCHAR)"
        )
        con.execute("CREATE OR REPLACE TABLE price_lookups (agent VARCHAR, model VARCHAR)")  # every pair looked up
    used = "SELECT DISTINCT agent, model FROM usage WHERE model IS NOT NULL"
    if kept and changed is not None:
        models = _changed_pairs(con, *changed)
    else:
        con.execute(f"DELETE FROM price_models WHERE (agent, model) NOT IN ({used})")
        con.execute(f"DELETE FROM price_lookups WHERE (agent, model) NOT IN ({used})")
        models = con.execute(f"{used} EXCEPT SELECT agent, model FROM price_lookups ORDER BY ALL").fetchall()
    if models:
        pairs = [(str(a), str(m)) for a, m in models]
        con.register("genai_price_models", price_models(pairs, cache))
        con.execute("INSERT INTO price_models SELECT * FROM genai_price_models")
        con.unregister("genai_price_models")
        # One statement, not a statement per row (12-18 ms for a small build's dozen pairs, once 131 ms).
        con.execute(
            "INSERT INTO price_lookups SELECT unnest(?), unnest(?)", [[a for a, _ in pairs], [m for _, m in pairs]]
        )
    for sql in statements() if views else ():
        con.execute(sql)
    return current


def _changed_pairs(
    con: duckdb.DuckDBPyConnection, removed: set[tuple[str, str]], added: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """`install`'s DELETEs and its pairs to look up, for a change whose usage rows' (agent, model) pairs are known:
    the pairs removed and not added that no row of `usage` has any more leave `price_models` and `price_lookups`;
    the added pairs not looked up yet are returned (sorted, as the whole query gives them)."""
    gone = sorted(removed - added)
    if gone:
        con.register("transcripts_gone_pairs", _pairs_table(gone))
        try:
            unused = (
                "SELECT agent, model FROM transcripts_gone_pairs EXCEPT "
                "SELECT DISTINCT agent, model FROM usage WHERE (agent, model) IN (SELECT * FROM transcripts_gone_pairs)"
            )
            for table in ("price_models", "price_lookups"):
                con.execute(f"DELETE FROM {table} WHERE (agent, model) IN ({unused})")
        finally:
            con.unregister("transcripts_gone_pairs")
    if not added:
        return []
    con.register("transcripts_added_pairs", _pairs_table(sorted(added)))
    try:
        rows = con.execute(
            "SELECT agent, model FROM transcripts_added_pairs "
            "EXCEPT SELECT agent, model FROM price_lookups ORDER BY ALL"
        ).fetchall()
    finally:
        con.unregister("transcripts_added_pairs")
    return [(str(a), str(m)) for a, m in rows]


def _pairs_table(pairs: list[tuple[str, str]]) -> pa.Table:
    agents, models = [a for a, _ in pairs], [m for _, m in pairs]
    return pa.table({"agent": pa.array(agents, pa.string()), "model": pa.array(models, pa.string())})


def _has_tables(con: duckdb.DuckDBPyConnection, *names: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name IN (SELECT unnest(?))",
        [list(names)],
    ).fetchone()
    return bool(row and row[0] == len(names))


def unpriced(con: duckdb.DuckDBPyConnection) -> Unpriced:
    """How much usage has no price, for `status` and the report (reads the views `install` made)."""
    row = con.execute("SELECT count(*), count(*) FILTER (WHERE NOT priced) FROM usage_costs").fetchone()
    total, missing = (int(row[0]), int(row[1])) if row else (0, 0)
    models = con.execute(
        "SELECT agent, model, responses FROM unpriced_usage ORDER BY responses DESC, agent, model"
    ).fetchall()
    return Unpriced(missing, total, tuple((str(a), None if m is None else str(m), int(n)) for a, m, n in models))


def price_models(models: list[tuple[str, str]], cache: Path | None = None) -> pa.Table:
    """The priced model of each (agent, model) that `genai-prices` can match; unmatched ones are left out.

    Matching loads the package's whole snapshot (~0.3 s); with `cache` (a folder) the answers, matched or not, are
    kept there per package version, so a rebuild of a warehouse whose models were all matched before loads none.
    """
    known = _cached_matches(cache) if cache is not None else {}
    rows: list[dict[str, str]] = []
    new = False
    for agent, model in models:
        key = f"{agent}\t{model}"
        if key not in known:
            match = _match(model, PROVIDER_HINTS.get(agent))
            known[key] = list(match) if match is not None else None
            new = True
        found = known[key]
        if found is not None:
            rows.append({"agent": agent, "model": model, "provider_id": found[0], "model_id": found[1]})
    if new and cache is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written is only slower next time
            _keep_matches(cache, known)
    return pa.Table.from_pylist(rows, schema=PRICE_MODEL_SCHEMA)


# Bumped when `_match` decides differently, so that answers kept by an earlier matcher are asked again.
MATCHER_VERSION = "2"  # 2: `provider/model` names


def _matches_path(folder: Path) -> Path:
    return folder / f"price-matches-{source_version().removeprefix(PACKAGE).strip()}-m{MATCHER_VERSION}.json"


def _cached_matches(folder: Path) -> dict[str, list[str] | None]:
    try:
        found = json.loads(_matches_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {
        str(k): v
        for k, v in found.items()
        if v is None or (isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v))
    }


def _keep_matches(folder: Path, known: Mapping[str, list[str] | None]) -> None:
    from sinks.files import write_private_atomic

    text = json.dumps(dict(sorted(known.items())), indent=0)
    write_private_atomic(
        _matches_path(folder), lambda tmp: tmp.write_text(text, encoding="utf-8"), stale="price-matches-*.json"
    )


# Provider prefixes of `provider/model` names (LiteLLM's, which Aider and others write: `gemini/gemini-2.5-flash`,
# `openrouter/anthropic/claude-3.7-sonnet`) that are not `genai-prices` provider ids themselves.
_PREFIX_PROVIDERS = {"vertex_ai": "google", "xai": "x-ai", "bedrock": "aws", "azure_ai": "azure"}


@cache
def _match(model: str, provider: str | None) -> tuple[str, str] | None:
    """The priced (provider, model) of a model name, `provider` tried first; a `provider/model` name the package does
    not know whole is looked up without its prefix, the prefix as the provider (`openrouter/anthropic/x` is
    OpenRouter's `anthropic/x`, `gemini/gemini-2.5-flash` Google's)."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    for hint in (provider, None) if provider else (None,):
        try:
            found_provider, found_model = snapshot.find_provider_model(model, None, hint, None)
        except LookupError:
            continue
        return found_provider.id, found_model.id
    prefix, slash, rest = model.partition("/")
    if not slash or not rest:
        return None
    named = _PREFIX_PROVIDERS.get(prefix.lower(), prefix.lower())
    known = any(p.id == named for p in snapshot.providers)
    return _match(rest, named if known else provider)


def cached_price_table(folder: Path) -> pa.Table:
    """`price_table()`, kept in `folder` as an Arrow file per package version (reading it takes milliseconds,
    building it from the package's data most of a second); a file of another version or schema is replaced."""
    import pyarrow.ipc as ipc

    from sinks.files import write_private_atomic

    path = folder / f"prices-{source_version().removeprefix(PACKAGE).strip()}.arrow"
    with contextlib.suppress(OSError, pa.ArrowInvalid):
        with ipc.open_file(path) as reader:
            table = reader.read_all()
        if table.schema.equals(PRICE_SCHEMA, check_metadata=False):
            return table
    table = price_table()

    def write(tmp: Path) -> None:
        with ipc.new_file(tmp, table.schema) as writer:
            writer.write_table(table)

    write_private_atomic(path, write, stale="prices-*.arrow")
    return table


@cache
def price_table() -> pa.Table:
    """Every token price of `genai-prices`' bundled data, one row per provider, model, period and tier."""
    from genai_prices import types
    from genai_prices.data import providers

    source_version = f"{PACKAGE} {version(PACKAGE)}"
    rows: list[dict[str, Any]] = []
    for provider in providers:
        source = f"{source_version}: " + (", ".join(provider.pricing_urls or []) or provider.name)
        for model in provider.models:
            periods = (
                [types.ConditionalPrice(prices=model.prices)]
                if isinstance(model.prices, types.ModelPrice)
                else list(model.prices)
            )
            starts = [_start(p.constraint) for p in periods]
            for index, period in enumerate(periods):
                start = starts[index]
                later = [s for s in starts[index + 1 :] if s is not None and (start is None or s > start)]
                window = _window(period.constraint)
                base = {
                    "provider_id": provider.id,
                    "provider_name": provider.name,
                    "model_id": model.id,
                    "model_name": model.name,
                    "model_match": _describe(model.match),
                    "price_index": index,
                    "effective_from": start,
                    "effective_to": min(later) if later else None,
                    "utc_time_from": window[0],
                    "utc_time_to": window[1],
                    "source": source,
                }
                for over, kinds in _tiers(period.prices).items():
                    rows.append({**base, "prompt_tokens_over": over, **kinds})
    return pa.Table.from_pylist(rows, schema=PRICE_SCHEMA)


def _start(constraint: object) -> date | None:
    from genai_prices import types

    return constraint.start_date if isinstance(constraint, types.StartDateConstraint) else None


def _window(constraint: object) -> tuple[time | None, time | None]:
    from genai_prices import types

    if not isinstance(constraint, types.TimeOfDateConstraint):
        return None, None
    return _utc(constraint.start_time), _utc(constraint.end_time)


def _utc(value: time) -> time:
    from datetime import UTC, datetime

    if value.tzinfo is not None:
        value = datetime.combine(date(1970, 1, 1), value).astimezone(UTC).time()
    return value.replace(tzinfo=None)


def _tiers(prices: object) -> dict[int, dict[str, Decimal | None]]:
    """Prices per kind at each prompt-size threshold (0: the base price), as `genai-prices`' cliff tiers."""
    from genai_prices import types

    def raw(kind: str) -> object:
        if kind == "cache_write":
            return next((v for k in _CACHE_WRITE_KEYS if (v := getattr(prices, k, None)) is not None), None)
        return getattr(prices, _PRICE_KEYS[kind], None)

    values = {kind: raw(kind) for kind in KINDS}
    thresholds = sorted({0} | {t.start for v in values.values() if isinstance(v, types.TieredPrices) for t in v.tiers})
    out: dict[int, dict[str, Decimal | None]] = {}
    for over in thresholds:
        at: dict[str, Decimal | None] = {}
        for kind, value in values.items():
            if isinstance(value, types.TieredPrices):
                applicable = value.base
                for tier in value.tiers:
                    if over >= tier.start and over > 0:
                        applicable = tier.price
                at[f"{kind}_usd_per_mtok"] = applicable
            else:
                at[f"{kind}_usd_per_mtok"] = value if isinstance(value, Decimal) else None
        out[over] = at
    return out


def _describe(match: object) -> str:
    """The model match rule as compact JSON (`{"starts_with": "claude-opus-4-6"}`, `{"or": [...]}`)."""
    return json.dumps(_clause(match), separators=(",", ":"))


def _clause(match: object) -> Any:
    from genai_prices import types

    if isinstance(match, types.ClauseOr):
        return {"or": [_clause(c) for c in match.or_]}
    if isinstance(match, types.ClauseAnd):
        return {"and": [_clause(c) for c in match.and_]}
    for cls, key in (
        (types.ClauseEquals, "equals"),
        (types.ClauseStartsWith, "starts_with"),
        (types.ClauseEndsWith, "ends_with"),
        (types.ClauseContains, "contains"),
        (types.ClauseRegex, "regex"),
    ):
        if isinstance(match, cls):
            return {key: getattr(match, key)}
    return {"other": repr(match)}
