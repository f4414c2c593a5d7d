"""Numbers from untrusted sources: what fits a column, and the census key for what did not (pure, no I/O).

A token count must be an integer within int64 and a cost a finite float64: these are the Arrow column types.
Integer literals past 64 bits reach the readers as floats (the JSON fast path parses them so: `1e+29` for a
30-digit literal), so a whole-valued float counts as the integer it stands for (`integral`).
A value outside them (`2**63`, a 30-digit literal, `1e400`, `NaN`) is stored null, never a crash, and counted under
`OUT_OF_RANGE` in the session's census (`record_kinds` kind `usage/out_of_range`, disposition `metadata`): its
count is the number of fields nulled, not of records.

A reader checks a count's range where it reads it (`token_count`), before deriving anything from it: Gemini's
uncached prompt `2**63 - 11,502` fits int64 although `2**63` does not, and was stored, so that the warehouse's
`input + cache_read` overflowed. What a reader derives from in-range counts (a difference, a sum of steps) can still
leave int64: `transforms.normalize` checks every stored count again (`fit_int`).
"""

from __future__ import annotations

import math
from typing import Any

from extractors.model import Disposition

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
OUT_OF_RANGE_KIND = "usage/out_of_range"
OUT_OF_RANGE = (OUT_OF_RANGE_KIND, "", Disposition.METADATA)


def fit_int(value: Any) -> tuple[int | None, bool]:
    """(value, False) when it is None or an int within int64, else (None, True): out of range."""
    if value is None:
        return None, False
    if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return value, False
    return None, True


def fit_float(value: Any) -> tuple[float | None, bool]:
    """(value as a float, False) when it is None or a finite float64, else (None, True): out of range."""
    if value is None:
        return None, False
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, True
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return None, True
    return (number, False) if math.isfinite(number) else (None, True)


def whole_number(value: Any) -> tuple[int | None, bool]:
    """A JSON number read as a count: (int, False) for an int or a finite float (truncated), (None, False) for
    anything that is not a number, and (None, True) for NaN or an infinity (`1e400`), which no count can be.
    Large values are returned as they are: `fit_int` decides whether they fit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, False
    if isinstance(value, float) and not math.isfinite(value):
        return None, True
    return int(value), False


def integral(value: Any) -> tuple[int | None, bool]:
    """A count that must be whole: (int, False) for an int or a whole-valued finite float (an integer literal past
    64 bits, as the JSON fast path hands it over), (None, True) for NaN or an infinity, (None, False) for anything
    else (not a number, or a fraction: the reader decides what that means)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, False
    if isinstance(value, int):
        return value, False
    if not math.isfinite(value):
        return None, True
    return (int(value), False) if value.is_integer() else (None, False)


def token_count(value: Any) -> tuple[int | None, bool]:
    """A token count as a reader reads it: (int, False) for a number within int64 (a finite float truncated, as
    `whole_number`), (None, False) for anything that is not a number, and (None, True) for NaN, an infinity or a
    number past int64 (`2**63`, a 30-digit literal): out of range, to be counted in the census by the caller."""
    number, out_of_range = whole_number(value)
    return (None, True) if out_of_range else fit_int(number)
