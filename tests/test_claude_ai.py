"""The Claude.ai export reader's rules (docs/agents/claude_ai.md), one test per rule, on small inline exports."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from extractors.bounded import Limits
from extractors.claude_ai import discover
from extractors.model import Disposition, LinkKind, Loaded, Rejected, Role, Session
from extractors.registry import detect_format, read_source

ROOT = "00000000-0000-4000-8000-000000000000"


def at(second: int) -> str:
    return f"2026-02-03T09:00:{second:02d}.000000Z"


def block(text: str) -> dict[str, Any]:
    return {"start_timestamp": None, "stop_timestamp": None, "flags": None, "type": "text", "text": text,
            "citations": []}  # fmt: skip


def message(
    uuid: str,
    sender: str,
    content: list[dict[str, Any]] | None = None,
    *,
    text: str = "",
    second: int = 1,
    **fields: Any,
) -> dict[str, Any]:
    raw: dict[str, Any] = {"uuid": uuid, "text": text, "sender": sender, "created_at": at(second),
                           "updated_at": at(second), "attachments": [], "files": []}  # fmt: skip
    if content is not None:
        raw["content"] = content
    raw.update(fields)
    return raw


def conversation(messages: Iterable[dict[str, Any]], *, cid: str = "c1", **fields: Any) -> dict[str, Any]:
    conv: dict[str, Any] = {"uuid": cid, "name": "A chat", "created_at": at(0), "updated_at": at(59),
                            "account": {"uuid": "acc"}, "chat_messages": list(messages)}  # fmt: skip
    conv.update(fields)
    return conv


def chat(n: int, question: str = "a question", answer: str = "an answer") -> list[dict[str, Any]]:
    """A question and its answer, linked from the root."""
    return [
        message(f"u{n}", "human", [block(question)], second=2 * n, parent_message_uuid=ROOT),
        message(f"a{n}", "assistant", [block(answer)], second=2 * n + 1, parent_message_uuid=f"u{n}"),
    ]


def write(folder: Path, convs: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "conversations.json"
    path.write_bytes(json.dumps(convs).encode())
    return path


def outcomes(path: Path) -> list[Any]:
    [source] = discover(path)
    return list(read_source(source, Limits()))


def sessions(path: Path) -> list[Session]:
    found = outcomes(path)
    assert all(isinstance(o, Loaded) for o in found), found
    return [o.session for o in found]


def one(tmp_path: Path, conv: dict[str, Any]) -> Session:
    [session] = sessions(write(tmp_path, [conv]))
    return session


def census(session: Session) -> dict[tuple[str, Disposition], int]:
    return {(kind, d): n for (kind, _, d), n in session.census.items()}


def test_a_persons_turn_is_its_text_blocks_and_an_attachments_text_only_a_reference(tmp_path: Path) -> None:
    attachment = {"file_name": "a.py", "file_size": 12, "file_type": "text/x-python", "extracted_content": "PASTED()"}
    conv = conversation([
        message("u", "human", [block("review this")], text="review this", attachments=[attachment],
                files=[{"file_uuid": "f-1", "file_name": "shot.png"}, {"file_name": "a.py"}]),
        message("a", "assistant", [block("looks fine")], second=2),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    user = session.turns[0]
    assert (user.role, user.text) == (Role.USER, "review this")
    assert "PASTED" not in user.text
    assert user.attachments == ("a.py (text/x-python, 12 bytes, 8 characters of extracted text)", "shot.png (file f-1)")


def test_content_blocks_win_over_the_flat_text_which_is_read_only_without_blocks(tmp_path: Path) -> None:
    conv = conversation([
        message("u", "human", [block("typed words")], text="FLAT copy of typed words"),
        message("a", "assistant", [], text="an answer in the flat text only", second=2),
        message("u2", "human", text="no content list at all", second=3),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    assert [t.text for t in session.turns] == [
        "typed words",
        "an answer in the flat text only",
        "no content list at all",
    ]
    assert census(session)[("assistant/text_field", Disposition.TURN)] == 1


def test_thinking_and_token_budget_are_never_turns_and_are_counted(tmp_path: Path) -> None:
    thinking = {"type": "thinking", "thinking": "SECRET reasoning", "summaries": [{"summary": "s"}], "cut_off": False}
    conv = conversation([
        message("u", "human", [block("why?")]),
        message("a", "assistant", [thinking, {"type": "token_budget"}, block("because")], second=2),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    assert [t.text for t in session.turns] == ["why?", "because"]
    assert census(session)[("assistant/thinking", Disposition.HARNESS)] == 1
    assert census(session)[("assistant/token_budget", Disposition.METADATA)] == 1


def test_a_tool_use_and_its_result_are_one_call_matched_by_id_else_by_name(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "q"},
           "start_timestamp": at(3), "stop_timestamp": at(4)}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "name": "web_search", "is_error": False,
              "content": [{"type": "knowledge", "title": "T", "url": "https://x.invalid", "text": "body"}]}  # fmt: skip
    nameless_use = {"type": "tool_use", "id": None, "name": "repl", "input": {"code": "1+1"}}
    nameless_result = {"type": "tool_result", "name": "repl", "is_error": True, "content": "boom"}
    conv = conversation([
        message("u", "human", [block("search")]),
        message("a", "assistant", [use, result, nameless_use, nameless_result, block("done")], second=5),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    first, second = session.tool_calls
    assert (first.call_id, first.name, first.input, first.output, first.is_error) == (
        "toolu_1", "web_search", '{"query":"q"}', "T https://x.invalid\nbody", False,
    )  # fmt: skip
    assert first.turn_index == 1 and first.started_at is not None and first.started_at.second == 3
    assert (second.call_id, second.output, second.is_error) == ("a:2", "boom", True)
    assert [t.text for t in session.turns] == ["search", "done"]


def test_an_artifact_is_a_call_and_a_reference_on_its_turn(tmp_path: Path) -> None:
    spec = {"id": "page", "type": "text/html", "title": "Page", "command": "create", "content": "<p>BODY</p>",
            "version_uuid": "v-1"}  # fmt: skip
    conv = conversation([
        message("u", "human", [block("make a page")]),
        message("a", "assistant", [block("here"), {"type": "tool_use", "id": "t1", "name": "artifacts", "input": spec}],
                second=2),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    assert session.turns[1].attachments == ('artifact page (text/html, "Page", create, version v-1)',)
    assert "BODY" not in session.turns[1].text and "BODY" in (session.tool_calls[0].input or "")


def test_a_tool_result_written_as_a_human_message_is_no_persons_turn(tmp_path: Path) -> None:
    conv = conversation([
        message("u", "human", [block("go")]),
        message("a", "assistant", [{"type": "tool_use", "id": "t1", "name": "view", "input": {}}], second=2),
        message("r", "human", [{"type": "tool_result", "tool_use_id": "t1", "content": [block("RESULT")]}], second=3),
        message("a2", "assistant", [block("seen")], second=4),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    assert [(t.role, t.text) for t in session.turns] == [(Role.USER, "go"), (Role.ASSISTANT, "seen")]
    assert session.tool_calls[0].output == "RESULT" and session.tool_calls[0].ended_at is not None


def test_the_thread_is_walked_from_the_current_leaf_and_another_branch_is_a_linked_session(tmp_path: Path) -> None:
    msgs = [
        *chat(0),
        message("old", "human", [block("first wording")], second=4, parent_message_uuid="a0"),
        message("old-a", "assistant", [block("answer to it")], second=5, parent_message_uuid="old"),
        message("new", "human", [block("second wording")], second=6, parent_message_uuid="a0"),
        message("new-a", "assistant", [block("answer to that")], second=7, parent_message_uuid="new"),
    ]
    main, branch = sessions(write(tmp_path, [conversation(msgs, current_leaf_message_uuid="old-a")]))
    assert [t.text for t in main.turns] == ["a question", "an answer", "first wording", "answer to it"]
    assert [t.index for t in main.turns] == [0, 1, 2, 3]
    assert branch.session_id == "claude_ai-c1-branch-new-a" and [t.index for t in branch.turns] == [4, 5]
    assert branch.links[0].other_session_id == "claude_ai-c1" and branch.links[0].kind is LinkKind.FORK
    assert branch.started_at.second == 6 and main.started_at.second == 0


def test_without_a_current_leaf_the_last_leaf_in_array_order_is_the_thread(tmp_path: Path) -> None:
    msgs = [
        *chat(0),
        message("x", "assistant", [block("a regenerated answer")], second=2, parent_message_uuid="u0"),
    ]
    main, branch = sessions(write(tmp_path, [conversation(msgs)]))
    assert [t.text for t in main.turns] == ["a question", "a regenerated answer"]
    assert [t.text for t in branch.turns] == ["an answer"] and branch.session_id == "claude_ai-c1-branch-a0"


def test_a_branch_with_nothing_said_is_no_session_and_is_counted_abandoned(tmp_path: Path) -> None:
    msgs = [*chat(0), message("e", "assistant", [], second=2, parent_message_uuid="u0")]
    [main] = sessions(write(tmp_path, [conversation(msgs, current_leaf_message_uuid="a0")]))
    assert census(main)[("abandoned/assistant/text_field", Disposition.SKIPPED)] == 1


def test_without_parent_links_the_array_is_one_thread_in_order(tmp_path: Path) -> None:
    msgs = [message("u", "human", text="one"), message("a", "assistant", text="two", second=2)]
    session = one(tmp_path, conversation(msgs))
    assert [(t.index, t.text) for t in session.turns] == [(0, "one"), (1, "two")] and not session.links


@pytest.mark.parametrize(
    ("msgs", "leaf"),
    [
        ([message("u", "human", [block("q")], parent_message_uuid=ROOT)], "nowhere"),
        ([message("u", "human", [block("q")], parent_message_uuid="a"),
          message("a", "assistant", [block("r")], parent_message_uuid="u")], None),
        ([message("u", "human", [block("q")], parent_message_uuid=ROOT),
          message("u", "assistant", [block("r")], parent_message_uuid=ROOT)], None),
    ],
    ids=["unknown leaf", "cycle", "two messages with one uuid"],
)  # fmt: skip
def test_an_unknown_leaf_a_cycle_or_a_repeated_uuid_is_an_undecidable_thread(
    tmp_path: Path, msgs: list[dict[str, Any]], leaf: str | None
) -> None:
    conv = conversation(msgs, **({"current_leaf_message_uuid": leaf} if leaf else {}))
    [rejected] = outcomes(write(tmp_path, [conv]))
    assert isinstance(rejected, Rejected) and rejected.code.value == "undecidable_thread"
    assert rejected.session_hint == "claude_ai-c1"


def test_an_unknown_block_type_or_sender_is_skipped_and_counted_never_a_turn(tmp_path: Path) -> None:
    conv = conversation([
        message("u", "human", [block("q"), {"type": "voice_note", "text": "HEARD"}, {"type": "hologram"}]),
        message("s", "system", [block("SYSTEM words")], second=2),
        message("a", "assistant", [block("r")], second=3),
    ])  # fmt: skip
    session = one(tmp_path, conv)
    assert [t.text for t in session.turns] == ["q", "r"]
    counted = census(session)
    assert counted[("human/hologram", Disposition.SKIPPED)] == 1
    assert counted[("human/voice_note", Disposition.SKIPPED)] == 1
    assert counted[("system/message", Disposition.SKIPPED)] == 1


def test_times_come_from_created_at_and_a_conversation_without_any_is_rejected(tmp_path: Path) -> None:
    timed = conversation(chat(0), cid="timed", created_at=None, updated_at=None)
    untimed = conversation([message("u", "human", [block("q")], created_at=None)], cid="none", created_at=None)
    found = outcomes(write(tmp_path, [timed, untimed]))
    assert isinstance(found[0], Loaded) and found[0].session.started_at.second == 0
    assert found[0].session.ended_at is not None and found[0].session.ended_at.second == 1
    assert [t.timestamp.second for t in found[0].session.turns if t.timestamp] == [0, 1]
    assert isinstance(found[1], Rejected) and found[1].code.value == "missing_timestamp"
    assert not found[0].session.started_at_inferred


def test_an_empty_conversation_is_no_conversation_and_the_others_load(tmp_path: Path) -> None:
    found = outcomes(write(tmp_path, [conversation([], cid="empty"), conversation(chat(0), cid="full")]))
    assert isinstance(found[0], Rejected) and found[0].code.value == "no_conversation"
    assert found[0].line == 0 and found[0].session_hint == "claude_ai-empty"
    assert isinstance(found[1], Loaded) and found[1].session.session_id == "claude_ai-full"


@pytest.mark.parametrize(
    ("conv", "code"),
    [
        ({"uuid": "g", "mapping": {}, "current_node": None}, "bad_shape"),  # a ChatGPT conversation
        ({"name": "no uuid", "chat_messages": []}, "missing_session_id"),
        (conversation([message("u", "human", [{"text": "no type"}])]), "bad_shape"),
        (conversation([message("u", "human", [block("q")], attachments="a.txt")]), "bad_shape"),
        (conversation([{"uuid": "u", "text": "q"}]), "bad_shape"),  # no sender
    ],
    ids=["chatgpt conversation", "no uuid", "block without type", "attachments not a list", "no sender"],
)
def test_a_malformed_conversation_is_rejected_with_a_stable_code(tmp_path: Path, conv: Any, code: str) -> None:
    [rejected] = outcomes(write(tmp_path, [conv]))
    assert isinstance(rejected, Rejected) and rejected.code.value == code
    if "mapping" in conv:
        assert "--format chatgpt" in rejected.detail


def test_no_token_usage_is_ever_reported(tmp_path: Path) -> None:
    assert one(tmp_path, conversation(chat(0))).usage == ()


def test_the_zip_is_read_in_place_and_its_users_and_projects_files_are_never_sessions(tmp_path: Path) -> None:
    archive = tmp_path / "data-2026-02-03-batch-0000.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations.json", json.dumps([conversation(chat(0))]))
        zf.writestr("users.json", json.dumps([{"uuid": "acc", "email_address": "PERSON@example.invalid"}]))
        zf.writestr("projects.json", json.dumps([{"uuid": "p", "name": "P"}]))
    [source] = discover(tmp_path)
    found = list(read_source(source, Limits()))
    assert [o.session.session_id for o in found if isinstance(o, Loaded)] == ["claude_ai-c1"]
    assert "PERSON" not in repr(found)
    assert detect_format(archive) == "claude_ai"


def test_detection_tells_a_claude_ai_export_from_a_chatgpt_one(tmp_path: Path) -> None:
    claude = write(tmp_path / "claude", [conversation(chat(0))])
    (claude.parent / "users.json").write_text("[]", encoding="utf-8")
    gpt = write(tmp_path / "gpt", [])
    (gpt.parent / "user.json").write_text("{}", encoding="utf-8")
    bare = tmp_path / "bare.zip"
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr("conversations.json", "[]")
    assert detect_format(claude) == "claude_ai" and detect_format(claude.parent) == "claude_ai"
    assert detect_format(gpt) == "chatgpt" and detect_format(bare) == "chatgpt"
    assert detect_format(gpt, "claude-ai") == "claude_ai"


def test_the_bench_generator_writes_the_same_bytes_for_a_seed_and_every_conversation_loads(tmp_path: Path) -> None:
    from bench.claude_ai_gen import chunks

    raw = b"".join(chunks(0.3, 3))
    assert raw == b"".join(chunks(0.3, 3)) and b"\n" not in raw  # one line, like a real export
    path = tmp_path / "conversations.json"
    path.write_bytes(raw)
    found = outcomes(path)
    assert found and all(isinstance(o, Loaded) for o in found), [o for o in found if not isinstance(o, Loaded)]
    loaded = [o.session for o in found if isinstance(o, Loaded)]
    assert any(s.links for s in loaded) and any(s.tool_calls for s in loaded)
    assert any(t.attachments for s in loaded for t in s.turns)


def test_backfill_in_a_subprocess_detects_the_zip_and_a_dry_run_counts_the_branch_and_writes_nothing(
    tmp_path: Path,
) -> None:
    from tests.test_cli import cli

    msgs = [*chat(0), message("x", "assistant", [block("retried")], second=2, parent_message_uuid="u0")]
    archive = tmp_path / "data-2026-02-03-batch-0000.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations.json", json.dumps([conversation(msgs)]))
        zf.writestr("users.json", "[]")
    detected = cli("backfill", str(archive), "--json", "--data-dir", str(tmp_path / "data"))
    assert detected.returncode == 0, detected.stderr
    doc = json.loads(detected.stdout)
    assert (doc["format"], doc["sessions"], doc["turns"]) == ("claude_ai", 2, 3)  # the thread and the old answer
    named = cli("backfill", "claude-ai", str(archive), "--data-dir", str(tmp_path / "data"))
    assert named.returncode == 0 and "Dry run (claude_ai" in named.stdout, named.stdout + named.stderr
    assert not (tmp_path / "data").exists()


def test_a_branch_without_message_times_starts_at_the_conversation_and_a_file_alone_is_a_turn(tmp_path: Path) -> None:
    msgs = [
        *chat(0),
        message("x", "human", [], second=2, parent_message_uuid="a0", created_at=None,
                files=[{"file_uuid": "f-9", "file_name": "photo.jpg"}]),
    ]  # fmt: skip
    main, branch = sessions(write(tmp_path, [conversation(msgs, current_leaf_message_uuid="a0")]))
    assert branch.started_at == main.started_at and branch.ended_at is None
    assert [(t.role, t.text, t.attachments) for t in branch.turns] == [(Role.USER, "", ("photo.jpg (file f-9)",))]
