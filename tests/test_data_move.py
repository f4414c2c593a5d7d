"""`transcripts data move` and the corpus left in a checkout by older versions: moved whole (renamed on one
filesystem, copied across), private, resumable after a kill, under the lock; reported by `run` and `status`."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from flows.etl import datahome
from flows.etl.datahome import SAMPLE_HOME
from flows.etl.settings import load_settings
from sinks import move as move_module
from sinks.lock import writer_lock
from tests.test_cli import invoke
from tests.test_pipeline import run

ROOT = Path(__file__).resolve().parent.parent


def checkout(tmp_path: Path) -> Path:
    """A checkout of this project (its pyproject.toml) whose data/ holds the repository's files and a corpus."""
    place = tmp_path / "checkout"
    (place / "data").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", place / "pyproject.toml")
    shutil.copy(ROOT / "data" / "README.md", place / "data" / "README.md")
    shutil.copytree(ROOT / "data" / "sample", place / "data" / "sample")
    return place


def fake_corpus(data: Path) -> Path:
    """The corpus's shape (cheap): folders 0700, files 0600, `parquet` a relative symlink into versions/."""
    part = data / "versions" / "v000002" / "sessions" / "agent=claude"
    part.mkdir(parents=True)
    (part / "part-000.parquet").write_bytes(os.urandom(300_000))
    (data / "versions" / "v000002" / "layout.json").write_text("{}")
    (data / "warehouse.duckdb").write_bytes(os.urandom(200_000))
    (data / "ledger.jsonl").write_text('{"run_id": "r1"}\n')
    (data / "redaction.key").write_bytes(b"k" * 32)
    (data / "cache").mkdir()
    (data / "cache" / "warehouse-meta.json").write_text("{}")
    os.symlink("versions/v000002", data / "parquet")
    for path in [data, *data.rglob("*")]:
        if path.name in datahome.REPOSITORY_NAMES or "sample" in path.relative_to(data).parts or path.is_symlink():
            continue
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    return data


def corpus_of(data: Path) -> dict[str, tuple[str, str]]:
    """Every corpus entry under `data` (not the repository's files): kind and content (a link's target)."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(data.rglob("*")):
        rel = path.relative_to(data)
        if rel.parts[0] in datahome.REPOSITORY_NAMES or str(rel) in (".lock", move_module.MOVING_TO):  # the place's
            continue
        if path.is_symlink():
            found[str(rel)] = ("link", os.readlink(path))
        elif path.is_dir():
            found[str(rel)] = ("dir", "")
        else:
            found[str(rel)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def repository_files(data: Path) -> dict[str, str]:
    return {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data.rglob("*"))
        if p.is_file() and p.relative_to(data).parts[0] in datahome.REPOSITORY_NAMES
    }


def assert_private(data: Path) -> None:
    for path in [data, *data.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


def assert_moved(old: Path, new: Path, before: dict[str, tuple[str, str]], kept: dict[str, str]) -> None:
    assert corpus_of(new) == before
    assert os.readlink(new / "parquet") == "versions/v000002"
    assert (new / "parquet" / "layout.json").exists(), "the relative link resolves in its new place"
    assert sorted(os.listdir(old)) == ["README.md", "sample"], "only the corpus moved; its lock and marks are gone"
    assert repository_files(old) == kept
    assert not (new / move_module.MOVED_FROM).exists()
    assert not move_module.staging_of(new).exists()


def test_a_move_on_one_filesystem_renames_the_corpus_and_leaves_the_repository_files(tmp_path: Path) -> None:
    old = fake_corpus(checkout(tmp_path) / "data")
    before, kept = corpus_of(old), repository_files(old)
    inode = os.stat(old / "warehouse.duckdb").st_ino
    new = tmp_path / "home" / ".local" / "share" / "transcripts"  # its parents do not exist yet
    code, out = invoke("data", "move", str(old), str(new))
    assert code == 0, out
    assert "renamed" in out
    assert_moved(old, new, before, kept)
    assert os.stat(new / "warehouse.duckdb").st_ino == inode, "renamed, not copied"
    assert_private(new)


def test_a_move_across_filesystems_copies_a_real_corpus_privately_then_clears_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = checkout(tmp_path) / "data"
    run(load_settings(home=SAMPLE_HOME, data_dir=old, env={}, lock_wait=5))
    before, kept = corpus_of(old), repository_files(old)
    mtime = os.stat(old / "warehouse.duckdb").st_mtime_ns
    real_rename = move_module._rename

    def across(src: Path, dst: Path) -> None:  # the source on another filesystem: every rename out of it fails
        if Path(src).is_relative_to(old):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src))
        real_rename(src, dst)

    monkeypatch.setattr(move_module, "_rename", across)
    new = tmp_path / "elsewhere" / "transcripts"
    new.mkdir(parents=True)  # an empty folder is a fine target
    code, out = invoke("data", "move", str(old), str(new))
    assert code == 0, out
    assert "copied, then removed" in out
    assert corpus_of(new) == before
    assert sorted(os.listdir(old)) == ["README.md", "sample"] and repository_files(old) == kept
    assert os.stat(new / "warehouse.duckdb").st_mtime_ns == mtime
    assert not os.readlink(new / "parquet").startswith("/"), "the snapshot link stays relative"
    assert_private(new)
    con = duckdb.connect(str(new / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM sessions").fetchone() == (9,)
    finally:
        con.close()
    code, out = invoke("status", "--data-dir", str(new))
    assert code == 0 and "9 loaded" in out, out


def _move_process(old: Path, new: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli.app", "data", "move", str(old), str(new)],
        cwd=old.parent,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def other_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A folder on another filesystem than tmp_path (the RAM disk), removed at the end whatever happens."""
    if not Path("/dev/shm").is_dir() or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no /dev/shm to move to")
    if os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the temporary folder")
    place = Path(tempfile.mkdtemp(prefix="transcripts-move-", dir="/dev/shm"))
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_a_copy_across_real_filesystems_killed_midway_finishes_when_run_again(
    tmp_path: Path, other_filesystem: Path
) -> None:
    old = fake_corpus(checkout(tmp_path) / "data")
    before, kept = corpus_of(old), repository_files(old)
    new = other_filesystem / "transcripts"
    killed = _move_process(old, new, {"TRANSCRIPTS_FAILPOINT": "move_copy"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    staging = move_module.staging_of(new)
    assert staging.is_dir() and not new.exists(), "killed after the first file: the target is not there yet"
    assert corpus_of(old) == before, "the source is whole until the target is"
    assert (old / move_module.MOVING_TO).read_text().strip() == str(new)
    code, out = invoke("data", "move", str(old), str(tmp_path / "somewhere-else"))
    assert code == 2 and "under way" in out and str(new) in out, out
    done = _move_process(old, new, {})
    assert done.returncode == 0, done.stderr
    assert "copied, then removed" in done.stdout
    assert_moved(old, new, before, kept)
    assert_private(new)


@pytest.mark.parametrize("point", ["move_entry", "move_renamed"])
def test_a_move_killed_at_any_step_finishes_when_run_again(tmp_path: Path, point: str) -> None:
    old = fake_corpus(checkout(tmp_path) / "data")
    before, kept = corpus_of(old), repository_files(old)
    new = tmp_path / "new"
    killed = _move_process(old, new, {"TRANSCRIPTS_FAILPOINT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if point == "move_renamed":
        assert (new / move_module.MOVED_FROM).exists() and (old / move_module.MOVING_TO).exists(), "not cleared up"
    else:
        assert not new.exists() and move_module.staging_of(new).is_dir()
    done = _move_process(old, new, {})
    assert done.returncode == 0, done.stderr
    assert_moved(old, new, before, kept)


def test_a_move_refuses_a_target_that_is_not_empty_a_folder_without_corpus_and_itself(tmp_path: Path) -> None:
    old = fake_corpus(checkout(tmp_path) / "data")
    before = corpus_of(old)
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    code, out = invoke("data", "move", str(old), str(full))
    assert code == 2 and "is not empty" in out, out
    assert (full / "notes.txt").read_text() == "mine" and sorted(os.listdir(full)) == ["notes.txt"]
    code, out = invoke("data", "move", str(old), str(old))
    assert code == 2 and "the same folder" in out, out
    code, out = invoke("data", "move", str(old), str(old / "inside"))
    assert code == 2 and "inside one another" in out, out
    code, out = invoke("data", "move", str(tmp_path / "full"), str(tmp_path / "new"))
    assert code == 2 and "no corpus in" in out, out
    assert corpus_of(old) == before and not (old / move_module.MOVING_TO).exists()
    assert not (tmp_path / "new").exists() and not move_module.staging_of(tmp_path / "new").exists()


def test_a_move_waits_for_a_run_writing_the_corpus_then_is_busy(tmp_path: Path) -> None:
    old = fake_corpus(tmp_path / "data")
    before = corpus_of(old)
    with writer_lock(old, 1):
        code, out = invoke("data", "move", str(old), str(tmp_path / "new"), "--wait", "0.3")
    assert code == 3 and "busy" in out, out
    assert corpus_of(old) == before and not (tmp_path / "new").exists()


def test_a_data_dir_of_its_own_is_moved_whole_in_one_rename(tmp_path: Path) -> None:
    old = fake_corpus(tmp_path / "data")
    before, inode = corpus_of(old), os.stat(old).st_ino
    new = tmp_path / "a" / "new"
    code, out = invoke("data", "move", str(old), str(new), "--json")
    assert code == 0, out
    assert json.loads(out)["outcome"] == "renamed"
    assert os.stat(new).st_ino == inode, "the folder itself was renamed: atomic"
    assert corpus_of(new) == before and not (new / ".lock").exists()
    assert not old.exists()
    assert_private(new)


def _cli_in(folder: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli.app", *args],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_and_status_in_a_checkout_holding_an_old_corpus_name_the_move(tmp_path: Path) -> None:
    place = checkout(tmp_path)
    old = fake_corpus(place / "data")
    before = corpus_of(old)
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    new = tmp_path / "xdg" / "transcripts"
    status = _cli_in(place, "status", env=env)
    assert status.returncode == 0, status.stderr
    assert "warning:" in status.stderr and f"transcripts data move {old}" in status.stderr, status.stderr
    refused = _cli_in(place, "run", "--home", str(tmp_path / "home"), env=env)
    assert refused.returncode == 2, refused.stderr
    assert f"transcripts data move {old}" in refused.stderr and str(new) in refused.stderr
    assert "Traceback" not in refused.stderr and not new.exists(), "no second corpus beside the old one"
    nightly = _cli_in(place, "schedule", "--home", str(tmp_path / "home"), env=env)
    assert nightly.returncode == 2 and f"transcripts data move {old}" in nightly.stderr, nightly.stderr
    moved = _cli_in(place, "data", "move", str(old), env=env)
    assert moved.returncode == 0, moved.stderr
    assert corpus_of(new) == before
    status = _cli_in(place, "status", env=env)
    assert "warning" not in status.stderr and str(new) in status.stdout, status.stderr
    explicit = _cli_in(place, "status", "--data-dir", str(tmp_path / "other"), env=env)
    assert "warning" not in explicit.stderr, "a data dir given explicitly is the person's choice"
