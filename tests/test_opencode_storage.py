"""The legacy OpenCode `storage/` JSON tree: both layouts, ids from paths, fingerprints, the db-wins dedupe."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from extractors import opencode
from extractors.bounded import Limits
from extractors.errors import DeferCode, RejectCode
from extractors.model import Agent, Deferred, Loaded, Rejected, Role
from extractors.opencode import storage as opencode_storage
from extractors.registry import read_source
from tests.opencode_support import T0, add_exchange, add_session, assistant, create_db, storage_session, text, user
from tests.support import SETTLED, loaded_sessions, outcomes_under

EXCHANGE = [
    ("msg_1", user(T0), [("prt_1", text("hello from the old days"))]),
    ("msg_2", assistant(T0 + 1000), [("prt_2", {"type": "reasoning", "text": "hm"}), ("prt_3", text("hi!"))]),
]


def test_ok_current_layout_one_source_per_session(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    storage_session(storage, "ses_a", EXCHANGE)
    storage_session(storage, "ses_b", EXCHANGE[:1])
    sources = list(opencode.discover(tmp_path))
    assert [Path(s.path).name for s in sources] == ["ses_a.json", "ses_b.json"]
    assert {s.kind for s in sources} == {"directory"}
    outcomes = outcomes_under(Agent("opencode"), tmp_path)
    [session] = loaded_sessions(outcomes["storage/session/global/ses_a.json"])
    assert session.session_id == "opencode-ses_a"
    assert [(t.index, t.role, t.text) for t in session.turns] == [
        (0, Role.USER, "hello from the old days"),
        (1, Role.ASSISTANT, "hi!"),
    ]
    assert (session.title, session.cwd, session.cli_versions) == ("legacy", "/legacy", ("1.0.0",))


def test_ok_older_layout_session_info_message_part(tmp_path: Path) -> None:
    storage_session(tmp_path / "storage", "ses_old", EXCHANGE, older=True)
    outcomes = outcomes_under(Agent("opencode"), tmp_path)
    assert list(outcomes) == ["storage/session/info/ses_old.json"]
    [session] = loaded_sessions(outcomes["storage/session/info/ses_old.json"])
    assert [t.text for t in session.turns] == ["hello from the old days", "hi!"]


def test_ok_storage_folder_given_directly_as_root(tmp_path: Path) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    outcomes = outcomes_under(Agent("opencode"), tmp_path / "storage")
    assert len(loaded_sessions(outcomes["session/global/ses_a.json"])) == 1


def test_ok_ids_come_from_paths_not_json(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    info = {"id": "stale_id", "time": {"created": T0}}
    storage_session(storage, "ses_path", EXCHANGE, session=info)
    # a message whose JSON id disagrees with its file name: the file name is its id
    (storage / "message" / "ses_path" / "msg_1.json").write_text(
        json.dumps({"id": "msg_zzz", "role": "user", "time": {"created": T0}}), encoding="utf-8"
    )
    [session] = loaded_sessions(outcomes_under(Agent("opencode"), tmp_path)["storage/session/global/ses_path.json"])
    assert session.native_id == "ses_path"
    assert session.turns[0].text == "hello from the old days"  # parts under part/msg_1 still belong to it


def test_ok_fingerprint_is_total_size_and_newest_mtime_of_the_unit(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    session_file = storage_session(storage, "ses_a", EXCHANGE)
    files = [session_file, *sorted((storage / "message" / "ses_a").iterdir())]
    files += [p for m in ("msg_1", "msg_2") for p in sorted((storage / "part" / m).iterdir())]
    for i, path in enumerate(files):
        os.utime(path, ns=(T0 * 1_000_000 + i, T0 * 1_000_000 + i))
    for folder in (storage / "message" / "ses_a", storage / "part" / "msg_1", storage / "part" / "msg_2"):
        os.utime(folder, ns=(T0 * 1_000_000, T0 * 1_000_000))
    [source] = opencode.discover(tmp_path)
    assert source.size == sum(p.stat().st_size for p in files)
    assert source.mtime_ns == T0 * 1_000_000 + len(files) - 1
    (storage / "part" / "msg_2" / "prt_9.json").write_text('{"type":"text","text":"more"}', encoding="utf-8")
    [changed] = opencode.discover(tmp_path)
    assert (changed.size, changed.mtime_ns) != (source.size, source.mtime_ns)


def test_ok_discovery_does_not_parse(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (storage / "session" / "global").mkdir(parents=True)
    (storage / "session" / "global" / "ses_x.json").write_bytes(b"\xff not json")
    [source] = opencode.discover(tmp_path)
    [outcome] = outcomes_under(Agent("opencode"), tmp_path)["storage/session/global/ses_x.json"]
    assert source.size == 10 and isinstance(outcome, Rejected) and outcome.code is RejectCode.INVALID_UTF8


def test_reject_duplicate_when_the_database_holds_the_session(tmp_path: Path) -> None:
    conn = create_db(tmp_path / "opencode.db")
    add_session(conn, "ses_both")
    add_exchange(conn, "ses_both", 1)
    conn.close()
    storage_session(tmp_path / "storage", "ses_both", EXCHANGE)
    storage_session(tmp_path / "storage", "ses_json_only", EXCHANGE)
    outcomes = outcomes_under(Agent("opencode"), tmp_path)
    [dup] = outcomes["storage/session/global/ses_both.json"]
    assert isinstance(dup, Rejected) and dup.code is RejectCode.DUPLICATE and dup.session_hint == "opencode-ses_both"
    assert [s.native_id for s in loaded_sessions(outcomes["opencode.db"])] == ["ses_both"]
    assert len(loaded_sessions(outcomes["storage/session/global/ses_json_only.json"])) == 1


def test_ok_json_loads_when_the_database_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "opencode.db").write_bytes(b"garbage" * 100)
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    outcomes = outcomes_under(Agent("opencode"), tmp_path)
    assert len(loaded_sessions(outcomes["storage/session/global/ses_a.json"])) == 1
    [bad_db] = outcomes["opencode.db"]
    assert isinstance(bad_db, Rejected) and bad_db.code is RejectCode.SOURCE_UNREADABLE


def test_reject_limit_exceeded_too_many_files(tmp_path: Path) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)  # 2 messages + 3 parts
    [outcome] = outcomes_under(Agent("opencode"), tmp_path, Limits(settle_seconds=0, max_records=4))[
        "storage/session/global/ses_a.json"
    ]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED
    assert outcome.session_hint == "opencode-ses_a"


def test_reject_limit_exceeded_session_bytes(tmp_path: Path) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [outcome] = outcomes_under(Agent("opencode"), tmp_path, Limits(settle_seconds=0, max_conversation_bytes=300))[
        "storage/session/global/ses_a.json"
    ]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.LIMIT_EXCEEDED


def test_reject_invalid_json_part_file_with_session_hint(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    storage_session(storage, "ses_a", EXCHANGE)
    (storage / "part" / "msg_2" / "prt_3.json").write_text('{"type": "text", "text": "x" oops}', encoding="utf-8")
    [outcome] = outcomes_under(Agent("opencode"), tmp_path)["storage/session/global/ses_a.json"]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.INVALID_JSON
    assert outcome.session_hint == "opencode-ses_a"


def test_reject_missing_timestamp_session_file_without_time(tmp_path: Path) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE, session={"title": "no time"})
    [outcome] = outcomes_under(Agent("opencode"), tmp_path)["storage/session/global/ses_a.json"]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.MISSING_TIMESTAMP


def test_ok_message_folder_symlinked_outside_the_root_is_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    storage_session(data / "storage", "ses_a", EXCHANGE[:1])
    outside = tmp_path / "outside"
    storage_session(outside, "ses_b", EXCHANGE)
    (data / "storage" / "message" / "ses_b").symlink_to(outside / "message" / "ses_b")
    storage_session(data / "storage", "ses_b", [])
    [outcome] = outcomes_under(Agent("opencode"), data)["storage/session/global/ses_b.json"]
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.NO_CONVERSATION


def test_ok_flat_part_files_are_not_read(tmp_path: Path) -> None:
    """`part/<partID>.json` directly under part/ is not a layout OpenCode wrote (only a hand-written sample)."""
    storage = tmp_path / "storage"
    storage_session(storage, "ses_a", EXCHANGE[:1])
    (storage / "part" / "prt_flat.json").write_text('{"messageID":"msg_1","type":"text","text":"flat"}', "utf-8")
    [outcome] = outcomes_under(Agent("opencode"), tmp_path, SETTLED)["storage/session/global/ses_a.json"]
    assert isinstance(outcome, Loaded) and [t.text for t in outcome.session.turns] == ["hello from the old days"]


def test_defer_changed_during_read_when_a_file_of_the_unit_changes(tmp_path: Path, monkeypatch: Any) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [source] = opencode.discover(tmp_path)
    real_read = opencode_storage.read_json_document
    calls = []

    def read_and_touch(path: Path, limits: Limits, **kwargs: Any) -> Any:
        calls.append(path)
        if len(calls) == 2:  # OpenCode writes a new part while we read
            (tmp_path / "storage" / "part" / "msg_2" / "prt_new.json").write_text('{"type":"text","text":"x"}')
        return real_read(path, limits, **kwargs)

    monkeypatch.setattr(opencode_storage, "read_json_document", read_and_touch)
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def _read_then(monkeypatch: Any, at_call: int, change: Any) -> None:
    """Reads of the unit's files as usual, `change()` made just before the `at_call`-th (the session file is the
    first; then msg_1, prt_1, msg_2, prt_2, prt_3): OpenCode writing while the unit is read."""
    real_read = opencode_storage.read_json_document
    calls: list[Path] = []

    def read(path: Path, limits: Limits, **kwargs: Any) -> Any:
        calls.append(path)
        if len(calls) == at_call:
            change()
        return real_read(path, limits, **kwargs)

    monkeypatch.setattr(opencode_storage, "read_json_document", read)


def _rewrite(path: Path, text: str) -> None:
    """Write `path` anew (OpenCode rewrites a message's file as its reply streams), with an mtime that moves even on a
    filesystem of coarse times."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_defer_changed_during_read_when_a_listed_file_changes_before_it_is_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [source] = opencode.discover(tmp_path)
    part = tmp_path / "storage" / "part" / "msg_2" / "prt_3.json"
    _read_then(monkeypatch, 2, lambda: _rewrite(part, json.dumps(text("hi! and more"))))  # read 6th: not as listed
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_defer_changed_during_read_when_the_session_file_changes_after_it_is_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [source] = opencode.discover(tmp_path)
    session_file = Path(source.path)
    _read_then(monkeypatch, 3, lambda: _rewrite(session_file, session_file.read_text("utf-8") + " "))
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_defer_changed_during_read_when_a_message_file_is_removed_during_the_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [source] = opencode.discover(tmp_path)
    first = tmp_path / "storage" / "message" / "ses_a" / "msg_1.json"

    def remove_after_its_read() -> None:  # msg_1 was read (2nd call): its folder changes under the read
        before = first.parent.stat().st_mtime_ns
        first.unlink()
        os.utime(first.parent, ns=(before + 10**9, before + 10**9))

    _read_then(monkeypatch, 4, remove_after_its_read)
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Deferred) and outcome.code is DeferCode.CHANGED_DURING_READ


def test_ok_a_file_rewritten_after_it_was_read_loads_as_listed_and_moves_the_fingerprint(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # What was read is the unit as it was when listed: msg_2's part prt_2 rewritten after it was read (before
    # prt_3 is) changes nothing read. Its new time moves the unit's fingerprint: the next run reads it again.
    storage_session(tmp_path / "storage", "ses_a", EXCHANGE)
    [source] = opencode.discover(tmp_path)
    part = tmp_path / "storage" / "part" / "msg_2" / "prt_2.json"
    _read_then(monkeypatch, 6, lambda: _rewrite(part, json.dumps({"type": "reasoning", "text": "hm, more"})))
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Loaded)
    assert [t.text for t in outcome.session.turns] == ["hello from the old days", "hi!"]
    [again] = opencode.discover(tmp_path)
    assert (again.size, again.mtime_ns) != (source.size, source.mtime_ns)
