"""All settings in one place: command-line flags > environment > TOML file > defaults.

Environment: TRANSCRIPTS_DATA_DIR, TRANSCRIPTS_HOME, TRANSCRIPTS_SOURCES (comma list), TRANSCRIPTS_ROOT_<AGENT>
(comma list of folders), TRANSCRIPTS_LIMIT_<NAME> (e.g. TRANSCRIPTS_LIMIT_MAX_LINE_BYTES), TRANSCRIPTS_LOCK_WAIT,
TRANSCRIPTS_WORKERS, TRANSCRIPTS_REDACT (true/false),
TRANSCRIPTS_SCHEDULE_CRON, TRANSCRIPTS_SCHEDULE_TIMEZONE, and TRANSCRIPTS_CONFIG (the TOML file; default
`$XDG_CONFIG_HOME/transcripts/config.toml`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extractors.bounded import Limits
from extractors.model import Agent
from extractors.registry import Extractor, parse_agent, registered
from flows.workers import default_workers

PROJECT_DIR = Path(__file__).resolve().parent.parent


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message says which and why."""


def default_data_dir(env: Mapping[str, str]) -> Path:
    """The checkout's `data/` when run from a checkout, else `$XDG_DATA_HOME/transcripts`."""
    if (PROJECT_DIR / "pyproject.toml").exists() and (PROJECT_DIR / "data").is_dir():
        return PROJECT_DIR / "data"
    base = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "transcripts"


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    home: Path
    home_explicit: bool  # --home given: agents' own env overrides (CLAUDE_CONFIG_DIR, ...) are not used
    agents: tuple[Agent, ...]  # which sources a run discovers
    explicit_roots: Mapping[Agent, tuple[Path, ...]] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    batch_bytes: int = 64 * 1024 * 1024  # sources per extraction task: about this many bytes ...
    batch_files: int = 400  # ... or this many files
    workers: int = 1  # processes that read sources when a run has several batches
    lock_wait_seconds: float = 60.0
    schedule_cron: str = "0 3 * * *"
    schedule_timezone: str | None = None
    redact: bool = True  # secrets in every stored text become markers (transforms/redact.py); False: raw text
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def roots(self, agent: Agent, module: Extractor) -> list[Path]:
        """The folders to discover `agent` under."""
        if agent in self.explicit_roots:
            return list(self.explicit_roots[agent])
        env = {} if self.home_explicit else self.env
        return module.default_roots(self.home, env)


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _read_toml(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"cannot read settings file {path}: {exc}") from exc


def _limits(toml: Mapping[str, Any], env: Mapping[str, str], overrides: Mapping[str, Any]) -> Limits:
    values: dict[str, Any] = {}
    types = {f.name: f.type for f in dataclasses.fields(Limits)}
    sources = [dict(toml.get("limits", {}))]
    sources.append(
        {k[len("TRANSCRIPTS_LIMIT_") :].lower(): v for k, v in env.items() if k.startswith("TRANSCRIPTS_LIMIT_")}
    )
    sources.append(dict(overrides))
    for layer in sources:
        for name, raw in layer.items():
            if name not in types:
                raise SettingsError(f"unknown limit '{name}'; known: {', '.join(types)}")
            try:
                values[name] = float(raw) if types[name] in ("float", float) else int(raw)
            except (TypeError, ValueError):
                raise SettingsError(f"limit {name} must be a number, got {raw!r}") from None
            if values[name] < 0:
                raise SettingsError(f"limit {name} must not be negative")
    return Limits(**values)


def load_settings(
    *,
    data_dir: Path | None = None,
    home: Path | None = None,
    sources: Sequence[str] = (),
    roots: Sequence[str] = (),
    config: Path | None = None,
    limits: Mapping[str, Any] | None = None,
    lock_wait: float | None = None,
    redact: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve settings from flags (arguments), the environment and the TOML file. Raises SettingsError."""
    env = dict(os.environ if env is None else env)
    config_path = config or (Path(env["TRANSCRIPTS_CONFIG"]) if env.get("TRANSCRIPTS_CONFIG") else None)
    if config_path is None:
        base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", str(Path.home()))) / ".config")
        config_path = base / "transcripts" / "config.toml"
    elif not config_path.exists():
        raise SettingsError(f"settings file {config_path} does not exist")
    toml = _read_toml(config_path)

    def pick(flag: Any, env_key: str, toml_key: str) -> Any:
        if flag is not None:
            return flag
        if env.get(env_key):
            return env[env_key]
        return toml.get(toml_key)

    home_value = pick(home, "TRANSCRIPTS_HOME", "home")
    home_path = (Path(home_value).expanduser() if home_value else Path(env.get("HOME") or Path.home())).absolute()
    data_value = pick(data_dir, "TRANSCRIPTS_DATA_DIR", "data_dir")
    data_path = (Path(data_value).expanduser() if data_value else default_data_dir(env)).absolute()

    known = registered()
    chosen = list(sources) or _split(env.get("TRANSCRIPTS_SOURCES", "")) or list(toml.get("sources", []))
    try:
        agents = (
            tuple(parse_agent(name) for name in chosen) if chosen else tuple(a for a, m in known.items() if m.NIGHTLY)
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    for agent in agents:
        if agent not in known:
            raise SettingsError(f"no extractor for '{agent}' in this version")

    explicit: dict[Agent, list[Path]] = {}
    for name, paths in dict(toml.get("roots", {})).items():
        explicit[_agent(name)] = [Path(p).expanduser() for p in ([paths] if isinstance(paths, str) else paths)]
    for key, value in env.items():
        if key.startswith("TRANSCRIPTS_ROOT_") and value:
            explicit[_agent(key[len("TRANSCRIPTS_ROOT_") :])] = [Path(p).expanduser() for p in _split(value)]
    flag_roots: dict[Agent, list[Path]] = {}
    for item in roots:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise SettingsError(f"--root takes AGENT=PATH, got {item!r}")
        flag_roots.setdefault(_agent(name), []).append(Path(path).expanduser())
    explicit.update(flag_roots)

    run = dict(toml.get("run", {}))
    schedule = dict(toml.get("schedule", {}))
    wait = (
        lock_wait
        if lock_wait is not None
        else float(env.get("TRANSCRIPTS_LOCK_WAIT") or run.get("lock_wait_seconds", 60))
    )
    return Settings(
        data_dir=data_path,
        home=home_path,
        home_explicit=home_value is not None,
        agents=agents,
        explicit_roots={a: tuple(p) for a, p in explicit.items()},
        limits=_limits(toml, env, limits or {}),
        batch_bytes=int(run.get("batch_bytes", 64 * 1024 * 1024)),
        batch_files=int(run.get("batch_files", 400)),
        workers=int(env.get("TRANSCRIPTS_WORKERS") or run.get("workers") or default_workers()),
        lock_wait_seconds=wait,
        schedule_cron=env.get("TRANSCRIPTS_SCHEDULE_CRON") or schedule.get("cron", "0 3 * * *"),
        schedule_timezone=env.get("TRANSCRIPTS_SCHEDULE_TIMEZONE") or schedule.get("timezone"),
        redact=_redact(redact, env, toml),
        env=env,
    )


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _redact(flag: bool | None, env: Mapping[str, str], toml: Mapping[str, Any]) -> bool:
    """Redaction: `--no-redact` > TRANSCRIPTS_REDACT > `[redaction] enabled` > on."""
    if flag is not None:
        return flag
    if env.get("TRANSCRIPTS_REDACT"):
        value = env["TRANSCRIPTS_REDACT"].strip().lower()
        if value not in _BOOLS:
            raise SettingsError(f"TRANSCRIPTS_REDACT must be true or false, got {env['TRANSCRIPTS_REDACT']!r}")
        return _BOOLS[value]
    enabled = dict(toml.get("redaction", {})).get("enabled", True)
    if not isinstance(enabled, bool):
        raise SettingsError(f"[redaction] enabled must be true or false, got {enabled!r}")
    return enabled


def _agent(name: str) -> Agent:
    try:
        return parse_agent(name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
