"""Contract over the shared OpenCode fixtures, golden output, and "any bytes in, a classified outcome out"."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extractors import opencode
from extractors.bounded.sqlite_db import SQLITE_MAGIC
from extractors.errors import RejectCode
from extractors.model import Agent, Loaded, Outcome, Rejected, Role, Source
from extractors.opencode import storage
from extractors.registry import read_source
from tests.opencode_support import add_exchange, add_session, create_db
from tests.support import SETTLED, SHARED_FIXTURES, assert_golden, loaded_sessions, shared_fixtures

FIXTURES = SHARED_FIXTURES / "opencode"

# Roots given to discover(): data directories, or storage folders given directly (the jazzyalex samples name
# their storage folders storage_v2 / storage_legacy).
ROOTS = [
    "codemie-ai__codemie-code",
    "fartypie-d__usage-dashboard",
    "jazzyalex__agent-sessions/storage_v2",
    "jazzyalex__agent-sessions/storage_legacy",
]

# Files that are not (part of) a discovered unit, and why.
NOT_SOURCES = {
    "shuv1337__oc-manager/test.db": "not named opencode*.db, so not discovered; read explicitly below",
    **{
        f"jazzyalex__agent-sessions/storage_v2/{p}": "orphan: ids come from paths and no session file is named "
        "s_stage0_large / s_stage0_small (the session files are ses_s_stage0_*.json)"
        for p in [
            "message/s_stage0_large/msg_0001.json",
            "message/s_stage0_large/msg_0002.json",
            "message/s_stage0_large/msg_0003.json",
            "message/s_stage0_large/msg_0004.json",
            "message/s_stage0_small/msg_0001.json",
            "message/s_stage0_small/msg_0002.json",
            *[f"part/m_assistant_large_1/00{i}.json" for i in range(1, 9)],
            "part/m_assistant_large_2/001.json",
            "part/m_assistant_small/001.json",
            "part/m_assistant_small/002.json",
            "part/m_user_large_1/001.json",
            "part/m_user_large_2/001.json",
            "part/m_user_small/001.json",
        ]
    },
    "jazzyalex__agent-sessions/storage_legacy/message/s_stage0_drift/msg_0001.json": "orphan (ids from paths)",
    "jazzyalex__agent-sessions/storage_legacy/message/s_stage0_drift/msg_0002.json": "orphan (ids from paths)",
    "jazzyalex__agent-sessions/storage_legacy/part/prt_0001.json": "flat part/<id>.json: not an OpenCode layout",
    "jazzyalex__agent-sessions/storage_legacy/part/prt_0002.json": "flat part/<id>.json: not an OpenCode layout",
}

# Expected outcomes per discovered unit: "loaded" or a reject code, with the session hint / id.
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "codemie-ai__codemie-code/storage/session/test-project/test-session-1.json": [
        ("loaded", "opencode-test-session-1")
    ],
    # Verified with `sqlite3 -readonly`: one session row (oc-work-0001) and 24 message rows in 22 other session_ids
    # that have no session row (the copy trimmed the session table): each such group is one inconsistent_source.
    "fartypie-d__usage-dashboard/opencode.db": [("loaded", "opencode-oc-work-0001")]
    + [("inconsistent_source", "")] * 22,
    "jazzyalex__agent-sessions/storage_v2/session/proj_test/ses_s_stage0_large.json": [
        ("no_conversation", "opencode-ses_s_stage0_large")
    ],
    "jazzyalex__agent-sessions/storage_v2/session/proj_test/ses_s_stage0_small.json": [
        ("no_conversation", "opencode-ses_s_stage0_small")
    ],
    "jazzyalex__agent-sessions/storage_legacy/session/proj_test/ses_s_stage0_drift.json": [
        ("no_conversation", "opencode-ses_s_stage0_drift")
    ],
}


def _label(outcome: Outcome) -> tuple[str, str]:
    if isinstance(outcome, Loaded):
        return ("loaded", outcome.session.session_id)
    if isinstance(outcome, Rejected):
        hint = outcome.session_hint or ""
        return (outcome.code.value, "" if outcome.code is RejectCode.INCONSISTENT_SOURCE else hint)
    return (outcome.code.value, "")


def _tree() -> dict[str, str]:
    return {
        str(p.relative_to(FIXTURES)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(FIXTURES.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def shared() -> tuple[dict[str, list[Outcome]], set[str]]:
    shared_fixtures()
    before = _tree()
    outcomes: dict[str, list[Outcome]] = {}
    members: set[str] = set()
    for sub in ROOTS:
        root = FIXTURES / sub
        for source in opencode.discover(root):
            rel = str(Path(source.path).relative_to(FIXTURES))
            outcomes[rel] = list(read_source(source, SETTLED))
            if source.kind == "directory":
                listing = storage.list_unit(storage.Unit.of(Path(source.path)), root)
                files = listing.messages + [f for parts in listing.parts.values() for f in parts]
                members.update(str(p.relative_to(FIXTURES)) for p, _ in files)
    assert _tree() == before, "a shared fixture changed (or a file appeared) while it was read"
    return outcomes, members


def test_contract_every_shared_file_reaches_an_outcome_or_is_listed(
    shared: tuple[dict[str, list[Outcome]], set[str]],
) -> None:
    outcomes, members = shared
    assert {k: sorted(map(_label, v)) for k, v in outcomes.items()} == {k: sorted(v) for k, v in EXPECTED.items()}
    for rel in _tree():
        assert rel in outcomes or rel in members or rel in NOT_SOURCES, f"{rel}: no outcome and not listed"
    assert not (set(NOT_SOURCES) & (set(outcomes) | members))


def test_contract_non_canonical_test_db_is_one_clear_rejection() -> None:
    path = shared_fixtures("opencode", "shuv1337__oc-manager", "test.db")
    st = path.stat()
    source = Source(Agent("opencode"), str(path), st.st_size, st.st_mtime_ns, str(path.parent), "database")
    [outcome] = list(read_source(source, SETTLED))
    assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE
    # `sqlite3 -readonly test.db .schema`: created_at/updated_at instead of time_created; part has no time columns.
    assert outcome.detail == "not an OpenCode database: missing session.time_created, message.time_created"


def test_contract_usage_dashboard_session_counts(shared: tuple[dict[str, list[Outcome]], set[str]]) -> None:
    # Verified by hand with `sqlite3 -readonly opencode.db` (SELECT ... FROM message/part WHERE session_id =
    # 'oc-work-0001'): 4 messages (2 user, 2 assistant), parts: 4 text, 1 reasoning, 1 tool (edit, callID c1);
    # no step-finish parts, so usage comes from the 2 assistant messages' tokens.
    outcomes, _ = shared
    [session] = loaded_sessions(outcomes["fartypie-d__usage-dashboard/opencode.db"])
    assert [t.role for t in session.turns] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    assert [t.text for t in session.turns] == [
        "compose 파일 정리해줘",
        "오버레이 파일로 분리했습니다.",
        "env 파일도 정리해줘",
        ".env.example을 갱신했습니다.",
    ]
    assert [(c.call_id, c.name) for c in session.tool_calls] == [("c1", "edit")]
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) for u in session.usage] == [
        (100, 50, 10, 5),
        (80, 40, 8, 4),
    ]
    assert (session.title, session.cwd, session.models) == ("배포 설정 정리", "/anon/proj_oc", ("gemini-3-pro",))
    assert_golden("opencode_usage_dashboard_oc-work-0001", session)


def test_contract_codemie_storage_session(shared: tuple[dict[str, list[Outcome]], set[str]]) -> None:
    outcomes, _ = shared
    [session] = loaded_sessions(outcomes["codemie-ai__codemie-code/storage/session/test-project/test-session-1.json"])
    assert [(t.role, t.text) for t in session.turns] == [
        (Role.USER, "Create a test file with console.log statements"),
        (Role.ASSISTANT, "Created src/test.ts with three console.log statements and read src/existing.ts."),
    ]
    # the tool parts have no callID (hand-written): the part id stands in
    calls = [(c.call_id, c.name) for c in session.tool_calls]
    assert calls == [("part-tool-read", "Read"), ("part-tool-write", "Write")]
    [usage] = session.usage  # from the step-finish part, not also from the message's tokens
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        1000,
        500,
        200,
        100,
    )


# --- any bytes in, a classified outcome out ----------------------------------------------------------------------


# What broken bytes may give: the reader names the fault; never a session made of garbage.
BROKEN = {RejectCode.INVALID_JSON, RejectCode.INVALID_UTF8, RejectCode.TRUNCATED_TAIL, RejectCode.BAD_SHAPE}


def _good_db_beside(root: Path) -> None:
    conn = create_db(root / "opencode-good.db", wal=False)
    add_session(conn, "ses_good")
    add_exchange(conn, "ses_good", 1)
    conn.close()


def _read(root: Path) -> dict[str, list[Outcome]]:
    """Every unit under root read; the good database beside the hostile unit must load its session."""
    found = {Path(s.path).name: list(read_source(s, SETTLED)) for s in opencode.discover(root)}
    good = found.pop("opencode-good.db")
    assert [o.session.session_id for o in good if isinstance(o, Loaded)] == ["opencode-ses_good"], good
    return found


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=4096), st.booleans())
def test_property_arbitrary_bytes_as_a_database_are_unreadable(raw: bytes, with_magic: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "opencode.db").write_bytes((SQLITE_MAGIC + raw) if with_magic else raw)
        _good_db_beside(root)
        found = _read(root)
        assert list(found) == ["opencode.db"], "the hostile database is discovered"
        [outcome] = found["opencode.db"]
        assert isinstance(outcome, Rejected) and outcome.code is RejectCode.SOURCE_UNREADABLE, outcome


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=512), st.sampled_from(["session", "message", "part"]))
def test_property_arbitrary_bytes_as_storage_json_are_rejected_with_a_reason(raw: bytes, which: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = {
            "session": root / "storage" / "session" / "global" / "ses_a.json",
            "message": root / "storage" / "message" / "ses_a" / "msg_1.json",
            "part": root / "storage" / "part" / "msg_1" / "prt_1.json",
        }
        good = {
            "session": b'{"time": {"created": 1760000000000}}',
            "message": b'{"role": "user", "time": {"created": 1760000000000}}',
            "part": b'{"type": "text", "text": "hi"}',
        }
        for name, path in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw if name == which else good[name])
        _good_db_beside(root)
        found = _read(root)
        assert list(found) == ["ses_a.json"], "the hostile unit is discovered"
        [outcome] = found["ses_a.json"]
        try:
            # As the reader reads it: UTF-8. json.loads(bytes) would guess UTF-16 or -32 from NULs (b"\x000" is 0).
            value = json.loads(raw.decode("utf-8"))
        except ValueError:
            value = None
        if value is None:  # not JSON: the unit is rejected naming the fault
            assert isinstance(outcome, Rejected) and outcome.code in BROKEN, outcome
        elif not isinstance(value, dict):  # JSON, but not an object where one is expected
            assert isinstance(outcome, Rejected) and outcome.code is RejectCode.BAD_SHAPE, outcome
        else:
            assert isinstance(outcome, Loaded | Rejected), outcome
