"""One Amp thread document, already read, -> a Session. Pure: no I/O.

docs/agents/amp.md holds the rules; each function below cites its section.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlparse

from extractors.blobref import base64_reference
from extractors.bounded import Limits, clip, json_text
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Disposition, LinkKind, Role, Session, SessionLink, ToolCall, Turn, Usage
from extractors.timeutil import from_epoch_ms, parse_iso

from . import tables as t

AGENT = Agent("amp")
_THREAD_ID = re.compile(r"T-[A-Za-z0-9_-]+")


def parse_thread(document: Any, stem: str, limits: Limits) -> Session:
    """The thread `document` read from `T-<id>.json` (`stem`: the file name without `.json`) -> its Session.

    Raises RejectError: bad_shape (a known field of the wrong type), inconsistent_source (the document's `id` is not
    its file's), no_conversation (no message at all), missing_timestamp (no time anywhere)."""
    native = stem if _THREAD_ID.fullmatch(stem) else None
    hint = session_id(AGENT, native) if native else None

    def bad(detail: str) -> RejectError:
        return RejectError(RejectCode.BAD_SHAPE, detail, session_hint=hint)

    if not isinstance(document, dict):
        raise bad("the thread is not a JSON object")
    native = _native_id(document, native, hint)
    hint = session_id(AGENT, native)
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise bad("`messages` is not an array")
    if not messages:
        raise RejectError(RejectCode.NO_CONVERSATION, "the thread holds no message", session_hint=hint)
    version = document.get("v")
    writer = str(version) if isinstance(version, int) and not isinstance(version, bool) else ""
    parser = _Parser(limits, writer, hint)
    for index, message in enumerate(messages):
        parser.message(index, message)
    created = from_epoch_ms(document.get("created"))
    times = [turn.timestamp for turn in parser.turns if turn.timestamp is not None]
    times += [usage.timestamp for usage in parser.usage if usage.timestamp is not None]
    started = created or (min(times) if times else None)
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no `created` and no message time", session_hint=hint)
    parent = parser.relationships(document.get("relationships"))
    ends = [*times, *_trace_ends(document.get("meta"))]
    ended = max([started, *ends])
    title = document.get("title")
    return Session(
        agent=AGENT,
        session_id=hint,
        native_id=native,
        started_at=started,
        ended_at=ended,
        parent_session_id=parent,
        cwd=_cwd(document.get("env")),
        title=title.strip() or None if isinstance(title, str) else None,
        models=tuple(dict.fromkeys(parser.models)),
        turns=tuple(parser.turns),
        tool_calls=tuple(parser.finished_calls()),
        usage=tuple(parser.usage),
        links=(SessionLink(parent, LinkKind.COMPACTION),) if parent else (),
        census=parser.census,
    )


def _native_id(document: dict[str, Any], from_name: str | None, hint: str | None) -> str:
    """The thread id: the file name's `T-<id>`; the document's `id` only when the name is not one; both given and
    different is inconsistent (docs/agents/amp.md "Identity")."""
    written = document.get("id")
    if written is not None and not isinstance(written, str):
        raise RejectError(RejectCode.BAD_SHAPE, "`id` is not a string", session_hint=hint)
    if from_name is not None:
        if written and written != from_name:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"the document's id {written!r} is not its file's {from_name!r}",
                session_hint=hint,
            )
        return from_name
    if written and _THREAD_ID.fullmatch(written):
        return written
    raise RejectError(RejectCode.MISSING_SESSION_ID, "no `T-<id>` in the file name or the document's `id`")


def _trace_ends(meta: Any) -> list[datetime]:
    """The `endTime` of each `meta.traces` entry (ISO): the thread's last activity (docs/agents/amp.md "Times")."""
    if not isinstance(meta, dict) or not isinstance(meta.get("traces"), list):
        return []
    ends = [parse_iso(trace.get("endTime")) for trace in meta["traces"] if isinstance(trace, dict)]
    return [end for end in ends if end is not None]


def _cwd(env: Any) -> str | None:
    """The first tree of `env.initial.trees` as a local path, from its `file://` `uri` (docs/agents/amp.md
    "Project")."""
    if not isinstance(env, dict) or not isinstance(env.get("initial"), dict):
        return None
    trees = env["initial"].get("trees")
    if not isinstance(trees, list) or not trees or not isinstance(trees[0], dict):
        return None
    uri = trees[0].get("uri")
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    path = unquote(urlparse(uri).path)
    return path or None


class _Parser:
    def __init__(self, limits: Limits, writer: str, hint: str) -> None:
        self.limits = limits
        self.writer = writer
        self.hint = hint
        self.turns: list[Turn] = []
        self.calls: dict[str, ToolCall] = {}
        self.usage: list[Usage] = []
        self.models: list[str] = []
        self.census: Counter[tuple[str, str, Disposition]] = Counter()

    def bad(self, index: int, detail: str) -> RejectError:
        return RejectError(RejectCode.BAD_SHAPE, f"message {index}: {detail}", line=index, session_hint=self.hint)

    def count(self, kind: str, disposition: Disposition) -> None:
        self.census[(kind, self.writer, disposition)] += 1

    def message(self, index: int, message: Any) -> None:
        """One message: its blocks counted and dispatched (docs/agents/amp.md "Messages and blocks")."""
        if not isinstance(message, dict):
            raise self.bad(index, "not a JSON object")
        role = message.get("role")
        if not isinstance(role, str):
            raise self.bad(index, "no `role`")
        if role not in t.ROLES:
            self.count(role, Disposition.SKIPPED)  # a new role: counted, never a turn
            return
        content = message.get("content")
        texts: list[str] = []
        attachments: list[str] = []
        if isinstance(content, str):  # a bare string, as a peer's types allow: the message's one text, counted apart
            self.count(f"{role}/string", Disposition.TURN)
            texts = [content] if content.strip() else []
        elif isinstance(content, list):
            for block in content:
                self.block(index, role, block, texts, attachments)
        else:
            raise self.bad(index, "`content` is neither an array of blocks nor a string")
        when = self.when(index, role, message)
        model = None
        if role == t.ASSISTANT:
            model = self.usage_of(index, message.get("usage"), when)
        if texts or attachments:
            text = clip("\n\n".join(texts), self.limits)
            role_of = Role.USER if role == t.USER else Role.ASSISTANT
            self.turns.append(Turn(index, role_of, text, when, model, tuple(attachments)))

    def block(self, index: int, role: str, block: Any, texts: list[str], attachments: list[str]) -> None:
        """One content block, counted and dispatched by BLOCKS (docs/agents/amp.md "Messages and blocks")."""
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise self.bad(index, "a content block without a `type`")
        kind = block["type"]
        disposition, _why = t.BLOCKS.get((role, kind), (Disposition.SKIPPED, "a block of a new type"))
        self.count(f"{role}/{kind}", disposition)
        if disposition is Disposition.SKIPPED or disposition is Disposition.HARNESS:
            return
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise self.bad(index, "a text block without `text`")
            if text.strip():
                texts.append(text)
        elif kind == "tool_use":
            self.tool_use(index, block)
        elif kind == "tool_result":
            self.tool_result(index, block)
        elif kind == "image":
            attachments.append(_image_reference(block))

    def when(self, index: int, role: str, message: dict[str, Any]) -> datetime | None:
        """A user message's `meta.sentAt` (epoch ms), an assistant message's `usage.timestamp` (ISO); None when the
        message has none (docs/agents/amp.md "Times")."""
        if role == t.USER:
            meta = message.get("meta")
            return from_epoch_ms(meta.get("sentAt")) if isinstance(meta, dict) else None
        usage = message.get("usage")
        return parse_iso(usage.get("timestamp")) if isinstance(usage, dict) else None

    def usage_of(self, index: int, usage: Any, when: datetime | None) -> str | None:
        """One Usage row per assistant message with token counts; the model named. OpenAI-family models: the
        uncached prompt Amp writes under `cacheCreationInputTokens` is input (docs/agents/amp.md "Tokens")."""
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise self.bad(index, "`usage` is not an object")
        model = usage.get("model")
        if model is not None and not isinstance(model, str):
            raise self.bad(index, "`usage.model` is not a string")
        model = model or None
        if model:
            self.models.append(model)
        counts: dict[str, int] = {}
        for name in t.TOKEN_FIELDS:
            value = usage.get(name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self.bad(index, f"`usage.{name}` is not a count")
            counts[name] = value
        if not counts:
            return model
        fresh = counts.get("inputTokens")
        written = counts.get("cacheCreationInputTokens")
        if model is not None and model.startswith(t.OPENAI_PREFIXES):
            fresh, written = (fresh or 0) + (written or 0), None  # priced as input: OpenAI bills no cache writes
        self.usage.append(
            Usage(
                turn_index=index,
                model=model,
                input_tokens=fresh,
                output_tokens=counts.get("outputTokens"),
                cache_read_tokens=counts.get("cacheReadInputTokens"),
                cache_write_tokens=written,
                timestamp=when,
            )
        )
        return model

    def tool_use(self, index: int, block: dict[str, Any]) -> None:
        """A call: `id`, `name`, `input` (docs/agents/amp.md "Tools"). A second call of one id is inconsistent."""
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise self.bad(index, "a tool_use block without `id` or `name`")
        if call_id in self.calls:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"tool call {call_id!r} written twice",
                line=index,
                session_hint=self.hint,
            )
        raw = block.get("input")
        text = None if raw is None else clip(raw if isinstance(raw, str) else json_text(raw), self.limits)
        self.calls[call_id] = ToolCall(call_id, index, name, text)

    def tool_result(self, index: int, block: dict[str, Any]) -> None:
        """A result joined to its call by `toolUseID`: `run.result` the output, `run.status` the error flag
        (docs/agents/amp.md "Tools"). A result for no call is counted and dropped."""
        call_id = block.get("toolUseID")
        run = block.get("run")
        if not isinstance(call_id, str) or not isinstance(run, dict):
            raise self.bad(index, "a tool_result block without `toolUseID` or `run`")
        call = self.calls.get(call_id)
        if call is None:
            return
        status = run.get("status")
        result = run.get("result")
        if result is None and status == "error" and isinstance(run.get("error"), dict):
            result = run["error"].get("message")
        output = None if result is None else clip(result if isinstance(result, str) else json_text(result), self.limits)
        is_error = t.RUN_STATUS.get(status) if isinstance(status, str) else None
        self.calls[call_id] = ToolCall(call.call_id, call.turn_index, call.name, call.input, output, is_error)

    def relationships(self, value: Any) -> str | None:
        """The parent of a thread handed off from another: its `relationships` entry `{type: "handoff", role:
        "child", threadID}` (this thread's role). Each entry is counted; other types are skipped
        (docs/agents/amp.md "Lineage")."""
        if value is None:
            return None
        if not isinstance(value, list):
            raise RejectError(RejectCode.BAD_SHAPE, "`relationships` is not an array", session_hint=self.hint)
        parents: list[str] = []
        for entry in value:
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise RejectError(RejectCode.BAD_SHAPE, "a relationship without a `type`", session_hint=self.hint)
            kind, role, other = entry["type"], entry.get("role"), entry.get("threadID")
            if kind != t.HANDOFF:
                self.count(f"relationship/{kind}", Disposition.SKIPPED)
                continue
            if role not in t.HANDOFF_ROLES or not isinstance(other, str) or _THREAD_ID.fullmatch(other) is None:
                raise RejectError(
                    RejectCode.BAD_SHAPE,
                    "a handoff without a known `role` or a `T-` `threadID`",
                    session_hint=self.hint,
                )
            self.count(f"relationship/{kind}", Disposition.METADATA)
            if role == "child":
                parents.append(other)
        if len(set(parents)) > 1:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE, f"handed off from {len(set(parents))} threads", session_hint=self.hint
            )
        return session_id(AGENT, parents[0]) if parents else None

    def finished_calls(self) -> list[ToolCall]:
        return list(self.calls.values())


def _image_reference(block: dict[str, Any]) -> str:
    """`image/png sha256:<hex> N bytes` for a base64 `source`, else `image` (docs/agents/amp.md "Messages and
    blocks")."""
    source = block.get("source")
    if isinstance(source, dict) and isinstance(source.get("data"), str):
        media = source.get("media_type") or source.get("mediaType") or "image/png"
        return base64_reference(source["data"], media if isinstance(media, str) else "image/png")
    return "image"
