"""Finding a Grok subagent's parent costs one listing of its bucket, not one per sibling (issue 12: thousands of
sessions of one project folder made the lookup quadratic)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from extractors import grok
from extractors.model import Loaded
from extractors.registry import read_source
from tests.support import SETTLED
from tests.test_grok import SID, session_dir, summary, user


def _child(n: int) -> str:
    return f"019f6852-0000-7000-8000-{n:012d}"


def test_every_subagent_of_a_big_bucket_finds_its_parent_with_one_listing_of_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = session_dir(tmp_path, [user("spawn helpers")], summary())
    children = [_child(n) for n in range(40)]
    for child in children:
        (parent / "subagents" / child).mkdir(parents=True)
        (parent / "subagents" / child / "meta.json").write_text(json.dumps({"parent_session_id": SID}))
        session_dir(tmp_path, [user(f"job {child}")], summary(native=child, session_kind="subagent"), native=child)
    grok._SUBAGENT_INDEX.clear()
    bucket = parent.parent
    sources = list(grok.discover(tmp_path))
    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(grok.os, "scandir", counting_scandir)
    read = [o for source in sources for o in read_source(source, SETTLED)]
    found = {o.session.session_id: o.session for o in read if isinstance(o, Loaded)}
    assert len(found) == len(children) + 1
    assert all(found[f"grok-{c}"].parent_session_id == f"grok-{SID}" for c in children)
    assert listed.count(os.fspath(bucket)) == 1, "the bucket is listed once for all its subagents"
