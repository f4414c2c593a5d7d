"""Gemini CLI chat recordings: legacy `session-*.json` (one ConversationRecord) and the `.jsonl` record stream.

Where: `~/.gemini/tmp/<project hash or slug>/chats/` (`$GEMINI_CLI_HOME/.gemini/tmp` when that is set: GEM
`packages/core/src/utils/paths.ts` `homedir()`). Subagent recordings: `chats/<parentSessionId>/<sessionId>.jsonl`
(GEM `chatRecordingService.ts`: "subagents are nested under the complete parent session id").

The verified signal for a person's turn: the message record's `type` (GEM `chatRecordingTypes.ts`): `user` is what
the person sent; `gemini` is the model; `info` / `error` / `warning` are the CLI's own notices. For `user` we prefer
`displayContent` (what the person typed) over `content` (what was sent to the model, which can carry expanded
@-file context). In `gemini` content, parts flagged `thought: true` and the `thoughts` list are private reasoning.

JSONL folding follows GEM's writer and `loadConversationRecord`, IN ORDER:
- a message record (`id`) inserts or replaces by id: the last version wins, at the position of its first appearance;
- `{"$rewindTo": id}` removes that message AND everything after it (GEM `rewindTo`: "All messages from (and
  including) the specified ID onwards are removed"); an unknown id clears everything, as GEM's loader does;
- `{"$set": {...}}` patches metadata; a `$set.messages` list REPLACES the history at that point (messages kept by
  id keep their index; ids that only ever appear inside `$set.messages` are harness-made, e.g. compression
  summaries, and are not turns). GEM's own loader lets the last non-empty `$set.messages` win over every later
  record; we fold in order, which is the state the writer held.
Turn index: JSON = position in `messages`; JSONL = line index of the message's first appearance (stable as the file
grows).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from extractors import ids
from extractors.bounded import Limits, clip, count_glued_line, iter_jsonl, json_text, read_json_document
from extractors.bounded.numbers import OUT_OF_RANGE, token_count
from extractors.discovery import suffix as name_suffix
from extractors.discovery import walk_files
from extractors.errors import RejectCode, RejectError
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Loaded,
    Outcome,
    Rejected,
    Role,
    Session,
    SessionLink,
    Source,
    ToolCall,
    Turn,
    Usage,
)
from extractors.spec import AgentSpec
from extractors.timeutil import parse_iso

SPEC = AgentSpec(
    name=Agent("gemini"),
    display="Gemini CLI",
    rank=40,
    parser_version="2",
    env=("GEMINI_CLI_HOME",),
    nightly=True,
    export=None,
    price_provider="google",
    reasoning_billed_separately=True,  # `output` is candidatesTokenCount; `thoughts` are billed on top
    unknown_records="skip",  # a record of no known shape is counted as `unknown` (SKIPPED)
    aliases=("gemini-cli",),
)

# Message `type` -> (role of its turn or None, disposition in the census).
MESSAGE_TYPES: dict[str, tuple[Role | None, Disposition]] = {
    "user": (Role.USER, Disposition.TURN),
    "gemini": (Role.ASSISTANT, Disposition.TURN),
    "info": (None, Disposition.HARNESS),  # CLI notices ("Request cancelled.", /memory output)
    "error": (None, Disposition.HARNESS),  # CLI error notices, not the model's words
    "warning": (None, Disposition.HARNESS),  # CLI warnings
}

# --- Text Gemini CLI writes as the user ------------------------------------------------------------------------------
# GEM's `GeminiChat.sendMessageStream` records EVERY request it sends as a `type: "user"` message (only function
# responses are left out), so a request the CLI makes up itself is recorded exactly like a typed prompt. The
# injection is in `content` (what was sent); newer builds pass the person's earlier `displayContent` on into the
# recursive call, so such a record can even carry the person's PREVIOUS prompt as its displayContent: the rule is
# read on `content`, and a matching record is harness whatever its displayContent says (else that prompt doubles).
# Census kind: `message/user/<name>`, disposition HARNESS. A subagent recording is handled separately below.


@dataclass(frozen=True, slots=True)
class Injection:
    """A request Gemini CLI sends (and records) as the user. `text` is matched on the whole stripped `content`:
    `exact`, or as its start (`prefix`)."""

    name: str
    text: str
    exact: bool
    where: str  # the GEM source that writes it, and what triggers it

    def matches(self, content: str) -> bool:
        return content == self.text if self.exact else content.startswith(self.text)


USER_INJECTIONS: tuple[Injection, ...] = (
    Injection(
        "next_speaker",
        "Please continue.",
        True,
        "core/client.ts sendMessageStream: checkNextSpeaker (utils/nextSpeakerChecker.ts) decided the model speaks "
        "next after a turn without pending tool calls; the CLI sends this to let it go on. A person who types exactly "
        "`Please continue.` is read the same way (the record carries no other signal)",
    ),
    Injection(
        "invalid_stream_retry",
        "System: Please continue.",
        True,
        "core/client.ts: a GeminiEventType.InvalidStream (empty or malformed stream) with continueOnFailedApiCall; "
        "sent once per prompt (isInvalidStreamRetry). Seen in a real session 2 s after a tool call (issue 9)",
    ),
    Injection(
        "loop_recovery",
        "System: Potential loop detected.",
        False,
        "core/client.ts _recoverFromLoop: the first strike of LoopDetectionService; the text goes on with "
        "`Details: <what repeated>. Please take a step back ...`. Seen as a user message in a rendered real recording",
    ),
    Injection(
        "ide_context",
        "Here is the user's editor context as a JSON object. This is for your information only.",
        False,
        "core/client.ts getIdeContextParts (IDE mode): open files, cursor, selection; added with addHistory, which "
        "GEM does not record, so listed for builds or forks that send it as a request",
    ),
    Injection(
        "ide_context",
        "Here is a summary of changes in the user's editor context, in JSON format. This is for your information only.",
        False,
        "core/client.ts getIdeContextParts: the delta form of the IDE context (same path as above)",
    ),
    Injection(
        "session_context",
        "This is the Gemini CLI. We are setting up the context for our chat.",
        False,
        "utils/environmentContext.ts getEnvironmentContext, older builds: OS, cwd, folder tree, untagged (the first "
        "USER entry of real `/chat share` exports); newer builds tag it, see HARNESS_SPANS",
    ),
    Injection(
        "compression_summary",
        "<state_snapshot>",
        False,
        "chat compression (core/prompts.ts getCompressionPrompt): the summary becomes a user Content followed by the "
        "model's `Got it. Thanks for the additional context!`; seen as a user message in exported histories",
    ),
)
# An @-file in a prompt is expanded into what was sent: `<prompt>\n--- Content from referenced files ---\nContent from
# @a.py:\n...\n--- End of content ---` (cli/src/ui/hooks/atCommandProcessor.ts). Builds that record no
# displayContent leave only that `content`. GEM's rewind viewer (RewindViewer.tsx getCleanedRewindText) takes
# displayContent when present, else the content through `stripReferenceContent` (cli/src/ui/utils/formatters.ts),
# which cuts these blocks; we do the same, and also cut a block left without its end marker to the end of the text.
REFERENCED_FILES_SPAN = re.compile(
    r"\n?--- Content from referenced files ---.*?(?:--- End of content ---|\Z)", re.DOTALL
)
# Tagged harness blocks inside a user message: cut out of the text; a user record with nothing else is harness
# (census `message/user/<name>`).
HARNESS_SPANS: dict[str, re.Pattern[str]] = {
    # utils/environmentContext.ts, newer builds: `<session_context>\nThis is the Gemini CLI. We are setting up the
    # context for our chat.\n...OS, workspace, folder tree...</session_context>`, recorded as the first user message
    # (bare, or in the seed `$set.messages`; a peer reader's tests quote the real block; real `/chat share` exports
    # show it as the first USER entry).
    "session_context": re.compile(r"<session_context>.*?</session_context>", re.DOTALL),
    # A BeforeAgent hook's `additionalContext`, appended to the person's request as one more part (core/client.ts
    # sendMessageStream).
    "hook_context": re.compile(r"<hook_context>.*?</hook_context>", re.DOTALL),
}
# Not detectable, and so still a turn: an AfterAgent hook that blocks sends its `reason` (free text) as the next
# request (core/client.ts, `continueRequest`).
# In a subagent recording (`kind: "subagent"`, or `chats/<parentId>/<id>.jsonl`) no user message is a person's: the
# first is the task the parent model delegated (the agent's query filled in from the parent's tool call), as Claude's
# subagent prompts are. Census `message/user/subagent_prompt`.
SUBAGENT_KIND = "subagent"

# JSONL record kinds other than messages (GEM `isRewindRecord` / `isMetadataUpdateRecord` / partial metadata).
METADATA_KINDS = {
    "metadata": Disposition.METADATA,  # {sessionId, projectHash, startTime, lastUpdated, kind}
    "$set": Disposition.METADATA,  # metadata patch (lastUpdated, summary, directories, messages)
    "$rewindTo": Disposition.METADATA,  # truncation marker
}
# Tool call `status` -> is_error. Other statuses (cancelled, in-flight ones) did not complete: None.
TOOL_ERROR: dict[str, bool] = {"error": True, "success": False}
# Not sessions, never discovered: `logs.json` is the prompt history (typed prompts of every session, no answers);
# `checkpoint-*.json` is a `/chat save` copy of the model history (Content[]), a duplicate of a recorded session;
# `shell_history` is shell commands.


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`~/.gemini/tmp`, and `$GEMINI_CLI_HOME/.gemini/tmp` first when that override is set."""
    roots = []
    override = env.get("GEMINI_CLI_HOME")
    if override:
        roots.append(Path(override) / ".gemini" / "tmp")
    default = home / ".gemini" / "tmp"
    if default not in roots:
        roots.append(default)
    return roots


def _is_recording(name: str, folders: tuple[str, ...], _depth: int) -> bool:
    suffix = name_suffix(name)
    if folders[-1:] == ("chats",):
        return suffix == ".jsonl" or (suffix == ".json" and name.startswith("session-"))
    return suffix == ".jsonl" and folders[-2:-1] == ("chats",)  # chats/<parentId>/<id>.jsonl


def discover(root: Path) -> Iterator[Source]:
    """Every chat recording under `root` (`<project>/chats/...`); stat only."""
    for path, st in walk_files(root, _is_recording, max_depth=3, quiet=True):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The one session of a recording: Loaded, or Rejected(duplicate) for a legacy `.json` that was continued in
    its `.jsonl`. Raises RejectError(invalid_json | invalid_utf8 | bad_shape | missing_session_id |
    missing_timestamp | limit_exceeded | inconsistent_source | truncated_tail | source_unreadable) and DeferError."""
    path = Path(source.path)
    if path.suffix == ".jsonl":
        yield Loaded(source, _read_jsonl(path, limits))
        return
    continued = path.with_name(path.name + "l")
    if continued.is_file():
        # GEM resumes a legacy session by copying it into `<name>.jsonl` and writing there from then on.
        yield Rejected(source, RejectCode.DUPLICATE, f"continued in {continued.name}, which holds all of it")
        return
    yield Loaded(source, _read_legacy(path, limits))


@dataclass(slots=True)
class _Entry:
    record: dict[str, Any]
    index: int | None  # line / position of its first appearance; None: only ever inside `$set.messages`
    line: int | None  # the line its current version came from (None: from `$set.messages`)


def _read_legacy(path: Path, limits: Limits) -> Session:
    doc = read_json_document(path, limits)
    if not isinstance(doc, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "not a ConversationRecord object")
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise RejectError(RejectCode.BAD_SHAPE, "ConversationRecord without a messages list")
    if len(messages) > limits.max_records:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} messages")
    census: Counter[tuple[str, str, Disposition]] = Counter()
    entries = []
    subagent = _is_subagent(doc, path)
    for position, message in enumerate(messages):
        _check_message(message, position)
        entries.append(_Entry(message, position, position))
        census[(_kind(message, subagent), "", _disposition(message, subagent))] += 1
    return _session(doc, entries, census, path, limits)


def _read_jsonl(path: Path, limits: Limits) -> Session:
    meta: dict[str, Any] = {}
    entries: dict[str, _Entry] = {}
    lines: list[tuple[int, str, dict[str, Any]]] = []  # message lines: (line, id, record) for the census
    census: Counter[tuple[str, str, Disposition]] = Counter()
    for line in iter_jsonl(path, limits):
        count_glued_line(line, census)
        record = line.record
        if isinstance(record.get("$rewindTo"), str):
            census[("$rewindTo", "", METADATA_KINDS["$rewindTo"])] += 1
            _rewind(entries, record["$rewindTo"])
        elif isinstance(record.get("id"), str):
            _check_message(record, line.index)
            lines.append((line.index, record["id"], record))
            found = entries.get(record["id"])
            if found is None:
                entries[record["id"]] = _Entry(record, line.index, line.index)
            else:
                found.record, found.line = record, line.index
                found.index = line.index if found.index is None else found.index
        elif isinstance(record.get("$set"), dict):
            census[("$set", "", METADATA_KINDS["$set"])] += 1
            _merge_meta(meta, record["$set"], line.index)
            if isinstance(record["$set"].get("messages"), list):
                entries = _replace_history(entries, record["$set"]["messages"], line.index)
        elif isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
            census[("metadata", "", METADATA_KINDS["metadata"])] += 1
            _merge_meta(meta, record, line.index)
        else:
            census[("unknown", "", Disposition.SKIPPED)] += 1
    live = {(e.line, id_) for id_, e in entries.items()}
    subagent = _is_subagent(meta, path)
    for index, id_, record in lines:
        if (index, id_) in live:
            census[(_kind(record, subagent), "", _disposition(record, subagent))] += 1
        elif id_ in entries:
            census[(f"message/{record['type']}/superseded", "", Disposition.SKIPPED)] += (
                1  # an older version of a message
            )
        else:
            census[(f"message/{record['type']}/removed", "", Disposition.SKIPPED)] += 1  # rewound or replaced away
    return _session(meta, list(entries.values()), census, path, limits)


def _rewind(entries: dict[str, _Entry], target: str) -> None:
    if target not in entries:
        entries.clear()  # GEM loader: "if (found) ... else messagesMap.clear()"
        return
    drop = False
    for id_ in list(entries):
        drop = drop or id_ == target
        if drop:
            del entries[id_]


def _replace_history(entries: dict[str, _Entry], messages: list[Any], line: int) -> dict[str, _Entry]:
    replaced: dict[str, _Entry] = {}
    for message in messages:
        _check_message(message, line)
        old = entries.get(message["id"])
        replaced[message["id"]] = _Entry(message, old.index if old else None, None)
    return replaced


def _merge_meta(meta: dict[str, Any], update: dict[str, Any], line: int) -> None:
    new_id = update.get("sessionId")
    if isinstance(new_id, str) and isinstance(meta.get("sessionId"), str) and new_id != meta["sessionId"]:
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE, f"two session ids: {meta['sessionId']!r} then {new_id!r}", line=line
        )
    meta.update({k: v for k, v in update.items() if k != "messages"})


def _check_message(message: Any, line: int) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or not message["id"]:
        raise RejectError(RejectCode.BAD_SHAPE, "a message record without an id", line=line)
    if not isinstance(message.get("type"), str):
        raise RejectError(RejectCode.BAD_SHAPE, f"message {message['id']} without a type", line=line)


def _is_subagent(meta: dict[str, Any], path: Path) -> bool:
    """A subagent's recording: `kind: "subagent"`, or the `chats/<parentSessionId>/<id>.jsonl` place."""
    nested = path.suffix == ".jsonl" and path.parent.name != "chats" and path.parent.parent.name == "chats"
    return nested or meta.get("kind") == SUBAGENT_KIND


def _injected(message: dict[str, Any], subagent: bool) -> str | None:
    """The name of the harness text a `user` message is (USER_INJECTIONS, hook context, a subagent's task), or None
    when it is what a person sent. Read on `content`, never on `displayContent` (see USER_INJECTIONS)."""
    if message["type"] != "user":
        return None
    if subagent:
        return "subagent_prompt"
    sent = _text_and_attachments(message.get("content"), skip_thoughts=False)[0].strip()
    for injection in USER_INJECTIONS:
        if injection.matches(sent):
            return injection.name
    found = [name for name, span in HARNESS_SPANS.items() if span.search(sent)]
    if found and not _without_spans(sent).strip():
        return found[0]
    return None


def _without_spans(text: str) -> str:
    for span in HARNESS_SPANS.values():
        text = span.sub("", text)
    return text


def _kind(message: dict[str, Any], subagent: bool) -> str:
    injected = _injected(message, subagent)
    return f"message/{message['type']}" + (f"/{injected}" if injected else "")


def _disposition(message: dict[str, Any], subagent: bool) -> Disposition:
    if _injected(message, subagent):
        return Disposition.HARNESS
    return MESSAGE_TYPES.get(message["type"], (None, Disposition.SKIPPED))[1]


def _parts(content: Any) -> list[Any]:
    """A PartListUnion (string, one Part, or a list of strings / Parts) as a list."""
    if content is None:
        return []
    return content if isinstance(content, list) else [content]


def _text_and_attachments(content: Any, *, skip_thoughts: bool) -> tuple[str, list[str]]:
    """Visible text of a PartListUnion and references to its blobs (inlineData is hashed, never stored).

    Parts that are function calls or responses (tool traffic) and thought parts are not text.
    """
    texts: list[str] = []
    attachments: list[str] = []
    for part in _parts(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if skip_thoughts and part.get("thought") is True:
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            inline = part.get("inlineData")
            if isinstance(inline, dict) and isinstance(inline.get("data"), str):
                data = inline["data"].encode("utf-8", "surrogatepass")
                attachments.append(
                    f"{inline.get('mimeType', 'application/octet-stream')} "
                    f"sha256:{ids.stable_hash(data)} {len(data)} bytes"
                )
            file_data = part.get("fileData")
            if isinstance(file_data, dict):
                attachments.append(f"{file_data.get('mimeType', '')} {str(file_data.get('fileUri', ''))[:512]}".strip())
    return "".join(texts), attachments


def _tool_output(result: Any, limits: Limits) -> str | None:
    """The text a tool returned to the model: each functionResponse's `output` or `error`, else its JSON."""
    if result is None:
        return None
    pieces: list[str] = []
    for part in _parts(result):
        wrapper = part.get("functionResponse") if isinstance(part, dict) else None
        response = wrapper.get("response") if isinstance(wrapper, dict) else None
        if isinstance(response, dict) and isinstance(response.get("output"), str):
            pieces.append(response["output"])
        elif isinstance(response, dict) and isinstance(response.get("error"), str):
            pieces.append(response["error"])
        elif isinstance(part, str):
            pieces.append(part)
        else:
            text, refs = _text_and_attachments([part], skip_thoughts=False) if isinstance(part, dict) else ("", [])
            pieces.append(text or " ".join(refs) or json_text(part))
    return clip("\n".join(pieces), limits)


def _tool_calls(message: dict[str, Any], index: int, limits: Limits) -> list[ToolCall]:
    calls = message.get("toolCalls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise RejectError(RejectCode.BAD_SHAPE, f"message {message['id']}: toolCalls is not a list")
    found = []
    for n, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise RejectError(RejectCode.BAD_SHAPE, f"message {message['id']}: a tool call without a name")
        native_id = call.get("id")
        # GEM requires an id; one without (hand-made records) gets `<message id>-<position>`.
        call_id = native_id if isinstance(native_id, str) and native_id else f"{message['id']}-{n}"
        status = call.get("status")
        args = call.get("args")
        found.append(
            ToolCall(
                call_id=call_id,
                turn_index=index,
                name=call["name"],
                input=None if args is None else clip(json_text(args), limits),
                output=_tool_output(call.get("result"), limits),
                is_error=TOOL_ERROR.get(status) if isinstance(status, str) else None,
                started_at=parse_iso(call.get("timestamp")),
            )
        )
    return found


def _usage(
    message: dict[str, Any], index: int, when: datetime | None, census: Counter[tuple[str, str, Disposition]]
) -> Usage | None:
    """Gemini's `input` (promptTokenCount) INCLUDES the cached tokens (`total = input + output + thoughts + tool`
    in real records), so input_tokens = input - cached + tool (the tool-use prompt is prompt-side too);
    cache_read = cached; reasoning = thoughts.

    Numbers (`extractors.bounded.numbers.token_count`): a count that is not a number is null; NaN, an infinity (`1e400`)
    or an integer past int64 (`2**63`, a 30-digit literal) is null and counted in the census as
    `usage/out_of_range`, checked before input - cached is derived from it; a finite float is truncated.
    """
    tokens = message.get("tokens")
    if not isinstance(tokens, dict):
        return None

    def count(name: str) -> int | None:
        value, out_of_range = token_count(tokens.get(name))
        if out_of_range:
            census[OUT_OF_RANGE] += 1
        return value

    given, cached, tool = count("input"), count("cached"), count("tool")
    net = None if given is None else max(given - (cached or 0), 0) + (tool or 0)
    model = message.get("model")
    return Usage(
        turn_index=index,
        model=model if isinstance(model, str) else None,
        input_tokens=net,
        output_tokens=count("output"),
        cache_read_tokens=cached,
        reasoning_tokens=count("thoughts"),
        timestamp=when,
        response_id=message["id"],
    )


def _session(
    meta: dict[str, Any],
    entries: list[_Entry],
    census: Counter[tuple[str, str, Disposition]],
    path: Path,
    limits: Limits,
) -> Session:
    native = meta.get("sessionId")
    if not isinstance(native, str) or not native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "no sessionId in the recording")
    turns: list[Turn] = []
    calls: list[ToolCall] = []
    usage: list[Usage] = []
    models: list[str] = []
    times: list[datetime] = []
    seen_calls: set[str] = set()
    subagent = _is_subagent(meta, path)
    for entry in entries:
        message = entry.record
        when = parse_iso(message.get("timestamp"))
        if when is not None:
            times.append(when)
        role = MESSAGE_TYPES.get(message["type"], (None, Disposition.SKIPPED))[0]
        if entry.index is None or role is None or _injected(message, subagent):
            continue
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if model and model not in models:
            models.append(model)
        if role is Role.USER:
            shown = message.get("displayContent")
            text, attachments = _text_and_attachments(
                shown if shown not in (None, "", []) else message.get("content"), skip_thoughts=False
            )
            text = _without_spans(text)
            if REFERENCED_FILES_SPAN.search(text):
                text = REFERENCED_FILES_SPAN.sub("", text).rstrip()
        else:
            text, attachments = _text_and_attachments(message.get("content"), skip_thoughts=True)
            for call in _tool_calls(message, entry.index, limits):
                if call.call_id in seen_calls:
                    call = replace(call, call_id=f"{call.call_id}#{message['id']}")
                seen_calls.add(call.call_id)
                calls.append(call)
            found = _usage(message, entry.index, when, census)
            if found is not None:
                usage.append(found)
        if text.strip():
            turns.append(Turn(entry.index, role, text, when, model, tuple(attachments)))
    started = parse_iso(meta.get("startTime")) or (min(times) if times else None)
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "no startTime and no message timestamp")
    parent_sid, session_id = None, ids.session_id(SPEC.name, native)
    if path.suffix == ".jsonl" and path.parent.name != "chats" and path.parent.parent.name == "chats":
        parent_sid = ids.session_id(SPEC.name, path.parent.name)  # chats/<parentSessionId>/<id>.jsonl
        session_id = ids.subagent_session_id(parent_sid, native)
    summary = meta.get("summary")
    return Session(
        agent=SPEC.name,
        session_id=session_id,
        native_id=native,
        started_at=started,
        ended_at=parse_iso(meta.get("lastUpdated")) or (max(times) if times else None),
        parent_session_id=parent_sid,
        title=summary if isinstance(summary, str) and summary else None,
        models=tuple(models),
        turns=tuple(turns),
        tool_calls=tuple(calls),
        usage=tuple(usage),
        links=(SessionLink(parent_sid, LinkKind.SUBAGENT),) if parent_sid else (),
        census=census,
    )
