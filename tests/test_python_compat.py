"""What the readers need from the interpreter gives the same answers on every Python the README names: 3.11.0 to
3.11.x (Debian 12's system Python is 3.11.2), 3.12 and 3.13. CI runs these on each of them (.ci/run).

- The ChatGPT scanner's regular expressions (extractors/bounded/json_array.py) against a plain-Python scanner, on tricky
  and generated input. Before 3.11.5 a possessive repeat accepted an unterminated string as complete (CPython
  gh-106052), so these fail there on the old possessive patterns (checked on 3.11.2).
- No project regex uses what changed inside 3.11.x: possessive repeats and atomic groups (new in 3.11.0, wrong
  before 3.11.5: gh-106052, gh-100061) and conditional groups `(?(1)...)` (a compile error on some patterns before
  3.11.1: gh-98740).
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extractors.bounded import json_array
from extractors.bounded.json_array import _SKIP, _STRING_BODY, _TOP_FIELD, _skip_pattern, _top_fields

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("extractors", "transforms", "sinks", "flows")
LEVELS = 4  # what json_array builds _SKIP with

_PLAIN = frozenset(range(256)) - set(b'"{}[]')
_CLOSE = {ord("{"): ord("}"), ord("["): ord("]")}


# ---------------------------------------------------------------- a plain-Python scanner: what the patterns mean
def ref_string_end(data: bytes, pos: int) -> int | None:
    """`data[pos]` is a quote: the end of the string, or None when it does not end inside `data`."""
    i = pos + 1
    while i < len(data):
        if data[i] == ord("\\"):
            i += 2  # an escape is two bytes, whatever the second is
        elif data[i] == ord('"'):
            return i + 1
        else:
            i += 1
    return None


def ref_item_end(data: bytes, pos: int, levels: int) -> int | None:
    """A complete string, or a complete container nested at most `levels` deep, at `pos`: its end, or None."""
    first = data[pos]
    if first == ord('"'):
        return ref_string_end(data, pos)
    if first not in _CLOSE or levels == 0:
        return None
    i = pos + 1
    while True:
        while i < len(data) and data[i] in _PLAIN:
            i += 1
        if i == len(data):
            return None
        if data[i] == _CLOSE[first]:
            return i + 1
        if data[i] not in (ord('"'), ord("{"), ord("[")):
            return None  # the other closing bracket
        end = ref_item_end(data, i, levels - 1)
        if end is None:
            return None
        i = end


def ref_skip(data: bytes, pos: int, levels: int = LEVELS) -> int:
    """Plain bytes and complete items from `pos`; stops at the first byte that does not start one."""
    i = pos
    while True:
        while i < len(data) and data[i] in _PLAIN:
            i += 1
        if i == len(data) or data[i] in (ord("}"), ord("]")):
            return i
        end = ref_item_end(data, i, levels)
        if end is None:
            return i
        i = end


def ref_string_body(data: bytes, pos: int) -> int:
    """Inside a string: the closing quote's position, or the end (before a backslash that is the last byte)."""
    i = pos
    while i < len(data) and data[i] != ord('"'):
        if data[i] == ord("\\"):
            if i + 1 == len(data):
                return i
            i += 2
        else:
            i += 1
    return i


def skip_end(data: bytes, pos: int, pattern: re.Pattern[bytes] = _SKIP) -> int:
    match = pattern.match(data, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def body_end(data: bytes, pos: int) -> int:
    match = _STRING_BODY.match(data, pos)
    assert match is not None
    return match.end()


# ---------------------------------------------------------------- tricky inputs, each with its answer
TRICKY: list[tuple[bytes, int]] = [
    (b'abc"def', 3),  # an unterminated string is not consumed (3.11.2's possessive repeat took it: 7)
    (b'abc"de\\"f', 3),  # the escaped quote does not end it
    (b'abc"de\\\\"f', 10),  # an escaped backslash, then the closing quote
    (b'a"\\', 1),  # a backslash at the buffer's end
    (b'"x",{"a":[1,2', 4),  # a container that does not close in the buffer
    (b'"x",{"a":[1,2]}]', 15),  # ... and one that does, then the closer of the level above
    (b'{"a":"}"}', 9),  # brackets inside strings do not count
    (b'{"a":"\\"}"}x', 12),
    (b'{"a":1]', 0),  # a closer that does not match
    (b"[[[[1]]]]", 9),  # 4 levels: consumed
    (b"[[[[[1]]]]]", 0),  # 5 levels: left to Python
    (b"1,[[[[[1]]]]]", 2),
    (b'[[[["a\\"]"]]]]', 14),
    (b'[[[["a\\"]]]]]', 0),
    (b"", 0),
    (b"abc", 3),
    (b'"', 0),
    (b'""', 2),
    (b'"\\"', 0),
    (b'{"k":"v"} {"k":"', 10),
    (b'[{"a":[{"b":"c"}]}]', 19),
    (b'[{"a":[{"b":[1]}]}]', 0),
]


@pytest.mark.parametrize(("data", "end"), TRICKY)
def test_scanner_pattern_on_tricky_input(data: bytes, end: int) -> None:
    assert ref_skip(data, 0) == end  # the reference agrees with the hand-written answer
    assert skip_end(data, 0) == end


@pytest.mark.parametrize(
    ("data", "end"),
    [(b'abc"', 3), (b'ab\\"c"', 5), (b"ab\\", 2), (b"ab\\\\", 4), (b'\\\\"', 2), (b"", 0), (b"\\", 0), (b'"', 0)],
)
def test_string_body_pattern_on_tricky_input(data: bytes, end: int) -> None:
    assert ref_string_body(data, 0) == end
    assert body_end(data, 0) == end


# ---------------------------------------------------------------- generated inputs
STRUCTURAL = st.binary(max_size=0) | st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\\", b"a", b" ", b",", b":"])
NOISE = st.lists(STRUCTURAL, max_size=40).map(b"".join)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\{}[] ', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='k"\\}', max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(data=NOISE, start=st.integers(0, 40), levels=st.integers(0, 5))
def test_scanner_pattern_matches_the_reference_on_any_bytes(data: bytes, start: int, levels: int) -> None:
    pos = min(start, len(data))
    pattern = _SKIP if levels == LEVELS else _skip_pattern(levels)
    assert skip_end(data, pos, pattern) == ref_skip(data, pos, levels)
    assert body_end(data, pos) == ref_string_body(data, pos)


@settings(max_examples=400, deadline=None)
@given(value=JSON, cut=st.integers(0, 10_000), start=st.integers(0, 10_000))
def test_scanner_pattern_matches_the_reference_on_json_cut_anywhere(value: Any, cut: int, start: int) -> None:
    """A buffer is any prefix of a document; the scan may start at any byte of it."""
    data = json.dumps(value).encode()
    data = data[: cut % (len(data) + 1)]
    pos = start % (len(data) + 1)
    assert skip_end(data, pos) == ref_skip(data, pos)
    assert body_end(data, pos) == ref_string_body(data, pos)


def test_backtracking_stays_linear_when_nothing_closes() -> None:
    """A 4 MB buffer (one read) that ends inside nested containers, or inside a string full of escapes: the engine
    gives back what it took, one step at a time, and never tries another way (each piece matches in one way only).
    """
    node = b'{"id":"x","c":{"parts":["text \\"q\\" \\\\ ' + b"w" * 200 + b'"]},"n":[1,2,3]},'  # 3 deep
    nodes = node * (4_000_000 // len(node))
    cases = [
        (b"[" + nodes, [(0, 0), (1, 1 + len(nodes))]),  # a container that does not close: 4 MB given back
        (b"[[[[" + b'"x",' * 1_000_000, [(0, 0), (3, 3), (4, 4_000_004)]),  # four levels, 1M items given back
        (b'"' + b"ab\\n" * 1_000_000, [(0, 0)]),  # an unterminated string of escapes
    ]
    started = time.perf_counter()
    for data, ends in cases:
        for pos, end in ends:
            assert skip_end(data, pos) == end
    assert body_end(cases[2][0], 1) == len(cases[2][0])
    assert time.perf_counter() - started < 15.0  # ~1 s here (0.1-0.4 s a case); quadratic would take hours


# ---------------------------------------------------------------- the oversized element's fields
def test_top_fields_pattern() -> None:
    assert _top_fields(b'{"title":"t\\"x", "n" : 3 ,"conversation_id":"big","m":') == {
        "title": 't"x',
        "n": 3,
        "conversation_id": "big",
    }
    spaces = b"{" + b" " * 64_000 + b"1"
    started = time.perf_counter()
    assert _TOP_FIELD.match(spaces, 1) is None
    assert time.perf_counter() - started < 1.0  # `\s*,?\s*` was quadratic: ~50 s


# ---------------------------------------------------------------- no regex uses what changed inside 3.11.x
_CHANGED = {"POSSESSIVE_REPEAT", "POSSESSIVE_REPEAT_ONE", "ATOMIC_GROUP", "GROUPREF_EXISTS"}
_RE_FUNCTIONS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}


def _opcodes(pattern: str | bytes, flags: int = 0) -> set[str]:
    from re import _parser  # type: ignore[attr-defined]  # 3.11+: what re.compile parses with

    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, _parser.SubPattern | list | tuple):
            for item in node:
                walk(item)
        elif hasattr(node, "name") and isinstance(node.name, str):
            found.add(node.name)

    walk(_parser.parse(pattern, flags))
    return found


def _literal_patterns() -> list[tuple[str, str | bytes]]:
    """Every pattern given as a literal to `re.<function>(...)` in the project's code."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in _RE_FUNCTIONS
                    and node.args
                ):
                    try:
                        value = ast.literal_eval(node.args[0])
                    except ValueError:
                        continue  # built at run time: see the module-level patterns below
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", value))
    return found


def _module_patterns() -> list[tuple[str, re.Pattern[Any]]]:
    """Every compiled pattern a module of extractors/, transforms/ or sinks/ keeps (built ones included)."""
    found = []
    for package in ("extractors", "transforms", "sinks"):
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if isinstance(value, re.Pattern):
                    found.append((f"{info.name}.{name}", value))
    return found


def test_no_project_regex_uses_a_construct_that_changed_within_3_11() -> None:
    literal = _literal_patterns()
    compiled = _module_patterns()
    assert len(literal) > 20 and any(name == "extractors.bounded.json_array._SKIP" for name, _ in compiled)
    bad = [where for where, pattern in literal if _opcodes(pattern) & _CHANGED]
    bad += [where for where, pattern in compiled if _opcodes(pattern.pattern, pattern.flags) & _CHANGED]
    assert bad == []


def test_the_guard_sees_the_constructs() -> None:
    assert "POSSESSIVE_REPEAT" in _opcodes(rb'(?:[^"]++|"")*+')  # the compiler makes `[^"]++` *_REPEAT_ONE
    assert "ATOMIC_GROUP" in _opcodes("(?>a|ab)c")
    assert "GROUPREF_EXISTS" in _opcodes("(a)?(?(1)b|c)")
    assert not _opcodes(json_array._SKIP.pattern) & _CHANGED


def test_interpreter_is_one_the_readme_names() -> None:
    assert sys.version_info >= (3, 11)
