"""Reason codes and the two exceptions a reader raises; the code decides a source's fate.

Inside a reader, raise `RejectError` or `DeferError`; `extractors.registry.read_source` is the one boundary that
turns them into `Rejected` / `Deferred` values, and any other exception (a bug) into a `source_unreadable` rejection.
"""

from __future__ import annotations

from enum import StrEnum


class RejectCode(StrEnum):
    """Why a session (or a whole source) was not loaded. Stable: these strings are stored in `rejects`."""

    INVALID_JSON = "invalid_json"  # a line / document that is not JSON (before the last line for JSONL)
    INVALID_UTF8 = "invalid_utf8"  # bytes that do not decode as UTF-8
    BAD_SHAPE = "bad_shape"  # a known record kind with the wrong structure
    MISSING_SESSION_ID = "missing_session_id"  # no session id can be determined
    MISSING_TIMESTAMP = "missing_timestamp"  # no usable time anywhere in the session
    LIMIT_EXCEEDED = "limit_exceeded"  # a named bound in `Limits` was passed
    INCONSISTENT_SOURCE = "inconsistent_source"  # e.g. two session ids where one is expected
    UNDECIDABLE_THREAD = "undecidable_thread"  # a cycle or dangling parent in a message tree
    TRUNCATED_TAIL = "truncated_tail"  # a partial last line that stayed past the settle time
    SOURCE_UNREADABLE = "source_unreadable"  # cannot be opened, wrong SQLite schema, not the expected container
    NO_CONVERSATION = "no_conversation"  # well-formed, but holds no session (e.g. only `summary` lines)
    UNSUPPORTED_FORMAT = "unsupported_format"  # a recognised product/format this version does not read
    # The same session is loaded from another, preferred source (OpenCode JSON storage migrated into opencode.db;
    # a Codex rollout present in both sessions/ and archived_sessions/). Not an error: nothing is lost.
    DUPLICATE = "duplicate"


# Codes that describe a source with nothing to load rather than a problem; `status --check` does not alarm on them.
BENIGN_REJECT_CODES = frozenset({RejectCode.NO_CONVERSATION, RejectCode.DUPLICATE})


class DeferCode(StrEnum):
    """Why a source is left for the next run (not an error)."""

    WRITE_IN_PROGRESS = "write_in_progress"  # last line has no newline and the file changed recently
    CHANGED_DURING_READ = "changed_during_read"  # size or mtime moved while we read it


class ExtractError(Exception):
    """Base of the classified failures a reader may raise."""

    def __init__(
        self,
        code: RejectCode | DeferCode,
        detail: str,
        *,
        line: int | None = None,
        offset: int | None = None,
        session_hint: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.line = line
        self.offset = offset
        self.session_hint = session_hint


class RejectError(ExtractError):
    """The session (or source) cannot be loaded whole; nothing of it is loaded."""

    code: RejectCode

    def __init__(
        self,
        code: RejectCode,
        detail: str,
        *,
        line: int | None = None,
        offset: int | None = None,
        session_hint: str | None = None,
    ) -> None:
        super().__init__(code, detail, line=line, offset=offset, session_hint=session_hint)


class DeferError(ExtractError):
    """The source is not ready; read it again next run."""

    code: DeferCode

    def __init__(self, code: DeferCode, detail: str) -> None:
        super().__init__(code, detail)
