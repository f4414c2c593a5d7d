"""Numbers that do not fit never crash: token counts and costs out of range are null and counted; times are unusable.

Each case is a hand-written session beside the values, read by the real reader and built into Arrow rows by the real
`transforms.normalize`, so a crash anywhere on that path fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from extractors.bounded.numbers import OUT_OF_RANGE_KIND, fit_float, fit_int, whole_number
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Outcome, Rejected
from extractors.registry import agents, extractor, read_source
from extractors.timeutil import from_epoch_ms, from_epoch_seconds, parse_any
from tests.corpus import S1, claude_exchange, codex_rollout, write_session
from tests.opencode_support import T0, add_message, add_part, add_session, assistant, create_db, text, user
from tests.support import SETTLED, read_one
from transforms.normalize import session_tables
from transforms.redact import Redactor

HUGE = 2**63  # one past int64
DIGITS_30 = 10**29 + 7  # a 30-digit literal
VERSIONS = {agent: extractor(agent).SPEC.parser_version for agent in agents()}


def tables(outcomes: list[Outcome]) -> dict[str, pa.Table]:
    loaded = [o for o in outcomes if isinstance(o, Loaded)]
    assert len(loaded) == 1, outcomes
    return session_tables(loaded, VERSIONS, Redactor(None))


def usage_rows(built: dict[str, pa.Table]) -> list[dict[str, Any]]:
    return built["usage"].to_pylist()


def out_of_range(built: dict[str, pa.Table]) -> int:
    rows = [r for r in built["record_kinds"].to_pylist() if r["record_kind"] == OUT_OF_RANGE_KIND]
    assert len(rows) <= 1
    return rows[0]["record_count"] if rows else 0


def record_count(built: dict[str, pa.Table]) -> int:
    [row] = built["sessions"].to_pylist()
    return int(row["record_count"])


# --- the helpers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (None, False)),
        (5, (5, False)),
        (2**63 - 1, (2**63 - 1, False)),
        (-(2**63), (-(2**63), False)),
        (HUGE, (None, True)),
        (-(2**63) - 1, (None, True)),
        (DIGITS_30, (None, True)),
        (1.5, (None, True)),
    ],
)
def test_fit_int(value: Any, expected: tuple[int | None, bool]) -> None:
    assert fit_int(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (None, False)),
        (0.25, (0.25, False)),
        (3, (3.0, False)),
        (float("inf"), (None, True)),
        (float("nan"), (None, True)),
        (10**400, (None, True)),
    ],
)
def test_fit_float(value: Any, expected: tuple[float | None, bool]) -> None:
    assert fit_float(value) == expected


def test_whole_number() -> None:
    assert whole_number(7) == (7, False)
    assert whole_number(7.9) == (7, False)
    assert whole_number(DIGITS_30) == (DIGITS_30, False)  # handed on: fit_int decides
    assert whole_number(float("inf")) == (None, True)
    assert whole_number(float("nan")) == (None, True)
    assert whole_number("12") == (None, False) and whole_number(True) == (None, False)


@pytest.mark.parametrize(
    "value",
    [10**400, -(10**400), float("inf"), float("nan"), 10**30, 1e300],
    ids=["400-digits", "minus-400-digits", "inf", "nan", "30-digits", "1e300"],
)
def test_absurd_times_are_none_not_a_crash(value: Any) -> None:
    assert from_epoch_seconds(value) is None
    assert from_epoch_ms(value) is None
    assert parse_any(value) is None


@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00.5+00:01"]
)
def test_iso_times_with_no_utc_time_are_none_not_a_crash(value: str) -> None:
    # Valid ISO, but the zone moves them past datetime's years 1-9999: `astimezone(UTC)` raised OverflowError.
    assert parse_any(value) is None


# --- every reader --------------------------------------------------------------------------------------------------


def test_claude_token_counts_past_int64_are_null_and_counted(tmp_path: Path) -> None:
    lines = claude_exchange(S1, 2)
    record = json.loads(lines[1])
    record["message"]["usage"]["input_tokens"] = HUGE
    record["message"]["usage"]["output_tokens"] = DIGITS_30
    lines[1] = json.dumps(record)
    built = tables(read_one(Agent("claude"), write_session(tmp_path, S1, lines)))
    first, second = sorted(usage_rows(built), key=lambda r: r["turn_index"])
    assert (first["input_tokens"], first["output_tokens"], first["cache_read_tokens"]) == (None, None, 100)
    assert (second["input_tokens"], second["output_tokens"]) == (10, 5)
    assert out_of_range(built) == 2
    assert record_count(built) == len(lines)  # fields are not records
    assert built["turns"].num_rows == 4


def test_claude_session_with_a_time_past_utc_loads_whole(tmp_path: Path) -> None:
    lines = claude_exchange(S1, 2)
    record = json.loads(lines[2])
    record["timestamp"] = "0001-01-01T00:00:00+05:00"  # the second prompt's
    lines[2] = json.dumps(record)
    outcomes = read_one(Agent("claude"), write_session(tmp_path, S1, lines))
    assert not [o for o in outcomes if isinstance(o, Rejected)], outcomes  # was: unexpected OverflowError
    built = tables(outcomes)
    assert built["turns"].num_rows == 4
    assert "question 1" in built["turns"].column("text").to_pylist()


def test_codex_totals_past_int64_are_null_and_counted(tmp_path: Path) -> None:
    path = codex_rollout(tmp_path, "019e1695-0522-7c83-8b39-0dd379793f80", 2)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    last["payload"]["info"]["total_token_usage"]["output_tokens"] = HUGE * 4
    lines[-1] = json.dumps(last)
    path.write_text("\n".join(lines) + "\n")
    built = tables(read_one(Agent("codex"), path))
    rows = sorted(usage_rows(built), key=lambda r: r["turn_index"])
    assert rows[-1]["output_tokens"] is None and rows[-1]["input_tokens"] == 50  # (200 - 100) net of cache
    assert rows[0]["output_tokens"] == 10
    assert out_of_range(built) == 1


def test_codex_non_integer_token_counts_stay_a_bad_shape(tmp_path: Path) -> None:
    # Codex writes integers (Rust u64); a float there, `1e400` included, is a different writer: the session is
    # rejected as before (decision: Codex's usage rule is strict, the others' lenient).
    path = codex_rollout(tmp_path, "019e1695-0522-7c83-8b39-0dd379793f80", 1)
    path.write_text(path.read_text().replace('"output_tokens":10,', '"output_tokens":1e400,'))
    assert "1e400" in path.read_text()
    [outcome] = read_one(Agent("codex"), path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE


GEMINI_META = {
    "sessionId": "0f2b7a1c-0000-4000-8000-00000000000a",
    "projectHash": "ab" * 32,
    "startTime": "2026-01-02T03:04:05.000Z",
    "lastUpdated": "2026-01-02T03:10:00.000Z",
}


def _gemini_messages(tokens: str) -> list[str]:
    """Messages as JSON text, so that NaN / 1e400 / 30-digit literals are written as a hostile writer would."""
    user_msg = '{"id": "u1", "timestamp": "2026-01-02T03:05:00.000Z", "type": "user", "content": "hi"}'
    model_msg = (
        '{"id": "g1", "timestamp": "2026-01-02T03:05:01.000Z", "type": "gemini", "content": "hello",'
        f' "model": "gemini-2.5-pro", "tokens": {tokens}}}'
    )
    return [user_msg, model_msg]


HOSTILE_TOKENS = f'{{"input": {DIGITS_30}, "output": 1e400, "thoughts": NaN, "cached": 0}}'


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_gemini_30_digit_infinite_and_nan_token_counts_are_null_and_counted(tmp_path: Path, suffix: str) -> None:
    chats = tmp_path / "proj" / "chats"
    chats.mkdir(parents=True)
    path = chats / f"session-2026-01-02T03-04-0f2b7a1c{suffix}"
    messages = _gemini_messages(HOSTILE_TOKENS)
    meta = json.dumps(GEMINI_META)
    if suffix == ".json":
        path.write_text(f'{meta[:-1]}, "messages": [{", ".join(messages)}]}}')
    else:
        path.write_text("\n".join([json.dumps({**GEMINI_META, "kind": "main"}), *messages]) + "\n")
    built = tables(read_one(Agent("gemini"), path))
    [row] = usage_rows(built)
    assert (row["input_tokens"], row["output_tokens"], row["reasoning_tokens"]) == (None, None, None)
    assert row["cache_read_tokens"] == 0
    assert out_of_range(built) == 3  # output and thoughts counted by the reader, input when the row was built
    assert built["turns"].num_rows == 2


def _opencode_db(root: Path, tokens: dict[str, Any] | str, cost: Any) -> Path:
    conn = create_db(root / "opencode.db", wal=False)
    add_session(conn, "ses_n")
    add_message(conn, "ses_n", "msg_u", T0, user(T0))
    add_part(conn, "ses_n", "msg_u", "prt_u", text("question"))
    data = json.dumps(assistant(T0 + 1000, cost=0.5, tokens={}))
    data = data.replace('"cost": 0.5', f'"cost": {cost}').replace('"tokens": {}', f'"tokens": {tokens}')
    add_message(conn, "ses_n", "msg_a", T0 + 1000, data)
    add_part(conn, "ses_n", "msg_a", "prt_a", text("answer"))
    conn.close()
    return root


def _read_opencode(root: Path) -> list[Outcome]:
    [source] = list(extractor(Agent("opencode")).discover(root))
    return list(read_source(source, SETTLED))


@pytest.mark.parametrize(
    ("tokens", "cost", "input_tokens", "cost_usd", "counted"),
    [
        (f'{{"input": {HUGE}, "output": 7, "reasoning": 0, "cache": {{"read": 1, "write": 2}}}}', "0.5", None, 0.5, 1),
        ('{"input": 1e400, "output": 7, "reasoning": NaN, "cache": {"read": 1, "write": 2}}', "1e400", None, None, 3),
        ('{"input": 3, "output": 7, "reasoning": 0, "cache": {"read": 1, "write": 2}}', str(10**400), 3, None, 1),
    ],
    ids=["int64+1", "inf-nan", "cost-400-digits"],
)
def test_opencode_tokens_and_cost_out_of_range_are_null_and_counted(
    tmp_path: Path, tokens: str, cost: str, input_tokens: int | None, cost_usd: float | None, counted: int
) -> None:
    built = tables(_read_opencode(_opencode_db(tmp_path / "oc", tokens, cost)))
    [row] = usage_rows(built)
    assert row["output_tokens"] == 7 and row["cache_read_tokens"] == 1 and row["cache_write_tokens"] == 2
    assert (row["input_tokens"], row["cost_usd"]) == (input_tokens, cost_usd)
    assert out_of_range(built) == counted


def test_chatgpt_times_past_any_range_are_not_a_crash(tmp_path: Path) -> None:
    def msg(role: str, t: Any, words: str) -> str:
        return (
            f'{{"id": "m-{role}", "author": {{"role": "{role}"}}, "create_time": {t}, "content": '
            f'{{"content_type": "text", "parts": ["{words}"]}}, "status": "finished_successfully", "recipient": "all",'
            ' "metadata": {}}'
        )

    mapping = (
        '{"n0": {"id": "n0", "message": null, "parent": null, "children": ["n1"]},'
        f' "n1": {{"id": "n1", "message": {msg("user", 10**400, "Q")}, "parent": "n0", "children": ["n2"]}},'
        f' "n2": {{"id": "n2", "message": {msg("assistant", "1e400", "A")}, "parent": "n1", "children": []}}}}'
    )
    good = f'{{"id": "c1", "title": "t", "create_time": 1700000000.5, "update_time": {10**30}, "mapping": {mapping},'
    good += ' "current_node": "n2"}'
    timeless = good.replace("1700000000.5", "NaN").replace("c1", "c2")
    path = tmp_path / "conversations.json"
    path.write_text(f"[{good}, {timeless}]")
    loaded, rejected = read_one(Agent("chatgpt"), path)
    assert isinstance(loaded, Loaded) and [t.timestamp for t in loaded.session.turns] == [None, None]
    assert isinstance(rejected, Rejected) and rejected.code is RejectCode.MISSING_TIMESTAMP
    built = tables([loaded])
    assert built["turns"].num_rows == 2
