"""Helpers shared by the tests: where the shared fixtures are, reading a source to outcomes, golden files."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from extractors.bounded import Limits
from extractors.model import Agent, Loaded, Outcome, Session, Source
from extractors.registry import extractor, read_source

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"

# The shared fixtures sit beside the checkout (../shared/fixtures); CI lays a copy there too.
SHARED_FIXTURES = Path(os.environ.get("TRANSCRIPTS_SHARED_FIXTURES", TESTS.parent.parent / "shared" / "fixtures"))

# Folder name under shared/fixtures -> agent.
SHARED_DIRS: dict[str, Agent] = {
    "claude-code": Agent.CLAUDE,
    "codex": Agent.CODEX,
    "grok": Agent.GROK,
    "gemini": Agent.GEMINI,
    "opencode": Agent.OPENCODE,
    "chatgpt": Agent.CHATGPT,
}

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
