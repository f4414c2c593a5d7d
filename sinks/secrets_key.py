"""The per-corpus redaction key: `data/redaction.key`, 32 random bytes, mode 0600, created once and read on each run.

The key makes the markers of redacted secrets (HMAC-SHA256) the same for the same secret throughout one corpus
and unguessable without the key. Losing it or replacing it only changes markers: the next `--full` run re-derives
every row with the new key (old and new markers of one secret do not match).
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from sinks.files import FILE_MODE, fsync_path

KEY_FILE = "redaction.key"
KEY_BYTES = 32


def key_path(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def read_key(data_dir: Path) -> bytes | None:
    """The corpus's key, or None when it has none yet. Raises OSError when the file is unusable."""
    path = key_path(data_dir)
    try:
        with path.open("rb") as handle:
            key = handle.read(KEY_BYTES + 1)
            mode = os.fstat(handle.fileno()).st_mode & 0o777
    except FileNotFoundError:
        return None
    if len(key) != KEY_BYTES:
        raise OSError(
            errno.EINVAL,
            f"the redaction key holds {len(key)} bytes, not {KEY_BYTES}; restore it from a backup, or delete it "
            "and run with --full to redact the corpus again under a new key",
            str(path),
        )
    if mode & 0o077:
        os.chmod(path, FILE_MODE)  # like every file of the data directory: private, whatever the umask was
    return key


def load_or_create_key(data_dir: Path) -> bytes:
    """The corpus's key, created (random, 0600, written whole or not at all) when there is none. Call under the
    writer lock. Raises OSError."""
    key = read_key(data_dir)
    if key is not None:
        return key
    key = secrets.token_bytes(KEY_BYTES)
    path = key_path(data_dir)
    tmp = path.with_name(f"{KEY_FILE}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)  # a run killed mid-write leaves no short key behind
    fsync_path(data_dir)
    return key
