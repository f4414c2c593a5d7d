"""OpenCode: `opencode.db` (SQLite, read-only) and the legacy `storage/` JSON tree, one session per outcome.

Units: each database (`opencode.db`, `opencode-<channel>.db`; fingerprint = database + `-wal`) and each legacy
session (`storage/session/*/<id>.json` with its message and part files). A session present in both is loaded from
the database; its JSON unit yields Rejected(duplicate). Parse rules: `extractors/opencode/records.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, sqlite_db
from extractors.discovery import skip
from extractors.model import Agent, Outcome, Source
from extractors.opencode import db, storage
from extractors.spec import AgentSpec

SPEC = AgentSpec(
    name=Agent("opencode"),
    display="OpenCode",
    rank=50,
    parser_version="2",
    env=("XDG_DATA_HOME",),
    nightly=True,
    export=None,
    price_provider=None,  # its models are of any provider (and gateways): looked up without a hint
    reasoning_billed_separately=True,  # `reasoning` is stored beside `output`
    unknown_records="skip",  # a message role or part type it does not know is counted as SKIPPED
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`$XDG_DATA_HOME/opencode`, default `~/.local/share/opencode` (also on macOS: OpenCode uses xdg-basedir)."""
    data_home = env.get("XDG_DATA_HOME")
    base = Path(data_home) if data_home else home / ".local" / "share"
    return [base / "opencode"]


def discover(root: Path) -> Iterator[Source]:
    """The databases directly in `root` and every legacy session under `root/storage` (or `root` given as the
    storage folder itself). Stat only: nothing is opened. A unit that vanishes while it is listed is skipped and
    counted (`discovery.drain_skips`), never an error."""
    for path in db.databases(root):
        try:
            size, mtime = sqlite_db.fingerprint(path)
        except OSError as exc:
            skip("vanished" if isinstance(exc, FileNotFoundError) else "unreadable", path, exc.strerror or "")
            continue
        yield Source(SPEC.name, str(path), size, mtime, str(root), "database")
    for path, _ in storage.session_files(root):
        try:
            listing = storage.list_unit(storage.Unit.of(path), root)
        except OSError as exc:
            skip("vanished" if isinstance(exc, FileNotFoundError) else "unreadable", path, exc.strerror or "")
            continue
        yield Source(SPEC.name, str(path), listing.size, listing.mtime_ns, str(root), "directory")


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """Outcomes of one unit: per session for a database, the one session of a legacy storage unit.

    Raises RejectError / DeferError for a unit that cannot be read at all (see db.read_database and
    storage.read_storage_session for the codes).
    """
    if source.kind == "database" or source.path.endswith(".db"):
        yield from db.read_database(source, limits)
    else:
        yield from storage.read_storage_session(source, limits)
