"""The fuzzing suite's machinery: every format's good session and hostile target, mutations, and the checks.

A *case* is a home (tmp dir) laid out as the agent writes it, holding a known-good session (`good`) and a target
source made hostile by one mutation. The checks call the extractor's own `read` (no catch-all in between), so a
crash is an exception the test sees.

Mutations work on the valid documents of the target: replace one field (anywhere, at any depth) by a raw JSON text
of another type or a hostile one (4301-digit and 2**64 integers, 1e400, NaN, lone surrogates, NUL, invalid
UTF-8, deep nesting), delete a field, or work on the bytes: truncate, splice, insert arbitrary bytes, glue or
shuffle JSONL lines, or arbitrary bytes for the whole file.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import sqlite3
import zipfile
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from extractors.bounded import Limits
from extractors.errors import DeferError, RejectError
from extractors.model import Agent, Deferred, Loaded, Outcome, Rejected, Source
from extractors.registry import extractor
from tests import goose_support as gs
from tests import opencode_support as oc
from tests.claude_records import assistant, text, user
from tests.corpus import codex_rollout, grok_session
from tests.support import SETTLED
from tests.test_chatgpt import conversation
from tests.test_chatgpt import text as gpt_text
from tests.test_claude_ai import chat as claude_ai_chat
from tests.test_claude_ai import conversation as claude_ai_conversation
from transforms.normalize import session_tables
from transforms.redact import Redactor

# ---------------------------------------------------------------------------------------------------- budget
# Examples per fuzz test: a bounded number in CI, many more on demand (TRANSCRIPTS_FUZZ_EXAMPLES=5000).
EXAMPLES = int(os.environ.get("TRANSCRIPTS_FUZZ_EXAMPLES", "60"))
# Bounded time: one example (build the home, read every source) past this fails. Generous: CI machines are shared.
DEADLINE = timedelta(milliseconds=int(os.environ.get("TRANSCRIPTS_FUZZ_DEADLINE_MS", "20000")))
# Bounded memory: the growth of the process's resident peak while one case is read, over a floor (the inputs are
# at most a few hundred KB). Resident memory, not tracemalloc: a reserved but never touched buffer costs nothing.
MEMORY_FLOOR = 48 * 1024 * 1024
MEMORY_PER_INPUT_BYTE = 64

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=DEADLINE,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# ---------------------------------------------------------------------------------------------------- values
# Raw JSON texts (bytes: some are not valid UTF-8 or not valid JSON) put in place of one field.
WRONG_TYPES = [
    b"null", b"true", b"false", b"0", b"-1", b"1.5", b'""', b'"x"', b"[]", b"{}", b"[null]", b'{"":null}',
    b'[{}]', b'"2026-13-45T99:99:99Z"', b'"not a time"', b"-0", b"1e3",
]  # fmt: skip
HUGE_NUMBERS = [
    b"1" * 4301, b"-" + b"9" * 4301, str(2**64).encode(), str(2**63).encode(), str(-(2**63) - 1).encode(),
    b"9" * 30, b"1e400", b"-1e400", b"1e-400", b"NaN", b"Infinity", b"-Infinity", b"1.7976931348623157e309",
    b"123456789012345678901234567890.5",
]  # fmt: skip
HOSTILE_STRINGS = [
    b'"\\ud800"', b'"x\\udfffy"', b'"\\ud83d"', b'"\\udc00\\ud800"', b'"a\\u0000b"', b'"a\x00b"', b'"\xff\xfe"',
    b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\xe2\x82"', b'"\\u"', b'"tab\there"', b'"\\"', b'"\xe9"',
]  # fmt: skip
NESTING = [
    b"[" * 100 + b"]" * 100, b"[" * 1100 + b"]" * 1100, b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 2000 + b"1" + b"}" * 2000, b"[" * 50_000, b'{"a":' * 30_000 + b"{}" + b"}" * 30_000,
]  # fmt: skip
RAW_VALUES = WRONG_TYPES + HUGE_NUMBERS + HOSTILE_STRINGS + NESTING

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
# A replacement value: a raw hostile text, or any JSON value Hypothesis makes (NaN, Infinity, lone surrogates
# escaped as \udxxx, huge integers), written as the stdlib writes it.
REPLACEMENT = st.sampled_from(RAW_VALUES) | _JSON_VALUES.map(lambda v: json.dumps(v).encode())

_HOLE = "@@fuzz-hole@@"
_HOLE_BYTES = json.dumps(_HOLE).encode()


# ---------------------------------------------------------------------------------------------------- documents
@dataclass
class Doc:
    """One file of a target: a whole-JSON document or JSONL records; `mutable` says which top paths may change."""

    kind: str  # "json" | "jsonl" | "text" (a list of lines, each written with a newline)
    value: Any  # the document, or the list of records, or of lines
    mutable: Callable[[tuple[Any, ...]], bool] = lambda path: True

    def dump(self, value: Any | None = None) -> bytes:
        value = self.value if value is None else value
        if self.kind == "jsonl":
            return b"".join(json.dumps(r).encode() + b"\n" for r in value)
        if self.kind == "text":  # a field mutation replaces one line (the hole is written as JSON, to be replaced)
            return b"".join((json.dumps(r) if r == _HOLE else str(r)).encode() + b"\n" for r in value)
        return json.dumps(value).encode()


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location in a JSON value (keys and indexes), the root first."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from paths_of(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from paths_of(inner, (*prefix, index))


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = new if len(path) == 1 else _set(value[path[0]], path[1:], new)
    return value


def _delete(value: Any, path: tuple[Any, ...]) -> None:
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]


@st.composite
def field_mutation(draw: st.DrawFn, doc: Doc) -> tuple[bytes, str]:
    """The document with one field replaced by `REPLACEMENT` (or deleted): a wrong type in any field."""
    # The roots of JSONL records are records: replacing one whole is a line that is not an object.
    candidates = [p for p in paths_of(doc.value) if p and doc.mutable(p)]
    path = draw(st.sampled_from(candidates))
    value = copy.deepcopy(doc.value)
    if len(path) > 1 and draw(st.integers(0, 5)) == 0:
        _delete(value, path)
        return doc.dump(value), f"delete {path}"
    raw = draw(REPLACEMENT)
    dumped = doc.dump(_set(value, path, _HOLE))
    return dumped.replace(_HOLE_BYTES, raw, 1), f"field {path} = {raw[:60]!r}"


@st.composite
def byte_mutation(draw: st.DrawFn, doc: Doc) -> tuple[bytes, str]:
    """The document's bytes truncated, spliced, with bytes inserted, lines glued or shuffled, or arbitrary bytes."""
    raw = doc.dump()
    kind = draw(st.sampled_from(["truncate", "splice", "insert", "lines", "bytes"]))
    if kind == "truncate":
        cut = draw(st.integers(0, len(raw)))
        return raw[:cut], f"truncate at {cut} of {len(raw)}"
    if kind == "splice":  # a prefix of the document glued to a suffix of it (or of itself at another place)
        i, j = draw(st.integers(0, len(raw))), draw(st.integers(0, len(raw)))
        return raw[:i] + raw[j:], f"splice [:{i}] + [{j}:]"
    if kind == "insert":
        at = draw(st.integers(0, len(raw)))
        junk = draw(st.binary(min_size=1, max_size=16) | st.sampled_from([b"\x00", b"\xff", b"\n", b"\r\n", b"\\"]))
        return raw[:at] + junk + raw[at:], f"insert {junk!r} at {at}"
    if kind == "lines":
        lines = raw.split(b"\n")
        order = draw(st.permutations(range(len(lines))))
        keep = draw(st.integers(1, len(lines)))
        glue = draw(st.booleans())
        picked = [lines[i] for i in order[:keep]]
        joiner = b"" if glue and len(picked) > 1 else b"\n"
        return joiner.join(picked), f"lines {order[:keep]} glued={glue}"
    return draw(st.binary(max_size=600)), "arbitrary bytes"


# ---------------------------------------------------------------------------------------------------- formats
@dataclass
class Case:
    """A home with a good session and a hostile target, ready to discover."""

    agent: Agent
    home: Path
    roots: list[Path]
    target: Path  # the source path of the hostile unit
    good: dict[str, str]  # good source path -> its session id (must load, whatever the target holds)
    beside: set[str] = field(default_factory=set)  # session ids in the target source that must still load
    described: str = ""


@dataclass
class Format:
    """How to lay out one format: its target documents and how to write them, the good session beside them."""

    name: str
    agent: Agent
    docs: Callable[[], dict[str, Doc]]  # file name (relative to the target folder) -> valid document
    write: Callable[[Path, dict[str, bytes], bool], Case]  # (home, file bytes, field-mutation?) -> the case


def _records(lines: str) -> list[Any]:
    return [json.loads(line) for line in lines.splitlines() if line.strip()]


# Claude Code: `<project>/<sessionId>.jsonl`; the good session is another file in the same project folder.
CLAUDE_T = "11111111-2222-4333-8444-555555555555"
CLAUDE_G = "aaaaaaaa-0000-4000-8000-00000000000a"


def _claude_records(sid: str) -> list[Any]:
    ts = "2026-02-10T21:00:00.000Z"
    records = [
        user("a question", sid=sid, ts=ts),
        assistant([text("an answer")], sid=sid, ts=ts, msg_id=f"msg_{sid[:4]}", request_id="req_1"),
        user("another", sid=sid, ts="2026-02-10T21:01:00.000Z"),
    ]
    for number, record in enumerate(records):  # the builders count uuids globally: the same bytes every time
        record["uuid"] = f"uuid-{sid[:4]}-{number}"
    return records


def _claude_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    project = home / ".claude" / "projects" / "-home-u-proj"
    project.mkdir(parents=True, exist_ok=True)
    good = project / f"{CLAUDE_G}.jsonl"
    good.write_bytes(Doc("jsonl", _claude_records(CLAUDE_G)).dump())
    target = project / f"{CLAUDE_T}.jsonl"
    target.write_bytes(files["session.jsonl"])
    return Case(Agent("claude"), home, [home / ".claude" / "projects"], target, {str(good): f"claude-{CLAUDE_G}"})


# Codex: `sessions/YYYY/MM/DD/rollout-...-<thread>.jsonl`; the good rollout is another day's file.
CODEX_T = "019e1695-0522-7c83-8b39-0dd379793f80"
CODEX_G = "019e1695-0522-7c83-8b39-0dd379793faa"


def _codex_docs() -> dict[str, Doc]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = codex_rollout(Path(tmp), CODEX_T, 2)
        return {"rollout.jsonl": Doc("jsonl", _records(path.read_text(encoding="utf-8")))}


def _codex_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    good = codex_rollout(home, CODEX_G, 2, day="2026-05-10")
    target = home / ".codex" / "sessions" / "2026" / "05" / "11" / f"rollout-2026-05-11T09-00-00-{CODEX_T}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(files["rollout.jsonl"])
    return Case(Agent("codex"), home, [home / ".codex" / "sessions"], target, {str(good): f"codex-{CODEX_G}"})


# Grok: `sessions/<cwd>/<id>/chat_history.jsonl` + `summary.json`; the good session is another folder.
GROK_T = "019f6851-7ec4-7ef0-97d3-03f3eee38755"
GROK_G = "019f6851-7ec4-7ef0-97d3-03f3eee387aa"


def _grok_docs() -> dict[str, Doc]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = grok_session(Path(tmp), GROK_T, 2)
        return {
            "chat_history.jsonl": Doc("jsonl", _records((folder / "chat_history.jsonl").read_text(encoding="utf-8"))),
            "summary.json": Doc("json", json.loads((folder / "summary.json").read_text(encoding="utf-8"))),
        }


def _grok_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    good = grok_session(home, GROK_G, 2) / "chat_history.jsonl"
    folder = good.parent.parent / GROK_T
    folder.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    return Case(Agent("grok"), home, [home / ".grok"], folder / "chat_history.jsonl", {str(good): f"grok-{GROK_G}"})


# Gemini CLI: `<project>/chats/session-*.json` (one document) and `*.jsonl` (records); good: another recording.
GEMINI_META = {
    "projectHash": "ab" * 32,
    "startTime": "2026-01-02T03:04:05.000Z",
    "lastUpdated": "2026-01-02T03:10:00.000Z",
}


def _gemini_messages() -> list[dict[str, Any]]:
    ts = "2026-01-02T03:05:00.000Z"
    return [
        {"id": "m1", "timestamp": ts, "type": "user", "content": "hi"},
        {
            "id": "m2",
            "timestamp": ts,
            "type": "gemini",
            "content": "hello",
            "model": "gemini-2.5-pro",
            "tokens": {"input": 10, "output": 5, "cached": 2, "thoughts": 1, "tool": 0, "total": 16},
            "toolCalls": [{"id": "c1", "name": "ls", "args": {"dir": "."}, "status": "success", "result": []}],
        },
    ]


def _gemini_json(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, **GEMINI_META, "messages": _gemini_messages()}


def _gemini_jsonl(sid: str) -> list[dict[str, Any]]:
    return [{"sessionId": sid, **GEMINI_META, "kind": "main"}, *_gemini_messages()]


def _gemini_write(suffix: str) -> Callable[[Path, dict[str, bytes], bool], Case]:
    def write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
        chats = home / ".gemini" / "tmp" / "proj" / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        good = chats / "session-2026-01-02T03-04-gggggggg.json"
        good.write_bytes(Doc("json", _gemini_json("good-session")).dump())
        target = chats / f"session-2026-01-02T03-04-tttttttt.{suffix}"
        target.write_bytes(files[f"session.{suffix}"])
        return Case(Agent("gemini"), home, [home / ".gemini" / "tmp"], target, {str(good): "gemini-good-session"})

    return write


# OpenCode database: the target session's message and part rows hold the (mutated) JSON; a second session in the
# same database must still load after a field mutation; the good session is in another database beside it.
def _opencode_db_docs() -> dict[str, Doc]:
    rows = {
        "msg_u": oc.user(oc.T0),
        "msg_a": oc.assistant(
            oc.T0 + 1000, tokens={"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 1, "write": 0}}
        ),
        "prt_u": oc.text("a question"),
        "prt_a": oc.text("an answer"),
        "prt_t": {"type": "tool", "callID": "c1", "tool": "bash", "state": {"status": "completed", "input": {}}},
    }
    return {"rows": Doc("json", rows)}


def _opencode_db_write(home: Path, files: dict[str, bytes], field_mutation: bool) -> Case:
    root = home / ".local" / "share" / "opencode"
    root.mkdir(parents=True, exist_ok=True)
    good = root / "opencode-good.db"
    good.write_bytes(_good_db_bytes())
    target = root / "opencode.db"
    raw = files["rows"]
    if not field_mutation:  # the bytes of the database file itself
        target.write_bytes(_opencode_db_file(raw))
        return Case(Agent("opencode"), home, [root], target, {str(good): "opencode-ses_good"})
    conn = oc.create_db(target, wal=False)
    oc.add_session(conn, "ses_beside")
    oc.add_exchange(conn, "ses_beside", 1)
    oc.add_session(conn, "ses_t")
    try:
        rows = json.loads(raw.decode("utf-8", "surrogatepass"))
        texts = {k: json.dumps(v) for k, v in rows.items()} if isinstance(rows, dict) else None
    except (ValueError, RecursionError):
        texts = None
    if texts is None:  # the mutation broke the row map itself: the hostile text is one row's data
        texts = {"msg_u": raw.decode("utf-8", "surrogateescape"), "prt_u": json.dumps(oc.text("x"))}
    for key, data in texts.items():
        # TEXT from bytes: the hostile row may hold invalid UTF-8, as a damaged database can
        blob = data.encode("utf-8", "surrogateescape")
        if key.startswith("msg_"):
            conn.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data)"
                " VALUES (?, 'ses_t', ?, ?, CAST(? AS TEXT))",
                (key, oc.T0, oc.T0, blob),
            )
        else:
            owner = "msg_a" if key != "prt_u" else "msg_u"
            conn.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                " VALUES (?, ?, 'ses_t', ?, ?, CAST(? AS TEXT))",
                (key, owner, oc.T0, oc.T0, blob),
            )
    conn.close()
    return Case(Agent("opencode"), home, [root], target, {str(good): "opencode-ses_good"}, {"opencode-ses_beside"})


@functools.cache
def _db_bytes(sid: str, exchanges: int) -> bytes:
    """A canonical database holding one session, as bytes (built once: SQLite files cost milliseconds each)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "opencode.db"
        conn = oc.create_db(path, wal=False)
        oc.add_session(conn, sid)
        oc.add_exchange(conn, sid, exchanges)
        conn.close()
        return path.read_bytes()


def _good_db_bytes() -> bytes:
    return _db_bytes("ses_good", 2)


def _opencode_db_file(raw: bytes) -> bytes:
    """A byte mutation of a database: the mutated bytes spliced into a real database file (its header kept)."""
    real = _db_bytes("ses_t", 1)
    # Half the cases damage a real file at an offset derived from the mutation; the others are the raw bytes.
    if len(raw) % 2:
        return raw
    at = (len(raw) * 37) % len(real)
    return real[:at] + raw + real[at + len(raw) :]


# OpenCode legacy storage: one session's session/message/part files; the good session is another unit.
def _opencode_storage_docs() -> dict[str, Doc]:
    return {
        "session": Doc(
            "json",
            {
                "id": "ses_t",
                "title": "t",
                "directory": "/w",
                "version": "1.0.0",
                "time": {"created": oc.T0, "updated": oc.T0 + 5000},
            },
        ),
        "message_u": Doc("json", {"id": "msg_u", "sessionID": "ses_t", **oc.user(oc.T0)}),
        "message_a": Doc("json", {"id": "msg_a", "sessionID": "ses_t", **oc.assistant(oc.T0 + 1000)}),
        "part_u": Doc("json", {"id": "prt_u", "messageID": "msg_u", "sessionID": "ses_t", **oc.text("question")}),
        "part_a": Doc("json", {"id": "prt_a", "messageID": "msg_a", "sessionID": "ses_t", **oc.text("answer")}),
    }


def _opencode_storage_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    root = home / ".local" / "share" / "opencode"
    storage = root / "storage"
    good = oc.storage_session(
        storage,
        "ses_good",
        [("msg_gu", oc.user(oc.T0), [("prt_gu", oc.text("q"))]),
         ("msg_ga", oc.assistant(oc.T0 + 1), [("prt_ga", oc.text("a"))])],
    )  # fmt: skip
    places = {
        "session": storage / "session" / "global" / "ses_t.json",
        "message_u": storage / "message" / "ses_t" / "msg_u.json",
        "message_a": storage / "message" / "ses_t" / "msg_a.json",
        "part_u": storage / "part" / "msg_u" / "prt_u.json",
        "part_a": storage / "part" / "msg_a" / "prt_a.json",
    }
    for name, raw in files.items():
        places[name].parent.mkdir(parents=True, exist_ok=True)
        places[name].write_bytes(raw)
    return Case(Agent("opencode"), home, [root], places["session"], {str(good): "opencode-ses_good"})


# ChatGPT: an export (conversations.json or a .zip of it) with a good conversation beside the target one, and a
# good export beside it in the same folder.
def _gpt(cid: str) -> dict[str, Any]:
    return conversation([gpt_text("user", "question"), gpt_text("assistant", "answer")], cid=cid)


def _chatgpt_docs() -> dict[str, Doc]:
    return {"conversations.json": Doc("json", [_gpt("beside"), _gpt("t")], mutable=lambda path: path[0] == 1)}


def _zip_of(raw: bytes, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        archive.writestr("conversations.json", raw)
    return buffer.getvalue()


def _chatgpt_write(zipped: bool) -> Callable[[Path, dict[str, bytes], bool], Case]:
    def write(home: Path, files: dict[str, bytes], field_mutation: bool) -> Case:
        folder = home / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        good = folder / "good.zip"
        good.write_bytes(_zip_of(json.dumps([_gpt("good")]).encode()))
        raw = files["conversations.json"]
        target = folder / ("export.zip" if zipped else "conversations.json")
        # stored, not deflated: deep nesting compresses past max_compression_ratio, and a zip bomb is rightly
        # rejected whole (tests/test_chatgpt_stream.py), which would leave no good conversation to check
        target.write_bytes(_zip_of(raw, zipfile.ZIP_STORED) if zipped else raw)
        beside = {"chatgpt-beside"} if field_mutation else set()
        return Case(Agent("chatgpt"), home, [folder], target, {str(good): "chatgpt-good"}, beside)

    return write


# Cursor: `~/.cursor/projects/<cwd>/agent-transcripts/<id>/<id>.jsonl`; the good session is a flat `<id>.jsonl` beside.
CURSOR_T = "7f3c1a2e-0b4d-4c5e-9f61-2a3b4c5d6e7f"
CURSOR_G = "6d8e0f1a-2b3c-4d5e-8f90-a1b2c3d4e5f6"


def _cursor_records() -> list[Any]:
    def row(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "message": {"content": list(blocks)}}

    return [
        row("user", {"type": "text", "text": "<timestamp>Sunday, Sep 20, 2026, 12:31 AM (UTC+3)</timestamp>\n"
                     "<user_query>\nfix the build\n</user_query>"}),
        row("assistant", {"type": "text", "text": "[REDACTED]"},
            {"type": "tool_use", "name": "Shell", "input": {"command": "make"}}),
        row("assistant", {"type": "text", "text": "Fixed.\n\n[REDACTED]"}),
        {"type": "turn_ended", "status": "success"},
    ]  # fmt: skip


def _cursor_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    folder = home / ".cursor" / "projects" / "home-u-proj" / "agent-transcripts"
    (folder / CURSOR_T).mkdir(parents=True, exist_ok=True)
    good = folder / f"{CURSOR_G}.jsonl"
    good.write_bytes(Doc("jsonl", _cursor_records()).dump())
    target = folder / CURSOR_T / f"{CURSOR_T}.jsonl"
    target.write_bytes(files["transcript.jsonl"])
    return Case(Agent("cursor"), home, [home / ".cursor" / "projects"], target, {str(good): f"cursor-{CURSOR_G}"})


# Pi: `sessions/--<cwd>--/<time>_<id>.jsonl`, a v3 entry tree; the good session is another file in the same folder.
PI_T = "77777777-2222-4333-8444-555555555555"
PI_G = "aaaaaaaa-0000-4000-8000-0000000000b1"


def _pi_records(sid: str) -> list[Any]:
    at = "2026-02-10T21:00:00.000Z"
    ms = 1770757200000
    return [
        {"type": "session", "version": 3, "id": sid, "timestamp": at, "cwd": "/w"},
        {"type": "message", "id": "e1", "parentId": None, "timestamp": at,
         "message": {"role": "user", "content": [{"type": "text", "text": "a question"}], "timestamp": ms}},
        {"type": "message", "id": "e2", "parentId": "e1", "timestamp": at,
         "message": {"role": "assistant", "model": "m", "provider": "p", "stopReason": "toolUse", "timestamp": ms + 1,
                     "content": [{"type": "text", "text": "an answer"},
                                 {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}],
                     "usage": {"input": 3, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.1}}}},
        {"type": "message", "id": "e3", "parentId": "e2", "timestamp": at,
         "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": False,
                     "content": [{"type": "text", "text": "x"}], "timestamp": ms + 2}},
    ]  # fmt: skip


def _pi_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    folder = home / ".pi" / "agent" / "sessions" / "--w--"
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / f"2026-02-10T21-00-00-000Z_{PI_G}.jsonl"
    good.write_bytes(Doc("jsonl", _pi_records(PI_G)).dump())
    target = folder / f"2026-02-10T21-00-00-000Z_{PI_T}.jsonl"
    target.write_bytes(files["session.jsonl"])
    return Case(Agent("pi"), home, [home / ".pi" / "agent" / "sessions"], target, {str(good): f"pi-{PI_G}"})


# Cline: `globalStorage/saoudrizwan.claude-dev/tasks/<id>/api_conversation_history.json` + `ui_messages.json`; the
# good session is another task folder.
CLINE_T, CLINE_G = "1767348000001", "1767348000000"


def _cline_api(task: str) -> list[dict[str, Any]]:
    ts = int(task)
    return [
        {"role": "user", "ts": ts, "content": [
            {"type": "text", "text": "<task>\nlist files\n</task>"},
            {"type": "text", "text": "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>"},
        ]},
        {"role": "assistant", "ts": ts + 1000, "modelInfo": {"modelId": "claude-sonnet-4-5"}, "content": [
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {"path": "."}},
        ]},
        {"role": "user", "ts": ts + 2000, "content": [{"type": "text", "text": "[list_files for '.'] Result:\na.txt"}]},
        {"role": "assistant", "ts": ts + 3000, "content": [{"type": "text", "text": "One file."}]},
    ]  # fmt: skip


def _cline_ui(task: str) -> list[dict[str, Any]]:
    ts = int(task)
    usage = '{"tokensIn":10,"tokensOut":5,"cacheWrites":0,"cacheReads":0,"cost":0.001}'
    return [
        {"ts": ts, "type": "say", "say": "text", "text": "list files", "conversationHistoryIndex": -1},
        {"ts": ts + 10, "type": "say", "say": "api_req_started", "text": usage, "conversationHistoryIndex": -1},
        {"ts": ts + 2010, "type": "say", "say": "api_req_started", "text": usage, "conversationHistoryIndex": 1},
    ]


def _cline_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    root = home / ".config" / "Code" / "User" / "globalStorage"
    tasks = root / "saoudrizwan.claude-dev" / "tasks"
    for task, docs in ((CLINE_G, None), (CLINE_T, files)):
        folder = tasks / task
        folder.mkdir(parents=True, exist_ok=True)
        if docs is None:
            docs = {
                "api_conversation_history.json": Doc("json", _cline_api(task)).dump(),
                "ui_messages.json": Doc("json", _cline_ui(task)).dump(),
            }
        for name, raw in docs.items():
            (folder / name).write_bytes(raw)
    good = tasks / CLINE_G / "api_conversation_history.json"
    target = tasks / CLINE_T / "api_conversation_history.json"
    return Case(Agent("cline"), home, [root], target, {str(good): f"cline-{CLINE_G}"})


# GitHub Copilot CLI: `session-state/<id>/events.jsonl` (a sub-agent's events interleaved, a resume, two shutdowns);
# the good session is another folder.
COPILOT_T = "0b6e2f4c-1111-4222-8333-444455556666"
COPILOT_G = "0b6e2f4c-1111-4222-8333-4444555566aa"


def _copilot_records(sid: str, *, subagent: bool = True) -> list[Any]:
    def event(n: int, kind: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"type": kind, "data": data, "id": f"e{n}", "timestamp": f"2026-03-01T10:00:{n:02d}.000Z",
                "parentId": f"e{n - 1}" if n else None, **extra}  # fmt: skip

    usage = {"inputTokens": 500, "outputTokens": 20, "cacheReadTokens": 300, "cacheWriteTokens": 100}
    records = [
        event(0, "session.start", {"sessionId": sid, "version": 1, "copilotVersion": "1.0.11",
                                   "startTime": "2026-03-01T10:00:00.000Z", "context": {"cwd": "/home/u/p"}}),
        event(1, "user.message", {"content": "a question", "transformedContent": "<current_datetime>x",
                                  "attachments": [{"type": "file", "path": "/home/u/p/a.py"}]}),
        event(2, "assistant.message", {"content": "an answer", "model": "claude-sonnet-4.6", "outputTokens": 20,
                                       "toolRequests": [{"toolCallId": "c1", "name": "task", "arguments": "{}"}]}),
        event(3, "tool.execution_start", {"toolCallId": "c1", "toolName": "task", "arguments": {"a": 1}}),
        event(4, "user.message", {"content": "inner", "parentToolCallId": "c1"}, agentId="sub-1"),
        event(5, "tool.execution_complete", {"toolCallId": "c2", "success": True, "result": "x"}, agentId="sub-1"),
        event(6, "tool.execution_complete", {"toolCallId": "c1", "success": False, "result": {"content": "out"},
                                             "error": {"message": "boom"}}),
        event(7, "session.shutdown", {"modelMetrics": {"claude-sonnet-4.6": {"usage": usage}}}),
        event(8, "session.resume", {"resumeTime": "2026-03-01T10:00:08.000Z", "context": {"branch": "main"}}),
        event(9, "user.message", {"content": "another", "delivery": "queued"}),
        event(10, "assistant.usage", {"model": "gpt-5.4", **usage}, ephemeral=True),
        event(11, "result", {}, sessionId=sid),
    ]  # fmt: skip
    # The sub-agent's events (its prompt, a result of no call) give it no turn: the file is one session, as the
    # checks expect of a valid target; the good session has none.
    return records if subagent else [r for r in records if "agentId" not in r]


def _copilot_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    state = home / ".copilot" / "session-state"
    good = state / COPILOT_G / "events.jsonl"
    good.parent.mkdir(parents=True, exist_ok=True)
    good.write_bytes(Doc("jsonl", _copilot_records(COPILOT_G, subagent=False)).dump())
    target = state / COPILOT_T / "events.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(files["events.jsonl"])
    return Case(Agent("copilot"), home, [home / ".copilot"], target, {str(good): f"copilot-{COPILOT_G}"})


# Aider: `.aider.chat.history.md` in a repository, one run per `# aider chat started at` header; the good history is in
# another repository. The target holds one run; its lines are the "fields" a field mutation replaces.
def _aider_lines(prompt: str, when: str) -> list[str]:
    return [
        "",
        f"# aider chat started at {when}",
        "",
        "> Aider v0.86.1  ",
        "> Main model: anthropic/claude-sonnet-4-5 with diff edit format  ",
        "",
        f"#### {prompt}  ",
        "#### and keep it short  ",
        "",
        "Done: the flag is added.",
        "",
        "> Tokens: 2.3k sent, 120 received. Cost: $0.01 message, $0.01 session.  ",
        "> Applied edit to src/app.py  ",
    ]


def _aider_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    good = home / "src" / "good" / ".aider.chat.history.md"
    good.parent.mkdir(parents=True)
    good.write_bytes(Doc("text", _aider_lines("the good prompt", "2026-01-02 09:00:00")).dump())
    target = home / "src" / "other" / ".aider.chat.history.md"
    target.parent.mkdir(parents=True)
    target.write_bytes(files[".aider.chat.history.md"])
    st = good.stat()
    [loaded] = extractor(Agent("aider")).read(Source(Agent("aider"), str(good), st.st_size, st.st_mtime_ns), SETTLED)
    assert isinstance(loaded, Loaded)
    return Case(Agent("aider"), home, [home], target, {str(good): loaded.session.session_id})


# Claude.ai: an export (conversations.json) with a good conversation beside the target one, and a good export beside
# it in the same folder (with its users.json, as a real export has). Messages without parent links: one thread, so a
# valid target is one session whatever a mutation does to a field.
def _claude_ai_conv(cid: str) -> dict[str, Any]:
    messages = claude_ai_chat(0)
    for msg in messages:
        del msg["parent_message_uuid"]
    return claude_ai_conversation(messages, cid=cid)


def _claude_ai_docs() -> dict[str, Doc]:
    convs = [_claude_ai_conv("beside"), _claude_ai_conv("t")]
    return {"conversations.json": Doc("json", convs, mutable=lambda path: path[0] == 1)}


def _claude_ai_write(home: Path, files: dict[str, bytes], field_mutation: bool) -> Case:
    folder = home / "claude-export"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "users.json").write_text("[]", encoding="utf-8")
    good = folder / "good.zip"
    good.write_bytes(_zip_of(json.dumps([_claude_ai_conv("good")]).encode()))
    target = folder / "conversations.json"
    target.write_bytes(files["conversations.json"])
    beside = {"claude_ai-beside"} if field_mutation else set()
    return Case(Agent("claude_ai"), home, [folder], target, {str(good): "claude_ai-good"}, beside)


# Grok of a newer build: `updates.jsonl` (the record and the unit) + `summary.json`; the good session is another
# folder (chat_history.jsonl only).
GROK_U = "019f6851-7ec4-7ef0-97d3-03f3eee387bb"


def _grok_updates_records() -> list[dict[str, Any]]:
    def line(update: dict[str, Any], ms: int, method: str = "session/update") -> dict[str, Any]:
        meta = {"eventId": f"e{ms}", "agentTimestampMs": 1_790_000_000_000 + ms}
        return {"timestamp": 1_790_000_000 + ms // 1000, "method": method,
                "params": {"sessionId": GROK_U, "update": update, "_meta": meta}}  # fmt: skip

    text = {"type": "text", "text": "grok question"}
    return [
        line({"sessionUpdate": "user_message_chunk", "content": text, "_meta": {"promptIndex": 0}}, 0),
        line({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "on it"}}, 1000),
        line({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read_file", "rawInput": {"p": "a"}}, 2000),
        line({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
              "content": [{"type": "content", "content": {"type": "text", "text": "body"}}]}, 3000),
        line({"sessionUpdate": "turn_completed", "prompt_id": "p0", "stop_reason": "end_turn",
              "usage": {"inputTokens": 10, "outputTokens": 2, "cachedReadTokens": 4}}, 4000, "_x.ai/session/update"),
        line({"sessionUpdate": "rewind_marker", "target_prompt_index": 1}, 5000, "_x.ai/session/update"),
    ]  # fmt: skip


def _grok_updates_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    good = grok_session(home, GROK_G, 2) / "chat_history.jsonl"
    folder = good.parent.parent / GROK_U
    folder.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    return Case(Agent("grok"), home, [home / ".grok"], folder / "updates.jsonl", {str(good): f"grok-{GROK_G}"})


# Amp: `~/.local/share/amp/threads/T-<id>.json`, one JSON document per thread; the good session is another thread.
AMP_T, AMP_G = "T-019b8a00-0000-7000-8000-00000000f0f1", "T-019b8a00-0000-7000-8000-00000000f0f2"


def _amp_thread(tid: str) -> dict[str, Any]:
    usage = {
        "model": "gpt-5",
        "inputTokens": 0,
        "outputTokens": 5,
        "cacheCreationInputTokens": 30,
        "cacheReadInputTokens": 10,
        "totalInputTokens": 40,
        "timestamp": "2026-01-02T10:00:03Z",
    }
    return {"v": 9, "id": tid, "created": 1767348000000, "title": "fuzz",
            "env": {"initial": {"trees": [{"displayName": "w", "uri": "file:///w"}]}},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "list files"}],
                 "meta": {"sentAt": 1767348001000}},
                {"role": "assistant", "usage": usage, "content": [
                    {"type": "thinking", "thinking": "plan"}, {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"cmd": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "toolUseID": "toolu_1",
                                              "run": {"status": "done", "result": {"output": "a.txt"}}}]},
                {"role": "assistant", "content": [{"type": "text", "text": "One file."}], "usage": usage},
            ],
            "meta": {"traces": [{"name": "inference", "endTime": "2026-01-02T10:00:04Z"}]}}  # fmt: skip


def _amp_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    folder = home / ".local" / "share" / "amp" / "threads"
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / f"{AMP_G}.json"
    good.write_bytes(Doc("json", _amp_thread(AMP_G)).dump())
    target = folder / f"{AMP_T}.json"
    target.write_bytes(files["thread.json"])
    return Case(Agent("amp"), home, [folder], target, {str(good): f"amp-{AMP_G}"})


# Qwen Code: `projects/<cwd>/chats/<sessionId>.jsonl` (a hook context part, a tool call and its result, a rewind
# record); the good session is another chat file beside it.
QWEN_T, QWEN_G = "77777777-2222-4333-8444-5555555555a1", "aaaaaaaa-0000-4000-8000-0000000000a2"


def _qwen_records(sid: str) -> list[Any]:
    def rec(uuid: str, parent: str | None, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": sid,
            "timestamp": "2026-02-10T21:00:00.000Z",
            "type": kind,
            "cwd": "/w",
            "version": "0.24.4",
            **fields,
        }

    return [
        rec("u1", None, "user", message={"role": "user", "parts": [
            {"text": "a question"},
            {"text": "<qwen:user-prompt-submit-context>\nhook\n</qwen:user-prompt-submit-context>"}]},
            systemPayload={"displayText": "a question", "hookContext": "hook"}),
        rec("a1", "u1", "assistant", model="qwen3-coder-plus", message={"role": "model", "parts": [
            {"text": "thinking", "thought": True}, {"text": "an answer"},
            {"functionCall": {"id": "c1", "name": "read_file", "args": {"path": "a"}}}]},
            usageMetadata={"promptTokenCount": 5, "candidatesTokenCount": 2, "cachedContentTokenCount": 1}),
        rec("t1", "a1", "tool_result", message={"role": "user", "parts": [
            {"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "x"}}}]},
            toolCallResult={"callId": "c1", "status": "success"}),
        rec("r1", "t1", "system", subtype="rewind", systemPayload={"truncatedCount": 1}),
        rec("a2", "r1", "assistant", message={"role": "model", "parts": [{"text": "done"}]}),
    ]  # fmt: skip


def _qwen_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    chats = home / ".qwen" / "projects" / "-w" / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    good = chats / f"{QWEN_G}.jsonl"
    good.write_bytes(Doc("jsonl", _qwen_records(QWEN_G)).dump())
    target = chats / f"{QWEN_T}.jsonl"
    target.write_bytes(files["chat.jsonl"])
    return Case(Agent("qwen"), home, [home / ".qwen" / "projects"], target, {str(good): f"qwen-{QWEN_G}"})


# Factory Droid: `~/.factory/sessions/<cwd slug>/<id>.jsonl` + `<id>.settings.json` (read with it); the good session
# is another file in the same folder.
DROID_T = "5d0c1b2a-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
DROID_G = "5d0c1b2a-3e4f-4a5b-8c6d-7e8f9a0b1caa"


def _droid_records(sid: str) -> list[Any]:
    def message(n: int, role: str, content: Any) -> dict[str, Any]:
        return {"type": "message", "id": f"m{n}", "timestamp": f"2026-03-02T09:00:0{n}.000Z",
                "message": {"role": role, "content": content}}  # fmt: skip

    return [
        {"type": "session_start", "id": sid, "title": "t", "owner": "u", "version": 2, "cwd": "/w"},
        message(1, "user", [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                            {"type": "text", "text": "a question"}]),
        message(2, "assistant", [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "an answer"},
                                 {"type": "tool_use", "id": "c1", "name": "Read", "input": {"file_path": "a"}}]),
        message(3, "user", [{"type": "tool_result", "tool_use_id": "c1", "content": "x", "is_error": False}]),
        {"type": "todo_state", "id": "t1", "todos": []},
    ]  # fmt: skip


def _droid_settings() -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "tokenUsage": {"inputTokens": 3, "outputTokens": 2, "cacheReadTokens": 1}}


def _droid_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    folder = home / ".factory" / "sessions" / "-w"
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / f"{DROID_G}.jsonl"
    good.write_bytes(Doc("jsonl", _droid_records(DROID_G)).dump())
    target = folder / f"{DROID_T}.jsonl"
    target.write_bytes(files["session.jsonl"])
    (folder / f"{DROID_T}.settings.json").write_bytes(files["settings.json"])
    return Case(Agent("droid"), home, [home / ".factory" / "sessions"], target, {str(good): f"droid-{DROID_G}"})


# Goose sessions.db: the target session's content_json / metadata_json hold the (mutated) JSON; a second session in
# the same database must still load after a field mutation; the good session is in another root's database.
def _goose_docs() -> dict[str, Doc]:
    call = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "ls"}}}
    result = {"status": "success", "value": {"content": [{"type": "text", "text": "a.txt"}]}}
    rows = {
        "u": [gs.text("a question")],
        "a": [{"type": "thinking", "thinking": "t"}, {"type": "toolRequest", "id": "c1", "toolCall": call}],
        "r": [{"type": "toolResponse", "id": "c1", "toolResult": result}],
        "z": [gs.text("an answer")],
        "meta": {"userVisible": True, "agentVisible": True},
    }
    return {"rows": Doc("json", rows)}


@functools.cache
def _goose_db_bytes(sid: str, exchanges: int) -> bytes:
    """A database holding one session, as bytes (built once)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sessions.db"
        conn = gs.create_db(path)
        gs.add_session(conn, sid)
        gs.add_exchange(conn, sid, exchanges)
        conn.close()
        return path.read_bytes()


def _goose_write(home: Path, files: dict[str, bytes], field_mutation: bool) -> Case:
    root = home / ".local" / "share" / "goose" / "sessions"
    good_root = home / "goose-good"
    for folder in (root, good_root):
        folder.mkdir(parents=True, exist_ok=True)
    (good_root / "sessions.db").write_bytes(_goose_db_bytes("good", 2))
    good = {str(good_root / "sessions.db"): "goose-good"}
    target = root / "sessions.db"
    raw = files["rows"]
    if not field_mutation:  # the bytes of the database file itself, spliced into a real one half the time
        real = _goose_db_bytes("t", 1)
        at = (len(raw) * 37) % len(real)
        target.write_bytes(raw if len(raw) % 2 else real[:at] + raw + real[at + len(raw) :])
        return Case(Agent("goose"), home, [root, good_root], target, good)
    conn = gs.create_db(target)
    gs.add_session(conn, "beside")
    gs.add_exchange(conn, "beside", 1)
    gs.add_session(conn, "t")
    try:
        rows = json.loads(raw.decode("utf-8", "surrogatepass"))
        texts = {k: json.dumps(v) for k, v in rows.items()} if isinstance(rows, dict) else None
    except (ValueError, RecursionError):
        texts = None
    if texts is None:  # the mutation broke the row map itself: the hostile text is one row's content
        texts = {"u": raw.decode("utf-8", "surrogateescape")}
    meta = texts.pop("meta", None)
    for key, data in texts.items():
        role = "assistant" if key in ("a", "z") else "user"
        conn.execute(
            "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json)"
            " VALUES ('t', ?, CAST(? AS TEXT), ?, CAST(? AS TEXT))",
            (
                role,
                data.encode("utf-8", "surrogateescape"),
                gs.T0,
                meta.encode("utf-8", "surrogateescape") if meta else None,
            ),
        )
    conn.close()
    return Case(Agent("goose"), home, [root, good_root], target, good, {"goose-beside"})


# Goose legacy JSONL: `<id>.jsonl` beside where sessions.db would be (no database here); the good session is another
# file in the same folder.
def _goose_legacy_records() -> list[dict[str, Any]]:
    call = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "ls"}}}
    return [
        {"working_dir": "/w", "description": "a title", "accumulated_input_tokens": 10},
        {"role": "user", "created": gs.T0, "content": [gs.text("a question")]},
        {"role": "assistant", "created": gs.T0 + 1, "content": [{"type": "toolRequest", "id": "c1", "toolCall": call}]},
        {"role": "user", "created": gs.T0 + 2, "content": [{"type": "toolResponse", "id": "c1", "toolResult": {}}]},
        {"role": "assistant", "created": gs.T0 + 3, "content": [gs.text("an answer")]},
    ]


def _goose_legacy_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    folder = home / ".local" / "share" / "goose" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "20250101_100000.jsonl"
    good.write_bytes(Doc("jsonl", _goose_legacy_records()).dump())
    target = folder / "20250101_110000.jsonl"
    target.write_bytes(files["session.jsonl"])
    return Case(Agent("goose"), home, [folder], target, {str(good): "goose-20250101_100000"})


# Kiro CLI: the target conversation's row in `kiro-cli/data.sqlite3` holds the (mutated) ConversationState JSON,
# beside another conversation that must still load; the good conversation is in the Amazon Q CLI's database.
def _kiro_state(cid: str) -> dict[str, Any]:
    env = {"env_state": {"operating_system": "linux", "current_working_directory": "/w", "environment_variables": []}}
    ask = {
        "additional_context": "",
        "env_context": env,
        "content": {"Prompt": {"prompt": "a question"}},
        "timestamp": "2026-01-02T10:00:00+00:00",
        "images": None,
    }
    results = {
        "ToolUseResults": {
            "tool_use_results": [
                {"tool_use_id": "tu_1", "content": [{"Text": "out"}, {"Json": {"ok": True}}], "status": "Success"}
            ]
        }
    }
    tool_use = {
        "id": "tu_1",
        "name": "execute_bash",
        "orig_name": "execute_bash",
        "args": {"command": "ls"},
        "orig_args": {"command": "ls"},
    }
    meta = {
        "message_id": "m",
        "request_start_timestamp_ms": 1767348000500,
        "stream_end_timestamp_ms": 1767348001000,
        "model_id": "claude-sonnet-4",
    }
    history = [
        {
            "user": ask,
            "assistant": {"ToolUse": {"message_id": "m1", "content": "looking", "tool_uses": [tool_use]}},
            "request_metadata": meta,
        },
        {
            "user": {**ask, "content": results},
            "assistant": {"Response": {"message_id": "m2", "content": "an answer"}},
            "request_metadata": {**meta, "stream_end_timestamp_ms": 1767348002000},
        },
    ]
    return {
        "conversation_id": cid,
        "next_message": None,
        "history": history,
        "valid_history_range": [0, 2],
        "transcript": ["> a question", "looking", "an answer"],
        "latest_summary": None,
    }


def _kiro_db(path: Path, rows: list[tuple[str, bytes]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE conversations_v2 (key TEXT NOT NULL, conversation_id TEXT NOT NULL, value TEXT NOT NULL,"
            " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (key, conversation_id))"
        )
        for cid, value in rows:  # TEXT from bytes: a damaged row may hold invalid UTF-8
            conn.execute(
                "INSERT INTO conversations_v2 VALUES ('/w', ?, CAST(? AS TEXT), 1767348000000, 1767348002000)",
                (cid, value),
            )
        conn.commit()


def _kiro_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    share = home / ".local" / "share"
    good = share / "amazon-q" / "data.sqlite3"
    _kiro_db(good, [("good", json.dumps(_kiro_state("good")).encode())])
    target = share / "kiro-cli" / "data.sqlite3"
    _kiro_db(target, [("beside", json.dumps(_kiro_state("beside")).encode()), ("t", files["conversation.json"])])
    roots = [share / "kiro-cli", share / "amazon-q"]
    return Case(Agent("kiro"), home, roots, target, {str(good): "kiro-good"}, {"kiro-beside"})


# Kiro CLI's JSONL session files: `<id>.jsonl` + `<id>.json` in `~/.kiro/sessions/cli`; the good session beside it.
def _kiro_jsonl_records(text: str) -> list[dict[str, Any]]:
    use = {"kind": "toolUse", "data": {"toolUseId": "tu_1", "name": "read", "input": {"path": "."}}}
    result = {
        "kind": "toolResult",
        "data": {"toolUseId": "tu_1", "status": "Success", "content": [{"kind": "text", "data": "a.txt"}]},
    }
    return [
        {"kind": "Prompt", "data": {"content": [{"kind": "text", "data": text}], "meta": {"timestamp": 1767348001}}},
        {"kind": "AssistantMessage", "data": {"content": [{"kind": "text", "data": "looking"}, use]}},
        {"kind": "ToolResults", "data": {"content": [result]}},
        {"kind": "AssistantMessage", "data": {"content": [{"kind": "text", "data": "an answer"}]}},
    ]


def _kiro_jsonl_sidecar(sid: str) -> dict[str, Any]:
    return {
        "session_id": sid,
        "cwd": "/w",
        "title": "t",
        "created_at": "2026-01-02T10:00:00Z",
        "updated_at": "2026-01-02T10:00:09Z",
    }


def _kiro_jsonl_write(home: Path, files: dict[str, bytes], _field: bool) -> Case:
    cli = home / ".kiro" / "sessions" / "cli"
    cli.mkdir(parents=True, exist_ok=True)
    good = cli / "good.jsonl"
    good.write_bytes(Doc("jsonl", _kiro_jsonl_records("q")).dump())
    good.with_suffix(".json").write_bytes(Doc("json", _kiro_jsonl_sidecar("good")).dump())
    target = cli / "t.jsonl"
    target.write_bytes(files["t.jsonl"])
    target.with_suffix(".json").write_bytes(files["t.json"])
    return Case(Agent("kiro"), home, [cli], target, {str(good): "kiro-good"})


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("claude", Agent("claude"), lambda: {"session.jsonl": Doc("jsonl", _claude_records(CLAUDE_T))},
               _claude_write),
        Format("codex", Agent("codex"), _codex_docs, _codex_write),
        Format("grok", Agent("grok"), _grok_docs, _grok_write),
        Format("gemini-json", Agent("gemini"), lambda: {"session.json": Doc("json", _gemini_json("target"))},
               _gemini_write("json")),
        Format("gemini-jsonl", Agent("gemini"), lambda: {"session.jsonl": Doc("jsonl", _gemini_jsonl("target"))},
               _gemini_write("jsonl")),
        Format("opencode-db", Agent("opencode"), _opencode_db_docs, _opencode_db_write),
        Format("opencode-storage", Agent("opencode"), _opencode_storage_docs, _opencode_storage_write),
        Format("chatgpt-json", Agent("chatgpt"), _chatgpt_docs, _chatgpt_write(zipped=False)),
        Format("chatgpt-zip", Agent("chatgpt"), _chatgpt_docs, _chatgpt_write(zipped=True)),
        Format("cursor", Agent("cursor"), lambda: {"transcript.jsonl": Doc("jsonl", _cursor_records())},
               _cursor_write),
        Format("pi", Agent("pi"), lambda: {"session.jsonl": Doc("jsonl", _pi_records(PI_T))}, _pi_write),
        Format("cline", Agent("cline"), lambda: {
            "api_conversation_history.json": Doc("json", _cline_api(CLINE_T)),
            "ui_messages.json": Doc("json", _cline_ui(CLINE_T)),
        }, _cline_write),
        Format("copilot", Agent("copilot"), lambda: {"events.jsonl": Doc("jsonl", _copilot_records(COPILOT_T))},
               _copilot_write),
        Format("aider", Agent("aider"),
               lambda: {".aider.chat.history.md": Doc("text", _aider_lines("add a flag", "2026-01-02 10:00:00"))},
               _aider_write),
        Format("claude_ai-json", Agent("claude_ai"), _claude_ai_docs, _claude_ai_write),
        Format("grok-updates", Agent("grok"), lambda: {
            "updates.jsonl": Doc("jsonl", _grok_updates_records()),
            "summary.json": Doc("json", {"info": {"id": GROK_U}, "created_at": "2026-07-31T10:13:27.574131Z"}),
        }, _grok_updates_write),
        Format("amp", Agent("amp"), lambda: {"thread.json": Doc("json", _amp_thread(AMP_T))}, _amp_write),
        Format("qwen", Agent("qwen"), lambda: {"chat.jsonl": Doc("jsonl", _qwen_records(QWEN_T))}, _qwen_write),
        Format("droid", Agent("droid"), lambda: {
            "session.jsonl": Doc("jsonl", _droid_records(DROID_T)),
            "settings.json": Doc("json", _droid_settings()),
        }, _droid_write),
        Format("goose-db", Agent("goose"), _goose_docs, _goose_write),
        Format("goose-legacy", Agent("goose"), lambda: {"session.jsonl": Doc("jsonl", _goose_legacy_records())},
               _goose_legacy_write),
        Format("kiro", Agent("kiro"), lambda: {"conversation.json": Doc("json", _kiro_state("t"))}, _kiro_write),
        Format("kiro-jsonl", Agent("kiro"), lambda: {
            "t.jsonl": Doc("jsonl", _kiro_jsonl_records("a question")),
            "t.json": Doc("json", _kiro_jsonl_sidecar("t")),
        }, _kiro_jsonl_write),
    ]
}  # fmt: skip


@st.composite
def hostile_files(draw: st.DrawFn, fmt: Format, *, field: bool) -> tuple[dict[str, bytes], str]:
    """The target's files: every document valid but one, which gets one field or byte mutation."""
    docs = fmt.docs()
    name = draw(st.sampled_from(sorted(docs)))
    raw, how = draw(field_mutation(docs[name]) if field else byte_mutation(docs[name]))
    files = {n: (raw if n == name else d.dump()) for n, d in docs.items()}
    return files, f"{fmt.name} {name}: {how}"


# ---------------------------------------------------------------------------------------------------- checks
def read_directly(source: Source, limits: Limits) -> list[Outcome]:
    """The extractor's own `read`, with only its two classified exceptions made outcomes (as `read_source` does).

    Anything else raised is a crash and propagates to the test.
    """
    outcomes: list[Outcome] = []
    try:
        outcomes.extend(extractor(source.agent).read(source, limits))
    except RejectError as exc:
        outcomes.append(Rejected(source, exc.code, exc.detail, exc.line, exc.offset, exc.session_hint))
    except DeferError as exc:
        outcomes.append(Deferred(source, exc.code, exc.detail))
    return outcomes


def discover(case: Case) -> list[Source]:
    module = extractor(case.agent)
    return [source for root in case.roots for source in module.discover(root)]


@dataclass
class Peak:
    grew: int = 0


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _resident(key: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(key)


@contextlib.contextmanager
def resident_peak() -> Iterator[Peak]:
    """How far the process's resident high-water mark (VmHWM) rose over its resident size at the start.

    Writing 5 to /proc/self/clear_refs resets the mark (Linux >= 4.0), so each case is measured on its own.
    """
    peak = Peak()
    _CLEAR_REFS.write_text("5")
    start = _resident("VmRSS")
    yield peak
    peak.grew = max(0, _resident("VmHWM") - start)


def input_bytes(case: Case) -> int:
    return sum(p.stat().st_size for p in case.home.rglob("*") if p.is_file() and not p.is_symlink())


def check_case(case: Case, limits: Limits = SETTLED) -> list[Outcome]:
    """Every source of the case read directly: classified outcomes within bounded memory, the good ones loaded.

    Returns the target's outcomes. Loaded sessions also go through the pure transform to table rows, as staging
    does, so a value that breaks the tables (an integer past int64) is seen here too.
    """
    sources = {s.path: s for s in discover(case)}
    assert str(case.target) in sources, f"the hostile target was not discovered: {sorted(sources)}"
    assert set(case.good) <= set(sources), f"a good source was not discovered: {sorted(sources)}"
    versions = {case.agent: extractor(case.agent).SPEC.parser_version}
    size = input_bytes(case)
    found: dict[str, list[Outcome]] = {}
    with resident_peak() as peak:
        for path, source in sources.items():
            found[path] = read_directly(source, limits)
    assert peak.grew < MEMORY_FLOOR + MEMORY_PER_INPUT_BYTE * size, f"peak grew {peak.grew} for {size} input bytes"
    for path, outcomes in found.items():
        assert outcomes, f"{path}: no outcome at all"
        for outcome in outcomes:
            assert isinstance(outcome, Loaded | Rejected | Deferred), outcome
            if isinstance(outcome, Loaded):
                session_tables([outcome], versions, Redactor(None))
    for path, sid in case.good.items():
        assert [o.session.session_id for o in found[path] if isinstance(o, Loaded)] == [sid], found[path]
    target = found[str(case.target)]
    loaded = {o.session.session_id for o in target if isinstance(o, Loaded)}
    assert case.beside <= loaded, f"the good session beside the hostile one was lost: {target}"
    assert not loaded & set(case.good.values()), "the target claimed a good session's id"
    return target


def build(fmt: Format, home: Path, files: dict[str, bytes], *, field: bool, described: str = "") -> Case:
    case = fmt.write(home, files, field)
    case.described = described
    return case


# ---------------------------------------------------------------------------------------------------- open bugs
@dataclass(frozen=True)
class KnownBug:
    """A crash found by this suite in a file another change owns: seen by its exception and innermost frame."""

    name: str
    exception: tuple[type[BaseException], ...]
    file: str  # the innermost frame of the project's code (extractors/ or transforms/) that raised
    function: str | None  # None: any function of that file
    owner: str


# Crashes open while their fix is on another branch (issue 14; each is also a plain test in test_fuzz_regressions.py).
# A fuzz test that hits only these ends as xfail naming them; any other crash fails it. Remove an entry once fixed.
KNOWN_OPEN: tuple[KnownBug, ...] = ()  # every crash this suite found is fixed (tests/test_fuzz_regressions.py)

_PROJECT = Path(__file__).resolve().parent.parent


def known_open(exc: BaseException) -> KnownBug | None:
    """The open bug `exc` is, judged by its type and the innermost project frame it was raised in."""
    import traceback

    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(str(_PROJECT / "extractors"))
        or f.filename.startswith(str(_PROJECT / "transforms"))
    ]  # fmt: skip
    named = [f for f in frames if not f.name.startswith("<")]  # a comprehension's frame is its function's
    if not named:
        return None
    last = named[-1]
    where = Path(last.filename).relative_to(_PROJECT).as_posix()
    for bug in KNOWN_OPEN:
        if isinstance(exc, bug.exception) and where == bug.file and bug.function in (None, last.name):
            return bug
    return None


def with_field(name: str, doc: str, path: tuple[Any, ...], raw: bytes) -> dict[str, bytes]:
    """The files of format `name` with one field of document `doc` replaced by the raw JSON text `raw`."""
    docs = FORMATS[name].docs()
    value = _set(copy.deepcopy(docs[doc].value), path, _HOLE)
    files = {n: d.dump() for n, d in docs.items()}
    files[doc] = docs[doc].dump(value).replace(_HOLE_BYTES, raw, 1)
    return files


def with_bytes(name: str, doc: str, raw: bytes) -> dict[str, bytes]:
    """The files of format `name` with document `doc` replaced by `raw` whole."""
    files = {n: d.dump() for n, d in FORMATS[name].docs().items()}
    files[doc] = raw
    return files


class Recursed(AssertionError):
    """A RecursionError out of the project's code, told in one line."""


def short_recursion(exc: RecursionError) -> Recursed:
    """A RecursionError as a one-line failure: pytest cannot render a traceback thousands of frames deep."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/extractors/" in f.filename or "/transforms/" in f.filename]
    where = f"{inner[-1].filename}:{inner[-1].lineno} in {inner[-1].name}" if inner else "outside the project"
    return Recursed(f"RecursionError ({len(frames)} frames) raised at {where}")


class Crashed(Exception):
    """A crash out of the project's code, re-raised with a one-line message and no traceback."""


def short_crash(exc: Exception) -> Exception:
    """`exc` as a `Crashed` that is still an instance of its own class (so `xfail(raises=...)` sees it).

    Why: CPython 3.11.7 (gh-106905) can leave the AST recursion counter wrong after a deep RecursionError, and
    then pytest's ast.parse of every later failing test's source raises SystemError (an INTERNALERROR that
    stops the session). A failure without a traceback is rendered without ast.parse.
    """
    import traceback

    if isinstance(exc, RecursionError):
        return short_recursion(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/extractors/" in f.filename or "/transforms/" in f.filename]
    where = f"{inner[-1].filename}:{inner[-1].lineno} in {inner[-1].name}" if inner else "outside the project"
    kind = type(f"Crashed{type(exc).__name__}", (Crashed, type(exc)), {})
    try:
        crash = kind(f"{type(exc).__name__}: {str(exc)[:300]} (raised at {where})")
    except TypeError:  # an exception class with a constructor of its own
        crash = Crashed(f"{type(exc).__name__}: {str(exc)[:300]} (raised at {where})")
    return crash
