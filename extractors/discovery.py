"""Listing source units under a root without opening them, never leaving the root through a symlink."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger("transcripts.discovery")


def confined(path: Path, root: Path) -> bool:
    """True when `path`, after resolving symlinks, is inside `root` (also resolved)."""
    try:
        real = Path(os.path.realpath(path))
        real_root = Path(os.path.realpath(root))
    except OSError:
        return False
    return real == real_root or real.is_relative_to(real_root)


def _kind(entry: os.DirEntry[str]) -> str | None:
    """ "dir", "file", or None for anything else (and for an entry that vanished since it was listed)."""
    try:
        if entry.is_dir():
            return "dir"
        return "file" if entry.is_file() else None
    except OSError:
        return None


def _stat(entry: os.DirEntry[str]) -> os.stat_result | None:
    """The entry's stat, or None when it was removed since it was listed (it is simply not there any more)."""
    try:
        return entry.stat()
    except FileNotFoundError:
        return None


def walk_files(
    root: Path,
    accept: Callable[[Path], bool],
    *,
    max_depth: int = 8,
    skip_dir: Callable[[Path], bool] = lambda _p: False,
) -> Iterator[tuple[Path, os.stat_result]]:
    """Yield (path, stat) of regular files under `root` for which `accept(path)` holds, sorted by path.

    Symlinks are followed only when they resolve inside `root`. An unreadable folder is logged as a warning (nothing
    in it can be listed); `skip_dir` prunes folders that are not sessions (e.g. Grok's journals).
    """
    if not root.is_dir():
        return
    stack: list[tuple[Path, int]] = [(root, 0)]
    found: list[tuple[Path, os.stat_result]] = []
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            # Nothing in it can be listed, so nothing in it can be read: say so rather than pass over it in silence.
            log.warning("event=unreadable_folder path=%s error=%s", folder, exc.strerror)
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() and not confined(path, root):
                continue  # a link out of the root is never followed
            kind = _kind(entry)
            if kind == "dir" and depth < max_depth and not skip_dir(path):
                stack.append((path, depth + 1))
            elif kind == "file" and accept(path):
                st = _stat(entry)
                if st is not None:
                    found.append((path, st))
    found.sort(key=lambda item: str(item[0]))
    yield from found
