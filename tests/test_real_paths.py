"""The integrations, each once for real, through the command people type: the venv's `transcripts` executable in an
environment built from scratch (home, XDG folders, state directory in tmp; no Prefect setting, no runner turned off).

A first `run` starts the managed Prefect server and the command runner itself; later commands go through the
runner; the flow runs are on the Prefect API; `transcripts sql` hands piped SQL to the real DuckDB CLI (the
`duckdb-cli` package installed with transcripts, found without the environment's `bin` on PATH); `run --dask local`
loads on a LocalCluster and leaves no process behind; `server stop` stops the server and the runner. The other
tests keep their fast stand-ins (conftest turns the runner off and gives Prefect a temporary API).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from flows.service import runner, server
from sinks import query
from tests.corpus import claude_exchange, write_session

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = Path(sys.executable).parent / "transcripts"
COMMAND_SECONDS = 300  # a bound on every command: the first one starts a Prefect server (15-40 s, more when busy)
READY_SECONDS = 180.0  # the runner loads Prefect in the background after the first command
NEW_SESSION = "dddddddd-0000-4000-8000-000000000004"
DASK_HTTP_PORT = 8787  # distributed's default for a scheduler's HTTP server

pytestmark = pytest.mark.skipif(not TRANSCRIPTS.exists(), reason=f"no {TRANSCRIPTS}: `uv sync` installs it")


@dataclass(frozen=True, slots=True)
class Box:
    """A user's machine in a tmp folder: the environment every command gets, and where things are."""

    base: Path
    home: Path  # the user's HOME (no agent data: the corpus is given with --home)
    corpus: Path  # a copy of data/sample/home, which a test may add a session to
    cwd: Path
    env: dict[str, str]

    @property
    def folder(self) -> Path:
        """Where the managed server and the runner record themselves."""
        return server.state_dir(self.env)

    def data(self, name: str) -> Path:
        return self.base / "data" / name

    def transcripts(self, *args: str, stdin: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TRANSCRIPTS), *args],
            cwd=self.cwd,
            env={**self.env, **extra},
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
        )

    def runner_log(self) -> list[str]:
        path = self.folder / runner.LOG
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def ours(self) -> dict[int, str]:
        """Every live process started from this box (its HOME is in the environment it started with): pid ->
        command line. The test's own processes have another HOME."""
        marker = f"HOME={self.home}".encode()
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0") and alive(int(entry.name)):
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        return found


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie waiting for init to reap it has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def gone(pids: list[int], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    """The box, and whatever its commands started stopped at the end: `server stop` as a person would, then any
    process of the box still there (by its pid, found by the box's HOME in its environment)."""
    base = tmp_path_factory.mktemp("real")
    home, cwd = base / "home", base / "cwd"
    for folder in (home, cwd, base / "xdg-data", base / "xdg-config", base / "xdg-state"):
        folder.mkdir()
    corpus = base / "corpus"
    shutil.copytree(ROOT / "data" / "sample" / "home", corpus, symlinks=True)  # mtimes kept: nothing is "fresh"
    env = {
        # From scratch: nothing of the test run's environment (conftest's Prefect home and temporary API, its
        # TRANSCRIPTS_RUNNER=off) reaches the commands. PATH has no virtualenv `bin`, as for a cron job.
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_DATA_HOME": str(base / "xdg-data"),
        "XDG_CONFIG_HOME": str(base / "xdg-config"),
        "XDG_STATE_HOME": str(base / "xdg-state"),
        "TRANSCRIPTS_STATE_DIR": str(base / "state"),
    }
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    made = Box(base, home, corpus, cwd, env)
    try:
        yield made
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            made.transcripts("server", "stop")
        left = made.ours()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        gone(list(left), 10)


def run_json(box: Box, *args: str) -> dict[str, Any]:
    proc = box.transcripts("run", "--json", "--home", str(box.corpus), *args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def corpus_of(data: Path) -> dict[str, Any]:
    """What a data directory holds: session ids with their turn counts, from the warehouse and from the Parquet."""
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        turns = con.sql(
            "SELECT s.session_id, count(t.turn_id) FROM sessions s LEFT JOIN turns t USING (session_id) "
            "GROUP BY ALL ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    parquet = duckdb.connect()
    try:
        ids = parquet.sql(
            f"SELECT session_id FROM read_parquet('{data / 'parquet' / 'sessions'}/**/*.parquet') ORDER BY 1"
        ).fetchall()
    finally:
        parquet.close()
    return {"turns": dict(turns), "parquet_sessions": [i for (i,) in ids]}


def flow_runs(url: str) -> dict[str, dict[str, Any]]:
    """The Prefect API's flow runs by id (a POST on /flow_runs/filter, as the UI does)."""
    request = urllib.request.Request(
        f"{url}/flow_runs/filter", data=b"{}", headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return {r["id"]: r for r in json.loads(response.read())}


def test_sql_without_a_warehouse_is_one_line_and_exit_2(box: Box) -> None:
    nothing = box.data("nothing")
    expected = (
        f"error: no warehouse in {nothing} yet: run `transcripts run` (or `transcripts run --sample` to try the sample)"
    )
    for args, stdin in ((("SELECT 1",), None), ((), "SELECT 1;\n")):  # a statement, and piped to the shell
        proc = box.transcripts("sql", *args, "--data-dir", str(nothing), stdin=stdin)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == expected
        assert proc.stdout == ""


def test_a_first_run_starts_the_server_and_the_runner_which_take_the_next_commands(box: Box) -> None:
    assert server.read_state(box.folder) is None and not runner.ready(box.folder), "nothing runs yet"
    data = box.data("plain")
    first = run_json(box, "--data-dir", str(data))
    assert first["outcome"] == "ok"
    loaded = corpus_of(data)
    assert len(loaded["turns"]) == first["sessions_loaded"] == 9  # the sample: 9 sessions, 2 rejected sources
    assert loaded["parquet_sessions"] == sorted(loaded["turns"])
    assert sum(loaded["turns"].values()) == first["turns_loaded"]

    api = server.read_state(box.folder)
    assert api is not None, "the run recorded the server it started in server.json"
    assert server.healthy(api.url)
    with urllib.request.urlopen(f"{api.url}/health", timeout=10) as response:
        assert json.loads(response.read()) is True
    assert api.pid is not None and alive(api.pid)
    assert runner.wait_ready(box.folder, READY_SECONDS), box.runner_log()
    state = runner.read_state(box.folder)
    assert state is not None and state["url"] == api.url and alive(state["pid"])
    assert any("event=runner_ready" in line for line in box.runner_log())

    # Nothing changed: through the runner, a no-op that counts every source unchanged (and starts no flow).
    before = len(box.runner_log())
    again = run_json(box, "--data-dir", str(data))
    assert again["outcome"] == "noop"
    assert {a: p["unchanged"] for a, p in again["plan"].items()} == {a: p["new"] for a, p in first["plan"].items()}
    assert all(p["new"] == p["changed"] == p["deleted"] == 0 for p in again["plan"].values())
    served = box.runner_log()[before:]
    assert any("event=serving command=run" in line for line in served), served
    assert any("exit=0" in line for line in served), served

    # A new session: the runner's child runs the flow on the managed server.
    write_session(box.corpus, NEW_SESSION, claude_exchange(NEW_SESSION, 3))
    before = len(box.runner_log())
    third = run_json(box, "--data-dir", str(data))
    assert third["outcome"] == "ok" and third["sessions_loaded"] == 1
    assert third["plan"]["claude"]["new"] == 1
    assert third["plan"]["claude"]["unchanged"] == first["plan"]["claude"]["new"]
    assert any("event=serving command=run" in line for line in box.runner_log()[before:])
    assert corpus_of(data)["turns"][f"claude-{NEW_SESSION}"] == 6

    status = box.transcripts("status", "--json", "--data-dir", str(data))
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert [r["outcome"] for r in doc["runs"][:3]] == ["ok", "noop", "ok"]
    assert sum(doc["counts"]["sessions"].values()) == 10  # the sample's 9 and the new one

    runs = flow_runs(api.url)
    for report in (first, third):
        recorded = runs[report["flow_run_id"]]
        assert recorded["state_type"] == "COMPLETED"
        assert recorded["parameters"]["run_id"] == report["run_id"]
    assert len(runs) == 2, "a no-op starts no flow"
    assert server.read_state(box.folder) == api, "the runner's commands used the same server"


def test_sql_hands_piped_statements_to_the_real_duckdb_cli(box: Box) -> None:
    data = box.data("plain")
    if not (data / "warehouse.duckdb").exists():
        run_json(box, "--data-dir", str(data))
    assert query.bundled_cli() is not None, "duckdb-cli is a dev dependency: `uv sync` installs it"
    # The box's PATH has no virtualenv `bin`: the CLI is the package's, unless this machine has one of its own there.
    cli = query.duckdb_cli(data, which=lambda name: shutil.which(name, path=box.env["PATH"]))
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    try:
        sessions = con.sql("SELECT count(*) FROM sessions").fetchall()[0][0]
    finally:
        con.close()
    # Dot commands are the CLI's own (the built-in shell has none but .tables): the answer proves which one ran.
    proc = box.transcripts(
        "sql", "--data-dir", str(data), stdin=".mode csv\n.headers off\nSELECT count(*) FROM sessions;\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sessions}\n"
    assert proc.stderr.startswith(f"DuckDB CLI {cli}, read-only")
    # The session is in the zone, and the fts extension of the wheel is loaded: match_bm25 answers.
    search = (
        ".mode csv\n.headers off\nSELECT current_setting('TimeZone');\n"
        "SELECT count(*) FROM (SELECT fts_main_turns.match_bm25(turn_id, 'password') AS s FROM turns) WHERE s > 0;\n"
    )
    proc = box.transcripts("sql", "--data-dir", str(data), "--timezone", "Asia/Tokyo", stdin=search)
    assert proc.returncode == 0, proc.stderr
    zone, hits = proc.stdout.split()
    assert zone == "Asia/Tokyo" and int(hits) > 0
    # An error in the CLI: its message, and its exit code 1; the warehouse cannot be written.
    proc = box.transcripts("sql", "--data-dir", str(data), stdin="SELEC 1;\nCREATE TABLE mine (a INTEGER);\n")
    assert proc.returncode == 1
    assert 'syntax error at or near "SELEC"' in proc.stderr
    assert "read-only" in proc.stderr
    # The statement form answers on the bundled engine, the same count.
    proc = box.transcripts("sql", "--csv", "--data-dir", str(data), "SELECT count(*) AS n FROM sessions")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["n", str(sessions)]


SERVICES = ("-m prefect server start", "-m flows.cli.resident serve")  # the box's server and runner: they stay


def dask_config(box: Box) -> Path:
    config = box.base / "dask.toml"
    config.write_text("[run]\nbatch_files = 2\nworkers = 2\n", encoding="utf-8")  # several batches, two workers
    return config


def run_on_dask(box: Box, data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    args = ("--home", str(box.corpus), "--data-dir", str(data), "--config", str(dask_config(box)), *args)
    return box.transcripts("run", "--json", *args, "--dask", "local", **extra)


def left_behind(box: Box, before: set[int]) -> dict[int, str]:
    """Processes of the box started since `before` that are still there (the server and the runner apart)."""
    found = {p: cmd for p, cmd in box.ours().items() if p not in before and not any(s in cmd for s in SERVICES)}
    return {p: cmd for p, cmd in found.items() if not gone([p], 20)}


def test_run_on_a_local_dask_cluster_loads_what_a_plain_run_does_and_leaves_no_process(box: Box) -> None:
    plain = box.data("dask-plain")
    expected = run_json(box, "--data-dir", str(plain), "--config", str(dask_config(box)))
    assert runner.wait_ready(box.folder, READY_SECONDS), box.runner_log()
    # Dask's default port for the scheduler's HTTP server taken (another cluster, a notebook): nothing to say.
    taken = socket.socket()
    with contextlib.suppress(OSError):
        taken.bind(("127.0.0.1", DASK_HTTP_PORT))  # else someone on this machine holds it already: the same
        taken.listen()
    try:
        _dask_runs_equal_a_plain_one(box, plain, expected)
    finally:
        taken.close()
    # The runner that command started for the next one was loaded with the command's own environment, not with
    # what the cluster's nannies added to it (PYTHONHASHSEED...): it serves the next command.
    assert runner.wait_ready(box.folder, READY_SECONDS), box.runner_log()
    served = len(box.runner_log())
    assert run_json(box, "--data-dir", str(plain))["outcome"] == "noop"
    log = box.runner_log()[served:]
    assert any("event=serving command=run" in line for line in log), log


def _dask_runs_equal_a_plain_one(box: Box, plain: Path, expected: dict[str, Any]) -> None:
    # Through the runner (its child starts the cluster), then in a process of its own (no runner: it starts one).
    for name, through_runner in (("dask", True), ("dask-alone", False)):
        if not through_runner:
            stopped = runner.stop(box.folder)
            assert stopped is not None
            runner.wait_gone(stopped, box.folder)
        before, served = set(box.ours()), len(box.runner_log())
        proc = run_on_dask(box, box.data(name))
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "distributed." not in proc.stderr, "the cluster's INFO lines are not the user's"
        assert "Warning" not in proc.stderr, proc.stderr
        assert any("command=run" in line for line in box.runner_log()[served:]) == through_runner
        report = json.loads(proc.stdout)
        assert report["outcome"] == "ok"
        for key in ("sessions_loaded", "sessions_rejected", "turns_loaded", "counts_by_agent"):
            assert report[key] == expected[key], key
        assert corpus_of(box.data(name)) == corpus_of(plain)
        assert left_behind(box, before) == {}, "no Dask scheduler, nanny or worker is left"


def test_a_dask_worker_lost_fails_the_run_in_one_line_and_keeps_the_previous_corpus(box: Box) -> None:
    data = box.data("dask-lost")
    run_json(box, "--data-dir", str(data))
    before_corpus, before = corpus_of(data), set(box.ours())
    # Every worker kills itself on its first batch (sinks/failpoints), and the scheduler gives up at the first death.
    proc = run_on_dask(
        box, data, "--full", TRANSCRIPTS_FAILPOINT="batch", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0"
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run failed: the Dask workers reading a batch of sources died (")
    log = box.base / "state" / "dask.log"
    assert last.endswith(f"; the cluster's log: {log}); the previous corpus is intact.")
    for logger in ("distributed.nanny", "distributed.worker", "distributed.scheduler", "distributed.core"):
        assert logger not in proc.stderr, "the cluster's own lines are in its log, not on the terminal"
    # The cluster's own record of the death is in its log: the scheduler's, which the run's failure comes from (the
    # nanny's WARNING about the same death is written when it notices, which can be after the cluster is closed).
    cluster_log = log.read_text(encoding="utf-8")
    assert re.search(r"distributed\.scheduler ERROR .*marked as failed because \d+ workers? died", cluster_log), (
        cluster_log
    )
    assert corpus_of(data) == before_corpus
    status = box.transcripts("status", "--json", "--data-dir", str(data))
    assert json.loads(status.stdout)["runs"][0]["outcome"] == "failed"
    assert left_behind(box, before) == {}


def test_server_stop_stops_the_server_and_the_runner(box: Box) -> None:
    api = server.read_state(box.folder)
    state = runner.read_state(box.folder)
    if api is None or state is None:
        pytest.skip("needs the server and runner of the first run's test")
    assert api.pid is not None
    proc = box.transcripts("server", "stop", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pid"] == api.pid
    assert gone([api.pid, int(state["pid"])]), box.ours()
    assert not server.healthy(api.url)
    assert server.read_state(box.folder) is None and runner.read_state(box.folder) is None
    assert not runner.ready(box.folder)
    assert box.ours() == {}, "nothing started by the box runs any more"
    proc = box.transcripts("server", "status")
    assert proc.returncode == 1  # no server: exit 1, as documented


def test_a_dask_scheduler_that_does_not_answer_is_one_line_and_exit_1(box: Box) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = box.data("dask-nowhere")
    args = ("run", "--home", str(box.corpus), "--data-dir", str(data), "--dask", f"tcp://127.0.0.1:{port}")
    proc = box.transcripts(*args, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")  # distributed's default: 30 s
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    address = f"tcp://127.0.0.1:{port}"
    assert last == f"run failed: Timed out trying to connect to {address} after 3 s; the previous corpus is intact."
