"""Parsing source times into aware UTC datetimes. Never reads the clock."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

# Years outside this range are corrupt values (a ms epoch read as seconds, 0, ...), not usable times.
_MIN = datetime(1990, 1, 1, tzinfo=UTC)
_MAX = datetime(2200, 1, 1, tzinfo=UTC)


def in_range(value: datetime) -> datetime | None:
    """An aware time when it lies in the usable years (the check every parser here makes), else None."""
    return value if _MIN <= value < _MAX else None


def parse_iso(value: Any) -> datetime | None:
    """An ISO-8601 / RFC 3339 string (`2026-02-10T21:11:56.846Z`, `+00:00`, 6-9 fractional digits) -> UTC.

    A string without a zone is taken as UTC. Returns None for anything unusable.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        # Most times arrive as `datetime.fromisoformat` reads them whole (`...Z` included, since 3.11): 1.0 us
        # instead of 2.5 for the careful reading below, once per record. Where it reads a string, it reads it as
        # that reading would (tests/test_timeutil.py); what it refuses goes on to it.
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return _parse_iso_carefully(value)
    if parsed.tzinfo is UTC:  # `...Z` and `+00:00`: _utc's result without its calls (astimezone returns `parsed`)
        return parsed if _MIN <= parsed < _MAX else None
    return _utc(parsed)


def _parse_iso_carefully(value: str) -> datetime | None:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Cut nanoseconds: the 3.11.7-3.13 seen here truncate them themselves, but not every Python does.
    if "." in text:
        head, _, tail = text.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        if digits > 6:
            text = f"{head}.{tail[:6]}{tail[digits:]}"
    try:
        return _utc(datetime.fromisoformat(text))
    except ValueError:
        return None


def _utc(parsed: datetime) -> datetime | None:
    """A parsed time in UTC (one without a zone is UTC), or None outside the usable years."""
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return in_range(parsed.astimezone(UTC))
    except OverflowError:  # year 1 east of UTC, or 9999 west of it: no UTC time to give (and unusable anyway)
        return None


def _finite(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else, NaN, infinities and ints beyond float range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # a 400-digit int raises OverflowError here, not in the caller
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def from_epoch_seconds(value: Any) -> datetime | None:
    """Float or int seconds since the epoch (ChatGPT `create_time`) -> UTC; None when null or absurd."""
    seconds = _finite(value)
    if seconds is None:
        return None
    try:
        return in_range(datetime.fromtimestamp(seconds, tz=UTC))
    except (OverflowError, OSError, ValueError):
        return None


# Integer milliseconds a second or more inside the usable years: converted without the checks, which they pass.
_MS_INSIDE = (int(_MIN.timestamp()) * 1000 + 1000, int(_MAX.timestamp()) * 1000 - 1000)


def from_epoch_ms(value: Any) -> datetime | None:
    """Integer milliseconds since the epoch (OpenCode `time_created`) -> UTC; None when null or absurd."""
    if type(value) is int and _MS_INSIDE[0] <= value <= _MS_INSIDE[1]:  # the usual case, as the general one
        return datetime.fromtimestamp(value / 1000.0, tz=UTC)
    millis = _finite(value)
    return None if millis is None else from_epoch_seconds(millis / 1000.0)


def parse_any(value: Any) -> datetime | None:
    """A time in whichever form a source wrote it: ISO string, epoch seconds or epoch milliseconds."""
    if isinstance(value, str):
        return parse_iso(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return from_epoch_ms(value) if abs(value) > 1e11 else from_epoch_seconds(value)
    return None
