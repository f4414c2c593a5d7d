"""Amp reader rules, one small thread file per rule, each test named after the outcome it expects."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors import amp
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import (
    Agent,
    Deferred,
    Disposition,
    LinkKind,
    Loaded,
    Outcome,
    Rejected,
    Role,
    Session,
    SessionLink,
)
from extractors.registry import detect_format, read_source
from extractors.spec import Claim
from tests.support import SETTLED, read_one

AGENT = Agent("amp")
TID = "T-019b8a00-0000-7000-8000-0000000000c3"
MS0 = 1767348000000  # 2026-01-02T10:00:00Z


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(MS0 / 1000 + seconds, tz=UTC)


def iso(seconds: float) -> str:
    return when(seconds).isoformat().replace("+00:00", "Z")


def user(*blocks: dict[str, Any], sent: float | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": list(blocks)}
    if sent is not None:
        message["meta"] = {"sentAt": MS0 + int(sent * 1000)}
    return message


def assistant(*blocks: dict[str, Any], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": list(blocks)}
    if usage is not None:
        message["usage"] = usage
    return message


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thread(tmp_path: Path, messages: list[Any], name: str = TID, **fields: Any) -> Path:
    document: dict[str, Any] = {"v": 3, "id": name, "created": MS0, "messages": messages, **fields}
    folder = tmp_path / ".local" / "share" / "amp" / "threads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def outcomes(path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    return read_one(AGENT, path, limits)


def session(path: Path) -> Session:
    [outcome] = outcomes(path)
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def rejected(path: Path) -> Rejected:
    [outcome] = outcomes(path)
    assert isinstance(outcome, Rejected), outcome
    return outcome


# --- turns ------------------------------------------------------------------------------------------------------------


def test_a_persons_turn_is_the_text_of_a_user_message_at_its_sent_time(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [user(text("fix it"), text("please"), sent=3), assistant(text("Done."))]))
    assert [(t.role, t.text, t.index) for t in s.turns] == [
        (Role.USER, "fix it\n\nplease", 0),
        (Role.ASSISTANT, "Done.", 1),
    ]
    assert s.turns[0].timestamp == when(3)
    assert s.turns[1].timestamp is None  # no usage.timestamp: stored as inferred, never the file's time


def test_a_tool_result_sent_back_as_a_user_message_is_never_a_persons_turn(tmp_path: Path) -> None:
    s = session(
        thread(
            tmp_path,
            [
                user(text("run the tests")),
                assistant({"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"cmd": "make test"}}),
                user({"type": "tool_result", "toolUseID": "tu1", "run": {"status": "done", "result": "all passed"}}),
            ],
        )
    )
    assert [t.text for t in s.turns if t.role is Role.USER] == ["run the tests"]
    assert s.census[("user/tool_result", "3", Disposition.TOOL)] == 1


def test_thinking_is_never_a_turn_and_is_counted_as_harness(tmp_path: Path) -> None:
    s = session(
        thread(tmp_path, [user(text("hi")), assistant({"type": "thinking", "thinking": "plan"}, text("Hello."))])
    )
    assert [t.text for t in s.turns] == ["hi", "Hello."]
    assert s.census[("assistant/thinking", "3", Disposition.HARNESS)] == 1


def test_an_unknown_block_type_is_skipped_and_counted_never_a_turn(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [user(text("hi"), {"type": "hologram", "text": "guess"}), assistant(text("ok"))]))
    assert [t.text for t in s.turns] == ["hi", "ok"]
    assert s.census[("user/hologram", "3", Disposition.SKIPPED)] == 1


def test_an_unknown_role_is_skipped_and_counted_and_keeps_the_other_indexes(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [user(text("hi")), {"role": "system", "content": "x"}, assistant(text("ok"))]))
    assert [(t.text, t.index) for t in s.turns] == [("hi", 0), ("ok", 2)]
    assert s.census[("system", "3", Disposition.SKIPPED)] == 1


def test_an_attached_image_is_a_reference_on_the_persons_turn_never_its_bytes(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "mediaType": "image/png", "data": "iVBORw0KGgo="}}
    s = session(thread(tmp_path, [user(text("what is this?"), image), assistant(text("A PNG."))]))
    [reference] = s.turns[0].attachments
    assert reference.startswith("image/png sha256:") and "iVBOR" not in reference


def test_a_bare_string_content_is_the_messages_one_text(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "Done."}]))
    assert [(t.role, t.text) for t in s.turns] == [(Role.USER, "fix it"), (Role.ASSISTANT, "Done.")]
    assert s.census[("user/string", "3", Disposition.TURN)] == 1


def test_a_system_message_is_never_a_turn(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [{"role": "system", "content": "You are Amp."}, user(text("hi"))]))
    assert [t.text for t in s.turns] == ["hi"]


# --- lineage ----------------------------------------------------------------------------------------------------------

PARENT = "T-019b8a00-0000-7000-8000-0000000000p0"


def test_a_thread_handed_off_from_another_names_it_as_its_parent(tmp_path: Path) -> None:
    relationships = [{"type": "handoff", "role": "child", "threadID": PARENT, "comment": "continue the refactor"}]
    s = session(thread(tmp_path, [user(text("hi"))], relationships=relationships))
    assert s.parent_session_id == f"amp-{PARENT}"
    assert s.links == (SessionLink(f"amp-{PARENT}", LinkKind.COMPACTION),)
    assert s.census[("relationship/handoff", "3", Disposition.METADATA)] == 1


def test_the_thread_that_handed_off_has_no_parent_and_other_relationships_are_counted(tmp_path: Path) -> None:
    relationships = [
        {"type": "handoff", "role": "parent", "threadID": PARENT},
        {"type": "mention", "threadID": PARENT},
    ]
    s = session(thread(tmp_path, [user(text("hi"))], relationships=relationships))
    assert (s.parent_session_id, s.links) == (None, ())
    assert s.census[("relationship/mention", "3", Disposition.SKIPPED)] == 1


@pytest.mark.parametrize(
    "relationships",
    [{"type": "handoff"}, [{"role": "child"}], [{"type": "handoff", "role": "sibling", "threadID": PARENT}]],
)
def test_a_relationship_of_an_unknown_shape_is_bad_shape(tmp_path: Path, relationships: Any) -> None:
    assert rejected(thread(tmp_path, [user(text("hi"))], relationships=relationships)).code is RejectCode.BAD_SHAPE


# --- tools ------------------------------------------------------------------------------------------------------------


def test_tool_calls_keep_their_results_and_the_run_status_says_the_error(tmp_path: Path) -> None:
    s = session(
        thread(
            tmp_path,
            [
                user(text("go")),
                assistant(
                    {"type": "tool_use", "id": "a", "name": "Bash", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "id": "b", "name": "edit_file", "input": {"path": "x"}},
                    {"type": "tool_use", "id": "c", "name": "Bash", "input": {"cmd": "rm -rf /"}},
                    {"type": "tool_use", "id": "d", "name": "Bash", "input": {"cmd": "sleep 99"}},
                ),
                user(
                    {"type": "tool_result", "toolUseID": "a", "run": {"status": "done", "result": {"output": "x"}}},
                    {"type": "tool_result", "toolUseID": "b", "run": {"status": "error", "error": {"message": "nope"}}},
                    {"type": "tool_result", "toolUseID": "c", "run": {"status": "rejected-by-user"}},
                    {"type": "tool_result", "toolUseID": "d", "run": {"status": "in-progress"}},
                ),
            ],
        )
    )
    calls = {c.call_id: c for c in s.tool_calls}
    assert [c.call_id for c in s.tool_calls] == ["a", "b", "c", "d"]
    assert all(c.turn_index == 1 for c in s.tool_calls)
    assert (calls["a"].input, calls["a"].output, calls["a"].is_error) == ('{"cmd":"ls"}', '{"output":"x"}', False)
    assert (calls["b"].output, calls["b"].is_error) == ("nope", True)
    assert (calls["c"].output, calls["c"].is_error) == (None, True)
    assert calls["d"].is_error is None  # a status no capture shows: unknown, never a guess


def test_a_call_written_twice_is_inconsistent(tmp_path: Path) -> None:
    call = {"type": "tool_use", "id": "a", "name": "Bash", "input": {}}
    outcome = rejected(thread(tmp_path, [user(text("go")), assistant(call), assistant(call)]))
    assert outcome.code is RejectCode.INCONSISTENT_SOURCE and outcome.line == 2


# --- tokens -----------------------------------------------------------------------------------------------------------


def test_usage_is_one_row_per_inference_with_anthropic_cache_writes_kept(tmp_path: Path) -> None:
    usage = {
        "model": "claude-sonnet-4-5-20250929",
        "inputTokens": 12,
        "outputTokens": 80,
        "cacheCreationInputTokens": 5000,
        "cacheReadInputTokens": 300,
        "totalInputTokens": 5312,
        "timestamp": iso(5),
    }
    s = session(thread(tmp_path, [user(text("hi")), assistant(text("Hello."), usage=usage)]))
    [row] = s.usage
    assert (row.turn_index, row.model, row.input_tokens, row.output_tokens) == (1, "claude-sonnet-4-5-20250929", 12, 80)
    assert (row.cache_read_tokens, row.cache_write_tokens, row.timestamp) == (300, 5000, when(5))
    assert s.models == ("claude-sonnet-4-5-20250929",)
    assert s.turns[1].timestamp == when(5) and s.turns[1].model == "claude-sonnet-4-5-20250929"


def test_an_openai_models_uncached_prompt_under_cache_creation_is_priced_as_input(tmp_path: Path) -> None:
    # Amp writes inputTokens 0 and the whole uncached prompt under cacheCreationInputTokens for OpenAI models
    # (docs/agents/amp.md "Tokens"): input, never a cache write, which OpenAI does not bill.
    usage = {
        "model": "gpt-5",
        "inputTokens": 0,
        "outputTokens": 40,
        "cacheCreationInputTokens": 3000,
        "cacheReadInputTokens": 1000,
        "totalInputTokens": 4000,
    }
    s = session(thread(tmp_path, [user(text("hi")), assistant(text("Hello."), usage=usage)]))
    [row] = s.usage
    assert (row.input_tokens, row.cache_write_tokens, row.cache_read_tokens, row.output_tokens) == (
        3000,
        None,
        1000,
        40,
    )
    assert row.input_tokens + row.cache_read_tokens == usage["totalInputTokens"]


def test_each_usage_model_is_priced_under_its_own_provider() -> None:
    from sinks.prices import _match

    assert amp.SPEC.price_provider is None
    assert _match("gpt-5", amp.SPEC.price_provider) is not None
    assert _match("gpt-5", amp.SPEC.price_provider)[0] == "openai"  # type: ignore[index]
    assert _match("claude-sonnet-4-5-20250929", amp.SPEC.price_provider)[0] == "anthropic"  # type: ignore[index]


def test_a_message_without_token_counts_gives_no_usage_row(tmp_path: Path) -> None:
    s = session(thread(tmp_path, [user(text("hi")), assistant(text("Hello."), usage={"model": "gpt-5"})]))
    assert s.usage == () and s.models == ("gpt-5",)


def test_a_token_count_that_is_not_a_count_is_bad_shape(tmp_path: Path) -> None:
    usage = {"model": "gpt-5", "inputTokens": "12"}
    outcome = rejected(thread(tmp_path, [user(text("hi")), assistant(text("Hello."), usage=usage)]))
    assert outcome.code is RejectCode.BAD_SHAPE and outcome.line == 1


# --- times and identity -----------------------------------------------------------------------------------------------


def test_the_start_is_created_and_the_end_the_latest_trace_or_message_time(tmp_path: Path) -> None:
    traces = {"traces": [{"name": "inference", "startTime": iso(1), "endTime": iso(90)}, {"name": "tools"}]}
    s = session(thread(tmp_path, [user(text("hi"), sent=2), assistant(text("ok"))], meta=traces))
    assert (s.started_at, s.ended_at, s.started_at_inferred) == (when(0), when(90), False)


def test_without_created_the_start_is_the_first_message_time(tmp_path: Path) -> None:
    path = thread(tmp_path, [user(text("hi"), sent=7), assistant(text("ok"))])
    document = json.loads(path.read_text())
    del document["created"]
    path.write_text(json.dumps(document))
    assert session(path).started_at == when(7)


def test_the_session_id_title_and_cwd_come_from_the_thread(tmp_path: Path) -> None:
    env = {"initial": {"trees": [{"displayName": "my proj", "uri": "file:///home/u/my%20proj"}]}}
    s = session(thread(tmp_path, [user(text("hi"))], title="  Retry loop ", env=env))
    assert (s.session_id, s.native_id, s.title, s.cwd) == (f"amp-{TID}", TID, "Retry loop", "/home/u/my proj")


def test_a_document_naming_another_thread_is_inconsistent(tmp_path: Path) -> None:
    path = thread(tmp_path, [user(text("hi"))])
    document = json.loads(path.read_text())
    document["id"] = "T-someone-else"
    path.write_text(json.dumps(document))
    assert rejected(path).code is RejectCode.INCONSISTENT_SOURCE


def test_an_empty_thread_has_no_conversation(tmp_path: Path) -> None:
    assert rejected(thread(tmp_path, [])).code is RejectCode.NO_CONVERSATION


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        (["oops"], RejectCode.BAD_SHAPE),
        ([{"content": []}], RejectCode.BAD_SHAPE),
        ([{"role": "user", "content": 42}], RejectCode.BAD_SHAPE),
        ([{"role": "user", "content": [{"text": "no type"}]}], RejectCode.BAD_SHAPE),
        ([{"role": "assistant", "content": [{"type": "tool_use", "name": "Bash"}]}], RejectCode.BAD_SHAPE),
        ([{"role": "user", "content": [{"type": "tool_result", "toolUseID": "a"}]}], RejectCode.BAD_SHAPE),
        ([{"role": "assistant", "content": [], "usage": []}], RejectCode.BAD_SHAPE),
    ],
)
def test_an_unknown_message_shape_is_rejected_with_a_stable_code(
    tmp_path: Path, messages: list[Any], code: RejectCode
) -> None:
    assert rejected(thread(tmp_path, messages)).code is code


# --- rewritten in place ----------------------------------------------------------------------------------------------


def test_a_thread_rewritten_while_it_is_read_is_deferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = thread(tmp_path, [user(text("hi"))])
    real = amp.read_json_document

    def rewrite(target: Any, limits: Limits, **kwargs: Any) -> Any:
        value = real(target, limits, **kwargs)
        document = json.loads(path.read_text())
        document["messages"].append({"role": "assistant", "content": [text("more")]})
        path.write_text(json.dumps(document))  # Amp rewrites the whole file in place
        return value

    monkeypatch.setattr(amp, "read_json_document", rewrite)
    [outcome] = outcomes(path)
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_a_thread_touched_while_it_is_read_is_deferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Same size, new mtime: the second stat compares both.
    path = thread(tmp_path, [user(text("hi"))])
    real = amp.read_json_document

    def touch(target: Any, limits: Limits, **kwargs: Any) -> Any:
        value = real(target, limits, **kwargs)
        os.utime(path, ns=(10**18, 10**18))
        return value

    monkeypatch.setattr(amp, "read_json_document", touch)
    [outcome] = outcomes(path)
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_a_fresh_thread_cut_short_is_deferred_and_an_old_one_rejected(tmp_path: Path) -> None:
    path = thread(tmp_path, [user(text("hi")), assistant(text("Hello there."))])
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    [fresh] = outcomes(path, Limits(settle_seconds=3600.0))
    assert isinstance(fresh, Deferred) and fresh.code is DeferCode.WRITE_IN_PROGRESS
    os.utime(path, (MS0 / 1000, MS0 / 1000))
    assert rejected(path).code is RejectCode.TRUNCATED_TAIL


def test_a_thread_over_the_document_limit_is_rejected_naming_the_limit(tmp_path: Path) -> None:
    outcome = outcomes(thread(tmp_path, [user(text("hi"))]), Limits(settle_seconds=0.0, max_document_bytes=50))[0]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED
    assert "max_document_bytes=50" in outcome.detail


# --- discovery --------------------------------------------------------------------------------------------------------


def test_default_root_is_the_xdg_data_home_or_local_share(tmp_path: Path) -> None:
    assert amp.default_roots(tmp_path, {}) == [tmp_path / ".local/share/amp/threads"]
    assert amp.default_roots(tmp_path, {"XDG_DATA_HOME": "/data"}) == [Path("/data/amp/threads")]
    assert amp.default_roots(tmp_path, {"XDG_DATA_HOME": "relative"}) == [tmp_path / ".local/share/amp/threads"]


def test_discovery_lists_only_thread_files(tmp_path: Path) -> None:
    path = thread(tmp_path, [user(text("hi"))])
    (path.parent / f"{TID}.json.tmp").write_text("{}")
    (path.parent / "index.json").write_text("{}")
    (path.parent / "T-.json").write_text("{}")
    assert [s.path for s in amp.discover(path.parent)] == [str(path)]
    assert [s.path for s in amp.discover(path.parent.parent)] == [str(path)]  # `amp/`: a folder of copies


def test_a_thread_file_is_claimed_by_its_name(tmp_path: Path) -> None:
    path = thread(tmp_path, [user(text("hi"))])
    assert amp.claims(path) is Claim.NAME
    assert amp.claims(path.parent) is Claim.FOLDER
    assert amp.claims(tmp_path / "conversation.json") is None
    assert detect_format(path) == AGENT


def test_the_contract_sample_reads_through_the_registry(tmp_path: Path) -> None:
    home = Path(__file__).parent / "agents" / "amp" / "home"
    sources = {Path(s.path).name: s for s in amp.discover(home / ".local/share/amp/threads")}
    [outcome] = list(read_source(sources["T-019b8b00-0000-7000-8000-0000000000b2.json"], SETTLED))
    assert isinstance(outcome, Loaded)
    [row] = outcome.session.usage
    assert (row.model, row.input_tokens, row.cache_write_tokens) == ("gpt-5", 3000, None)
    assert outcome.session.turns[0].timestamp is None  # an older thread without meta.sentAt
