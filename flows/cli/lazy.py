"""Modules imported on first use: the CLI registers every command at start, and `--help` or `status` must not pay
for DuckDB or pyarrow that only `sql` or `search` need."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy(name: str) -> ModuleType:
    """The module `name`, executed when one of its attributes is first used (`importlib.util.LazyLoader`)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as an import would: `from sinks import warehouse` finds it
    return module
