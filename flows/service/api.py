"""How a command reaches Prefect: the managed server's recorded address and health, the API a person configured,
and the settings Prefect is loaded with. Cheap to import (no Prefect): the command runner checks these between
commands, the server and the CLI use them."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from flows.etl.places import state_dir

HEALTH_SECONDS = 2.0  # one health probe of the managed server

# Prefect settings for a quiet, robust run (each can be overridden in the environment); the command runner
# (flows.service.runner) loads Prefect with the same ones.
QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_LOGGING_TO_API_ENABLED": "false",
    "PREFECT_API_REQUEST_TIMEOUT": "30",
}


def quiet_prefect() -> None:
    """Set the quiet defaults in this process's environment, before Prefect is imported (it reads them once)."""
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)


class ServerError(RuntimeError):
    """No usable Prefect API; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Api:
    """A Prefect API a command can use."""

    url: str
    source: str  # "managed", "PREFECT_API_URL", "Prefect profile 'x'", "Prefect settings"
    pid: int | None = None
    port: int | None = None
    started: bool = field(default=False, compare=False)  # this command started it (it says what it leaves running)

    @property
    def ui(self) -> str:
        return self.url.removesuffix("/api")


def state_file(folder: Path) -> Path:
    return folder / "server.json"


def healthy(url: str, timeout: float = HEALTH_SECONDS) -> bool:
    """Whether a Prefect API answers its health check within `timeout` seconds (a bounded wait, always)."""
    import urllib.error  # here: ~15 ms (http.client, ssl, email) on the path of every command (flows.cli.entry)
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def configured(env: Mapping[str, str] | None = None) -> Api | None:
    """The API the user configured, if any: Prefect's own settings when Prefect is loaded already (a test
    harness), else `PREFECT_API_URL`, else the active Prefect profile (read from its TOML, not via Prefect)."""
    if env is None and "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL  # loaded already (checked above): no cost

        value = PREFECT_API_URL.value()
        if value:
            return Api(str(value), "Prefect settings")
    env = os.environ if env is None else env
    if env.get("PREFECT_API_URL"):
        return Api(env["PREFECT_API_URL"], "PREFECT_API_URL")
    home = Path(env.get("PREFECT_HOME") or Path(env.get("HOME") or Path.home()) / ".prefect").expanduser()
    path = Path(env.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    import tomllib  # here: ~10 ms, on the path of every command (flows.cli.entry -> runner -> this module)

    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = env.get("PREFECT_PROFILE") or profiles.get("active")
    profile = profiles.get("profiles", {}).get(active, {}) if isinstance(active, str) else {}
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return Api(str(url), f"Prefect profile '{active}'") if url else None


def read_state(folder: Path | None = None) -> Api | None:
    """The managed server as last recorded (it may have died since)."""
    folder = folder or state_dir()
    try:
        raw = json.loads(state_file(folder).read_text(encoding="utf-8"))
        return Api(str(raw["url"]), "managed", int(raw["pid"]), int(raw["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
