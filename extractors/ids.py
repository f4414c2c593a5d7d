"""Every id in the corpus is built here: derived from the source, never random, never from the clock."""

from __future__ import annotations

import hashlib

from extractors.model import Agent


def session_id(agent: Agent, native_id: str) -> str:
    """`<agent>-<native session id>`, e.g. `claude-55604662-cf2a-...`."""
    return f"{agent.value}-{native_id}"


def subagent_session_id(parent_session_id: str, agent_id: str) -> str:
    """A subagent / sidechain session: `<parent session id>-agent-<its agent id>`."""
    return f"{parent_session_id}-agent-{agent_id}"


def turn_id(session_id_: str, turn_index: int) -> str:
    """`<session_id>-<turn index>`; the index is the record's position in the source, counted before filtering."""
    return f"{session_id_}-{turn_index}"


def tool_call_id(session_id_: str, native_call_id: str) -> str:
    """`<session_id>-call-<native call id>` (call ids are only unique within a session)."""
    return f"{session_id_}-call-{native_call_id}"


def usage_id(session_id_: str, turn_index: int) -> str:
    """One usage row per model response, keyed like the turn it belongs to."""
    return f"{session_id_}-usage-{turn_index}"


def stable_hash(data: bytes | str) -> str:
    """A hex digest that is the same on every machine and version (unlike polars/DuckDB `hash()`)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def bucket_of(session_id_: str, buckets: int) -> int:
    """Which Parquet file of its agent partition a session's rows live in."""
    digest = hashlib.md5(session_id_.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big") % buckets
