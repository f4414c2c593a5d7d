"""What an agent declares about itself: one `AgentSpec` per agent package (`extractors/<name>/__init__.py: SPEC`).

The registry finds the packages and everything outside `extractors/` derives from their specs: the known names and
aliases, the format of an explicitly given path, which agents `transcripts run` discovers, the price provider and
billing rule, the schema's description of the `agent` column. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Literal

from extractors.model import Agent


class Claim(IntEnum):
    """How strongly a path says it is an agent's source (`AgentSpec.claims`); the strongest claim wins, and two
    equally strong claims leave the path's format unknown (then `--format` names it)."""

    EXTENSION = 1  # a file type several formats may use (`.json`, `.zip`)
    FOLDER = 2  # under the agent's own folder (`.claude`, `.codex`, `.grok`)
    NAME = 3  # the file's name is the agent's own pattern (`rollout-*`)


def claims_nothing(path: Path) -> Claim | None:
    """For an agent whose paths are never recognised: it is read only when named (`--format`, `--root`)."""
    return None


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent, as the rest of the house knows it. The package beside it provides the reader:
    `default_roots(home, env)`, `discover(root)`, `read(source, limits)` and optionally `read_streaming`."""

    name: Agent  # the package's name, the Parquet partition value and the name users type
    display: str  # the product's name in messages ("Claude Code")
    rank: int  # where the agent sorts in lists, messages and runs (then by name)
    parser_version: str  # bump when the parse changes: sources read by an older version are read again
    env: tuple[str, ...]  # the environment variables `default_roots` reads (its roots' overrides), and no other
    nightly: bool  # discovered by `transcripts run` (False: only given explicitly, like a ChatGPT export)
    # A source is an export the user downloads and names: a given file is handed to `discover` like a folder (it
    # knows the export's files), and a backfill of which nothing at all was readable is refused, with this saying
    # what to give instead ("the export's .zip or its conversations.json"). None: a file given is one source.
    export: str | None
    price_provider: str | None  # the `genai-prices` provider its model names are looked up under first
    reasoning_billed_separately: bool  # its `output_tokens` leave out the reasoning tokens, which are billed as output
    unknown_records: Literal["skip", "reject"]  # a record of a kind the reader does not know: counted and skipped
    aliases: tuple[str, ...] = ()  # other names users type for it (`claude-code`)
    claims: Callable[[Path], Claim | None] = claims_nothing  # how strongly an explicitly given path is its source
