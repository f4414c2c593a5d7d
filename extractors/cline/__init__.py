"""Cline, Roo Code and Kilo Code: the VS Code extensions' task folders, one reader for the three.

Each task is a folder `<editor user dir>/globalStorage/<extension id>/tasks/<task id>/` (docs/agents/cline.md
"Where the files are"). The unit is its `api_conversation_history.json`; `ui_messages.json`, `task_metadata.json`
and Roo's `history_item.json` beside it are read with it and count in its fingerprint (size and newest mtime), like
Grok's summary.json. Every file is one JSON document rewritten whole on each update (not appended to): each is read
with `read_json_document` within the limits, and a file that moves while the folder is read defers the task
(changed_during_read). Turns and tool calls come from the API history, usage from the UI rows (tables.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path, PureWindowsPath
from typing import Any

from extractors.bounded import Limits, read_json_document
from extractors.discovery import sidecar_stat, walk_files
from extractors.errors import DeferCode, DeferError, RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim

from . import tables
from .parse import Task, parse_task
from .tables import API_HISTORY, EXTENSIONS, HISTORY_ITEM, SIDECARS, TASK_METADATA, UI_MESSAGES


def claims(path: Path) -> Claim | None:
    """A path under `globalStorage/<one of the three extension ids>/tasks/` is a task of theirs."""
    parts = path.parts
    for i in range(len(parts) - 2):
        if parts[i] == "globalStorage" and parts[i + 1] in EXTENSIONS and parts[i + 2] == "tasks":
            return Claim.FOLDER
    return None


SPEC = AgentSpec(
    name=Agent("cline"),
    display="Cline / Roo Code / Kilo Code",
    rank=100,
    parser_version="1",
    env=("XDG_CONFIG_HOME", "VSCODE_PORTABLE", "APPDATA"),
    nightly=True,
    export=None,
    price_provider=None,  # any provider; each request's own cost is kept (`api_req_started` `cost`)
    reasoning_billed_separately=False,
    unknown_records="skip",  # an API message of an unknown role, or a UI row of an unknown kind, is SKIPPED
    aliases=("roo", "roo-code", "kilo", "kilo-code"),
    claims=claims,
)

# The VS Code-family editors whose user dir may hold the extensions (docs/agents/cline.md "Where the files are").
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
# Remote and WSL installs keep the user dir in the server's data folder; Codespaces in `.vscode-remote`.
SERVER_USER_DIRS = (".vscode-server/data/User", ".vscode-server-insiders/data/User", ".vscode-remote/data/User")
GLOBAL_STORAGE = "globalStorage"


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """The `globalStorage` folders of every editor user dir under `home` (Linux and macOS layouts, VS Code Server),
    the portable install's and, from WSL, the Windows user dirs under `APPDATA`. No I/O: the roots need not exist."""
    config = env.get("XDG_CONFIG_HOME", "").strip()
    linux = Path(config) if config.startswith("/") else home / ".config"
    mac = home / "Library" / "Application Support"
    user_dirs = [base / editor / "User" for base in (linux, mac) for editor in EDITORS]
    user_dirs += [home / rel for rel in SERVER_USER_DIRS]
    portable = env.get("VSCODE_PORTABLE", "").strip()
    if portable:
        user_dirs.append(Path(portable) / "user-data" / "User")
    appdata = _windows_appdata(env.get("APPDATA", ""))
    if appdata is not None:
        user_dirs += [appdata / editor / "User" for editor in EDITORS]
    return [user_dir / GLOBAL_STORAGE for user_dir in user_dirs]


def _windows_appdata(value: str) -> Path | None:
    """`APPDATA` as this machine reaches it: a POSIX path as given (WSLENV=APPDATA/p translates it), a Windows
    drive path `C:\\Users\\u\\AppData\\Roaming` as WSL mounts it (`/mnt/c/Users/u/AppData/Roaming`)."""
    value = value.strip()
    if value.startswith("/"):
        return Path(value)
    windows = PureWindowsPath(value)
    if len(windows.drive) == 2 and windows.drive[1] == ":" and windows.root:
        return Path("/mnt", windows.drive[0].lower(), *windows.parts[1:])
    return None


def discover(root: Path) -> Iterator[Source]:
    """Task folders under `root`: a `globalStorage` folder (only the three extensions' `tasks/`), an extension's
    folder, a `tasks` folder, one task folder, or any folder of copied task folders (up to five levels). Stat only."""
    given = root
    if root.name != GLOBAL_STORAGE and (root / GLOBAL_STORAGE).is_dir():
        root = root / GLOBAL_STORAGE  # an editor's user dir given: its globalStorage, pruned as below
    if root.name == GLOBAL_STORAGE:

        def is_unit(name: str, folders: tuple[str, ...], depth: int) -> bool:
            return name == API_HISTORY and depth == 3

        def pruned(name: str, folders: tuple[str, ...], depth: int) -> bool:
            # depth 1: only the three extensions (globalStorage holds every extension's data); depth 2: only tasks/
            return (depth == 1 and name not in EXTENSIONS) or (depth == 2 and name != "tasks")

        found = walk_files(root, is_unit, max_depth=3, skip_dir=pruned, quiet=True)
    else:

        def anywhere(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
            return name == API_HISTORY

        def not_tasks(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
            return name in {"checkpoints", "node_modules", ".git"}

        found = walk_files(root, anywhere, max_depth=5, skip_dir=not_tasks, quiet=True)
    for path, st in found:
        size, mtime = st.st_size, st.st_mtime_ns
        folder = os.path.join(os.path.dirname(path), "")  # with its separator: the sidecars' paths by concatenation
        for name in SIDECARS:
            side = sidecar_stat(folder + name)
            if side is None:
                continue
            size, mtime = size + side.st_size, max(mtime, side.st_mtime_ns)
        yield Source(SPEC.name, path, size, mtime, str(given))


def extension_of(path: Path) -> str | None:
    """The extension id in a task's path (`.../globalStorage/<id>/tasks/<task>/...`), when it is there."""
    return next((part for part in reversed(path.parts) if part in EXTENSIONS), None)


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per task folder. Raises RejectError: every code of `read_json_document` (invalid_json,
    invalid_utf8, truncated_tail, limit_exceeded), bad_shape (a document of the wrong type), inconsistent_source
    (history_item.json names another task), no_conversation, missing_timestamp; DeferError (a file of the folder
    changed while it was read, or is being written)."""
    where, parts = _folder_of(source.path)
    native = parts[-1] if parts else ""
    hint = session_id(SPEC.name, native)
    prefix = os.path.join(where, "")
    files = [prefix + name for name in (API_HISTORY, UI_MESSAGES, TASK_METADATA, HISTORY_ITEM)]
    seen = _stat_all(files)  # stat'ed once before: the reads below take their stats and presence from here
    api = _document(files[0], seen[0], limits, hint)
    if not isinstance(api, list):
        raise RejectError(RejectCode.BAD_SHAPE, f"{API_HISTORY} is not a JSON array of messages", session_hint=hint)
    ui = _optional(files[1], seen[1], limits, hint, list)
    metadata = _optional(files[2], seen[2], limits, hint, dict)
    history = _optional(files[3], seen[3], limits, hint, dict)
    if _stats(files) != _fingerprints(seen):  # and once after: a file that moved meanwhile defers the task
        raise DeferError(DeferCode.CHANGED_DURING_READ, "a file of the task folder changed while it was read")
    extension = next((part for part in reversed(parts) if part in EXTENSIONS), None)  # as `extension_of`
    task = Task(native, extension, api, ui, metadata, history)
    yield Loaded(source, parse_task(task, limits))


def _folder_of(path: str) -> tuple[str, list[str]]:
    """The folder of the unit at `path` and its parts, as `Path(path).parent` and its `.parts` (but the root's "/"):
    by string split where pathlib would change nothing (an absolute path without empty or `.` parts), through
    pathlib elsewhere."""
    if path.startswith("/") and "//" not in path and "/./" not in path and not path.endswith(("/", "/.")):
        folder = path[: path.rindex("/")] or "/"
        return folder, [part for part in folder.split("/") if part]
    parent = Path(path).parent
    return str(parent), [part for part in parent.parts if part != "/"]


def _stat_all(files: list[str]) -> list[os.stat_result | None]:
    """The stat of each file of the unit, None for an absent one."""
    stats: list[os.stat_result | None] = []
    for file in files:
        try:
            stats.append(os.stat(file))
        except OSError:
            stats.append(None)
    return stats


def _fingerprints(stats: list[os.stat_result | None]) -> tuple[tuple[int, int] | None, ...]:
    """(size, mtime) of each stat of `_stat_all`, as `_stats` gives them."""
    return tuple(None if st is None else (st.st_size, st.st_mtime_ns) for st in stats)


def _stats(files: list[str]) -> tuple[tuple[int, int] | None, ...]:
    """(size, mtime) of each file of the unit, None for an absent one: what must not move while it is read."""
    stats: list[tuple[int, int] | None] = []
    for file in files:
        try:
            st = os.stat(file)
        except OSError:
            stats.append(None)
            continue
        stats.append((st.st_size, st.st_mtime_ns))
    return tuple(stats)


def _document(path: str, seen: os.stat_result | None, limits: Limits, hint: str) -> Any:
    """One JSON document of the task, read whole within `max_document_bytes` (named in the rejection). `seen`: its
    stat from `_stat_all` just before, which the document reader takes instead of its own (the folder is stat'ed
    again after the reads: a change defers)."""
    if seen is None:
        try:
            size = os.stat(path).st_size
        except OSError as exc:
            raise RejectError(
                RejectCode.SOURCE_UNREADABLE,
                f"cannot stat {os.path.basename(path)}: {exc.strerror}",
                session_hint=hint,
            ) from exc
    else:
        size = seen.st_size
    if size > limits.max_document_bytes:
        raise RejectError(
            RejectCode.LIMIT_EXCEEDED,
            f"{os.path.basename(path)} is {size} bytes, over max_document_bytes={limits.max_document_bytes}",
            session_hint=hint,
        )
    try:
        return read_json_document(path, limits, stat_result=seen)
    except RejectError as exc:
        exc.session_hint = hint
        exc.detail = f"{os.path.basename(path)}: {exc.detail}"
        raise


def _optional(path: str, seen: os.stat_result | None, limits: Limits, hint: str, kind: type) -> Any:
    """A sidecar: None when absent; rejected (bad_shape) when it is not the JSON type it should be. `seen`: its
    stat from `_stat_all`, None when it was absent."""
    if seen is None:
        return None
    try:
        document = _document(path, seen, limits, hint)
    except RejectError as exc:
        if exc.code is RejectCode.SOURCE_UNREADABLE and not os.path.exists(path):
            return None  # removed since `_stats`: absent, and the folder's second `_stats` defers the task
        raise
    if not isinstance(document, kind):
        raise RejectError(
            RejectCode.BAD_SHAPE,
            f"{os.path.basename(path)} is not a JSON {kind.__name__.replace('dict', 'object')}",
            session_hint=hint,
        )
    return document


__all__ = ["SPEC", "default_roots", "discover", "read", "tables"]
