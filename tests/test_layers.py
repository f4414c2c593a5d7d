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


# Agent names that are also everyday identifiers of the code: as a variable or attribute they name no agent (the
# DB-API's `Connection.cursor()` and the `cursor` it returns, for Cursor). As a string constant or `Agent.X` they
# still do.
ORDINARY_IDENTIFIERS = frozenset({"cursor"})


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
        elif isinstance(node, ast.Attribute) and node.attr.lower() in words - ORDINARY_IDENTIFIERS:
            found.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Name) and node.id.lower() in words - ORDINARY_IDENTIFIERS:
            found.append(f"{where} {node.id}")
        elif (
            isinstance(node, ast.alias)
            and (node.asname or node.name).split(".")[-1].lower() in words - ORDINARY_IDENTIFIERS
        ):
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


# --- circles, and the three packages of flows/ ------------------------------------------------------------------------

PACKAGES = ("flows", "sinks", "transforms", "extractors")
# Inside flows/: the CLI uses the runner and server, which use the ETL, never the other way
# (docs/design.md "The packages").
FLOWS_ORDER = {"etl": 0, "service": 1, "cli": 2}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules `name` imports, anywhere in it (an import inside a function counts): `from a import b`
    is an edge to the module a.b when there is one, else to a."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            found.update(subs or [base])
    return {target for target in found if target in modules and target != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def _graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = _modules(root)
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def test_no_import_circle_in_the_four_packages() -> None:
    circles = _circles(_graph())
    assert not circles, f"modules that import each other in a circle (in-function imports count): {circles}"


def test_the_circle_check_sees_one_hidden_in_a_function(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "flows" / "a.py").write_text("from flows import b\n")
    (tmp_path / "flows" / "b.py").write_text("def f():\n    from flows.c import x\n")
    (tmp_path / "flows" / "c.py").write_text("def g():\n    import flows.a\n")
    (tmp_path / "sinks" / "d.py").write_text("from sinks import e\n")
    (tmp_path / "sinks" / "e.py").write_text("X = 1\n")
    assert _circles(_graph(tmp_path)) == [["flows.a", "flows.b", "flows.c"]]


def test_the_cli_uses_the_service_which_uses_the_etl_never_back() -> None:
    graph = _graph()
    assert set(FLOWS_ORDER) == {p.name for p in (ROOT / "flows").iterdir() if (p / "__init__.py").is_file()}
    loose = sorted(p.name for p in (ROOT / "flows").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"a module of flows/ outside its three packages: {loose}"
    upward = [
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("flows.") and name.count(".") >= 2
        for target in targets
        if target.startswith("flows.")
        and target.count(".") >= 1
        and FLOWS_ORDER[target.split(".")[1]] > FLOWS_ORDER[name.split(".")[1]]
    ]
    assert not upward, f"flows/ imports upward (cli -> service -> etl only): {upward}"


def _unexplained_imports(path: Path) -> list[str]:
    """Imports inside a function with no comment saying why: on the import, or above the run of imports it is in."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for function in ast.walk(ast.parse("\n".join(lines), filename=str(path))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            at = node.lineno - 1
            said = "#" in lines[at]
            while not said and at > 0:
                at -= 1
                text = lines[at].strip()
                said = text.startswith("#") or (text.startswith(("import ", "from ")) and "#" in text)
                if text and not said and not text.startswith(("import ", "from ")):
                    break
            if not said:
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}")
    return found


def test_an_import_inside_a_function_says_why_it_is_there() -> None:
    """Only start-up time (or Prefect reading its settings at its import) puts an import in a function, and the
    comment beside it says which, measured (docs/design.md "The packages")."""
    unexplained = [hit for path in sorted((ROOT / "flows").rglob("*.py")) for hit in _unexplained_imports(path)]
    assert not unexplained, f"imports inside functions with no reason beside them: {unexplained}"


def test_the_check_for_unexplained_imports_sees_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f():\n"
        "    # here: DuckDB (~0.5 s)\n"
        "    import duckdb\n"
        "\n"
        "    from sinks import warehouse\n"
        "    x = 1\n"
        "    import polars  # here: ~1 s\n"
        "    x = 2\n"
        "    import json\n",
        encoding="utf-8",
    )
    assert _unexplained_imports(sample) == ["sample.py:9"]


def test_the_python_api_sits_on_top_and_nothing_of_the_pipeline_imports_it() -> None:
    """`transcripts/` (the public Python API, docs/design.md "The packages") reads what the sinks wrote; the four
    packages never import it, and it never imports Prefect (a notebook does not pay for it)."""
    below = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "transcripts" in _imports(path)
    ]
    assert not below, f"the pipeline imports the Python API: {below}"
    api = sorted((ROOT / "transcripts").rglob("*.py"))
    assert api and not [str(p.relative_to(ROOT)) for p in api if "prefect" in _imports(p)]
