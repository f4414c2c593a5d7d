"""Private, atomic file operations: the corpus holds pasted keys and private code, so it is 0700/0600."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents as 0700, whatever the umask; fix the mode of an existing `path`."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files created inside (by us, pyarrow or DuckDB) get no group/other bits."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def fsync_path(path: Path) -> None:
    """fsync a file, or a folder (its entries: a rename or a new file in it made durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FICLONE = 0x40049409  # Linux ioctl (linux/fs.h; fcntl.FICLONE from Python 3.12): share the source's blocks


def clone_or_copy(src: Path, dst: Path) -> str:
    """Copy `src` to `dst`, a new private file, as cheaply as the filesystem allows, and say how it was done.

    "clone": the filesystem shares the blocks until either file is written (Linux FICLONE on btrfs, XFS,
    bcachefs, ...; macOS clonefile on APFS): no data is read or written, whatever the size. "copy_file_range":
    copied inside the kernel (NFS and some filesystems copy on the server or share blocks too). "copy": a plain
    copy. ext4 and tmpfs cannot clone, so there the time is proportional to the size.
    """
    return "clone" if clone(src, dst) else copy(src, dst)


def clone(src: Path, dst: Path) -> bool:
    """Make `dst`, a new private file, share the blocks of `src` (see `clone_or_copy`); False, with no `dst` left,
    when the filesystem cannot clone."""
    if sys.platform == "darwin":
        return _clonefile(src, dst)
    if not sys.platform.startswith("linux"):
        return False
    with src.open("rb") as source:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            import fcntl

            fcntl.ioctl(fd, FICLONE, source.fileno())
            return True
        except OSError:  # EOPNOTSUPP, EXDEV, EINVAL: no clone here
            pass
        finally:
            os.close(fd)
    dst.unlink()
    return False


def copy(src: Path, dst: Path) -> str:
    """Copy `src` to `dst`, a new private file, without a clone: "copy_file_range" (in the kernel) or "copy"."""
    with src.open("rb") as source:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            if _copy_range(source.fileno(), fd, os.fstat(source.fileno()).st_size):
                return "copy_file_range"
        finally:
            os.close(fd)
    shutil.copyfile(src, dst)  # dst exists (0600): truncated and written again
    return "copy"


def _copy_range(src_fd: int, dst_fd: int, size: int) -> bool:
    """Copy `size` bytes with os.copy_file_range from the start of both files; False when the kernel or the
    filesystem will not (ENOSYS, EXDEV across filesystems on old kernels, EINVAL, ...)."""
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is None:
        return False
    done = 0
    try:
        while done < size:
            n = copy_range(src_fd, dst_fd, size - done, done, done)
            if n == 0:  # the source shrank while copied: not a copy of what was there
                return False
            done += n
    except OSError:
        return False
    return True


def _clonefile(src: Path, dst: Path) -> bool:
    """macOS clonefile(2) (APFS); False when the call or the filesystem cannot clone."""
    import ctypes

    clonefile = getattr(ctypes.CDLL(None, use_errno=True), "clonefile", None)
    if clonefile is None:
        return False
    return bool(clonefile(os.fsencode(src), os.fsencode(dst), 0) == 0)


# A Parquet file at least this big is decoded on Arrow's thread pool; a smaller one in the calling thread. The pool
# starts with the first read that asks for it, and in a fresh process (every run) that read took 0.06-0.13 s where
# the same file took 0.02 s in one thread (the 5 GB corpus's 4.4 MB bucket file, or its 8 manifest files: 0.022 s
# against 0.06-0.08 s); the project's files are buckets of a few MB (one row group each), which one thread decodes
# as fast as the pool once it runs. One session appended at 5 GB: ~25 ms less, in
# docs/benchmarks.md "Fifth round, 2026-12-05 (commits a8e373a..5f8ebc9)".
THREADED_READ_BYTES = 64 * 1024 * 1024


def read_parquet(path: Path | str, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file, whole or some of its columns, as `pq.read_table` gives it, without the dataset layer that
    goes through: in a fresh process that layer's import and discovery made the first read (the manifest, in every
    run) ~0.13 s against ~0.01 s here; a no-op at 1 GB measured ~0.04-0.05 s quicker. Decoded in this thread unless
    the file is `THREADED_READ_BYTES` or more."""
    threads = os.stat(path).st_size >= THREADED_READ_BYTES
    with pq.ParquetFile(path) as file:
        return file.read(columns=columns, use_threads=threads)


def write_parquet(
    table: pa.Table, path: Path, dictionary: Sequence[str] | None = None, row_group_rows: int | None = None
) -> None:
    """Write one Parquet file (zstd, deterministic for the same rows), private and fsynced; `dictionary` names the
    columns to dictionary-encode (None: every column), `row_group_rows` the rows per row group (None: Arrow's)."""
    private_dir(path.parent)
    use_dictionary: bool | list[str] = True if dictionary is None else list(dictionary)
    pq.write_table(
        table,
        path,
        compression="zstd",
        write_statistics=True,
        use_dictionary=use_dictionary,
        row_group_size=row_group_rows,
    )
    os.chmod(path, FILE_MODE)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet_parts(parts: Iterable[pa.Table], schema: pa.Schema, path: Path) -> None:
    """Write one Parquet file a part at a time (a row group or more each), private and fsynced, as `write_parquet`
    does: for a file too big to hold whole. Writes nothing when no part has a row."""
    private_dir(path.parent)
    writer: pq.ParquetWriter | None = None
    try:
        for part in parts:
            if not part.num_rows:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, schema, compression="zstd", write_statistics=True)
            writer.write_table(part)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return
    os.chmod(path, FILE_MODE)
    fsync_path(path)


def write_scratch(batches: Iterable[pa.RecordBatch], schema: pa.Schema, path: Path) -> list[tuple[int, int]]:
    """Write a private scratch file (a run's staging) as an uncompressed Arrow IPC stream, one record batch per item
    of `batches`; no fsync (a crash discards staging anyway). Returns where each batch lies in the file, (offset,
    size), for `ScratchFile.read` to read it alone.

    A stream, not the IPC file format: opening one of those reads its footer, the list of every batch in it, which a
    commit did for each staged file and each group of buckets (5 GB: 54,000 opens of files of hundreds of batches, a
    tenth of the commit's thread time). A stream's reader needs only its schema, the first message."""
    private_dir(path.parent)
    spans: list[tuple[int, int]] = []
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            start = sink.tell()
            writer.write_batch(batch)  # the first one writes the schema before it: `read` passes over it
            spans.append((start, sink.tell() - start))
    os.chmod(path, FILE_MODE)
    return spans


class ScratchFile:
    """A scratch file open for reading its record batches, by one thread at a time.

    A batch is read with `pread` into memory of its own, which goes when the batch does. `mapped`: memory-mapped
    instead, for rows too many to read whole, of which only some columns are used: a batch costs nothing until its
    pages are touched, and then they count in the process's RSS until the last of its buffers goes. (Every staged
    file used to be mapped. The kernel maps the cached pages around each page touched, so reading a bucket's few
    rows from each file kept 2-3 times their bytes in RSS: ~130 MB of a 1 GB load's commit.)
    """

    def __init__(self, path: Path | str, *, mapped: bool = False) -> None:
        self.path = str(path)
        self._file = pa.memory_map(str(path), "r") if mapped else pa.OSFile(str(path), "rb")
        try:
            self._schema = pa.ipc.open_stream(self._file).schema
        except BaseException:
            self._file.close()
            raise

    def read(self, offset: int, size: int) -> pa.Table:
        """The record batch `write_scratch` put at (`offset`, `size`), as a table."""
        return self._parse(self._bytes(offset, size))

    def read_run(self, spans: Sequence[tuple[int, int]]) -> list[pa.Table]:
        """The record batches at `spans`, which lie end to end in the file, with one read (they share its memory)."""
        start, end = spans[0][0], spans[-1][0] + spans[-1][1]
        data = self._bytes(start, end - start)
        return [self._parse(data.slice(offset - start, size)) for offset, size in spans]

    def _bytes(self, offset: int, size: int) -> pa.Buffer:
        """`size` bytes at `offset`: read into memory of their own, or where they lie in a mapped file."""
        self._file.seek(offset)
        return self._file.read_buffer(size)

    def _parse(self, data: pa.Buffer) -> pa.Table:
        messages = pa.ipc.MessageReader.open_stream(data)
        message = messages.read_next_message()
        if message.type == "schema":  # the stream's own, written with its first batch
            message = messages.read_next_message()
        return pa.Table.from_batches([pa.ipc.read_record_batch(message, self._schema)])

    def close(self) -> None:
        self._file.close()


def replace_atomic(src: Path, dst: Path) -> None:
    """Rename `src` onto `dst` in one step and make the rename durable."""
    os.replace(src, dst)
    fsync_path(dst.parent)


def write_private_atomic(path: Path, write: Callable[[Path], object], *, stale: str | None = None) -> None:
    """Write a private file of ours atomically: `write` fills a temporary file beside `path`, which is made private
    and renamed over it. Files of `path`'s folder matching the glob `stale` (an older version's) go first."""
    private_dir(path.parent)
    for old in path.parent.glob(stale) if stale else ():
        if old != path:
            old.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    write(tmp)
    os.chmod(tmp, FILE_MODE)
    replace_atomic(tmp, path)


def replace_releasing(src: Path, dst: Path) -> None:
    """replace_atomic, with the blocks of the file it replaces freed in a background thread.

    Freeing a file's blocks is the filesystem's work at its last unlink (ext4: ~0.4 ms per MB, 40 ms for a 100 MB
    warehouse) and would hold up the swap; holding the old file open across the rename moves that work to the
    close, which a thread does while the run goes on (or the kernel at exit). Readers that have the old file open
    are not affected either way.
    """
    try:
        old: int | None = os.open(dst, os.O_RDONLY)
    except FileNotFoundError:
        old = None
    try:
        replace_atomic(src, dst)
    finally:
        if old is not None:
            threading.Thread(target=os.close, args=(old,), name="release-old-file", daemon=True).start()


def remove_tree(path: Path) -> None:
    """Remove a file or folder tree if it exists (our own staging and old versions only)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.exists():
        return
    shutil.rmtree(path)  # links inside are removed, never followed
