"""The house shows the pipeline: imports run one way, flows -> sinks -> transforms -> extractors
(docs/contributing.md "Style the code relies on")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each package, and the packages it must never import (directly, at any depth of the module).
FORBIDDEN = {
    "extractors": {"transforms", "sinks", "flows", "prefect", "duckdb", "pyarrow", "polars"},
    "transforms": {"sinks", "flows", "prefect", "duckdb"},
    "sinks": {"extractors", "flows", "prefect"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_from_the_stages_above_it(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no modules found under {package}/"
    wrong = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in modules
        if _imports(path) & FORBIDDEN[package]
    }
    assert not wrong, f"{package} imports what it must not: {wrong}"


def _agent_words() -> set[str]:
    from extractors.registry import specs

    return {word.lower() for spec in specs() for word in (spec.name, *spec.aliases)}


def _naming_an_agent(path: Path, words: set[str]) -> list[str]:
    """Code that names a particular agent: an `Agent.X` attribute, a name or attribute spelled as an agent, or a
    string constant that is an agent's name or alias. Comments and docstrings are prose: an agent as an example
    there names no agent to the code (a docstring is a constant too, so docstrings are left out by position)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{shown}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Agent":
            found.append(f"{where} Agent.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr.lower() in words:
            found.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Name) and node.id.lower() in words:
            found.append(f"{where} {node.id}")
        elif isinstance(node, ast.alias) and (node.asname or node.name).split(".")[-1].lower() in words:
            found.append(f"{where} import {node.name}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value.strip().lower() in words
        ):
            found.append(f"{where} {node.value!r}")
    return found


@pytest.mark.parametrize("package", ["flows", "sinks", "transforms"])
def test_no_stage_after_the_extractors_names_an_agent(package: str) -> None:
    """Everything about an agent is its package's SPEC: the stages after extraction derive from the registry, so a
    new agent is one package and nothing else to edit."""
    words = _agent_words()
    assert {"claude", "chatgpt", "claude-code"} <= words, "the registry lists the agents"
    named = [hit for path in sorted((ROOT / package).rglob("*.py")) for hit in _naming_an_agent(path, words)]
    assert not named, f"{package} names agents in code (declare it in the agent's SPEC instead): {named}"


def test_the_check_for_agent_names_sees_them(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""A docstring may say claude."""\n'
        "from extractors.model import Agent\n"
        "# a comment may say codex\n"
        "if agent == Agent.CHATGPT or agent == 'grok' or agent != \"gemini\":\n"
        "    x = 1\n",
        encoding="utf-8",
    )
    found = _naming_an_agent(sample, _agent_words())
    assert [hit.split(" ", 1)[1] for hit in found] == ["Agent.CHATGPT", "'grok'", "'gemini'"], found
