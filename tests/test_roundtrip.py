"""Round trip: Session -> Arrow rows -> Parquet snapshot -> DuckDB gives the same rows back (Hypothesis)."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.model import Agent, Disposition, Loaded, Role, Session, Source, ToolCall, Turn, Usage
from sinks import warehouse
from sinks.store import FileKey, NextVersion, Store
from transforms import ids
from transforms.normalize import session_tables
from transforms.redact import Redactor

START = datetime(2026, 1, 1, tzinfo=UTC)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
moments = st.one_of(st.none(), st.integers(0, 10**6).map(lambda s: START + timedelta(seconds=s)))


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    native = draw(st.uuids()).hex
    sid = ids.session_id(Agent("claude"), native)
    indices = sorted(draw(st.sets(st.integers(0, 500), max_size=6)))
    turns = tuple(
        Turn(i, draw(st.sampled_from(list(Role))), draw(texts), draw(moments), draw(st.one_of(st.none(), texts)))
        for i in indices
    )
    calls = tuple(
        ToolCall(
            f"c{n}",
            i,
            draw(texts),
            draw(st.one_of(st.none(), texts)),
            draw(st.one_of(st.none(), texts)),
            draw(st.one_of(st.none(), st.booleans())),
            draw(moments),
            draw(moments),
        )
        for n, i in enumerate(indices[:3])
    )
    usage = tuple(Usage(i, "m", draw(st.integers(0, 10**9)), draw(st.integers(0, 10**6))) for i in indices[:2])
    inferred = draw(st.booleans())
    ses = Session(
        Agent("claude"), sid, native, START, started_at_inferred=inferred, turns=turns, tool_calls=calls, usage=usage
    )
    ses.census[("user", "2.1", Disposition.TURN)] = len(turns)
    return ses


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sessions(), min_size=1, max_size=4, unique_by=lambda s: s.session_id))
def test_rows_survive_parquet_and_duckdb_unchanged(batch: list[Session]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        source = Source(Agent("claude"), "/x/s.jsonl", 1, 1)
        tables = session_tables([Loaded(source, s) for s in batch], {Agent("claude"): "1"}, Redactor(None))
        store = Store(data)
        version = NextVersion(store, "t")
        buckets = 4
        version.buckets["claude"] = buckets
        for name, table in tables.items():
            for bucket in range(buckets):
                in_bucket = [ids.bucket_of(s, buckets) == bucket for s in table.column("session_id").to_pylist()]
                part = table.filter(pa.array(in_bucket, pa.bool_()))
                if part.num_rows:
                    version.put(FileKey(name, "claude", bucket), part)
        version.publish()
        warehouse.refresh(data, store, "t", previous_version=0, replaced=None)
        con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
        try:
            for name, table in tables.items():
                got = con.sql(f"SELECT * FROM {name}").to_arrow_table()
                want = table.to_pylist()
                key = lambda row: repr(sorted(row.items()))  # noqa: E731
                assert sorted(got.to_pylist(), key=key) == sorted(want, key=key), name
        finally:
            con.close()
