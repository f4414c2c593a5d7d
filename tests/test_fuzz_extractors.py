"""Fuzzing every extractor: hostile bytes and fields give a classified outcome, bounded, and the good session loads.

`TRANSCRIPTS_FUZZ_EXAMPLES` sets the examples per test (60 by default, for CI); see docs/contributing.md "Fuzzing". A
crash that is a known open bug (`fuzz_support.KNOWN_OPEN`, fixed on another branch) makes the test xfail naming it; any
other crash, a lost good session or a memory or time overrun fails it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extractors.bounded import Limits
from tests.fuzz_support import (
    FORMATS,
    FUZZ,
    KnownBug,
    build,
    check_case,
    hostile_files,
    known_open,
    resident_peak,
    short_crash,
    short_recursion,
)

NAMES = sorted(FORMATS)


@pytest.mark.parametrize("name", NAMES)
def test_valid_documents_of_every_format_load(name: str) -> None:
    """The unmutated target loads: the mutations start from a valid session, so a rejection is theirs."""
    fmt = FORMATS[name]
    docs = fmt.docs()
    with tempfile.TemporaryDirectory() as tmp:
        case = build(fmt, Path(tmp), {n: d.dump() for n, d in docs.items()}, field=True)
        outcomes = check_case(case)
    assert [type(o).__name__ for o in outcomes] == ["Loaded"] * (1 + len(case.beside)), outcomes


def test_the_memory_check_sees_memory_that_is_used() -> None:
    with resident_peak() as peak:
        block = bytearray(64 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    assert peak.grew >= 60 * 1024 * 1024, peak
    del block


def _fuzz(name: str, *, field: bool) -> None:
    fmt = FORMATS[name]
    hits: list[KnownBug] = []

    @FUZZ
    @given(data=st.data(), fresh=st.booleans())
    def one(data: st.DataObject, fresh: bool) -> None:
        files, how = data.draw(hostile_files(fmt, field=field), label="mutation")
        with tempfile.TemporaryDirectory() as tmp:
            case = build(fmt, Path(tmp), files, field=field, described=how)
            try:
                check_case(case, Limits() if fresh else Limits(settle_seconds=0.0))
            except Exception as exc:
                bug = known_open(exc)
                if bug is None and isinstance(exc, RecursionError):
                    raise short_recursion(exc) from None
                if bug is None:
                    raise
                hits.append(bug)

    try:
        one()
    except Exception as exc:  # told in lines, with Hypothesis' falsifying example (see test_fuzz_regressions._crash)
        notes = "\n".join(getattr(exc, "__notes__", []))
        shown = short_crash(exc)
        pytest.fail(f"{type(exc).__name__}: {str(shown)[:2000]}\n{notes[:4000]}", pytrace=False)
    if hits:
        pytest.xfail(
            "hit known open bugs only: " + "; ".join(sorted({f"{b.name} ({b.owner}, {b.file})" for b in hits}))
        )


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_wrong_or_hostile_value_in_any_field(name: str) -> None:
    _fuzz(name, field=True)


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_truncated_spliced_or_arbitrary_bytes(name: str) -> None:
    _fuzz(name, field=False)
