"""Cost from dated prices: exact dollars per kind, a price change applied per day, unknown models unpriced (NULL)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import genai_prices
import pytest
from genai_prices import Usage as PriceUsage

from extractors import ids
from extractors.model import Agent, Loaded, Role, Session, Source, Turn, Usage
from sinks import prices, warehouse
from sinks.store import FileKey, NextVersion, Store
from transforms.normalize import session_tables
from transforms.redact import Redactor
from transforms.schema import USAGE, duckdb_ddl

MTOK = Decimal(1_000_000)


def _row(
    n: int,
    agent: str,
    model: str | None,
    at: str,
    *,
    inp: int | None = 0,
    out: int | None = 0,
    read: int | None = None,
    write: int | None = None,
    reasoning: int | None = None,
    reported: float | None = None,
    session: str = "s1",
) -> dict[str, Any]:
    return {
        "usage_id": f"{agent}-{session}-usage-{n}",
        "session_id": f"{agent}-{session}",
        "agent": agent,
        "turn_index": n,
        "response_id": f"msg_{n}",
        "model": model,
        "timestamp": datetime.fromisoformat(at),
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "reasoning_tokens": reasoning,
        "cost_usd": reported,
    }


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    db = duckdb.connect()
    db.execute(duckdb_ddl(USAGE))
    try:
        yield db
    finally:
        db.close()


def _load(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    names = USAGE.column_names
    marks = ", ".join("?" for _ in names)
    con.executemany(f"INSERT INTO usage ({', '.join(names)}) VALUES ({marks})", [[r[n] for n in names] for r in rows])
    prices.install(con)


def _costs(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    rel = con.sql("SELECT * FROM usage_costs")
    return {r[0]: dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()}


def test_claude_response_costs_exact_dollars_per_kind(con: duckdb.DuckDBPyConnection) -> None:
    # claude-opus-4-6 before 2026-03-13: $5 input, $25 output, $0.50 cache read, $6.25 cache write per MTok.
    _load(
        con, [_row(1, "claude", "claude-opus-4-6", "2026-03-02T09:00:00+00:00", inp=12, out=61, read=18000, write=2048)]
    )
    got = _costs(con)["claude-s1-usage-1"]
    assert (got["price_provider"], got["price_model"]) == ("anthropic", "claude-opus-4-6")
    assert got["input_cost_usd"] == Decimal("0.000060")
    assert got["output_cost_usd"] == Decimal("0.001525")
    assert got["cache_read_cost_usd"] == Decimal("0.009000")
    assert got["cache_write_cost_usd"] == Decimal("0.012800")
    assert got["computed_cost_usd"] == Decimal("0.023385")
    assert got["priced"] is True
    assert got["price_source"].startswith("genai-prices ") and "anthropic.com" in got["price_source"]


def test_price_change_between_two_days_applies_to_each_day(con: duckdb.DuckDBPyConnection) -> None:
    # genai-prices' claude-opus-4-6 lost its long-context tier on 2026-03-13: a 250k-token prompt paid $10/MTok
    # input before that day and $5/MTok from it. Same usage, two days, two prices.
    usage = {"inp": 250_000, "out": 1000}
    _load(
        con,
        [
            _row(1, "claude", "claude-opus-4-6", "2026-03-12T23:59:59+00:00", **usage),
            _row(2, "claude", "claude-opus-4-6", "2026-03-13T00:00:00+00:00", **usage),
        ],
    )
    daily = dict(con.execute("SELECT day, computed_cost_usd FROM cost_daily ORDER BY day").fetchall())
    assert daily == {
        datetime(2026, 3, 12).date(): Decimal("2.5") + Decimal("0.0375"),  # 250k x $10 + 1k x $37.50
        datetime(2026, 3, 13).date(): Decimal("1.25") + Decimal("0.025"),  # 250k x $5 + 1k x $25
    }
    periods = con.execute(
        "SELECT price_index, effective_from, effective_to, prompt_tokens_over, input_usd_per_mtok FROM prices "
        "WHERE model_id = 'claude-opus-4-6' AND provider_id = 'anthropic' ORDER BY ALL"
    ).fetchall()
    day = datetime(2026, 3, 13).date()
    assert periods == [
        (0, None, day, 0, Decimal(5)),
        (0, None, day, 200_000, Decimal(10)),
        (1, day, None, 0, Decimal(5)),
    ]


def test_a_price_table_change_never_rewrites_earlier_days(con: duckdb.DuckDBPyConnection) -> None:
    # A hand-made model with a price rise on 2026-02-01: January keeps the January price.
    _load(
        con,
        [
            _row(1, "opencode", "acme-1", "2026-01-31T12:00:00+00:00", inp=1_000_000, out=0),
            _row(2, "opencode", "acme-1", "2026-02-01T12:00:00+00:00", inp=1_000_000, out=0),
        ],
    )
    con.execute("INSERT INTO price_models VALUES ('opencode', 'acme-1', 'acme', 'acme-1')")
    base = ("acme", "Acme", "acme-1", None, '{"equals":"acme-1"}')
    con.executemany(
        "INSERT INTO prices VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, 0, ?, 8, NULL, NULL, 'hand-made')",
        [
            (*base, 0, None, "2026-02-01", "1.00"),
            (*base, 1, "2026-02-01", None, "2.00"),
        ],
    )
    daily = con.execute("SELECT day, computed_cost_usd FROM cost_daily ORDER BY day").fetchall()
    assert [(str(d), c) for d, c in daily] == [("2026-01-31", Decimal("1.00")), ("2026-02-01", Decimal("2.00"))]


def test_unknown_model_is_unpriced_null_never_zero(con: duckdb.DuckDBPyConnection) -> None:
    _load(
        con,
        [
            _row(1, "claude", "claude-opus-4-6", "2026-03-02T09:00:00+00:00", inp=10, out=10),
            _row(2, "claude", "<synthetic>", "2026-03-02T09:01:00+00:00", inp=10, out=10),
            _row(3, "opencode", "totally-unknown-model-9", "2026-03-02T09:02:00+00:00", inp=10, out=10),
            _row(4, "codex", None, "2026-03-02T09:03:00+00:00", inp=10, out=10),
        ],
    )
    got = _costs(con)
    for key in ("claude-s1-usage-2", "opencode-s1-usage-3", "codex-s1-usage-4"):
        assert got[key]["computed_cost_usd"] is None, key
        assert got[key]["priced"] is False, key
    assert got["claude-s1-usage-1"]["priced"] is True
    claude = con.execute(
        "SELECT priced, unpriced_responses, computed_cost_usd FROM cost_daily WHERE model = '<synthetic>'"
    ).fetchone()
    assert claude == (False, 1, None)
    summary = prices.unpriced(con)
    assert (summary.responses, summary.total_responses) == (3, 4)
    assert summary.share == 0.75
    assert {(a, m) for a, m, _ in summary.models} == {
        ("claude", "<synthetic>"),
        ("opencode", "totally-unknown-model-9"),
        ("codex", None),
    }


def test_reported_cost_is_kept_beside_the_computed_one(con: duckdb.DuckDBPyConnection) -> None:
    # OpenCode records its own cost; it is never used as the computed one, nor summed into it.
    _load(
        con,
        [
            _row(
                1,
                "opencode",
                "claude-sonnet-4-5",
                "2025-12-29T09:20:00+00:00",
                inp=900,
                out=120,
                read=3000,
                write=0,
                reported=0.004,
            )
        ],
    )
    got = _costs(con)["opencode-s1-usage-1"]
    assert got["reported_cost_usd"] == 0.004
    # $3 input, $15 output, $0.30 cache read per MTok
    assert got["computed_cost_usd"] == Decimal("0.0027") + Decimal("0.0018") + Decimal("0.0009")
    session = con.execute("SELECT computed_cost_usd, reported_cost_usd, priced FROM session_costs").fetchone()
    assert session == (Decimal("0.0054"), 0.004, True)


def test_reasoning_is_billed_as_output_where_the_source_counts_it_apart(con: duckdb.DuckDBPyConnection) -> None:
    # Gemini's `output` excludes its `thoughts`; Codex's output_tokens already include reasoning.
    _load(
        con,
        [
            _row(1, "gemini", "gemini-2.5-pro", "2026-01-16T18:34:10+00:00", inp=1000, out=40, reasoning=60),
            _row(2, "codex", "gpt-5.4", "2026-05-11T11:26:10+00:00", inp=1000, out=100, reasoning=60),
        ],
    )
    got = _costs(con)
    assert got["gemini-s1-usage-1"]["billed_output_tokens"] == 100
    assert got["gemini-s1-usage-1"]["output_cost_usd"] == Decimal("0.001")  # 100 x $10/MTok
    assert got["codex-s1-usage-2"]["billed_output_tokens"] == 100
    assert got["codex-s1-usage-2"]["output_cost_usd"] == Decimal("0.0015")  # 100 x $15/MTok


def test_cost_daily_in_a_time_zone_groups_by_that_zones_days(con: duckdb.DuckDBPyConnection) -> None:
    _load(con, [_row(1, "claude", "claude-opus-4-6", "2026-03-02T23:30:00+00:00", inp=0, out=1000)])
    utc = con.execute("SELECT day FROM cost_daily").fetchall()
    berlin = con.execute("SELECT day, computed_cost_usd FROM cost_daily_in('Europe/Berlin')").fetchall()
    assert [str(d) for (d,) in utc] == ["2026-03-02"]
    assert [(str(d), c) for d, c in berlin] == [("2026-03-03", Decimal("0.025"))]


# Responses across providers, price periods (the opus change, DeepSeek's time-of-day prices), tiers (a prompt
# just under and just over 200k) and kinds without their own price (OpenAI has no cache-write price).
CROSS_CHECK = [
    ("claude", "claude-opus-4-6", "2026-03-02T09:00:00+00:00", 12, 61, 18000, 2048),
    ("claude", "claude-opus-4-6", "2026-03-12T09:00:00+00:00", 150_000, 500, 50_000, 0),
    ("claude", "claude-opus-4-6", "2026-03-12T09:00:00+00:00", 150_000, 500, 50_001, 0),
    ("claude", "claude-opus-4-6", "2026-06-01T09:00:00+00:00", 150_000, 500, 60_000, 10),
    ("claude", "claude-sonnet-4-5", "2025-11-01T09:00:00+00:00", 300_000, 700, 1000, 1000),
    ("codex", "gpt-5.4", "2026-05-11T11:26:10+00:00", 3000, 300, 6000, 500),
    ("gemini", "gemini-2.5-pro", "2026-01-16T18:34:10+00:00", 210_000, 40, 4000, 0),
    ("grok", "grok-code-fast-1", "2026-07-31T10:13:27+00:00", 900, 90, 9000, 0),
    ("opencode", "deepseek-chat", "2026-04-01T03:00:00+00:00", 1000, 100, 500, 0),
    ("opencode", "deepseek-chat", "2026-04-01T20:00:00+00:00", 1000, 100, 500, 0),
]


def test_computed_cost_equals_genai_prices_calc_price(con: duckdb.DuckDBPyConnection) -> None:
    rows = [
        _row(n, agent, model, at, inp=i, out=o, read=r, write=w)
        for n, (agent, model, at, i, o, r, w) in enumerate(CROSS_CHECK)
    ]
    _load(con, rows)
    got = _costs(con)
    for row in rows:
        expected = genai_prices.calc_price(
            PriceUsage(
                input_tokens=row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"],
                cache_read_tokens=row["cache_read_tokens"],
                cache_write_tokens=row["cache_write_tokens"],
                output_tokens=row["output_tokens"],
            ),
            row["model"],
            provider_id=prices.PROVIDER_HINTS[row["agent"]],
            genai_request_timestamp=row["timestamp"].astimezone(UTC),
        )
        assert got[row["usage_id"]]["computed_cost_usd"] == expected.total_price, row


def _publish(data: Path, sessions: list[Session]) -> None:
    store = Store(data)
    version = NextVersion(store, "t")
    for session in sessions:
        agent = session.agent
        tables = session_tables(
            [Loaded(Source(agent, f"/x/{session.native_id}", 1, 1), session)], {agent: "1"}, Redactor(None)
        )
        version.buckets[agent] = 1
        for name, table in tables.items():
            if name in ("sessions", "turns", "usage", "tool_calls", "session_links", "record_kinds"):
                version.put(FileKey(name, agent, 0), table)
    version.publish()


def _session(agent: Agent, native: str, model: str) -> Session:
    at = datetime(2026, 5, 11, 11, 26, tzinfo=UTC)
    return Session(
        agent,
        ids.session_id(agent, native),
        native,
        at,
        turns=(Turn(0, Role.USER, "q", at), Turn(1, Role.ASSISTANT, "a", at, model)),
        usage=(Usage(1, model, 3000, 300, 6000, timestamp=at),),
    )


def test_an_incremental_load_prices_a_model_it_brings_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The warehouse's incremental path (_finish_apply) re-installs prices and price_models: a model first seen in
    # this run is priced, and the earlier sessions' costs are unchanged.
    data = tmp_path / "data"
    data.mkdir()
    _publish(data, [_session(Agent("claude"), "c1", "claude-opus-4-6")])
    warehouse.refresh(data, Store(data), "r1", previous_version=0, replaced=None)
    codex = _session(Agent("codex"), "x1", "gpt-5.4")
    _publish(data, [codex])

    def no_rebuild(*args: object) -> None:
        raise AssertionError("the second load must take the incremental path")

    monkeypatch.setattr(warehouse, "_build", no_rebuild)
    warehouse.refresh(data, Store(data), "r2", previous_version=1, replaced={"codex": {codex.session_id}})
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT value FROM transcripts_meta WHERE key = 'parquet_version'").fetchone() == ("2",)
        rows = con.execute("SELECT agent, model, computed_cost_usd, priced FROM cost_daily ORDER BY agent").fetchall()
    finally:
        con.close()
    assert rows == [
        ("claude", "claude-opus-4-6", Decimal("0.0150") + Decimal("0.0075") + Decimal("0.0030"), True),
        ("codex", "gpt-5.4", Decimal("0.0075") + Decimal("0.0045") + Decimal("0.0015"), True),
    ]


def test_an_incremental_load_reads_the_price_database_only_when_the_package_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading every price of genai-prices costs ~0.8 s: a load that appends one session must not pay it again,
    # but a new package version (new or corrected prices) must reach the warehouse.
    data = tmp_path / "data"
    data.mkdir()
    _publish(data, [_session(Agent("claude"), "c1", "claude-opus-4-6")])
    warehouse.refresh(data, Store(data), "r1", previous_version=0, replaced=None)
    reads: list[str] = []
    real = prices.price_table

    def counted() -> Any:
        reads.append(prices.source_version())
        return real()

    monkeypatch.setattr(prices, "price_table", counted)
    codex = _session(Agent("codex"), "x1", "gpt-5.4")
    _publish(data, [codex])
    warehouse.refresh(data, Store(data), "r2", previous_version=1, replaced={"codex": {codex.session_id}})
    assert reads == [], "same package: the prices table is kept"
    monkeypatch.setattr(prices, "source_version", lambda: "genai-prices 999.0")
    more = _session(Agent("codex"), "x2", "gpt-5.4")
    _publish(data, [more])
    warehouse.refresh(data, Store(data), "r3", previous_version=2, replaced={"codex": {more.session_id}})
    assert reads == ["genai-prices 999.0"], "a new package version re-reads its prices"
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        meta = dict(con.execute("SELECT key, value FROM transcripts_meta").fetchall())
        models = con.execute("SELECT agent, model FROM price_models ORDER BY ALL").fetchall()
        priced = con.execute("SELECT bool_and(priced) FROM cost_daily").fetchone()
    finally:
        con.close()
    assert meta["prices"] == "genai-prices 999.0"
    assert models == [("claude", "claude-opus-4-6"), ("codex", "gpt-5.4")], "every model of usage is looked up again"
    assert priced == (True,)


def test_an_incremental_loads_price_tables_are_a_whole_builds(tmp_path: Path) -> None:
    # The change knows the models of the usage rows it removes and adds: a model no session uses any more leaves
    # the price tables, a new one is looked up, one still used elsewhere stays; as a build from nothing has them.
    data = tmp_path / "data"
    data.mkdir()
    _publish(data, [_session(Agent("claude"), "c1", "claude-opus-4-6"), _session(Agent("codex"), "x1", "gpt-5.4")])
    warehouse.refresh(data, Store(data), "r1", previous_version=0, replaced=None)

    def tables() -> list[list[tuple[Any, ...]]]:
        con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
        try:
            return [
                con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("price_models", "price_lookups")
            ]
        finally:
            con.close()

    steps = [
        ("r2", 1, _session(Agent("codex"), "x1", "not-a-real-model-7")),  # gpt-5.4 used by no session any more
        ("r3", 2, _session(Agent("codex"), "x1", "gpt-5.4")),  # back: looked up again
        ("r4", 3, _session(Agent("claude"), "c1", "claude-opus-4-6")),  # the same model: nothing changes
    ]
    seen = []
    for run_id, previous, session in steps:
        _publish(data, [session])
        warehouse.refresh(
            data, Store(data), run_id, previous_version=previous, replaced={session.agent: {session.session_id}}
        )
        changed = tables()
        warehouse.warehouse_path(data).unlink()  # the same version built from nothing
        warehouse.refresh(data, Store(data), f"{run_id}-whole", previous_version=previous + 1, replaced=None)
        assert changed == tables(), run_id
        seen.append({model for _, model, *_ in changed[1]})
    assert seen[0] == {"claude-opus-4-6", "not-a-real-model-7"}
    assert seen[1] == seen[2] == {"claude-opus-4-6", "gpt-5.4"}


def test_a_whole_build_reads_the_prices_an_earlier_build_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cache"
    (folder.parent).mkdir(exist_ok=True)
    folder.mkdir()
    (folder / "prices-0.0.1.arrow").write_bytes(b"an older version's file")
    first = prices.cached_price_table(folder)
    assert [p.name for p in folder.iterdir()] == [f"prices-{genai_prices.__version__}.arrow"], "the old one goes"
    assert oct((folder / f"prices-{genai_prices.__version__}.arrow").stat().st_mode & 0o777) == "0o600"

    def no_rebuild() -> Any:
        raise AssertionError("the kept file must be read, not the package's data again")

    monkeypatch.setattr(prices, "price_table", no_rebuild)
    again = prices.cached_price_table(folder)
    assert again.equals(first) and again.num_rows > 100
    (folder / f"prices-{genai_prices.__version__}.arrow").write_bytes(b"damaged")
    monkeypatch.undo()
    assert prices.cached_price_table(folder).equals(first), "a damaged file is rebuilt"


def test_a_whole_build_matches_models_an_earlier_build_matched_without_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    models = [("claude", "claude-opus-4-6"), ("codex", "gpt-5-codex"), ("opencode", "no-such-model-xyz")]
    (tmp_path / "cache").mkdir()
    (folder / "price-matches-0.0.1.json").write_text("{}")
    (folder / f"price-matches-{genai_prices.__version__}.json").write_text("{}")  # an earlier matcher's answers
    first = prices.price_models(models, folder)
    assert first.num_rows == 2  # the unknown model is unmatched
    kept = folder / f"price-matches-{genai_prices.__version__}-m{prices.MATCHER_VERSION}.json"
    assert [p.name for p in folder.iterdir()] == [kept.name], "another version's answers go"
    assert oct(kept.stat().st_mode & 0o777) == "0o600"

    def no_snapshot(model: str, provider: str | None) -> Any:
        raise AssertionError(f"{model}: the kept answer must be used, matched or not")

    monkeypatch.setattr(prices, "_match", no_snapshot)
    assert prices.price_models(models, folder).equals(first)
    with pytest.raises(AssertionError, match=r"gemini-2\.5-pro"):
        prices.price_models([*models, ("gemini", "gemini-2.5-pro")], folder)  # a model not asked before is matched
    kept.write_text('{"claude\\tclaude-opus-4-6": "damaged"')
    monkeypatch.undo()
    assert prices.price_models(models, folder).equals(first), "a damaged file is matched again"


@pytest.mark.parametrize(
    ("model", "hint", "want"),
    [
        ("anthropic/claude-sonnet-4-5", None, ("anthropic", "claude-sonnet-4-5")),
        ("gemini/gemini-2.5-flash", None, ("google", "gemini-2.5-flash")),
        ("openrouter/anthropic/claude-3.7-sonnet", None, ("openrouter", "anthropic/claude-3.7-sonnet")),
        ("claude-sonnet-4.6", None, ("anthropic", "claude-sonnet-4-6")),  # dotted versions (Copilot CLI)
        ("acme/not-a-model-anyone-sells", None, None),  # still unpriced: NULL cost, never 0
    ],
)
def test_provider_prefixed_model_names_are_priced_under_their_provider(
    model: str, hint: str | None, want: tuple[str, str] | None
) -> None:
    assert prices._match(model, hint) == want
