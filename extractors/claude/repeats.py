"""One person's action written more than once: queued prompts and slash commands recorded twice (no I/O here).

Both passes run over the entries of one file, in file order, once the whole file is read, and change entries in
place: the copy that is not the turn loses its prompt and gets a census kind of its own. The rules, with the
captures they come from, are in `extractors.claude.tables` (queued prompts, a slash command recorded twice).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from datetime import timedelta

from extractors.claude import tables
from extractors.claude.records import Entry, QueueOp
from extractors.model import Disposition

_WINDOW = timedelta(seconds=tables.QUEUE_MATCH_WINDOW_SECONDS)
_PERSON_RECORDS = frozenset({"user", "system"})
_ATTACHMENT_KIND = f"attachment/{tables.QUEUED_COMMAND_ATTACHMENT}"


def merge_doubled_commands(entries: list[Entry]) -> None:
    """A `system` command line repeating the `user` command line just before it is not a second turn."""
    latest: Entry | None = None  # the latest person's turn with no assistant record after it
    for entry in entries:
        if entry.rtype == "assistant":
            latest = None
        elif entry.prompt is None:
            continue
        elif (
            entry.kind == "system/local_command"
            and latest is not None
            and latest.kind == "user/command"
            and latest.prompt == entry.prompt
        ):
            entry.kind, entry.disposition, entry.prompt = tables.DOUBLED_COMMAND_KIND, Disposition.SKIPPED, None
            latest = None
        else:
            latest = entry


def resolve_queue(entries: list[Entry]) -> None:
    """Decide what became of every enqueued prompt: a turn of its own, the same turn as a later record, or none."""
    closed = _close(entries)
    vouched = Counter(e.delivered.strip() for e in entries if e.delivered is not None)
    attachments = any(e.kind == _ATTACHMENT_KIND for e in entries)
    # Later person's turns by text, in file order: the candidates a delivered prompt may be the same turn as.
    said: defaultdict[str, list[int]] = defaultdict(list)
    for position, entry in enumerate(entries):
        if entry.prompt is not None and entry.queue is None and entry.rtype in _PERSON_RECORDS:
            said[entry.prompt.strip()].append(position)
    taken: set[int] = set()
    for position, entry in enumerate(entries):
        queue = entry.queue
        closing = closed.get(position)
        if queue is None or (queue.operation != tables.QUEUE_ENQUEUE and (closing is None or closing[0] is not entry)):
            continue
        if closing is None:
            entry.kind = tables.QUEUE_PENDING
        elif not _delivered(closing[1], queue, vouched, attachments):
            entry.kind = tables.QUEUE_NOT_DELIVERED
        elif queue.prompt is None:
            # Harness text that rode the queue (a `<task-notification>`), an empty prompt, a subagent's queue.
            empty = queue.kind in ("", "user/empty")
            entry.kind = f"{tables.QUEUE_TYPE}/{'empty' if empty else queue.kind.removeprefix('user/')}"
            entry.disposition = Disposition.SKIPPED if empty else Disposition.HARNESS
        else:
            match = _match(entries, said.get(queue.prompt.strip(), []), position, closing[0], taken)
            if match is not None:
                taken.add(match)
                entry.kind = tables.QUEUE_MATCHED
            elif closing[1].operation in tables.QUEUE_REWRITTEN:
                entry.kind = tables.QUEUE_WRITTEN_AGAIN
            else:
                entry.kind, entry.disposition, entry.prompt = (
                    tables.QUEUE_DELIVERED_AS_TURN,
                    Disposition.TURN,
                    queue.prompt,
                )


def _close(entries: list[Entry]) -> dict[int, tuple[Entry, QueueOp]]:
    """{position of an enqueue: the operation that took it out of the queue}, FIFO as the CLI runs it."""
    waiting: list[int] = []
    closed: dict[int, tuple[Entry, QueueOp]] = {}
    for position, entry in enumerate(entries):
        queue = entry.queue
        if queue is None:
            continue
        if queue.operation == tables.QUEUE_ENQUEUE:
            waiting.append(position)
        elif not waiting and queue.operation in tables.QUEUE_DELIVERED and queue.content is not None:
            closed[position] = (entry, queue)  # a delivery naming its prompt, whose enqueue is not in this file
        elif queue.operation in tables.QUEUE_OPERATIONS and waiting:
            if queue.operation in tables.QUEUE_WITHDRAWN and queue.content is None:
                taken = list(waiting)  # `popAll` without content: the whole queue back into the input box
            else:
                taken = [_named(entries, waiting, queue.content)]
            for enqueue in taken:
                waiting.remove(enqueue)
                closed[enqueue] = (entry, queue)
    return closed


def _named(entries: list[Entry], waiting: list[int], content: str | None) -> int:
    """The waiting prompt an operation takes: the oldest one whose text it names, else the oldest."""
    if content is not None:
        for position in waiting:
            queued = entries[position].queue
            if queued is not None and queued.content is not None and queued.content.strip() == content.strip():
                return position
    return waiting[0]


def _delivered(closing: QueueOp, queued: QueueOp, vouched: Counter[str], attachments: bool) -> bool:
    """Whether the operation that took `queued` out of the queue delivered it (the order of rules in tables)."""
    if closing.operation not in tables.QUEUE_DELIVERED:
        return False
    if closing.reason is not None:
        return closing.reason in tables.QUEUE_DELIVERED_REASONS
    if closing.operation != "remove" or not attachments:
        return True
    text = (queued.content or "").strip()
    if vouched[text] > 0:
        vouched[text] -= 1
        return True
    return False


def _match(entries: list[Entry], candidates: list[int], enqueue: int, closing: Entry, taken: set[int]) -> int | None:
    """The first later person's turn with the same text, within the window after the prompt left the queue."""
    left = closing.timestamp or entries[enqueue].timestamp
    for position in candidates[bisect_right(candidates, enqueue) :]:
        if position in taken:
            continue
        written = entries[position].timestamp
        if left is not None and written is not None and written - left > _WINDOW:
            return None  # candidates are in file order, so later ones are later still (or undatable)
        return position
    return None
