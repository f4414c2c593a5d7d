"""A chat service's data export: a JSON array of conversations, as a `.zip` holding `conversations.json` or as
that file itself (ChatGPT's and Claude.ai's exports both). Listed and read the same way for every such agent; what
each conversation holds is the agent's own parse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from extractors.bounded import Limits, check_source_size
from extractors.discovery import walk_files
from extractors.errors import RejectCode, RejectError
from extractors.model import Agent, Outcome, Source

if TYPE_CHECKING:
    from extractors.bounded.json_array import Element

MEMBER = "conversations.json"

# The outcomes of one conversation of the array (one, or several: a conversation's branches).
PerConversation = Callable[[Source, "Element", Limits], Iterable[Outcome]]


def _is_export(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    name = name.lower()
    return name == MEMBER or name.endswith(".zip")


def discover(agent: Agent, root: Path) -> Iterator[Source]:
    """The export at `root` (a `.zip` or `.json` file), or the `conversations.json` / `*.zip` directly in a folder.

    Lists size and mtime only; never opens a file.
    """
    if root.is_file():
        st = root.stat()
        yield Source(agent, str(root.absolute()), st.st_size, st.st_mtime_ns, str(root.absolute().parent), "export")
        return
    for path, st in walk_files(root, _is_export, max_depth=0):
        yield Source(agent, str(Path(path).absolute()), st.st_size, st.st_mtime_ns, str(root.absolute()), "export")


def read(source: Source, limits: Limits, per_conversation: PerConversation) -> Iterator[Outcome]:
    """The outcomes of every conversation of the export, streamed (the array is never held whole).

    Raises RejectError for the (rest of the) source: source_unreadable (no conversations.json in a zip, encrypted
    or damaged zip, unsafe member names), limit_exceeded (file or zip member too large, zip bomb), invalid_json,
    invalid_utf8, bad_shape (top level not an array/object), truncated_tail, no_conversation (empty array);
    DeferError(changed_during_read).
    """
    from extractors.bounded.json_array import iter_json_elements, iter_json_file  # here: `status` needs no reader
    from extractors.bounded.zip_member import looks_like_zip, open_member

    check_source_size(source.path, limits)
    if looks_like_zip(source.path):
        with open_member(source.path, MEMBER, limits) as member:
            yield from _outcomes(source, iter_json_elements(member, limits), limits, per_conversation)
    elif source.path.lower().endswith(".zip"):
        raise RejectError(RejectCode.SOURCE_UNREADABLE, "named .zip but not a zip archive")
    else:
        yield from _outcomes(source, iter_json_file(source.path, limits), limits, per_conversation)


def _outcomes(
    source: Source, elements: Iterator[Element], limits: Limits, per_conversation: PerConversation
) -> Iterator[Outcome]:
    count = 0
    for element in elements:
        count += 1
        yield from per_conversation(source, element, limits)
    if count == 0:
        raise RejectError(RejectCode.NO_CONVERSATION, "the export holds no conversation (empty array)")
