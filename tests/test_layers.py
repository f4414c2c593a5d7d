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
