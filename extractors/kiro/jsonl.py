"""Kiro CLI's JSONL session files: `~/.kiro/sessions/cli/<id>.jsonl` + `<id>.json` beside it. PEER ONLY.

No real file of this form was found: what is read here comes from two peers' readers (docs/agents/kiro.md "JSONL
sessions"), so the reader is strict. A line is `{"kind": K, "data": {"content": [{"kind": k, "data": ...}], "meta":
{...}}}`; a line kind or content kind not listed below rejects the session (`unsupported_format`), counted.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from extractors.bounded import Limits, Line, clip, json_text, read_json_document
from extractors.errors import RejectCode, RejectError
from extractors.kiro.parse import session_id_of
from extractors.kiro.tables import AGENT
from extractors.model import Disposition, Role, Session, ToolCall, Turn
from extractors.timeutil import from_epoch_seconds, parse_iso

# line kind -> (disposition, the content kinds it may hold). Prompt: the person's text; AssistantMessage: the model's
# text and its tool uses; ToolResults: the tools' outputs, sent back to the model (never a person's turn).
LINE_KINDS: dict[str, tuple[Disposition, frozenset[str]]] = {
    "Prompt": (Disposition.TURN, frozenset({"text"})),
    "AssistantMessage": (Disposition.TURN, frozenset({"text", "toolUse"})),
    "ToolResults": (Disposition.TOOL, frozenset({"toolResult"})),
}
RESULT_PARTS = frozenset({"text", "json"})  # a tool result's own content items


def sidecar_of(path: Path) -> Path:
    return path.with_suffix(".json")


def _bad(detail: str, line: int | None = None) -> RejectError:
    return RejectError(RejectCode.BAD_SHAPE, detail, line=line)


def _sidecar(path: Path, limits: Limits) -> dict[str, Any]:
    """The `<id>.json` beside the file, or {} when there is none (its fields are all optional here)."""
    side = sidecar_of(path)
    if not os.path.lexists(side):
        return {}
    if os.stat(side).st_size > limits.max_document_bytes:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"{side.name} is over max_document_bytes")
    value = read_json_document(side, limits)
    if not isinstance(value, dict):
        raise _bad(f"{side.name} is not a JSON object")
    return value


def build_jsonl_session(path: Path, lines: Iterable[Line], limits: Limits) -> Session:
    """The session of one JSONL file and its sidecar, or RejectError."""
    meta = _sidecar(path, limits)
    native = meta.get("session_id") if isinstance(meta.get("session_id"), str) else path.stem
    if not native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "no session id")
    census: Counter[tuple[str, str, Disposition]] = Counter()
    turns: list[Turn] = []
    calls: dict[str, ToolCall] = {}
    order: list[str] = []
    results: dict[str, tuple[str, bool | None]] = {}
    for line in lines:
        record = line.record
        kind = record.get("kind")
        if not isinstance(kind, str):
            raise _bad("a line without a kind", line.index)
        if kind not in LINE_KINDS:
            raise RejectError(
                RejectCode.UNSUPPORTED_FORMAT, f"line kind {kind!r} is not one this version reads", line=line.index
            )
        disposition, allowed = LINE_KINDS[kind]
        data = record.get("data")
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(content, list):
            raise _bad(f"{kind} has no data.content list", line.index)
        stamp = data.get("meta", {}).get("timestamp") if isinstance(data.get("meta"), dict) else None
        when = from_epoch_seconds(stamp) if stamp is not None else None
        texts: list[str] = []
        for item in content:
            part = item.get("kind") if isinstance(item, dict) else None
            if not isinstance(part, str):
                raise _bad(f"{kind}: a content item without a kind", line.index)
            if part not in allowed:
                raise RejectError(
                    RejectCode.UNSUPPORTED_FORMAT,
                    f"{kind} content kind {part!r} is not one this version reads",
                    line=line.index,
                )
            body = item.get("data")
            if part == "text":
                if not isinstance(body, str):
                    raise _bad(f"{kind}: a text item that is not text", line.index)
                texts.append(body)
            elif part == "toolUse":
                if not isinstance(body, dict) or not isinstance(body.get("toolUseId"), str) or not body["toolUseId"]:
                    raise _bad("a toolUse without a toolUseId", line.index)
                if body["toolUseId"] in calls:
                    raise RejectError(
                        RejectCode.INCONSISTENT_SOURCE, f"tool use {body['toolUseId']!r} twice", line=line.index
                    )
                name = body.get("name")
                if not isinstance(name, str):
                    raise _bad("a toolUse without a name", line.index)
                order.append(body["toolUseId"])
                calls[body["toolUseId"]] = ToolCall(body["toolUseId"], line.index, name, json_text(body.get("input")))
            else:
                results.update([_result(body, line.index, limits)])
        text = "\n".join(t for t in texts if t.strip())
        if text:
            role = Role.USER if kind == "Prompt" else Role.ASSISTANT
            if role is Role.ASSISTANT:
                disposition = Disposition.TURN
            turns.append(Turn(line.index, role, clip(text, limits), when))
        elif kind == "AssistantMessage":
            disposition = Disposition.TOOL if order else Disposition.SKIPPED
        elif kind == "Prompt":
            disposition = Disposition.SKIPPED
        census[(f"line/{kind}", "", disposition)] += 1
    if not turns:
        raise RejectError(RejectCode.NO_CONVERSATION, "no prompt or answer", session_hint=session_id_of(native))
    tool_calls = []
    for call_id in order:
        call = calls[call_id]
        if call_id in results:
            output, is_error = results[call_id]
            call = ToolCall(call.call_id, call.turn_index, call.name, call.input, output, is_error)
        tool_calls.append(call)
    times = [t.timestamp for t in turns if t.timestamp is not None]
    started = min(times) if times else parse_iso(meta.get("created_at"))
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no prompt time and no created_at beside the file")
    ended = parse_iso(meta.get("updated_at")) or (max(times) if times else None)
    cwd, title = meta.get("cwd"), meta.get("title")
    census[("file/sidecar", "", Disposition.METADATA)] += 1 if meta else 0
    return Session(
        agent=AGENT,
        session_id=session_id_of(native),
        native_id=native,
        started_at=started,
        ended_at=ended if ended is not None and ended >= started else None,
        cwd=cwd if isinstance(cwd, str) and cwd else None,
        title=title if isinstance(title, str) and title else None,
        turns=tuple(turns),
        tool_calls=tuple(tool_calls),
        census=+census,
    )


def _result(body: Any, index: int, limits: Limits) -> tuple[str, tuple[str, bool | None]]:
    if not isinstance(body, dict) or not isinstance(body.get("toolUseId"), str):
        raise _bad("a toolResult without a toolUseId", index)
    parts = body.get("content")
    if not isinstance(parts, list):
        raise _bad("a toolResult without a content list", index)
    out: list[str] = []
    for part in parts:
        kind = part.get("kind") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in RESULT_PARTS:
            raise RejectError(RejectCode.UNSUPPORTED_FORMAT, f"tool result item kind {kind!r} is not known", line=index)
        data = part.get("data")
        out.append(data if kind == "text" and isinstance(data, str) else json_text(data))
    status = body.get("status")
    is_error = status.lower() == "error" if isinstance(status, str) else None
    return body["toolUseId"], (clip("\n".join(out), limits), is_error)
