"""Amp (Sourcegraph): one JSON document per thread, `~/.local/share/amp/threads/T-<id>.json`.

The unit is the thread file; Amp rewrites it whole on each update (docs/agents/amp.md "Where the files are"). It is
stat'ed, read within the limits with `read_json_document` (given that stat) and stat'ed again: a file that moved
meanwhile is deferred (changed_during_read), as a live JSONL tail is; a document cut short and fresh is deferred
(write_in_progress) by the document reader itself. Turns, tool calls and usage come from the messages (parse.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, read_json_document
from extractors.discovery import walk_files
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim

from . import tables
from .parse import parse_thread

# A thread file's name: `T-` and the thread id (a UUID in every capture seen), `.json`.
THREAD_FILE = re.compile(r"T-[A-Za-z0-9_-]+\.json")


def claims(path: Path) -> Claim | None:
    """`T-<id>.json` under an `amp/threads` folder is a thread of Amp's; a `T-<id>.json` alone claims by name."""
    if THREAD_FILE.fullmatch(path.name) is None:
        return Claim.FOLDER if path.name == "threads" and path.parent.name == "amp" else None
    return Claim.NAME


SPEC = AgentSpec(
    name=Agent("amp"),
    display="Amp",
    rank=170,
    parser_version="1",
    env=("XDG_DATA_HOME",),
    nightly=True,
    export=None,
    price_provider=None,  # Anthropic and OpenAI models (and others): each usage row is priced by its model's provider
    reasoning_billed_separately=False,
    unknown_records="skip",  # a block of a new type, or a message of an unknown role, is counted as SKIPPED
    aliases=("ampcode", "amp-code", "sourcegraph-amp"),
    claims=claims,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`$XDG_DATA_HOME/amp/threads` when set to an absolute path, else `~/.local/share/amp/threads` (the same on
    macOS: docs/agents/amp.md "Where the files are"). No I/O: the roots need not exist."""
    data_home = env.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home) if data_home.startswith("/") else home / ".local" / "share"
    return [base / "amp" / "threads"]


def _is_thread(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return THREAD_FILE.fullmatch(name) is not None


def discover(root: Path) -> Iterator[Source]:
    """`T-<id>.json` files under `root` (the threads folder, or any folder of copied threads, up to three levels).
    Stat only."""
    for path, st in walk_files(root, _is_thread, max_depth=3):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per thread file. Raises RejectError: every code of `read_json_document` (invalid_json,
    invalid_utf8, truncated_tail, limit_exceeded, source_unreadable), and the parse's (bad_shape,
    inconsistent_source, no_conversation, missing_timestamp); DeferError (the file changed while it was read, or
    ends early and is fresh)."""
    stem = os.path.basename(source.path).removesuffix(".json")
    hint = session_id(SPEC.name, stem)
    try:
        before = os.stat(source.path)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot stat: {exc.strerror}", session_hint=hint) from exc
    if before.st_size > limits.max_document_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"thread is {before.st_size} bytes, over max_document_bytes={limits.max_document_bytes}",
            session_hint=hint,
        )
    try:
        document = read_json_document(source.path, limits, stat_result=before)
    except RejectError as exc:
        exc.session_hint = hint
        raise
    try:
        after = os.stat(source.path)
    except OSError as exc:
        raise DeferError(DeferCode.CHANGED_DURING_READ, "the thread file went away while it was read") from exc
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise DeferError(DeferCode.CHANGED_DURING_READ, "the thread file was rewritten while it was read")
    yield Loaded(source, parse_thread(document, stem, limits))


__all__ = ["SPEC", "default_roots", "discover", "read", "tables"]
