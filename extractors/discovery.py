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

import contextlib
import errno
import logging
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

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


def plainly_inside(path: str, root: str) -> bool:
    """True when `path` is `root` joined with plain names (no `.` or `..`), none of them a symlink: it then resolves
    inside `root`, whatever `root` itself resolves to, so `confined` holds without resolving either (one lstat per
    name instead of one per part of both paths). False decides nothing: ask `confined`."""
    prefix = os.path.join(root, "")
    if not path.startswith(prefix):
        return False
    names = path[len(prefix) :].split("/")
    if "" in names or "." in names or ".." in names:
        return False
    current = root
    for name in names:
        current = os.path.join(current, name)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except FileNotFoundError:
            return True  # nothing there: the rest is taken as written, as `realpath` takes it
        except OSError:
            return False
    return True


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


# --- what the last run listed: folders whose modification time has not moved are not listed again ---------------
#
# A folder's mtime moves when an entry is added to it, removed or renamed, and not when a file in it is written. So
# a folder whose mtime (and identity) is the one recorded at the last listing holds the same names, and its cold
# files (last modified more than `hot_ns` before now, by the recorded stat) are taken as they were, without a stat:
# only new folders, changed folders and hot files cost a syscall each, plus one stat per folder to read its mtime.
# A walk that allows it (`quiet=True`: every unit of the agent lies in one folder and is made of files the walk or
# `sidecar_stat` stats) does not even yield the files of a quiet folder (reused, every recorded file cold, nothing
# odd in it): the caller counts their sources unchanged from its manifest (`Listings.quiet`), so that a run over an
# unchanged corpus does no work per file at all.
# What this cannot see (a cold file that grows: appending does not move its folder's mtime) is found by the periodic
# full check (`Listings(trust=False)`: every folder listed, every file stat'd) or by the caller naming the path
# (`touched`: file events). Symlinks, FIFOs and other odd entries are never taken from the record: they are looked
# at as on a full walk every time, so that hostile trees behave the same with or without a record.

# The kind of a recorded entry; a regular file that was stat'd is recorded as [size, mtime_ns, dev, ino] instead.
DIR, FILE, LIVE = 0, 1, 2  # LIVE: a symlink, FIFO, socket, device or unknown: looked at afresh on every walk
Entry = int | list[int]
# [mtime_ns, st_dev, st_ino, newest_ns, folder names, unrecorded file names, entries by name] of a listed folder:
# mtime_ns -1 is never reused (the folder was written while it was listed); newest_ns is the newest mtime of the
# files recorded in it (NEVER_QUIET when it holds an odd entry). With the names of its folders and of the files no
# walk stat'd, whether a folder is quiet, and where the walk goes on, is known without reading its entries, which
# a record may keep as JSON text (decoded only for a folder that is not quiet: `entries_of`).
Folder = list[Any]
NEVER_QUIET = 2**62
# A folder modified this close to its listing may change again within the same timestamp tick (ext4's clock is a
# scheduler tick, a few ms): such a listing is recorded but not trusted by the next walk (git's "racy" rule).
RACY_NS = 2 * 10**9
_REGULAR = stat.S_IFREG | 0o600


class Listings:
    """The folder listings of the last walk (`before`) and the ones this walk makes (`after`), with the rules that
    decide what may be taken from the record: `trust` False lists and stats everything (the full check); `touched`
    paths (files or folders a caller knows changed) are stat'd and their folders listed whatever the record says;
    a file is hot (stat'd on every walk) when its recorded mtime is less than `hot_ns` before `now_ns`."""

    def __init__(
        self,
        before: Mapping[str, Folder] | None,
        *,
        now_ns: int,
        hot_ns: int,
        trust: bool = True,
        touched: Iterable[str] = (),
    ) -> None:
        self.before: Mapping[str, Folder] = before or {}
        self.after: dict[str, Folder] = {}
        self.now_ns, self.trust = now_ns, trust
        self.cold_before = now_ns - hot_ns  # a file last modified before this is cold
        self.touched_files = {os.path.abspath(p) for p in touched}
        self.touched_dirs = self.touched_files | {os.path.dirname(p) for p in self.touched_files}
        self.reused: set[str] = set()  # folders taken from the record by this walk
        self.quiet: set[str] = set()  # reused folders whose files were not yielded (all unchanged)
        self.listed = self.stated = self.trusted = 0  # folders listed; files stat'd / taken as recorded

    def reuse(self, folder: str, st: os.stat_result) -> Folder | None:
        """The record of `folder` when it still holds (see the class), else None (list it)."""
        if not self.trust or folder in self.touched_dirs:
            return None
        kept = self.before.get(folder)
        try:
            if kept is None or kept[0] != st.st_mtime_ns or (kept[1], kept[2]) != (st.st_dev, st.st_ino):
                return None
            if not isinstance(kept[3], int):
                return None  # a damaged record: listed afresh
        except (TypeError, IndexError):
            return None
        return kept

    def may_be_quiet(self, kept: Folder) -> bool:
        return bool(kept[3] < self.cold_before) and isinstance(kept[4], list) and isinstance(kept[5], list)

    def record(self, folder: str, st: os.stat_result, entries: dict[str, Entry]) -> None:
        racy = st.st_mtime_ns >= self.now_ns - RACY_NS
        self.after[folder] = [-1 if racy else st.st_mtime_ns, st.st_dev, st.st_ino, NEVER_QUIET, [], [], entries]

    def cold(self, path: str, entry: Entry) -> os.stat_result | None:
        """The recorded stat of a file in a reused folder when it may be trusted (cold, not touched), else None."""
        if type(entry) is not list or len(entry) != 4 or not all(type(n) is int for n in entry):
            return None
        if entry[1] >= self.cold_before or path in self.touched_files:
            return None
        self.trusted += 1
        return recorded_stat(entry)

    def sidecar(self, path: str) -> tuple[bool, os.stat_result | None]:
        """(known, stat) of a file beside a source: known when its folder was reused and the record answers (absent,
        or present and cold); else the caller stats it."""
        folder, name = os.path.split(path)
        if folder not in self.reused:
            return False, None
        entry = (entries_of(self.after[folder]) or {}).get(name)
        if entry is None:
            return True, None  # the folder holds the same names as when it was listed: not there
        st = self.cold(path, entry)
        return st is not None, st

    def note(self, path: str, st: os.stat_result) -> None:
        """Record the stat of a file whose folder this walk listed or reused."""
        self.stated += 1
        folder, name = os.path.split(path)
        kept = self.after.get(folder)
        if kept is not None and kept is not self.before.get(folder) and name in kept[6]:
            kept[6][name] = [st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino] if stat.S_ISREG(st.st_mode) else LIVE

    def finish(self) -> dict[str, Folder]:
        """This walk's listings, each with the newest mtime of its files (call once the walk is over)."""
        for folder, kept in self.after.items():
            if kept is self.before.get(folder):
                continue  # quiet: as recorded
            newest, folders, plain = 0, [], []
            for name, entry in kept[6].items():
                if type(entry) is list:
                    newest = max(newest, entry[1])
                elif entry == DIR:
                    folders.append(name)
                elif entry == FILE:
                    plain.append(name)
                else:
                    newest = NEVER_QUIET
            kept[3:6] = [newest, folders, plain]
        return self.after


def entries_of(kept: Folder) -> dict[str, Entry] | None:
    """A recorded folder's entries, decoded from the record's JSON text on first use; None when they are not an
    object of names (a damaged record: the folder is listed again)."""
    entries = kept[6]
    if isinstance(entries, str | bytes):
        try:
            entries = orjson.loads(entries)
        except orjson.JSONDecodeError:
            entries = None
        kept[6] = entries
    return entries if isinstance(entries, dict) else None


def recorded_stat(entry: list[int]) -> os.stat_result:
    """An os.stat_result holding what was recorded of a regular file (size, mtime, identity): what callers read."""
    size, mtime_ns, dev, ino = entry
    seconds = mtime_ns / 1e9
    return os.stat_result(
        (_REGULAR, ino, dev, 1, 0, 0, size, seconds, seconds, seconds),
        {"st_mtime_ns": mtime_ns, "st_atime_ns": mtime_ns, "st_ctime_ns": mtime_ns},
    )


_listings: Listings | None = None


@contextlib.contextmanager
def listing(listings: Listings | None) -> Iterator[Listings | None]:
    """Walks in this block use and fill `listings` (None: every folder listed, every file stat'd, as always)."""
    global _listings
    before, _listings = _listings, listings
    try:
        yield listings
    finally:
        _listings = before


def listing_on() -> bool:
    """Whether a `listing` block is on (walks use the record): a caller's own fast path should not run then."""
    return _listings is not None


def sidecar_stat(path: str) -> os.stat_result | None:
    """The stat of a file beside a source (Grok's summary.json, Copilot's workspace.yaml, Cline's sidecars), links
    followed, or None when there is none; from the record when its folder was not listed again and it is cold."""
    listings = _listings
    if listings is not None:
        known, st = listings.sidecar(path)
        if known:
            return st
    try:
        st = os.stat(path)
    except OSError:
        return None
    if listings is not None:
        listings.note(path, st)
    return st


def plain_files(folder: str, ending: str) -> list[tuple[str, os.stat_result]] | None:
    """The regular files directly in `folder` whose `suffix` is `ending` (a dot and no other: `.json`), (path, stat)
    sorted by path: what `walk_files(folder, ..., max_depth=0)` yields for a folder of plain entries (regular files
    and folders: no symlink, FIFO or other odd entry, no file under two names), with one stat per file, nothing else.

    None when the folder holds anything else, cannot be listed, or a `listing` block is on (the record is used
    there): the caller walks it with `walk_files`, which handles every case. For units spread over many small
    folders (OpenCode's legacy storage: one folder per message), where a general walk per folder costs more than
    the stats it takes."""
    if _listings is not None:
        return None
    found: list[tuple[str, os.stat_result]] = []
    size, is_regular = len(ending), stat.S_ISREG
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):  # a regular file, not a symlink to one
                    name = entry.name
                    if name.endswith(ending) and len(name) > size:  # suffix(name) == ending
                        st = entry.stat()
                        if not is_regular(st.st_mode):  # replaced since it was listed
                            return None
                        found.append((entry.path, st))
                elif not entry.is_dir(follow_symlinks=False):  # a symlink, FIFO, socket, device
                    return None
    except OSError:
        return None
    if len({(st.st_dev, st.st_ino) for _, st in found}) != len(found):
        return None  # a second name for one file: `once_per_file` decides which is listed
    found.sort(key=itemgetter(0))
    return found


def _scan(folder: str) -> dict[str, Entry]:
    """The names in `folder` by kind, from the listing alone (no stat where the file system gives the type)."""
    entries: dict[str, Entry] = {}
    with os.scandir(folder) as found:
        for entry in found:
            try:
                if entry.is_symlink():
                    kind = LIVE
                elif entry.is_dir(follow_symlinks=False):
                    kind = DIR
                elif entry.is_file(follow_symlinks=False):
                    kind = FILE
                else:
                    kind = LIVE
            except OSError:
                kind = LIVE
            entries[entry.name] = kind
    return entries


def walk_files(
    root: Path,
    accept: NameTest,
    *,
    max_depth: int = 8,
    skip_dir: NameTest = _never,
    quiet: bool = False,
) -> Iterator[tuple[str, os.stat_result]]:
    """Yield (path, stat) of regular files under `root` that `accept` takes (see NameTest), sorted by path, once each.

    Symlinks are followed only when they resolve inside `root`, and never into a folder that is already one of the
    current path's ancestors (a loop). An unreadable folder is logged as a warning (nothing in it can be listed);
    an accepted name that is not a regular file is logged and counted (see the module docstring); `skip_dir`
    prunes folders that are not sessions (e.g. Grok's journals). Paths are `root` joined with the names met.

    Inside a `listing` block, a folder whose mtime has not moved since the recorded walk is not listed again and
    its cold files are not stat'd (see `Listings`): the recorded stats stand for the files' own. With `quiet`, the
    files of a quiet folder are not yielded at all (the folder is added to `Listings.quiet`); pass it only when
    each unit the caller makes lies in one folder and is made of files stat'd here or by `sidecar_stat`.
    """
    try:
        root_stat = os.stat(root)
    except OSError:
        return
    if not stat.S_ISDIR(root_stat.st_mode):
        return
    listings = _listings
    top = os.fspath(root)
    stack: list[tuple[str, tuple[str, ...], int, frozenset[tuple[int, int]], os.stat_result]] = [
        (top, root.parts, 0, frozenset({identity(root_stat)}), root_stat)
    ]
    found: list[tuple[str, os.stat_result]] = []
    while stack:
        folder, folders, depth, ancestors, folder_stat = stack.pop()
        kept = listings.reuse(folder, folder_stat) if listings is not None else None
        entries: dict[str, Entry]
        if kept is not None and listings is not None and quiet and listings.may_be_quiet(kept):
            if _quiet(kept[5], folders, depth, accept):
                listings.reused.add(folder)
                listings.quiet.add(folder)
                listings.after[folder] = kept
                entries = dict.fromkeys(kept[4], DIR)  # only its folders, to walk on
            else:
                kept = None
        if kept is not None and listings is not None and folder not in listings.quiet:
            recorded = entries_of(kept)
            if recorded is not None:
                listings.reused.add(folder)
                entries = dict(recorded)
                listings.after[folder] = [*kept[:6], entries]
            else:
                kept = None  # its entries could not be read: listed afresh
        if kept is None or listings is None:
            try:
                entries = _scan(folder)
            except OSError as exc:
                # Nothing in it can be listed, so nothing in it can be read: say so rather than pass over it in silence.
                skip("unreadable_folder", folder, exc.strerror or type(exc).__name__)
                continue
            if listings is not None:
                listings.listed += 1
                listings.record(folder, folder_stat, entries)
        prefix = os.path.join(folder, "")
        for name, kind in entries.items():
            path = prefix + name
            if kind == FILE or type(kind) is list:  # a regular file, its stat recorded or not
                if not accept(name, folders, depth):
                    continue
                st = listings.cold(path, kind) if kept is not None and listings is not None else None
                if st is None:
                    st, reason, detail = regular_stat(path)
                    if st is None:
                        skip(reason, path, detail)
                        continue
                    if listings is not None:
                        listings.note(path, st)
                found.append((path, st))
                continue
            if kind != DIR:  # LIVE, or a damaged record's entry: looked at afresh
                try:
                    link = os.path.islink(path)
                except OSError:
                    link = False
                if link and not confined(path, top):
                    continue  # a link out of the root is never followed
            try:  # a folder we can enter (links followed); a loop or a vanished entry is classified as a file below
                dir_stat: os.stat_result | None = os.stat(path)
            except OSError:
                dir_stat = None
            if dir_stat is not None and stat.S_ISDIR(dir_stat.st_mode):
                key = identity(dir_stat)
                if depth < max_depth and key not in ancestors and not skip_dir(name, folders, depth + 1):
                    stack.append((path, (*folders, name), depth + 1, ancestors | {key}, dir_stat))
                continue
            if not accept(name, folders, depth):
                continue
            st, reason, detail = regular_stat(path)
            if st is None:
                skip(reason, path, detail)
            else:
                if listings is not None:
                    listings.note(path, st)
                found.append((path, st))
    for path, st in once_per_file(found):
        _identities[path] = (st.st_dev, st.st_ino)
        yield path, st


def _quiet(plain: list[Any], folders: tuple[str, ...], depth: int, accept: NameTest) -> bool:
    """Whether a reused folder's files may all be taken as unchanged (its recorded files cold and nothing odd in
    it, as `Listings.may_be_quiet` saw): none of the files no walk stat'd (`plain`) is one this walk takes."""
    return not any(isinstance(name, str) and accept(name, folders, depth) for name in plain)
