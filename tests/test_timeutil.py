"""Source times: `parse_iso` reads what `datetime.fromisoformat` reads whole as its careful reading would."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extractors.timeutil import _parse_iso_carefully, parse_iso


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-02-10T21:11:56.846Z", datetime(2026, 2, 10, 21, 11, 56, 846000, tzinfo=UTC)),
        ("2026-02-10T21:11:56.846z", datetime(2026, 2, 10, 21, 11, 56, 846000, tzinfo=UTC)),
        ("2026-02-10T21:11:56.846123456Z", datetime(2026, 2, 10, 21, 11, 56, 846123, tzinfo=UTC)),
        (" 2026-02-10T21:11:56Z\n", datetime(2026, 2, 10, 21, 11, 56, tzinfo=UTC)),
        ("2026-02-10T23:11:56+02:00", datetime(2026, 2, 10, 21, 11, 56, tzinfo=UTC)),
        ("2026-02-10T21:11:56", datetime(2026, 2, 10, 21, 11, 56, tzinfo=UTC)),
    ],
)
def test_an_iso_time_is_read_as_utc(text: str, expected: datetime) -> None:
    assert parse_iso(text) == expected
    assert parse_iso(text).tzinfo == UTC  # type: ignore[union-attr]


@pytest.mark.parametrize("text", ["", "yesterday", "1970-01-01T00:00:00Z", "2300-01-01T00:00:00Z", "2026-13-01"])
def test_an_unusable_time_is_none(text: str) -> None:
    assert parse_iso(text) is None


def test_a_time_that_is_not_a_string_is_none() -> None:
    assert parse_iso(1770757916) is None
    assert parse_iso(None) is None


_DIGITS = st.text(alphabet="0123456789", min_size=0, max_size=12)
_TIMELIKE = st.builds(
    lambda pad1, date, sep, time, mark, fraction, zone, pad2: (
        f"{pad1}{date}{sep}{time}{mark + fraction if mark else ''}{zone}{pad2}"
    ),
    st.sampled_from(["", " ", "\t"]),
    st.sampled_from(
        [
            "2026-02-10",
            "20260210",
            "2026-W07-2",
            "2026-02-30",
            "1989-12-31",
            "2199-12-31",
            "2026-2-1",
            "0001-01-01",
            "9999-12-31",
        ]
    ),
    st.sampled_from(["T", " ", "t", "_"]),
    st.sampled_from(["21:11:56", "211156", "21:11", "24:00:00", "23:59:60", "21"]),
    st.sampled_from(["", ".", ","]),
    _DIGITS,
    st.sampled_from(["", "Z", "z", "+00:00", "-00:00", "+05:30", "-0800", "+14:00", "+00:00:30", "+24:00", "UTC"]),
    st.sampled_from(["", " ", "\n"]),
)


@given(st.one_of(_TIMELIKE, st.text(alphabet="0123456789-:T.Z+ ,zW\n", max_size=40)))
def test_the_quick_reading_gives_what_the_careful_reading_gives(text: str) -> None:
    assert parse_iso(text) == _parse_iso_carefully(text)
