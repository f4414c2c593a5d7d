"""Goose (block/goose): `sessions.db` (SQLite, read-only, one snapshot), one outcome per session.

Units: the database `<data dir>/sessions/sessions.db` (fingerprint = database + `-wal`), and each legacy
`<id>.jsonl` beside it (`extractors/goose/legacy.py`: a session also in the database is loaded from there). Parse
rules: `extractors/goose/parse.py`; columns by version: `extractors/goose/tables.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, sqlite_db
from extractors.discovery import skip, walk_files
from extractors.goose import db, legacy
from extractors.model import Agent, Outcome, Source
from extractors.spec import AgentSpec

SPEC = AgentSpec(
    name=Agent("goose"),
    display="Goose",
    rank=140,
    parser_version="1",
    env=("GOOSE_PATH_ROOT", "XDG_DATA_HOME"),
    nightly=True,
    export=None,
    price_provider=None,  # Goose talks to any provider (ollama, anthropic, openai, ...)
    reasoning_billed_separately=False,  # Goose keeps no reasoning count: output_tokens are what the provider billed
    unknown_records="skip",  # an unknown role or block type is counted as SKIPPED
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """docs/agents/goose.md "Where the files are": `$GOOSE_PATH_ROOT/data/sessions` when that is an absolute path
    (Goose ignores a relative one), else `$XDG_DATA_HOME/goose/sessions`, default `~/.local/share/goose/sessions`
    (Goose's etcetera XDG strategy, on macOS too)."""
    path_root = env.get("GOOSE_PATH_ROOT")
    if path_root and Path(path_root).is_absolute():
        return [Path(path_root) / "data" / "sessions"]
    data_home = env.get("XDG_DATA_HOME")
    base = Path(data_home) if data_home else home / ".local" / "share"
    return [base / "goose" / "sessions"]


def discover(root: Path) -> Iterator[Source]:
    """`sessions.db` and the legacy `<id>.jsonl` files directly in `root`, or in `root/sessions` (a root given as
    Goose's data folder, `$GOOSE_PATH_ROOT/data`); no other folder is listed. Stat only; a unit that vanishes while
    listed is skipped and counted, never an error."""
    accept = lambda name, _f, _d: name == db.DATABASE_NAME or legacy.is_legacy_name(name)  # noqa: E731
    for path, st in walk_files(root, accept, max_depth=1, skip_dir=lambda name, _f, _d: name != "sessions"):
        if legacy.is_legacy_name(Path(path).name):
            yield Source(SPEC.name, str(path), st.st_size, st.st_mtime_ns, str(root), "file")
            continue
        try:
            size, mtime = sqlite_db.fingerprint(Path(path))
        except OSError as exc:
            skip("vanished" if isinstance(exc, FileNotFoundError) else "unreadable", Path(path), exc.strerror or "")
            continue
        yield Source(SPEC.name, str(path), size, mtime, str(root), "database")


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per session of the database (see db.read_database for the codes), or the one session of a
    legacy file (legacy.read_legacy)."""
    if source.path.endswith(".jsonl"):
        yield from legacy.read_legacy(source, limits)
    else:
        yield from db.read_database(source, limits)
