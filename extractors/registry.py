"""The one registry of extractors, keyed by `Agent`, and the boundary where raised errors become outcomes."""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar, cast

from extractors.bounded import Limits
from extractors.errors import DeferError, RejectCode, RejectError
from extractors.model import Agent, Deferred, Outcome, Rejected, Source, Streamed

T = TypeVar("T")
log = logging.getLogger("transcripts.extract")

# The detail of every rejection that a bug in a reader caused starts with this (then the class and the agent), so
# that `status` can count them apart from rejections the source itself earned.
UNEXPECTED_PREFIX = "unexpected "


class Extractor(Protocol):
    """What every extractor module provides (module-level names)."""

    AGENT: Agent
    PARSER_VERSION: str  # bump when the parse changes: sources read by an older version are read again
    NIGHTLY: bool  # discovered by `transcripts run` (False: only given explicitly, e.g. a ChatGPT export)

    def default_roots(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        """The roots to discover under, from the home directory and the environment (no I/O)."""
        ...

    def discover(self, root: Path) -> Iterator[Source]:
        """List the source units under `root` with size and mtime; never parse content."""
        ...

    def read(self, source: Source, limits: Limits) -> Iterator[Outcome]:
        """Read one source within `limits`: one outcome per session. May raise RejectError / DeferError."""
        ...


def extractor(agent: Agent) -> Extractor:
    """The module for `agent` (module name == agent value)."""
    module: ModuleType = importlib.import_module(f"extractors.{agent.value}")
    return cast(Extractor, module)


def registered() -> dict[Agent, Extractor]:
    """Every agent whose extractor module exists."""
    found: dict[Agent, Extractor] = {}
    for agent in Agent:
        try:
            found[agent] = extractor(agent)
        except ModuleNotFoundError as exc:
            if exc.name != f"extractors.{agent.value}":
                raise
    return found


ALIASES = {"claude-code": Agent.CLAUDE, "claude_code": Agent.CLAUDE, "gemini-cli": Agent.GEMINI}


def suggestion(name: str) -> str | None:
    """The agent a mistyped name most likely means (`claud`, `Codx`, `open`), or None."""
    key = name.strip().lower()
    choices = [a.value for a in Agent]
    close = difflib.get_close_matches(key, [*choices, *ALIASES], n=1, cutoff=0.6)
    if close:
        return ALIASES[close[0]].value if close[0] in ALIASES else close[0]
    prefixed = [c for c in choices if key and c.startswith(key)]
    return prefixed[0] if len(prefixed) == 1 else None


def unknown_agent(name: str, what: str = "agent") -> str:
    """The one-line message for a name that is no agent: "did you mean" first, then the known names."""
    close = suggestion(name)
    hint = f" Did you mean '{close}'?" if close else ""
    return f"unknown {what} '{name}'.{hint} Known: {', '.join(a.value for a in Agent)}."


def parse_agent(name: str, what: str = "agent") -> Agent:
    """`Agent` for a user-given name (an agent for `--source`, `--root AGENT=`, `--agent`; a format for `--format`);
    a ValueError that says "did you mean" for an unknown one."""
    key = name.strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    try:
        return Agent(key)
    except ValueError:
        raise ValueError(unknown_agent(name, what)) from None


def detect_format(path: Path, explicit: str | None = None) -> Agent:
    """Which extractor reads an explicitly given path (docs/design.md "Sources are only read").

    An explicit format always wins; else the path speaks; an ambiguous path raises ValueError naming --format.
    """
    if explicit:
        return parse_agent(explicit, "format")
    text = path.as_posix()
    name = path.name.lower()
    parts = set(path.parts)
    if name.startswith("rollout-") or ".codex" in parts:
        return Agent.CODEX
    if ".claude" in parts:
        return Agent.CLAUDE
    if ".grok" in parts:
        return Agent.GROK
    if name == "conversations.json" or name.endswith(".zip") or (name.endswith(".json") and ".gemini" not in text):
        return Agent.CHATGPT
    raise ValueError(
        f"cannot tell the format of {path} from its path; name it with --format (one of: "
        f"{', '.join(a.value for a in Agent)})"
    )


def unexpected_detail(exc: BaseException, agent: Agent) -> str:
    """The rejection detail for a reader bug: "unexpected <ExceptionClass> in the <agent> reader: <message>"."""
    return f"{UNEXPECTED_PREFIX}{type(exc).__name__} in the {agent.value} reader: {exc}"


def read_source(source: Source, limits: Limits) -> Iterator[Outcome]:
    """Read a source through its extractor; a raised RejectError / DeferError becomes one outcome value.

    Sessions yielded before a source-level error stay valid (multi-session sources reject per session), for a
    RejectError and for a bug alike. Any other exception is a bug in the reader: it costs this one source, as a
    `source_unreadable` rejection whose detail starts with `unexpected_detail`'s prefix, and is logged (the
    traceback at debug level). MemoryError, KeyboardInterrupt and SystemExit still propagate: they are about the
    process, not the source.
    """
    yield from _bounded(source, extractor(source.agent).read(source, limits))


def read_streaming(source: Source, limits: Limits) -> Iterator[Outcome | Streamed]:
    """`read_source`, through the extractor's `read_streaming` where it has one (a big session is then one
    `Streamed`, whose parts the caller iterates inside its own `problem_of` boundary)."""
    module = extractor(source.agent)
    reader = getattr(module, "read_streaming", module.read)
    yield from _bounded(source, reader(source, limits))


def _bounded(source: Source, outcomes: Iterator[T]) -> Iterator[T | Rejected | Deferred]:
    try:
        yield from outcomes
    except MemoryError:
        raise
    except Exception as exc:  # the one boundary where a reader bug becomes one source's rejection
        yield problem_of(source, exc)


def problem_of(source: Source, exc: Exception) -> Rejected | Deferred:
    """The outcome of an exception a reader raised: a RejectError / DeferError as it says; anything else a bug in
    the reader, which costs this one source (`source_unreadable`, detail from `unexpected_detail`) and is logged."""
    if isinstance(exc, RejectError):
        return Rejected(source, exc.code, exc.detail, exc.line, exc.offset, exc.session_hint)
    if isinstance(exc, DeferError):
        return Deferred(source, exc.code, exc.detail)
    detail = unexpected_detail(exc, source.agent)
    log.error("event=reader_bug agent=%s path=%s detail=%r", source.agent.value, source.path, detail)
    log.debug("event=reader_bug_traceback path=%s", source.path, exc_info=exc)
    return Rejected(source, RejectCode.SOURCE_UNREADABLE, detail)
