"""What keeps `transcripts schedule` serving, and `transcripts watch` watching, across logout and reboot: a systemd
user unit (Linux) or a launchd agent (macOS), one `Service` each. The unit texts are pure functions of the command
line; writing, enabling and removing them is here too, with `systemctl`/`launchctl` called only when a user service
manager answers (else the commands are returned for the person to run).

Stdlib only: the unit is written without loading Prefect.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Service:
    """One long-lived command kept running by the user's service manager."""

    unit: str  # the systemd user unit's file name
    label: str  # the launchd agent's label (its file is LABEL.plist)
    description: str
    log: str  # the launchd agent's stdout and stderr, in the folder install_launchd is given


SCHEDULE = Service(
    "transcripts-schedule.service",
    "io.github.transcripts.schedule",
    "transcripts: serve the nightly load of agent transcripts (Prefect schedule)",
    "schedule.log",
)
WATCH = Service(
    "transcripts-watch.service",
    "io.github.transcripts.watch",
    "transcripts: load agent transcripts as they are written (watch mode)",
    "watch.log",
)
SERVICE = SCHEDULE.unit
LABEL = SCHEDULE.label
SYSTEMCTL_SECONDS = 20.0
# Passed on to the unit: where the tool keeps its state and its settings, and a Prefect API the user chose.
KEPT_ENV = ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_PROFILE", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


def executable() -> list[str]:
    """The installed `transcripts` as an absolute path (never a guessed `uv` path): this process's own, else the
    one on PATH, else this Python running the entry module."""
    own = Path(sys.argv[0])
    if own.name == "transcripts" and own.exists():
        return [str(own.resolve())]
    found = shutil.which("transcripts")
    if found:
        return [str(Path(found).resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "flows.cli.entry"]


def kept_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the unit gives the command: TRANSCRIPTS_* settings and those of KEPT_ENV that are set."""
    return {k: v for k, v in sorted(env.items()) if v and (k.startswith("TRANSCRIPTS_") or k in KEPT_ENV)}


def _systemd_quote(arg: str) -> str:
    """One ExecStart/Environment word: double-quoted, C escapes, `%` and `$` doubled (systemd.service(5))."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def systemd_unit(command: Sequence[str], env: Mapping[str, str], service: Service = SCHEDULE) -> str:
    """The user service that runs `command`, the absolute `transcripts schedule ...` (or `watch ...`) line."""
    environment = "".join(f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in env.items())
    return (
        "[Unit]\n"
        f"Description={service.description}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={' '.join(_systemd_quote(a) for a in command)}\n"
        f"{environment}"
        "Restart=on-failure\n"
        "RestartSec=30\n"
        # The managed Prefect server (and its idle watch) that `schedule` starts lives in its control group: it
        # stays up as long as the service serves, and systemd stops it with the service (SIGTERM to the group);
        # `watch` starts no server, and its extraction workers go with it.
        "KillMode=control-group\n"
        "TimeoutStopSec=60\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(command: Sequence[str], env: Mapping[str, str], logs: Path, service: Service = SCHEDULE) -> bytes:
    """The launchd agent (macOS) that runs `command`: started at login, started again if it exits."""
    return plistlib.dumps(
        {
            "Label": service.label,
            "ProgramArguments": list(command),
            "EnvironmentVariables": dict(env),
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},  # again after a crash, not after `remove` stops it
            "ProcessType": "Background",
            "StandardOutPath": str(logs / service.log),
            "StandardErrorPath": str(logs / service.log),
        },
        sort_keys=True,
    )


def systemd_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where user units go: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`."""
    env = os.environ if env is None else env
    base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or Path.home()) / ".config")
    return base / "systemd" / "user"


def launchd_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HOME") or Path.home()) / "Library" / "LaunchAgents"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What install or remove did: the files written or removed, the commands run, and those left to the person."""

    files: list[Path]
    ran: list[list[str]]
    manual: list[list[str]]
    why_manual: str | None = None


def _systemctl() -> str:
    """The systemctl to call (TRANSCRIPTS_SYSTEMCTL: a test's fault injection; else the one on PATH)."""
    return os.environ.get("TRANSCRIPTS_SYSTEMCTL") or shutil.which("systemctl") or "systemctl"


def user_manager() -> str | None:
    """Why no user service manager can be told (None: `systemctl --user` answers)."""
    tool = _systemctl()
    if shutil.which(tool) is None:
        return "systemctl is not installed"
    try:
        done = subprocess.run(
            [tool, "--user", "show-environment"], capture_output=True, text=True, timeout=SYSTEMCTL_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemctl --user did not answer ({exc})"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"no systemd user instance answers ({lines[-1] if lines else f'exit {done.returncode}'})"
    return None


def _run(commands: list[list[str]]) -> tuple[list[list[str]], str | None]:
    ran: list[list[str]] = []
    for cmd in commands:
        try:
            done = subprocess.run(
                [_systemctl() if cmd[0] == "systemctl" else cmd[0], *cmd[1:]],
                capture_output=True,
                text=True,
                timeout=SYSTEMCTL_SECONDS,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ran, f"{' '.join(cmd)}: {exc}"
        if done.returncode != 0:
            return ran, f"{' '.join(cmd)}: {done.stderr.strip() or f'exit {done.returncode}'}"
        ran.append(cmd)
    return ran, None


class UnitError(RuntimeError):
    """A service manager refused a command: the message says which and why."""


def install_systemd(
    command: Sequence[str], env: Mapping[str, str], folder: Path | None = None, service: Service = SCHEDULE
) -> Outcome:
    folder = folder or systemd_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / service.unit
    tmp = path.with_suffix(".tmp")
    tmp.write_text(systemd_unit(command, env, service), encoding="utf-8")
    tmp.chmod(0o600)  # its Environment= lines may name private paths
    tmp.replace(path)
    commands = [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", service.unit]]
    why = user_manager()
    if why is not None:
        return Outcome([path], [], commands, why)
    ran, failed = _run(commands)
    if failed is not None:
        raise UnitError(failed)
    return Outcome([path], ran, [], None)


def remove_systemd(folder: Path | None = None, service: Service = SCHEDULE) -> Outcome:
    folder = folder or systemd_dir()
    path = folder / service.unit
    commands = [["systemctl", "--user", "disable", "--now", service.unit]]
    why = user_manager()
    ran: list[list[str]] = []
    if why is None and path.exists():
        ran, failed = _run(commands)
        if failed is not None:
            raise UnitError(failed)
    removed = [path] if path.exists() else []
    path.unlink(missing_ok=True)
    if why is None and removed:
        more, _ = _run([["systemctl", "--user", "daemon-reload"]])
        ran += more
    manual = commands if why is not None and removed else []
    return Outcome(removed, ran, manual, why if manual else None)


def install_launchd(
    command: Sequence[str], env: Mapping[str, str], logs: Path, folder: Path | None = None, service: Service = SCHEDULE
) -> Outcome:
    folder = folder or launchd_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{service.label}.plist"
    path.write_bytes(launchd_plist(command, env, logs, service))
    target = f"gui/{os.getuid()}"
    commands = [["launchctl", "bootout", f"{target}/{service.label}"], ["launchctl", "bootstrap", target, str(path)]]
    if shutil.which("launchctl") is None:
        return Outcome([path], [], commands[1:], "launchctl is not installed")
    _run(commands[:1])  # not loaded yet: fine
    ran, failed = _run(commands[1:])
    if failed is not None:
        raise UnitError(failed)
    return Outcome([path], ran, [], None)


def remove_launchd(folder: Path | None = None, service: Service = SCHEDULE) -> Outcome:
    folder = folder or launchd_dir()
    path = folder / f"{service.label}.plist"
    ran: list[list[str]] = []
    if path.exists() and shutil.which("launchctl") is not None:
        ran, _ = _run([["launchctl", "bootout", f"gui/{os.getuid()}/{service.label}"]])
    removed = [path] if path.exists() else []
    path.unlink(missing_ok=True)
    return Outcome(removed, ran, [], None)


def installed(service: Service = SCHEDULE) -> Path | None:
    """The unit or agent file of `service`, if one is written."""
    path = launchd_dir() / f"{service.label}.plist" if sys.platform == "darwin" else systemd_dir() / service.unit
    return path if path.exists() else None


def active(service: Service = SCHEDULE) -> str | None:
    """The service manager's word on the unit (`active`, `inactive`, `failed`...), when one answers."""
    if sys.platform == "darwin" or user_manager() is not None:
        return None
    try:
        done = subprocess.run(
            [_systemctl(), "--user", "is-active", service.unit],
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None
