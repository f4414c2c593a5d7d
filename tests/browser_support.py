"""A real headless Chromium for the report's tests: found (or installed with apt as root), driven over the DevTools
protocol, stopped whatever happens; and the folder where the tests leave screenshots for people and CI to look at.

Without a browser the tests that need one are skipped and say why; under CI=true they fail instead (a CI machine
must not pass by testing less: docs/contributing.md "The report in a real browser").
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import under_ci

TESTS = Path(__file__).resolve().parent

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


def _missing(why: str) -> None:
    if under_ci():
        pytest.fail(f"{why}: CI=true needs a browser for the report's tests (apt-get install chromium)", pytrace=False)
    pytest.skip(why)


def find_chromium() -> str:
    """Debian's chromium, installed here when missing (root with apt); else the test is skipped (failed under
    CI=true), saying why."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        _missing("no chromium on PATH and no root apt-get to install it (apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            _missing(f"chromium could not be installed ({' '.join(cmd)}: {done.stderr.strip()[-300:]})")
    found = shutil.which("chromium")
    if found is None:
        _missing("apt-get installed chromium but it is not on PATH")
    assert found is not None
    return found


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page's websocket: commands and the events seen."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=None, open_timeout=30)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, seconds: float = 90) -> Any:
        """Evaluate `expression` until it is neither null nor false; its value."""
        deadline = time.monotonic() + seconds
        while True:
            value = self.evaluate(expression)
            if value is not None and value is not False:
                return value
            assert time.monotonic() < deadline, f"{expression} did not hold within {seconds} s"
            time.sleep(0.2)

    def screenshot(self, selector: str, path: Path) -> Path:
        """A PNG of the element `selector` (its whole box, below the fold too) written to `path`."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; })()"
        )
        x, y, width, height = box
        shot = self.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": x, "y": y, "width": max(width, 1), "height": max(height, 1), "scale": 1},
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[DevTools]:
    """A headless Chromium with its own profile folder, and a DevTools client on its page; stopped on exit."""
    binary = find_chromium()
    proc = subprocess.Popen(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client: DevTools | None = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            targets = json.load(answer)
        (target,) = [t for t in targets if t.get("type") == "page"]
        client = DevTools(target["webSocketDebuggerUrl"])
        yield client
    finally:
        if client is not None:
            client.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def artefacts(*parts: str) -> Path:
    """Where tests leave files for people and CI to look at (screenshots): `$TRANSCRIPTS_TEST_ARTEFACTS`, else
    tests/artefacts/ (ignored by git); the folder is made."""
    root = Path(os.environ.get("TRANSCRIPTS_TEST_ARTEFACTS") or TESTS / "artefacts")
    folder = root.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
