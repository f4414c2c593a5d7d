"""Aider chat histories (`.aider.chat.history.md`, one per repository, appended by every run of aider in it).

One source = one history file; one session = one run, from its `# aider chat started at …` header to the next
(docs/agents/aider.md "Sessions"). Each run is its own outcome, complete or rejected; a run that only started (no
prompt, no reply) is a benign `no_conversation`. The files live in the person's repositories, not in a home folder:
discovery walks the roots (the home by default; `[roots] aider = [...]`, `TRANSCRIPTS_ROOT_AIDER` or
`--root aider=PATH` name the project folders instead) a few folders deep for the file's name, and
`transcripts backfill FILE` takes one file, whose name says it is Aider's (`Claim.NAME`).

The lines are read through `extractors.bounded.text_lines` a chunk at a time (limits; a file whose last line is still
being written is deferred), the runs cut at their headers; what each line is: `tables`; one run -> a Session:
`parse`, which takes the lines between a reply's special ones (`#`, `>`, `<`, blank) a span at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import compress, count, repeat
from pathlib import Path

from extractors.aider import tables
from extractors.aider.parse import RunLines, header_time, native_id, parse_run
from extractors.bounded import Limits
from extractors.bounded.text_lines import TextLine, iter_text_blocks
from extractors.discovery import regular_stat, skip, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Rejected, Source
from extractors.spec import AgentSpec, Claim

HISTORY_ENV = "AIDER_CHAT_HISTORY_FILE"  # aider's own setting for the file (`--chat-history-file`)
_HEADER_START = tables.MARKER + "chat started at "  # what every header line starts with (`tables.HEADER`)
_NO_LINE = TextLine(-1, -1, "", 0)  # no run open yet


def _claims(path: Path) -> Claim | None:
    """A file named `.aider.chat.history.md` is Aider's, wherever it lies."""
    return Claim.NAME if path.name == tables.HISTORY_FILE else None


SPEC = AgentSpec(
    name=Agent("aider"),
    display="Aider",
    rank=110,
    parser_version="1",
    env=(HISTORY_ENV,),
    nightly=True,
    export=None,
    price_provider=None,  # aider talks to any provider; the file's own cost is kept where it reports one
    reasoning_billed_separately=False,
    unknown_records="skip",  # a `# aider …` marker line of an unknown kind is counted and skipped
    claims=_claims,
)


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """The home folder, walked a few folders deep (docs/agents/aider.md "Files and folders"), and the file
    `AIDER_CHAT_HISTORY_FILE` names when it is an absolute path (or `~/…`); a relative one is relative to wherever
    aider ran, which is not known here. No I/O."""
    roots = [home]
    value = env.get(HISTORY_ENV, "").strip()
    if value.startswith("~/"):
        roots.append(home / value[2:])
    elif value and Path(value).is_absolute():
        roots.append(Path(value))
    return roots


def _is_history(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return name == tables.HISTORY_FILE


def _pruned(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return name.startswith(".") or name in tables.PRUNED_DIRS


def discover(root: Path) -> Iterator[Source]:
    """Every `.aider.chat.history.md` at most `MAX_DEPTH` folders below `root`, never inside hidden, dependency or
    build folders; `root` itself when it is a file (a history file named in a setting, whatever its name). Stat
    only; never opens a file."""
    if root.is_file():
        st, reason, detail = regular_stat(root)
        if st is None:
            skip(reason, root, detail)
            return
        path = root.absolute()
        yield Source(SPEC.name, str(path), st.st_size, st.st_mtime_ns, str(path.parent))
        return
    for found, st in walk_files(root, _is_history, max_depth=tables.MAX_DEPTH, skip_dir=_pruned, quiet=True):
        yield Source(SPEC.name, str(Path(found).absolute()), st.st_size, st.st_mtime_ns, str(root.absolute()))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """One outcome per run of the history file, in file order.

    Per run: Loaded, or Rejected with truncated_tail (the file ends inside the run's last line), limit_exceeded
    (the run is over max_conversation_bytes), missing_timestamp, no_conversation (benign: a run that only started).
    For the rest of the source, raises RejectError: bad_shape (lines before the first header, or no header at
    all: not an aider history), invalid_utf8, limit_exceeded (the file, a line or the line count over the limits),
    source_unreadable; DeferError: write_in_progress, changed_during_read.
    """
    run: list[str] = []  # the texts of the open run's lines, its header first
    head = tail = _NO_LINE  # the open run's header and its last line
    run_bytes = 0
    oversized = False
    before: TextLine | None = None  # the first non-blank line before the first header
    seen: dict[str, int] = {}
    for block in iter_text_blocks(source.path, limits):
        texts = block.texts
        starting = compress(count(), map(str.startswith, texts, repeat(_HEADER_START)))  # not a loop in Python
        heads = [i for i in starting if header_time(texts[i]) is not None]
        heads.append(len(texts))
        position = 0
        for at in heads:
            if at > position:  # lines position .. at-1: the open run's, or before the first header
                if head is _NO_LINE:
                    if before is None:
                        first = next((i for i in range(position, at) if texts[i].strip()), None)
                        before = block.line(first) if first is not None else None
                else:
                    run_bytes += block.start(at) - block.start(position)
                    if not oversized:
                        if run_bytes > limits.max_conversation_bytes:
                            oversized = True  # its lines are let go; the run is rejected when it ends
                            del run[1:]
                        else:
                            run.extend(texts[position:at])
                    tail = block.line(at - 1)
            if at == len(texts):
                break
            if head is not _NO_LINE:
                yield _outcome(source, RunLines(run, head.index, head.offset, tail), oversized, limits, seen)
            elif before is not None:
                yield _orphans(source, before)
            head = tail = block.line(at)
            run, run_bytes, oversized = [head.text], head.size, False
            position = at + 1
    if head is not _NO_LINE:
        yield _outcome(source, RunLines(run, head.index, head.offset, tail), oversized, limits, seen)
    else:
        raise RejectError(
            RejectCode.BAD_SHAPE,
            "no `# aider chat started at` header: not an aider chat history",
            line=before.index if before is not None else None,
        )


def _orphans(source: Source, first: TextLine) -> Rejected:
    """Text before the first run's header belongs to no run (a file cut at its start, or not aider's)."""
    return Rejected(
        source, RejectCode.BAD_SHAPE, "text before the first run's header", line=first.index, offset=first.offset
    )


def _outcome(source: Source, run: RunLines, oversized: bool, limits: Limits, seen: dict[str, int]) -> Outcome:
    if oversized:
        return Rejected(
            source,
            RejectCode.LIMIT_EXCEEDED,
            f"the run is longer than max_conversation_bytes={limits.max_conversation_bytes}",
            line=run.index,
            offset=run.offset,
        )
    native = native_id(run.texts)
    seen[native] = seen.get(native, 0) + 1
    if seen[native] > 1:  # the same opening twice in one file (scripted runs in one second): the n-th gets `-n`
        native = f"{native}-{seen[native]}"
    try:
        return Loaded(source, parse_run(run, native, limits))
    except RejectError as exc:
        hint = exc.session_hint or session_id(SPEC.name, native)
        return Rejected(source, exc.code, exc.detail, exc.line, exc.offset, hint)
