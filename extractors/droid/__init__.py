"""Factory Droid sessions: `~/.factory/sessions/<cwd slug>/<session id>.jsonl`, each with `<id>.settings.json`.

One file is one session (docs/agents/droid.md). The `.settings.json` beside it is not a session: it is read with it
(the model and the session's token totals) and counted in the unit's fingerprint. The line rules are in `parse`
and `tables`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, MiB, iter_jsonl, read_json_document
from extractors.discovery import walk_files
from extractors.droid.parse import Settings, parse_session_file, read_settings
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim

SPEC = AgentSpec(
    name=Agent("droid"),
    display="Factory Droid",
    rank=160,
    parser_version="1",
    env=(),  # droid documents no variable that moves ~/.factory (docs/agents/droid.md "Where the files are")
    nightly=True,
    export=None,
    price_provider=None,  # droid serves Anthropic, OpenAI, Google and custom models: names are looked up without a hint
    reasoning_billed_separately=False,
    unknown_records="skip",  # a line `type` or message `role` not in tables is counted as SKIPPED
    aliases=("factory", "factory-droid"),
    claims=lambda path: Claim.FOLDER if ".factory" in path.parts else None,
)

SESSIONS = "sessions"
SETTINGS_SUFFIX = ".settings.json"
# A settings file is a few hundred bytes; this bounds reading one.
_MAX_SETTINGS_BYTES = 1 * MiB


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """`~/.factory/sessions`. No I/O."""
    return [home / ".factory" / SESSIONS]


def _is_session_file(name: str, _folders: tuple[str, ...], _depth: int) -> bool:
    return name.endswith(".jsonl") and len(name) > len(".jsonl")


def discover(root: Path) -> Iterator[Source]:
    """Session files in `root` (a sessions folder) and one folder down (the cwd slugs). Stats files only; the
    settings file beside one counts in its fingerprint."""
    for path, st in walk_files(root, _is_session_file, max_depth=1):
        size, mtime = st.st_size, st.st_mtime_ns
        try:
            sidecar = os.stat(settings_path(path))
        except OSError:
            sidecar = None
        if sidecar is not None:
            size, mtime = size + sidecar.st_size, max(mtime, sidecar.st_mtime_ns)
        yield Source(SPEC.name, path, size, mtime, str(root))


def settings_path(path: str) -> str:
    return path[: -len(".jsonl")] + SETTINGS_SUFFIX


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The one session of a Droid file. Raises RejectError: missing_session_id (a first line that is not
    session_start), unsupported_format (a `droid exec` stream capture), no_conversation (an empty file, or no turn
    and no tool call), inconsistent_source, missing_timestamp, bad_shape and every code of the bounded readers
    (also for the settings file); DeferError."""
    sidecar = settings_path(source.path)
    settings: Settings | None = None
    if os.path.isfile(sidecar):
        settings = read_settings(
            read_json_document(sidecar, limits, max_bytes=min(_MAX_SETTINGS_BYTES, limits.max_document_bytes))
        )
    yield Loaded(source, parse_session_file(iter_jsonl(source.path, limits), limits, settings))
