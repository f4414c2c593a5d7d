"""Every discovery survives every filesystem oddity, lists the good session beside it, and lists a real file once."""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from extractors import discovery
from extractors.model import Agent, Loaded
from extractors.registry import extractor, read_source
from flows.etl.pipeline import discover
from flows.etl.settings import load_settings
from tests.corpus import S1, S2, claude_exchange, write_session
from tests.goose_support import add_exchange as goose_exchange
from tests.goose_support import add_session as goose_session
from tests.goose_support import create_db as goose_db
from tests.opencode_support import add_exchange, add_session, create_db
from tests.support import SETTLED

UUID2 = "dddddddd-0000-4000-8000-000000000004"


@dataclass(frozen=True)
class Layout:
    """A root with one good source, and where a second source of the same agent would be found (by name)."""

    agent: Agent
    root: Path
    good: Path
    odd: Path  # a path discovery accepts by its name; the tests put an oddity there


def _claude(tmp: Path) -> Layout:
    good = write_session(tmp, S1, claude_exchange(S1, 2))
    root = tmp / ".claude" / "projects"
    return Layout(Agent("claude"), root, good, good.with_name(f"{UUID2}.jsonl"))


def _codex(tmp: Path) -> Layout:
    root = tmp / "sessions"
    folder = root / "2026" / "05" / "11"
    folder.mkdir(parents=True)
    good = folder / "rollout-2026-05-11T09-00-00-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    good.write_text("{}\n")
    odd = folder / "rollout-2026-05-11T09-00-01-019e1695-0522-7c83-8b39-0dd37979aaaa.jsonl"
    return Layout(Agent("codex"), root, good, odd)


def _gemini(tmp: Path) -> Layout:
    root = tmp / "tmp"
    chats = root / "proj" / "chats"
    chats.mkdir(parents=True)
    good = chats / "session-2026-01-01T10-00-aaaa.json"
    good.write_text("{}")
    return Layout(Agent("gemini"), root, good, chats / "session-2026-01-01T10-01-bbbb.jsonl")


def _grok(tmp: Path) -> Layout:
    root = tmp / ".grok"
    bucket = root / "sessions" / "%2Fhome%2Fu"
    (bucket / "s1").mkdir(parents=True)
    (bucket / "s2").mkdir(parents=True)
    good = bucket / "s1" / "chat_history.jsonl"
    good.write_text("{}\n")
    return Layout(Agent("grok"), root, good, bucket / "s2" / "chat_history.jsonl")


def _opencode(tmp: Path) -> Layout:
    root = tmp / "opencode"
    conn = create_db(root / "opencode.db", wal=False)
    add_session(conn, "ses_1")
    add_exchange(conn, "ses_1", 1)
    conn.close()
    return Layout(Agent("opencode"), root, root / "opencode.db", root / "opencode-b.db")


def _cursor(tmp: Path) -> Layout:
    root = tmp / ".cursor" / "projects"
    folder = root / "home-u-proj" / "agent-transcripts"
    (folder / S1).mkdir(parents=True)
    good = folder / S1 / f"{S1}.jsonl"
    good.write_text('{"role":"user","message":{"content":"<user_query>hi</user_query>"}}\n')
    return Layout(Agent("cursor"), root, good, folder / S1 / "transcript.jsonl")


def _pi(tmp: Path) -> Layout:
    root = tmp / ".pi" / "agent" / "sessions"
    folder = root / "--home-u--"
    folder.mkdir(parents=True)
    good = folder / "2026-01-01T10-00-00-000Z_aaaaaaaa-0000-4000-8000-000000000001.jsonl"
    good.write_text("{}\n")
    return Layout(Agent("pi"), root, good, folder / f"2026-01-01T10-01-00-000Z_{UUID2}.jsonl")


def _cline(tmp: Path) -> Layout:
    root = tmp / "globalStorage"
    tasks = root / "saoudrizwan.claude-dev" / "tasks"
    (tasks / "1767348000000").mkdir(parents=True)
    (tasks / "1767348000001").mkdir(parents=True)
    good = tasks / "1767348000000" / "api_conversation_history.json"
    good.write_text("[]")
    return Layout(Agent("cline"), root, good, tasks / "1767348000001" / "api_conversation_history.json")


def _copilot(tmp: Path) -> Layout:
    root = tmp / ".copilot"
    state = root / "session-state"
    (state / "s1").mkdir(parents=True)
    (state / "s2").mkdir(parents=True)
    good = state / "s1" / "events.jsonl"
    good.write_text("{}\n")
    return Layout(Agent("copilot"), root, good, state / "s2" / "events.jsonl")


def _aider(tmp: Path) -> Layout:
    root = tmp / "src"
    (root / "proj").mkdir(parents=True)
    (root / "other").mkdir(parents=True)
    good = root / "proj" / ".aider.chat.history.md"
    good.write_text("\n# aider chat started at 2026-01-02 10:00:00\n\n#### hello  \n")
    return Layout(Agent("aider"), root, good, root / "other" / ".aider.chat.history.md")


def _kiro(tmp: Path) -> Layout:
    """The data home given as the root: Kiro CLI's database in `kiro-cli/`, the Amazon Q CLI's in `amazon-q/`."""
    root = tmp / "share"
    (root / "kiro-cli").mkdir(parents=True)
    (root / "amazon-q").mkdir(parents=True)
    good = root / "kiro-cli" / "data.sqlite3"
    with closing(sqlite3.connect(good)) as conn:
        conn.execute("CREATE TABLE conversations (key TEXT PRIMARY KEY, value TEXT)")
        conn.commit()
    return Layout(Agent("kiro"), root, good, root / "amazon-q" / "data.sqlite3")


def _grok_updates(tmp: Path) -> Layout:
    """Sessions of newer Grok builds: the unit is updates.jsonl (chat_history.jsonl beside the good one)."""
    root = tmp / ".grok"
    bucket = root / "sessions" / "%2Fhome%2Fu"
    (bucket / "s1").mkdir(parents=True)
    (bucket / "s2").mkdir(parents=True)
    good = bucket / "s1" / "updates.jsonl"
    good.write_text("{}\n")
    (bucket / "s1" / "chat_history.jsonl").write_text("{}\n")
    return Layout(Agent("grok"), root, good, bucket / "s2" / "updates.jsonl")


def _amp(tmp: Path) -> Layout:
    root = tmp / ".local" / "share" / "amp"  # the threads' parent: a root above the threads folder is walked too
    (root / "threads").mkdir(parents=True)
    good = root / "threads" / "T-019b8a00-0000-7000-8000-000000000001.json"
    good.write_text("{}")
    return Layout(Agent("amp"), root, good, root / "threads" / "T-019b8a00-0000-7000-8000-000000000002.json")


def _qwen(tmp: Path) -> Layout:
    root = tmp / ".qwen" / "projects"
    chats = root / "-home-u" / "chats"
    chats.mkdir(parents=True)
    good = chats / "aaaaaaaa-0000-4000-8000-000000000001.jsonl"
    good.write_text("{}\n")
    return Layout(Agent("qwen"), root, good, chats / f"{UUID2}.jsonl")


def _droid(tmp: Path) -> Layout:
    root = tmp / ".factory" / "sessions"
    folder = root / "-home-u"
    folder.mkdir(parents=True)
    good = folder / "aaaaaaaa-0000-4000-8000-000000000001.jsonl"
    good.write_text("{}\n")
    return Layout(Agent("droid"), root, good, folder / f"{UUID2}.jsonl")


def _goose(tmp: Path) -> Layout:
    """Goose's data folder given as the root: sessions.db in its `sessions/` (or, the odd one, directly in it)."""
    root = tmp / "goose"
    conn = goose_db(root / "sessions" / "sessions.db")
    goose_session(conn, "s1")
    goose_exchange(conn, "s1", 1)
    conn.close()
    return Layout(Agent("goose"), root, root / "sessions" / "sessions.db", root / "sessions.db")


LAYOUTS: dict[str, Callable[[Path], Layout]] = {
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "grok": _grok,
    "opencode": _opencode,
    "cursor": _cursor,
    "pi": _pi,
    "cline": _cline,
    "copilot": _copilot,
    "aider": _aider,
    "grok-updates": _grok_updates,
    "amp": _amp,
    "qwen": _qwen,
    "droid": _droid,
    "goose": _goose,
    "kiro": _kiro,
}


def listed(layout: Layout) -> list[str]:
    return [s.path for s in extractor(layout.agent).discover(layout.root)]


@pytest.fixture(params=sorted(LAYOUTS))
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Layout]:
    discovery.drain_skips()
    yield LAYOUTS[request.param](tmp_path)
    discovery.drain_skips()


def _mknod_or_fake(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A character device at `path`; where mknod is not allowed, a file whose stat says it is one."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        return
    except PermissionError:
        path.write_text("")
    real_stat = os.stat

    def fake(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = real_stat(target, *args, **kwargs)
        if os.fspath(target) == str(path):
            return os.stat_result((stat.S_IFCHR | 0o600, *tuple(st)[1:]))
        return st

    monkeypatch.setattr(os, "stat", fake)


def test_a_symlink_loop_named_like_a_source_is_skipped_and_counted(layout: Layout) -> None:
    other = layout.odd.with_name("loop-partner")  # named like nothing: only the source name counts
    os.symlink(other, layout.odd)
    os.symlink(layout.odd, other)
    assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"symlink_loop": 1}


def test_a_dangling_link_is_skipped_and_counted(layout: Layout) -> None:
    os.symlink(layout.odd.with_name("gone"), layout.odd)
    assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"dangling_link": 1}


def test_a_fifo_is_never_opened(layout: Layout) -> None:
    os.mkfifo(layout.odd)
    # Opening a FIFO with no writer would block this test for ever; discovery only stats it.
    assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"fifo": 1}


def test_a_socket_is_skipped(layout: Layout) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        cwd = os.getcwd()
        os.chdir(layout.odd.parent)  # AF_UNIX paths are limited to ~100 bytes: bind the short relative name
        try:
            sock.bind(layout.odd.name)
        finally:
            os.chdir(cwd)
        assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"socket": 1}


def test_a_device_file_is_skipped(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    _mknod_or_fake(layout.odd, monkeypatch)
    assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"device": 1}


def test_an_entry_vanishing_between_listing_and_stat_is_passed_over(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout.odd.write_text("{}\n")
    real_stat = os.stat

    def vanish(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(target) == str(layout.odd):
            layout.odd.unlink(missing_ok=True)  # deleted right after scandir listed it
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(target))
        return real_stat(target, *args, **kwargs)

    monkeypatch.setattr(os, "stat", vanish)
    assert listed(layout) == [str(layout.good)]
    assert discovery.drain_skips() == {"vanished": 1}


def test_an_unreadable_folder_is_logged_and_the_rest_is_found(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # chmod 0 proves nothing as root (CI runs as root): the folder's listing is refused at the call instead.
    blocked = (layout.good.parent if layout.agent == Agent("opencode") else layout.good.parent.parent) / "blocked"
    blocked.mkdir()
    real_scandir = os.scandir

    def refuse(target: Any = ".") -> Any:
        if os.fspath(target) == str(blocked):
            raise PermissionError(errno.EACCES, "Permission denied", str(target))
        return real_scandir(target)

    monkeypatch.setattr(os, "scandir", refuse)
    found = listed(layout)
    assert str(layout.good) in found
    if layout.agent in (Agent("opencode"), Agent("goose")):
        assert discovery.drain_skips() == {}  # databases sit in the root (Goose: or its sessions/): others unlisted
    elif layout.agent == Agent("kiro"):
        assert discovery.drain_skips() == {}  # only the `kiro-cli` / `amazon-q` folders are listed, never `blocked`
    else:
        assert discovery.drain_skips() == {"unreadable_folder": 1}
        assert "unreadable_folder" in caplog.text and str(blocked) in caplog.text


def test_a_folder_link_back_into_the_root_lists_each_file_once(layout: Layout) -> None:
    os.symlink(".", layout.good.parent / "loop")  # `ln -s . loop`
    os.symlink(layout.root, layout.root / "again")
    assert listed(layout) == [str(layout.good)]


def test_a_second_name_for_a_file_lists_it_once_under_its_own_path(layout: Layout) -> None:
    os.symlink(layout.good.name, layout.odd)  # e.g. opencode-b.db -> opencode.db
    assert listed(layout) == [str(layout.good)]
    os.unlink(layout.odd)
    os.link(layout.good, layout.odd)  # a hard link: two own paths, the fewest parts then the smaller name wins
    assert listed(layout) == [min(str(layout.good), str(layout.odd))]


def test_the_choice_of_path_does_not_depend_on_listing_order(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    os.link(layout.good, layout.odd)
    first = listed(layout)
    real_scandir = os.scandir

    class Reversed:
        def __init__(self, target: Any) -> None:
            self.inner = real_scandir(target)

        def __enter__(self) -> Iterator[os.DirEntry[str]]:
            return iter(sorted(self.inner, key=lambda e: e.name, reverse=True))

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

    monkeypatch.setattr(os, "scandir", Reversed)
    assert listed(layout) == first


def test_the_good_session_beside_the_oddities_still_loads(tmp_path: Path) -> None:
    lay = _claude(tmp_path)
    os.mkfifo(lay.odd)
    os.symlink(".", lay.good.parent / "loop")
    os.symlink("nowhere.jsonl", lay.good.with_name(f"{S2}.jsonl"))
    [source] = list(extractor(Agent("claude")).discover(lay.root))
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Loaded) and outcome.session.native_id == S1
    assert discovery.drain_skips() == {"dangling_link": 1, "fifo": 1}


def test_the_run_lists_a_file_once_across_roots_and_counts_skips(tmp_path: Path) -> None:
    home = tmp_path / "home"
    good = write_session(home, S1, claude_exchange(S1, 2))
    projects = home / ".claude" / "projects"
    alias = tmp_path / "alias"
    os.symlink(projects, alias)  # a second root that is the first one under another name
    os.mkfifo(good.with_name(f"{UUID2}.jsonl"))
    env = {"HOME": str(home), "TRANSCRIPTS_ROOT_CLAUDE": f"{projects},{alias}"}
    settings = load_settings(home=home, data_dir=tmp_path / "data", sources=["claude"], env=env)
    found = discover(settings)
    assert [s.path for s in found.sources] == [str(good)]
    assert found.skipped == {"fifo": 2}  # seen once under each root, counted each time
    assert sorted(found.scanned[Agent("claude")]) == sorted([str(projects), str(alias)])


def test_a_root_whose_listing_fails_is_left_out_not_taken_for_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2))
    module = extractor(Agent("claude"))

    def broken(_root: Path) -> Iterator[Any]:
        raise OSError(errno.EIO, "Input/output error")
        yield  # pragma: no cover

    monkeypatch.setattr(module, "discover", broken)
    settings = load_settings(home=home, data_dir=tmp_path / "data", sources=["claude"], env={"HOME": str(home)})
    found = discover(settings)
    assert found.sources == [] and found.scanned == {}
    assert found.skipped == {"root_unlisted": 1}


def test_a_bug_in_a_discovery_costs_its_root_not_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    good = write_session(home, S1, claude_exchange(S1, 2))
    codex_root = home / ".codex" / "sessions"
    codex_root.mkdir(parents=True)

    def buggy(_root: Path) -> Iterator[Any]:
        raise ValueError("a bug")
        yield  # pragma: no cover

    monkeypatch.setattr(extractor(Agent("codex")), "discover", buggy)
    env = {"HOME": str(home)}
    settings = load_settings(home=home, data_dir=tmp_path / "data", sources=["claude", "codex"], env=env)
    found = discover(settings)
    assert [s.path for s in found.sources] == [str(good)]
    assert found.skipped == {"root_unlisted": 1} and Agent("codex") not in found.scanned


def test_an_opencode_symlink_loop_does_not_stop_the_run(tmp_path: Path) -> None:
    # opencode.db -> opencode-b.db -> opencode.db once raised ELOOP before the flow started; a real database in
    # the same folder must still load.
    from flows.etl.flow import run_etl

    home = tmp_path / "home"
    root = home / ".local" / "share" / "opencode"
    conn = create_db(root / "opencode-main.db", wal=False)
    add_session(conn, "ses_1")
    add_exchange(conn, "ses_1", 1)
    conn.close()
    os.symlink("opencode-b.db", root / "opencode.db")
    os.symlink("opencode.db", root / "opencode-b.db")
    settings = load_settings(
        home=home, data_dir=tmp_path / "data", sources=["opencode"], env={"HOME": str(home)}, lock_wait=5
    )
    report = run_etl(settings, full=False, as_tasks=False)
    assert report.committed is not None and report.committed.sessions_loaded == 1
