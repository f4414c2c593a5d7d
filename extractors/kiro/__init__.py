"""Kiro CLI (the Amazon Q Developer CLI's successor): `data.sqlite3` (SQLite, read-only), one outcome per
conversation; Kiro CLI's JSONL session files (`~/.kiro/sessions/cli/<id>.jsonl`, peer-only shape: `jsonl.py`); and a
conversation saved with `/save` (the same ConversationState JSON), when given explicitly.

Units: each `data.sqlite3` directly in a root (fingerprint = database + `-wal`): Kiro CLI's own data directory and
the Amazon Q Developer CLI's, whose `conversations` table Kiro CLI inherited. Parse rules: `extractors/kiro/parse.py`;
the tables: `extractors/kiro/tables.py`; what is confirmed and what is not: docs/agents/kiro.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, iter_jsonl, read_json_document, sqlite_db
from extractors.discovery import sidecar_stat, skip, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.kiro import db, jsonl
from extractors.kiro.parse import RowFacts, build_session
from extractors.kiro.tables import AGENT
from extractors.model import Disposition, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim
from extractors.timeutil import from_epoch_seconds

# The data folders' names (docs/agents/kiro.md "Where the files are"): Kiro CLI's, then the Amazon Q CLI's.
DATA_FOLDERS = ("kiro-cli", "amazon-q")


def claims(path: Path) -> Claim | None:
    """`data.sqlite3` inside a `kiro-cli` or `amazon-q` folder, a `.jsonl` in `.kiro/sessions/cli`, are ours; a saved
    `.json` needs `--format kiro`."""
    if path.name == db.DATABASE_NAME and path.parent.name in DATA_FOLDERS:
        return Claim.FOLDER
    if path.suffix == ".jsonl" and path.parent.parts[-3:] == (".kiro", "sessions", "cli"):
        return Claim.FOLDER
    return None


SPEC = AgentSpec(
    name=AGENT,
    display="Kiro CLI",
    rank=150,
    parser_version="1",
    env=("XDG_DATA_HOME",),
    nightly=True,
    export=None,
    price_provider=None,  # no token counts are read (docs/agents/kiro.md "Tokens")
    reasoning_billed_separately=False,
    # A ConversationState variant it does not know rejects the conversation (unsupported_format): serde itself
    # refuses an unknown variant, so guessing at one would store what Kiro would not even load.
    unknown_records="reject",
    aliases=("kiro-cli", "amazon-q", "q-cli"),
    claims=claims,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """The Rust `dirs::data_local_dir()` joined with `kiro-cli` / `amazon-q`: `$XDG_DATA_HOME` (default
    `~/.local/share`) on Linux, `~/Library/Application Support` on macOS; and `~/.kiro/sessions/cli` of the JSONL
    session files. No I/O: the roots need not exist."""
    data_home = env.get("XDG_DATA_HOME")
    linux = Path(data_home) if data_home else home / ".local" / "share"
    mac = home / "Library" / "Application Support"
    databases = [base / folder for base in (linux, mac) for folder in DATA_FOLDERS]
    return [*databases, home / ".kiro" / "sessions" / "cli"]


def _is_database(name: str, folders: tuple[str, ...], depth: int) -> bool:
    return name == db.DATABASE_NAME and (depth == 0 or folders[-1] in DATA_FOLDERS)


def _is_session_file(name: str, _folders: tuple[str, ...], depth: int) -> bool:
    return depth == 0 and name.endswith(".jsonl")


def discover(root: Path) -> Iterator[Source]:
    """`data.sqlite3` directly in `root`, or in its `kiro-cli` / `amazon-q` folder (a root given as the data home,
    `~/.local/share`, finds both); in a `sessions/cli` folder, each `<id>.jsonl` (with its `<id>.json` in the
    fingerprint). Stat only. A unit that vanishes while it is listed is skipped and counted, never an error."""
    found = walk_files(root, _is_database, max_depth=1, skip_dir=lambda name, _f, _d: name not in DATA_FOLDERS)
    for path, _ in found:
        try:
            size, mtime = sqlite_db.fingerprint(Path(path))
        except OSError as exc:
            skip("vanished" if isinstance(exc, FileNotFoundError) else "unreadable", path, exc.strerror or "")
            continue
        yield Source(SPEC.name, str(path), size, mtime, str(root), "database")
    if root.name != "cli" or root.parent.name != "sessions":
        return
    for path, st in walk_files(root, _is_session_file, max_depth=0):
        size, mtime = st.st_size, st.st_mtime_ns
        side = sidecar_stat(str(jsonl.sidecar_of(Path(path))))  # None: no sidecar, the file alone
        if side is not None:
            size, mtime = size + side.st_size, max(mtime, side.st_mtime_ns)
        yield Source(SPEC.name, str(path), size, mtime, str(root), "jsonl")


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """Outcomes of one unit: per conversation for a database, the one conversation of a saved JSON file.

    Raises RejectError / DeferError for a unit that cannot be read at all (see db.read_database)."""
    if source.path.endswith(".json"):
        yield _read_saved(source, limits)
    elif source.path.endswith(".jsonl"):
        path = Path(source.path)
        yield Loaded(source, jsonl.build_jsonl_session(path, iter_jsonl(path, limits), limits))
    else:
        yield from db.read_database(source, limits)


def _read_saved(source: Source, limits: Limits) -> Outcome:
    """A `/save`d conversation: the ConversationState alone. With no time in it (older builds wrote none), its
    file's mtime is the start, marked inferred (docs/agents/kiro.md "Times")."""
    try:
        st = os.stat(source.path)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot stat: {exc.strerror}") from exc
    if st.st_size > limits.max_document_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"{st.st_size} bytes, over max_document_bytes={limits.max_document_bytes}",
        )
    state = read_json_document(source.path, limits, stat_result=st)
    facts = RowFacts(inferred_start=from_epoch_seconds(st.st_mtime_ns / 1e9))
    facts.census[("file/saved", "", Disposition.METADATA)] += 1
    return Loaded(source, build_session(state, facts, limits))
