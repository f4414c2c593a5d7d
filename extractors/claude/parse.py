"""From the records of one Claude Code JSONL file to one complete `Session` (no I/O here).

`Parser.feed` classifies each record as it streams by and keeps only what the session needs (a small entry per
line); `Parser.finish` decides the session's own id, drops records copied from other sessions and sidechain
records, merges the lines of each API response, joins tool calls with their results, and counts every line once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extractors.bounded import Limits, Line, clip
from extractors.bounded.twopass import line_fields
from extractors.claude import tables
from extractors.claude.assembly import assemble
from extractors.claude.content import (
    Blocks,
    attachments_of,
    classify_user,
    command_text,
    json_text,
    text_of,
    tool_result_output,
)
from extractors.claude.records import Entry, Layout, Part, Plan, QueueOp, Ref, Result, Text, Use, text_value
from extractors.errors import RejectCode, RejectError
from extractors.model import Disposition, Session
from extractors.timeutil import parse_iso


@dataclass(slots=True)
class Parser:
    """Feed every `Line` of one file in order, then `finish()` for the Session.

    `lazy` (the first pass over a big session): assistant texts, tool inputs and tool outputs are kept as `Ref`s to
    their line (which must carry its CRC), not as text; the rest of the entry is what it would be.
    """

    layout: Layout
    limits: Limits
    lazy: bool = False
    entries: list[Entry] = field(default_factory=list)
    record_agent_id: str | None = None
    glued_lines: int = 0

    def feed(self, line: Line) -> None:
        """Classify one record. Raises RejectError(bad_shape) for a known kind with the wrong structure."""
        record = line.record
        if line.starts_glued_line:
            self.glued_lines += 1
        raw_type = record.get("type")
        rtype = raw_type if isinstance(raw_type, str) and raw_type else "<untyped>"
        sid = record.get("sessionId")
        if sid is not None and not isinstance(sid, str):
            raise RejectError(RejectCode.BAD_SHAPE, "sessionId is not a string", line=line.index, offset=line.offset)
        if self.record_agent_id is None:
            self.record_agent_id = text_value(record.get("agentId"))
        timestamp = parse_iso(record.get("timestamp"))
        snapshot = record.get("snapshot")
        if timestamp is None and isinstance(snapshot, dict):
            timestamp = parse_iso(snapshot.get("timestamp"))
        entry = Entry(
            index=line.index,
            rtype=rtype,
            kind=rtype,
            version=text_value(record.get("version")) or "",
            disposition=Disposition.SKIPPED,
            sid=sid or None,
            sidechain=record.get("isSidechain") is True,
            timestamp=timestamp,
            cwd=text_value(record.get("cwd")),
            branch=text_value(record.get("gitBranch")),
            uuid=text_value(record.get("uuid")),
        )
        if rtype == "user":
            self._user(entry, record, _content(record, line), line)
        elif rtype == "assistant":
            self._assistant(entry, record, _content(record, line), line)
        elif rtype == "system":
            self._system(entry, record)
        elif rtype == "progress":
            self._progress(entry, record)
        elif rtype == tables.QUEUE_TYPE:
            self._queue(entry, record)
        elif rtype == "attachment" and _attachment_type(record) == tables.QUEUED_COMMAND_ATTACHMENT:
            # The record of a queued prompt delivered into the running turn (2.1.1xx+): evidence for the queue
            # rules, never a turn of its own (the enqueue is).
            entry.kind = f"attachment/{tables.QUEUED_COMMAND_ATTACHMENT}"
            prompt = record["attachment"].get("prompt")
            if isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(b, dict) for b in prompt)):
                entry.delivered = text_of(prompt)
        else:
            entry.disposition = tables.NON_TURN_TYPES.get(rtype, (Disposition.SKIPPED, ""))[0]
            entry.title = _title(rtype, record)
        self.entries.append(entry)

    def _person_said(self, entry: Entry, kind: str, text: str) -> None:
        # In a subagent file no user line is a person's: the prompt was written by the parent model.
        if self.layout.is_subagent:
            entry.kind, entry.disposition = tables.SUBAGENT_PROMPT_KIND, Disposition.HARNESS
        else:
            entry.kind, entry.disposition, entry.prompt = kind, Disposition.TURN, text

    def _ref(self, line: Line, slot: str, position: int) -> Ref:
        return Ref(*line_fields(line), slot, position)

    def _user(self, entry: Entry, record: dict[str, Any], content: str | Blocks, line: Line) -> None:
        kind, disposition, text = classify_user(record, content)
        entry.kind, entry.disposition = kind, disposition
        if text is not None:
            self._person_said(entry, kind, text)
            entry.attachments = () if self.layout.is_subagent else attachments_of(content)
        if isinstance(content, list):
            entry.results = self._results(content, record.get("toolUseResult"), line)
        agent_id = _tool_use_result_agent(record)
        if agent_id is not None and len(entry.results) == 1:
            entry.spawn = (entry.results[0].tool_use_id, agent_id)

    def _results(self, blocks: Blocks, tool_use_result: Any, line: Line) -> tuple[Result, ...]:
        failed = isinstance(tool_use_result, str) and tool_use_result.startswith(tables.TOOL_ERROR_PREFIX)
        results: list[Result] = []
        for block in blocks:
            btype = block.get("type")
            if btype != "tool_result" and not (
                isinstance(btype, str) and btype.endswith(tables.SERVER_TOOL_RESULT_SUFFIX)
            ):
                continue
            use_id = text_value(block.get("tool_use_id"))
            if use_id is None:
                continue  # nothing to join it to; the record is still counted in the census
            output: Text | None = tool_result_output(block, self.limits)
            if self.lazy and output is not None:
                output = self._ref(line, "output", len(results))
            # A server tool reports failure in its content: {"type": "web_search_tool_result_error", ...}.
            inner = block.get("content")
            server_error = isinstance(inner, dict) and str(inner.get("type", "")).endswith("_error")
            results.append(Result(use_id, output, block.get("is_error") is True or failed or server_error))
        return tuple(results)

    def _assistant(self, entry: Entry, record: dict[str, Any], content: str | Blocks, line: Line) -> None:
        message = record["message"]
        model = text_value(message.get("model"))
        usage = message.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise RejectError(
                RejectCode.BAD_SHAPE, "message.usage is not an object", line=line.index, offset=line.offset
            )
        if model == tables.SYNTHETIC_MODEL:
            entry.kind, entry.disposition = "assistant/synthetic", Disposition.HARNESS
            return
        blocks: Blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts: tuple[Text, ...] = tuple(
            b["text"]
            for b in blocks
            if _kind(b) in tables.VISIBLE_BLOCKS and isinstance(b.get("text"), str) and b["text"].strip()
        )
        if self.lazy:
            texts = tuple(self._ref(line, "text", position) for position in range(len(texts)))
        uses: list[Use] = []
        for position, block in enumerate(blocks):
            if _kind(block) not in tables.TOOL_USE_BLOCKS:
                continue
            name = block.get("name")
            if not isinstance(name, str):
                raise RejectError(RejectCode.BAD_SHAPE, "tool_use without a name", line=line.index, offset=line.offset)
            # A tool_use without an id (seen only in hand-written fixtures) is named by its place in the file,
            # which never changes as the file grows.
            call_id = text_value(block.get("id")) or f"line{line.index}.{position}"
            raw_input = block.get("input")
            tool_input: Text | None = None
            if raw_input is not None and self.lazy:
                tool_input = self._ref(line, "input", len(uses))
            elif raw_input is not None:
                tool_input = clip(json_text(raw_input), self.limits)
            uses.append(Use(call_id, name, tool_input))
        message_id = text_value(message.get("id"))
        # One API response is written as one line per content block, all with the same message.id and requestId
        # (CP 3a7770b4: text line then tool_use line, both msg_01MxqzYv…). Gateways omit or reuse requestId.
        key = (message_id, text_value(record.get("requestId")) or "") if message_id else ("line", str(line.index))
        entry.part = Part(key, message_id, model, texts, usage, tuple(uses))
        entry.results = self._results(blocks, None, line)
        if texts:
            entry.kind, entry.disposition = "assistant", Disposition.TURN
        elif uses or entry.results:
            entry.kind, entry.disposition = "assistant/tool_use", Disposition.TOOL
        elif any(_kind(b) in tables.REASONING_BLOCKS for b in blocks):
            entry.kind, entry.disposition = "assistant/thinking", Disposition.HARNESS
        else:
            entry.kind, entry.disposition = "assistant/empty", Disposition.SKIPPED

    def _system(self, entry: Entry, record: dict[str, Any]) -> None:
        subtype = text_value(record.get("subtype"))
        entry.kind = f"system/{subtype}" if subtype else "system"
        entry.disposition = tables.SYSTEM_SUBTYPES.get(subtype or "", (tables.SYSTEM_OTHER, ""))[0]
        content = record.get("content")
        if subtype == "local_command" and isinstance(content, str):
            command = command_text(content)
            if command is not None:
                self._person_said(entry, entry.kind, command)

    def _queue(self, entry: Entry, record: dict[str, Any]) -> None:
        """Note what the operation did; whether an enqueued prompt is a turn is decided once the file is read."""
        operation = text_value(record.get("operation")) or "<none>"
        entry.kind, entry.disposition = f"{tables.QUEUE_TYPE}/{operation}", Disposition.SKIPPED
        raw = record.get("content")
        content: str | Blocks | None = None
        if isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(b, dict) for b in raw)):
            content = raw
        prompt, kind = None, ""
        if content is not None:
            # The queued text is what the person typed: the user-line rules decide whether it is a person's.
            kind, _, prompt = classify_user({}, content)
            entry.attachments = attachments_of(content)  # kept for the turn it may become
            if self.layout.is_subagent:
                kind, prompt = tables.SUBAGENT_PROMPT_KIND, None
        text = None if content is None else text_of(content)
        entry.queue = QueueOp(operation, text, text_value(record.get("reason")), prompt, kind)

    def _progress(self, entry: Entry, record: dict[str, Any]) -> None:
        data = record.get("data")
        if not isinstance(data, dict):
            return
        dtype = text_value(data.get("type"))
        entry.kind = f"progress/{dtype}" if dtype else "progress"
        entry.disposition = tables.NON_TURN_TYPES["progress"][0]
        agent_id, use_id = text_value(data.get("agentId")), text_value(record.get("parentToolUseID"))
        if agent_id and use_id:
            entry.spawn = (use_id, agent_id)

    def finish(self, plan: Plan | None = None) -> Session:
        """The complete Session (a lazy parse: with its payloads noted in `plan`). Raises
        RejectError(no_conversation | missing_session_id | inconsistent_source | missing_timestamp)."""
        if not any(e.rtype in tables.CONVERSATION_TYPES for e in self.entries):
            raise RejectError(RejectCode.NO_CONVERSATION, "no user or assistant record in the file")
        return assemble(self.entries, self.layout, self.record_agent_id, self.glued_lines, plan)


def _kind(block: dict[str, Any]) -> str | None:
    """A content block's `type` when it is a string (a list there must not reach a set lookup: unhashable)."""
    kind = block.get("type")
    return kind if isinstance(kind, str) else None


def _content(record: dict[str, Any], line: Line) -> str | Blocks:
    """`message.content` of a user / assistant record. Raises RejectError(bad_shape)."""
    message = record.get("message")
    if not isinstance(message, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "message is not an object", line=line.index, offset=line.offset)
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise RejectError(
        RejectCode.BAD_SHAPE,
        "message.content is neither a string nor a list of objects",
        line=line.index,
        offset=line.offset,
    )


def _title(rtype: str, record: dict[str, Any]) -> tuple[str, str, str | None] | None:
    field_name = {"summary": "summary", "custom-title": "customTitle", "ai-title": "aiTitle"}.get(rtype)
    text = text_value(record.get(field_name)) if field_name else None
    return (rtype, text, text_value(record.get("leafUuid"))) if text else None


def _attachment_type(record: dict[str, Any]) -> str | None:
    attachment = record.get("attachment")
    return text_value(attachment.get("type")) if isinstance(attachment, dict) else None


def _tool_use_result_agent(record: dict[str, Any]) -> str | None:
    result = record.get("toolUseResult")
    return text_value(result.get("agentId")) if isinstance(result, dict) else None
