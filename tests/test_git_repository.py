"""`sessions.git_repository`: the remote normalised to what people group by, with its credentials dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extractors.gitremote import repository
from extractors.model import Agent, Loaded
from tests import test_codex as codex_records
from tests import test_grok as grok_records
from tests.support import read_one, shared_fixtures, write_jsonl

TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("https://github.com/o/r", "github.com/o/r"),
        ("https://github.com/o/r.git", "github.com/o/r"),
        ("https://github.com/o/r/", "github.com/o/r"),
        ("git@github.com:o/r.git", "github.com/o/r"),
        ("ssh://git@github.com/o/r.git", "github.com/o/r"),
        ("ssh://git@GitHub.COM:22/o/r", "github.com/o/r"),
        (f"https://user:{TOKEN}@github.com/o/r.git", "github.com/o/r"),
        (f"https://x-access-token:{TOKEN}@github.com/o/r", "github.com/o/r"),
        (f"https://{TOKEN}@github.com/o/r", "github.com/o/r"),
        (f"https://gitlab.example.com/group/sub/r.git?private_token={TOKEN}#x", "gitlab.example.com/group/sub/r"),
        ("git://git.kernel.org/pub/scm/git/git.git", "git.kernel.org/pub/scm/git/git"),
        ("https://github.com/Owner/Repo", "github.com/Owner/Repo"),
        ("/srv/git/r.git", "/srv/git/r"),
        ("file:///srv/git/r.git", "/srv/git/r"),
        ("C:\\src\\r.git", "C:\\src\\r"),
    ],
)
def test_ok_remote_normalised(remote: str, expected: str) -> None:
    assert repository(remote) == expected


@pytest.mark.parametrize(
    "remote",
    ["", "   ", "origin", "[trimmed for fixture]", "https://github.com", "git@host:", "mailto:me@example.com", 42],
)
def test_ok_what_is_not_a_remote_is_null(remote: object) -> None:
    assert repository(remote) is None


def test_ok_codex_repository_url_from_the_first_session_meta_without_credentials(tmp_path: Path) -> None:
    git = {"branch": "main", "commit_hash": "abc", "repository_url": f"https://me:{TOKEN}@github.com/acme/shop.git"}
    records = [
        codex_records.meta(git=git),
        codex_records.turn_context(None),
        codex_records.user_event("hi"),
        codex_records.agent_event("hello"),
    ]
    session = codex_records.load(codex_records.rollout(tmp_path, records))
    assert (session.git_branch, session.git_repository) == ("main", "github.com/acme/shop")
    assert TOKEN not in repr(session)


def test_ok_codex_without_repository_url_has_none(tmp_path: Path) -> None:
    records = [codex_records.meta(git={"branch": "main"}), codex_records.user_event("hi")]
    session = codex_records.load(codex_records.rollout(tmp_path, records))
    assert session.git_repository is None


def test_ok_codex_pre_envelope_header_git(tmp_path: Path) -> None:
    header = {
        "id": codex_records.OWN,
        "timestamp": "2025-08-20T13:20:47.060Z",
        "instructions": "",
        "git": {"branch": "dev", "repository_url": "git@github.com:acme/legacy.git"},
    }
    records = [
        header,
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    path = write_jsonl(tmp_path / f"rollout-{codex_records.OWN}.jsonl", records)
    [outcome] = read_one(Agent("codex"), path)
    assert isinstance(outcome, Loaded)
    assert outcome.session.git_repository == "github.com/acme/legacy"


def test_ok_grok_first_remote_of_git_remotes(tmp_path: Path) -> None:
    meta = grok_records.summary(git_remotes=["not a url", "git@github.com:acme/shop.git", "https://x/y/z"])
    grok_records.session_dir(tmp_path, [grok_records.user("hi"), grok_records.assistant("hello")], meta)
    assert grok_records.load(tmp_path).git_repository == "github.com/acme/shop"


@pytest.mark.parametrize("remotes", [None, [], "git@github.com:acme/shop.git", [{"url": "x"}]])
def test_ok_grok_without_a_usable_remote_has_none(tmp_path: Path, remotes: object) -> None:
    meta = grok_records.summary(**({} if remotes is None else {"git_remotes": remotes}))
    grok_records.session_dir(tmp_path, [grok_records.user("hi"), grok_records.assistant("hello")], meta)
    assert grok_records.load(tmp_path).git_repository is None


def test_ok_grok_real_fixture_summary_remote() -> None:
    path = shared_fixtures("grok/jazzyalex__agent-sessions/session/summary.json")
    summary = json.loads(path.read_text(encoding="utf-8"))
    assert repository(summary["git_remotes"][0]) == "github.com/example-user/example"
