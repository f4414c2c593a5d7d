"""A ChatGPT export cut short while it changed within the settle time is being downloaded: deferred whole and
read again next run, as a JSONL file's partial last line is; cut short and older, its tail is `truncated_tail`
(issue 14, "also seen")."""

from __future__ import annotations

from pathlib import Path

import orjson

from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Rejected
from tests.support import SETTLED, read_one
from tests.test_chatgpt import conversation, text


def _cut_export(tmp_path: Path) -> Path:
    whole = orjson.dumps([conversation([text("user", "one")], cid="a"), conversation([text("user", "two")], cid="b")])
    path = tmp_path / "conversations.json"
    path.write_bytes(whole[: len(whole) - 40])
    return path


def test_defer_write_in_progress_for_a_fresh_export_cut_short(tmp_path: Path) -> None:
    found = read_one(Agent("chatgpt"), _cut_export(tmp_path), Limits(settle_seconds=600))
    assert isinstance(found[-1], Deferred) and found[-1].code is DeferCode.WRITE_IN_PROGRESS
    assert "ends early" in found[-1].detail


def test_reject_truncated_tail_for_an_old_export_cut_short(tmp_path: Path) -> None:
    found = read_one(Agent("chatgpt"), _cut_export(tmp_path), SETTLED)
    assert isinstance(found[-1], Rejected) and found[-1].code is RejectCode.TRUNCATED_TAIL
