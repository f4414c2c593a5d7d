"""Lay out the real captures that `tests/agents/*/real_captures.toml` lists under `[[external]]`, for the contract check
`test_external_real_captures_give_the_counts_checked_by_hand`.

These are real session files kept in other public projects (their test data). This project reads them but never
copies them in: each entry names the repository, the commit and the path, and this command fetches the exact bytes:

    uv run python -m tests.external_captures DIR                 # from GitHub (raw.githubusercontent.com)
    uv run python -m tests.external_captures DIR --mirrors M     # from local git mirrors M/<owner>+<name>/repo
    TRANSCRIPTS_EXTERNAL_CAPTURES=DIR uv run pytest -q tests/test_contract.py -k external

Each file lands at `DIR/<owner>__<name>/<path>`, as the shared fixtures name theirs. Exit codes: 0 every file laid
out, 1 some could not be fetched (each named on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

AGENTS_DIR = Path(__file__).resolve().parent / "agents"
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def entries() -> list[dict[str, str]]:
    """Every `[[external]]` entry of every agent, with its agent, once per (repo, commit, path)."""
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for toml in sorted(AGENTS_DIR.glob("*/real_captures.toml")):
        with toml.open("rb") as f:
            for entry in tomllib.load(f).get("external", []):
                files = [entry["path"], *entry.get("with", [])]  # sidecars the unit reads beside it
                for path in files:
                    key = (entry["repo"], entry["commit"], path)
                    seen.setdefault(key, {"agent": toml.parent.name, "repo": key[0], "commit": key[1], "path": path})
    return list(seen.values())


def from_mirror(mirrors: Path, repo: str, commit: str, path: str) -> bytes:
    folder = mirrors / repo.replace("/", "+") / "repo"
    git_dir = folder / ".git" if (folder / ".git").is_dir() else folder
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True, check=False
    )
    if done.returncode != 0:
        raise OSError(done.stderr.decode(errors="replace").strip() or f"git show failed in {git_dir}")
    return done.stdout


def from_github(repo: str, commit: str, path: str) -> bytes:
    with urllib.request.urlopen(RAW.format(repo=repo, commit=commit, path=path), timeout=60) as response:
        return bytes(response.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.external_captures", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to lay the captures out in")
    parser.add_argument("--mirrors", type=Path, help="local git mirrors, <owner>+<name>/repo, instead of GitHub")
    args = parser.parse_args(argv)
    failed = 0
    for entry in entries():
        target = args.out / entry["repo"].replace("/", "__") / entry["path"]
        try:
            if args.mirrors is not None:
                data = from_mirror(args.mirrors, entry["repo"], entry["commit"], entry["path"])
            else:
                data = from_github(entry["repo"], entry["commit"], entry["path"])
        except OSError as exc:
            failed += 1
            print(f"not fetched: {entry['repo']}@{entry['commit'][:12]}:{entry['path']}: {exc}", file=sys.stderr)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"{entry['agent']:10s} {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
