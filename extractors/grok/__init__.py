"""xAI Grok Build CLI sessions (`$GROK_HOME/sessions/<percent-encoded cwd>/<session id>/`).

One session = one session directory. Its record is `updates.jsonl` (the append-only stream of the session's updates)
when that file stamps its prompts (a user chunk with `_meta.promptIndex`), read by `extractors.grok.updates`; else
`chat_history.jsonl` (the model-visible transcript, which a compaction rewrites), read here as before
(docs/agents/grok.md "Which file is the record"). The unit discovered is `chat_history.jsonl`, or `updates.jsonl` in
a folder without one; `summary.json` beside it holds ids, cwd, title, model and the session's times. The fingerprint
of the unit covers all three files. Journals beside them (`events.jsonl`, `subagents/`, `terminal/`, `compaction/`)
and the global `sessions/session_search.sqlite` index are not read.

The verified signal for a person's turn in chat_history.jsonl (docs/agents/grok.md "A person's turn", agent-sessions
GrokSessionParser.isGenuinePrompt, "verified against 141 real sessions"): a `user` record with `prompt_index` present
and no `synthetic_reason`. Synthetic user records (environment_context `<user_info>...`, project_instructions,
system_reminder, interrupt notices, wake-ups) and user records without `prompt_index` are harness; a `synthetic_reason`
of PERSON_REASONS (`interjection`: typed while the model worked) says the opposite and is a turn; a `<user_query>`
envelope is reduced to the typed text (the tables below).

The community `superagent-ai/grok-cli` also lives in `~/.grok`, as a SQLite `grok.db`: a different product. The root
is the Grok home, so discovery sees `grok.db` beside `sessions/` and lists it; read() rejects it as
`unsupported_format` without opening it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from extractors.blobref import data_url_reference
from extractors.bounded import Limits, Line, MiB, clip, count_glued_line, iter_jsonl, read_json_document
from extractors.discovery import regular_stat, sidecar_stat, skip, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.gitremote import repository
from extractors.grok.updates import UpdatesParser, parse_updates
from extractors.ids import session_id
from extractors.model import (
    Agent,
    Disposition,
    LinkKind,
    Loaded,
    Outcome,
    Role,
    Session,
    SessionLink,
    Source,
    ToolCall,
    Turn,
)
from extractors.spec import AgentSpec, Claim
from extractors.timeutil import parse_iso

SPEC = AgentSpec(
    name=Agent("grok"),
    display="Grok",
    rank=30,
    # 3: sessions.git_repository from summary.json git_remotes (issue 13); 4: updates.jsonl is the record where it
    # stamps its prompts (issue 33)
    parser_version="4",
    env=("GROK_HOME",),
    nightly=True,
    export=None,
    price_provider="x-ai",
    reasoning_billed_separately=False,
    unknown_records="skip",  # a record `type` not in RECORD_KINDS is counted as SKIPPED
    claims=lambda path: Claim.FOLDER if ".grok" in path.parts else None,
)

# `chat_history.jsonl` record `type` -> disposition.
RECORD_KINDS: dict[str, Disposition] = {
    "user": Disposition.TURN,  # a person's turn only when genuine (see the module docstring); else HARNESS
    "assistant": Disposition.TURN,  # `content` is the visible text; its `tool_calls` go to tool calls
    "tool_result": Disposition.TOOL,  # `{tool_call_id, content}` joined to the assistant's call
    "backend_tool_call": Disposition.TOOL,  # server-side web search: a call with no tool_result
    "system": Disposition.HARNESS,  # the system prompt, once per session
    "reasoning": Disposition.HARNESS,  # summaries and encrypted reasoning
}

# --- Text Grok writes as the user ------------------------------------------------------------------------------------
# `synthetic_reason` values -> where seen and what they are. Each makes a user record harness (census
# `user/synthetic/<reason>`); so does any value not listed here, except those in PERSON_REASONS. "Wake-ups" carry a
# `prompt_index` too (`task_completed` below), so the reason, not the index, decides.
SYNTHETIC_REASONS: dict[str, str] = {
    "environment_context": "`<user_info>OS Version ... Workspace Path ...</user_info>` at start (AS fixture l.1)",
    "project_instructions": "AGENTS.md / CLAUDE.md contents injected at spawn (AS Grok PRD; xai_grok_sampling_types)",
    "system_reminder": "`<system-reminder>` the runtime adds between turns (AS Grok PRD; xai_grok_sampling_types)",
    "interrupt": "the notice written after the person stops a turn (AS Grok PRD)",
    "compaction_meta": "what a compaction carries over (re-read files, the summary) as `user_meta` items "
    "(SyntheticReason::CompactionMeta in a vendored copy of the Grok engine's compaction report)",
    "task_completed": '"Background task finished" wake-up, written WITH a prompt_index (a peer reader\'s tests citing '
    "Grok's conversation.rs; a lab script counting them in real chat_history.jsonl)",
    "skills": "a skill's body injected when the person invokes it (a Grok skill project's test of real transcripts)",
}
# Values that SAY the record is a person's words; they are turns even without a `prompt_index`.
PERSON_REASONS: dict[str, str] = {
    "interjection": "what the person typed while the model worked: `The user sent a message while you were working:"
    "\n<user_query>...</user_query>` (a peer reader's tests citing Grok's conversation.rs). Without this entry the "
    "any-value rule drops the person's words",
    "human": "one vendored branch of the Grok engine makes `synthetic_reason` non-optional with "
    '`SyntheticReason::Human` for typed input (its compaction report: `Human => "user message"`)',
}
# Builds that wrap the typed prompt: `<user_query>\n...\n</user_query>`, alone, with context such as `<user_info>`
# around it, or after a lead-in (`The user interrupted the previous turn:\n<user_query>...</user_query>\nIf the user
# is asking...`). Seen: a public agent transcript reads a real `~/.grok/sessions/.../chat_history.jsonl` by extracting
# exactly these spans; peer readers (citing Grok's conversation.rs) unwrap the same envelope. When a person's record
# has such a span, the turn is the text inside the spans and the rest is dropped (census kind `user/user_query`).
USER_QUERY_SPAN = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)

CHAT_HISTORY = "chat_history.jsonl"
UPDATES = "updates.jsonl"
SUMMARY = "summary.json"
SESSIONS = "sessions"
COMMUNITY_DB = "grok.db"
# Session-directory children that are journals or helpers, never sessions (pruned in discovery).
PRUNED_DIRS = frozenset({"subagents", "terminal", "compaction"})
# A subagent's meta.json is a few hundred bytes; this bounds reading one.
_MAX_META_BYTES = 1 * MiB


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """The Grok home: `GROK_HOME`, default `~/.grok` (discovery looks for `sessions/` and `grok.db` in it). No I/O."""
    value = env.get("GROK_HOME", "").strip()
    if not value:
        return [home / ".grok"]
    if value == "~" or value.startswith("~/"):
        return [home / value[2:]]
    return [Path(value)]


def discover(root: Path) -> Iterator[Source]:
    """Session units under `<root>/sessions` (or `root` itself when it is a `sessions` folder) and a community
    `<root>/grok.db`. Stats files only; never opens them."""
    db = root / COMMUNITY_DB
    db_stat = None
    if os.path.lexists(db) and not db.is_symlink():
        db_stat, reason, detail = regular_stat(db)  # stat only: a FIFO named grok.db is never opened
        if db_stat is None:
            skip(reason, db, detail)
    if db_stat is not None:
        yield Source(SPEC.name, str(db), db_stat.st_size, db_stat.st_mtime_ns, str(root), kind="database")
    sessions = root / SESSIONS if (root / SESSIONS).is_dir() else root if root.name == SESSIONS else None
    if sessions is None:
        return

    def is_unit(name: str, _folders: tuple[str, ...], depth: int) -> bool:
        # <bucket>/<session id>/chat_history.jsonl (or updates.jsonl), exactly two folders below sessions/.
        return name in (CHAT_HISTORY, UPDATES) and depth == 2

    def pruned(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
        return name in PRUNED_DIRS

    for path, st in walk_files(sessions, is_unit, max_depth=2, skip_dir=pruned, quiet=True):
        folder, name = os.path.split(path)
        other = UPDATES if name == CHAT_HISTORY else CHAT_HISTORY
        size, mtime = st.st_size, st.st_mtime_ns
        beside_other = _stat(os.path.join(folder, other))
        # The unit is updates.jsonl when it holds anything, else chat_history.jsonl: one unit per folder, and the
        # fingerprint covers both files and summary.json (docs/agents/grok.md "Files and folders"). An updates.jsonl
        # that is a symlink is never read (as the walk never follows one out of the root).
        if name == UPDATES and (not _plain_file(path) or (st.st_size == 0 and beside_other is not None)):
            continue  # a link, or empty beside a chat_history.jsonl: the folder is listed as the latter
        has_updates = beside_other is not None and beside_other.st_size > 0
        if name == CHAT_HISTORY and has_updates and _plain_file(os.path.join(folder, UPDATES)):
            continue  # listed as its updates.jsonl, which the walk meets next
        for beside in (beside_other, sidecar_stat(os.path.join(folder, SUMMARY))):
            if beside is not None:
                size, mtime = size + beside.st_size, max(mtime, beside.st_mtime_ns)
        yield Source(SPEC.name, path, size, mtime, str(root))


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _plain_file(path: str | Path) -> bool:
    """A regular file that is not a symlink."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Facts:
    """What summary.json and the directory say about a session."""

    native_id: str
    started_at: datetime
    ended_at: datetime | None
    cwd: str | None
    title: str | None
    git_branch: str | None
    git_repository: str | None
    model: str | None
    version: str
    parent: str | None


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per session directory. Raises RejectError: unsupported_format (grok.db), missing_timestamp
    (no summary.json or no usable created_at), inconsistent_source (summary id != directory), bad_shape,
    no_conversation (an empty chat_history.jsonl: no turn and no tool call), and every code of the bounded
    readers; DeferError."""
    path = Path(source.path)
    if source.kind == "database" or path.name == COMMUNITY_DB:
        raise RejectError(
            RejectCode.UNSUPPORTED_FORMAT,
            "grok.db from superagent-ai/grok-cli is not supported yet (a different product that shares ~/.grok)",
        )
    folder = path.parent
    facts = read_facts(folder, limits)
    session = read_session(folder, limits, facts)
    if not session.turns and not session.tool_calls:
        # An empty transcript (or one of harness records only) has nothing to load: as for every other format, a
        # benign no_conversation, not a session of 0 turns.
        raise RejectError(
            RejectCode.NO_CONVERSATION,
            "no user or assistant turn and no tool call in the session's record",
            session_hint=session.session_id,
        )
    yield Loaded(source, session)


def read_session(folder: Path, limits: Limits, facts: Facts) -> Session:
    """The session from its record: updates.jsonl where it stamps its prompts (or where it is the only file), else
    chat_history.jsonl (docs/agents/grok.md "Which file is the record"). Raises RejectError, DeferError."""
    chat = folder / CHAT_HISTORY
    updates_path = folder / UPDATES
    has_chat = chat.is_file()
    try:
        updates_size = os.lstat(updates_path).st_size if _plain_file(updates_path) else None
    except OSError:  # gone since it was looked at: as if absent
        updates_size = None
    if updates_size is not None and (updates_size > 0 or not has_chat):
        updates = parse_updates(iter_jsonl(updates_path, limits), limits, facts.version, facts.model)
        if updates.prompts_marked or not has_chat:
            return updates_session(updates, facts)
        # A stream that never stamps a prompt (the oldest builds): chat_history.jsonl, whose synthetic user records
        # are marked, stays the record. The stream's records were read: counted, under `legacy_updates/`.
        session = parse_chat(iter_jsonl(chat, limits), limits, facts)
        census = Counter(session.census)
        for (kind, version, _), n in updates.census.items():
            census[(f"legacy_updates/{kind}", version, Disposition.SKIPPED)] += n
        return dataclasses.replace(session, census=census)
    return parse_chat(iter_jsonl(chat, limits), limits, facts)


def updates_session(updates: UpdatesParser, facts: Facts) -> Session:
    """The Session of a parsed updates.jsonl with the folder's facts (the same id as from chat_history.jsonl)."""
    sid = session_id(SPEC.name, facts.native_id)
    parent = session_id(SPEC.name, facts.parent) if facts.parent else None
    ends = [t for t in (facts.ended_at, updates.last_time) if t is not None]
    models = tuple(updates.models) or ((facts.model,) if facts.model else ())
    return Session(
        agent=SPEC.name,
        session_id=sid,
        native_id=facts.native_id,
        started_at=facts.started_at,
        ended_at=max([facts.started_at, *ends]) if ends else None,
        parent_session_id=parent,
        cwd=facts.cwd,
        git_branch=facts.git_branch,
        git_repository=facts.git_repository,
        title=facts.title,
        models=models,
        turns=tuple(updates.turns),
        tool_calls=updates.tool_calls(),
        usage=tuple(updates.usage.values()),
        links=(SessionLink(parent, LinkKind.SUBAGENT),) if parent else (),
        census=updates.census,
    )


def read_facts(session_dir: Path, limits: Limits) -> Facts:
    """Identity, times and metadata from the directory and its summary.json. Raises RejectError."""
    native = session_dir.name
    hint = session_id(SPEC.name, native)
    summary_path = session_dir / SUMMARY
    if not summary_path.is_file():
        raise RejectError(
            RejectCode.MISSING_TIMESTAMP, "no summary.json: Grok records carry no times", session_hint=hint
        )
    summary = read_json_document(summary_path, limits)
    if not isinstance(summary, dict):
        raise RejectError(RejectCode.BAD_SHAPE, "summary.json is not an object", session_hint=hint)
    info = summary.get("info")
    info = info if isinstance(info, dict) else {}
    if "id" in info and info["id"] != native:
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE,
            f"summary.json says id {info['id']!r} in the directory of session {native!r}",
            session_hint=hint,
        )
    started = parse_iso(summary.get("created_at"))
    if started is None:
        raise RejectError(RejectCode.MISSING_TIMESTAMP, "summary.json has no usable created_at", session_hint=hint)
    ends = [t for t in (parse_iso(summary.get("updated_at")), parse_iso(summary.get("last_active_at"))) if t]
    cwd = info.get("cwd") if isinstance(info.get("cwd"), str) and info.get("cwd") else unquote(session_dir.parent.name)
    version = summary.get("chat_format_version")
    parent = find_parent(session_dir, limits) if summary.get("session_kind") == "subagent" else None
    return Facts(
        native_id=native,
        started_at=started,
        ended_at=max([started, *ends]) if ends else None,
        cwd=cwd,
        title=_text(summary.get("generated_title")) or _text(summary.get("session_summary")),
        git_branch=_text(summary.get("head_branch")),
        git_repository=_repository(summary.get("git_remotes")),
        model=_text(summary.get("current_model_id")),
        version="" if version is None else str(version),
        parent=parent,
    )


# Bucket folder -> (its mtime when indexed, subagent id -> the parent session folder holding its meta.json). A run
# reads the sessions of one bucket one after the other, so one listing of the bucket serves all its subagents: the
# cost of finding parents grows with the bucket, not with the bucket times its subagents (thousands of sessions of
# one project folder made this quadratic). A new session in the bucket changes the bucket's mtime: indexed again.
_SUBAGENT_INDEX: dict[str, tuple[int, dict[str, str]]] = {}
_INDEXED_BUCKETS = 256  # buckets kept per process; more are indexed again when met again


def _subagent_index(bucket: Path) -> dict[str, str]:
    """Subagent id -> parent folder name, for every `<bucket>/<parent>/subagents/<id>/meta.json` (first parent by
    name when several claim one id). Raises RejectError(source_unreadable) when the bucket cannot be listed."""
    try:
        mtime = os.stat(bucket).st_mtime_ns
        cached = _SUBAGENT_INDEX.get(str(bucket))
        if cached is not None and cached[0] == mtime:
            return cached[1]
        parents = sorted(entry.name for entry in os.scandir(bucket) if entry.is_dir(follow_symlinks=False))
    except OSError as exc:  # a subagent whose parent cannot be looked for is not loaded without its link
        raise RejectError(
            RejectCode.SOURCE_UNREADABLE, f"cannot list {bucket} to find the parent session: {exc.strerror}"
        ) from exc
    index: dict[str, str] = {}
    for parent in parents:
        folder = bucket / parent / "subagents"
        if not folder.is_dir():
            continue  # no subagents/ folder: not a parent
        children = [e.name for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        for child in sorted(children):
            if (
                child not in index
                and child != parent
                and (bucket / parent / "subagents" / child / "meta.json").is_file()
            ):
                index[child] = parent
    if len(_SUBAGENT_INDEX) >= _INDEXED_BUCKETS:
        _SUBAGENT_INDEX.clear()
    _SUBAGENT_INDEX[str(bucket)] = (mtime, index)
    return index


def find_parent(session_dir: Path, limits: Limits) -> str | None:
    """The parent session of a subagent: the sibling `<bucket>/<parent>/subagents/<child id>/meta.json`.

    Looks only in the child's own bucket (indexed once per bucket, see `_subagent_index`). Returns the native
    parent id, or None. Raises RejectError(inconsistent_source) when meta.json names another parent than the folder
    it sits in.
    """
    child = session_dir.name
    name = _subagent_index(session_dir.parent).get(child)
    if name is None:
        return None
    meta_path = session_dir.parent / name / "subagents" / child / "meta.json"
    meta = read_json_document(meta_path, limits, max_bytes=_MAX_META_BYTES)
    said = meta.get("parent_session_id") if isinstance(meta, dict) else None
    if isinstance(said, str) and said and said != name:
        raise RejectError(
            RejectCode.INCONSISTENT_SOURCE,
            f"{meta_path} names parent {said!r} but lies under session {name!r}",
            session_hint=session_id(SPEC.name, child),
        )
    return name


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _repository(remotes: Any) -> str | None:
    """The first entry of `git_remotes` (a list of remote URLs) that is a remote, normalised; Grok's order kept."""
    if not isinstance(remotes, list):
        return None
    return next((repo for repo in map(repository, remotes) if repo is not None), None)


@dataclass(slots=True)
class _Call:
    call: ToolCall
    output: str | None = None
    joined: bool = False


@dataclass(slots=True)
class _Parser:
    limits: Limits
    facts: Facts
    turns: list[Turn] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter)

    def count(self, kind: str, disposition: Disposition) -> None:
        self.census[(kind, self.facts.version, disposition)] += 1

    def feed(self, line: Line) -> None:
        record, index = line.record, line.index
        kind = record.get("type")
        if not isinstance(kind, str):
            self.count("(untyped)", Disposition.SKIPPED)
        elif kind == "user":
            self.user(record, index)
        elif kind == "assistant":
            self.assistant(record, index)
        elif kind == "tool_result":
            self.tool_result(record, index)
        elif kind == "backend_tool_call":
            self.backend_call(record, index)
        else:
            self.count(kind, RECORD_KINDS.get(kind, Disposition.SKIPPED))

    def user(self, record: dict[str, Any], index: int) -> None:
        prompt_index = record.get("prompt_index")
        if prompt_index is not None and (isinstance(prompt_index, bool) or not isinstance(prompt_index, int)):
            raise RejectError(RejectCode.BAD_SHAPE, "a user record whose prompt_index is not an integer", line=index)
        texts, attachments = _content(record.get("content"), index)
        reason = record.get("synthetic_reason")
        person = isinstance(reason, str) and reason in PERSON_REASONS
        if reason and not person:
            self.count(f"user/synthetic/{reason}", Disposition.HARNESS)
        elif prompt_index is None and not person:
            self.count("user/no_prompt_index", Disposition.HARNESS)
        elif not "".join(texts).strip() and not attachments:
            self.count("user/empty", Disposition.SKIPPED)
        else:
            text = "\n".join(texts)
            queries = USER_QUERY_SPAN.findall(text)
            text = "\n".join(queries) if queries else text
            self.turns.append(Turn(index, Role.USER, clip(text, self.limits), None, None, tuple(attachments)))
            kind = f"user/{reason}" if person else "user"
            self.count(f"{kind}/user_query" if queries else kind, Disposition.TURN)

    def assistant(self, record: dict[str, Any], index: int) -> None:
        texts, attachments = _content(record.get("content"), index)
        model = _text(record.get("model_id")) or self.facts.model
        if model and model not in self.models:
            self.models.append(model)
        tool_calls = record.get("tool_calls")
        if tool_calls is None:
            tool_calls = []
        if not isinstance(tool_calls, list):
            raise RejectError(RejectCode.BAD_SHAPE, "an assistant record whose tool_calls is not a list", line=index)
        for raw in tool_calls:
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("name"), str):
                raise RejectError(RejectCode.BAD_SHAPE, "a tool call without a string id and name", line=index)
            arguments = raw.get("arguments")
            text_input = arguments if isinstance(arguments, str) or arguments is None else json.dumps(arguments)
            call = ToolCall(
                raw["id"], index, raw["name"], None if text_input is None else clip(text_input, self.limits)
            )
            self.calls[raw["id"]] = _Call(call)
        text = "\n".join(texts)
        if text.strip() or attachments:
            self.turns.append(Turn(index, Role.ASSISTANT, clip(text, self.limits), None, model, tuple(attachments)))
            self.count("assistant", Disposition.TURN)
        elif tool_calls:
            self.count("assistant/tool_calls", Disposition.TOOL)
        else:
            self.count("assistant/empty", Disposition.SKIPPED)

    def tool_result(self, record: dict[str, Any], index: int) -> None:
        call_id = record.get("tool_call_id")
        if not isinstance(call_id, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a tool_result without a string tool_call_id", line=index)
        texts, attachments = _content(record.get("content"), index)
        for image in record.get("images") or ():
            attachments.append(data_url_reference(image) if isinstance(image, str) else "image")
        pending = self.calls.get(call_id)
        if pending is None:
            self.count("tool_result/orphan", Disposition.TOOL)
            return
        parts = texts + [f"[{ref}]" for ref in attachments]
        pending.output = clip("\n".join(parts), self.limits)
        pending.joined = True
        self.count("tool_result", Disposition.TOOL)

    def backend_call(self, record: dict[str, Any], index: int) -> None:
        kind = record.get("kind")
        if not isinstance(kind, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a backend_tool_call without a kind object", line=index)
        native = kind.get("id")
        call_id = native if isinstance(native, str) and native else f"backend-{index}"
        name = _text(kind.get("tool_type")) or "backend_tool"
        action = kind.get("action")
        text_input = (
            None if action is None else clip(json.dumps(action, ensure_ascii=False, sort_keys=True), self.limits)
        )
        self.calls[call_id] = _Call(ToolCall(call_id, index, name, text_input))
        self.count("backend_tool_call", Disposition.TOOL)

    def session(self) -> Session:
        facts = self.facts
        sid = session_id(SPEC.name, facts.native_id)
        parent = session_id(SPEC.name, facts.parent) if facts.parent else None
        tool_calls = tuple(
            ToolCall(c.call.call_id, c.call.turn_index, c.call.name, c.call.input, c.output)
            for c in self.calls.values()
        )
        models = tuple(self.models) or ((facts.model,) if facts.model else ())
        return Session(
            agent=SPEC.name,
            session_id=sid,
            native_id=facts.native_id,
            started_at=facts.started_at,
            ended_at=facts.ended_at,
            parent_session_id=parent,
            cwd=facts.cwd,
            git_branch=facts.git_branch,
            git_repository=facts.git_repository,
            title=facts.title,
            models=models,
            turns=tuple(self.turns),
            tool_calls=tool_calls,
            links=(SessionLink(parent, LinkKind.SUBAGENT),) if parent else (),
            census=self.census,
        )


def _content(content: Any, index: int) -> tuple[list[str], list[str]]:
    """(texts, attachment references) of a `content` string or list of `{type: text|image}` parts."""
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise RejectError(RejectCode.BAD_SHAPE, "content that is neither text nor a list of parts", line=index)
    texts: list[str] = []
    attachments: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a content part that is not an object", line=index)
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image":
            url = part.get("url", part.get("image_url"))
            attachments.append(data_url_reference(url) if isinstance(url, str) else "image")
    return texts, attachments


def parse_chat(lines: Iterable[Line], limits: Limits, facts: Facts) -> Session:
    """The session of one chat_history.jsonl, given its facts. Pure. Raises RejectError(bad_shape)."""
    parser = _Parser(limits, facts)
    for line in lines:
        count_glued_line(line, parser.census)
        parser.feed(line)
    return parser.session()
