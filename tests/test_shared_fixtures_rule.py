"""The one rule for tests over ../shared/fixtures (tests/support.py, shared_fixtures): a fresh clone without the
folder skips them and says why; under CI=true a missing folder fails them, so that CI never passes by testing less.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def absent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "absent"
    monkeypatch.setattr(support, "SHARED_FIXTURES", path)
    return path


def test_present_folder_gives_the_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(support, "SHARED_FIXTURES", tmp_path)
    monkeypatch.setenv("CI", "true")
    assert support.shared_fixtures() == tmp_path
    assert support.shared_fixtures("codex", "a.jsonl") == tmp_path / "codex" / "a.jsonl"  # missing inside: the test's


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_absent_folder_skips_saying_where(monkeypatch: pytest.MonkeyPatch, absent: Path, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=f"no shared fixtures at {absent}"):
        support.shared_fixtures("grok")


@pytest.mark.parametrize("ci", ["true", "TRUE", "1", "yes"])
def test_absent_folder_fails_under_ci(monkeypatch: pytest.MonkeyPatch, absent: Path, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=f"no shared fixtures at {absent}.*CI=true needs them"):
        support.shared_fixtures("grok")


def test_absent_folder_gives_parametrize_one_placeholder(absent: Path, tmp_path: Path) -> None:
    assert support.shared_fixture_files("codex", "*.jsonl") == [absent / "codex" / "(no *.jsonl file)"]
    (tmp_path / "present" / "codex" / "x").mkdir(parents=True)
    (tmp_path / "present" / "codex" / "x" / "a.jsonl").write_text("{}\n")
    support.SHARED_FIXTURES = tmp_path / "present"  # restored by the monkeypatch of `absent`
    assert support.shared_fixture_files("codex", "*.jsonl") == [tmp_path / "present" / "codex" / "x" / "a.jsonl"]


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """A small pytest run of its own: one test that reads the shared fixtures, none present."""
    (tmp_path / "test_reads_fixtures.py").write_text(
        "from tests.support import shared_fixtures\n\n\n"
        "def test_reads() -> None:\n"
        "    assert shared_fixtures('codex').name == 'codex'\n",
        encoding="utf-8",
    )
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PYTEST_ADDOPTS")}
    env |= {"TRANSCRIPTS_SHARED_FIXTURES": str(tmp_path / "absent"), "PYTHONPATH": str(ROOT)}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rsf", "-p", "no:cacheprovider", "test_reads_fixtures.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_fresh_clone_skips_and_says_why(tmp_path: Path) -> None:
    run = _pytest(tmp_path, None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert f"no shared fixtures at {tmp_path / 'absent'}" in run.stdout  # the -rs line: why, and where it looked


def test_ci_fails_without_them(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed" in run.stdout and "CI=true needs them" in run.stdout


def test_the_tests_that_read_them_follow_the_rule(monkeypatch: pytest.MonkeyPatch, absent: Path) -> None:
    """The one that read ../shared/fixtures without asking (it failed on a fresh clone), and the parametrized ones
    whose parameters are the fixture files (collected as an empty set when there were none)."""
    from tests import test_claude_stream, test_codex_stream, test_git_repository

    placeholder = support.shared_fixture_files("codex", "*.jsonl")[0]
    calls = [
        test_git_repository.test_ok_grok_real_fixture_summary_remote,
        lambda: test_codex_stream.test_ok_shared_fixture_streamed_equals_one_pass(placeholder),
        lambda: test_claude_stream.test_ok_shared_fixture_streamed_equals_one_pass(placeholder),
    ]
    monkeypatch.delenv("CI", raising=False)
    for call in calls:
        with pytest.raises(pytest.skip.Exception, match="no shared fixtures at"):
            call()
    monkeypatch.setenv("CI", "true")
    for call in calls:
        with pytest.raises(pytest.fail.Exception, match="CI=true needs them"):
            call()
