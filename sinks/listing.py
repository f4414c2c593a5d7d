"""The listing record: what the last run's discovery found in each source folder, so that the next one lists again
only the folders that changed (`extractors.discovery.Listings`).

One JSON file in the data dir's cache folder, replaced atomically by a run that ended well, after its commit (under
the writer lock). It names the format it is written in and the Parquet version of the corpus it was made with: a
record of another format or another version (a run that failed after its commit, a corpus restored from a copy), a
torn or damaged file, or none at all, is not used, and the run lists every folder and stats every file, as the
periodic full check does. Losing it costs one slower run, never a wrong one.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sinks.files import FILE_MODE, private_dir, replace_atomic

LISTING = "cache/listing.json"
FORMAT = 2  # the record's layout; another one is thrown away

log = logging.getLogger("transcripts.listing")

# A folder's record as `extractors.discovery` keeps it ([mtime_ns, dev, ino, newest_ns, folder names, unrecorded
# file names, entries]); opaque here, but for its entries, written as JSON text so that a load decodes them only for
# the folders a walk reads them in.
Folder = list[Any]


@dataclass(slots=True)
class Record:
    """Folder listings by path, the corpus version they go with, and when every folder was last checked whole."""

    version: int
    checked_at_ns: int  # the last full check (every folder listed, every file stat'd)
    folders: dict[str, Folder] = field(default_factory=dict)


def listing_path(data_dir: Path) -> Path:
    return data_dir / LISTING


def load_record(data_dir: Path) -> Record | None:
    """The record in `data_dir`, or None when there is none or it cannot be used (see the module docstring)."""
    path = listing_path(data_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.info("event=listing_unread path=%s error=%r", path, str(exc))
        return None
    try:
        found = orjson.loads(raw)
        if not isinstance(found, dict) or found.get("format") != FORMAT:
            raise ValueError("another format")
        folders = {str(k): _folder(v) for k, v in found["folders"].items()}
        return Record(int(found["version"]), int(found["checked_at_ns"]), folders)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # torn, damaged or foreign: listed afresh
        log.info("event=listing_ignored path=%s reason=%r", path, str(exc))
        return None


def _folder(value: Any) -> Folder:
    """A folder's record, checked in its shape only: its entries are checked where they are used
    (`discovery.Listings`), so that loading a record costs no work per file."""
    if not isinstance(value, list) or len(value) != 7 or not isinstance(value[6], str):
        raise TypeError("a folder is not [mtime, dev, ino, newest, folders, files, entries]")
    if not all(type(n) is int for n in value[:4]) or not isinstance(value[4], list) or not isinstance(value[5], list):
        raise TypeError("a folder's times, identity or names are not what they should be")
    return value


def save_record(data_dir: Path, record: Record) -> None:
    """Write `record` atomically (temporary file and rename). A failure to write it is logged, not raised: the run
    it follows is committed already, and the next run only lists everything again."""
    written = write_record(data_dir, record)
    if written is not None:
        install_record(data_dir, written)


def write_record(data_dir: Path, record: Record) -> Path | None:
    """`record` written to a private temporary file beside its place, which `install_record` renames into it (or
    `discard_record` removes): a run writes it beside its warehouse change and puts it in place once that ends
    well. None when it could not be written (logged, as `save_record` says); a killed run's file is removed here."""
    folders = {path: [*kept[:6], _text(kept[6])] for path, kept in record.folders.items()}
    text = orjson.dumps(
        {"format": FORMAT, "version": record.version, "checked_at_ns": record.checked_at_ns, "folders": folders}
    )
    path = listing_path(data_dir)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        private_dir(path.parent)
        for stale in path.parent.glob(f".{path.name}.tmp-*"):  # a killed run's (one writer at a time: the lock)
            if stale != tmp:
                stale.unlink(missing_ok=True)
        tmp.write_bytes(text)
        os.chmod(tmp, FILE_MODE)
    except OSError as exc:
        log.warning("event=listing_unwritten error=%r (the next run lists every folder)", str(exc))
        discard_record(tmp)
        return None
    return tmp


def install_record(data_dir: Path, written: Path) -> None:
    """Put the record `write_record` wrote in its place (a rename made durable); a failure is logged, as there."""
    try:
        replace_atomic(written, listing_path(data_dir))
    except OSError as exc:
        log.warning("event=listing_unwritten error=%r (the next run lists every folder)", str(exc))
        discard_record(written)


def discard_record(written: Path) -> None:
    """Remove a record `write_record` wrote that is not to be used (the run failed); gone already is fine."""
    with contextlib.suppress(OSError):
        written.unlink(missing_ok=True)


def _text(entries: Any) -> str:
    return entries if isinstance(entries, str) else orjson.dumps(entries).decode()


def merged(before: Mapping[str, Folder], after: Mapping[str, Folder], roots: list[str]) -> dict[str, Folder]:
    """The folders of `after` (this walk's), and those of `before` under none of the `roots` walked now (another
    agent's, in a run limited to some): a folder under a walked root that this walk did not meet is gone."""
    prefixes = tuple(r.rstrip("/") + "/" for r in roots)
    kept = {
        path: folder
        for path, folder in before.items()
        if path not in after and path not in roots and not path.startswith(prefixes)
    }
    kept.update(after)
    return kept
