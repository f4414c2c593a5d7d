"""One run as one value: what every step of a run reads, handed to each step (and to the worker processes and Dask
workers that read its batches) whole, instead of the same long list of arguments at every call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from extractors.bounded import Limits
from extractors.model import Agent
from flows.etl.settings import Settings
from sinks.store import Store
from transforms.redact import Redactor


def utc_now() -> datetime:
    """A run's clock unless it is given another: a module-level function, so that a run pickles to its workers."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Run:
    """A run once its plan is made: its settings and id, the parser versions and bucket layout its batches are read
    and staged with, the redactor of every stored text, and the clock its times come from."""

    settings: Settings
    run_id: str
    parser_versions: Mapping[Agent, str]  # the effective version of every agent's parser (pipeline.parser_versions)
    buckets: Mapping[str, int]  # the bucket count of every agent partition (Plan.bucket_layout)
    redactor: Redactor
    clock: Callable[[], datetime] = utc_now

    def __post_init__(self) -> None:
        # The environment stays in the flow's process: a run travels to worker processes and to a Dask cluster,
        # which may be another machine, and the environment holds whatever tokens a person has set. Nothing after
        # discovery reads it (an agent's own root overrides are read when the roots are listed).
        if self.settings.env:
            object.__setattr__(self, "settings", replace(self.settings, env={}))

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir

    @property
    def limits(self) -> Limits:
        return self.settings.limits

    @property
    def store(self) -> Store:
        return Store(self.settings.data_dir)
