"""Where the corpus lives by default (the user's data home, never a checkout), where the sample is shipped and
loaded, and a corpus left in the checkout by older versions. Stdlib only: `--help` and `status` import it."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent  # the checkout (or site-packages, when installed)
NAME = "transcripts"
SAMPLE_MARKER = ".sample"  # in a data dir the sample was loaded into: no real run writes there, nor the reverse
# What a corpus holds (any of them): a folder with none of these is not one.
CORPUS_NAMES = ("warehouse.duckdb", "versions", "parquet", "ledger.jsonl")
# The repository's own files in its data/ folder: a move leaves them where they are.
REPOSITORY_NAMES = frozenset({"README.md", "sample"})
MOVING_TO = ".moving-to"  # in a data dir being moved (sinks/move.py): the target


def data_home(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """`$XDG_DATA_HOME` (an absolute path; the XDG spec ignores a relative one), else `~/.local/share`, or
    `~/Library/Application Support` on macOS."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg)
    home = Path(env.get("HOME") or Path.home())
    if (platform or sys.platform) == "darwin":
        return home / "Library" / "Application Support"
    return home / ".local" / "share"


def default_data_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The corpus's default place: `<data home>/transcripts`. Never the checkout: a `git clean` or a re-clone
    there would delete an archive that may hold the only copy of sessions the agents have since deleted."""
    return data_home(env, platform) / NAME


def sample_data_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where `run --sample` loads the sample: `<data home>/transcripts-sample`, beside the corpus, never in it."""
    return data_home(env, platform) / f"{NAME}-sample"


def _shipped_sample() -> Path:
    packaged = Path(str(resources.files("flows") / "sample"))
    return packaged if packaged.is_dir() else PROJECT_DIR / "data" / "sample"


SAMPLE_DIR = _shipped_sample()


def sample_source_dir() -> Path:
    """The sample shipped with the tool: in the installed package (flows/sample, copied from data/sample when the
    wheel is built), else the checkout's data/sample (the single copy in the repository)."""
    return SAMPLE_DIR


SAMPLE_HOME = SAMPLE_DIR / "home"  # what `run --sample` loads


def is_sample(path: Path) -> bool:
    """Whether `path` is in the shipped sample (a run or backfill of it goes to the sample's data dir)."""
    try:
        return path.resolve().is_relative_to(sample_source_dir().resolve())
    except OSError:
        return False


def holds_corpus(folder: Path) -> bool:
    return any(os.path.lexists(folder / name) for name in CORPUS_NAMES)


def _is_checkout(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return 'name = "agent-transcripts"' in text


def old_corpus(data_dir: Path, origin: str, cwd: Path | None = None) -> Path | None:
    """A corpus older versions wrote in a checkout's `data/` (this checkout's, or the working directory's), found
    when the data dir is the default one, which is elsewhere; None when there is none."""
    if origin != "default":
        return None
    places = [PROJECT_DIR]
    with contextlib.suppress(OSError):  # a working directory that is gone
        places.append(cwd or Path.cwd())
    for place in places:
        old = place / "data"
        moving = os.path.lexists(old / MOVING_TO)
        if old.absolute() != data_dir.absolute() and (holds_corpus(old) or moving) and _is_checkout(place):
            return old.absolute()
    return None


def old_corpus_message(data_dir: Path, origin: str) -> str | None:
    """What to tell a person whose corpus is still in a checkout (see `old_corpus`), or None."""
    old = old_corpus(data_dir, origin)
    if old is None:
        return None
    try:
        moving = (old / MOVING_TO).read_text(encoding="utf-8").strip()
    except OSError:
        moving = ""
    if moving:
        return (
            f"a move of the corpus in {old} to {moving} was begun and not finished; finish it with: "
            f"transcripts data move {_quote(str(old))} {_quote(moving)}"
        )
    if holds_corpus(data_dir):
        return (
            f"a corpus written by an older version is still in {old} (inside a checkout, where `git clean` or a "
            f"re-clone deletes it), and another is in {data_dir}, the data dir now; that one is not updated: "
            f"look at it with --data-dir {_quote(str(old))}, or move it elsewhere with "
            f"`transcripts data move {_quote(str(old))} NEW_DIR`"
        )
    return (
        f"your corpus is in {old}, inside a checkout (where `git clean` or a re-clone deletes it); the data dir is "
        f"now {data_dir}. Move it there with: {move_command(old)}  "
        f"(or keep it where it is: --data-dir {_quote(str(old))} or TRANSCRIPTS_DATA_DIR)"
    )


def move_command(old: Path) -> str:
    """The one command that moves the corpus at `old` to the default data dir."""
    return f"transcripts data move {_quote(str(old))}"


def _quote(text: str) -> str:
    return shlex.quote(text)
