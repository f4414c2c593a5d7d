"""From the records of one Codex rollout to a `Session`: identity, fork replay gate, turns, usage, tools. No I/O.

Rules this parse applies (each tested in tests/test_codex*.py):
- Identity is the FIRST `session_meta` (`payload.id`); a repeated meta with the same id (resume) is metadata. A
  pre-envelope file's line 0 header `{id, timestamp, instructions, cwd?, git?}` plays the same part.
- Fork / subagent replay: such a rollout holds its own meta, then the parent's meta and the parent's history,
  re-stamped. The gate arms on `forked_from_id` in the own meta or on a meta of another thread before any own
  conversation; while armed, every record is counted as `replayed/<kind>` (SKIPPED) and its cumulative token totals
  only move the baseline. It opens at the first `turn_context` or `event_msg/task_started` whose `turn_id` is a
  UUIDv7 minted at or after this thread's creation (the millisecond in its own UUIDv7 id, else
  `session_meta.timestamp`): turn ids are minted when a turn runs, so replayed turns predate the fork. Compared at
  millisecond precision; a non-v7 turn id never opens it. A gate that never opens is `undecidable_thread` when the
  armed part held a turn marker it could not date, or records but no turn marker at all; a replay whose turns all
  predate the fork is a fork never continued (loaded without turns). A meta of another thread after own
  conversation is `inconsistent_source`.
- Rollback: `event_msg/thread_rolled_back {num_turns: N}` drops the last N user turns before it and every turn after
  the first of them, up to the rollback (counted `<kind>/rolled_back`); their tool calls ran and their tokens were
  spent, so tool calls and usage stay.
- Usage: see `extractors.codex.usage` (cumulative totals -> one row per change; input stored net of cache).
- Start: `session_meta.payload.timestamp`, else the earliest envelope timestamp. The file name's time is local time
  without a zone and is NOT used: a rollout with no usable time is rejected `missing_timestamp`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from extractors.blobref import data_url_reference
from extractors.bounded import Limits, Line, clip, count_glued_line
from extractors.bounded.numbers import OUT_OF_RANGE
from extractors.bounded.twopass import LineRef, line_fields
from extractors.codex.tables import (
    ENVELOPE_KINDS,
    EVENT_KINDS,
    EXEC_JSON_TYPE,
    LEGACY_STATE_MARKER,
    MESSAGE_ROLES,
    NON_PERSON_USER_MESSAGE_KINDS,
    RESPONSE_ITEM_KINDS,
    contextual_fragment,
    unwrap_ide_context,
)
from extractors.codex.tools import AGENT, ToolLedger
from extractors.codex.usage import UsageLedger
from extractors.errors import RejectCode, RejectError
from extractors.gitremote import repository
from extractors.ids import session_id
from extractors.model import Disposition, LinkKind, Role, Session, SessionLink, Turn
from extractors.timeutil import parse_iso

CALL_KINDS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "image_generation_call"}
    | {"tool_search_call"}
)
OUTPUT_KINDS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_ROLLED = {False: Disposition.TURN, True: Disposition.SKIPPED}  # a rolled-back turn is counted, never a turn


def _named(value: object, names: frozenset[str]) -> bool:
    """`value in names` for any JSON value: a list or an object is unhashable, and never one of the names."""
    return isinstance(value, str) and value in names


def uuid7_ms(value: Any) -> int | None:
    """The Unix millisecond of a UUIDv7 string (its first 48 bits), or None for anything else."""
    if not isinstance(value, str):
        return None
    hexdigits = value.replace("-", "")
    if len(hexdigits) != 32 or hexdigits[12] != "7":
        return None
    try:
        int(hexdigits, 16)
    except ValueError:
        return None
    return int(hexdigits[:12], 16)


# A text longer than this is kept as a `Ref` by the first pass over a big rollout (shorter ones stay text: reading
# a line again costs more than they weigh).
INLINE_CHARS = 64


@dataclass(frozen=True, slots=True)
class Ref(LineRef):
    """Where a long text is in the file, kept instead of the text by the first pass over a big rollout.

    `producer` is what made the text from the record: `message`, `user_message` or `agent_message` for a turn, the
    call's kind for a tool input, `output` for a tool output; `enveloped`: the record's `payload` holds it (else the
    record itself: a pre-envelope rollout's bare item).
    """

    producer: str
    enveloped: bool


@dataclass(slots=True)
class Plan:
    """What the second pass over a big rollout reads again: turn texts (by turn index), tool inputs and outputs
    (by call id). The Session parsed with a plan has "" / None in those places."""

    texts: dict[int, Ref] = field(default_factory=dict)
    inputs: dict[str, Ref] = field(default_factory=dict)
    outputs: dict[str, Ref] = field(default_factory=dict)


@dataclass(slots=True)
class _Candidates:
    """Turns from one of two streams that carry the same text; one stream is chosen at the end."""

    turns: list[tuple[Turn, str]] = field(default_factory=list)  # (turn, writer version of its record)
    records: int = 0

    def add(self, turn: Turn, version: str) -> None:
        self.turns.append((turn, version))
        self.records += 1


@dataclass(slots=True)
class RolloutParser:
    """Feed it the lines of one rollout in order, then call `session()`."""

    limits: Limits
    archived: bool = False
    mode: str | None = None  # "envelope" | "legacy"
    native_id: str | None = None
    version: str = ""
    started_at: datetime | None = None
    created_ms: int | None = None
    first_time: datetime | None = None
    last_time: datetime | None = None
    cwd: str | None = None
    git_branch: str | None = None
    git_repository: str | None = None
    title: str | None = None
    parent: str | None = None
    links: list[SessionLink] = field(default_factory=list)
    cli_versions: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    model: str | None = None
    fallback_model: str | None = None
    gate_armed: bool = False
    gate_open: bool = False
    gate_undatable: int = 0
    gate_markers: int = 0
    gate_records: int = 0
    own_started: bool = False
    census: Counter[tuple[str, str, Disposition]] = field(default_factory=Counter)
    event_users: _Candidates = field(default_factory=_Candidates)
    item_users: _Candidates = field(default_factory=_Candidates)
    item_assistants: _Candidates = field(default_factory=_Candidates)
    event_assistants: _Candidates = field(default_factory=_Candidates)
    usage: UsageLedger = field(default_factory=UsageLedger)
    tools: ToolLedger | None = None
    rollbacks: list[tuple[int, int]] = field(default_factory=list)  # (line, num_turns) of each thread_rolled_back
    plan: Plan | None = None  # the first pass over a big rollout: long texts become `Ref`s noted here
    current: Line | None = None  # the line being fed (for its `Ref`s)
    enveloped: bool = True  # whether the line's texts are in its `payload`

    # ---- dispatch ------------------------------------------------------------------------------------------
    def feed(self, line: Line) -> None:
        """Take one record. Raises RejectError(bad_shape | missing_session_id | inconsistent_source | ...)."""
        record = line.record
        self.current, self.enveloped = line, True
        if self.mode is None:
            self.mode = self._detect(record, line.index)
            if self.mode == "legacy":
                self._legacy_header(record, line.index)
                return
        kind = record.get("type")
        if self.mode == "legacy" and "payload" not in record:
            if LEGACY_STATE_MARKER in record:
                self._count("legacy/state", Disposition.SKIPPED)
            elif isinstance(kind, str):
                # A bare response item: `{"type":"message","role":"user","content":[...]}`, usually no timestamp.
                self.enveloped = False
                self._response_item(record, line.index, self._time(record))
            else:
                self._count("(untyped)", Disposition.SKIPPED)
            return
        if not isinstance(kind, str):
            self._count("(untyped)", Disposition.SKIPPED)
            return
        if kind not in ENVELOPE_KINDS:
            self._count(kind, Disposition.SKIPPED)  # a new RolloutItem kind: counted, never a rejection
            return
        payload = record.get("payload")
        if not isinstance(payload, dict):
            raise RejectError(RejectCode.BAD_SHAPE, f"a {kind} line without an object payload", line=line.index)
        at = self._time(record)
        if kind == "session_meta":
            self._session_meta(payload, line.index)
            return
        if self.native_id is None:
            raise RejectError(RejectCode.MISSING_SESSION_ID, f"a {kind} line before any session_meta", line=line.index)
        if self._gated(kind, payload, line.index):
            return
        self._stamp(at)
        if kind == "response_item":
            self._response_item(payload, line.index, at)
        elif kind == "event_msg":
            self._event(payload, line.index, at)
        elif kind == "turn_context":
            self._turn_context(payload)
        else:
            self._count(kind, ENVELOPE_KINDS[kind])

    def _detect(self, record: dict[str, Any], index: int) -> str:
        kind = record.get("type")
        if isinstance(kind, str) and EXEC_JSON_TYPE.match(kind):
            raise RejectError(
                RejectCode.UNSUPPORTED_FORMAT,
                f"`codex exec --json` output ({kind}), not a rollout: this stream is not read",
                line=index,
            )
        if kind is None and "payload" not in record and "id" in record and "timestamp" in record:
            return "legacy"
        return "envelope"

    def _time(self, record: dict[str, Any]) -> datetime | None:
        at = parse_iso(record.get("timestamp"))
        if at is not None and (self.first_time is None or at < self.first_time):
            self.first_time = at
        return at

    def _stamp(self, at: datetime | None) -> None:
        if at is not None and (self.last_time is None or at > self.last_time):
            self.last_time = at

    def _ref(self, producer: str, text: str | None) -> Ref | None:
        """A `Ref` to `text` in the line being fed, when this is a first pass and the text is long enough to leave."""
        line = self.current
        if self.plan is None or text is None or len(text) <= INLINE_CHARS or not text.strip() or line is None:
            return None
        return Ref(*line_fields(line), producer, self.enveloped)

    def _lazy(self, turn: Turn, producer: str) -> Turn:
        """`turn`, or (first pass) `turn` without its long text, noted in the plan."""
        ref = self._ref(producer, turn.text)
        if ref is None or self.plan is None:
            return turn
        self.plan.texts[turn.index] = ref
        return replace(turn, text="")

    def _keep(self, slot: str, call_id: str, producer: str, text: str | None) -> str | None:
        """What the tool ledger stores for a call's input or output: `text`, or (first pass) None and a `Ref`."""
        if self.plan is None:
            return text
        refs = self.plan.inputs if slot == "input" else self.plan.outputs
        ref = self._ref(producer, text)
        if ref is None:
            refs.pop(call_id, None)  # a call written again (openai/codex#24425) may replace a long text by a short
            return text
        refs[call_id] = ref
        return None

    def _count(self, kind: str, disposition: Disposition, n: int = 1) -> None:
        if n:
            self.census[(kind, self.version, disposition)] += n

    # ---- identity and the replay gate ---------------------------------------------------------------------
    def _identify(self, native: Any, started: Any, index: int) -> None:
        if not isinstance(native, str) or not native.strip():
            raise RejectError(RejectCode.MISSING_SESSION_ID, "the first session_meta has no id", line=index)
        self.native_id = native
        self.started_at = parse_iso(started)
        self.created_ms = uuid7_ms(native)
        if self.created_ms is None and self.started_at is not None:
            self.created_ms = int(self.started_at.timestamp() * 1000)
        self.tools = ToolLedger(self.limits, keep=self._keep if self.plan is not None else None)

    def _legacy_header(self, record: dict[str, Any], index: int) -> None:
        self._identify(record.get("id"), record.get("timestamp"), index)
        self._where(record)
        model = record.get("model")
        self.fallback_model = model if isinstance(model, str) else None
        self._count("legacy/header", Disposition.METADATA)

    def _where(self, payload: dict[str, Any]) -> None:
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd and self.cwd is None:
            self.cwd = cwd
        git = payload.get("git")
        if isinstance(git, dict) and isinstance(git.get("branch"), str) and self.git_branch is None:
            self.git_branch = git["branch"]
        if isinstance(git, dict) and self.git_repository is None:
            self.git_repository = repository(git.get("repository_url"))  # credentials never kept

    def _session_meta(self, payload: dict[str, Any], index: int) -> None:
        native = payload.get("id")
        if self.native_id is None:
            version = payload.get("cli_version")
            self.version = version if isinstance(version, str) else ""
            self._identify(native, payload.get("timestamp"), index)
            self._where(payload)
            self._lineage(payload)
            if self.version:
                self.cli_versions.append(self.version)
            model = payload.get("model")
            self.fallback_model = model if isinstance(model, str) else None
            self._count("session_meta", Disposition.METADATA)
            return
        if native == self.native_id:
            if not self.gate_armed or self.gate_open:
                # `codex resume` repeats the same meta: not an inconsistency.
                version = payload.get("cli_version")
                if isinstance(version, str) and version and version not in self.cli_versions:
                    self.cli_versions.append(version)
                    self.version = version  # records after a resume are written by that version
                self._count("session_meta", Disposition.METADATA)
            else:
                self._count("replayed/session_meta", Disposition.SKIPPED)
            return
        if self.gate_armed and not self.gate_open:
            self._count("replayed/session_meta", Disposition.SKIPPED)  # a nested fork's ancestors
            return
        if self.own_started or self.gate_open:
            raise RejectError(
                RejectCode.INCONSISTENT_SOURCE,
                f"a session_meta of another thread ({native!r}) after this thread's own records",
                line=index,
                session_hint=session_id(AGENT, self.native_id),
            )
        # The parent's meta opens its replayed history (a fork or subagent with forked context).
        self.gate_armed = True
        self._count("replayed/session_meta", Disposition.SKIPPED)

    def _lineage(self, payload: dict[str, Any]) -> None:
        parent: Any = None
        source = payload.get("source")
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict):
            spawn = source["subagent"].get("thread_spawn")
            if isinstance(spawn, dict):
                parent = spawn.get("parent_thread_id")
        if not isinstance(parent, str) or not parent:
            parent = payload.get("parent_thread_id")
        if isinstance(parent, str) and parent:
            self.parent = session_id(AGENT, parent)
            self.links.append(SessionLink(self.parent, LinkKind.SUBAGENT))
        forked = payload.get("forked_from_id")
        if isinstance(forked, str) and forked:
            self.links.append(SessionLink(session_id(AGENT, forked), LinkKind.FORK))
            self.gate_armed = True

    def _gated(self, kind: str, payload: dict[str, Any], index: int) -> bool:
        """True when the record belongs to the replayed prefix (counted here); opens the gate at the first own turn."""
        if not self.gate_armed or self.gate_open:
            return False
        sub = payload.get("type")
        marker = kind == "turn_context" or (kind == "event_msg" and sub == "task_started")
        if marker:
            self.gate_markers += 1
            minted = uuid7_ms(payload.get("turn_id"))
            if minted is None or self.created_ms is None:
                self.gate_undatable += 1
            elif minted >= self.created_ms:
                self.gate_open = True
                return False
        self.gate_records += 1
        label = f"{kind}/{sub}" if kind in ("event_msg", "response_item") and isinstance(sub, str) else kind
        self._count(f"replayed/{label}", Disposition.SKIPPED)
        if kind == "event_msg" and sub == "token_count":
            self.usage.replayed(payload, index)  # the fork's own totals continue from the parent's
        return True

    # ---- response items ----------------------------------------------------------------------------------
    def _response_item(self, payload: dict[str, Any], index: int, at: datetime | None) -> None:
        kind = payload.get("type")
        if not isinstance(kind, str):
            raise RejectError(RejectCode.BAD_SHAPE, "a response item without a type", line=index)
        assert self.tools is not None
        if kind == "message":
            self._message(payload, index, at)
        elif kind in CALL_KINDS:
            self.tools.add_call(payload, kind, index, at)
            self.own_started = True
            self._count(f"response_item/{kind}", Disposition.TOOL)
        elif kind in OUTPUT_KINDS:
            joined = self.tools.add_output(payload, at)
            self._count(f"response_item/{kind}" + ("" if joined else "/orphan"), Disposition.TOOL)
        else:
            self._count(f"response_item/{kind}", RESPONSE_ITEM_KINDS.get(kind, Disposition.SKIPPED))

    def _message(self, payload: dict[str, Any], index: int, at: datetime | None) -> None:
        role, texts, attachments = message_content(payload, index)
        if role == "assistant":
            self.own_started = True
            text = clip("\n".join(texts), self.limits)
            turn = Turn(index, Role.ASSISTANT, text, at, self.model or self.fallback_model, tuple(attachments))
            self.item_assistants.add(self._lazy(turn, "message"), self.version)
            return
        if role != "user":
            self._count(f"response_item/message/{role}", MESSAGE_ROLES.get(role, Disposition.SKIPPED))
            return
        person = person_texts(texts)
        if texts and not person and not attachments:
            self._count("response_item/message/user/contextual", Disposition.HARNESS)
            return
        self.own_started = True
        turn = self._user_turn("\n".join(person), index, at, attachments)
        self.item_users.add(self._lazy(turn, "message"), self.version)

    def _user_turn(self, text: str, index: int, at: datetime | None, attachments: list[str]) -> Turn:
        unwrapped = unwrap_ide_context(text)
        refs = tuple(attachments) + unwrapped.mentioned_files
        return Turn(index, Role.USER, clip(unwrapped.text, self.limits), at, None, refs)

    # ---- events ------------------------------------------------------------------------------------------
    def _event(self, payload: dict[str, Any], index: int, at: datetime | None) -> None:
        kind = payload.get("type")
        if not isinstance(kind, str):
            raise RejectError(RejectCode.BAD_SHAPE, "an event_msg without a type", line=index)
        assert self.tools is not None
        if kind == "user_message":
            self._event_user(payload, index, at)
        elif kind == "agent_message":
            message = payload.get("message")
            if not isinstance(message, str | None):
                raise RejectError(RejectCode.BAD_SHAPE, "an agent_message whose message is not text", line=index)
            turn = Turn(index, Role.ASSISTANT, clip(message or "", self.limits), at, self.model or self.fallback_model)
            self.event_assistants.add(self._lazy(turn, "agent_message"), self.version)
        elif kind == "token_count":
            self._token_count(payload, index, at)
        elif kind == "thread_rolled_back":
            turns = payload.get("num_turns")
            if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
                raise RejectError(RejectCode.BAD_SHAPE, "a thread_rolled_back without a num_turns count", line=index)
            self.rollbacks.append((index, turns))
            self._count("event_msg/thread_rolled_back", Disposition.METADATA)
        elif kind == "thread_name_updated":
            name = payload.get("thread_name")
            if isinstance(name, str) and name.strip():
                self.title = name
            self._count("event_msg/thread_name_updated", Disposition.METADATA)
        else:
            if EVENT_KINDS.get(kind) is Disposition.TOOL:
                self.tools.add_event(kind, payload, at)
            self._count(f"event_msg/{kind}", EVENT_KINDS.get(kind, Disposition.SKIPPED))

    def _event_user(self, payload: dict[str, Any], index: int, at: datetime | None) -> None:
        message = payload.get("message")
        if not isinstance(message, str | None):
            raise RejectError(RejectCode.BAD_SHAPE, "a user_message whose message is not text", line=index)
        self.event_users.records += 1  # the rollout has event user messages: they are the turn source
        if _named(payload.get("kind"), NON_PERSON_USER_MESSAGE_KINDS) or contextual_fragment(message or ""):
            self._count("event_msg/user_message/contextual", Disposition.HARNESS)
            return
        attachments: list[str] = []
        for image in payload.get("images") or ():
            if isinstance(image, str):
                attachments.append(data_url_reference(image))
        for local in payload.get("local_images") or ():
            if isinstance(local, str):
                attachments.append(f"image {local}")
        self.own_started = True
        turn = self._user_turn(message or "", index, at, attachments)
        self.event_users.turns.append((self._lazy(turn, "user_message"), self.version))

    def _token_count(self, payload: dict[str, Any], index: int, at: datetime | None) -> None:
        if self.usage.observe(payload, index, at, self.model or self.fallback_model):
            self.own_started = True
            self._count("event_msg/token_count", Disposition.METADATA)
        else:
            self._count("event_msg/token_count", Disposition.SKIPPED)  # info null, or the same total re-emitted

    def _turn_context(self, payload: dict[str, Any]) -> None:
        model = payload.get("model")
        if isinstance(model, str) and model:
            self.model = model
            if model not in self.models:
                self.models.append(model)
        self._where(payload)
        self._count("turn_context", Disposition.METADATA)

    # ---- the session ---------------------------------------------------------------------------------------
    def session(self) -> Session:
        """The finished session. Raises RejectError(no_conversation | missing_* | undecidable_thread)."""
        if self.mode is None:
            raise RejectError(RejectCode.NO_CONVERSATION, "an empty rollout")
        if self.native_id is None:
            raise RejectError(RejectCode.MISSING_SESSION_ID, "no session_meta in the rollout")
        sid = session_id(AGENT, self.native_id)
        undated = self.gate_undatable or (self.gate_records and not self.gate_markers)
        if self.gate_armed and not self.gate_open and undated:
            raise RejectError(
                RejectCode.UNDECIDABLE_THREAD,
                "a forked rollout whose replayed parent history never ends: no turn id dates the fork's own turns "
                f"({self.gate_markers} turn markers, {self.gate_undatable} without a UUIDv7 turn id)",
                session_hint=sid,
            )
        started = self.started_at or self.first_time
        if started is None:
            raise RejectError(RejectCode.MISSING_TIMESTAMP, "no usable time in the rollout", session_hint=sid)
        users = self._choose(self.event_users, self.item_users, "event_msg/user_message", "response_item/message/user")
        assistants = self._choose(
            self.item_assistants, self.event_assistants, "response_item/message/assistant", "event_msg/agent_message"
        )
        turns = []
        for turn, kind, version, rolled_back in self._roll_back(sorted(users + assistants, key=lambda c: c[0].index)):
            self.census[(kind + "/rolled_back" if rolled_back else kind, version, _ROLLED[rolled_back])] += 1
            if not rolled_back:
                turns.append(turn)
        assert self.tools is not None
        models = tuple(self.models) or ((self.fallback_model,) if self.fallback_model else ())
        ended = max(t for t in (self.last_time, started) if t is not None)
        return Session(
            agent=AGENT,
            session_id=sid,
            native_id=self.native_id,
            started_at=started,
            ended_at=ended,
            parent_session_id=self.parent,
            cwd=self.cwd,
            git_branch=self.git_branch,
            git_repository=self.git_repository,
            title=self.title,
            models=models,
            cli_versions=tuple(self.cli_versions),
            archived=self.archived,
            turns=tuple(turns),
            tool_calls=self.tools.tool_calls(),
            usage=tuple(self.usage.rows),
            links=tuple(self.links),
            census=self._census(),
        )

    def _census(self) -> Counter[tuple[str, str, Disposition]]:
        """The census with the usage counts that were past int64 (`extractors.bounded.numbers`)."""
        if not self.usage.out_of_range:
            return self.census
        census = Counter(self.census)
        census[OUT_OF_RANGE] += self.usage.out_of_range
        return census

    def _choose(
        self, primary: _Candidates, fallback: _Candidates, primary_kind: str, fallback_kind: str
    ) -> list[tuple[Turn, str, str]]:
        """(turn, census kind, writer version) from the primary stream if the rollout has any record of it, else from
        the fallback stream. The kept turns are counted by the caller, after the rollbacks."""
        chosen, chosen_kind, other, other_kind = (
            (primary, primary_kind, fallback, fallback_kind)
            if primary.records
            else (fallback, fallback_kind, primary, primary_kind)
        )
        kept: list[tuple[Turn, str, str]] = []
        noted = self.plan.texts if self.plan is not None else {}
        for turn, version in chosen.turns:
            if turn.text.strip() or turn.attachments or turn.index in noted:  # a noted text is never blank
                kept.append((turn, chosen_kind, version))
            else:
                self.census[(chosen_kind + "/empty", version, Disposition.SKIPPED)] += 1
        for _, version in other.turns:
            self.census[(other_kind, version, Disposition.SKIPPED)] += 1  # the duplicate copy of the same text
        return kept

    def _roll_back(self, candidates: list[tuple[Turn, str, str]]) -> list[tuple[Turn, str, str, bool]]:
        """Each candidate with whether a later `thread_rolled_back` dropped it, applied in file order."""
        dropped: set[int] = set()
        for at, count in self.rollbacks:
            users = [
                t.index for t, _, _ in candidates if t.role is Role.USER and t.index < at and t.index not in dropped
            ]
            if not users or count == 0:
                continue
            cut = users[-min(count, len(users))]
            dropped.update(t.index for t, _, _ in candidates if cut <= t.index < at)
        return [(t, kind, version, t.index in dropped) for t, kind, version in candidates]


def message_content(payload: dict[str, Any], index: int) -> tuple[str, list[str], list[str]]:
    """(role, texts, attachments) of a `message` response item. Raises RejectError(bad_shape)."""
    role = payload.get("role")
    content = payload.get("content")
    if not isinstance(role, str):
        raise RejectError(RejectCode.BAD_SHAPE, "a message without a string role", line=index)
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        raise RejectError(RejectCode.BAD_SHAPE, "a message whose content is not a list", line=index)
    texts: list[str] = []
    attachments: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise RejectError(RejectCode.BAD_SHAPE, "a message content part that is not an object", line=index)
        # a type that is not a string (a list, an object) cannot be looked up in the set: not text
        if _named(part.get("type"), _TEXT_PARTS) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "input_image":
            url = part.get("image_url")
            attachments.append(data_url_reference(url) if isinstance(url, str) else "image")
    return role, texts, attachments


def person_texts(texts: list[str]) -> list[str]:
    """The texts of a user message a person wrote: the harness's contextual fragments left out."""
    return [t for t in texts if contextual_fragment(t) is None]


def turn_text(ref: Ref, payload: dict[str, Any], limits: Limits) -> str:
    """The text of the turn `ref` notes, made again from its record's `payload` as the first pass made it."""
    if ref.producer == "message":
        role, texts, _ = message_content(payload, ref.index)
        joined = "\n".join(texts if role == "assistant" else person_texts(texts))
        return clip(joined if role == "assistant" else unwrap_ide_context(joined).text, limits)
    message = payload.get("message")
    text = message if isinstance(message, str) else ""
    return clip(unwrap_ide_context(text).text if ref.producer == "user_message" else text, limits)


def parse_rollout(
    lines: Iterable[Line], limits: Limits, *, archived: bool = False, plan: Plan | None = None
) -> Session:
    """The session of one rollout's records (with `plan`: the first pass over a big rollout, its long texts noted
    there as `Ref`s and left out of the session). Raises RejectError (see `RolloutParser`)."""
    parser = RolloutParser(limits, archived, plan=plan)
    for line in lines:
        count_glued_line(line, parser.census)
        parser.feed(line)
    return parser.session()
