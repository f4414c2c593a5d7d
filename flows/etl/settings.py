"""All settings in one place: command-line flags > environment > TOML file > defaults.

Environment: TRANSCRIPTS_DATA_DIR, TRANSCRIPTS_HOME, TRANSCRIPTS_SOURCES (comma list), TRANSCRIPTS_ROOT_<AGENT>
(comma list of folders), TRANSCRIPTS_LIMIT_<NAME> (e.g. TRANSCRIPTS_LIMIT_MAX_LINE_BYTES), TRANSCRIPTS_LOCK_WAIT,
TRANSCRIPTS_WORKERS, TRANSCRIPTS_DASK, TRANSCRIPTS_REDACT (true/false), TRANSCRIPTS_FULL_CHECK_DAYS,
TRANSCRIPTS_HOT_DAYS, TRANSCRIPTS_SCHEDULE_CRON, TRANSCRIPTS_SCHEDULE_TIMEZONE, TRANSCRIPTS_TIMEZONE (zone of
per-day views), TRANSCRIPTS_WATCH_QUIET_SECONDS, TRANSCRIPTS_WATCH_MAX_DELAY_SECONDS, TRANSCRIPTS_WATCH_CHECK_MINUTES,
TRANSCRIPTS_PUBLISH_URL, TRANSCRIPTS_MACHINE, TRANSCRIPTS_PUBLISH_LEVEL (the team folder a run publishes to), and
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
from typing import Any, NamedTuple

from extractors.bounded import Limits
from extractors.model import Agent
from extractors.registry import Extractor, parse_agent, registered
from flows.etl.datahome import PROJECT_DIR as PROJECT_DIR  # re-exported: flows.cli.docs finds docs/analysis.md by it
from flows.etl.datahome import default_data_dir as default_data_dir
from flows.etl.workers import default_workers


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message says which and why."""


DEFAULT_CRON = "0 3 * * *"


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
    schedule_cron: str = DEFAULT_CRON
    schedule_timezone: str | None = None
    # Run the extraction tasks on a Dask cluster: a scheduler address (tcp://host:8786) or "local" (a LocalCluster
    # on this machine); None: worker processes on this machine (`workers`).
    dask: str | None = None
    timezone: str | None = None  # zone of per-day views (None: the machine's)
    redact: bool = True  # secrets in every stored text become markers (transforms/redact.py); False: raw text
    # `transcripts watch` (flows/etl/watch.py): an agent's changes are loaded once its roots were quiet this long,
    # or at the latest this long after the first change (an agent appending many times a second); and every
    # `watch_check_minutes` all agents are checked as `run` checks them, for an event the OS did not deliver.
    watch_quiet_seconds: float = 1.0
    watch_max_delay_seconds: float = 5.0
    watch_check_minutes: float = 15.0
    publish_url: str | None = None  # a team folder every run publishes to after its commit (`transcripts publish`)
    machine_label: str | None = None  # this machine's label in the team folder (None: the host name)
    publish_level: str = "full"  # full | metrics
    # How changes are found (docs/operations.md, "How changes are found"): every folder listed and every file stat'd
    # at least this often (0: on every run); between, files modified within `hot_days` are stat'd on every run and
    # older ones only when their folder changed.
    full_check_days: float = 7.0
    hot_days: float = 7.0
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
    "": (
        "data_dir",
        "home",
        "sources",
        "roots",
        "limits",
        "run",
        "schedule",
        "timezone",
        "redaction",
        "watch",
        "publish",
    ),
    "publish": ("url", "machine", "level"),
    "redaction": ("enabled",),
    "run": ("batch_bytes", "batch_files", "workers", "lock_wait_seconds", "dask", "full_check_days", "hot_days"),
    "schedule": ("cron", "timezone"),
    "watch": ("quiet_seconds", "max_delay_seconds", "check_minutes"),
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


class Value(NamedTuple):
    """One source's raw value for a setting and where it came from, for the message that refuses it."""

    raw: Any
    origin: str  # "--data-dir", "TRANSCRIPTS_DATA_DIR (environment)", "settings file /x/config.toml", "default"
    key: str = ""  # as the source spells it, for a message that quotes it: TRANSCRIPTS_LIMIT_MAX_RECORDS, --root


@dataclass(slots=True)
class Layer:
    """What one source holds: raw values by Settings field, and limits and roots as (name as given, value)."""

    values: dict[str, Value] = field(default_factory=dict)
    limits: list[tuple[str, Value]] = field(default_factory=list)
    roots: list[tuple[str, Value]] = field(default_factory=list)


# Settings.origins names these settings (the cron and zone of the schedule by their [schedule] keys)
_NAMED = {
    "home": "home",
    "data_dir": "data_dir",
    "lock_wait_seconds": "lock_wait_seconds",
    "workers": "workers",
    "schedule_cron": "cron",
    "schedule_timezone": "timezone",
}
# (table, key) in the settings file -> Settings field
_FILE_KEYS = {
    ("", "home"): "home",
    ("", "data_dir"): "data_dir",
    ("", "timezone"): "timezone",
    ("run", "lock_wait_seconds"): "lock_wait_seconds",
    ("run", "workers"): "workers",
    ("run", "batch_bytes"): "batch_bytes",
    ("run", "batch_files"): "batch_files",
    ("run", "dask"): "dask",
    ("run", "full_check_days"): "full_check_days",
    ("run", "hot_days"): "hot_days",
    ("schedule", "cron"): "schedule_cron",
    ("schedule", "timezone"): "schedule_timezone",
    ("redaction", "enabled"): "redact",
    ("watch", "quiet_seconds"): "watch_quiet_seconds",
    ("watch", "max_delay_seconds"): "watch_max_delay_seconds",
    ("watch", "check_minutes"): "watch_check_minutes",
    ("publish", "url"): "publish_url",
    ("publish", "machine"): "machine_label",
    ("publish", "level"): "publish_level",
}
# environment variable -> Settings field; an empty variable is not set
_ENV_KEYS = {
    "TRANSCRIPTS_HOME": "home",
    "TRANSCRIPTS_DATA_DIR": "data_dir",
    "TRANSCRIPTS_LOCK_WAIT": "lock_wait_seconds",
    "TRANSCRIPTS_WORKERS": "workers",
    "TRANSCRIPTS_SCHEDULE_CRON": "schedule_cron",
    "TRANSCRIPTS_SCHEDULE_TIMEZONE": "schedule_timezone",
    "TRANSCRIPTS_TIMEZONE": "timezone",
    "TRANSCRIPTS_DASK": "dask",
    "TRANSCRIPTS_REDACT": "redact",
    "TRANSCRIPTS_WATCH_QUIET_SECONDS": "watch_quiet_seconds",
    "TRANSCRIPTS_WATCH_MAX_DELAY_SECONDS": "watch_max_delay_seconds",
    "TRANSCRIPTS_WATCH_CHECK_MINUTES": "watch_check_minutes",
    "TRANSCRIPTS_PUBLISH_URL": "publish_url",
    "TRANSCRIPTS_MACHINE": "machine_label",
    "TRANSCRIPTS_PUBLISH_LEVEL": "publish_level",
    "TRANSCRIPTS_FULL_CHECK_DAYS": "full_check_days",
    "TRANSCRIPTS_HOT_DAYS": "hot_days",
}


def _defaults() -> Layer:
    """The values no source gives. A None home or data dir is the environment's (HOME, the data home), which only
    `_validate` knows; limits not given are Limits' own."""
    nightly = [agent for agent, module in registered().items() if module.SPEC.nightly]
    values = {
        "home": None,
        "data_dir": None,
        "sources": nightly,
        "lock_wait_seconds": 60.0,
        "workers": default_workers(),
        "batch_bytes": 64 * 1024 * 1024,
        "batch_files": 400,
        "schedule_cron": DEFAULT_CRON,
        "redact": True,
        "watch_quiet_seconds": 1.0,
        "watch_max_delay_seconds": 5.0,
        "watch_check_minutes": 15.0,
        "full_check_days": 7.0,
        "hot_days": 7.0,
    }
    return Layer({name: Value(raw, "default") for name, raw in values.items()})


def _config_path(config: Path | None, env: Mapping[str, str]) -> Path:
    """The settings file: --config > TRANSCRIPTS_CONFIG > the XDG one; a file named explicitly must exist."""
    path = config or (Path(env["TRANSCRIPTS_CONFIG"]) if env.get("TRANSCRIPTS_CONFIG") else None)
    if path is None:
        base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", str(Path.home()))) / ".config")
        return base / "transcripts" / "config.toml"
    if not path.exists():
        raise SettingsError(f"settings file {path} does not exist ({'--config' if config else 'TRANSCRIPTS_CONFIG'})")
    return path


def _from_file(path: Path) -> Layer:
    """What the settings file holds. Its shape is checked as it is read, so that a malformed file is refused even
    where the environment or a flag overrides the malformed part."""
    data = _read_toml(path)
    in_file = f"settings file {path}"
    layer = Layer()
    for (table, key), name in _FILE_KEYS.items():
        section = data if table == "" else data.get(table, {})
        if key in section:
            layer.values[name] = Value(section[key], in_file if table == "" else f"[{table}] of {in_file}")
    sources = data.get("sources", [])
    if isinstance(sources, str):
        sources = _split(sources)
    if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
        raise SettingsError(f"sources ({in_file}) must be a list of agent names, got {sources!r}")
    if sources:
        layer.values["sources"] = Value(sources, in_file)
    roots = data.get("roots", {})
    if not isinstance(roots, dict):
        raise SettingsError(f"roots ({in_file}) must be a table ([roots]) of AGENT = [folders]")
    layer.roots = [(name, Value(paths, in_file)) for name, paths in roots.items()]
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise SettingsError(f"'limits' in {in_file} must be a table ([limits])")
    layer.limits = [(name, Value(raw, f"[limits] of {in_file}", name)) for name, raw in limits.items()]
    return layer


def _from_env(env: Mapping[str, str]) -> Layer:
    """What the environment holds: the TRANSCRIPTS_* variables that are set and not empty (a limit: set)."""
    layer = Layer()
    for key, name in _ENV_KEYS.items():
        if env.get(key):
            layer.values[name] = Value(env[key], f"{key} (environment)")
    if sources := _split(env.get("TRANSCRIPTS_SOURCES", "")):
        layer.values["sources"] = Value(sources, "TRANSCRIPTS_SOURCES (environment)")
    for key, raw in env.items():
        if key.startswith("TRANSCRIPTS_LIMIT_"):
            layer.limits.append((key[len("TRANSCRIPTS_LIMIT_") :].lower(), Value(raw, "environment", key)))
        if key.startswith("TRANSCRIPTS_ROOT_") and raw:
            layer.roots.append((key[len("TRANSCRIPTS_ROOT_") :], Value(_split(raw), f"{key} (environment)")))
    return layer


def _from_flags(
    *,
    data_dir: Path | None,
    home: Path | None,
    sources: Sequence[str],
    roots: Sequence[str],
    limits: Mapping[str, Any],
    lock_wait: float | None,
    dask: str | None,
    redact: bool | None,
) -> Layer:
    """What the command line (a caller's arguments) gives: the flags that are not None (a --dask or --source: not
    empty). Each --root AGENT=PATH adds a folder."""
    layer = Layer()
    for name, flag, raw in (
        ("home", "--home", home),
        ("data_dir", "--data-dir", data_dir),
        ("lock_wait_seconds", "--wait", lock_wait),
        ("redact", "--no-redact", redact),
    ):
        if raw is not None:
            layer.values[name] = Value(raw, flag)
    if dask:
        layer.values["dask"] = Value(dask, "--dask")
    if sources:
        layer.values["sources"] = Value(list(sources), "--source")
    for item in roots:
        name, sep, path = item.partition("=")
        layer.roots.append((name, Value(path if sep else "", "--root", item)))
    layer.limits = [(name, Value(raw, "argument", name)) for name, raw in limits.items()]
    return layer


def _merge(*layers: Layer) -> Layer:
    """The layers, lowest precedence first, as one: each setting from the highest layer that holds it. Limits and
    roots keep every layer's entries in that order: `_validate` checks each (as always) and a later one replaces an
    earlier one per limit or agent, whose name only counts once parsed ('claude-code' is claude)."""
    merged = Layer()
    for layer in layers:
        merged.values.update(layer.values)
        merged.limits += layer.limits
        merged.roots += layer.roots
    return merged


def _path(name: str, value: Value) -> Path | None:
    """A path setting; None when it is not given or empty, for the default."""
    if value.raw is None or value.raw == "":
        return None
    if not isinstance(value.raw, str | Path):
        raise SettingsError(f"{name} ({value.origin}) must be a path, got {value.raw!r}")
    return Path(value.raw).expanduser()


def _string(name: str, value: Value | None) -> str | None:
    if value is not None and not isinstance(value.raw, str):
        raise SettingsError(f"{name} ({value.origin}) must be a string, got {value.raw!r}")
    return None if value is None else value.raw


def _agents(value: Value, known: Mapping[Agent, Extractor]) -> tuple[Agent, ...]:
    try:
        agents = tuple(dict.fromkeys(parse_agent(name) for name in value.raw))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    for agent in agents:
        if agent not in known:
            raise SettingsError(f"no extractor for '{agent}' in this version")
    return agents


def _roots(entries: Sequence[tuple[str, Value]]) -> tuple[dict[Agent, list[Path]], dict[Agent, list[Path]]]:
    """The folders per agent (a later layer's replace an earlier one's), and those given as --root (which add up)."""
    explicit: dict[Agent, list[Path]] = {}
    flag_roots: dict[Agent, list[Path]] = {}
    for name, value in entries:
        if value.origin == "--root" and not value.raw:
            raise SettingsError(f"--root takes AGENT=PATH, got {value.key!r}")
        listed = [value.raw] if isinstance(value.raw, str) else value.raw
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise SettingsError(
                f"roots.{name} ({value.origin}) must be a folder or a list of folders, got {value.raw!r}"
            )
        agent, paths = _agent(name), [Path(p).expanduser() for p in listed]
        if value.origin == "--root":
            flag_roots.setdefault(agent, []).extend(paths)
        else:
            explicit[agent] = paths
    explicit.update(flag_roots)
    return explicit, flag_roots


def _limits(entries: Sequence[tuple[str, Value]]) -> Limits:
    """Limits from every layer's entries, a later one replacing an earlier one per limit."""
    types = {f.name: f.type for f in dataclasses.fields(Limits)}
    values: dict[str, Any] = {}
    for name, value in entries:
        if name not in types:
            raise SettingsError(
                f"unknown limit '{name}' ({value.key}, {value.origin}).{_did_you_mean(name, list(types))}"
            )
        kind = float if types[name] in ("float", float) else int
        values[name] = _number(value.raw, f"limit {value.key}", value.origin, kind=kind)
    return Limits(**values)


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _redact(value: Value) -> bool:
    """--no-redact is a bool, TRANSCRIPTS_REDACT a word (true/false, yes/no, on/off, 1/0), [redaction] enabled a
    TOML bool."""
    if value.origin == "TRANSCRIPTS_REDACT (environment)":
        if value.raw.strip().lower() not in _BOOLS:
            raise SettingsError(f"TRANSCRIPTS_REDACT must be true or false, got {value.raw!r}")
        return _BOOLS[value.raw.strip().lower()]
    if not isinstance(value.raw, bool):
        raise SettingsError(f"[redaction] enabled must be true or false, got {value.raw!r}")
    return value.raw


def _validate(merged: Layer, env: dict[str, str]) -> Settings:
    """Settings from the merged raw values, each converted and checked: a SettingsError names the setting and where
    its value came from."""
    values = merged.values

    def number(name: str, setting: str, **kwargs: Any) -> Any:
        return _number(values[setting].raw, name, values[setting].origin, **kwargs)

    home = _path("home", values["home"])
    data_dir = _path("data_dir", values["data_dir"])
    agents = _agents(values["sources"], registered())
    explicit, flag_roots = _roots(merged.roots)
    wait = number("lock wait", "lock_wait_seconds", kind=float)
    workers = number("workers", "workers", minimum=1)
    batch_bytes = number("batch_bytes", "batch_bytes", minimum=1)
    batch_files = number("batch_files", "batch_files", minimum=1)
    full_check_days = number("full_check_days", "full_check_days", kind=float)
    hot_days = number("hot_days", "hot_days", kind=float)
    cron = _string("cron", values["schedule_cron"])
    timezone = _string("timezone", values.get("schedule_timezone"))
    zone = values["timezone"].raw if "timezone" in values else None
    if zone:
        from sinks.views import ZoneError, check_zone  # lazily: it imports DuckDB, which `status` does without

        try:
            check_zone(str(zone))
        except ZoneError as exc:
            raise SettingsError(f"timezone: {exc}") from None
    limits = _limits(merged.limits)
    redact = _redact(values["redact"])
    quiet = number("watch quiet_seconds", "watch_quiet_seconds", kind=float, minimum=0.05)
    max_delay = number("watch max_delay_seconds", "watch_max_delay_seconds", kind=float, minimum=0.05)
    check = number("watch check_minutes", "watch_check_minutes", kind=float, minimum=0.01)
    publish_url = _string("publish url", values.get("publish_url")) or None
    machine = _string("publish machine", values.get("machine_label")) or None
    level = _string("publish level", values.get("publish_level")) or "full"
    if level not in ("full", "metrics"):
        raise SettingsError(f"publish level ({values['publish_level'].origin}) must be full or metrics, got {level!r}")
    if machine is not None:
        from sinks.publish import check_label  # lazily: pyarrow, which `status` does without

        try:
            check_label(machine)
        except ValueError as exc:
            raise SettingsError(f"{exc} ({values['machine_label'].origin})") from None
    origins = {key: values[name].origin for name, key in _NAMED.items() if name in values}
    return Settings(
        data_dir=(data_dir or default_data_dir(env)).absolute(),
        home=(home or Path(env.get("HOME") or Path.home())).absolute(),
        home_explicit=home is not None,
        agents=agents,
        explicit_roots={a: tuple(p) for a, p in explicit.items()},
        limits=limits,
        batch_bytes=batch_bytes,
        batch_files=batch_files,
        workers=workers,
        lock_wait_seconds=wait,
        schedule_cron=cron or DEFAULT_CRON,
        schedule_timezone=timezone or None,
        dask=(values["dask"].raw or None) if "dask" in values else None,
        timezone=str(zone) if zone else None,
        redact=redact,
        watch_quiet_seconds=quiet,
        watch_max_delay_seconds=max(max_delay, quiet),
        watch_check_minutes=check,
        publish_url=publish_url,
        machine_label=machine,
        publish_level=level,
        full_check_days=full_check_days,
        hot_days=hot_days,
        env=env,
        # a default is not named, but the data dir always is: commands print where it came from
        origins={k: o for k, o in origins.items() if o != "default" or k == "data_dir"},
        flag_roots={a: tuple(p) for a, p in flag_roots.items()},
    )


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
    flags = _from_flags(
        data_dir=data_dir,
        home=home,
        sources=sources,
        roots=roots,
        limits=limits or {},
        lock_wait=lock_wait,
        dask=dask,
        redact=redact,
    )
    return _validate(_merge(_defaults(), _from_file(_config_path(config, env)), _from_env(env), flags), env)


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


def _agent(name: str) -> Agent:
    try:
        return parse_agent(name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
