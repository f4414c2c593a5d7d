"""Qwen Code sessions (QwenLM/qwen-code, a Gemini CLI fork): `~/.qwen/projects/<encoded cwd>/chats/<id>.jsonl`.

One file is one session tree of `uuid`/`parentUuid` records (docs/agents/qwen.md). Its active branch is the session;
other branches (rewinds) are sessions of their own linked FORK to it (`extractors.qwen.parse`). Records glued onto
one line are read in order by the bounded JSONL reader, as for Claude Code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl_fields
from extractors.discovery import suffix, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.qwen.parse import parse_chat_file
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("qwen"),
    display="Qwen Code",
    rank=130,
    parser_version="1",
    env=("QWEN_RUNTIME_DIR", "QWEN_HOME"),
    nightly=True,
    export=None,
    # Qwen Code talks to Qwen OAuth, DashScope or any OpenAI-compatible API; genai-prices has no Alibaba provider,
    # so model names are looked up without a hint (docs/agents/qwen.md "Tokens").
    price_provider=None,
    reasoning_billed_separately=True,  # Gemini's usageMetadata: thoughtsTokenCount is apart from candidatesTokenCount
    unknown_records="skip",  # a record `type` or `subtype` not in the tables is counted as SKIPPED
    aliases=("qwen-code", "qwencode"),
    claims=lambda path: Claim.FOLDER if ".qwen" in path.parts else None,
)

PROJECTS = "projects"
CHATS = "chats"
ARCHIVE = "archive"  # `chats/archive/<id>.jsonl`: a session the person archived


def _expand(value: str, home: Path) -> Path:
    if value == "~":
        return home
    if value.startswith(("~/", "~\\")):
        return home / value[2:]
    return Path(value)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`<runtime dir>/projects`: `QWEN_RUNTIME_DIR` when set, else `QWEN_HOME`, else `~/.qwen`
    (docs/agents/qwen.md "Where the files are"). No I/O."""
    roots: list[Path] = []
    for name in ("QWEN_RUNTIME_DIR", "QWEN_HOME"):
        value = env.get(name, "").strip()
        if value:
            roots.append(_expand(value, home) / PROJECTS)
    roots.append(home / ".qwen" / PROJECTS)
    return list(dict.fromkeys(roots))


def _is_chat_file(name: str, folders: tuple[str, ...], depth: int) -> bool:
    """`.../chats/<id>.jsonl` and `.../chats/archive/<id>.jsonl` (archived), whether the root is a projects folder,
    one project folder or a chats folder. Nothing else in those folders is a chat."""
    return suffix(name) == ".jsonl" and (folders[-1] == CHATS or folders[-2:] == (CHATS, ARCHIVE))


def discover(root: Path) -> Iterator[Source]:
    """Every chat file under `root` (a projects folder, one project folder, or a chats folder). Stats files only."""
    for path, st in walk_files(root, _is_chat_file, max_depth=3):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The sessions of one chat file: the active branch, then each other branch with something said on it. Raises
    RejectError: missing_session_id, no_conversation, inconsistent_source, undecidable_thread, missing_timestamp,
    bad_shape and every code of the bounded readers; DeferError."""
    sessions = parse_chat_file(iter_jsonl_fields(source.path, limits), limits, Path(source.path).stem)
    main = sessions[0]
    if not main.turns and not main.tool_calls and not main.links and len(sessions) == 1:
        raise RejectError(
            RejectCode.NO_CONVERSATION, "no user or assistant turn and no tool call", session_hint=main.session_id
        )
    path = Path(source.path)
    archived = path.parent.name == ARCHIVE and path.parent.parent.name == CHATS
    for session in sessions:
        yield Loaded(source, replace(session, archived=True) if archived else session)
