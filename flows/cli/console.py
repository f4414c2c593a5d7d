"""What every command shares: the consoles, the documented exit codes, and one place that turns failures into messages.

Imports stay light (no Prefect, DuckDB, pyarrow or polars): this is on the path of `--help` and `status`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TextIO, TypeVar

import typer

from flows.etl import runlog
from flows.etl.cluster import log_path

# Exit codes (docs/operations.md "Exit codes"): a script may rely on them.
OK = 0
FAILED = 1  # the run failed; the previous corpus is intact
USAGE = 2  # bad arguments or settings
BUSY = 3  # another run holds the data directory
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


_STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
_TAG = re.compile(r"(\\?)\[(/?)(" + "|".join(_STYLES) + r")?\]")


def escape(text: str) -> str:
    """Make `text` print as it is, even where it holds something that looks like a style tag (`[red]`)."""
    return _TAG.sub(lambda m: "\\" + m.group(0) if not m.group(1) and (m.group(3) or m.group(2)) else m.group(0), text)


class PlainConsole:
    """Lines to stdout or stderr with a few style tags (`[red]error:[/red]`), coloured only on a terminal.

    rich would do this at 0.2 s of import per command; `status` and a no-op `run` must answer in well under a
    second, so the commands' messages go through this and rich is imported only where it draws (a progress bar).
    Lines are never wrapped (a pipe or cron mail gets them whole). NO_COLOR is honoured.
    """

    def __init__(self, *, stderr: bool) -> None:
        self.stderr = stderr
        self.quiet = False

    @property
    def file(self) -> TextIO:
        return sys.stderr if self.stderr else sys.stdout  # looked up per call: tests swap the streams

    def render(self, text: str, *, markup: bool = True, color: bool | None = None) -> str:
        if not markup:
            return text
        if color is None:
            color = "NO_COLOR" not in os.environ and bool(getattr(self.file, "isatty", lambda: False)())
        stack: list[str] = []

        def tag(m: re.Match[str]) -> str:
            escaped, closing, name = m.group(1), m.group(2), m.group(3)
            if escaped:
                return m.group(0)[1:]
            if not name and not closing:
                return m.group(0)  # `[]`: not a tag
            if closing:
                if stack:
                    stack.pop()
                return "\033[0m" + "".join(f"\033[{_STYLES[s]}m" for s in stack) if color else ""
            stack.append(name)
            return f"\033[{_STYLES[name]}m" if color else ""

        return _TAG.sub(tag, text)

    def print(
        self, *parts: object, markup: bool = True, end: str = "\n", style: str | None = None, **_: object
    ) -> None:
        """Print like rich's `Console.print` for plain text (`soft_wrap` and `highlight` are accepted and mean
        nothing here: lines are not wrapped nor highlighted; `style` is one of the tag names)."""
        if self.quiet:
            return
        text = " ".join(str(p) for p in parts)
        if style in _STYLES and markup:
            text = f"[{style}]{text}[/{style}]"
        try:
            self.file.write(self.render(text, markup=markup) + end)
            self.file.flush()
        except BrokenPipeError:  # `transcripts status | head`: the reader went away; not an error
            self.quiet = True
            closed_pipe()
            raise SystemExit(OK) from None


console = PlainConsole(stderr=False)
err = PlainConsole(stderr=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", metavar="DIR", help="Where the corpus lives (default: see `transcripts data where`)."),
]
Config = Annotated[Path | None, typer.Option("--config", metavar="FILE", help="TOML settings file.")]
Json = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON (a stable shape: docs/operations.md, 'JSON output').")
]
Wait = Annotated[float | None, typer.Option("--wait", metavar="SECONDS", help="Seconds to wait for another run.")]
Verbose = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        help="Log records on stderr too (they always go to the run's log file): -v INFO, -vv DEBUG.",
    ),
]

P = ParamSpec("P")
R = TypeVar("R")


class UsageError(ValueError):
    """A person gave an argument that cannot be used; the message says which and why (exit 2)."""


def fail(message: str, code: int = USAGE) -> typer.Exit:
    """Print `error: message` on stderr and return the Exit to raise."""
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(code)


def print_json(value: Any) -> None:
    """JSON on stdout as one document (not pretty-printed by rich: a pipe gets exactly this)."""
    sys.stdout.write(json.dumps(value, default=str, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def closed_pipe() -> None:
    """`transcripts status | head`: the reader went away; that is not an error, and Python must not say so."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _is(exc: BaseException, module: str, name: str) -> bool:
    """isinstance against a class of a module only if that module is loaded (a module never imported cannot
    have raised it), so that catching stays free of heavy imports."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(exc, getattr(loaded, name))


class _Terminal(logging.StreamHandler):  # type: ignore[type-arg]
    """`-v`: records on stderr, looked up per record (a test, or the command runner's child, swaps the stream)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.setLevel(level)
        self.setFormatter(logging.Formatter(runlog.FORMAT))  # as in the file, and as a worker process writes them

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class _Nowhere(logging.NullHandler):
    """Without -v, on the root logger: a record no file takes (a dry run's) goes nowhere, never to logging's last
    resort, which writes it to stderr."""


def _to_terminal(handler: logging.Handler) -> bool:
    """Whether `handler` writes to this process's stdout or stderr (Prefect's console handler on the root logger,
    distributed's and tornado's own), as opposed to a file or a test's capture."""
    if isinstance(handler, logging.FileHandler) or not isinstance(handler, logging.StreamHandler):
        return False
    stream = handler.stream
    if any(stream is s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)):
        return True
    try:
        return stream.fileno() in (1, 2)
    except (AttributeError, OSError, ValueError):
        return False


def route_logs(verbose: int = 0) -> None:
    """Where this process's log records go, for a command: never the terminal (a run's records go to its log
    file, flows.etl.runlog), unless `verbose`: 1 puts INFO and up on stderr as well, 2 DEBUG. Ours, Prefect's and
    Dask's loggers log at that level (INFO, or DEBUG), other libraries from WARNING up; Python's warnings become
    records too. Call it as the command starts and again after importing Prefect or `distributed` (each
    installs stderr handlers of its own as it loads); each call undoes the previous one's."""

    level = logging.DEBUG if verbose >= 2 else logging.INFO
    runlog.set_level(level, terminal=bool(verbose))
    root = logging.getLogger()
    for logger in [root, *(x for x in logging.root.manager.loggerDict.values() if isinstance(x, logging.Logger))]:
        for handler in [h for h in logger.handlers if isinstance(h, _Terminal | _Nowhere) or _to_terminal(h)]:
            logger.removeHandler(handler)
            if logger is not root:
                logger.propagate = True  # its records reach the root's handlers: the run's file (and -v's)
    root.addHandler(_Terminal(level) if verbose else _Nowhere())
    root.setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    runlog.levels(level)
    runlog.attach()
    logging.captureWarnings(True)


def _silence_prefect() -> None:
    """After Ctrl-C the one line is all a person sees: Prefect's threads would go on logging the tasks the
    interrupt cancelled ("Crash detected! ... CancelledError") and its event queue draining at exit (seen in CI,
    after the line). The run's end is in the ledger; Prefect's own records of it are not needed here."""
    for name in ["prefect", *logging.root.manager.loggerDict]:
        if name == "prefect" or name.startswith("prefect."):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextlib.contextmanager
def reporting(what: str) -> Iterator[None]:
    """Turn every failure a person can cause or fix into one line on stderr and a documented exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        _silence_prefect()
        err.print(f"{what} interrupted; the previous corpus is intact.", highlight=False)
        raise typer.Exit(INTERRUPTED) from None
    except BrokenPipeError:
        closed_pipe()
        raise typer.Exit(OK) from None
    except Exception as exc:
        if _is(exc, "sinks.lock", "LockBusy"):
            err.print(f"[red]busy:[/red] {escape(str(exc))}", soft_wrap=True, highlight=False)
            raise typer.Exit(BUSY) from None
        if isinstance(exc, UsageError) or _is(exc, "flows.etl.settings", "SettingsError"):
            raise fail(str(exc), USAGE) from None
        if _is(exc, "flows.service.server", "ServerError"):
            raise fail(str(exc), FAILED) from None
        if isinstance(exc, OSError):
            where = getattr(exc, "filename", None)
            place = f" ({escape(str(where))})" if where else ""
            err.print(
                f"[red]{what} failed:[/red] {escape(str(exc.strerror or exc))}{place}; the previous corpus is intact.",
                soft_wrap=True,
                highlight=False,
            )
            raise typer.Exit(FAILED) from None
        if _is(exc, "distributed.scheduler", "KilledWorker"):  # `run --dask`: workers lost (killed, out of memory)
            allowed = getattr(exc, "allowed_failures", None)
            tried = f"{allowed + 1} tried" if isinstance(allowed, int) else "all tried"
            last = getattr(getattr(exc, "last_worker", None), "address", None)
            where = f", the last at {last}" if last else ""

            err.print(
                f"[red]{what} failed:[/red] the Dask workers reading a batch of sources died ({tried}{escape(where)}; "
                f"the cluster's log: {escape(str(log_path()))}); the previous corpus is intact.",
                soft_wrap=True,
                highlight=False,
            )
            raise typer.Exit(FAILED) from None
        raise


def reported(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form of `reporting` for a command function."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            with reporting(what):
                return fn(*args, **kwargs)

        return inner

    return wrap


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def split_list(values: list[str] | None) -> list[str]:
    """`--source claude,codex --source grok` -> ['claude', 'codex', 'grok'] (like TRANSCRIPTS_SOURCES)."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
