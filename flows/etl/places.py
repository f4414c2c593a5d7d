"""Where the tool keeps its per-machine state (the managed Prefect server, the command runner): stdlib only, since
the `transcripts` executable reads it before anything else is imported."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the managed server lives: `$TRANSCRIPTS_STATE_DIR`, else `$XDG_STATE_HOME/transcripts/prefect`,
    else `~/.local/state/transcripts/prefect`."""
    env = os.environ if env is None else env
    if env.get("TRANSCRIPTS_STATE_DIR"):
        return Path(env["TRANSCRIPTS_STATE_DIR"]).expanduser() / "prefect"
    base = Path(env.get("XDG_STATE_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return base / "transcripts" / "prefect"
