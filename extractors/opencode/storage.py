"""The legacy `storage/` JSON tree of OpenCode <= 1.1 (still the only copy of some sessions): one unit per session.

Two layouts are read (docs/agents/opencode.md "Legacy JSON storage"; OC
`packages/opencode/src/storage/json-migration.ts`):
- current: `session/<projectID>/<sessionID>.json`, `message/<sessionID>/<messageID>.json`,
  `part/<messageID>/<partID>.json`;
- older:   `session/info/<sessionID>.json`, `session/message/<sessionID>/<messageID>.json`,
  `session/part/<sessionID>/<messageID>/<partID>.json`.
Ids come from PATHS, as the migration does ("Derive all IDs from file paths, not JSON content"): a session file
named `ses_x.json` whose JSON says `"id": "x"` is session `ses_x`, and its messages are under `message/ses_x/`.
Not read: parts written directly under `part/` (`part/prt_1.json`, seen only in a hand-written sample; the
migration's `part/*/*.json` glob skips them too), `project/`, `todo/`, `permission/`, `session_share/`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extractors.bounded import Limits, read_json_document
from extractors.discovery import confined, listing_on, plain_files, plainly_inside, suffix, walk_files
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError
from extractors.model import Loaded, Outcome, Rejected, Source
from extractors.opencode import db
from extractors.opencode.records import MessageRow, PartRow, SessionRow, build_session, session_id_of

OLDER_LAYOUT_DIR = "info"  # storage/session/info/<id>.json
# Folders under storage/session/ that are the older layout's message/part trees, not project folders.
NOT_PROJECT_DIRS = frozenset({"message", "part"})


@dataclass(frozen=True, slots=True)
class Unit:
    """One session's files in the storage tree, as paths (nothing read)."""

    storage: Path
    session_file: Path
    native_id: str
    older: bool

    @classmethod
    def of(cls, session_file: Path) -> Unit:
        """The unit of a session file `storage/session/<project or info>/<id>.json`. Raises RejectError."""
        if session_file.suffix != ".json" or session_file.parent.parent.name != "session":
            raise RejectError(RejectCode.SOURCE_UNREADABLE, "not an OpenCode storage/session/*/<id>.json file")
        return cls(
            storage=session_file.parent.parent.parent,
            session_file=session_file,
            native_id=session_file.stem,
            older=session_file.parent.name == OLDER_LAYOUT_DIR,
        )

    def message_root(self) -> Path:
        """The folder of every session's message folder."""
        return self.storage / "session" / "message" if self.older else self.storage / "message"

    def part_root(self) -> Path:
        """The folder of this session's part folders (one per message)."""
        return self.storage / "session" / "part" / self.native_id if self.older else self.storage / "part"


def storage_dir(root: Path) -> Path | None:
    """`<data dir>/storage`, or `root` itself when it is a storage folder (has `session/`)."""
    if (root / "storage" / "session").is_dir():
        return root / "storage"
    if (root / "session").is_dir():
        return root
    return None


def session_files(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every session file of both layouts under `root` (confined, sorted)."""
    storage = storage_dir(root)
    if storage is None or not confined(storage, root):
        return
    for path, st in walk_files(
        storage / "session",
        lambda name, _folders, depth: suffix(name) == ".json" and depth == 1,  # session/<project>/<id>.json
        max_depth=1,
        skip_dir=lambda name, _folders, _depth: name in NOT_PROJECT_DIRS,
    ):
        yield Path(path), st


def _json_files(folder: Path, root: Path) -> list[tuple[str, os.stat_result]]:
    if not folder.is_dir() or not confined(folder, root):
        return []
    return list(walk_files(folder, lambda name, _f, _d: suffix(name) == ".json", max_depth=0))


def _folder_files(
    parent: str, name: str, parent_inside: bool, root: Path
) -> tuple[list[tuple[str, os.stat_result]], int | str | None]:
    """The JSON files of the folder `parent/name` (as `_json_files` lists them) and its mtime: an int when the
    folder was stat'd here, its path when it is to be stat'd after the listing, None when there is no such folder.

    The fast path: when `parent` resolves inside the root (`parent_inside`) and `name` is a plain name that is no
    symlink, the folder resolves inside the root too, so `confined` need not resolve it again; a folder of plain
    files is then listed by `discovery.plain_files` (one stat per file). Anything else (a symlink, `.` or `..`, an
    odd entry, an error; `parent_inside` False in a `listing` block) takes the general walk, as before."""
    folder = f"{parent}/{name}"
    if parent_inside and name not in ("", ".", ".."):
        try:
            st: os.stat_result | None = os.lstat(folder)
        except FileNotFoundError:
            return [], None
        except OSError:
            st = None
        if st is not None and not stat.S_ISLNK(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                return [], st.st_mtime_ns
            files = plain_files(folder, ".json")
            if files is not None:
                return files, st.st_mtime_ns
    path = Path(parent) / name  # as the unit names it (`Path` drops a `.`)
    return _json_files(path, root), str(path)


@dataclass(frozen=True, slots=True)
class Listing:
    message_files: list[tuple[str, os.stat_result]]
    part_files: dict[str, list[tuple[str, os.stat_result]]]  # message id -> its part files
    size: int
    mtime_ns: int
    session_stat: os.stat_result  # the session file's
    folders: list[tuple[str, int | None]]  # the message folder and each message's part folder: (path, mtime or None)

    @property
    def records(self) -> int:
        return len(self.message_files) + sum(len(p) for p in self.part_files.values())

    @property
    def messages(self) -> list[tuple[Path, os.stat_result]]:
        return [(Path(p), st) for p, st in self.message_files]

    @property
    def parts(self) -> dict[str, list[tuple[Path, os.stat_result]]]:
        return {m: [(Path(p), st) for p, st in files] for m, files in self.part_files.items()}


def _inside(folder: str, root: Path) -> bool:
    """`confined(folder, root)`, without resolving both paths when `folder` lies plainly under `root`."""
    return plainly_inside(folder, str(root)) or confined(folder, root)


def _stem(path: str) -> str:
    """`Path(path).stem` of a listed `<id>.json` file (`os.path.basename`, inline: once per file per listing)."""
    return path[path.rfind("/") + 1 : -5]


def list_unit(unit: Unit, root: Path) -> Listing:
    """Stat the session file, its message files and their part files (and their folders' mtimes). No parsing.

    The fingerprint is the total size and the newest mtime, so adding, changing or removing any file moves it.
    """
    st = os.stat(unit.session_file)
    size, newest = st.st_size, st.st_mtime_ns
    message_root, part_root = str(unit.message_root()), str(unit.part_root())
    fast = not listing_on()  # in a listing block (the nightly discovery) every folder takes the recorded walk
    messages, folder_mtime = _folder_files(message_root, unit.native_id, fast and _inside(message_root, root), root)
    folders = [(f"{message_root}/{unit.native_id}", folder_mtime)]
    parts: dict[str, list[tuple[str, os.stat_result]]] = {}
    part_inside = fast and _inside(part_root, root)
    for path, mst in messages:
        size, newest = size + mst.st_size, max(newest, mst.st_mtime_ns)
        message_id = _stem(path)
        parts[message_id], folder_mtime = _folder_files(part_root, message_id, part_inside, root)
        folders.append((f"{part_root}/{message_id}", folder_mtime))
        for _, pst in parts[message_id]:
            size, newest = size + pst.st_size, max(newest, pst.st_mtime_ns)
    marks: list[tuple[str, int | None]] = []
    for name, folder in folders:
        if isinstance(folder, str):  # stat'd after its listing
            name, folder = folder, _mtime(folder)
        if folder is not None:
            newest = max(newest, folder)
        marks.append((name, folder))
    return Listing(messages, parts, size, newest, st, marks)


def _mtime(folder: str) -> int | None:
    """A folder's mtime, or None when there is none (a session with no messages yet has no message folder)."""
    try:
        return os.stat(folder).st_mtime_ns
    except FileNotFoundError:
        return None


def unchanged(listing: Listing, session_file: Path) -> bool:
    """Whether the unit still holds the files `listing` found: the session file as it was, and no file added to or
    removed from its message folder or any part folder (their mtimes, each as it was or still absent).

    With every file read checked against its own listed stat (`read_json_document(stat_result=...)`: a file that
    moved between its listing and the end of its read is deferred there), this makes what was read the unit as it
    was at one moment, the end of the listing: each file was unchanged from its listing to its read, and each
    folder's members from its listing to this check. A file changed after it was read is not that moment's concern:
    its new mtime moves the unit's fingerprint, and the next run reads it again."""
    try:
        st = os.stat(session_file)
    except FileNotFoundError:
        return False
    if (st.st_size, st.st_mtime_ns) != (listing.session_stat.st_size, listing.session_stat.st_mtime_ns):
        return False
    return all(_mtime(folder) == mtime for folder, mtime in listing.folders)


def _root_of(source: Source, unit: Unit) -> Path:
    return Path(source.root) if source.root else unit.storage.parent


def read_storage_session(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The one session of a storage unit: Loaded, or Rejected (DUPLICATE when a database of the same data
    directory holds it: the database copy wins).

    Raises RejectError(limit_exceeded | invalid_json | invalid_utf8 | bad_shape | missing_timestamp |
    no_conversation | source_unreadable) and DeferError(changed_during_read).
    """
    unit = Unit.of(Path(source.path))
    root = _root_of(source, unit)
    hint = session_id_of(unit.native_id)
    if db.contains_session(root, unit.native_id, limits):
        yield Rejected(
            source, RejectCode.DUPLICATE, "the same session is in opencode.db, read from there", None, None, hint
        )
        return
    try:
        listing = list_unit(unit, root)
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot list: {exc.strerror}", session_hint=hint) from exc
    if listing.records > limits.max_records:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED, f"more than max_records={limits.max_records} files", session_hint=hint
        )
    if listing.size > limits.max_conversation_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"session files total {listing.size} bytes, over max_conversation_bytes={limits.max_conversation_bytes}",
            session_hint=hint,
        )
    try:
        session = _object(
            read_json_document(unit.session_file, limits, stat_result=listing.session_stat), "session file"
        )
        messages = []
        parts = []
        # Each file read with the stat its listing took (`stat_result`): one stat a file fewer, and a file that
        # moved between the listing and the end of its read is deferred by its own fstat (see `unchanged`).
        for path, st in listing.message_files:
            message_id = _stem(path)
            data = _object(read_json_document(path, limits, stat_result=st), f"message {message_id}")
            messages.append(MessageRow(message_id, _dict(data.get("time")).get("created"), data))
            for part_path, pst in listing.part_files[message_id]:
                parts.append(
                    PartRow(_stem(part_path), message_id, read_json_document(part_path, limits, stat_result=pst))
                )
    except RejectError as exc:
        raise RejectError(exc.code, exc.detail, line=exc.line, offset=exc.offset, session_hint=hint) from exc
    if not unchanged(listing, unit.session_file):
        raise DeferError(DeferCode.CHANGED_DURING_READ, "session files changed while they were read")
    times = _dict(session.get("time"))
    row = SessionRow(
        id=unit.native_id,
        parent_id=_str(session.get("parentID")),
        title=_str(session.get("title")),
        directory=_str(session.get("directory")),
        version=_str(session.get("version")),
        time_created=times.get("created"),
        time_updated=times.get("updated"),
        time_archived=times.get("archived"),
    )
    yield Loaded(source, build_session(row, messages, parts, limits))


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RejectError(RejectCode.BAD_SHAPE, f"{what} is not a JSON object")
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
