"""Aider chat histories (`.aider.chat.history.md`, one per repository, appended by every run of aider in it).

One source = one history file; one session = one run, from its `# aider chat started at …` header to the next
(docs/agents/aider.md "Sessions"). Each run is its own outcome, complete or rejected; a run that only started (no
prompt, no reply) is a benign `no_conversation`. The files live in the person's repositories, not in a home folder:
discovery walks the roots (the home by default; `[roots] aider = [...]`, `TRANSCRIPTS_ROOT_AIDER` or
`--root aider=PATH` name the project folders instead) a few folders deep for the file's name, and
`transcripts backfill FILE` takes one file, whose name says it is Aider's (`Claim.NAME`).

The lines are read through `extractors.bounded.text_lines` a chunk at a time (limits, UTF-8 checked; a file whose
last line is still being written is deferred; the chunks' lines not counted: each run's walk counts its own, and
`max_records` bounds a run, the unit held in memory, not the file) and taken as the chunk's bytes, never split into
lines: the runs are cut at their headers (`bytes.find`); what each line is: `tables`; one run -> a Session: `parse`,
which stops only at the lines that matter (`tables.LINE_GROUP`: the usual exchange, from the person's `####` lines
through the reply and its usage report, in one match; else aider's `####` and `>` lines, a group at a time, markers,
reasoning tags, blank lines of spaces) and takes the lines between as slices (a reply: one slice, decoded once).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.aider import tables
from extractors.aider.parse import RunText, header_time, native_id, parse_run
from extractors.bounded import Limits
from extractors.bounded.text_lines import TextBlock, TextLine, iter_text_blocks
from extractors.discovery import regular_stat, skip, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.ids import session_id
from extractors.model import Agent, Loaded, Outcome, Rejected, Source
from extractors.spec import AgentSpec, Claim

HISTORY_ENV = "AIDER_CHAT_HISTORY_FILE"  # aider's own setting for the file (`--chat-history-file`)
_HEADER_START = (tables.MARKER + "chat started at ").encode()  # what every header line starts with (`tables.HEADER`)
_NEW_HEADER = b"\n" + _HEADER_START


def _claims(path: Path) -> Claim | None:
    """A file named `.aider.chat.history.md` is Aider's, wherever it lies."""
    return Claim.NAME if path.name == tables.HISTORY_FILE else None


SPEC = AgentSpec(
    name=Agent("aider"),
    display="Aider",
    rank=110,
    parser_version="2",  # 2: max_records bounds a run's lines, not the file's (a long history loads whole)
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
    (the run is over max_conversation_bytes, or has more lines than max_records), missing_timestamp,
    no_conversation (benign: a run that only started). For the rest of the source, raises RejectError: bad_shape
    (lines before the first header, or no header at all: not an aider history), invalid_utf8, limit_exceeded (the
    file or a line over the limits), source_unreadable; DeferError: write_in_progress, changed_during_read.
    """
    run: list[
        tuple[bytes, int, int]
    ] = []  # the open run's lines (UTF-8): (a block's bytes, start, end), its header first
    head = -1  # the open run's header line (-1: no run open yet)
    head_offset = 0
    run_bytes = 0
    oversized = False
    dropped = 0  # the lines of an oversized run, counted as they are let go
    cut_tail: TextLine | None = None  # the open run's last line when the file ends inside it
    before: TextLine | None = None  # the first non-blank line before the first header
    seen: dict[str, int] = {}
    stamp = ""  # the open run's header time
    counted = 0  # the lines of the blocks before the first header (the blocks are not numbered: the runs count theirs)
    for block in iter_text_blocks(source.path, limits, decode=False, numbered=False):
        raw = block.raw
        stamps = _headers(raw)
        heads = list(stamps)
        heads.append(len(raw))
        position = 0  # where the lines not taken yet start
        for at in heads:
            if at > position:  # the open run's lines, or lines before the first header
                if head < 0:
                    if before is None:
                        before = _first_non_blank(block, counted, position, at)
                else:
                    run_bytes += block.offset_at(at) - block.offset_at(position)
                    if not oversized and run_bytes > limits.max_conversation_bytes:
                        oversized = True  # its lines are let go; the run is rejected when it ends
                        dropped = sum(piece.count(b"\n", start, end) for piece, start, end in run)
                        del run[1:]
                    if oversized:
                        dropped += raw.count(b"\n", position, at)
                    elif run[-1][0] is raw and run[-1][2] == position:  # the lines right after: one slice later
                        run[-1] = (raw, run[-1][1], at)
                    else:
                        run.append((raw, position, at))
                    if not block.complete and at == len(raw):  # the tail: the line after the run's whole ones
                        whole = dropped if oversized else sum(piece.count(b"\n", s, e) for piece, s, e in run)
                        cut_tail = _last_line(block, head + whole)
            if at == len(raw):
                if head < 0:
                    counted += raw.count(b"\n")
                break
            if head >= 0:
                outcome, lines = _outcome(
                    source, run, head, head_offset, cut_tail, oversized, dropped, limits, seen, stamp
                )
                yield outcome
                head += lines  # the new run's header: the line after the run's last
            else:
                if before is not None:
                    yield _orphans(source, before)
                head = counted + raw.count(b"\n", 0, at)
            end = raw.find(b"\n", at) + 1 or len(raw)  # after the header line
            head_offset = block.offset_at(at)
            stamp = stamps[at]
            run, run_bytes, oversized, cut_tail = [(raw, at, end)], block.offset_at(end) - head_offset, False, None
            if not block.complete and end == len(raw):
                cut_tail = _last_line(block, head)
            position = end
    if head >= 0:
        yield _outcome(source, run, head, head_offset, cut_tail, oversized, dropped, limits, seen, stamp)[0]
    else:
        raise RejectError(
            RejectCode.BAD_SHAPE,
            "no `# aider chat started at` header: not an aider chat history",
            line=before.index if before is not None else None,
        )


def _headers(raw: bytes) -> dict[int, str]:
    """Where the runs' header lines start in `raw` (whole lines), in order, each with its time (`header_time`)."""
    heads = {}
    at = 0 if raw.startswith(_HEADER_START) else raw.find(_NEW_HEADER) + 1 or -1
    while at >= 0:
        end = raw.find(b"\n", at)
        stamp = header_time(raw[at : end if end >= 0 else len(raw)].decode())
        if stamp is not None:
            heads[at] = stamp
        at = raw.find(_NEW_HEADER, at) + 1 or -1
    return heads


def _first_non_blank(block: TextBlock, base: int, start: int, end: int) -> TextLine | None:
    """The first line in `block.raw[start:end]` (whole lines) that is not blank, if any; `base`: the number of the
    block's first line."""
    raw = block.raw
    first = raw.count(b"\n", 0, start)
    for i, line in enumerate(raw[start:end].decode().split("\n"), first):  # text before any header: rare
        if line.strip():
            return _numbered(block.line(i), base + i)
    return None


def _last_line(block: TextBlock, index: int) -> TextLine:
    """The block's last line (the file's, cut), as line `index`."""
    return _numbered(block.line(block.raw.count(b"\n")), index)


def _numbered(line: TextLine, index: int) -> TextLine:
    """`line` (of a block not numbered) as line `index` of the file."""
    return TextLine(index, line.offset, line.text, line.size, line.complete)


def _orphans(source: Source, first: TextLine) -> Rejected:
    """Text before the first run's header belongs to no run (a file cut at its start, or not aider's)."""
    return Rejected(
        source, RejectCode.BAD_SHAPE, "text before the first run's header", line=first.index, offset=first.offset
    )


def _outcome(
    source: Source,
    run: list[tuple[bytes, int, int]],
    head: int,
    offset: int,
    cut_tail: TextLine | None,
    oversized: bool,
    dropped: int,
    limits: Limits,
    seen: dict[str, int],
    stamp: str,
) -> tuple[Outcome, int]:
    """The run's outcome, and how many lines it has (the next run's header is the line after its last); `stamp`: its
    header's time."""
    if oversized:
        detail = f"the run is longer than max_conversation_bytes={limits.max_conversation_bytes}"
        return Rejected(source, RejectCode.LIMIT_EXCEEDED, detail, line=head, offset=offset), dropped
    if len(run) == 1:  # a run within one read chunk: one copy of its bytes
        piece, start, end = run[0]
        raw = piece[start:end]
    else:
        raw = b"".join([piece[start:end] for piece, start, end in run])
    if not raw.endswith(b"\n"):
        raw += b"\n"  # the file's last line, cut
    # A run of more lines than max_records (each line at least its newline: a run of fewer bytes has fewer lines).
    if len(raw) > limits.max_records and (lines := raw.count(b"\n")) > limits.max_records:
        detail = f"the run has more than max_records={limits.max_records} lines"
        return Rejected(source, RejectCode.LIMIT_EXCEEDED, detail, line=head, offset=offset), lines
    native = native_id(raw, stamp)
    seen[native] = seen.get(native, 0) + 1
    if seen[native] > 1:  # the same opening twice in one file (scripted runs in one second): the n-th gets `-n`
        native = f"{native}-{seen[native]}"
    try:
        session, lines = parse_run(RunText(raw, head, offset, cut_tail), native, limits, stamp=stamp)
        return Loaded(source, session), lines
    except RejectError as exc:
        hint = exc.session_hint or session_id(SPEC.name, native)
        return Rejected(source, exc.code, exc.detail, exc.line, exc.offset, hint), raw.count(b"\n")
