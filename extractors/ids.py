"""A session's identity, as the format decides it: `<agent>-<native id>` and subagent ids, and a stable digest.

The ids built from a session id (turns, tool calls, usage, Parquet buckets) are `transforms.ids`.
"""

from __future__ import annotations

import hashlib

from extractors.model import Agent


def session_id(agent: Agent, native_id: str) -> str:
    """`<agent>-<native session id>`, e.g. `claude-55604662-cf2a-...`."""
    return f"{agent}-{native_id}"


def subagent_session_id(parent_session_id: str, agent_id: str) -> str:
    """A subagent / sidechain session: `<parent session id>-agent-<its agent id>`."""
    return f"{parent_session_id}-agent-{agent_id}"


def stable_hash(data: bytes | str) -> str:
    """A hex digest that is the same on every machine and version (unlike polars/DuckDB `hash()`)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()
