"""Redaction through the real Prefect flow: the planted secrets (and the corpus key) appear nowhere in the Prefect
database, its write-ahead log or any other file under PREFECT_HOME, while what the flow is given and logs does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from sinks import secrets_key
from tests.test_redact_pipeline import planted_home, secrets

PROJECT = Path(__file__).resolve().parent.parent

# Run in a process of its own, so that its Prefect (settings, the temporary API server it starts, that server's
# SQLite database) is the one under this test's PREFECT_HOME, and ends with it. Everything the project logs goes
# to the Prefect API as well (the extra logger, at DEBUG): the test then sees whatever a log line could carry.
SCRIPT = """
import json, logging, sys
from pathlib import Path
logging.getLogger("transcripts").setLevel(logging.DEBUG)
from flows.etl.flow import etl_flow
home, data = Path(sys.argv[1]), Path(sys.argv[2])
report = etl_flow({"home": home, "data_dir": data, "env": {"HOME": str(home)}, "lock_wait": 5})
committed = report.committed
print(json.dumps({"run_id": report.run_id, "flow_run_id": report.flow_run_id,
                  "loaded": committed.sessions_loaded if committed else 0}))
"""


def _flow_env(prefect_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        PREFECT_LOGGING_LEVEL="DEBUG",
        PREFECT_LOGGING_TO_API_ENABLED="true",  # Prefect's default (the test session turns it off elsewhere)
        PREFECT_LOGGING_EXTRA_LOGGERS="transcripts",
    )
    return env


def _run_flow(home: Path, data: Path, prefect_home: Path) -> dict[str, object]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(home), str(data)],
        cwd=PROJECT,
        env=_flow_env(prefect_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the server it starts goes with it below
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        # Whatever happened, nothing this test started outlives it: the flow process and its API server.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, err[-4000:]
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _every_byte(folder: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink())


def _forms(value: str) -> list[bytes]:
    """The bytes `value` would be stored as: itself, and JSON-escaped (a PEM block's newlines become \\n)."""
    escaped = json.dumps(value)[1:-1]
    return sorted({value.encode(), escaped.encode(), json.dumps(value, ensure_ascii=False)[1:-1].encode()})


def test_planted_secrets_appear_nowhere_in_the_prefect_database(tmp_path: Path) -> None:
    home = planted_home(tmp_path / "home")
    data = tmp_path / "data"
    prefect_home = tmp_path / "prefect"

    result = _run_flow(home, data, prefect_home)

    assert result["loaded"] == 3 and result["flow_run_id"], result
    files = sorted(p.relative_to(prefect_home).as_posix() for p in prefect_home.rglob("*") if p.is_file())
    assert any(f.endswith(".db") for f in files), files  # the temporary server's SQLite database was here
    stored = _every_byte(prefect_home)
    # Controls: the check can fail. What the flow is given (its parameters: the home path), the flow run's id, and
    # what the project logs (the run id, in every event= line) are in the database, as plain bytes.
    assert str(home).encode() in stored, "the flow's parameters are stored in the Prefect database"
    assert str(result["flow_run_id"]).encode() in stored
    assert f"event=plan run={result['run_id']}".encode() in stored, "the project's log lines reach the database"
    for rule, secret in secrets().items():
        for form in _forms(secret):
            assert form not in stored, f"{rule} secret found under PREFECT_HOME"
    key = secrets_key.read_key(data)
    assert key is not None
    assert key not in stored and key.hex().encode() not in stored, "the redaction key is never a parameter's value"
