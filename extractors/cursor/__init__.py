"""Cursor agent transcripts: `~/.cursor/projects/<encoded cwd>/agent-transcripts/` (docs/agents/cursor.md).

One file is one session, in one of four layouts under `agent-transcripts/`:
- `<uuid>/<uuid>.jsonl` (current; also `<uuid>/transcript.jsonl`) and flat `<uuid>.jsonl`: session `cursor-<uuid>`;
- `<parent uuid>/subagents/<child uuid>.jsonl`: a subagent session `cursor-<child uuid>`, linked to
  `cursor-<parent uuid>` (the folder it sits in is the only link: the parent's `Subagent` call carries no id);
- flat `<uuid>.txt`: the older plain-text form, read only when no `.jsonl` of the same session exists.
Not sources: `terminals/`, `mcps/`, `worker.log`, anything outside `agent-transcripts/`, the `empty-window` project,
and the CLI's `~/.cursor/chats/` store (`store.db`, `meta.json`: not read yet, docs/agents/cursor.md "Not read").
The rules are the tables in `extractors.cursor.tables`; the parse is `extractors.cursor.parse` (pure).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl_fields
from extractors.bounded.text_lines import iter_text_lines
from extractors.cursor import tables
from extractors.cursor.parse import KNOWN_ROWS, Facts, parse_jsonl, parse_txt
from extractors.discovery import suffix, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim
from extractors.timeutil import from_epoch_seconds

SPEC = AgentSpec(
    name=Agent("cursor"),
    display="Cursor",
    rank=70,
    parser_version="1",
    env=("CURSOR_CONFIG_DIR",),
    nightly=True,
    export=None,
    price_provider=None,  # the transcripts carry no model and no usage: nothing to price
    reasoning_billed_separately=False,
    unknown_records="skip",  # an unknown `type` or `role` is counted as SKIPPED under its own name
    aliases=("cursor-agent",),
    # Cursor's own folders. A Claude Code file never lies under them; one that is given anyway is rejected on its
    # first record (a top-level `type` user/assistant and no `role`), naming --format claude.
    claims=lambda path: Claim.FOLDER if ".cursor" in path.parts or tables.TRANSCRIPTS_DIR in path.parts else None,
)

PROJECTS = "projects"
MAX_DEPTH = 4  # <encoded cwd>/agent-transcripts/<uuid>/subagents/


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`~/.cursor/projects`; with `CURSOR_CONFIG_DIR` set, `$CURSOR_CONFIG_DIR/projects` first and `~/.cursor/projects`
    still (the variable moves the CLI's config; that it moves the transcripts is not confirmed, and the IDE writes
    under `~/.cursor` either way: docs/agents/cursor.md "Files and folders"). No I/O."""
    default = home / ".cursor" / PROJECTS
    value = env.get("CURSOR_CONFIG_DIR", "").strip()
    if not value:
        return [default]
    configured = home / value[2:] if value.startswith("~/") else home if value == "~" else Path(value)
    moved = configured / PROJECTS
    return [moved] if moved == default else [moved, default]


def _below_transcripts(folders: tuple[str, ...]) -> int | None:
    """How many folders lie between the nearest `agent-transcripts` folder and here (0: in it), or None."""
    # once per folder and file met: three tests, no loop (`range`, `min` and the loop cost 4x as much)
    n, name = len(folders), tables.TRANSCRIPTS_DIR
    if n and folders[-1] == name:
        return 0
    if n > 1 and folders[-2] == name:
        return 1
    if n > 2 and folders[-3] == name:
        return 2
    return None


def is_transcript(name: str, folders: tuple[str, ...], _depth: int) -> bool:
    """A session file at its place below `agent-transcripts/` (from names alone; `discovery.NameTest`)."""
    k = _below_transcripts(folders)
    if k == 0:
        return suffix(name) in (".jsonl", ".txt")
    if k == 1:
        return name.endswith(".jsonl") and (name[: -len(".jsonl")] == folders[-1] or name == tables.NESTED_NAME)
    if k == 2:
        return folders[-1] == tables.SUBAGENTS_DIR and suffix(name) == ".jsonl"
    return False


def _pruned(name: str, folders: tuple[str, ...], depth: int) -> bool:
    k = _below_transcripts(folders)
    if k is None:  # a project folder, then only its agent-transcripts/ (not terminals/, mcps/, ...)
        if name == tables.TRANSCRIPTS_DIR:
            return False
        return depth > 1 or name in tables.SKIPPED_PROJECTS
    if k == 0:
        return False  # <uuid>/ folders
    return k > 1 or name != tables.SUBAGENTS_DIR


def discover(root: Path) -> Iterator[Source]:
    """Transcripts under `root`: a projects folder, `~/.cursor` (its `projects/`), a project folder or an
    `agent-transcripts` folder. A `.txt` is left out when the same session has a `.jsonl`. Stats only."""
    base = root / PROJECTS if root.name != PROJECTS and (root / PROJECTS).is_dir() else root
    found = list(walk_files(base, is_transcript, max_depth=MAX_DEPTH, skip_dir=_pruned))
    # Keys only when there is a .txt to weigh: most homes hold none, and a key costs more than the file's stat.
    texts = any(path.endswith(".txt") for path, _ in found)
    with_jsonl = {_session_key(path) for path, _ in found if path.endswith(".jsonl")} if texts else set()
    origin = str(root)
    for path, st in found:
        if texts and path.endswith(".txt") and _session_key(path) in with_jsonl:
            continue  # the older form of a session the JSONL holds whole (AV cursor_provider.go prefers .jsonl)
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, origin)


def _session_key(path: str) -> tuple[str, str]:
    """(the agent-transcripts folder, the native id) of a transcript path."""
    native, parent = _identity(path)
    folder = os.path.dirname(path)
    while os.path.basename(folder) != tables.TRANSCRIPTS_DIR and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder, f"{parent}/{native}" if parent else native


def _identity(path: str) -> tuple[str, str | None]:
    """(native id, parent native id or None) from a transcript's place: its name, its folder's and that folder's
    folder's, as `Path` gives them (a path of fewer parts, or with a `.` part, is read through `Path`)."""
    parts = path.rsplit("/", 3)
    if len(parts) == 4 and "//" not in path:  # what the two splits give a path of no empty part (a third of the cost)
        _, grand, folder, name = parts
    else:
        head, name = os.path.split(path)
        head, folder = os.path.split(head)
        grand = os.path.basename(head)
    if not folder or "." in (folder, grand):
        p = Path(path)
        name, folder, grand = p.name, p.parent.name, p.parent.parent.name
    native = folder if name == tables.NESTED_NAME else name[: len(name) - len(suffix(name))]  # `Path.stem`
    parent = grand if folder == tables.SUBAGENTS_DIR else None
    return native, parent or None


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per transcript. Raises RejectError: no_conversation (nothing said and no tool call),
    unsupported_format (a Claude Code file), bad_shape, missing_timestamp (no tag and an unusable mtime), and every
    code of the bounded readers; DeferError."""
    path = source.path
    native, parent = _identity(path)
    hint = session_id(SPEC.name, native)
    if not native:
        raise RejectError(RejectCode.MISSING_SESSION_ID, "a transcript file without a name")
    mtime = from_epoch_seconds(source.mtime_ns // 10**9)  # the start only when no <timestamp> tag gives one
    if suffix(os.path.basename(path)) == ".txt":
        facts = Facts(native, parent, mtime, "txt")
        lines = ((line.index, line.text) for line in iter_text_lines(path, limits))
        session = parse_txt(lines, limits, facts)
    else:
        session = parse_jsonl(iter_jsonl_fields(path, limits, known=KNOWN_ROWS), limits, Facts(native, parent, mtime))
    if not session.turns and not session.tool_calls:
        raise RejectError(
            RejectCode.NO_CONVERSATION,
            "no user or assistant turn and no tool call in the transcript",
            session_hint=hint,
        )
    yield Loaded(source, session)
