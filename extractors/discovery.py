"""Listing source units under a root without opening them, never leaving the root through a symlink."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path


def confined(path: Path, root: Path) -> bool:
    """True when `path`, after resolving symlinks, is inside `root` (also resolved)."""
    try:
        real = Path(os.path.realpath(path))
        real_root = Path(os.path.realpath(root))
    except OSError:
        return False
    return real == real_root or real.is_relative_to(real_root)


def walk_files(
    root: Path,
    accept: Callable[[Path], bool],
    *,
    max_depth: int = 8,
    skip_dir: Callable[[Path], bool] = lambda _p: False,
) -> Iterator[tuple[Path, os.stat_result]]:
    """Yield (path, stat) of regular files under `root` for which `accept(path)` holds, sorted by path.

    Symlinks are followed only when they resolve inside `root`. Unreadable directories are passed over (there is
    nothing in them we could read); `skip_dir` prunes folders that are not sessions (e.g. Grok's journals).
    """
    if not root.is_dir():
        return
    stack: list[tuple[Path, int]] = [(root, 0)]
    found: list[tuple[Path, os.stat_result]] = []
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                is_link = entry.is_symlink()
                if is_link and not confined(path, root):
                    continue
                if entry.is_dir():
                    if depth < max_depth and not skip_dir(path):
                        stack.append((path, depth + 1))
                elif entry.is_file() and accept(path):
                    found.append((path, entry.stat()))
            except OSError:
                continue
    found.sort(key=lambda item: str(item[0]))
    yield from found
