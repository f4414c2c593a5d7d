"""Pi coding agent sessions (badlogic/pi-mono): `$PI_CODING_AGENT_DIR/sessions/--<cwd>--/<ISO time>_<id>.jsonl`.

One file is one session tree (docs/agents/pi.md). Its active branch is the session; other branches are sessions of
their own linked FORK to it; a forked file's copies of its parent's entries are skipped (`extractors.pi.parse`).
The forks OMP (`~/.omp/agent/sessions`) and Prime (`~/.prime/agent/sessions`) write the same files and are read
from their default folders too (docs/agents/pi.md "Where the files are").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl
from extractors.discovery import suffix, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.pi.parse import parse_session_file
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("pi"),
    display="Pi",
    rank=90,
    parser_version="1",
    env=("PI_CODING_AGENT_DIR",),
    nightly=True,
    export=None,
    price_provider=None,  # pi talks to any provider and writes its own cost per response (`usage.cost.total`)
    reasoning_billed_separately=False,
    unknown_records="skip",  # an entry `type` or message `role` not in the tables is counted as SKIPPED
    aliases=("pi-agent", "pi-coding-agent"),
    claims=lambda path: Claim.FOLDER if ".pi" in path.parts else None,
)

SESSIONS = "sessions"
# The agent folders of pi's forks, which write pi's session files (docs/agents/pi.md "Where the files are").
FORK_AGENT_DIRS = (".omp/agent", ".prime/agent")
# `sessions/--<cwd>--/<file>.jsonl`: the files one folder down, in folders named `--...`; a `--session-dir` folder
# (or a `--<cwd>--` folder given as the root) holds them directly. Deeper files are OMP subagents and extension
# artifacts (`<parent stem>/<agent>.jsonl`, `subagent-artifacts/`), not read.
_CWD_FOLDER = "--"


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`<agent dir>/sessions` for pi (`PI_CODING_AGENT_DIR`, default `~/.pi/agent`), then OMP's and Prime's. No I/O."""
    value = env.get("PI_CODING_AGENT_DIR", "").strip()
    if not value:
        agent_dir = home / ".pi" / "agent"
    elif value == "~":
        agent_dir = home
    elif value.startswith("~/"):
        agent_dir = home / value[2:]
    else:
        agent_dir = Path(value)
    return [agent_dir / SESSIONS, *(home / fork / SESSIONS for fork in FORK_AGENT_DIRS)]


def _is_session_file(name: str, folders: tuple[str, ...], depth: int) -> bool:
    if suffix(name) != ".jsonl":
        return False
    return depth == 0 or folders[-1].startswith(_CWD_FOLDER)


def discover(root: Path) -> Iterator[Source]:
    """Every session file under `root` (a sessions folder, a `--session-dir` folder or one `--<cwd>--` folder).
    Stats files only; never opens them."""
    for path, st in walk_files(root, _is_session_file, max_depth=1, quiet=True):
        yield Source(SPEC.name, path, st.st_size, st.st_mtime_ns, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The sessions of one file: the active branch, then each other branch with something said on it. Raises
    RejectError: missing_session_id (no header first), no_conversation (an empty file, or a header alone),
    inconsistent_source, undecidable_thread, missing_timestamp, bad_shape and every code of the bounded readers;
    DeferError."""
    sessions = parse_session_file(iter_jsonl(source.path, limits), limits)
    main = sessions[0]
    if not main.turns and not main.tool_calls and not main.links and len(sessions) == 1:
        # A header with nothing said (pi writes a file at the first response, so an odd file): nothing to load. A
        # fork never continued keeps its link and loads without turns, as a Codex fork does.
        raise RejectError(
            RejectCode.NO_CONVERSATION, "no user or assistant turn and no tool call", session_hint=main.session_id
        )
    for session in sessions:
        yield Loaded(source, session)
