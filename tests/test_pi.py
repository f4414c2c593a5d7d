"""Pi coding agent reader rules, one small session file per rule, each test named after the outcome it expects."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extractors import pi
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Disposition, LinkKind, Loaded, Outcome, Rejected, Role, Session
from tests.support import read_one, write_jsonl

AGENT = Agent("pi")
SID = "0c6f2a1e-5b7d-4e21-9a43-8f1d2c3b4a50"
T0 = "2026-01-02T10:00:00.000Z"
MS0 = 1767348000000  # T0 in epoch ms


def at(seconds: float) -> str:
    return (
        datetime.fromtimestamp(MS0 / 1000 + seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(MS0 / 1000 + seconds, tz=UTC)


def header(version: int | None = 3, native: str = SID, stamp: str = T0, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "session", "id": native, "timestamp": stamp, "cwd": "/home/u/proj", **extra}
    if version is not None:
        record["version"] = version
    return record


def entry(kind: str, native: str | None, parent: str | None, seconds: float, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"type": kind}
    if native is not None:
        record.update(id=native, parentId=parent)
    record["timestamp"] = at(seconds)
    record.update(fields)
    return record


def user(native: str | None, parent: str | None, seconds: float, text: Any) -> dict[str, Any]:
    content = text if not isinstance(text, str) else [{"type": "text", "text": text}]
    message = {"role": "user", "content": content, "timestamp": MS0 + int(seconds * 1000)}
    return entry("message", native, parent, seconds, message=message)


def assistant(
    native: str | None,
    parent: str | None,
    seconds: float,
    parts: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-4-5",
    **extra: Any,
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": parts,
        "provider": "anthropic",
        "model": model,
        "usage": usage or tokens(10, 5),
        "stopReason": "stop",
        "timestamp": MS0 + int(seconds * 1000),
        **extra,
    }
    return entry("message", native, parent, seconds, message=message)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "read", **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def result(native: str | None, parent: str | None, seconds: float, call_id: str, output: str, error: bool = False):
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [text(output)],
        "isError": error,
        "timestamp": MS0 + int(seconds * 1000),
    }
    return entry("message", native, parent, seconds, message=message)


def tokens(i: int, o: int, read: int = 0, write: int = 0, cost: float = 0.001) -> dict[str, Any]:
    return {"input": i, "output": o, "cacheRead": read, "cacheWrite": write, "cost": {"total": cost}}


def session_file(root: Path, records: list[Any], name: str = f"2026-01-02T10-00-00-000Z_{SID}.jsonl") -> Path:
    return write_jsonl(root / "--home-u-proj--" / name, records)


def read(path: Path, limits: Limits | None = None) -> list[Outcome]:
    return read_one(AGENT, path) if limits is None else read_one(AGENT, path, limits)


def sessions(path: Path) -> list[Session]:
    outcomes = read(path)
    assert all(isinstance(o, Loaded) for o in outcomes), outcomes
    return [o.session for o in outcomes if isinstance(o, Loaded)]


def only(path: Path) -> Session:
    [session] = sessions(path)
    return session


def code(path: Path) -> RejectCode:
    [outcome] = read(path)
    assert isinstance(outcome, Rejected), outcome
    return outcome.code


def turns(session: Session) -> list[tuple[str, str]]:
    return [(t.role.value, t.text) for t in session.turns]


def census(session: Session) -> dict[str, Disposition]:
    return {kind: d for (kind, _, d) in session.census}


# --- a person's turn and harness ---------------------------------------------------------------------------------


def test_a_user_message_is_the_persons_turn_and_a_slash_command_stays_as_typed(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "fix the build"),
            assistant("a1", "u1", 2, [text("done")]),
            user("u2", "a1", 3, "/mode"),
            assistant("a2", "u2", 4, [text("mode changed")]),
        ],
    )
    session = only(path)
    assert turns(session) == [
        ("user", "fix the build"),
        ("assistant", "done"),
        ("user", "/mode"),
        ("assistant", "mode changed"),
    ]
    assert session.census[("message/user/command", "3", Disposition.TURN)] == 1


def test_custom_messages_summaries_and_extension_state_are_never_a_persons_turn(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "hello"),
            entry("custom_message", "c1", "u1", 2, customType="rem", content="injected reminder", display=True),
            entry(
                "message",
                "c2",
                "c1",
                3,
                message={
                    "role": "custom",
                    "customType": "x",
                    "content": "hook text",
                    "display": True,
                    "timestamp": MS0 + 3000,
                },
            ),
            entry("message", "c3", "c2", 3.5, message={"role": "hookMessage", "content": "old hook text"}),
            assistant("a1", "c3", 4, [{"type": "thinking", "thinking": "private"}, text("hi")]),
            entry("compaction", "k1", "a1", 5, summary="compacted summary", firstKeptEntryId="u1", tokensBefore=9),
            entry("branch_summary", "b1", "k1", 6, fromId="k1", summary="branch summary"),
            entry("custom", "s1", "b1", 7, customType="state", data={"n": 1}),
        ],
    )
    session = only(path)
    assert turns(session) == [("user", "hello"), ("assistant", "hi")]
    kinds = census(session)
    assert kinds["custom_message"] is Disposition.HARNESS
    assert kinds["message/custom"] is Disposition.HARNESS
    assert kinds["message/hookMessage"] is Disposition.HARNESS
    assert kinds["compaction"] is Disposition.HARNESS
    assert kinds["branch_summary"] is Disposition.HARNESS
    assert kinds["custom"] is Disposition.SKIPPED


def test_turns_before_a_compaction_stay_in_source_order(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "first"),
            assistant("a1", "u1", 2, [text("one")]),
            user("u2", "a1", 3, "second"),
            assistant("a2", "u2", 4, [text("two")]),
            entry("compaction", "k1", "a2", 5, summary="s", firstKeptEntryId="u2", tokensBefore=9),
            user("u3", "k1", 6, "third"),
        ],
    )
    session = only(path)
    assert [t.text for t in session.turns] == ["first", "one", "second", "two", "third"]
    assert [t.index for t in session.turns] == [1, 2, 3, 4, 6]


def test_thinking_only_and_aborted_responses_are_not_turns(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "go"),
            assistant("a1", "u1", 2, [], usage=tokens(0, 0, cost=0), stopReason="aborted", errorMessage="aborted"),
            assistant("a2", "a1", 3, [{"type": "thinking", "thinking": "hmm"}], usage=tokens(4, 2)),
        ],
    )
    session = only(path)
    assert turns(session) == [("user", "go")]
    assert session.census[("message/assistant/empty", "3", Disposition.SKIPPED)] == 2


# --- tools -------------------------------------------------------------------------------------------------------


def test_a_tool_call_is_joined_to_its_result_once(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "read a"),
            assistant("a1", "u1", 2, [call("c1", path="a"), call("c2", path="b")]),
            result("r1", "a1", 3, "c1", "A"),
            result("r2", "r1", 4, "c2", "missing", error=True),
            result("r3", "r2", 5, "nope", "orphan"),
            assistant("a2", "r3", 6, [text("read")]),
        ],
    )
    session = only(path)
    calls = {c.call_id: c for c in session.tool_calls}
    assert list(calls) == ["c1", "c2"]
    assert (calls["c1"].turn_index, calls["c1"].name, calls["c1"].input) == (2, "read", '{"path": "a"}')
    assert (calls["c1"].output, calls["c1"].is_error) == ("A", False)
    assert (calls["c2"].output, calls["c2"].is_error) == ("missing", True)
    assert session.census[("message/toolResult/orphan", "3", Disposition.TOOL)] == 1
    assert session.census[("message/assistant/tool_calls", "3", Disposition.TOOL)] == 1


def test_the_persons_bang_command_is_a_tool_call_not_a_turn(tmp_path: Path) -> None:
    bash = {"role": "bashExecution", "command": "make", "output": "error 2", "exitCode": 2, "cancelled": False,
            "truncated": False, "timestamp": MS0 + 1000}  # fmt: skip
    path = session_file(
        tmp_path, [header(), entry("message", "x1", None, 1, message=bash), user("u1", "x1", 2, "why?")]
    )
    session = only(path)
    assert turns(session) == [("user", "why?")]
    [made] = session.tool_calls
    assert (made.call_id, made.name, made.input, made.output, made.is_error, made.turn_index) == (
        "bash-x1",
        "bash",
        '{"command": "make"}',
        "error 2",
        True,
        1,
    )


# --- tokens ------------------------------------------------------------------------------------------------------


def test_usage_is_one_row_per_response_with_pis_own_cost_and_zero_rows_dropped(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "q"),
            assistant("a1", "u1", 2, [call("c1")], usage=tokens(100, 20, 1000, 50, 0.0125)),
            result("r1", "a1", 3, "c1", "x"),
            assistant(
                "a2",
                "r1",
                4,
                [text("a")],
                usage={**tokens(30, 10, 1100, 0, 0.004), "reasoning": 6, "cacheWrite1h": 0},
                model="gpt-5.1-codex",
                responseId="chatcmpl-1",
            ),
            assistant("a3", "a2", 5, [], usage=tokens(0, 0, cost=0), stopReason="aborted"),
        ],
    )
    session = only(path)
    rows = [(u.turn_index, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
             u.cost_usd) for u in session.usage]  # fmt: skip
    assert rows == [
        (2, "claude-sonnet-4-5", 100, 20, 1000, 50, 0.0125),
        (4, "gpt-5.1-codex", 30, 10, 1100, 0, 0.004),
    ]
    assert session.models == ("claude-sonnet-4-5", "gpt-5.1-codex")
    assert [(u.reasoning_tokens, u.response_id) for u in session.usage] == [(None, None), (6, "chatcmpl-1")]


# --- times ---------------------------------------------------------------------------------------------------------


def test_start_is_the_earliest_message_not_a_later_v1_header(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(version=None, stamp=at(50)),
            user(None, None, 1, "early"),
            assistant(None, None, 2, [text("reply")]),
            entry("thinking_level_change", None, None, 60, thinkingLevel="high"),
        ],
    )
    session = only(path)
    assert session.started_at == when(1)
    assert session.ended_at == when(60)
    assert [t.timestamp for t in session.turns] == [when(1), when(2)]
    assert not session.started_at_inferred


def test_a_message_time_wins_over_its_entry_time_and_the_entry_time_stands_in(tmp_path: Path) -> None:
    late = user("u1", None, 9, "typed")
    late["message"]["timestamp"] = MS0 + 5000
    no_ms = user("u2", "u1", 12, "no ms")
    del no_ms["message"]["timestamp"]
    session = only(session_file(tmp_path, [header(), late, no_ms]))
    assert [t.timestamp for t in session.turns] == [when(5), when(12)]
    assert session.started_at == when(5)


def test_a_file_with_no_time_anywhere_is_rejected_missing_timestamp(tmp_path: Path) -> None:
    record = user("u1", None, 1, "hi")
    del record["timestamp"]
    del record["message"]["timestamp"]
    path = session_file(tmp_path, [{"type": "session", "version": 3, "id": SID, "cwd": "/w"}, record])
    assert code(path) is RejectCode.MISSING_TIMESTAMP


# --- versions, branches, forks -------------------------------------------------------------------------------------


def test_v1_entries_without_ids_are_chained_in_line_order(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(version=None, provider="openai", modelId="gpt-5"),
            user(None, None, 1, "one"),
            assistant(None, None, 2, [call("c1")]),
            result(None, None, 3, "c1", "out"),
            assistant(None, None, 4, [text("two")]),
        ],
    )
    session = only(path)
    assert turns(session) == [("user", "one"), ("assistant", "two")]
    assert [c.call_id for c in session.tool_calls] == ["c1"]
    assert {v for (_, v, _) in session.census} == {"1"}


def test_the_active_branch_is_the_session_and_an_abandoned_branch_is_a_linked_session(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "start"),
            assistant("a1", "u1", 2, [text("ok")]),
            user("u2", "a1", 3, "try A"),
            assistant("a2", "u2", 4, [text("A done")], usage=tokens(7, 3)),
            entry("branch_summary", "b1", "a1", 5, fromId="a1", summary="tried A"),
            user("u3", "b1", 6, "try B"),
            assistant("a3", "u3", 7, [text("B done")]),
        ],
    )
    main, branch = sessions(path)
    assert main.session_id == f"pi-{SID}"
    assert turns(main) == [("user", "start"), ("assistant", "ok"), ("user", "try B"), ("assistant", "B done")]
    assert branch.session_id == f"pi-{SID}-branch-a2"
    assert turns(branch) == [("user", "try A"), ("assistant", "A done")]
    assert [(link.other_session_id, link.kind) for link in branch.links] == [(main.session_id, LinkKind.FORK)]
    assert [u.turn_index for u in branch.usage] == [4]
    assert (branch.started_at, branch.ended_at) == (when(3), when(4))
    assert not main.links


def test_a_branch_off_a_branch_links_to_the_branch_that_holds_its_fork_point(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "root"),
            user("x1", "u1", 2, "side one"),
            user("x2", "x1", 3, "side one deeper"),
            user("y1", "x1", 4, "side two"),
            user("m1", "u1", 5, "main"),
        ],
    )
    main, first, second = sessions(path)
    assert turns(main) == [("user", "root"), ("user", "main")]
    assert (first.session_id, turns(first)) == (
        f"pi-{SID}-branch-x2",
        [("user", "side one"), ("user", "side one deeper")],
    )
    assert (second.session_id, turns(second)) == (f"pi-{SID}-branch-y1", [("user", "side two")])
    assert second.links[0].other_session_id == first.session_id


def test_a_branch_with_nothing_said_is_counted_not_a_session(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "hi"),
            entry("label", "l1", "u1", 2, targetId="u1", label="x"),
            user("u2", "u1", 3, "again"),
        ],
    )
    main = only(path)
    assert main.census[("abandoned/label", "3", Disposition.SKIPPED)] == 1


def test_a_branch_off_an_empty_branch_links_to_where_that_one_forked(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "root"),
            entry("label", "l1", "u1", 2, targetId="u1", label="x"),
            entry("label", "l2", "l1", 3, targetId="u1", label="y"),
            user("s1", "l1", 4, "side"),
            user("m1", "u1", 5, "main"),
        ],
    )
    main, side = sessions(path)
    assert turns(side) == [("user", "side")]
    assert side.links[0].other_session_id == main.session_id
    assert main.census[("abandoned/label", "3", Disposition.SKIPPED)] == 2


def test_a_dangling_parent_hangs_on_the_entry_before_it(tmp_path: Path) -> None:
    path = session_file(tmp_path, [header(), user("u1", None, 1, "one"), user("u2", "gone-label", 2, "two")])
    assert turns(only(path)) == [("user", "one"), ("user", "two")]


def test_a_cycle_in_the_entry_tree_is_undecidable(tmp_path: Path) -> None:
    path = session_file(tmp_path, [header(), user("u1", "u2", 1, "one"), user("u2", "u1", 2, "two")])
    assert code(path) is RejectCode.UNDECIDABLE_THREAD


def test_a_fork_skips_the_copied_parent_entries_and_links_to_the_parent(tmp_path: Path) -> None:
    parent = f"/home/u/.pi/agent/sessions/--home-u-proj--/2026-01-01T09-00-00-000Z_{'p' * 8}-1111.jsonl"
    path = session_file(
        tmp_path,
        [
            header(stamp=at(100), parentSession=parent),
            user("u1", None, 1, "copied question"),
            assistant("a1", "u1", 2, [text("copied answer")], usage=tokens(50, 5)),
            user("u2", "a1", 101, "own question"),
            assistant("a2", "u2", 102, [text("own answer")], usage=tokens(60, 6)),
        ],
    )
    session = only(path)
    assert turns(session) == [("user", "own question"), ("assistant", "own answer")]
    assert [u.turn_index for u in session.usage] == [4]
    assert session.started_at == when(101)
    assert [(link.other_session_id, link.kind) for link in session.links] == [("pi-pppppppp-1111", LinkKind.FORK)]
    assert session.census[("copied/message/user", "3", Disposition.SKIPPED)] == 1


def test_a_v1_branched_from_fork_never_continued_loads_with_no_turns_and_its_link(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(version=None, stamp=at(100), branchedFrom="/x/--p--/2026-01-01T00-00-00-000Z_parent-id.jsonl"),
            user(None, None, 1, "copied"),
            assistant(None, None, 2, [text("copied too")]),
            entry("thinking_level_change", None, None, 120, thinkingLevel="off"),
        ],
    )
    session = only(path)
    assert session.turns == ()
    assert session.links[0].other_session_id == "pi-parent-id"
    assert session.started_at == when(100)


def test_an_omp_parent_id_and_title_slot_are_read(tmp_path: Path) -> None:
    slot = '{"type":"title","title":"Fix it"}' + " " * 20
    path = session_file(tmp_path, [slot, header(stamp=at(0), parentSession="omp-parent"), user("u1", None, 1, "x")])
    session = only(path)
    assert session.title == "Fix it"
    assert session.links[0].other_session_id == "pi-omp-parent"


def test_a_session_info_name_is_the_title(tmp_path: Path) -> None:
    path = session_file(
        tmp_path, [header(), user("u1", None, 1, "x"), entry("session_info", "i1", "u1", 2, name="My session")]
    )
    assert only(path).title == "My session"


def test_a_repeated_header_and_entries_written_twice_count_once(tmp_path: Path) -> None:
    records = [header(), user("u1", None, 1, "x"), assistant("a1", "u1", 2, [text("y")])]
    session = only(session_file(tmp_path, records + records))
    assert turns(session) == [("user", "x"), ("assistant", "y")]
    assert session.census[("session/repeated", "3", Disposition.METADATA)] == 1
    assert session.census[("duplicate/message", "3", Disposition.SKIPPED)] == 2


def test_unknown_entry_kinds_and_roles_are_counted_and_skipped(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            header(),
            user("u1", None, 1, "x"),
            entry("mode_change", "m1", "u1", 2, mode="plan"),
            entry("message", "m2", "m1", 3, message={"role": "hologram", "content": "?"}),
        ],
    )
    kinds = census(only(path))
    assert kinds["mode_change"] is Disposition.SKIPPED
    assert kinds["message/hologram"] is Disposition.SKIPPED


# --- rejections ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([user("u1", None, 1, "no header")], RejectCode.MISSING_SESSION_ID),
        ([{"type": "session", "version": 3, "timestamp": T0}], RejectCode.MISSING_SESSION_ID),
        ([header()], RejectCode.NO_CONVERSATION),
        ([header(), header(native="other")], RejectCode.INCONSISTENT_SOURCE),
        ([header(), entry("message", "m1", None, 1, message="text")], RejectCode.BAD_SHAPE),
        ([header(), assistant("a1", None, 1, [{"type": "toolCall", "name": "read"}])], RejectCode.BAD_SHAPE),
        ([header(), entry("message", "m1", None, 1, message={"role": "toolResult"})], RejectCode.BAD_SHAPE),
        ([header(), user("u1", None, 1, 42)], RejectCode.BAD_SHAPE),
    ],
    ids=["no header", "header without id", "header alone", "two ids", "message not an object", "call without id",
         "result without call id", "content a number"],
)  # fmt: skip
def test_a_file_a_person_can_break_is_rejected_with_a_clear_code(
    tmp_path: Path, records: list[Any], expected: RejectCode
) -> None:
    assert code(session_file(tmp_path, records)) is expected


def test_an_empty_file_is_no_conversation(tmp_path: Path) -> None:
    path = tmp_path / "--p--" / "x.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    assert code(path) is RejectCode.NO_CONVERSATION


def test_a_file_being_written_is_deferred(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "--p--" / "x.jsonl", [header(), '{"type":"message","id":"u'], newline_at_end=False)
    [outcome] = read(path, Limits())
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.WRITE_IN_PROGRESS


# --- discovery and roots -----------------------------------------------------------------------------------------


def test_default_roots_follow_pi_coding_agent_dir_and_add_the_forks(tmp_path: Path) -> None:
    home = tmp_path
    assert pi.default_roots(home, {}) == [
        home / ".pi/agent/sessions",
        home / ".omp/agent/sessions",
        home / ".prime/agent/sessions",
    ]
    assert pi.default_roots(home, {"PI_CODING_AGENT_DIR": "/opt/pi"})[0] == Path("/opt/pi/sessions")
    assert pi.default_roots(home, {"PI_CODING_AGENT_DIR": "~/alt"})[0] == home / "alt/sessions"
    assert pi.default_roots(home, {"PI_CODING_AGENT_DIR": "  "})[0] == home / ".pi/agent/sessions"


def test_discovery_takes_session_files_one_folder_down_and_nothing_deeper(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    good = session_file(root, [header(), user("u1", None, 1, "x")])
    (root / "--home-u-proj--" / "subagent-artifacts").mkdir()
    (root / "--home-u-proj--" / "subagent-artifacts" / "a_worker.jsonl").write_text("{}\n")
    (root / "--home-u-proj--" / good.stem).mkdir()
    (root / "--home-u-proj--" / good.stem / "task.jsonl").write_text("{}\n")
    (root / "other").mkdir()
    (root / "other" / "x.jsonl").write_text("{}\n")
    (root / "--home-u-proj--" / "notes.txt").write_text("x\n")
    direct = root / "2026-01-02T10-00-00-000Z_flat.jsonl"
    direct.write_text("{}\n")
    found = sorted(os.path.relpath(s.path, root) for s in pi.discover(root))
    assert found == sorted([os.path.relpath(direct, root), os.path.relpath(good, root)])
    # a `--<cwd>--` folder or a --session-dir folder given as the root lists its files directly
    assert [s.path for s in pi.discover(good.parent)] == [str(good)]


def test_only_a_path_with_a_dot_pi_folder_is_claimed(tmp_path: Path) -> None:
    assert pi.SPEC.claims(Path("/home/u/.pi/agent/sessions/--p--/x.jsonl")) is not None
    assert pi.SPEC.claims(Path("/home/u/pi/sessions/x.jsonl")) is None
    assert pi.SPEC.claims(Path("/home/u/.pip/x.jsonl")) is None
    assert pi.SPEC.claims(Path("/home/u/.claude/projects/-pi-/x.jsonl")) is None


def test_a_big_line_under_tiny_limits_is_rejected_without_loading(tmp_path: Path) -> None:
    path = session_file(tmp_path, [header(), user("u1", None, 1, "x" * 5000)])
    [outcome] = read(path, Limits(settle_seconds=0.0, max_line_bytes=1000))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


def test_an_old_partial_tail_is_truncated(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "--p--" / "x.jsonl", [header(), '{"type":"message","id":"u'], newline_at_end=False)
    old = time.time() - 3600
    os.utime(path, (old, old))
    assert code(path) is RejectCode.TRUNCATED_TAIL


def test_role_is_user_for_every_persons_turn_only(tmp_path: Path) -> None:
    session = only(
        session_file(
            tmp_path, [header(), user("u1", None, 1, [{"type": "image", "data": "aGk=", "mimeType": "image/png"}])]
        )
    )
    [turn] = session.turns
    assert turn.role is Role.USER and turn.text == "" and turn.attachments[0].startswith("image/png sha256:")


def test_token_counts_past_int64_are_null_and_counted(tmp_path: Path) -> None:
    huge = assistant("a1", "u1", 2, [text("a")], usage={**tokens(2**63, 5, 10**29 + 7), "cost": {"total": 1e400}})
    session = only(session_file(tmp_path, [header(), user("u1", None, 1, "q"), huge]))
    [row] = session.usage
    assert (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cost_usd) == (None, 5, None, None)
    assert session.census[("usage/out_of_range", "", Disposition.METADATA)] == 3


def test_an_old_openai_row_has_its_cached_part_taken_out_of_input(tmp_path: Path) -> None:
    def response(native: str, parent: str, when_ms: int, usage: dict[str, Any]) -> dict[str, Any]:
        message = {"role": "assistant", "content": [text("a")], "api": "openai-responses", "provider": "openai",
                   "model": "gpt-5", "usage": usage, "stopReason": "stop", "timestamp": when_ms}  # fmt: skip
        return {"type": "message", "id": native, "parentId": parent, "timestamp": T0, "message": message}

    before, after = 1764806400000, 1764900000000  # 2025-12-04T00:00Z (pi 0.12.6 and older), 2025-12-05T02:00Z
    old = {"input": 1500, "output": 10, "cacheRead": 1000, "cacheWrite": 0, "cost": {"total": 0.1}}
    new = {**old, "input": 500, "totalTokens": 1510}
    records = [header(version=None), response("a", "", before, old), response("b", "a", after, {**old, "input": 500}),
               response("c", "b", before, new)]  # fmt: skip
    session = only(session_file(tmp_path, records))
    assert [u.input_tokens for u in session.usage] == [500, 500, 500]
    assert [u.cache_read_tokens for u in session.usage] == [1000, 1000, 1000]


# Tool arguments as json.dumps writes them (the reader quotes objects of strings itself, as the encoder does).
ARGUMENTS = [{}, {"path": "src/a.py"}, {"command": 'echo "é\\\\\n\t\u2028 😀"', "cwd": "/"}, {"n": 1, "s": "x"},
             {"a": {"b": ["c", None, 1.5]}}, [1, "x"]]  # fmt: skip


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_tool_arguments_are_stored_as_json_dumps_writes_them(tmp_path: Path, arguments: Any) -> None:
    records = [header(), user("u1", None, 1, "q"), assistant("a1", "u1", 2, [call("c1", "bash")])]
    records[2]["message"]["content"][0]["arguments"] = arguments
    [tool] = only(session_file(tmp_path, records)).tool_calls
    assert tool.input == json.dumps(arguments, ensure_ascii=False)


# Times at and around the edges of the reader's shortcuts (2000-2099) and of timeutil's usable years (1990-2199).
EPOCH_MS: list[Any] = [
    *(edge + step for edge in (631152000000, 946684800000, 4102444800000, 7258118400000) for step in (-1, 0, 1)),
    *(0, 10**11, MS0, 10**15, -MS0, 1.7e12, True, None, "x", T0),
]
ISO: list[Any] = [
    *(T0, "2026-01-02T10:00:00Z", "2026-01-02T10:00:00+00:00", "2026-01-02T11:00:00+01:00", "2026-01-02T10:00:00"),
    *("1999-12-31T23:59:59.999Z", "2000-01-01T00:00:00Z", "2099-12-31T23:59:59.999999Z", "2100-01-01T00:00:00Z"),
    *("1989-12-31T23:59:59Z", "2026-01-02T10:00:00.123456789Z", "", "not a time", 5, None),
]


def test_the_time_shortcuts_read_every_time_as_timeutil_does() -> None:
    from extractors.pi.parse import _entry_time, _message_time
    from extractors.timeutil import parse_any, parse_iso

    for value in EPOCH_MS:
        assert _message_time(value) == parse_any(value), value
    for value in ISO:
        assert _entry_time(value) == parse_iso(value), value
