"""Codex token usage: cumulative `token_count` totals turned into one Usage row per change.

`token_count.info.total_token_usage` is CUMULATIVE over the thread: one Usage row per change of the total (a
re-emitted identical total adds nothing; a total that goes down is a restarted counter and counts whole). Replayed
totals of a fork's parent only move the baseline: the fork's own totals continue from the parent's.
`input_tokens` is stored NET of cache: Codex's input_tokens includes cached_input_tokens, so stored
input = input - cached and cache_read = cached (input + cache_read = prompt tokens, as for Claude). `output_tokens`
is as reported and includes `reasoning_tokens` (OpenAI counts reasoning inside output). `cache_write_input_tokens`,
where a build writes it, is stored as cache_write_tokens as reported (not subtracted: unverified whether it is
inside input_tokens). A token_count with only `last_token_usage` (no total) is taken as that response's usage.
Numbers: a count must be an integer (or the whole-valued float an integer literal past 64 bits is parsed as); a
fraction, NaN or `1e400` rejects the session as bad_shape. A count past int64 is null where it is read, before a
delta or the uncached input is derived from it (`2**63 - 11,502` would fit), and counted as `usage/out_of_range`
when it is a field of a row (`out_of_range`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors.bounded.numbers import fit_int, integral
from extractors.errors import RejectCode, RejectError
from extractors.model import Usage

USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "cache_write_input_tokens",
)
Totals = dict[str, int | None]


@dataclass(slots=True)
class UsageLedger:
    """Turns successive token_count payloads into Usage rows."""

    baseline: Totals | None = None
    rows: list[Usage] = field(default_factory=list)
    out_of_range: int = 0  # fields of the rows that were past int64 as read

    def replayed(self, payload: dict[str, Any], index: int) -> None:
        """A replayed (parent's) token_count: moves the baseline only. Raises RejectError(bad_shape)."""
        totals = _totals(payload, index)
        if totals is not None:
            self.baseline = totals[0]

    def observe(self, payload: dict[str, Any], index: int, at: datetime | None, model: str | None) -> bool:
        """Add the usage this token_count reports; False when it adds nothing. Raises RejectError(bad_shape)."""
        read = _totals(payload, index)
        if read is None:
            info = payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            if last is None:
                return False  # `"info": null` before the first reply
            delta, nulled = _values(last, index)
        elif read[0] == self.baseline:
            return False  # the same total re-emitted
        else:
            totals, nulled = read
            base = self.baseline
            restarted = base is not None and any(
                (totals[k] or 0) < (base[k] or 0) for k in USAGE_FIELDS if totals[k] is not None
            )
            delta = totals if base is None or restarted else _subtract(totals, base)
            self.baseline = totals
        self.out_of_range += nulled
        cached = delta["cached_input_tokens"]
        gross = delta["input_tokens"]
        self.rows.append(
            Usage(
                turn_index=index,
                model=model,
                input_tokens=None if gross is None else gross - (cached or 0),
                output_tokens=delta["output_tokens"],
                cache_read_tokens=cached,
                cache_write_tokens=delta["cache_write_input_tokens"],
                reasoning_tokens=delta["reasoning_output_tokens"],
                timestamp=at,
            )
        )
        return True


def _totals(payload: dict[str, Any], index: int) -> tuple[Totals, int] | None:
    info = payload.get("info")
    if info is None:
        return None
    if not isinstance(info, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "a token_count whose info is not an object", line=index)
    total = info.get("total_token_usage")
    return None if total is None else _values(total, index)


def _values(value: Any, index: int) -> tuple[Totals, int]:
    """The counts of a token usage object, and how many were past int64 (stored null). Raises RejectError."""
    if not isinstance(value, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "token usage that is not an object", line=index)
    values: Totals = {}
    nulled = 0
    for name in USAGE_FIELDS:
        raw = value.get(name)
        number, _ = integral(raw)
        if raw is not None and number is None:  # a fraction, NaN, 1e400, text: not what Codex writes
            raise RejectError(RejectCode.BAD_SHAPE, f"token usage {name} is not an integer", line=index)
        values[name], past = fit_int(number)
        nulled += past
    return values, nulled


def _subtract(totals: Totals, base: Totals) -> Totals:
    return {k: None if v is None else v - (base.get(k) or 0) for k, v in totals.items()}
