"""Builders of small Claude Code records for the tests: one envelope, sensible defaults, override anything."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from extractors.model import Agent, Loaded, Outcome, Rejected, Role, Session
from tests.support import read_one, write_jsonl

SID = "11111111-2222-4333-8444-555555555555"
OTHER = "99999999-8888-4777-8666-555555555555"
TS = "2026-02-10T21:00:00.000Z"
_UUIDS = itertools.count()


def envelope(rtype: str, *, sid: str | None = SID, ts: str | None = TS, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/u/proj",
        "version": "2.1.38",
        "gitBranch": "main",
        "type": rtype,
        "uuid": f"uuid-{next(_UUIDS)}",
    }
    if sid is not None:
        record["sessionId"] = sid
    if ts is not None:
        record["timestamp"] = ts
    record.update(extra)
    return record


def user(content: Any, **extra: Any) -> dict[str, Any]:
    return envelope("user", message={"role": "user", "content": content}, **extra)


def assistant(
    content: Any,
    *,
    msg_id: str | None = "msg_1",
    request_id: str | None = "req_1",
    model: str = "claude-opus-4-6",
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    message: dict[str, Any] = {"model": model, "type": "message", "role": "assistant", "content": content}
    if msg_id is not None:
        message["id"] = msg_id
    if usage is not None:
        message["usage"] = usage
    if request_id is not None:
        extra["requestId"] = request_id
    return envelope("assistant", message=message, **extra)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "Bash", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": inp}


def tool_result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def usage(output: int, *, inp: int = 3, read: int = 100, write: int = 10) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def read_file(tmp_path: Path, name: str, records: list[dict[str, Any]] | list[str]) -> list[Outcome]:
    """Write `records` as `<tmp>/-home-u-proj/<name>` (a real `<encoded-cwd>` place) and read it."""
    path = write_jsonl(tmp_path / "-home-u-proj" / name, records)
    return read_one(Agent("claude"), path)


def load(tmp_path: Path, name: str, records: list[dict[str, Any]] | list[str]) -> Session:
    outcomes = read_file(tmp_path, name, records)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Loaded), outcomes
    return outcomes[0].session


def reject(tmp_path: Path, name: str, records: list[dict[str, Any]] | list[str]) -> Rejected:
    outcomes = read_file(tmp_path, name, records)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Rejected), outcomes
    return outcomes[0]


def said(session: Session, role: Role | None = None) -> list[tuple[int, str]]:
    """(index, text) of the session's turns, of one role if given."""
    return [(t.index, t.text) for t in session.turns if role is None or t.role is role]
