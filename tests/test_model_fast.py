"""`new_turn` / `new_tool_call` / `new_usage` make the same values as `Turn(...)` / `ToolCall(...)` / `Usage(...)`:
every field set, the class's own type, equal, hashed, frozen, copied and pickled alike."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from extractors.model import Role, ToolCall, Turn, Usage, new_tool_call, new_turn, new_usage

WHEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)


def _pairs() -> list[tuple[Any, Any]]:
    turn = (7, Role.USER, "hi", WHEN, "m", ("image",))
    call = ("7.1", 7, "Shell", '{"command":"ls"}', "out", True, WHEN, LATER, "cursor-child")
    bare = ("0.0", 0, "Read", None, None, None, None, None, None)
    usage = (7, "m", 10, 20, 30, 40, 5, 0.25, WHEN, "msg_1")
    bare_usage = (1_000_000_003, None, None, None, None, None, None, None, None, None)
    return [
        (new_turn(*turn), Turn(*turn)),
        (new_tool_call(*call), ToolCall(*call)),
        (new_tool_call(*bare), ToolCall(*bare)),
        (new_usage(*usage), Usage(*usage)),
        (new_usage(*bare_usage), Usage(*bare_usage)),
    ]


@pytest.mark.parametrize(("fast", "made"), _pairs())
def test_a_fast_record_is_the_record_its_class_makes(fast: Any, made: Any) -> None:
    assert type(fast) is type(made)
    # every field set, to the value given (a field the maker left unset would raise AttributeError here)
    for f in dataclasses.fields(made):
        assert getattr(fast, f.name) == getattr(made, f.name), f.name
    assert fast == made and made == fast and hash(fast) == hash(made) and repr(fast) == repr(made)
    assert pickle.loads(pickle.dumps(fast)) == made
    assert copy.deepcopy(fast) == made and dataclasses.replace(fast) == made
    first = dataclasses.fields(made)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, first, getattr(made, first))


@pytest.mark.parametrize("cls", [Turn, ToolCall, Usage])
def test_each_maker_takes_every_field_of_its_class_in_order(cls: type) -> None:
    maker = {Turn: new_turn, ToolCall: new_tool_call, Usage: new_usage}[cls]
    names = [f.name for f in dataclasses.fields(cls)]
    assert maker.__init__.__code__.co_varnames[1 : len(names) + 1] == tuple(names)  # type: ignore[misc]
    assert maker.__slots__ == cls.__slots__  # type: ignore[attr-defined]
