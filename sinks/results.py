"""What reading a batch gave, as the sinks see it: per-source results and staged rows, with no format in sight.

The batch worker in `flows.etl.batch` fills these in; the commit writes them. A source is seen through `SourceRef`, the
few attributes every discovered unit has, so that nothing here depends on how a reader describes its sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sinks.store import FileKey


class SourceRef(Protocol):
    """A discovered source unit: enough to key the manifest and fingerprint the unit."""

    @property
    def agent(self) -> str: ...  # the partition value (a StrEnum whose value is the agent name is fine)

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def mtime_ns(self) -> int: ...

    @property
    def root(self) -> str: ...

    @property
    def kind(self) -> str: ...


def agent_of(source: SourceRef) -> str:
    """The agent partition value of a source (`str()` of a StrEnum is its value)."""
    return str(source.agent)


@dataclass(frozen=True, slots=True)
class Previous:
    """What the manifest knew of a source before this run."""

    content_sha256: str | None
    parser_version: str
    outcome: str


@dataclass(frozen=True, slots=True)
class Staged:
    """The rows of one (table, agent, bucket) in a scratch file: the record batch at byte `offset`, `size` bytes long
    in the file (`files.ScratchFile.read`), of `length` rows and `nbytes` bytes in memory."""

    path: str
    offset: int
    size: int
    length: int
    nbytes: int


@dataclass(slots=True)
class SourceResult:
    """What reading one source gave (the sessions themselves are staged on disk, not held here)."""

    source: SourceRef
    content_sha256: str | None = None
    loaded: list[tuple[str, int]] = field(default_factory=list)  # (session id, turns kept)
    rejects: list[dict[str, Any]] = field(default_factory=list)  # rows of `rejects`: rejections and deferrals
    alarms: int = 0  # rejections that are problems (not the benign codes): they make `status --check` fail
    touched_only: bool = False  # fingerprint changed, content and parser did not: nothing re-read
    bytes_read: int = 0

    @property
    def deferred(self) -> bool:
        return any(r["outcome"] == "deferred" for r in self.rejects)

    @property
    def rejected(self) -> int:
        return sum(1 for r in self.rejects if r["outcome"] == "rejected")


@dataclass(slots=True)
class BatchResult:
    batch_no: int
    sources: list[SourceResult]
    staged: dict[FileKey, list[Staged]]  # staged rows of this batch per (table, agent, bucket)
    turns: int = 0
    flushes: int = 0
