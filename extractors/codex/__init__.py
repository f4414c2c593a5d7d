"""Codex CLI rollouts (`$CODEX_HOME/sessions/**/rollout-*.jsonl`, `archived_sessions/`): discovery and reading.

The record tables and the turn rule are in `extractors.codex.tables`; the parse (identity, fork replay gate, usage)
in `extractors.codex.parse`; tool calls and the `is_error` rule in `extractors.codex.tools`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl
from extractors.discovery import walk_files
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Source, Streamed
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("codex"),
    display="Codex",
    rank=20,
    parser_version="3",  # 3: sessions.git_repository from session_meta.git.repository_url (issue 13)
    env=("CODEX_HOME",),
    nightly=True,
    export=None,
    price_provider="openai",
    reasoning_billed_separately=False,  # output_tokens include reasoning_output_tokens
    unknown_records="skip",  # a new RolloutItem, event or item kind is counted as SKIPPED, never a rejection
    claims=lambda path: (
        Claim.NAME if path.name.lower().startswith("rollout-") else Claim.FOLDER if ".codex" in path.parts else None
    ),
)

SESSIONS = "sessions"
ARCHIVED = "archived_sessions"
# `rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl`; older flat `rollout-<uuid>.jsonl`.
_ROLLOUT_NAME = re.compile(
    r"^rollout-(?:(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})T\d{2}-\d{2}-\d{2}-)?"
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$"
)
# Dated layout: sessions/YYYY/MM/DD/rollout-*.jsonl (depth 3); a little slack for other layouts.
_MAX_DEPTH = 4


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`<codex home>/sessions` and `<codex home>/archived_sessions` for each home in `CODEX_HOME` (a comma list;
    default `~/.codex`). No I/O."""
    raw = env.get("CODEX_HOME", "")
    homes = [part.strip() for part in raw.split(",") if part.strip()]
    resolved = [_expand(part, home) for part in homes] or [home / ".codex"]
    roots: list[Path] = []
    for codex_home in resolved:
        for name in (SESSIONS, ARCHIVED):
            if codex_home / name not in roots:
                roots.append(codex_home / name)
    return roots


def _expand(value: str, home: Path) -> Path:
    if value == "~":
        return home
    if value.startswith("~/"):
        return home / value[2:]
    return Path(value)


def _is_rollout(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return name.startswith("rollout-") and name.endswith(".jsonl")


def discover(root: Path) -> Iterator[Source]:
    """Every `rollout-*.jsonl` under `root`, dated folders and the older flat layout alike. Never opens a file."""
    for path, st in walk_files(root, _is_rollout, max_depth=_MAX_DEPTH, quiet=True):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome: the rollout's session. Raises RejectError (duplicate for an archived copy of a live rollout,
    and every code of `parse_rollout` / `iter_jsonl`) and DeferError."""
    archived = _archived(source)
    from extractors.codex.parse import parse_rollout  # here: `status` and discovery need no parser

    session = parse_rollout(iter_jsonl(source.path, limits), limits, archived=archived)
    yield Loaded(source, session)


def read_streaming(source: Source, limits: Limits) -> Iterator[Outcome | Streamed]:
    """`read`, except that a rollout over `stream_source_bytes` is read in two passes (`extractors.codex.stream`):
    one `Streamed` whose parts are read as they are iterated. Raises what `read` raises; iterating the parts may
    raise DeferError(changed_during_read) too."""
    if not limits.read_twice(source.size):
        yield from read(source, limits)
        return
    archived = _archived(source)
    from extractors.codex.stream import read_in_two_passes

    yield read_in_two_passes(source, limits, archived=archived)


def _archived(source: Source) -> bool:
    """Whether the rollout is an archived one. Raises RejectError(duplicate) for an archived copy of a live one."""
    path = Path(source.path)
    archive = _archive_dir(path)
    if archive is not None:
        live = _live_copy(path, archive)
        if live is not None:
            raise RejectError(
                RejectCode.DUPLICATE,
                f"the same rollout is in sessions/ ({live}); that copy is loaded",
                session_hint=_hint(path),
            )
    return archive is not None


def _archive_dir(path: Path) -> Path | None:
    """The `archived_sessions` folder `path` lies in, if any."""
    for parent in path.parents:
        if parent.name == ARCHIVED:
            return parent
    return None


def _live_copy(path: Path, archive: Path) -> Path | None:
    """The same rollout under the sibling `sessions/`: same relative path, its dated folder, or flat. Stats only."""
    live_root = archive.parent / SESSIONS
    candidates = [live_root / path.relative_to(archive)]
    match = _ROLLOUT_NAME.match(path.name)
    if match and match.group("y"):
        candidates.append(live_root / match.group("y") / match.group("m") / match.group("d") / path.name)
    candidates.append(live_root / path.name)
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    return None


def _hint(path: Path) -> str | None:
    match = _ROLLOUT_NAME.match(path.name)
    return session_id(SPEC.name, match.group("uuid")) if match else None
