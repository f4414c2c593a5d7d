"""Claude.ai data export (`conversations.json`, or the export `.zip`): outcomes per conversation, streamed.

Backfill only (SPEC.nightly is False): `transcripts backfill claude_ai PATH`. A source is the `.zip` or its
`conversations.json` (a directory: the `conversations.json` and `*.zip` directly in it). The file is a JSON array of
conversations, often one line of hundreds of MB: streamed element by element (`extractors.bounded.json_array`), a
zip member without extracting it (`extractors.bounded.zip_member`), so memory is bounded by the largest
conversation. A single top-level object (one conversation as the web API returns it) is read as one conversation.
`users.json` (the account) and `projects.json` are never read (docs/agents/claude_ai.md "The export").

Complete or reject per conversation: a malformed conversation is one `Rejected` (code, detail, line = its index in
the array, offset = its first byte, session_hint = `claude_ai-<uuid>` when known) and the others load. A
conversation gives its thread as one session and each other branch as another (see `parse`).
"""

from __future__ import annotations

import zipfile
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
# Files only a Claude.ai export holds beside its conversations.json (a ChatGPT export has `user.json`, singular).
OWN_FILES = ("users.json", "projects.json")


def _zip_names(path: Path) -> set[str]:
    """The member base names at the top of a zip or under its single top folder; empty when it is no zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return set()
    return {n.split("/")[-1] for n in names if n.count("/") <= 1}


def _claims(path: Path) -> Claim | None:
    """An export's `conversations.json` with `users.json` or `projects.json` beside it, a folder holding them, or a
    `.zip` holding them: stronger than the ChatGPT reader's claim on any `.json` / `.zip`, which it then leaves."""
    try:
        if path.is_dir():
            here = path
        elif path.name.lower() == EXPORT_MEMBER:
            here = path.parent
        elif path.name.lower().endswith(".zip") and path.is_file():
            names = _zip_names(path)
            return Claim.FOLDER if EXPORT_MEMBER in names and names.intersection(OWN_FILES) else None
        else:
            return None
        if (here / EXPORT_MEMBER).is_file() and any((here / name).is_file() for name in OWN_FILES):
            return Claim.FOLDER
    except OSError:
        return None
    return None


SPEC = AgentSpec(
    name=Agent("claude_ai"),
    display="Claude.ai",
    rank=120,
    parser_version="1",
    env=(),
    nightly=False,  # exports are loaded by `transcripts backfill claude_ai PATH`, never discovered under $HOME
    export=f"the export's .zip or its {EXPORT_MEMBER}",
    price_provider="anthropic",  # exports record no usage; the hint is there for completeness
    reasoning_billed_separately=False,
    unknown_records="skip",  # a content block of a new type is counted (SKIPPED), never a rejection
    aliases=("claude-ai", "claudeai", "claude.ai"),
    claims=_claims,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """None: an export is given explicitly."""
    return []


def discover(root: Path) -> Iterator[Source]:
    """The export at `root`, or the `conversations.json` / `*.zip` directly in a folder (extractors/export.py)."""
    return export.discover(SPEC.name, root)


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The outcomes of each conversation of the export: its thread, then its other branches (extractors/export.py
    reads the export)."""
    return export.read(source, limits, outcomes_of)


def outcomes_of(source: Source, element: Element, limits: Limits) -> list[Outcome]:
    """Loaded sessions, or one Rejected for this conversation (an oversized one named from the fields around it)."""
    from extractors.claude_ai.parse import native_id, parse_conversation

    if element.problem is not None:
        native = native_id(element.top_fields)
        hint = ids.session_id(SPEC.name, native) if native else None
        return [Rejected(source, element.problem.code, element.problem.detail, element.index, element.offset, hint)]
    try:
        return [Loaded(source, session) for session in parse_conversation(element.value, limits)]
    except RejectError as exc:  # this conversation only: the next one is read
        return [Rejected(source, exc.code, exc.detail, element.index, element.offset, exc.session_hint)]
