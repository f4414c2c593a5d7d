"""The one registry of agents, found as the packages under `extractors/` that declare a `SPEC` (an `AgentSpec`), and
the boundary where raised errors become outcomes."""

from __future__ import annotations

import difflib
import importlib
import logging
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar, cast

from extractors.bounded import Limits
from extractors.errors import DeferError, RejectCode, RejectError
from extractors.model import Agent, Deferred, Outcome, Rejected, Source, Streamed
from extractors.spec import AgentSpec

T = TypeVar("T")
log = logging.getLogger("transcripts.extract")

# The detail of every rejection that a bug in a reader caused starts with this (then the class and the agent), so
# that `status` can count them apart from rejections the source itself earned.
UNEXPECTED_PREFIX = "unexpected "


class Extractor(Protocol):
    """What every agent package provides (module-level names): its declaration and its reader."""

    SPEC: AgentSpec

    def default_roots(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        """The roots to discover under, from the home directory and the environment (no I/O)."""
        ...

    def discover(self, root: Path) -> Iterator[Source]:
        """List the source units under `root` with size and mtime; never parse content."""
        ...

    def read(self, source: Source, limits: Limits) -> Iterator[Outcome]:
        """Read one source within `limits`: one outcome per session. May raise RejectError / DeferError."""
        ...


@cache
def _packages() -> dict[Agent, Extractor]:
    """Every package under `extractors/` that declares a `SPEC` is an agent (in `rank`, then name, order)."""
    import extractors

    found: list[Extractor] = []
    for info in pkgutil.iter_modules(extractors.__path__):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"extractors.{info.name}")
        declared = getattr(module, "SPEC", None)
        if declared is None:
            continue
        if not isinstance(declared, AgentSpec) or declared.name != info.name:
            raise TypeError(f"extractors.{info.name}.SPEC must be an AgentSpec named {info.name!r}")
        found.append(cast(Extractor, module))
    found.sort(key=lambda m: (m.SPEC.rank, m.SPEC.name))
    return {m.SPEC.name: m for m in found}


def registered() -> dict[Agent, Extractor]:
    """Every agent, with its package."""
    return dict(_packages())


def specs() -> tuple[AgentSpec, ...]:
    """Every agent's declaration, in the order lists and runs use."""
    return tuple(m.SPEC for m in _packages().values())


def agents() -> tuple[Agent, ...]:
    """Every agent's name, in the order lists and runs use."""
    return tuple(_packages())


def modules() -> tuple[str, ...]:
    """Every module of every agent's package, the package first: what a process imports ahead of a run."""
    names: list[str] = []
    for package in _packages().values():
        name = cast(ModuleType, package).__name__
        names.append(name)
        names.extend(info.name for info in pkgutil.walk_packages(cast(ModuleType, package).__path__, f"{name}."))
    return tuple(names)


def extractor(agent: str) -> Extractor:
    """The package of `agent` (a registered name)."""
    try:
        return _packages()[Agent(agent)]
    except KeyError:
        raise ValueError(unknown_agent(agent)) from None


def spec(agent: str) -> AgentSpec:
    """The declaration of `agent` (a registered name)."""
    return extractor(agent).SPEC


def _aliases() -> dict[str, Agent]:
    return {alias: s.name for s in specs() for alias in s.aliases}


def suggestion(name: str) -> str | None:
    """The agent a mistyped name most likely means (`claud`, `Codx`, `open`), or None."""
    key = name.strip().lower()
    choices = list(agents())
    aliases = _aliases()
    close = difflib.get_close_matches(key, [*choices, *aliases], n=1, cutoff=0.6)
    if close:
        return aliases[close[0]] if close[0] in aliases else close[0]
    prefixed = [c for c in choices if key and c.startswith(key)]
    return prefixed[0] if len(prefixed) == 1 else None


def unknown_agent(name: str, what: str = "agent") -> str:
    """The one-line message for a name that is no agent: "did you mean" first, then the known names."""
    close = suggestion(name)
    hint = f" Did you mean '{close}'?" if close else ""
    return f"unknown {what} '{name}'.{hint} Known: {', '.join(agents())}."


def parse_agent(name: str, what: str = "agent") -> Agent:
    """`Agent` for a user-given name (an agent for `--source`, `--root AGENT=`, `--agent`; a format for `--format`);
    a ValueError that says "did you mean" for an unknown one."""
    key = name.strip().lower()
    aliases = _aliases()
    if key in aliases:
        return aliases[key]
    if key in _packages():
        return Agent(key)
    raise ValueError(unknown_agent(name, what))


def detect_format(path: Path, explicit: str | None = None) -> Agent:
    """Which extractor reads an explicitly given path (docs/design.md "Sources are only read").

    An explicit format always wins; else the path speaks: every agent's `claims`, the strongest one wins. A path
    no agent claims, or that two claim equally strongly, raises ValueError naming --format.
    """
    if explicit:
        return parse_agent(explicit, "format")
    claims = [(strength, s.name) for s in specs() if (strength := s.claims(path)) is not None]
    best = max((strength for strength, _ in claims), default=None)
    winners = [name for strength, name in claims if strength == best]
    if len(winners) == 1:
        return winners[0]
    raise ValueError(
        f"cannot tell the format of {path} from its path; name it with --format (one of: {', '.join(agents())})"
    )


def unexpected_detail(exc: BaseException, agent: Agent) -> str:
    """The rejection detail for a reader bug: "unexpected <ExceptionClass> in the <agent> reader: <message>"."""
    return f"{UNEXPECTED_PREFIX}{type(exc).__name__} in the {agent} reader: {exc}"


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
    log.error("event=reader_bug agent=%s path=%s detail=%r", source.agent, source.path, detail)
    log.debug("event=reader_bug_traceback path=%s", source.path, exc_info=exc)
    return Rejected(source, RejectCode.SOURCE_UNREADABLE, detail)
