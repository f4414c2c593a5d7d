"""Codex tool calls: calls and outputs joined by `call_id`, and the rule for `is_error`.

`is_error` (True / False where the source says, None where it does not):
1. an output that is JSON-in-string with `metadata.exit_code` (exec / apply_patch before unified exec):
   `{"output":"...","metadata":{"exit_code":1,"duration_seconds":0.1}}` -> exit_code != 0;
2. an output whose header (the lines before `Output:`) says `Process exited with code N` (unified exec,
   `Chunk ID: bd7d7c\\nWall time: 0.0000 seconds\\nProcess exited with code 0\\n...Output:`) or `Exit code: N`;
3. a structured output `{"content": ..., "success": false}`;
4. else the event copy of the result: `exec_command_end.exit_code`, `patch_apply_end.success`,
   `mcp_tool_call_end.result` (`Err` or `Ok.isError`), `dynamic_tool_call_response.success`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extractors.blobref import base64_reference, data_url_reference
from extractors.bounded import Limits, clip
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, ToolCall

AGENT = Agent("codex")  # SPEC.name: the package imports this module before it declares SPEC

_EXIT_HEADER = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$")
_HEADER_LINES = 8
# JSON-in-string outputs are parsed for their exit code only up to this size; beyond it the text is kept as is.
_MAX_JSON_PROBE = 64 * 1024


@dataclass(slots=True)
class _Call:
    call_id: str
    turn_index: int
    name: str
    input: str | None
    started_at: datetime | None
    output: str | None = None
    is_error: bool | None = None
    ended_at: datetime | None = None
    event_error: bool | None = None
    spawned: str | None = None


# What the ledger stores for a text: given (slot "input" | "output", call id, producer, text), the text to keep
# (the first pass over a big rollout keeps None and notes where a long text is; `RolloutParser._keep`).
Keep = Callable[[str, str, str, str | None], str | None]


@dataclass(slots=True)
class ToolLedger:
    """Collects calls in source order and joins outputs and event copies to them by call id."""

    limits: Limits
    calls: dict[str, _Call] = field(default_factory=dict)
    keep: Keep | None = None

    def add_call(self, payload: dict[str, Any], kind: str, index: int, at: datetime | None) -> None:
        """Record a call from a `response_item` payload. Raises RejectError(bad_shape)."""
        call_id = _call_id(payload, kind, index)
        name, text = _describe(payload, kind, self.limits)
        if self.keep is not None:
            text = self.keep("input", call_id, kind, text)
        if call_id in self.calls:
            # Codex re-writes an interrupted call after its truncated copy (openai/codex#24425): keep the last.
            previous = self.calls[call_id]
            previous.name, previous.input, previous.turn_index = name, text, index
            return
        self.calls[call_id] = _Call(call_id, index, name, text, at)
        if kind == "image_generation_call":
            result = payload.get("result")
            if isinstance(result, str) and result:
                self.calls[call_id].output = base64_reference(result)  # short: never noted for a second pass

    def add_output(self, payload: dict[str, Any], at: datetime | None) -> bool:
        """Join an output to its call; False when no call has that id. Raises RejectError(bad_shape)."""
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a tool output without a string call_id")
        call = self.calls.get(call_id)
        if call is None:
            return False
        text, error = output_text(payload, self.limits)
        call.output = text if self.keep is None else self.keep("output", call_id, "output", text)
        call.is_error = error
        call.ended_at = at
        return True

    def add_event(self, kind: str, payload: dict[str, Any], at: datetime | None) -> None:
        """Take what an event copy of a result adds: the error flag, the spawned thread, the end time."""
        call_id = payload.get("call_id")
        if not isinstance(call_id, str) or call_id not in self.calls:
            return
        call = self.calls[call_id]
        if kind == "collab_agent_spawn_end":
            thread = payload.get("new_thread_id")
            if isinstance(thread, str) and thread:
                call.spawned = session_id(AGENT, thread)
        error = _event_error(kind, payload)
        if error is not None:
            call.event_error = error
        if call.ended_at is None and kind != "collab_agent_spawn_end":
            call.ended_at = at

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                call_id=c.call_id,
                turn_index=c.turn_index,
                name=c.name,
                input=c.input,
                output=c.output,
                is_error=c.is_error if c.is_error is not None else c.event_error,
                started_at=c.started_at,
                ended_at=c.ended_at,
                spawned_session_id=c.spawned,
            )
            for c in self.calls.values()
        )


def _call_id(payload: dict[str, Any], kind: str, index: int) -> str:
    call_id = payload.get("call_id")
    if isinstance(call_id, str) and call_id:
        return call_id
    if kind in ("function_call", "custom_tool_call", "tool_search_call"):
        raise RejectError(RejectCode.BAD_SHAPE, f"a {kind} without a string call_id", line=index)
    # local_shell_call may carry only `id`; web_search_call / image_generation_call have no output to join.
    native = payload.get("id")
    return native if isinstance(native, str) and native else f"{kind}-{index}"


def _describe(payload: dict[str, Any], kind: str, limits: Limits) -> tuple[str, str | None]:
    """(name, input text) of a call."""
    if kind == "function_call":
        name = payload.get("name")
        if not isinstance(name, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a function_call without a string name")
        namespace = payload.get("namespace")
        # Newer builds split MCP tools: {"namespace":"mcp__node_repl__","name":"js"}; older wrote the joined name.
        if isinstance(namespace, str) and namespace and not name.startswith(namespace):
            name = namespace + name
        return name, _as_text(payload.get("arguments"), limits)
    if kind == "custom_tool_call":
        name = payload.get("name")
        if not isinstance(name, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a custom_tool_call without a string name")
        return name, _as_text(payload.get("input"), limits)
    if kind == "local_shell_call":
        return "local_shell", _as_text(payload.get("action"), limits)
    if kind == "web_search_call":
        return "web_search", _as_text(payload.get("action"), limits)
    if kind == "image_generation_call":
        return "image_generation", _as_text(payload.get("revised_prompt"), limits)
    return "tool_search", _as_text(payload.get("arguments"), limits)


def input_text(payload: dict[str, Any], kind: str, limits: Limits) -> str | None:
    """The input text of a call of `kind` (made again by the second pass over a big rollout)."""
    return _describe(payload, kind, limits)[1]


def output_text(payload: dict[str, Any], limits: Limits) -> tuple[str | None, bool | None]:
    """(text, is_error) of a tool output record's payload."""
    return _output_text(payload.get("output", payload.get("tools")), limits)


def _as_text(value: Any, limits: Limits) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return clip(value, limits)
    return clip(json.dumps(value, ensure_ascii=False, sort_keys=True), limits)


def _output_text(output: Any, limits: Limits) -> tuple[str | None, bool | None]:
    """(text, is_error) of an output: a string, a content item, a list of content items, or {content, success}."""
    if output is None:
        return None, None
    if isinstance(output, str):
        return clip(output, limits), _error_from_text(output)
    if isinstance(output, dict) and "success" in output and "content" in output:
        text, error = _output_text(output["content"], limits)
        success = output["success"]
        return text, (not success) if isinstance(success, bool) else error
    items = output if isinstance(output, list) else [output]
    parts: list[str] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif isinstance(item, dict) and isinstance(item.get("image_url"), str):
            parts.append(f"[{data_url_reference(item['image_url'])}]")
        elif isinstance(item, dict) and item.get("type") in ("input_image", "image"):
            parts.append("[image]")
        else:
            parts.append(json.dumps(item, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts)
    return clip(text, limits), _error_from_text(text)


def _error_from_text(text: str) -> bool | None:
    head = text.lstrip()
    if head.startswith("{") and len(head) <= _MAX_JSON_PROBE:
        try:
            parsed = json.loads(head)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            metadata = parsed.get("metadata")
            if isinstance(metadata, dict):
                code = metadata.get("exit_code")
                if isinstance(code, int) and not isinstance(code, bool):
                    return code != 0
    for line in text.splitlines()[:_HEADER_LINES]:
        if line.strip() == "Output:":
            break
        match = _EXIT_HEADER.match(line.strip())
        if match:
            return match.group(1).strip("-0") != ""  # a digit other than 0; int() refuses 4,301 digits and more
    return None


def _event_error(kind: str, payload: dict[str, Any]) -> bool | None:
    if kind == "exec_command_end":
        code = payload.get("exit_code")
        return code != 0 if isinstance(code, int) and not isinstance(code, bool) else None
    if kind in ("patch_apply_end", "dynamic_tool_call_response"):
        success = payload.get("success")
        return (not success) if isinstance(success, bool) else None
    if kind == "mcp_tool_call_end":
        result = payload.get("result")
        if isinstance(result, dict):
            if "Err" in result:
                return True
            ok = result.get("Ok")
            if isinstance(ok, dict) and isinstance(ok.get("isError"), bool):
                return bool(ok["isError"])
    return None
