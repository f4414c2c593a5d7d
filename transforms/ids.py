"""Every id of the corpus rows, and the bucket a session's rows live in: derived, never random, never from the clock.

A session's own id is the format's business (`extractors.ids`, re-exported here): the extractor that knows the
format decides what the native session id is. Everything built from it (turn, tool-call and usage ids, the Parquet
bucket) is built here, for the normalizer and the sinks alike.
"""

from __future__ import annotations

import hashlib

from extractors.ids import session_id, stable_hash, subagent_session_id

__all__ = [
    "bucket_of",
    "session_id",
    "stable_hash",
    "subagent_session_id",
    "tool_call_id",
    "turn_id",
    "usage_id",
]


def turn_id(session_id_: str, turn_index: int) -> str:
    """`<session_id>-<turn index>`; the index is the record's position in the source, counted before filtering."""
    return f"{session_id_}-{turn_index}"


def tool_call_id(session_id_: str, native_call_id: str) -> str:
    """`<session_id>-call-<native call id>` (call ids are only unique within a session)."""
    return f"{session_id_}-call-{native_call_id}"


def usage_id(session_id_: str, turn_index: int) -> str:
    """One usage row per model response, keyed like the turn it belongs to."""
    return f"{session_id_}-usage-{turn_index}"


def bucket_of(session_id_: str, buckets: int) -> int:
    """Which Parquet file of its agent partition a session's rows live in."""
    digest = hashlib.md5(session_id_.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big") % buckets
