"""Whole-JSON documents cut short behave like a partial JSONL tail; an empty Grok history is no_conversation.

A fresh document that ends early (mtime within settle_seconds) is being written: deferred (write_in_progress).
An old one is rejected as truncated_tail. One broken before its end is invalid_json, fresh or not. Every case has a
good session beside it that still loads.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from extractors.bounded import Limits, ends_early
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Loaded, Outcome, Rejected
from tests.corpus import grok_session
from tests.opencode_support import T0, assistant, storage_session, text, user
from tests.support import outcomes_under

FRESH = Limits(settle_seconds=600.0)
GOOD_GROK = "019f6851-7ec4-7ef0-97d3-03f3eee38755"
BAD_GROK = "019f6851-7ec4-7ef0-97d3-03f3eee38756"


def age(path: Path, seconds: float) -> None:
    """Make the file `seconds` old."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def cut(path: Path, keep: float = 0.6) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * keep)])


def only(outcomes: dict[str, list[Outcome]], suffix: str) -> Outcome:
    [key] = [k for k in outcomes if k.endswith(suffix)]
    [outcome] = outcomes[key]
    return outcome


def assert_outcome(outcome: Outcome, fresh: bool) -> None:
    if fresh:
        assert isinstance(outcome, Deferred), outcome
        assert outcome.code is DeferCode.WRITE_IN_PROGRESS
    else:
        assert isinstance(outcome, Rejected), outcome
        assert outcome.code is RejectCode.TRUNCATED_TAIL


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"", True),
        (b'{"a": [1, 2', True),
        (b'{"a": "cut', True),
        (b'{"a": tr', True),
        (b'{"a": nul', True),
        (b'{"a": 12', True),
        (b'{"a": 1.', True),
        (b'{"a": 1.5e', True),
        (b'{"a": 1e+', True),
        (b'{"a": -', True),
        ('{"a": "caf\u00e9'.encode()[:-1], True),  # inside a UTF-8 sequence
        (b'{"a": "x" oops}', False),
        (b"{} {}", False),
        (b'{"a": \xff}', False),
        (b'{"a": trux}', False),
        (b'{"a": 1.x}', False),
    ],
)
def test_ends_early(raw: bytes, expected: bool) -> None:
    assert ends_early(raw) is expected


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "old"])
def test_a_gemini_json_cut_short(tmp_path: Path, fresh: bool) -> None:
    chats = tmp_path / "proj" / "chats"
    chats.mkdir(parents=True)
    meta = {"sessionId": "s-good", "projectHash": "ab" * 32, "startTime": "2026-01-02T03:04:05.000Z"}
    message = {"id": "u1", "timestamp": "2026-01-02T03:05:00.000Z", "type": "user", "content": "a question"}
    for name, sid in (("session-2026-01-02T03-04-good.json", "s-good"), ("session-2026-01-02T03-04-bad.json", "s-bad")):
        (chats / name).write_text(json.dumps({**meta, "sessionId": sid, "messages": [message]}))
        age(chats / name, 3600)
    cut(chats / "session-2026-01-02T03-04-bad.json")
    age(chats / "session-2026-01-02T03-04-bad.json", 1 if fresh else 3600)
    found = outcomes_under(Agent("gemini"), tmp_path, FRESH)
    assert_outcome(only(found, "bad.json"), fresh)
    assert isinstance(only(found, "good.json"), Loaded)


EXCHANGE = [
    ("msg_1", user(T0), [("prt_1", text("hello"))]),
    ("msg_2", assistant(T0 + 1000), [("prt_2", text("hi!"))]),
]


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "old"])
@pytest.mark.parametrize("which", ["session", "message", "part"])
def test_an_opencode_storage_file_cut_short(tmp_path: Path, fresh: bool, which: str) -> None:
    storage = tmp_path / "storage"
    storage_session(storage, "ses_good", [(f"g{m}", d, [(f"g{p}", pd) for p, pd in ps]) for m, d, ps in EXCHANGE])
    session_file = storage_session(storage, "ses_bad", EXCHANGE)
    target = {
        "session": session_file,
        "message": storage / "message" / "ses_bad" / "msg_2.json",
        "part": storage / "part" / "msg_2" / "prt_2.json",
    }[which]
    for path in storage.rglob("*.json"):
        age(path, 3600)
    cut(target)
    age(target, 1 if fresh else 3600)
    found = outcomes_under(Agent("opencode"), tmp_path, FRESH)
    assert_outcome(only(found, "ses_bad.json"), fresh)
    good = only(found, "ses_good.json")
    assert isinstance(good, Loaded) and len(good.session.turns) == 2


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "old"])
def test_a_grok_summary_cut_short(tmp_path: Path, fresh: bool) -> None:
    grok_session(tmp_path, GOOD_GROK, 1)
    bad = grok_session(tmp_path, BAD_GROK, 1)
    for path in (tmp_path / ".grok").rglob("*.json*"):
        age(path, 3600)
    cut(bad / "summary.json")
    age(bad / "summary.json", 1 if fresh else 3600)
    found = outcomes_under(Agent("grok"), tmp_path / ".grok", FRESH)
    assert_outcome(only(found, f"{BAD_GROK}/chat_history.jsonl"), fresh)
    assert isinstance(only(found, f"{GOOD_GROK}/chat_history.jsonl"), Loaded)


def test_a_document_broken_before_its_end_is_invalid_json_even_when_fresh(tmp_path: Path) -> None:
    grok_session(tmp_path, GOOD_GROK, 1)
    bad = grok_session(tmp_path, BAD_GROK, 1)
    (bad / "summary.json").write_text('{"created_at": "2026-07-31T10:13:27Z" oops}')
    found = outcomes_under(Agent("grok"), tmp_path / ".grok", FRESH)
    outcome = only(found, f"{BAD_GROK}/chat_history.jsonl")
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.INVALID_JSON


@pytest.mark.parametrize("content", ["", '{"type": "system", "content": "You are Grok."}\n'], ids=["empty", "system"])
def test_an_empty_grok_history_is_no_conversation(tmp_path: Path, content: str) -> None:
    grok_session(tmp_path, GOOD_GROK, 1)
    bad = grok_session(tmp_path, BAD_GROK, 1)
    (bad / "chat_history.jsonl").write_text(content)
    found = outcomes_under(Agent("grok"), tmp_path / ".grok")
    outcome = only(found, f"{BAD_GROK}/chat_history.jsonl")
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION
    assert outcome.session_hint == f"grok-{BAD_GROK}"
    good = only(found, f"{GOOD_GROK}/chat_history.jsonl")
    assert isinstance(good, Loaded) and len(good.session.turns) == 2
