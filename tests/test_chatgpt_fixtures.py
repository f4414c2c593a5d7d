"""ChatGPT extractor over the shared fixtures (/work/shared/fixtures/chatgpt): every file an outcome; golden output."""

from __future__ import annotations

from datetime import UTC, datetime

from extractors.errors import RejectCode
from extractors.model import Agent, Disposition, Loaded, Rejected, Role
from tests.support import SHARED_FIXTURES, assert_golden, loaded_sessions, outcomes_under, shared_fixtures

ROOT = SHARED_FIXTURES / "chatgpt"
NATIVE = "Sinity__polylogue/native-conversation-v1.json"

# Every file under the shared chatgpt folder, with the outcome it must reach (none is "not a source").
EXPECTED: dict[str, type[Loaded] | RejectCode] = {NATIVE: Loaded}


def _outcomes() -> dict[str, list[Loaded | Rejected]]:
    shared_fixtures()
    # Each file is given explicitly, as `transcripts backfill chatgpt FILE` does: discover(folder) lists only
    # `conversations.json` and `*.zip`, and these fixtures are per-conversation dumps with other names.
    found: dict[str, list[Loaded | Rejected]] = {}
    for path in sorted(p for p in ROOT.rglob("*") if p.is_file()):
        for rel, outs in outcomes_under(Agent("chatgpt"), path).items():
            found[path.relative_to(ROOT).as_posix()] = [o for o in outs if isinstance(o, Loaded | Rejected)]
            assert rel == ".", rel
    return found


def test_every_shared_fixture_reaches_its_outcome() -> None:
    found = _outcomes()
    assert set(found) == set(EXPECTED)
    for name, expected in EXPECTED.items():
        outs = found[name]
        if expected is Loaded:
            assert outs and all(isinstance(o, Loaded) for o in outs), (name, outs)
        else:
            assert [o.code for o in outs if isinstance(o, Rejected)] == [expected], (name, outs)


def test_native_fixture_counts() -> None:
    """Counts verified by reading the hand-written file (docs/agents/chatgpt.md, PROVENANCE: hand-written realistic):

    mapping has 9 nodes; current_node "answer-active" walks up answer-active <- recap-active <- tool-result <-
    tool-call <- thought-active <- user <- context <- root, so the thread is root(0) context(1) user(2)
    thought-active(3) tool-call(4) tool-result(5) recap-active(6) answer-active(7); "answer-inactive" (a sibling
    of thought-active under "user") is the one off-thread node. Visible turns: user(2) multimodal text and
    answer-active(7) multimodal text -> 1 user + 1 assistant turn. One tool call: tool-call (recipient
    "browser.search") with tool-result (role tool, execution_output) as its output.
    """
    (session,) = loaded_sessions(_outcomes()[NATIVE])  # type: ignore[arg-type]
    assert session.session_id == "chatgpt-chatgpt-fixture-conversation"
    assert [t.role for t in session.turns] == [Role.USER, Role.ASSISTANT]
    assert [t.index for t in session.turns] == [2, 7]
    assert session.turns[0].text == "Analyze the attached fixture and create an artifact."
    assert session.turns[0].attachments == (
        "file-service://fixture-input-image (image_asset_pointer, 128 bytes)",
        "input.txt (text/plain, 42 bytes)",
    )
    assert session.turns[1].model == "gpt-5-6-pro"
    assert [(c.call_id, c.name, c.input, c.output) for c in session.tool_calls] == [
        ("tool-call", "browser.search", '{"query":"fixture evidence"}', "Privacy-safe tool result.")
    ]
    assert session.started_at == datetime.fromtimestamp(1784164500.0, tz=UTC)
    assert session.ended_at == datetime.fromtimestamp(1784169740.0, tz=UTC)
    assert session.census["node/off_thread", "", Disposition.SKIPPED] == 1
    assert session.count(Disposition.TURN) == 2 and session.count(Disposition.TOOL) == 2
    assert session.count(Disposition.HARNESS) == 3  # custom instructions, thoughts, reasoning_recap
    assert sum(session.census.values()) == 9 + 1  # every node once, plus the conversation record


def test_native_fixture_golden() -> None:
    (session,) = loaded_sessions(_outcomes()[NATIVE])  # type: ignore[arg-type]
    assert_golden("chatgpt_native_conversation_v1", session)
