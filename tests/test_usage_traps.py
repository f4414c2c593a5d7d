"""Token accounting traps, each a hand-written source read by the real reader (docs/agents/claude.md
"One response, several lines: usage", docs/agents/codex.md "Token usage").

Each test names the outcome it expects. The figures are small and chosen so that every wrong rule gives a
different number: summing every line, taking the first snapshot, merging distinct responses, counting a replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extractors.model import Agent, Loaded, Session, Usage
from tests.claude_records import OTHER, SID, assistant, envelope, text, tool_result, tool_use, user
from tests.claude_records import load as load_claude
from tests.support import read_one, write_jsonl

# ---- Claude Code (docs/agents/claude.md "One response, several lines: usage") -------------------------------------


def _usage(output: int, *, inp: int = 3, read: int = 1000, write: int = 100) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def _tokens(session: Session) -> list[tuple[str | None, int | None]]:
    return [(u.response_id, u.output_tokens) for u in sorted(session.usage, key=lambda u: u.turn_index)]


def test_ok_claude_one_response_in_several_lines_counts_once_from_the_last_snapshot(tmp_path: Path) -> None:
    # CP 3a7770b4's shape: a text line then a tool_use line of the same response, usage repeated with a growing
    # output_tokens (4, then 98). Summing lines gives 102, the first snapshot (ccusage) 4; the response used 98.
    records = [
        user("fix the login form", ts="2026-03-02T09:00:00Z"),
        assistant([text("Looking.")], msg_id="msg_01", request_id="req_01", usage=_usage(4), ts="2026-03-02T09:00:02Z"),
        assistant(
            [tool_use("toolu_1", command="ls")],
            msg_id="msg_01",
            request_id="req_01",
            usage=_usage(98),
            ts="2026-03-02T09:00:03Z",
        ),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert _tokens(session) == [("msg_01", 98)]
    (row,) = session.usage
    assert (row.input_tokens, row.cache_read_tokens, row.cache_write_tokens) == (3, 1000, 100)


def test_ok_claude_gateway_without_request_id_is_keyed_by_message_id(tmp_path: Path) -> None:
    # AntCC / DeepSeek-compatible endpoints omit requestId (ccusage#976): the lines of one response still collapse
    # on message.id, and two responses with two ids stay two.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant([text("a")], msg_id="msg_a", request_id=None, usage=_usage(5), ts="2026-03-02T09:00:01Z"),
        assistant([tool_use("toolu_1")], msg_id="msg_a", request_id=None, usage=_usage(50), ts="2026-03-02T09:00:02Z"),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:03Z"),
        assistant([text("done")], msg_id="msg_b", request_id=None, usage=_usage(7), ts="2026-03-02T09:00:04Z"),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert _tokens(session) == [("msg_a", 50), ("msg_b", 7)]


def test_ok_claude_gateway_reusing_a_message_id_with_distinct_request_ids_counts_each_request(
    tmp_path: Path,
) -> None:
    # A relay that stamps every response with the same message id but passes request ids through.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant(
            [tool_use("toolu_1")], msg_id="ocgo", request_id="req_1", usage=_usage(11), ts="2026-03-02T09:00:01Z"
        ),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:02Z"),
        assistant([text("done")], msg_id="ocgo", request_id="req_2", usage=_usage(22), ts="2026-03-02T09:00:03Z"),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert sorted(u.output_tokens or 0 for u in session.usage) == [11, 22]


def test_ok_claude_gateway_reusing_one_message_id_without_request_ids_counts_each_response(tmp_path: Path) -> None:
    # ccusage#1635: a local relay answers EVERY response with message id "ocgo" and no requestId. Two requests
    # (a tool_use response, its result sent back, a text response) are two responses: 11 + 22 output tokens,
    # not one response of 22. The lines of one response are contiguous; a user record in between ends it.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant([tool_use("toolu_1")], msg_id="ocgo", request_id=None, usage=_usage(11), ts="2026-03-02T09:00:01Z"),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:02Z"),
        assistant([text("done")], msg_id="ocgo", request_id=None, usage=_usage(22), ts="2026-03-02T09:00:03Z"),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert sorted(u.output_tokens or 0 for u in session.usage) == [11, 22]


def test_ok_claude_response_without_request_id_split_by_non_conversation_lines_counts_once(tmp_path: Path) -> None:
    # Bedrock answers carry no requestId (codemie-code session-196820da.jsonl); progress, hook, system, queue and
    # summary lines fall between the lines of one response (marot/spotter subagent.jsonl, codemie session-9eda1058):
    # they are not conversation, so the response stays one, counted once from its last snapshot.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant([{"type": "thinking", "thinking": "hm"}], msg_id="msg_bdrk_1", request_id=None, usage=_usage(5)),
        envelope("progress", data={"type": "hook_progress", "hookEvent": "PreToolUse"}),
        envelope("queue-operation", operation="enqueue", content="later"),
        assistant([text("Looking.")], msg_id="msg_bdrk_1", request_id=None, usage=_usage(6)),
        envelope("system", subtype="turn_duration", durationMs=5),
        envelope("summary", summary="a title", leafUuid="elsewhere"),
        assistant([tool_use("toolu_1")], msg_id="msg_bdrk_1", request_id=None, usage=_usage(40)),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:05Z"),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert _tokens(session) == [("msg_bdrk_1", 40)]
    assert [(c.call_id, c.turn_index) for c in session.tool_calls] == [("toolu_1", 1)]


def test_ok_claude_streamed_tool_use_after_its_sibling_result_without_request_id_stays_one_response(
    tmp_path: Path,
) -> None:
    # Streaming tool execution writes a tool's result before the response's next tool_use line (marot/spotter
    # subagent.jsonl lines 18-21: tool_use, hook progress, its tool_result, tool_use, same message.id and requestId).
    # Without requestId the second tool_use (same prompt size) is still the same response: one usage row.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant([text("Two reads.")], msg_id="msg_bdrk_2", request_id=None, usage=_usage(8)),
        assistant([tool_use("toolu_a")], msg_id="msg_bdrk_2", request_id=None, usage=_usage(8)),
        envelope("progress", data={"type": "hook_progress", "hookEvent": "PostToolUse"}),
        user([tool_result("toolu_a")], ts="2026-03-02T09:00:02Z"),
        assistant([tool_use("toolu_b")], msg_id="msg_bdrk_2", request_id=None, usage=_usage(30)),
        user([tool_result("toolu_b")], ts="2026-03-02T09:00:03Z"),
        assistant([text("done")], msg_id="msg_bdrk_3", request_id=None, usage=_usage(7)),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert _tokens(session) == [("msg_bdrk_2", 30), ("msg_bdrk_3", 7)]
    calls = [(c.call_id, c.turn_index, c.output) for c in session.tool_calls]
    assert calls == [("toolu_a", 1, "ok"), ("toolu_b", 1, "ok")]


def test_ok_claude_gateway_reusing_one_message_id_for_a_tool_use_response_counts_the_new_prompt(
    tmp_path: Path,
) -> None:
    # The relay of ccusage#1635 again, when the second response is a tool_use only: its prompt holds the first
    # result, so its prompt size differs and it is a new request; a person's prompt in between always is.
    records = [
        user("q", ts="2026-03-02T09:00:00Z"),
        assistant([tool_use("toolu_1")], msg_id="ocgo", request_id=None, usage=_usage(11)),
        user([tool_result("toolu_1")], ts="2026-03-02T09:00:02Z"),
        assistant([tool_use("toolu_2")], msg_id="ocgo", request_id=None, usage=_usage(22, inp=40)),
        user([tool_result("toolu_2")], ts="2026-03-02T09:00:04Z"),
        user("and now?", ts="2026-03-02T09:00:05Z"),
        assistant([text("ok")], msg_id="ocgo", request_id=None, usage=_usage(33, inp=40)),
    ]
    session = load_claude(tmp_path, f"{SID}.jsonl", records)
    assert _tokens(session) == [("ocgo", 11), ("ocgo", 22), ("ocgo", 33)]
    assert [(c.call_id, c.turn_index) for c in session.tool_calls] == [("toolu_1", 1), ("toolu_2", 3)]


def test_ok_claude_resumed_session_copying_earlier_records_counts_them_only_in_the_original(tmp_path: Path) -> None:
    # `--resume` writes a new file whose first records are copies of the old session's (ccusage PR#1765); the
    # copies' usage belongs to the old session and is counted there, once.
    original = [
        user("old prompt", sid=OTHER, ts="2026-03-01T10:00:00Z"),
        assistant(
            [text("old answer")],
            msg_id="msg_old",
            request_id="req_old",
            usage=_usage(40),
            sid=OTHER,
            ts="2026-03-01T10:00:01Z",
        ),
    ]
    resumed = [
        *original,
        user("new prompt", ts="2026-03-02T10:00:00Z"),
        assistant(
            [text("new answer")], msg_id="msg_new", request_id="req_new", usage=_usage(60), ts="2026-03-02T10:00:01Z"
        ),
    ]
    old = load_claude(tmp_path, f"{OTHER}.jsonl", original)
    new = load_claude(tmp_path, f"{SID}.jsonl", resumed)
    assert _tokens(old) == [("msg_old", 40)]
    assert _tokens(new) == [("msg_new", 60)]


# ---- Codex (docs/agents/codex.md "Token usage") -----------------------------------------------------------------

FORK_MS = 1_778_500_000_000  # 2026-05-11T11:46:40Z
TS = "2026-05-11T11:46:40.000Z"


def _v7(ms: int, tail: int = 1) -> str:
    digits = f"{ms:012x}7000{8000 + tail:04x}{tail:012x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


OWN = _v7(FORK_MS, 1)
PARENT = _v7(FORK_MS - 3_600_000, 2)


def _env(kind: str, payload: dict[str, Any], ts: str = TS) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def _meta(native: str = OWN, **extra: Any) -> dict[str, Any]:
    return _env("session_meta", {"id": native, "timestamp": TS, "cwd": "/w", "cli_version": "0.129.0", **extra})


def _turn(turn_id: str, model: str = "gpt-5.4") -> dict[str, Any]:
    return _env("turn_context", {"turn_id": turn_id, "cwd": "/w", "model": model})


def _said(message: str) -> dict[str, Any]:
    return _env("event_msg", {"type": "user_message", "message": message, "images": [], "local_images": []})


def _answer(message: str) -> dict[str, Any]:
    return _env(
        "response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": message}]}
    )


def _total(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, Any]:
    usage = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }
    info = {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": 258400}
    return _env("event_msg", {"type": "token_count", "info": info})


def _codex(tmp_path: Path, records: list[dict[str, Any]], native: str = OWN) -> Session:
    path = write_jsonl(
        tmp_path / "sessions" / "2026" / "05" / "11" / f"rollout-2026-05-11T13-46-40-{native}.jsonl", records
    )
    outcomes = read_one(Agent("codex"), path)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded), outcomes
    return outcomes[0].session


def _rows(session: Session) -> list[tuple[int | None, int | None, int | None, int | None]]:
    return [(u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) for u in session.usage]


def test_ok_codex_cumulative_totals_become_one_row_per_change(tmp_path: Path) -> None:
    # total_token_usage is cumulative over the thread: 1000 -> 2500 -> 2500 (re-emitted) -> 4000 input. Summing
    # the totals gives 10000; the deltas are 1000, 1500, 1500. Input is stored net of cache.
    records = [
        _meta(),
        _turn(_v7(FORK_MS + 1000)),
        _said("q1"),
        _answer("a1"),
        _total(1000, 600, 100, 20),
        _total(2500, 1600, 250, 50),
        _total(2500, 1600, 250, 50),
        _said("q2"),
        _answer("a2"),
        _total(4000, 2000, 300, 60),
    ]
    session = _codex(tmp_path, records)
    assert _rows(session) == [(400, 600, 100, 20), (500, 1000, 150, 30), (1100, 400, 50, 10)]
    assert {u.model for u in session.usage} == {"gpt-5.4"}


def test_ok_codex_token_count_with_info_null_adds_nothing(tmp_path: Path) -> None:
    # The first token_count of a turn is often `"info": null` (before any reply): not a row, not a rejection.
    records = [
        _meta(),
        _turn(_v7(FORK_MS + 1000)),
        _said("q"),
        _env("event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),
        _answer("a"),
        _total(1000, 0, 10),
    ]
    session = _codex(tmp_path, records)
    assert _rows(session) == [(1000, 0, 10, 0)]


def test_ok_codex_token_count_before_any_turn_context_is_counted(tmp_path: Path) -> None:
    # Early Sept-2025 builds: a token_count with no turn_context before it. Its tokens still count (the model is
    # the session_meta's where given, else unknown: NULL, shown unpriced); the next turn's model is its own.
    records = [
        _meta(model="gpt-5-codex"),
        _said("q1"),
        _answer("a1"),
        _total(1000, 0, 10),
        _turn(_v7(FORK_MS + 1000), model="gpt-5.4"),
        _said("q2"),
        _answer("a2"),
        _total(1500, 0, 30),
    ]
    session = _codex(tmp_path, records)
    assert [(u.model, u.input_tokens, u.output_tokens) for u in session.usage] == [
        ("gpt-5-codex", 1000, 10),
        ("gpt-5.4", 500, 20),
    ]
    unknown = _codex(tmp_path / "bare", [_meta(), _said("q"), _answer("a"), _total(1000, 0, 10)])
    assert [(u.model, u.input_tokens) for u in unknown.usage] == [(None, 1000)]


def test_ok_codex_forked_rollout_counts_only_its_own_tokens_not_the_replayed_parent(tmp_path: Path) -> None:
    # A fork holds its own meta, then the parent's meta and the parent's history with its cumulative totals
    # (9000 input): those are the parent's tokens. The fork's own turn moves the total to 9600: 600 are its own.
    records = [
        _meta(forked_from_id=PARENT),
        _meta(PARENT),
        _turn(_v7(FORK_MS - 3_000_000)),
        _said("parent question"),
        _answer("parent answer"),
        _total(9000, 8000, 500),
        _turn(_v7(FORK_MS + 1000)),
        _said("fork question"),
        _answer("fork answer"),
        _total(9600, 8200, 540),
    ]
    session = _codex(tmp_path, records)
    assert _rows(session) == [(400, 200, 40, 0)]
    assert [t.text for t in session.turns] == ["fork question", "fork answer"]


def test_ok_codex_subagent_rollout_with_forked_context_skips_the_parent_prefix(tmp_path: Path) -> None:
    # A subagent thread whose context is forked from the parent: the parent's meta (another thread) right after
    # its own arms the same gate, without forked_from_id.
    source = {"subagent": {"thread_spawn": {"parent_thread_id": PARENT, "depth": 1}}}
    records = [
        _meta(source=source),
        _meta(PARENT),
        _turn(_v7(FORK_MS - 3_000_000)),
        _said("parent question"),
        _total(5000, 0, 100),
        _turn(_v7(FORK_MS + 1000)),
        _said("sub question"),
        _answer("sub answer"),
        _total(5300, 100, 130),
    ]
    session = _codex(tmp_path, records)
    assert _rows(session) == [(200, 100, 30, 0)]


# ---- Gemini and OpenCode: the same rule at the other agents ------------------------------------------------------


def test_ok_gemini_jsonl_message_rewritten_with_growing_tokens_counts_the_last(tmp_path: Path) -> None:
    # Gemini CLI's .jsonl rewrites a message id as its tool calls and tokens update: fold by id, last wins.
    meta = {
        "sessionId": "g-1",
        "projectHash": "h",
        "startTime": "2026-01-16T18:34:00Z",
        "lastUpdated": "2026-01-16T18:35:00Z",
        "kind": "main",
    }

    def gem(tokens: dict[str, int]) -> dict[str, Any]:
        return {
            "id": "m2",
            "timestamp": "2026-01-16T18:34:10Z",
            "type": "gemini",
            "content": "answer",
            "model": "gemini-2.5-pro",
            "tokens": tokens,
        }

    records = [
        meta,
        {"id": "m1", "timestamp": "2026-01-16T18:34:01Z", "type": "user", "content": "List the TODOs."},
        gem({"input": 5200, "output": 10, "cached": 4000, "thoughts": 5, "tool": 0, "total": 5215}),
        gem({"input": 5200, "output": 40, "cached": 4000, "thoughts": 12, "tool": 0, "total": 5252}),
    ]
    path = write_jsonl(tmp_path / "h" / "chats" / "session-2026-01-16T18-34-g1.jsonl", records)
    outcomes = read_one(Agent("gemini"), path)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded), outcomes
    usage: tuple[Usage, ...] = outcomes[0].session.usage
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) for u in usage] == [
        (1200, 4000, 40, 12)
    ]


# ---- Aider (docs/agents/aider.md "Tokens") --------------------------------------------------------------------------


def test_ok_aider_reports_count_each_message_and_never_the_running_session_total(tmp_path: Path) -> None:
    # Each reply's report gives the message's figures and the run's running total ("$0.03 session" after two replies
    # of $0.01 and $0.02). Taking the session figure as well would count the first reply twice.
    hard = "  "
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(
        "\n# aider chat started at 2026-03-02 09:00:00\n\n"
        f"> Aider v0.86.1{hard}\n> Main model: deepseek/deepseek-chat with diff edit format{hard}\n"
        f"\n#### one{hard}\n\nA.\n\n> Tokens: 1.5k sent, 1.0k cache hit, 10 received."
        f" Cost: $0.01 message, $0.01 session.{hard}\n"
        f"\n#### two{hard}\n\nB.\n\n> Tokens: 2.5k sent, 2.0k cache hit, 20 received."
        f" Cost: $0.02 message, $0.03 session.{hard}\n",
        encoding="utf-8",
    )
    [outcome] = read_one(Agent("aider"), path)
    assert isinstance(outcome, Loaded)
    usage = outcome.session.usage
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens) for u in usage] == [(500, 1000, 10), (500, 2000, 20)]
    # the last session figure, reached by the messages alone
    assert round(sum(u.cost_usd or 0 for u in usage), 6) == 0.03
