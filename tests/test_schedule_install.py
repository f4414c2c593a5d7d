"""`transcripts schedule install|remove`: the systemd user unit and the launchd agent that keep the schedule served
across logout and reboot, written where XDG_CONFIG_HOME says (a temporary folder here), never with a guessed path."""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.service import units

TRANSCRIPTS = Path(sys.executable).parent / "transcripts"
COMMAND = [str(TRANSCRIPTS), "schedule", "--cron", "30 2 * * *", "--data-dir", "/data/with space/100%", "--home", "$x"]


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing in CI (apt package systemd)")
        pytest.skip("systemd-analyze is not installed (apt package systemd)")
    return subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=120)


def test_the_systemd_unit_passes_systemd_analyze_verify_and_keeps_every_argument(tmp_path: Path) -> None:
    unit = tmp_path / units.SERVICE
    unit.write_text(units.systemd_unit(COMMAND, {"TRANSCRIPTS_STATE_DIR": "/state dir/%s"}))
    done = _verify(unit)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    text = unit.read_text()
    assert "uv" not in text.split()
    assert 'ExecStart="' + str(TRANSCRIPTS) + '" "schedule" "--cron" "30 2 * * *"' in text
    assert '"/data/with space/100%%"' in text and '"$$x"' in text  # systemd's own expansion escaped
    assert 'Environment="TRANSCRIPTS_STATE_DIR=/state dir/%%s"' in text
    assert "Type=simple" in text and "KillMode=control-group" in text and "WantedBy=default.target" in text


def test_a_broken_unit_fails_verify(tmp_path: Path) -> None:
    """The check above can fail: a unit whose command is not there is refused."""
    unit = tmp_path / units.SERVICE
    unit.write_text(units.systemd_unit(["/no/such/transcripts", "schedule"], {}))
    assert _verify(unit).returncode != 0


def test_the_launchd_agent_is_a_valid_plist_with_the_same_command(tmp_path: Path) -> None:
    """Written on macOS only; here the pure function is checked with plutil when present, else a plistlib round trip
    (plistlib is what writes it: the round trip checks the structure launchd reads, not plutil's own parser)."""
    raw = units.launchd_plist(COMMAND, {"TRANSCRIPTS_STATE_DIR": "/s"}, tmp_path)
    plutil = shutil.which("plutil")
    if plutil is not None:
        path = tmp_path / f"{units.LABEL}.plist"
        path.write_bytes(raw)
        done = subprocess.run([plutil, "-lint", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    agent = plistlib.loads(raw)
    assert agent["Label"] == units.LABEL and agent["ProgramArguments"] == COMMAND
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["EnvironmentVariables"] == {"TRANSCRIPTS_STATE_DIR": "/s"}
    assert agent["StandardErrorPath"] == str(tmp_path / "schedule.log")


def _cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), TRANSCRIPTS_STATE_DIR=str(tmp_path / "state"), **extra)
    return subprocess.run([str(TRANSCRIPTS), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(sys.platform == "darwin", reason="the launchd agent is written on macOS")
def test_install_writes_the_unit_and_without_a_user_manager_prints_the_commands(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    args = ["--cron", "15 4 * * *", "--timezone", "UTC", "--home", str(tmp_path / "home")]
    proc = _cli(tmp_path, "schedule", "install", *args, "--data-dir", str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    unit = tmp_path / "config" / "systemd" / "user" / units.SERVICE
    text = unit.read_text()
    assert f'ExecStart="{TRANSCRIPTS.resolve()}" "schedule" "--cron" "15 4 * * *" "--timezone" "UTC"' in text
    assert f'Environment="TRANSCRIPTS_STATE_DIR={tmp_path / "state"}"' in text
    assert unit.stat().st_mode & 0o077 == 0
    [said] = [line.removeprefix("It runs: ") for line in proc.stdout.splitlines() if line.startswith("It runs: ")]
    expected = [str(TRANSCRIPTS.resolve()), "schedule", "--cron", "15 4 * * *", "--timezone", "UTC"]
    assert shlex.split(said)[:6] == expected, "the command said is the unit's, as a shell reads it"
    if units.user_manager() is not None:  # this container: no systemd user instance
        assert "Not enabled: " in proc.stdout and "systemctl --user enable --now transcripts-schedule.service" in (
            proc.stdout
        )
    assert "loginctl enable-linger" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    done = _verify(unit)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_a_refusing_service_manager_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """Fault injection: a systemctl that answers but refuses to enable the unit."""
    fake = tmp_path / "systemctl"
    fake.write_text(
        '#!/bin/sh\ncase "$*" in *show-environment*) exit 0;; *enable*) echo "Access denied" >&2; exit 1;; esac\n'
    )
    fake.chmod(0o755)
    proc = _cli(tmp_path, "schedule", "install", "--data-dir", str(tmp_path / "d"), TRANSCRIPTS_SYSTEMCTL=str(fake))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "could not be enabled" in proc.stderr and "Access denied" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
