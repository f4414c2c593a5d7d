"""`sinks.manifest._rows_of`: each discovered path's manifest row, found from a hash of the few listed sources (a run
whose other sources are in quiet folders) or of every path, is the row `pc.index_in` finds: the first with that
path, or None."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sinks.manifest import _rows_of


@pytest.mark.parametrize("listed_count", [0, 1, 5, 200, 900])
def test_each_listed_path_gets_its_first_row_or_none(listed_count: int) -> None:
    rng = random.Random(listed_count)
    rows = [f"/home/u/.claude/projects/p{i % 40}/{i:05d}.jsonl" for i in range(1000)]
    twice = rng.sample(rows, 30)  # paths twice (never in a manifest the store writes, but defined all the same)
    rows += twice
    paths = pa.chunked_array([rows[:700], rows[700:]], pa.string())
    known = twice[: (listed_count + 1) // 2] + rng.sample(rows, max(0, listed_count // 2 - 30))
    listed = known + [f"/new/{i}.jsonl" for i in range(listed_count - len(known))]
    rng.shuffle(listed)
    wanted = pc.index_in(pa.array(listed, pa.string()), value_set=paths).to_pylist()
    assert _rows_of(pa.array(listed, pa.string()), paths) == wanted
    assert all(w is None or rows[w] == path for w, path in zip(wanted, listed, strict=True))


def test_the_bucket_layout_counts_a_source_read_again_at_its_new_size_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Plan.bucket_layout`: each partition sized by its sources' bytes, the manifest's rows less those this run
    reads again, plus what this run reads (a changed source at its new size, not its old size too); never fewer
    buckets than the partition has."""
    from extractors.model import Agent, Source
    from sinks.manifest import Manifest, Plan, source_row, source_table

    monkeypatch.setattr("sinks.store.BUCKET_BYTES", 1000)
    old = [
        Source(Agent("claude"), "/c/one.jsonl", 2000, 1),
        Source(Agent("claude"), "/c/two.jsonl", 1000, 1),
        Source(Agent("codex"), "/x/one.jsonl", 500, 1),
    ]
    rows = [source_row(s, content_sha256=None, parser_version="1", loaded=1, rejected=0, deferred=False) for s in old]
    plan: Plan[Source] = Plan(manifest=Manifest(source_table(rows)))
    plan.changed.append(Source(Agent("claude"), "/c/one.jsonl", 2500, 2))  # 2,500 + 1,000 bytes: 4 buckets
    plan.new.append(Source(Agent("codex"), "/x/two.jsonl", 700, 2))  # 1,200 bytes: 2, fewer than it has
    assert plan.bucket_layout({"claude": 1, "codex": 4}) == {"claude": 4, "codex": 4}
    assert plan.bucket_layout({}) == {"claude": 4, "codex": 2}


def test_a_quiet_folders_rows_are_unchanged_unless_deferred_of_an_old_parser_or_of_an_agent_not_run() -> None:
    """`_quiet_rows`: the present rows of a quiet folder are counted unchanged by agent, except those a run must
    read again (from the row, as discovery would have made the source): deferred, or read by a parser version that
    is not the agent's current one, or of an agent with no current version; rows outside the quiet mask are not
    looked at."""
    from extractors.model import Agent, Source
    from sinks.manifest import Plan, _quiet_rows, source_row, source_table

    def row(agent: str, name: str, version: str = "2", deferred: bool = False) -> dict[str, object]:
        source = Source(Agent(agent), f"/q/{agent}/{name}", 10, 1)
        return source_row(source, content_sha256=None, parser_version=version, loaded=1, rejected=0, deferred=deferred)

    rows = [
        row("claude", "a"),
        row("claude", "b"),
        row("claude", "deferred", deferred=True),
        row("claude", "old", version="1"),
        row("codex", "a", version="7"),
        row("gemini", "a"),  # no current version given: read again
        row("claude", "listed", version="1"),  # not in the quiet mask
    ]
    table = source_table(rows)
    in_quiet = pa.array([True] * 6 + [False])
    plan: Plan[str] = Plan()
    _quiet_rows(plan, table, in_quiet, {"claude": "2", "codex": "7"}, lambda r: str(r["source_path"]))
    assert plan.quiet == {"claude": 2, "codex": 1}
    assert sorted(plan.changed) == ["/q/claude/deferred", "/q/claude/old", "/q/gemini/a"]
    assert plan.previous["/q/claude/old"].parser_version == "1"
    assert plan.previous["/q/claude/deferred"].outcome == "deferred"
    counted: Plan[str] = Plan()
    _quiet_rows(counted, table, in_quiet, {"claude": "2"}, None)  # no way to read again: every quiet row counts
    assert counted.quiet == {"claude": 4, "codex": 1, "gemini": 1} and counted.changed == []
