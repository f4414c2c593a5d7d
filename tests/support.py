"""Helpers shared by the tests: where the shared fixtures are, reading a source to outcomes, golden files."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from extractors.bounded import Limits
from extractors.model import Agent, Loaded, Outcome, Session, Source
from extractors.registry import extractor, read_source

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"

# The shared fixtures sit beside the checkout (../shared/fixtures); CI lays a copy there too. A test reads them only
# after shared_fixtures() below said they are there.
SHARED_FIXTURES = Path(os.environ.get("TRANSCRIPTS_SHARED_FIXTURES", TESTS.parent.parent / "shared" / "fixtures"))

# Folder name under shared/fixtures -> agent.
SHARED_DIRS: dict[str, Agent] = {
    "claude-code": Agent("claude"),
    "codex": Agent("codex"),
    "grok": Agent("grok"),
    "gemini": Agent("gemini"),
    "opencode": Agent("opencode"),
    "chatgpt": Agent("chatgpt"),
    "cursor": Agent("cursor"),
    "pi": Agent("pi"),
    "cline": Agent("cline"),
    "copilot": Agent("copilot"),
    "aider": Agent("aider"),
    "claude-ai": Agent("claude_ai"),  # no shared fixture folder: the external captures do the work
    "amp": Agent("amp"),  # no shared fixture folder and no real capture found (tests/agents/amp/real_captures.toml)
    "qwen": Agent("qwen"),  # no shared fixture folder: the external captures do the work
    "droid": Agent("droid"),  # no shared fixture folder: the external captures do the work
    "goose": Agent("goose"),  # no shared fixture folder: the external captures do the work
    "kiro": Agent("kiro"),  # no shared fixture folder: the external captures do the work
}


def under_ci() -> bool:
    """CI=true (or 1, yes), as CI services set it."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def shared_fixtures(*parts: str) -> Path:
    """`SHARED_FIXTURES / parts`, for a test that reads the shared fixtures: call it before reading any of them.

    The one rule for them: when the folder is absent (a fresh clone has no ../shared beside it), the test is skipped
    and says where it looked; under CI=true it fails instead (CI lays the fixtures there: a missing copy must not
    pass as a green run that tested less). When the folder is there, a file missing in it fails the test that reads
    it, as any missing input does.
    """
    if not SHARED_FIXTURES.is_dir():
        where = f"no shared fixtures at {SHARED_FIXTURES} (TRANSCRIPTS_SHARED_FIXTURES, or ../shared/fixtures)"
        if under_ci():
            pytest.fail(f"{where}: CI=true needs them", pytrace=False)
        pytest.skip(where)
    return SHARED_FIXTURES.joinpath(*parts)


def shared_fixture_files(folder: str, pattern: str) -> list[Path]:
    """For `parametrize`: the files under a shared folder matching `pattern`, found at collection. With none (the
    folder absent), one placeholder path, so that the test runs, calls shared_fixtures() and is skipped or fails by
    the rule above rather than being collected as an empty parameter set."""
    files = sorted(p for p in (SHARED_FIXTURES / folder).rglob(pattern) if p.is_file())
    return files or [SHARED_FIXTURES / folder / f"(no {pattern} file)"]


# Settled files: tests that do not test deferral read with no settle time.
SETTLED = Limits(settle_seconds=0.0)


def outcomes_under(agent: Agent, root: Path, limits: Limits = SETTLED) -> dict[str, list[Outcome]]:
    """Discover every source under `root` and read it: {source path relative to root: outcomes}."""
    module = extractor(agent)
    found: dict[str, list[Outcome]] = {}
    for source in module.discover(root):
        found[os.path.relpath(source.path, root)] = list(read_source(source, limits))
    return found


def read_one(agent: Agent, path: Path, limits: Limits = SETTLED) -> list[Outcome]:
    """Read one file as a source of `agent` (as discovery would list it)."""
    st = path.stat()
    source = Source(agent, str(path), st.st_size, st.st_mtime_ns, str(path.parent))
    return list(read_source(source, limits))


def loaded_sessions(outcomes: list[Outcome]) -> list[Session]:
    return [o.session for o in outcomes if isinstance(o, Loaded)]


def canonical(value: Any) -> Any:
    """A JSON-ready, deterministic view of a Session (or any model value) for golden files."""
    if isinstance(value, Session):
        data = {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "census"}
        data["census"] = sorted(
            [[kind, version, str(disposition), n] for (kind, version, disposition), n in value.census.items()]
        )
        return data
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    return value


def assert_golden(name: str, value: Any) -> None:
    """Compare `value` with tests/golden/<name>.json; UPDATE_GOLDEN=1 rewrites the file (review the diff)."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(canonical(value), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with UPDATE_GOLDEN=1 and review it"
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text), f"golden output changed: {path}"


def write_jsonl(path: Path, records: list[dict[str, Any]] | list[str], *, newline_at_end: bool = True) -> Path:
    """Write records (dicts, or raw strings taken as lines) as JSONL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + ("\n" if newline_at_end else ""), encoding="utf-8")
    return path
