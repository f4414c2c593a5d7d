"""The Python API (`from transcripts import open_corpus`): polars LazyFrames over one pinned Parquet snapshot, the
views polars expresses equal to the warehouse's, `to_duckdb()` for the rest, and the recipes of docs/mcp.md run."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from sinks.store import Store
from tests.test_warehouse_views import load_sample
from transcripts import Corpus, NoCorpus, open_corpus

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("api") / "data"
    load_sample(data, "UTC")
    return data


@pytest.fixture
def corpus(data: Path) -> Iterator[Corpus]:
    with open_corpus(data) as c:
        yield c


def warehouse_rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal | float) or (isinstance(value, int) and not isinstance(value, bool)):
        return round(float(value), 9)
    if isinstance(value, list):
        return sorted(value)
    return value


def rows(frame: pl.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(_plain(v) for v in r) for r in frame.select(columns).iter_rows()), key=lambda r: tuple(map(str, r))
    )


def test_every_table_is_a_lazy_frame_with_the_warehouses_rows(corpus: Corpus, data: Path) -> None:
    for name in ("sessions", "turns", "tool_calls", "usage", "session_links", "sources", "rejects", "runs"):
        frame = corpus.table(name)
        assert isinstance(frame, pl.LazyFrame)
        count = frame.select(pl.len()).collect().item()
        assert count == warehouse_rows(data, f"SELECT count(*) FROM {name}")[0][0], name
    per_agent = dict(corpus.turns.group_by("agent").len().collect().iter_rows())
    assert per_agent == dict(warehouse_rows(data, "SELECT agent, count(*) FROM turns GROUP BY 1"))
    with pytest.raises(KeyError, match="no table"):
        corpus.table("nope")


def test_the_views_in_polars_equal_the_warehouses(corpus: Corpus, data: Path) -> None:
    daily = ["day", "agent", "sessions", "new_sessions", "prompts", "responses", "tool_calls"]
    assert rows(corpus.daily_activity("UTC").collect(), daily) == sorted(
        (tuple(_plain(v) for v in r) for r in warehouse_rows(data, f"SELECT {', '.join(daily)} FROM daily_activity")),
        key=lambda r: tuple(map(str, r)),
    )
    tools = ["agent", "tool_name", "calls", "errors", "unknown", "error_rate", "sessions", "first_used", "last_used"]
    assert rows(corpus.tool_usage().collect(), tools) == sorted(
        (tuple(_plain(v) for v in r) for r in warehouse_rows(data, f"SELECT {', '.join(tools)} FROM tool_usage")),
        key=lambda r: tuple(map(str, r)),
    )
    costs = [
        "session_id",
        "agent",
        "models",
        "responses",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "computed_cost_usd",
        "reported_cost_usd",
        "priced",
        "unpriced_responses",
    ]
    assert rows(corpus.session_costs().collect(), costs) == sorted(
        (tuple(_plain(v) for v in r) for r in warehouse_rows(data, f"SELECT {', '.join(costs)} FROM session_costs")),
        key=lambda r: tuple(map(str, r)),
    )


def test_to_duckdb_has_every_view_of_the_warehouse(corpus: Corpus, data: Path) -> None:
    con = corpus.to_duckdb("UTC")
    try:
        for view in ("cost_daily", "model_usage", "project_activity", "session_costs", "turn_context"):
            assert sorted(map(str, con.sql(f"FROM {view}").fetchall())) == sorted(
                map(str, warehouse_rows(data, f"FROM {view}"))
            ), view
    finally:
        con.close()


def _recipes() -> list[str]:
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split("### Recipes", 1)[1]
    return re.findall(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)


def test_the_recipes_of_the_docs_run(corpus: Corpus) -> None:
    recipes = _recipes()
    assert len(recipes) == 3
    names: dict[str, Any] = {"pl": pl, "corpus": corpus}
    for code in recipes:
        exec(code, names)
    weekly, longest, failures = names["weekly"], names["longest"], names["failures"]
    assert weekly.height >= 3 and {"week", "model", "output_tokens"} <= set(weekly.columns)
    assert longest["turn_count"].to_list() == sorted(longest["turn_count"].to_list(), reverse=True)
    assert set(failures["agent"]) >= {"claude", "codex"} and failures["calls"].sum() >= 5


def test_an_open_corpus_keeps_its_snapshot_while_runs_commit_and_clean_up(data: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(data, copy, symlinks=True)
    store = Store(copy)
    first = store.current()
    assert first is not None
    corpus = open_corpus(copy)
    turns = corpus.turns.select(pl.len()).collect().item()
    # Two runs commit: each publishes a version with one session fewer and cleans up (current and previous kept).
    for number in (2, 3):
        version = copy / "versions" / f"v{number:06d}"
        shutil.copytree(first, version, ignore=shutil.ignore_patterns(".readers"))
        for part in (version / "turns").rglob("*.parquet"):
            pl.read_parquet(part).head(0).write_parquet(part)
        os.replace(_link(copy, version), copy / "parquet")
        store.cleanup()
    assert first.is_dir(), "cleanup removed a version an open corpus reads"
    assert corpus.turns.select(pl.len()).collect().item() == turns
    assert open_corpus(copy).turns.select(pl.len()).collect().item() == 0  # a new one sees the newest
    corpus.close()
    store.cleanup()
    assert not first.exists(), "a closed corpus lets cleanup go on"


def _link(data: Path, version: Path) -> Path:
    swap = data / "parquet.new"
    swap.symlink_to(Path("versions") / version.name)
    return swap


def test_no_corpus_yet_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(NoCorpus, match="transcripts run"):
        open_corpus(tmp_path / "none")
