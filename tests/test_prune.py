"""`transcripts prune`: whole families go, only when no member is recent, present at its source, or unselected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sinks.prune import (
    Corpus,
    DurationError,
    Member,
    SourceState,
    families,
    parse_duration,
    plan_prune,
)
from transforms.schema import SESSION_TABLES

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = "2025-11-01"  # seven months before NOW
RECENT = "2026-05-25"  # a week before NOW
P = "dddddddd-0000-4000-8000-000000000010"  # a parent with subagents
K = "eeeeeeee-0000-4000-8000-000000000011"  # an unrelated session
T_OLD = "019e0000-0000-7000-8000-000000000001"  # a Codex thread

SESSION_TABLE_NAMES = [t.name for t in SESSION_TABLES]

# --- the plan, pure --------------------------------------------------------------------------------------------------


def test_families_are_connected_components_through_any_link() -> None:
    edges = [("b-agent-1", "b"), ("c", "b"), ("d", "x-not-in-corpus"), ("e", "d"), ("c", "c")]
    assert families(["a", "b", "b-agent-1", "c", "d", "e", "f"], edges) == [
        ("a",),
        ("b", "b-agent-1", "c"),
        ("d", "e", "x-not-in-corpus"),
        ("f",),
    ]


def _member(sid: str, path: str, day: int, agent: str = "chatgpt") -> Member:
    return Member(sid, agent, path, datetime(2026, 1, day, tzinfo=UTC), 2)


def test_gone_multi_session_source_keeps_its_manifest_row_while_one_session_stays() -> None:
    corpus = Corpus(
        sessions={
            "chatgpt-old": _member("chatgpt-old", "/x/export.json", 1),
            "chatgpt-new": _member("chatgpt-new", "/x/export.json", 30),
            "chatgpt-unknown-source": _member("chatgpt-unknown-source", "/y/not-in-manifest.json", 1),
        },
        edges=(),
        sources={"/x/export.json": SourceState("chatgpt", False, datetime(2026, 1, 30, tzinfo=UTC))},
    )
    plan = plan_prune(corpus, now=datetime(2026, 2, 10, tzinfo=UTC), older_than=timedelta(days=20))
    assert [[m.session_id for m in f] for f in plan.removed] == [["chatgpt-old"]]
    assert plan.sources == (), "the export still holds a kept session"
    later = plan_prune(corpus, now=datetime(2026, 4, 1, tzinfo=UTC), older_than=timedelta(days=20))
    assert {m.session_id for f in later.removed for m in f} == {"chatgpt-old", "chatgpt-new"}
    assert later.sources == (("chatgpt", "/x/export.json"),)
    assert "chatgpt-unknown-source" not in {m.session_id for f in later.removed for m in f}, "no manifest row: present"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("48h", timedelta(hours=48)),
        ("30d", timedelta(days=30)),
        (" 12w ", timedelta(weeks=12)),
        ("6m", timedelta(days=180)),
        ("1y", timedelta(days=365)),
    ],
)
def test_durations_are_read(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("30", "expected a whole number and a unit"),
        ("d", "expected"),
        ("1.5d", "expected"),
        ("-3d", "expected"),
        ("30x", "unknown unit 'x'"),
        ("30D", "unknown unit 'D'"),
        ("0d", "at least 1"),
        ("9" * 30 + "y", "too large"),
    ],
)
def test_bad_durations_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_duration(text)
