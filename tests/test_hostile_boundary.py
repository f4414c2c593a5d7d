"""The one boundary: a bug in a reader costs that one source (a `source_unreadable` rejection), not the run."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from extractors.bounded import Limits
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Loaded, Outcome, Rejected, Source
from extractors.registry import UNEXPECTED_PREFIX, extractor, read_source
from tests.support import SETTLED


def _source(tmp_path: Path) -> Source:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("{}\n")
    return Source(Agent("codex"), str(path), 3, 0, str(tmp_path))


def test_an_unexpected_exception_becomes_one_source_unreadable_rejection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_source: Source, _limits: Limits) -> Iterator[Outcome]:
        raise ValueError("a bug")
        yield  # pragma: no cover - makes this a generator like every reader

    monkeypatch.setattr(extractor(Agent("codex")), "read", broken)
    with caplog.at_level(logging.DEBUG, logger="transcripts.extract"):
        outcomes = list(read_source(_source(tmp_path), SETTLED))
    assert len(outcomes) == 1
    [rejected] = outcomes
    assert isinstance(rejected, Rejected)
    assert rejected.code is RejectCode.SOURCE_UNREADABLE
    assert rejected.detail == "unexpected ValueError in the codex reader: a bug"
    assert rejected.detail.startswith(UNEXPECTED_PREFIX)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "reader_bug" in r.getMessage()]
    assert len(errors) == 1 and "ValueError" in errors[0].getMessage()
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records), "the traceback, at debug level"


def test_sessions_yielded_before_the_bug_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source(tmp_path)
    first = Rejected(source, RejectCode.NO_CONVERSATION, "the first session")

    def half(_source: Source, _limits: Limits) -> Iterator[Outcome]:
        yield first
        raise KeyError("later")

    monkeypatch.setattr(extractor(Agent("codex")), "read", half)
    outcomes = list(read_source(source, SETTLED))
    assert outcomes[0] is first
    assert isinstance(outcomes[1], Rejected) and outcomes[1].detail.startswith("unexpected KeyError in the codex")
    assert len(outcomes) == 2


@pytest.mark.parametrize("error", [MemoryError(), KeyboardInterrupt(), SystemExit(3)])
def test_process_level_errors_still_propagate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    def fatal(_source: Source, _limits: Limits) -> Iterator[Outcome]:
        raise error
        yield  # pragma: no cover

    monkeypatch.setattr(extractor(Agent("codex")), "read", fatal)
    with pytest.raises(type(error)):
        list(read_source(_source(tmp_path), SETTLED))


def test_classified_errors_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def rejects(_source: Source, _limits: Limits) -> Iterator[Outcome]:
        raise RejectError(RejectCode.BAD_SHAPE, "shape", line=4)
        yield  # pragma: no cover

    monkeypatch.setattr(extractor(Agent("codex")), "read", rejects)
    [out] = list(read_source(_source(tmp_path), SETTLED))
    assert isinstance(out, Rejected) and (out.code, out.detail, out.line) == (RejectCode.BAD_SHAPE, "shape", 4)
    assert not isinstance(out, Loaded)
