"""All settings in one place: command-line flags > environment > TOML file > defaults.

Environment: TRANSCRIPTS_DATA_DIR, TRANSCRIPTS_HOME, TRANSCRIPTS_SOURCES (comma list), TRANSCRIPTS_ROOT_<AGENT>
(comma list of folders), TRANSCRIPTS_LIMIT_<NAME> (e.g. TRANSCRIPTS_LIMIT_MAX_LINE_BYTES), TRANSCRIPTS_LOCK_WAIT,
TRANSCRIPTS_WORKERS, TRANSCRIPTS_DASK, TRANSCRIPTS_REDACT (true/false),
TRANSCRIPTS_SCHEDULE_CRON, TRANSCRIPTS_SCHEDULE_TIMEZONE, TRANSCRIPTS_TIMEZONE (zone of per-day views), and
TRANSCRIPTS_CONFIG (the TOML file; default `$XDG_CONFIG_HOME/transcripts/config.toml`).
The data dir defaults to the user's data home (flows.etl.datahome), never the checkout.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extractors.bounded import Limits
from extractors.model import Agent
from extractors.registry import Extractor, parse_agent, registered
from flows.etl.datahome import PROJECT_DIR as PROJECT_DIR  # re-exported: flows.cli.docs finds docs/analysis.md by it
from flows.etl.datahome import default_data_dir as default_data_dir
from flows.etl.workers import default_workers


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message says which and why."""


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
    # Run the extraction tasks on a Dask cluster: a scheduler address (tcp://host:8786) or "local" (a LocalCluster
    # on this machine); None: worker processes on this machine (`workers`).
    dask: str | None = None
    timezone: str | None = None  # zone of per-day views (None: the machine's)
    redact: bool = True  # secrets in every stored text become markers (transforms/redact.py); False: raw text
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    origins: Mapping[str, str] = field(default_factory=dict, repr=False)  # setting -> where its value came from
    flag_roots: Mapping[Agent, tuple[Path, ...]] = field(default_factory=dict, repr=False)  # given as --root

    def roots(self, agent: Agent, module: Extractor) -> list[Path]:
        """The folders to discover `agent` under."""
        if agent in self.explicit_roots:
            return list(self.explicit_roots[agent])
        env = {} if self.home_explicit else self.env
        return module.default_roots(self.home, env)


KNOWN_KEYS: dict[str, tuple[str, ...]] = {  # the settings file's keys, per table ("" is the top level)
    "": ("data_dir", "home", "sources", "roots", "limits", "run", "schedule", "timezone", "redaction"),
    "redaction": ("enabled",),
    "run": ("batch_bytes", "batch_files", "workers", "lock_wait_seconds", "dask"),
    "schedule": ("cron", "timezone"),
}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" Did you mean '{close[0]}'?" if close else f" Known: {', '.join(choices)}."


def _read_toml(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    if not path.is_file():
        raise SettingsError(f"settings file {path} is not a file")
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"cannot read settings file {path}: {exc}") from exc
    for table, keys in KNOWN_KEYS.items():
        section = data if table == "" else data.get(table, {})
        where = f"settings file {path}" if table == "" else f"[{table}] of settings file {path}"
        if not isinstance(section, dict):
            raise SettingsError(f"'{table}' in settings file {path} must be a table ([{table}])")
        for key in section:
            if key not in keys:
                raise SettingsError(f"unknown setting '{key}' in {where}.{_did_you_mean(key, keys)}")
    return data


def _number(raw: Any, name: str, where: str, *, kind: type = int, minimum: float = 0) -> Any:
    """`raw` as an int (or float) of at least `minimum`, or a SettingsError naming the setting and its origin."""
    what = "a whole number" if kind is int else "a number"
    try:
        if isinstance(raw, bool) or (kind is int and isinstance(raw, float)):
            raise ValueError
        value = kind(raw)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(f"{name} ({where}) must be {what} of at least {minimum:g}, got {raw!r}") from None
    if value != value or value < minimum:  # NaN included
        raise SettingsError(f"{name} ({where}) must be {what} of at least {minimum:g}, got {raw!r}")
    return value


def _limits(
    toml: Mapping[str, Any], env: Mapping[str, str], overrides: Mapping[str, Any], config: Path | None
) -> Limits:
    values: dict[str, Any] = {}
    types = {f.name: f.type for f in dataclasses.fields(Limits)}
    layers: list[tuple[str, dict[str, Any]]] = []
    file_limits = toml.get("limits", {})
    if not isinstance(file_limits, dict):
        raise SettingsError(f"'limits' in settings file {config} must be a table ([limits])")
    layers += [(f"[limits] of settings file {config}", {k: (k, v) for k, v in file_limits.items()})]
    env_limits = {
        k[len("TRANSCRIPTS_LIMIT_") :].lower(): (k, v) for k, v in env.items() if k.startswith("TRANSCRIPTS_LIMIT_")
    }
    layers.append(("environment", env_limits))
    layers.append(("argument", {k: (k, v) for k, v in overrides.items()}))
    for where, layer in layers:
        for name, (label, raw) in layer.items():
            if name not in types:
                raise SettingsError(f"unknown limit '{name}' ({label}, {where}).{_did_you_mean(name, list(types))}")
            kind = float if types[name] in ("float", float) else int
            values[name] = _number(raw, f"limit {label}", where, kind=kind)
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
    dask: str | None = None,
    redact: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve settings from flags (arguments), the environment and the TOML file. Raises SettingsError, whose
    message names the setting and where its value came from."""
    env = dict(os.environ if env is None else env)
    config_path = config or (Path(env["TRANSCRIPTS_CONFIG"]) if env.get("TRANSCRIPTS_CONFIG") else None)
    if config_path is None:
        base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", str(Path.home()))) / ".config")
        config_path = base / "transcripts" / "config.toml"
    elif not config_path.exists():
        origin = "--config" if config else "TRANSCRIPTS_CONFIG"
        raise SettingsError(f"settings file {config_path} does not exist ({origin})")
    toml = _read_toml(config_path)
    in_file = f"settings file {config_path}"
    run = dict(toml.get("run", {}))
    schedule = dict(toml.get("schedule", {}))
    origins: dict[str, str] = {}

    def pick(name: str, flag: Any, flag_name: str, env_key: str, toml_value: Any, toml_where: str) -> Any:
        if flag is not None:
            origins[name] = flag_name
            return flag
        if env.get(env_key):
            origins[name] = f"{env_key} (environment)"
            return env[env_key]
        if toml_value is not None:
            origins[name] = toml_where
        return toml_value

    def path_value(name: str, value: Any) -> Path | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str | Path):
            raise SettingsError(f"{name} ({origins[name]}) must be a path, got {value!r}")
        return Path(value).expanduser()

    home_value = path_value("home", pick("home", home, "--home", "TRANSCRIPTS_HOME", toml.get("home"), in_file))
    home_path = (home_value or Path(env.get("HOME") or Path.home())).absolute()
    data_value = path_value(
        "data_dir",
        pick("data_dir", data_dir, "--data-dir", "TRANSCRIPTS_DATA_DIR", toml.get("data_dir"), in_file),
    )
    data_path = (data_value or default_data_dir(env)).absolute()
    origins.setdefault("data_dir", "default")

    known = registered()
    file_sources = toml.get("sources", [])
    if isinstance(file_sources, str):
        file_sources = _split(file_sources)
    if not isinstance(file_sources, list) or not all(isinstance(x, str) for x in file_sources):
        raise SettingsError(f"sources ({in_file}) must be a list of agent names, got {file_sources!r}")
    chosen = list(sources) or _split(env.get("TRANSCRIPTS_SOURCES", "")) or list(file_sources)
    try:
        agents = (
            tuple(dict.fromkeys(parse_agent(name) for name in chosen))
            if chosen
            else tuple(a for a, m in known.items() if m.SPEC.nightly)
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    for agent in agents:
        if agent not in known:
            raise SettingsError(f"no extractor for '{agent}' in this version")

    explicit: dict[Agent, list[Path]] = {}
    file_roots = toml.get("roots", {})
    if not isinstance(file_roots, dict):
        raise SettingsError(f"roots ({in_file}) must be a table ([roots]) of AGENT = [folders]")
    for name, paths in file_roots.items():
        listed = [paths] if isinstance(paths, str) else paths
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise SettingsError(f"roots.{name} ({in_file}) must be a folder or a list of folders, got {paths!r}")
        explicit[_agent(name)] = [Path(p).expanduser() for p in listed]
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

    wait_raw = pick(
        "lock_wait_seconds",
        lock_wait,
        "--wait",
        "TRANSCRIPTS_LOCK_WAIT",
        run.get("lock_wait_seconds"),
        f"[run] of {in_file}",
    )
    wait = 60.0 if wait_raw is None else _number(wait_raw, "lock wait", origins["lock_wait_seconds"], kind=float)
    workers_raw = pick("workers", None, "", "TRANSCRIPTS_WORKERS", run.get("workers"), f"[run] of {in_file}")
    workers = (
        default_workers() if workers_raw is None else _number(workers_raw, "workers", origins["workers"], minimum=1)
    )
    batch_bytes = _number(run.get("batch_bytes", 64 * 1024 * 1024), "batch_bytes", f"[run] of {in_file}", minimum=1)
    batch_files = _number(run.get("batch_files", 400), "batch_files", f"[run] of {in_file}", minimum=1)
    cron = pick("cron", None, "", "TRANSCRIPTS_SCHEDULE_CRON", schedule.get("cron"), f"[schedule] of {in_file}")
    timezone = pick(
        "timezone", None, "", "TRANSCRIPTS_SCHEDULE_TIMEZONE", schedule.get("timezone"), f"[schedule] of {in_file}"
    )
    for name, value in (("cron", cron), ("timezone", timezone)):
        if value is not None and not isinstance(value, str):
            raise SettingsError(f"{name} ({origins[name]}) must be a string, got {value!r}")
    zone = env.get("TRANSCRIPTS_TIMEZONE") or toml.get("timezone")
    if zone:
        from sinks.views import ZoneError, check_zone  # lazily: it imports DuckDB, which `status` does without

        try:
            check_zone(str(zone))
        except ZoneError as exc:
            raise SettingsError(f"timezone: {exc}") from None
    return Settings(
        data_dir=data_path,
        home=home_path,
        home_explicit=home_value is not None,
        agents=agents,
        explicit_roots={a: tuple(p) for a, p in explicit.items()},
        limits=_limits(toml, env, limits or {}, config_path),
        batch_bytes=batch_bytes,
        batch_files=batch_files,
        workers=workers,
        lock_wait_seconds=wait,
        schedule_cron=cron or "0 3 * * *",
        schedule_timezone=timezone or None,
        dask=dask or env.get("TRANSCRIPTS_DASK") or run.get("dask") or None,
        timezone=str(zone) if zone else None,
        redact=_redact(redact, env, toml),
        env=env,
        origins=origins,
        flag_roots={a: tuple(p) for a, p in flag_roots.items()},
    )


def check_schedule(cron: str, timezone: str | None, origins: Mapping[str, str]) -> None:
    """Refuse a cron expression or time zone that cannot be used, naming where it came from."""

    if timezone is not None:
        try:
            zoneinfo.ZoneInfo(timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            where = origins.get("timezone", "--timezone")
            raise SettingsError(
                f"unknown time zone {timezone!r} ({where}); use an IANA name such as Europe/Berlin or UTC"
            ) from None
    fields = cron.split()
    if len(fields) != 5:
        where = origins.get("cron", "--cron")
        raise SettingsError(
            f"invalid cron expression {cron!r} ({where}): expected 5 fields (minute hour day month weekday), "
            'e.g. "0 3 * * *"'
        )


def check_paths(settings: Settings) -> None:
    """A home or root a person named on the command line or in the environment must exist (exit 2), and the
    data directory must be a folder (or creatable as one)."""
    if settings.home_explicit and not settings.home.is_dir():
        where = settings.origins.get("home", "--home")
        raise SettingsError(f"home {settings.home} ({where}) does not exist or is not a folder")
    for agent, paths in settings.flag_roots.items():
        for path in paths:
            if not path.exists():
                raise SettingsError(f"--root {agent}={path}: no such folder")
    check_data_dir(settings)


def check_data_dir(settings: Settings) -> None:
    """The data directory is a folder, or can be created as one (the nearest existing parent is a folder)."""
    path = settings.data_dir
    where = settings.origins.get("data_dir", "default")
    if path.exists() and not path.is_dir():
        raise SettingsError(f"data dir {path} ({where}) is a file, not a folder")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise SettingsError(f"data dir {path} ({where}) cannot be created: {probe} is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SettingsError(f"data dir {path} ({where}) cannot be written: no write permission on {probe}")


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
