"""Installed as a tool, `transcripts` works from any folder: a real `uv tool install` of the checkout and a real
`pipx install` of the wheel `uv build` makes (from its sdist), into temporary folders, with the sample in the
package. Each install costs seconds (the packages come from the uv and pip caches) and a run starts the managed
Prefect server (under a temporary state dir, stopped at the end whatever happens): kept to one module, one test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH (the README's installer)")


def _caches() -> dict[str, str]:
    """The uv and pip caches of the person running the tests (read before HOME is replaced): installs reuse the
    packages downloaded for the checkout instead of fetching Prefect and DuckDB again."""
    uv_cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip()
    pip_cache = os.environ.get("PIP_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip"
    )
    return {"UV_CACHE_DIR": uv_cache, "PIP_CACHE_DIR": pip_cache}


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary home, data home, state dir and tool dirs; the managed server is stopped at the end."""
    base = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRANSCRIPTS_", "VIRTUAL_ENV", "UV_", "PIPX_"))}
    env.update(_caches())
    env.update(
        {
            "HOME": str(base / "home"),
            "XDG_DATA_HOME": str(base / "data-home"),
            "XDG_CONFIG_HOME": str(base / "config"),
            "XDG_STATE_HOME": str(base / "state-home"),
            "TRANSCRIPTS_STATE_DIR": str(base / "state"),
            "TRANSCRIPTS_RUNNER": "off",  # no command runner left behind by the run
            "UV_TOOL_DIR": str(base / "uv-tools"),
            "UV_TOOL_BIN_DIR": str(base / "uv-bin"),
            "UV_PYTHON_DOWNLOADS": "never",
            "PIPX_HOME": str(base / "pipx"),
            "PIPX_BIN_DIR": str(base / "pipx-bin"),
            "PIPX_MAN_DIR": str(base / "pipx-man"),
        }
    )
    (base / "home").mkdir()
    (base / "elsewhere").mkdir()  # where the commands run: no checkout, no pyproject.toml
    try:
        yield base, env
    finally:
        for tool in (base / "uv-bin" / "transcripts", base / "pipx-bin" / "transcripts"):
            if tool.exists():
                subprocess.run([str(tool), "server", "stop"], env=env, capture_output=True, timeout=120)
                break


def _in(base: Path, env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=base / "elsewhere", env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def _pipx(env: dict[str, str]) -> list[str]:
    found = shutil.which("pipx", path=env.get("PATH"))
    return [found] if found else ["uv", "tool", "run", "--from", "pipx", "pipx"]


def test_uv_tool_install_and_pipx_install_of_the_wheel_work_from_any_folder_with_the_sample(
    place: tuple[Path, dict[str, str]],
) -> None:
    base, env = place
    dist = base / "dist"
    _in(base, env, "uv", "build", "--out-dir", str(dist), str(ROOT))
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")  # uv build makes the wheel from it: the sample must be in both
    with tarfile.open(sdist) as archive:
        in_sdist = {n.split("/data/sample/", 1)[1] for n in archive.getnames() if "/data/sample/" in n}
    shipped = {str(p.relative_to(SAMPLE)) for p in SAMPLE.rglob("*") if p.is_file()}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {n.removeprefix("flows/sample/") for n in names if n.startswith("flows/sample/")} == shipped
    assert shipped <= in_sdist
    assert not any(n.startswith(("tests/", "bench/", "data/")) for n in names), "only the packages and the sample"

    _in(base, env, "uv", "tool", "install", str(ROOT))
    _in(base, env, *_pipx(env), "install", str(wheel))
    uv_tool, pipx_tool = base / "uv-bin" / "transcripts", base / "pipx-bin" / "transcripts"
    for tool in (uv_tool, pipx_tool):
        assert _in(base, env, str(tool), "--version").stdout.startswith("transcripts 0.1.0")

    loaded = _in(base, env, str(uv_tool), "run", "--sample")
    sample_dir = base / "data-home" / "transcripts-sample"
    assert f"transcripts status --data-dir {sample_dir}" in loaded.stdout, loaded.stdout
    assert "loaded 9 sessions" in loaded.stdout, loaded.stdout
    assert not (base / "data-home" / "transcripts").exists(), "the sample is not the corpus"
    assert not (base / "elsewhere").is_relative_to(ROOT) and not any((base / "elsewhere").iterdir())
    again = json.loads(_in(base, env, str(pipx_tool), "run", "--sample", "--json").stdout)  # the other install's copy
    assert again["sample"] is True and again["data_dir"] == str(sample_dir) and again["sessions_loaded"] == 9, again
    status = _in(base, env, str(pipx_tool), "status", "--data-dir", str(sample_dir))
    assert "9 loaded" in status.stdout, status.stdout
    where = _in(base, env, str(uv_tool), "data", "where")
    assert f"data dir: {base / 'data-home' / 'transcripts'} (default)" in where.stdout, where.stdout
