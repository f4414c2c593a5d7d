"""Listing source units under a root without opening them, never leaving the root through a symlink.

Hostile trees are expected: symlink loops (`ln -s . loop`, `a -> b -> a`), dangling links, FIFOs, sockets, device
files, unreadable folders and entries that vanish between listing and stat. None of them stops a discovery: a
folder that is its own ancestor is not entered again, and an entry that is not a regular file but is named like a
source is skipped with a warning and counted (`drain_skips`); a FIFO is never opened (a read would block).

A real file is listed ONCE however many paths lead to it (symlinks, hard links, a loop): files are keyed by
(st_dev, st_ino), and of the paths that reach one the file's own path wins (no symlink on the way), then the one
with the fewest parts, then the lexicographically smallest (`preferred`): the choice does not depend on listing
order, and adding a link never moves a source.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from pathlib import Path

log = logging.getLogger("transcripts.discovery")

# Why an entry named like a source was not listed; the keys of `drain_skips`.
SKIP_REASONS = (
    "symlink_loop",
    "dangling_link",
    "fifo",
    "socket",
    "device",
    "not_a_file",
    "vanished",
    "unreadable",
    "unreadable_folder",
)
_skips: Counter[str] = Counter()


# (st_dev, st_ino) of every file `walk_files` listed since the last `take_identities`, by path: the caller that
# keeps one source per real file need not stat each one again.
_identities: dict[str, tuple[int, int]] = {}


def take_identities() -> dict[str, tuple[int, int]]:
    """The identities recorded since the last call (and reset); like `drain_skips`, for the discovering process."""
    found = dict(_identities)
    _identities.clear()
    return found


def drain_skips() -> dict[str, int]:
    """The skips counted since the last call, by reason (and reset): discovery runs in one process, the caller's."""
    found = dict(sorted(_skips.items()))
    _skips.clear()
    return found


def skip(reason: str, path: Path | str, detail: str = "") -> None:
    """Log and count one entry that discovery passed over (never silently)."""
    _skips[reason] += 1
    # A file deleted while we listed is ordinary (a session removed now); every other oddity deserves a warning.
    level = logging.INFO if reason == "vanished" else logging.WARNING
    log.log(
        level,
        "event=skipped_entry reason=%s path=%s%s",
        reason,
        path,
        f" error={detail}" if detail else "",
    )


def confined(path: Path | str, root: Path | str) -> bool:
    """True when `path`, after resolving symlinks, is inside `root` (also resolved)."""
    try:
        real = Path(os.path.realpath(path))
        real_root = Path(os.path.realpath(root))
    except OSError:
        return False
    return real == real_root or real.is_relative_to(real_root)


def identity(st: os.stat_result) -> tuple[int, int]:
    """What makes two paths the same file."""
    return (st.st_dev, st.st_ino)


def preferred(path: str) -> tuple[bool, int, str]:
    """Sort key of the path that stands for a file reached by several: its own path (no symlink on the way, so
    adding a link never moves a source) first, then the fewest parts, then the lexicographically smallest."""
    try:
        through_link = os.path.realpath(path) != os.path.abspath(path)
    except OSError:
        through_link = True
    return (through_link, len(Path(path).parts), path)


def _mode_reason(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "not_a_file"


def regular_stat(path: Path | str) -> tuple[os.stat_result | None, str, str]:
    """(stat, "", "") of a regular file reached by `path` (links followed), or (None, reason, detail).

    Stat only: a FIFO, socket or device is recognised by its mode and never opened.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, ("dangling_link" if os.path.islink(path) else "vanished"), ""
    except OSError as exc:
        reason = "symlink_loop" if exc.errno == errno.ELOOP else "unreadable"
        return None, reason, exc.strerror or type(exc).__name__
    if not stat.S_ISREG(st.st_mode):
        return None, _mode_reason(st.st_mode), ""
    return st, "", ""


def once_per_file(found: Iterable[tuple[str, os.stat_result]]) -> list[tuple[str, os.stat_result]]:
    """Keep one (path, stat) per real file (by `identity`), the `preferred` path; sorted by path."""
    best: dict[tuple[int, int], tuple[str, os.stat_result]] = {}
    for path, st in found:
        key = (st.st_dev, st.st_ino)  # identity(st), inline: this runs for every file of every nightly run
        kept = best.get(key)
        if kept is None or preferred(path) < preferred(kept[0]):
            best[key] = (path, st)
    return sorted(best.values(), key=itemgetter(0))


# What a walk asks of a name it meets, before any stat: `accept(name, folders, depth)` for a file, `skip_dir(name,
# folders, depth)` for a folder. `folders` are the parts of the path of the folder holding it (the root's own parts
# first, as `Path.parts` gives them), `depth` how many folders lie between the root and it (1 for a folder in the
# root, 0 for a file in the root). Strings only: pathlib objects per file cost more than the stat of the file, on a
# walk of tens of thousands of sessions run every night to find out that nothing changed.
NameTest = Callable[[str, tuple[str, ...], int], bool]


def suffix(name: str) -> str:
    """`PurePath(name).suffix` of a file name, without making a path: `.jsonl`, or "" for `x`, `.hidden`, `x.`."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def _never(_name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return False


def walk_files(
    root: Path,
    accept: NameTest,
    *,
    max_depth: int = 8,
    skip_dir: NameTest = _never,
) -> Iterator[tuple[str, os.stat_result]]:
    """Yield (path, stat) of regular files under `root` that `accept` takes (see NameTest), sorted by path, once each.

    Symlinks are followed only when they resolve inside `root`, and never into a folder that is already one of the
    current path's ancestors (a loop). An unreadable folder is logged as a warning (nothing in it can be listed);
    an accepted name that is not a regular file is logged and counted (see the module docstring); `skip_dir`
    prunes folders that are not sessions (e.g. Grok's journals). Paths are `root` joined with the names met.
    """
    try:
        root_stat = os.stat(root)
    except OSError:
        return
    if not stat.S_ISDIR(root_stat.st_mode):
        return
    top = os.fspath(root)
    stack: list[tuple[str, tuple[str, ...], int, frozenset[tuple[int, int]]]] = [
        (top, root.parts, 0, frozenset({identity(root_stat)}))
    ]
    found: list[tuple[str, os.stat_result]] = []
    while stack:
        folder, folders, depth, ancestors = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            # Nothing in it can be listed, so nothing in it can be read: say so rather than pass over it in silence.
            skip("unreadable_folder", folder, exc.strerror or type(exc).__name__)
            continue
        for entry in entries:
            path = entry.path
            try:
                link = entry.is_symlink()
            except OSError:
                link = False
            if link and not confined(path, top):
                continue  # a link out of the root is never followed
            try:  # a folder we can enter (links followed); a loop or a vanished entry is classified as a file below
                dir_stat = entry.stat() if entry.is_dir() else None
            except OSError:
                dir_stat = None
            if dir_stat is not None:
                key = identity(dir_stat)
                if depth < max_depth and key not in ancestors and not skip_dir(entry.name, folders, depth + 1):
                    stack.append((path, (*folders, entry.name), depth + 1, ancestors | {key}))
                continue
            if not accept(entry.name, folders, depth):
                continue
            st, reason, detail = regular_stat(path)
            if st is None:
                skip(reason, path, detail)
            else:
                found.append((path, st))
    for path, st in once_per_file(found):
        _identities[path] = (st.st_dev, st.st_ino)
        yield path, st
