"""ChatGPT data export (`conversations.json`, or the export `.zip`): one outcome per conversation, streamed.

Backfill only (SPEC.nightly is False): the path is given explicitly. A source is the `.zip` or the `conversations.json`
(a directory: the `conversations.json` and `*.zip` directly in it). The file is a JSON array of conversations,
often one line of hundreds of MB: it is streamed element by element (`extractors.bounded.json_array`), a zip member
without extracting it (`extractors.bounded.zip_member`), so memory is bounded by the largest conversation. A single
top-level object (a per-conversation API dump) is read as one conversation.

Complete or reject per conversation: a malformed conversation is one `Rejected` (code, detail, line = its index in
the array, offset = its first byte in conversations.json, session_hint = `chatgpt-<id>` when known) and the
others load. A file that is not a JSON array/object, or whose structure breaks (invalid JSON, truncated), is one
rejection for the rest of the source; conversations yielded before stay valid. What is a turn: see `records`;
the thread and the turn index: see `parse`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from extractors import export, ids
from extractors.bounded import Limits
from extractors.errors import RejectError
from extractors.model import Agent, Loaded, Outcome, Rejected, Source
from extractors.spec import AgentSpec, Claim

if TYPE_CHECKING:
    from extractors.bounded.json_array import Element


EXPORT_MEMBER = export.MEMBER


def _claims(path: Path) -> Claim | None:
    """An export's file: `conversations.json`, a `.zip`, or any `.json` that is not under Gemini CLI's folder."""
    name = path.name.lower()
    if (
        name == "conversations.json"
        or name.endswith(".zip")
        or (name.endswith(".json") and ".gemini" not in path.as_posix())
    ):
        return Claim.EXTENSION
    return None


SPEC = AgentSpec(
    name=Agent("chatgpt"),
    display="ChatGPT",
    rank=60,
    parser_version="2",
    env=(),
    nightly=False,  # exports are loaded by `transcripts backfill chatgpt PATH`, never discovered under $HOME
    export=f"the export's .zip or its {EXPORT_MEMBER}",
    price_provider="openai",  # exports record no usage; the hint is there for completeness
    reasoning_billed_separately=False,
    unknown_records="skip",  # a message of a new kind is counted as `unknown` (SKIPPED), never a rejection
    claims=_claims,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """None: an export is given explicitly."""
    return []


def discover(root: Path) -> Iterator[Source]:
    """The export at `root`, or the `conversations.json` / `*.zip` directly in a folder (extractors/export.py)."""
    return export.discover(SPEC.name, root)


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per conversation of the export (extractors/export.py reads it)."""
    return export.read(source, limits, lambda s, e, lim: (outcome_of(s, e, lim),))


def outcome_of(source: Source, element: Element, limits: Limits) -> Outcome:
    """Loaded, or Rejected for this one conversation (an oversized one is named from the fields read around it)."""
    from extractors.chatgpt.parse import native_id, parse_conversation

    if element.problem is not None:
        native = native_id(element.top_fields)
        hint = ids.session_id(SPEC.name, native) if native else None
        return Rejected(source, element.problem.code, element.problem.detail, element.index, element.offset, hint)
    try:
        return Loaded(source, parse_conversation(element.value, limits))
    except RejectError as exc:  # this conversation only: the next one is read
        return Rejected(source, exc.code, exc.detail, element.index, element.offset, exc.session_hint)
