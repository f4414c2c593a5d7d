"""ChatGPT export extractor: the thread, the turn rule, tool calls, times and per-conversation rejections."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from extractors import chatgpt
from extractors.bounded import Limits
from extractors.errors import RejectCode
from extractors.model import Agent, Disposition, Loaded, Outcome, Rejected, Role, Session
from tests.support import SETTLED, read_one

T0 = 1_700_000_000.0


# ---------------------------------------------------------------- builders (also used by the other chatgpt tests)
def message(
    role: str,
    content: dict[str, Any],
    *,
    t: float | None = T0,
    meta: dict[str, Any] | None = None,
    recipient: str = "all",
    channel: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A `message` object as the export writes it."""
    return {
        "id": f"m-{role}-{t}",
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": t,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1.0,
        "metadata": meta or {},
        "recipient": recipient,
        "channel": channel,
    }


def text(role: str, *parts: Any, **kw: Any) -> dict[str, Any]:
    return message(role, {"content_type": "text", "parts": list(parts)}, **kw)


def conversation(
    messages: Iterable[dict[str, Any] | None],
    *,
    cid: str = "c1",
    branches: dict[str, tuple[str, dict[str, Any] | None]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A linear thread root `n0` -> `n1` -> ... (current_node = the last), plus `branches` {id: (parent, message)}."""
    mapping: dict[str, dict[str, Any]] = {"n0": {"id": "n0", "message": None, "parent": None, "children": []}}
    last = "n0"
    for i, msg in enumerate(messages, start=1):
        node = f"n{i}"
        mapping[node] = {"id": node, "message": msg, "parent": last, "children": []}
        mapping[last]["children"].append(node)
        last = node
    for node, (parent, msg) in (branches or {}).items():
        mapping[node] = {"id": node, "message": msg, "parent": parent, "children": []}
        mapping[parent]["children"].append(node)
    conv: dict[str, Any] = {
        "title": "A title",
        "create_time": T0 - 10,
        "update_time": T0 + 1000,
        "mapping": mapping,
        "current_node": last,
        "conversation_id": cid,
        "id": cid,
        "default_model_slug": "gpt-4o",
        "is_archived": False,
    }
    conv.update(fields)
    return conv


def write_export(path: Path, conversations: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(conversations))
    return path


def outcomes(tmp_path: Path, conversations: Any, limits: Limits = SETTLED) -> list[Outcome]:
    return read_one(Agent("chatgpt"), write_export(tmp_path / "conversations.json", conversations), limits)


def session(tmp_path: Path, conv: dict[str, Any]) -> Session:
    found = outcomes(tmp_path, [conv])
    assert len(found) == 1 and isinstance(found[0], Loaded), found
    return found[0].session


def rejected(tmp_path: Path, conv: Any) -> Rejected:
    found = outcomes(tmp_path, [conv])
    assert len(found) == 1 and isinstance(found[0], Rejected), found
    return found[0]


def turns(s: Session) -> list[tuple[int, str, str]]:
    return [(t.index, t.role.value, t.text) for t in s.turns]


# ---------------------------------------------------------------- module contract
def test_backfill_only_module_contract() -> None:
    assert chatgpt.SPEC.name == Agent("chatgpt") and chatgpt.SPEC.nightly is False and chatgpt.SPEC.parser_version
    assert chatgpt.default_roots(Path("/home/x"), {"HOME": "/home/x"}) == []


def test_discover_file_and_folder(tmp_path: Path) -> None:
    write_export(tmp_path / "conversations.json", [])
    (tmp_path / "export.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (tmp_path / "user.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    write_export(tmp_path / "sub" / "conversations.json", [])
    found = list(chatgpt.discover(tmp_path))
    assert [Path(s.path).name for s in found] == ["conversations.json", "export.zip"]
    assert {s.kind for s in found} == {"export"} and found[0].size == 2
    single = list(chatgpt.discover(tmp_path / "user.json"))  # an explicit file is taken as given
    assert [Path(s.path).name for s in single] == ["user.json"]
    assert list(chatgpt.discover(tmp_path / "missing")) == []


# ---------------------------------------------------------------- thread and turn index
def test_ok_linear_thread_indices_are_thread_positions(tmp_path: Path) -> None:
    conv = conversation(
        [
            text("system", "", t=None, meta={"is_visually_hidden_from_conversation": True}),
            text("user", "Hello?", t=T0),
            text("assistant", "Hi!", t=T0 + 5, meta={"model_slug": "gpt-4o-mini"}),
        ],
        title="Greeting",
        is_archived=True,
    )
    s = session(tmp_path, conv)
    assert s.session_id == "chatgpt-c1" and s.native_id == "c1"
    assert turns(s) == [(2, "user", "Hello?"), (3, "assistant", "Hi!")]  # root = 0, hidden system = 1
    assert s.turns[1].model == "gpt-4o-mini" and s.turns[0].model is None
    assert s.turns[0].timestamp == datetime.fromtimestamp(T0, tz=UTC)
    assert s.title == "Greeting" and s.archived is True
    assert s.models == ("gpt-4o", "gpt-4o-mini")  # default_model_slug, then per-message slugs in order
    assert s.census["node/no_message", "", Disposition.SKIPPED] == 1
    assert s.census["system/text", "", Disposition.HARNESS] == 1
    assert sum(s.census.values()) == len(conv["mapping"]) + 1  # every node once, plus the conversation


def test_ok_branches_edits_and_regenerations_are_not_turns(tmp_path: Path) -> None:
    # n1 user -> n2 answer (regenerated: n2b is the older answer); n3 user edited (n3b the first version + its answer)
    conv = conversation(
        [text("user", "Q1"), text("assistant", "A1 new"), text("user", "Q2 edited"), text("assistant", "A2")],
        branches={
            "n2b": ("n1", text("assistant", "A1 old")),
            "n3b": ("n2", text("user", "Q2 first")),
            "n4b": ("n3b", text("assistant", "A2 to first")),
        },
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(1, "user", "Q1"), (2, "assistant", "A1 new"), (3, "user", "Q2 edited"), (4, "assistant", "A2")]
    assert s.census["node/off_thread", "", Disposition.SKIPPED] == 3


def test_ok_current_node_on_an_older_branch_is_followed(tmp_path: Path) -> None:
    conv = conversation(
        [text("user", "Q"), text("assistant", "A new")], branches={"n2b": ("n1", text("assistant", "A old"))}
    )
    conv["current_node"] = "n2b"
    assert turns(session(tmp_path, conv)) == [(1, "user", "Q"), (2, "assistant", "A old")]


def test_reject_undecidable_thread_cycle(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q"), text("assistant", "A")])
    conv["mapping"]["n1"]["parent"] = "n2"  # n2 -> n1 -> n2 -> ...
    bad = rejected(tmp_path, conv)
    assert bad.code is RejectCode.UNDECIDABLE_THREAD and "cycle" in bad.detail
    assert bad.session_hint == "chatgpt-c1" and bad.line == 0 and bad.offset == 1


def test_reject_undecidable_thread_dangling_parent(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q"), text("assistant", "A")])
    conv["mapping"]["n1"]["parent"] = "gone"
    bad = rejected(tmp_path, conv)
    assert bad.code is RejectCode.UNDECIDABLE_THREAD and "dangling" in bad.detail


def test_reject_undecidable_thread_unknown_current_node(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q")], current_node="nowhere")
    assert rejected(tmp_path, conv).code is RejectCode.UNDECIDABLE_THREAD


def test_missing_current_node_takes_the_only_leaf_else_rejects(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q"), text("assistant", "A")])
    del conv["current_node"]
    assert turns(session(tmp_path, conv)) == [(1, "user", "Q"), (2, "assistant", "A")]
    branched = conversation([text("user", "Q"), text("assistant", "A")], branches={"x": ("n1", text("assistant", "B"))})
    branched["current_node"] = None
    bad = rejected(tmp_path / "b", branched)
    assert bad.code is RejectCode.UNDECIDABLE_THREAD and "2 leaves" in bad.detail


# ---------------------------------------------------------------- what is a turn
def test_hidden_and_custom_instructions_are_not_turns(tmp_path: Path) -> None:
    hidden = {"is_visually_hidden_from_conversation": True}
    custom = {"content_type": "user_editable_context", "user_profile": "I am a dev.", "user_instructions": "Be terse."}
    conv = conversation(
        [
            message("user", custom, meta={**hidden, "is_user_system_message": True}),
            text("user", "injected context", meta={"is_user_system_message": True}),
            text("user", "hidden user text", meta=hidden),
            text("assistant", "hidden answer", meta=hidden),
            text("user", "real question"),
            message("assistant", {"content_type": "model_editable_context", "model_set_context": "memory"}),
            text("assistant", "real answer"),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(5, "user", "real question"), (7, "assistant", "real answer")]
    assert s.census["user/user_editable_context", "", Disposition.HARNESS] == 1
    assert s.census["user/text/hidden", "", Disposition.HARNESS] == 2
    assert s.census["assistant/text/hidden", "", Disposition.HARNESS] == 1
    assert s.census["assistant/model_editable_context", "", Disposition.HARNESS] == 1


def test_reasoning_preambles_and_commentary_are_not_the_answer(tmp_path: Path) -> None:
    thoughts = {"content_type": "thoughts", "thoughts": [{"summary": "s", "content": "c", "finished": True}]}
    conv = conversation(
        [
            text("user", "Q"),
            message("assistant", thoughts),
            message("assistant", {"content_type": "reasoning_recap", "content": "Thought for 7s"}),
            text("assistant", "Let me check.", channel="commentary", meta={"is_thinking_preamble_message": True}),
            text("assistant", "Preamble flagged", meta={"is_thinking_preamble_message": True}),
            text("assistant", "The answer.", channel="final"),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(1, "user", "Q"), (6, "assistant", "The answer.")]
    assert s.census["assistant/thoughts", "", Disposition.HARNESS] == 1
    assert s.census["assistant/reasoning_recap", "", Disposition.HARNESS] == 1
    assert s.census["assistant/text/commentary", "", Disposition.HARNESS] == 1


def test_multimodal_parts_images_audio_and_uploads(tmp_path: Path) -> None:
    image = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-abc", "size_bytes": 128}
    spoken = {"content_type": "audio_transcription", "text": "spoken words", "direction": "in"}
    av = {
        "content_type": "real_time_user_audio_video_asset_pointer",
        "audio_asset_pointer": {"asset_pointer": "sediment://file_aud", "size_bytes": 99, "format": "wav"},
    }
    upload = {"attachments": [{"id": "f1", "name": "notes.txt", "mime_type": "text/plain", "size": 42}]}
    conv = conversation(
        [
            message(
                "user", {"content_type": "multimodal_text", "parts": [image, "Look at this", spoken, av]}, meta=upload
            ),
            message("assistant", {"content_type": "multimodal_text", "parts": ["", image]}),  # image only: dropped
            text("assistant", "Seen."),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(1, "user", "Look at this\nspoken words"), (3, "assistant", "Seen.")]
    assert s.turns[0].attachments == (
        "file-service://file-abc (image_asset_pointer, 128 bytes)",
        "sediment://file_aud (real_time_user_audio_video_asset_pointer, wav, 99 bytes)",
        "notes.txt (text/plain, 42 bytes)",
    )


def test_citation_markers_are_removed(tmp_path: Path) -> None:
    answer = (
        "Paris is the capital\ue200cite\ue202turn0search0\ue201. "
        "\ue203Quoted\ue204 fact\ue200filecite\ue202turn0file0\ue201"
    )
    s = session(tmp_path, conversation([text("user", "Q"), text("assistant", answer)]))
    assert s.turns[1].text == "Paris is the capital. Quoted fact"


def test_empty_nodes_dropped_with_index_kept(tmp_path: Path) -> None:
    s = session(
        tmp_path,
        conversation([text("user", "Q"), text("assistant", ""), text("assistant", "  \n"), text("assistant", "A")]),
    )
    assert turns(s) == [(1, "user", "Q"), (4, "assistant", "A")]


def test_unknown_content_type_and_role_are_skipped_and_counted(tmp_path: Path) -> None:
    conv = conversation(
        [
            text("user", "Q"),
            message("assistant", {"content_type": "canvas_textdoc_v9", "blob": 1}),
            text("critic", "who?"),
            text("assistant", "A"),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(1, "user", "Q"), (4, "assistant", "A")]
    assert s.census["assistant/canvas_textdoc_v9", "", Disposition.SKIPPED] == 1
    assert s.census["critic/text", "", Disposition.SKIPPED] == 1


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ({"content_type": "text", "parts": "not a list"}, "parts list"),
        ({"content_type": "multimodal_text"}, "parts list"),
        ({"content_type": "text", "parts": [1]}, "neither text nor an object"),
        ({"content_type": "code", "language": "python"}, "text string"),
        ({"parts": ["no type"]}, "content_type"),
    ],
)
def test_reject_bad_shape_known_content_type(tmp_path: Path, content: dict[str, Any], why: str) -> None:
    bad = rejected(tmp_path, conversation([text("user", "Q"), message("assistant", content, recipient="python")]))
    assert bad.code is RejectCode.BAD_SHAPE and why in bad.detail and bad.session_hint == "chatgpt-c1"


def test_reject_bad_shape_mapping_and_nodes(tmp_path: Path) -> None:
    assert rejected(tmp_path / "a", {"id": "x", "create_time": T0}).code is RejectCode.BAD_SHAPE
    conv = conversation([text("user", "Q")])
    conv["mapping"]["n1"]["message"] = "text"
    assert rejected(tmp_path / "b", conv).code is RejectCode.BAD_SHAPE
    assert rejected(tmp_path / "c", ["not", "an", "object"]).code is RejectCode.BAD_SHAPE


def test_reject_missing_session_id(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q")])
    del conv["conversation_id"]
    conv["id"] = ""
    bad = rejected(tmp_path, conv)
    assert bad.code is RejectCode.MISSING_SESSION_ID and bad.session_hint is None


def test_id_falls_back_to_id_field(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q")], cid="abc")
    del conv["conversation_id"]
    assert session(tmp_path, conv).session_id == "chatgpt-abc"


def test_reject_no_conversation_when_nothing_visible(tmp_path: Path) -> None:
    conv = conversation([text("system", "", t=None)])
    assert rejected(tmp_path, conv).code is RejectCode.NO_CONVERSATION


# ---------------------------------------------------------------- times
def test_null_times_message_and_conversation_level(tmp_path: Path) -> None:
    conv = conversation(
        [text("user", "Q", t=None), text("assistant", "A", t=T0 + 50)], create_time=None, update_time=None
    )
    conv["mapping"]["x"] = {"id": "x", "parent": "n1", "children": [], "message": text("assistant", "old", t=T0 + 10)}
    s = session(tmp_path, conv)
    assert s.turns[0].timestamp is None  # downstream uses the session start
    assert s.started_at == datetime.fromtimestamp(T0 + 10, tz=UTC)  # min over every message, branches too
    assert s.ended_at == datetime.fromtimestamp(T0 + 50, tz=UTC)


def test_conversation_times_win(tmp_path: Path) -> None:
    s = session(tmp_path, conversation([text("user", "Q", t=T0)]))
    assert s.started_at == datetime.fromtimestamp(T0 - 10, tz=UTC)
    assert s.ended_at == datetime.fromtimestamp(T0 + 1000, tz=UTC)


def test_reject_missing_timestamp(tmp_path: Path) -> None:
    conv = conversation([text("user", "Q", t=None)], create_time=None, update_time="yesterday")
    bad = rejected(tmp_path, conv)
    assert bad.code is RejectCode.MISSING_TIMESTAMP and bad.session_hint == "chatgpt-c1"


# ---------------------------------------------------------------- tool calls
def test_tool_calls_code_and_outputs(tmp_path: Path) -> None:
    ok = {"aggregate_result": {"status": "success"}}
    failed = {"aggregate_result": {"status": "failed_with_in_kernel_exception"}}
    conv = conversation(
        [
            text("user", "Plot it"),
            message("assistant", {"content_type": "code", "language": "python", "text": "1/0"}, recipient="python"),
            message(
                "tool",
                {"content_type": "execution_output", "text": "ZeroDivisionError"},
                name="python",
                meta=failed,
                t=T0 + 3,
            ),
            message("assistant", {"content_type": "code", "text": "print(1)"}, recipient="python", t=T0 + 4),
            message("tool", {"content_type": "execution_output", "text": "1"}, name="python", meta=ok, t=T0 + 5),
            text("assistant", '{"q": "x"}', recipient="web.run"),
            message(
                "tool", {"content_type": "tether_browsing_display", "result": "page", "summary": "s"}, name="web.run"
            ),
            message("tool", {"content_type": "tether_quote", "text": "quoted", "url": "u"}, name="web.run"),
            text("assistant", "dalle prompt", recipient="dalle.text2im"),
            message("tool", {"content_type": "system_error", "name": "err", "text": "blocked"}, name="dalle.text2im"),
            message("tool", {"content_type": "text", "parts": ["Reasoned for 5m"]}, name="a8km123"),
            text("assistant", "Done."),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [(1, "user", "Plot it"), (12, "assistant", "Done.")]
    got = [(c.call_id, c.turn_index, c.name, c.input, c.output, c.is_error) for c in s.tool_calls]
    assert got == [
        ("n2", 2, "python", "1/0", "ZeroDivisionError", True),
        ("n4", 4, "python", "print(1)", "1", False),
        ("n6", 6, "web.run", '{"q": "x"}', "page\nquoted", None),
        ("n9", 9, "dalle.text2im", "dalle prompt", "blocked", True),
        ("n11", 11, "a8km123", None, "Reasoned for 5m", None),  # an output without a call of its own
    ]
    assert s.tool_calls[0].started_at == datetime.fromtimestamp(T0, tz=UTC)
    assert s.tool_calls[0].ended_at == datetime.fromtimestamp(T0 + 3, tz=UTC)
    assert s.census["assistant/code/tool_call", "", Disposition.TOOL] == 2
    assert s.census["tool/execution_output", "", Disposition.TOOL] == 2


def test_tool_io_is_clipped(tmp_path: Path) -> None:
    conv = conversation(
        [
            text("user", "Q"),
            message("assistant", {"content_type": "code", "text": "x" * 5000}, recipient="python"),
            message("tool", {"content_type": "execution_output", "text": "y" * 5000}, name="python"),
        ]
    )
    found = outcomes(tmp_path, [conv], Limits(settle_seconds=0, max_field_bytes=100))
    assert isinstance(found[0], Loaded)
    call = found[0].session.tool_calls[0]
    assert call.input is not None and call.output is not None
    assert call.input.startswith("x" * 100 + "\n[… clipped: 5000 bytes") and len(call.output) < 200


# ---------------------------------------------------------------- per-conversation outcomes
def test_one_malformed_conversation_among_good_ones(tmp_path: Path) -> None:
    good1 = conversation([text("user", "one")], cid="a")
    bad = conversation([text("user", "two")], cid="b")
    bad["mapping"]["n1"]["message"]["content"]["parts"] = {"not": "a list"}
    good2 = conversation([text("user", "three")], cid="c")
    path = write_export(tmp_path / "conversations.json", [good1, bad, good2])
    found = read_one(Agent("chatgpt"), path)
    assert [type(o).__name__ for o in found] == ["Loaded", "Rejected", "Loaded"]
    rej = found[1]
    assert isinstance(rej, Rejected)
    assert (rej.code, rej.line, rej.session_hint) == (RejectCode.BAD_SHAPE, 1, "chatgpt-b")
    raw = path.read_bytes()
    assert rej.offset == raw.index(orjson.dumps(bad))  # the conversation's first byte in the file


def test_single_object_is_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_bytes(orjson.dumps(conversation([text("user", "solo")], cid="solo")))
    found = read_one(Agent("chatgpt"), path)
    assert len(found) == 1 and isinstance(found[0], Loaded) and found[0].session.session_id == "chatgpt-solo"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"this is not json", RejectCode.INVALID_JSON),
        (b"", RejectCode.INVALID_JSON),
        (b"42", RejectCode.BAD_SHAPE),
        (b'"a string"', RejectCode.BAD_SHAPE),
        (b"[]", RejectCode.NO_CONVERSATION),
        (b"\xff\xfe[\x00", RejectCode.INVALID_UTF8),  # UTF-16
    ],
)
def test_reject_source_not_an_export(tmp_path: Path, raw: bytes, code: RejectCode) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(raw)
    found = read_one(Agent("chatgpt"), path)
    assert len(found) == 1 and isinstance(found[0], Rejected) and found[0].code is code


def test_invalid_json_mid_array_keeps_earlier_and_rejects_the_rest(tmp_path: Path) -> None:
    first = orjson.dumps(conversation([text("user", "one")], cid="a"))
    broken = b'{"conversation_id": "b", "mapping": {tru}}'
    path = tmp_path / "conversations.json"
    path.write_bytes(b"[" + first + b", " + broken + b", " + orjson.dumps(conversation([text("user", "x")])) + b"]")
    found = read_one(Agent("chatgpt"), path)
    assert [type(o).__name__ for o in found] == ["Loaded", "Rejected"]
    rej = found[1]
    assert isinstance(rej, Rejected) and rej.code is RejectCode.INVALID_JSON
    assert rej.offset == 1 + len(first) + 2 and f"byte {rej.offset}" in rej.detail


def test_truncated_export_rejects_the_tail(tmp_path: Path) -> None:
    whole = orjson.dumps([conversation([text("user", "one")], cid="a"), conversation([text("user", "two")], cid="b")])
    path = tmp_path / "conversations.json"
    path.write_bytes(whole[: len(whole) - 40])
    found = read_one(Agent("chatgpt"), path)
    assert [type(o).__name__ for o in found] == ["Loaded", "Rejected"]
    assert isinstance(found[1], Rejected) and found[1].code is RejectCode.TRUNCATED_TAIL


def test_oversized_conversation_is_rejected_and_reading_goes_on(tmp_path: Path) -> None:
    big = conversation([text("user", "x" * 50_000)], cid="big")
    found = outcomes(
        tmp_path,
        [conversation([text("user", "a")], cid="a"), big, conversation([text("user", "c")], cid="c")],
        Limits(settle_seconds=0, max_conversation_bytes=10_000),
    )
    assert [type(o).__name__ for o in found] == ["Loaded", "Rejected", "Loaded"]
    rej = found[1]
    assert isinstance(rej, Rejected) and rej.code is RejectCode.LIMIT_EXCEEDED
    assert rej.session_hint == "chatgpt-big"  # read from the fields around the skipped mapping
    assert "max_conversation_bytes=10000" in rej.detail


def test_reject_too_many_nodes(tmp_path: Path) -> None:
    conv = conversation([text("user", str(i)) for i in range(10)])
    found = outcomes(tmp_path, [conv], Limits(settle_seconds=0, max_records=5))
    assert isinstance(found[0], Rejected) and found[0].code is RejectCode.LIMIT_EXCEEDED


def test_id_stability_when_a_newer_export_appends(tmp_path: Path) -> None:
    msgs = [text("system", "", t=None), text("user", "Q1"), text("assistant", "A1")]
    before = session(tmp_path / "old", conversation(msgs))
    after = session(tmp_path / "new", conversation([*msgs, text("user", "Q2"), text("assistant", "A2")]))
    assert turns(after)[: len(before.turns)] == turns(before)
    assert [t.index for t in after.turns] == [2, 3, 4, 5]


def test_roles_are_user_and_assistant_only(tmp_path: Path) -> None:
    s = session(tmp_path, conversation([text("user", "Q"), text("assistant", "A")]))
    assert {t.role for t in s.turns} == {Role.USER, Role.ASSISTANT}


def test_ok_harness_agent_mode_auto_proceed_continue_is_not_a_person_turn(tmp_path: Path) -> None:
    # Shape of a real agent-mode export: ChatGPT writes a role-user "Continue" itself between two agent steps.
    auto = {"is_auto_proceed_message": True, "system_hints": ["agent"], "can_save": False}
    conv = conversation(
        [
            text("user", "Write chapters 5 and 6"),
            text("assistant", "Chapter 5 ..."),
            text("user", "Continue", meta=auto),
            text("assistant", "Chapter 6 ..."),
        ]
    )
    s = session(tmp_path, conv)
    assert turns(s) == [
        (1, "user", "Write chapters 5 and 6"),
        (2, "assistant", "Chapter 5 ..."),
        (4, "assistant", "Chapter 6 ..."),
    ]
    assert s.census["user/text/auto_proceed", "", Disposition.HARNESS] == 1
