"""The Prefect UI that `transcripts` prints shows this corpus's runs in a real browser, even with another server on
Prefect's default port 4200 (the UI asks the API its /ui-settings name: the managed server's own, not 4200)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.service import server
from tests.prefect_db import migrated
from tests.test_report import DevTools, browser  # noqa: F401  (browser: headless Chromium over CDP, a fixture)

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = Path(sys.executable).parent / "transcripts"


@pytest.fixture
def port_4200() -> Iterator[list[str]]:
    """Something else on 127.0.0.1:4200 (a listener that records who called), unless the port is taken already:
    then something else is there anyway."""
    calls: list[str] = []
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 4200))
    except OSError:
        listener.close()
        yield calls
        return
    listener.listen(16)
    listener.settimeout(0.5)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            calls.append("connection")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield calls
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_the_printed_ui_lists_a_run_of_this_corpus_with_another_server_on_4200(
    tmp_path: Path,
    browser: DevTools,  # noqa: F811
    port_4200: list[str],
) -> None:
    base = migrated(tmp_path / "state")
    folder = server.state_dir({"TRANSCRIPTS_STATE_DIR": str(base)})
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["TRANSCRIPTS_STATE_DIR"] = str(base)
    try:
        proc = subprocess.run(
            [str(TRANSCRIPTS), "run", "--sample", "--json", "--data-dir", str(tmp_path / "d")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        flow_run_id = json.loads(proc.stdout)["flow_run_id"]
        api = server.read_state(folder)
        assert api is not None
        status = subprocess.run(
            [str(TRANSCRIPTS), "server", "status"], env=env, capture_output=True, text=True, timeout=120
        )
        assert f"UI  {api.ui}" in status.stdout, status.stdout  # the address the tool prints
        with urllib.request.urlopen(f"{api.url}/flow_runs/{flow_run_id}", timeout=30) as answer:
            name = json.load(answer)["name"]
        browser.call("Page.enable")
        # a tall window: the UI renders the rows of its run list only when they scroll into view
        browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=4000, deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", url=f"{api.ui}/runs")
        deadline = time.monotonic() + 120
        text = ""
        # the run's row comes first; the UI fills in its flow's name with a request of its own, a moment later
        while name not in text or "transcripts-etl" not in text:
            assert time.monotonic() < deadline, (
                f"the UI at {api.ui}/runs did not list run {name!r} of flow transcripts-etl: {text[-1500:]!r}"
            )
            time.sleep(1)
            text = browser.evaluate("document.body ? document.body.innerText : ''") or ""
        assert not port_4200, "the UI called port 4200"
    finally:
        server.stop(folder)
