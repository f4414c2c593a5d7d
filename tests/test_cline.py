"""The Cline / Roo Code / Kilo Code reader, one rule a test (docs/agents/cline.md). Fixtures are written inline into
tmp folders in the extensions' layout; tests/agents/cline/home holds the contract's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from extractors import cline
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Deferred, Disposition, LinkKind, Loaded, Outcome, Rejected, Role, Session
from extractors.registry import detect_format, parse_agent, read_source
from extractors.spec import Claim
from tests.support import SETTLED

HOME = Path(__file__).resolve().parent / "agents" / "cline" / "home"
STORAGE = Path(".config/Code/User/globalStorage")
T0 = 1767348000000
ENV = (
    "<environment_details>\n# Current Working Directory (/home/u/proj) Files\nREADME.md\n\n# Current Mode\nACT MODE\n"
    "</environment_details>"
)


FAILED = "The tool execution failed with the following error:\n<error>\nboom\n</error>"


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def task(
    home: Path,
    api: list[dict[str, Any]],
    *,
    ui: list[dict[str, Any]] | None = None,
    history: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    extension: str = "saoudrizwan.claude-dev",
    task_id: str = str(T0),
) -> Path:
    folder = home / STORAGE / extension / "tasks" / task_id
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in (
        ("api_conversation_history.json", api),
        ("ui_messages.json", ui),
        ("history_item.json", history),
        ("task_metadata.json", metadata),
    ):
        if doc is not None:
            (folder / name).write_text(json.dumps(doc), encoding="utf-8")
    return folder / "api_conversation_history.json"


def outcomes(path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    [source] = [s for s in cline.discover(path.parent) if s.path == str(path)]
    return list(read_source(source, limits))


def session(path: Path) -> Session:
    [outcome] = outcomes(path)
    assert isinstance(outcome, Loaded), outcome
    return outcome.session


def users(s: Session) -> list[str]:
    return [t.text for t in s.turns if t.role is Role.USER]


def req(ts: int, tokens_in: int, tokens_out: int, cost: float, **extra: Any) -> dict[str, Any]:
    fields = {"request": "(r)", "tokensIn": tokens_in, "tokensOut": tokens_out, "cacheWrites": 5, "cacheReads": 7}
    return {"ts": ts, "type": "say", "say": "api_req_started", "text": json.dumps({**fields, "cost": cost}), **extra}


# --- a person's turn ---------------------------------------------------------------------------------------------


def test_only_the_interiors_of_the_persons_tags_are_a_persons_turn(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "ts": T0, "content": [
                text("<task>\nfix the bug\n</task>"),
                text('Files attached by the user:\n\n<file_content path="a.py">\n<task>\nnot typed\n</task>\n'
                     "</file_content>"),
                text("\n# task_progress RECOMMENDED\n\nWhen starting a new task..."),
                text(ENV),
            ]},
            {"role": "assistant", "ts": T0 + 1, "content": [text("On it.")]},
            {"role": "user", "ts": T0 + 2, "content": [
                text("[TASK RESUMPTION] This task was interrupted 2 minutes ago; the last [x] Result: was lost.\n\n"
                     "New instructions for task continuation:\n<user_message>\nand add a test\n</user_message>"),
                text(ENV),
            ]},
            {"role": "assistant", "ts": T0 + 3, "content": [text("Done.")]},
            {"role": "user", "ts": T0 + 4, "content": [text("[ERROR] You did not use a tool in your previous turn!")]},
        ],
    )  # fmt: skip
    s = session(path)
    assert users(s) == ["fix the bug", "and add a test"]
    assert s.census[("api/user/harness", "", Disposition.HARNESS)] == 1
    assert s.cwd == "/home/u/proj"  # the first environment_details' working directory


def test_an_answer_or_feedback_in_a_tool_result_is_the_persons_but_a_file_read_is_not(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "ts": T0, "content": [text("<task>\nread notes.xml\n</task>")]},
            {"role": "assistant", "ts": T0 + 1, "content": [
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "notes.xml"}},
            ]},
            {"role": "user", "ts": T0 + 2, "content": [
                text("[read_file for 'notes.xml'] Result:\n<notes>\n<feedback>\nin the file\n</feedback>\n</notes>"),
            ]},
            {"role": "assistant", "ts": T0 + 3, "content": [
                {"type": "tool_use", "id": "t2", "name": "ask_followup_question", "input": {"question": "Which?"}},
            ]},
            {"role": "user", "ts": T0 + 4, "content": [
                text("[ask_followup_question for 'Which?'] Result:\n<answer>\nthe first\n</answer>"),
            ]},
            {"role": "assistant", "ts": T0 + 5, "content": [
                {"type": "tool_use", "id": "t3", "name": "write_to_file", "input": {}},
            ]},
            {"role": "user", "ts": T0 + 6, "content": [text(
                "[write_to_file for 'a.py'] Result:\nThe user denied this operation. The user provided the following "
                "feedback:\n<feedback>\nuse b.py\n</feedback>"
            )]},
            {"role": "assistant", "ts": T0 + 7, "content": [
                {"type": "tool_use", "id": "t4", "name": "attempt_completion", "input": {}},
            ]},
            {"role": "user", "ts": T0 + 8, "content": [text(
                "[attempt_completion] Result:\nThe user has provided feedback on the results. Consider their input to "
                "continue the task, and then attempt completion again.\n<feedback>\nlooks good\n</feedback>"
            )]},
        ],
    )  # fmt: skip
    s = session(path)
    assert users(s) == ["read notes.xml", "the first", "use b.py", "looks good"]
    assert [c.output is not None for c in s.tool_calls] == [True] * 4


# --- tool calls ------------------------------------------------------------------------------------------------------


def test_text_results_join_the_tool_use_blocks_in_order_and_each_call_counts_once(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "ts": T0, "content": [text("<task>\nlook\n</task>")]},
            {"role": "assistant", "ts": T0 + 1, "content": [
                {"type": "tool_use", "id": "a", "name": "read_file", "input": {"path": "x"}},
                {"type": "tool_use", "id": "b", "name": "use_subagents", "input": {"prompt_1": "go"}},
            ]},
            {"role": "user", "ts": T0 + 2, "content": [
                text("[read_file for 'x'] Result:\nX"),
                text("[subagents] Result:\nSubagent results:\nTotal: 1"),
                text(ENV),
            ]},
            {"role": "assistant", "ts": T0 + 3, "content": [
                {"type": "tool_use", "id": "c", "name": "execute_command", "input": {"command": "make"}},
            ]},
            {"role": "user", "ts": T0 + 4, "content": [
                text("[execute_command for 'make'] Result:\n" + FAILED),
            ]},
        ],
        ui=[{"ts": T0 + 1, "type": "ask", "ask": "tool", "text": '{"tool":"readFile","path":"x"}'}],
    )  # fmt: skip
    s = session(path)
    assert [(c.call_id, c.turn_index, c.name, c.output, c.is_error) for c in s.tool_calls] == [
        ("a", 1, "read_file", "X", None),
        ("b", 1, "use_subagents", "Subagent results:\nTotal: 1", None),
        (
            "c",
            3,
            "execute_command",
            "The tool execution failed with the following error:\n<error>\nboom\n</error>",
            True,
        ),
    ]
    assert s.census[("ui/ask/tool", "", Disposition.SKIPPED)] == 1  # the UI's copy of the call: not a second one


def test_tool_result_blocks_join_by_id_and_xml_era_results_make_their_calls(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "content": [text("<task>\nedit\n</task>")]},
            {"role": "assistant", "content": [text("<read_file>\n<path>a</path>\n</read_file>")]},
            {"role": "user", "content": [text("[read_file for 'a'] Result:"), text("A"), text(ENV)]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "n1", "name": "apply_diff", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "n1", "content": '{"status":"error","error":"no match"}'},
            ]},
        ],
        ui=[{"ts": T0, "type": "say", "say": "text", "text": "edit"}],
    )  # fmt: skip
    s = session(path)
    assert s.tool_calls[0].input == "<read_file>\n<path>a</path>\n</read_file>"
    assert [(c.call_id, c.turn_index, c.name, c.output, c.is_error) for c in s.tool_calls] == [
        ("xml-1-0", 1, "read_file", "A", None),
        ("n1", 3, "apply_diff", '{"status":"error","error":"no match"}', True),
    ]
    assert [t.text for t in s.turns if t.role is Role.ASSISTANT] == ["<read_file>\n<path>a</path>\n</read_file>"]


# --- usage -----------------------------------------------------------------------------------------------------------


def test_usage_is_one_row_per_request_from_the_ui_never_the_cumulative_totals(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "content": [text("<task>\nhi\n</task>")]},
            {"role": "assistant", "modelInfo": {"modelId": "claude-sonnet-4-5"}, "content": [text("one")]},
            {"role": "user", "content": [text("<feedback>\nmore\n</feedback>")]},
            {"role": "assistant", "modelInfo": {"modelId": "claude-sonnet-4-5"}, "content": [text("two")]},
        ],
        ui=[
            {"ts": T0, "type": "say", "say": "text", "text": "hi", "conversationHistoryIndex": -1},
            req(T0 + 1, 10, 20, 0.5, conversationHistoryIndex=-1),
            {"ts": T0 + 2, "type": "say", "say": "text", "text": "one", "partial": True},
            req(T0 + 3, 30, 40, 0.25, conversationHistoryIndex=1),  # failed and retried: no reply of its own
            req(T0 + 4, 31, 41, 0.125, conversationHistoryIndex=1),
            req(T0 + 5, 0, 0, 0.0, conversationHistoryIndex=3, partial=True),  # still streaming: skipped
        ],
        history={"id": str(T0), "ts": T0, "tokensIn": 71, "tokensOut": 101, "totalCost": 0.875},
    )
    s = session(path)
    rows = [(u.turn_index, u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens, u.cost_usd)
            for u in s.usage]  # fmt: skip
    assert rows == [
        (1, 10, 20, 5, 7, 0.5),
        (cline.parse.UI_ROW_BASE + 3, 30, 40, 5, 7, 0.25),
        (3, 31, 41, 5, 7, 0.125),
    ]
    assert {u.model for u in s.usage} == {"claude-sonnet-4-5"}
    assert s.census[("ui/partial", "", Disposition.SKIPPED)] == 2


def test_roo_requests_pair_with_the_reply_dated_after_them(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "ts": T0, "content": [text("<task>\nhi\n</task>")]},
            {"role": "assistant", "ts": T0 + 500, "content": [text("one")]},
            {"role": "user", "ts": T0 + 600, "content": [text("<user_message>\nagain\n</user_message>")]},
            {"role": "assistant", "ts": T0 + 900, "content": [text("two")]},
        ],
        ui=[req(T0 + 100, 1, 1, 0.1), req(T0 + 700, 2, 2, 0.2)],
        extension="rooveterinaryinc.roo-cline",
        task_id="019b8a00-0000-7000-8000-00000000000a",
    )
    assert [u.turn_index for u in session(path).usage] == [1, 3]


# --- lineage and compaction ------------------------------------------------------------------------------------------


def test_a_roo_child_task_links_to_its_parent_and_the_parents_new_task_call_names_it(tmp_path: Path) -> None:
    shutil.copytree(HOME, tmp_path / "home")
    roo = tmp_path / "home" / STORAGE / "rooveterinaryinc.roo-cline" / "tasks"
    parent = session(roo / "019b8a00-0000-7000-8000-000000000001" / "api_conversation_history.json")
    child = session(roo / "019b8a00-0000-7000-8000-000000000002" / "api_conversation_history.json")
    assert child.parent_session_id == parent.session_id
    assert [(link.other_session_id, link.kind) for link in child.links] == [(parent.session_id, LinkKind.SUBAGENT)]
    assert [c.spawned_session_id for c in parent.tool_calls] == [child.session_id]
    assert parent.parent_session_id is None and not parent.links
    assert child.title == "Write a unit test for src/a.ts" and child.cwd == "/home/u/proj"


def test_a_condense_is_counted_as_compaction_and_its_summary_is_never_a_turn(tmp_path: Path) -> None:
    shutil.copytree(HOME, tmp_path / "home")
    roo = tmp_path / "home" / STORAGE / "rooveterinaryinc.roo-cline" / "tasks"
    child = session(roo / "019b8a00-0000-7000-8000-000000000002" / "api_conversation_history.json")
    assert child.census[("ui/say/condense_context", "", Disposition.HARNESS)] == 1
    assert child.census[("api/assistant/summary", "", Disposition.HARNESS)] == 1
    assert not [t for t in child.turns if "Summary:" in t.text]


# --- times -----------------------------------------------------------------------------------------------------------


def test_messages_without_ts_leave_turn_times_unknown_and_the_ui_dates_the_task(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [{"role": "user", "content": [text("<task>\nhi\n</task>")]}, {"role": "assistant", "content": [text("yo")]}],
        ui=[{"ts": T0 + 5000, "type": "say", "say": "text", "text": "hi"}],
    )
    s = session(path)
    assert [t.timestamp for t in s.turns] == [None, None]
    assert s.started_at.timestamp() * 1000 == T0 + 5000 and not s.started_at_inferred


def test_cline_messages_without_ts_take_the_time_of_the_ui_row_written_once_they_were_stored(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [
            {"role": "user", "content": [text("<task>\nhi\n</task>")]},
            {"role": "assistant", "content": [text("yo")]},
            {"role": "user", "content": [text("<feedback>\nmore\n</feedback>")]},
            {"role": "assistant", "content": [text("sure")]},
        ],
        ui=[
            {"ts": T0, "type": "say", "say": "text", "text": "hi", "conversationHistoryIndex": -1},
            req(T0 + 100, 1, 1, 0.1, conversationHistoryIndex=-1),
            {"ts": T0 + 2000, "type": "say", "say": "reasoning", "conversationHistoryIndex": 0},  # reply streaming
            {"ts": T0 + 5000, "type": "say", "say": "checkpoint_created", "conversationHistoryIndex": 1},
            {"ts": T0 + 9000, "type": "say", "say": "user_feedback", "conversationHistoryIndex": 1},
            req(T0 + 9100, 1, 1, 0.1, conversationHistoryIndex=1),
            {"ts": T0 + 9500, "type": "say", "say": "text", "conversationHistoryIndex": 3},
        ],
    )
    s = session(path)
    assert [int(t.timestamp.timestamp() * 1000) - T0 for t in s.turns if t.timestamp] == [2000, 5000, 9500, 9500]


def test_a_task_with_no_written_time_is_dated_by_its_cline_task_id_as_inferred(tmp_path: Path) -> None:
    path = task(tmp_path, [{"role": "user", "content": [text("<task>\nhi\n</task>")]}])
    s = session(path)
    assert s.started_at.timestamp() * 1000 == T0 and s.started_at_inferred


def test_a_roo_task_with_no_time_at_all_is_rejected(tmp_path: Path) -> None:
    path = task(
        tmp_path,
        [{"role": "user", "content": [text("<task>\nhi\n</task>")]}],
        extension="rooveterinaryinc.roo-cline",
        task_id="019b8a00-0000-7000-8000-00000000000b",
    )
    assert [o.code for o in outcomes(path) if isinstance(o, Rejected)] == [RejectCode.MISSING_TIMESTAMP]


# --- which product -------------------------------------------------------------------------------------------------


def test_the_extension_id_and_version_are_kept_as_the_writer(tmp_path: Path) -> None:
    shutil.copytree(HOME, tmp_path / "home")
    found = {
        Path(s.path).parts[-4]: s for root in cline.default_roots(tmp_path / "home", {}) for s in cline.discover(root)
    }
    by_product = {}
    for extension, source in found.items():
        [outcome] = read_source(source, SETTLED)
        assert isinstance(outcome, Loaded)
        by_product[extension] = outcome.session.cli_versions
    assert by_product["saoudrizwan.claude-dev"] in {("saoudrizwan.claude-dev@3.51.0",), ("saoudrizwan.claude-dev",)}
    assert by_product["kilocode.kilo-code"] == ("kilocode.kilo-code",)
    assert by_product["rooveterinaryinc.roo-cline"] == ("rooveterinaryinc.roo-cline",)


# --- discovery -------------------------------------------------------------------------------------------------------


def test_default_roots_cover_every_editor_on_linux_macos_and_vscode_server(tmp_path: Path) -> None:
    roots = {str(root.relative_to(tmp_path)) for root in cline.default_roots(tmp_path, {})}
    assert ".config/Code/User/globalStorage" in roots
    assert ".config/Code - Insiders/User/globalStorage" in roots
    assert "Library/Application Support/Cursor/User/globalStorage" in roots
    assert ".config/VSCodium/User/globalStorage" in roots and ".config/Windsurf/User/globalStorage" in roots
    assert ".vscode-server/data/User/globalStorage" in roots
    assert len(roots) == 13


def test_environment_overrides_move_or_add_roots(tmp_path: Path) -> None:
    env = {
        "XDG_CONFIG_HOME": "/cfg",
        "VSCODE_PORTABLE": "/opt/vs/data",
        "APPDATA": "C:\\Users\\u\\AppData\\Roaming",
    }
    roots = {str(root) for root in cline.default_roots(tmp_path, env)}
    assert "/cfg/Code/User/globalStorage" in roots
    assert str(tmp_path / ".config/Code/User/globalStorage") not in roots
    assert "/opt/vs/data/user-data/User/globalStorage" in roots
    assert "/mnt/c/Users/u/AppData/Roaming/Code/User/globalStorage" in roots  # Windows from WSL
    shared = {str(root) for root in cline.default_roots(tmp_path, {"APPDATA": "/mnt/c/Users/u/AppData/Roaming"})}
    assert "/mnt/c/Users/u/AppData/Roaming/Cursor/User/globalStorage" in shared  # WSLENV=APPDATA/p
    assert not {str(r) for r in cline.default_roots(tmp_path, {"APPDATA": "relative"})} - set(
        str(r) for r in cline.default_roots(tmp_path, {})
    )


def test_discovery_reads_only_the_three_extensions_and_counts_sidecars_in_the_fingerprint(tmp_path: Path) -> None:
    path = task(tmp_path, [{"role": "user", "content": "x"}], ui=[{"ts": 1}])
    task(tmp_path, [{"role": "user", "content": "x"}], extension="other.extension")
    [source] = list(cline.discover(tmp_path / STORAGE))
    assert source.path == str(path)
    assert source.size == path.stat().st_size + (path.parent / "ui_messages.json").stat().st_size
    # an editor's user dir, one task folder, and a folder of copied tasks are roots too
    assert [s.path for s in cline.discover(tmp_path / STORAGE.parent)] == [str(path)]
    assert [s.path for s in cline.discover(path.parent)] == [str(path)]


def test_a_path_under_an_extensions_tasks_folder_is_claimed_by_its_folder() -> None:
    claimed = Path("/h/.config/Code/User/globalStorage/kilocode.kilo-code/tasks/1/api_conversation_history.json")
    assert cline.claims(claimed) is Claim.FOLDER
    assert detect_format(claimed) == "cline"
    assert cline.claims(Path("/h/globalStorage/other.ext/tasks/1/api_conversation_history.json")) is None
    assert parse_agent("roo-code") == parse_agent("kilo") == "cline"


# --- rejections ------------------------------------------------------------------------------------------------------


def test_a_history_item_naming_another_task_is_inconsistent(tmp_path: Path) -> None:
    path = task(tmp_path, [{"role": "user", "ts": T0, "content": "<task>\nx\n</task>"}], history={"id": "other"})
    assert [o.code for o in outcomes(path) if isinstance(o, Rejected)] == [RejectCode.INCONSISTENT_SOURCE]


def test_a_task_of_harness_only_has_no_conversation(tmp_path: Path) -> None:
    path = task(tmp_path, [{"role": "user", "ts": T0, "content": [text(ENV)]}])
    assert [o.code for o in outcomes(path) if isinstance(o, Rejected)] == [RejectCode.NO_CONVERSATION]


def test_a_sidecar_rewritten_while_the_folder_is_read_defers_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = task(tmp_path, [{"role": "user", "ts": T0, "content": "<task>\nx\n</task>"}], ui=[])
    [source] = list(cline.discover(path.parent))
    real = cline.read_json_document

    def rewrite_ui(target: Path, limits: Limits, **kwargs: Any) -> Any:
        value = real(target, limits, **kwargs)
        if Path(target).name == "api_conversation_history.json":
            ui = path.parent / "ui_messages.json"
            ui.write_text('[{"ts": 1}]', encoding="utf-8")
            os.utime(ui, ns=(10**18, 10**18))
        return value

    monkeypatch.setattr(cline, "read_json_document", rewrite_ui)
    [outcome] = read_source(source, SETTLED)
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_a_history_rewritten_after_it_was_read_defers_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each file is stat'ed once before the reads and once after: a change between the two defers, even where the
    # document reader saw a steady file.
    path = task(tmp_path, [{"role": "user", "ts": T0, "content": "<task>\nx\n</task>"}], ui=[])
    [source] = list(cline.discover(path.parent))
    real = cline.read_json_document

    def touch_history(target: Path, limits: Limits, **kwargs: Any) -> Any:
        value = real(target, limits, **kwargs)
        if Path(target).name == "ui_messages.json":
            os.utime(path, ns=(10**18, 10**18))
        return value

    monkeypatch.setattr(cline, "read_json_document", touch_history)
    [outcome] = read_source(source, SETTLED)
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_a_message_that_is_not_an_object_is_bad_shape(tmp_path: Path) -> None:
    path = task(tmp_path, [{"role": "user", "ts": T0, "content": "<task>\nx\n</task>"}, "oops"])
    [outcome] = outcomes(path)
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE and outcome.line == 1


# The fast forms of the tables' regexes (extractors/cline/tables.py) give the regexes' answers: random texts built of
# the pieces the regexes turn on (openers, closers, result heads, `\b` neighbours, whitespace), with a fixed seed.
PIECES = (
    "<environment_details>",
    "</environment_details>",
    "<environment_details",
    "<file_content",
    "</file_content>",
    "<file_content path='a'>",
    "<file_contents>",
    "<file_content_",
    "<file_content1",
    "<file_content\u00e9",
    "[read_file",
    "[read_file for 'a']",
    "[execute_command for 'ls'] Result:",
    "] Result:",
    "] Result: \t",
    "[ERROR]",
    "[TASK RESUMPTION]",
    "[a]",
    "[x1_] Result:",
    "[X]",
    "<error>",
    "The tool execution failed",
    '"status"',
    '"status" : "error"',
    ' "status":"error"',
    "<feedback>",
    "</feedback>",
    "<answer>",
    "</answer>",
    "<task>",
    "</task>",
    "<user_message>",
    "</user_message>",
    " ",
    "\t",
    "\n",
    "\u00a0",
    "x",
    "-",
    "a b",
    "]",
    "[",
)


def random_texts(count: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 10))) for _ in range(count)]


def test_the_fast_forms_of_the_tables_regexes_give_the_regexes_answers() -> None:
    tables = cline.tables
    for value in random_texts(20_000, seed=30):
        assert tables.without_harness(value) == tables.HARNESS_SECTIONS.sub("", value), value
        head = tables.RESULT_HEAD.match(value)
        assert tables.result_head(value) == (None if head is None else (head.group(1), head.end())), value
        assert tables.is_error_result(value) == bool(tables.ERROR_RESULT.search(value)), value
        assert tables.person_spans(value) == [m.group(2) for m in tables.PERSON_SPAN.finditer(value)], value
        spans = [
            m.group(2)
            for m in tables.RESULT_PERSON_SPAN.finditer(value)
            if value[: m.start()].rstrip().endswith(":") or not value[m.end() :].strip()
        ]
        assert tables.result_person_spans(value) == spans, value


HEAD_PIECES = ("[read_file", "[x1_", " for '", "a", "\u2192", "]", "] Result:", " ", "\t", "\n", "'", "[", "-", "A")


def test_the_one_regex_for_a_usual_result_head_gives_result_heads_answer() -> None:
    """`result_head` reads a head with no `]` and no newline before its `] Result:` by one regex, any other by steps:
    random heads of the pieces where the two part (a `]` or a newline inside, a name run on, a blank after)."""
    import random

    rng = random.Random(31)
    tables = cline.tables
    for _ in range(20_000):
        value = "".join(rng.choice(HEAD_PIECES) for _ in range(rng.randint(0, 8)))
        head = tables.RESULT_HEAD.match(value)
        assert tables.result_head(value) == (None if head is None else (head.group(1), head.end())), value
    for value in ("[read_file for 'a.py'] Result:\nx", "[x for 'a]b'] Result:", "[x for 'a\nb'] Result: \t\ny"):
        head = tables.RESULT_HEAD.match(value)
        assert head is not None and tables.result_head(value) == (head.group(1), head.end()), value


def test_a_whole_environment_details_block_is_passed_over_as_without_harness_empties_it() -> None:
    """The user-message loop passes over a text that is one whole environment_details block without calling
    `without_harness` (parse.py): wherever its test holds, `without_harness` leaves nothing."""
    from extractors.cline.parse import _DETAILS_CLOSE, _DETAILS_OPEN

    texts = [_DETAILS_OPEN, _DETAILS_OPEN + _DETAILS_CLOSE, _DETAILS_OPEN + "\n# Mode\nACT\n" + _DETAILS_CLOSE]
    texts += [_DETAILS_OPEN + value for value in random_texts(20_000, seed=33)]
    held = 0
    for value in texts:
        if value.startswith(_DETAILS_OPEN) and value.find(_DETAILS_CLOSE) == len(value) - len(_DETAILS_CLOSE):
            held += 1
            assert cline.tables.without_harness(value) == "", value
    assert held > 100
