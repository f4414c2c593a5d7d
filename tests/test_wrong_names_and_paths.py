"""Wrong names and paths a person types: one line that says what is wrong (and what was meant), exit code 2."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from extractors.registry import agents, parse_agent
from tests.test_cli import invoke, one_line

# --- an agent's name, mistyped -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "meant"), [("claud", "claude"), ("Codx", "codex"), ("open", "opencode")])
def test_a_mistyped_agent_name_says_did_you_mean(typed: str, meant: str) -> None:
    with pytest.raises(ValueError, match=f"unknown agent '{typed}'. Did you mean '{meant}'"):
        parse_agent(typed)


def test_a_name_like_no_agent_lists_the_known_ones_without_a_guess() -> None:
    with pytest.raises(ValueError) as raised:
        parse_agent("zzzzzz")
    assert "Did you mean" not in str(raised.value)
    assert all(agent in str(raised.value) for agent in agents())


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--source", "claud"],
        ["run", "--root", "claud=/tmp"],
        ["search", "hello", "--agent", "claud"],
        ["backfill", "--format", "claud", "x.jsonl"],
        ["backfill", "claud", "x.jsonl"],
    ],
    ids=["run --source", "run --root", "search --agent", "backfill --format", "backfill FORMAT"],
)
def test_every_option_naming_an_agent_says_did_you_mean_claude(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "x.jsonl").write_text("{}\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # x.jsonl is relative
    try:
        code, out = invoke(*args, "--data-dir", str(tmp_path / "d"))
    finally:
        os.chdir(cwd)
    assert code == 2, out
    assert "Did you mean 'claude'?" in one_line(out)


# --- a path that is no file ----------------------------------------------------------------------------------------


def test_a_named_pipe_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "conversations.json"
    os.mkfifo(fifo)
    result: list[tuple[int, str]] = []
    worker = threading.Thread(
        target=lambda: result.append(invoke("backfill", "chatgpt", str(fifo), "--data-dir", str(tmp_path / "d"))),
        daemon=True,
    )
    worker.start()
    worker.join(20)
    if worker.is_alive():  # an open() of the pipe waits for a writer: let it go, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("backfill opened the named pipe")
    [(code, out)] = result
    assert code == 2 and f"{fifo} is a named pipe" in one_line(out)


def test_a_link_to_dev_zero_is_refused_as_a_device(tmp_path: Path) -> None:
    link = tmp_path / "export.zip"
    link.symlink_to("/dev/zero")
    code, out = invoke("backfill", "--format", "chatgpt", str(link), "--data-dir", str(tmp_path / "d"))
    assert code == 2 and f"{link} is a device" in one_line(out)


def test_a_folder_with_nothing_to_load_is_named_even_beside_one_that_has(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text("[]")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = invoke("backfill", "chatgpt", str(export), str(empty), "--data-dir", str(tmp_path / "d"))
    assert code == 2 and f"nothing to load at {empty} (looked for chatgpt sources)" in one_line(out)
    assert str(export) not in one_line(out).replace(str(empty), "")
