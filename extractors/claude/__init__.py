"""Claude Code transcripts: `~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl` and their subagent files.

The turn rules are the tables in `extractors.claude.tables` (docs/agents/claude.md); the parse is
`extractors.claude.parse` (per line) and `extractors.claude.assembly` (per file). One file is one session:
- `<encoded-cwd>/<sessionId>.jsonl`: a main session, id `claude-<sessionId>`;
- `<encoded-cwd>/<sessionId>/subagents/agent-<agentId>.jsonl` (v2.1) and the older flat
  `<encoded-cwd>/agent-<agentId>.jsonl` (v2.0): a subagent session `claude-<parent sessionId>-agent-<agentId>`,
  linked to its parent (`agent-acompact-*`: a compaction helper run, linked as COMPACTION).
Not sources: `agent-<id>.meta.json` companions, `history.jsonl` (typed-prompt history), anything else.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl
from extractors.claude import tables
from extractors.discovery import walk_files
from extractors.model import Agent, Loaded, Outcome, Source, Streamed
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("claude"),
    display="Claude Code",
    rank=10,
    # 2: queued prompts, a command recorded twice, glued lines (issue 9); 3: a response without requestId is a
    # contiguous run of its message.id (issue 13)
    parser_version="3",
    env=("CLAUDE_CONFIG_DIR",),
    nightly=True,
    export=None,
    price_provider="anthropic",
    reasoning_billed_separately=False,  # output_tokens include thinking
    unknown_records="skip",  # a new record type is SKIPPED under its own name (`tables`), never a rejection
    aliases=("claude-code", "claude_code"),
    claims=lambda path: Claim.FOLDER if ".claude" in path.parts else None,
)

# Folder depth below a root (a root holds `<encoded-cwd>` folders): main and flat subagent files sit at depth 1
# (`<encoded-cwd>/x.jsonl`); depth 0 and 2 are accepted too, for a root given one level off (the shared fixtures
# group captures as `<repo>/<encoded-cwd>/`). Below that only `…/<sessionId>/subagents/` is entered.
MAX_SESSION_DEPTH = 2
MAX_WALK_DEPTH = MAX_SESSION_DEPTH + 2  # `<sessionId>/subagents/` below the deepest session folder


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`$CLAUDE_CONFIG_DIR/projects` for each entry of that comma list, else `~/.claude/projects` and
    `~/.config/claude/projects`. No I/O: the roots need not exist."""
    configured = [entry.strip() for entry in env.get("CLAUDE_CONFIG_DIR", "").split(",") if entry.strip()]
    if configured:
        return [_expand(entry, home) / "projects" for entry in configured]
    return [home / ".claude" / "projects", home / ".config" / "claude" / "projects"]


def _expand(entry: str, home: Path) -> Path:
    if entry == "~":
        return home
    if entry.startswith("~/"):
        return home / entry[2:]
    return Path(entry)


def is_session_name(name: str, folders: tuple[str, ...], depth: int) -> bool:
    """True for a main session or subagent file at its place: `name` in the folder whose path parts are `folders`,
    `depth` folders below the root (decided from the names alone; `discovery.NameTest`)."""
    if not name.endswith(".jsonl") or name in tables.NOT_SESSIONS:
        return False
    if folders and folders[-1] == tables.SUBAGENT_DIR:
        return name.startswith(tables.AGENT_FILE_PREFIX) and depth <= MAX_WALK_DEPTH
    return depth <= MAX_SESSION_DEPTH


def _not_sessions(name: str, _folders: tuple[str, ...], depth: int) -> bool:
    # `<sessionId>/` folders sit beside the deepest session files; below them only `subagents/`.
    return depth > MAX_SESSION_DEPTH + 1 and name != tables.SUBAGENT_DIR


def discover(root: Path) -> Iterator[Source]:
    """Every session file under `root` with its size and mtime, sorted by path; never opens a file."""
    top = os.fspath(root)
    for path, st in walk_files(root, is_session_name, max_depth=MAX_WALK_DEPTH, skip_dir=_not_sessions, quiet=True):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, top)


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome for the one session in the file. Raises RejectError (invalid_json, invalid_utf8, bad_shape,
    limit_exceeded, truncated_tail, no_conversation, missing_session_id, inconsistent_source, missing_timestamp,
    source_unreadable) and DeferError (write_in_progress, changed_during_read)."""
    from extractors.claude.parse import Parser  # here, not at the top: `status` and discovery need no parser
    from extractors.claude.records import layout_of

    parser = Parser(layout_of(Path(source.path)), limits)
    for line in iter_jsonl(source.path, limits):
        parser.feed(line)
    yield Loaded(source, parser.finish())


def read_streaming(source: Source, limits: Limits) -> Iterator[Outcome | Streamed]:
    """`read`, except that a file over `stream_source_bytes` is read in two passes (`extractors.claude.stream`):
    one `Streamed` whose parts are read as they are iterated. Raises what `read` raises; iterating the parts may
    raise DeferError(changed_during_read) too."""
    if not limits.read_twice(source.size):
        yield from read(source, limits)
        return
    from extractors.claude.stream import read_in_two_passes

    yield read_in_two_passes(source, limits)
