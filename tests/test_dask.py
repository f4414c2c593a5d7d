"""The same flow with its extraction tasks on a Dask cluster (a LocalCluster of 2 workers): the same corpus, and a
worker lost mid-run fails the run cleanly with the previous corpus intact (issue 12, scale-out).

The flow is called here, in the test's process, on a temporary Prefect API; `transcripts run --dask local` as a person
types it (the managed server, the command runner, the one-line failure, no process left) is in test_real_paths.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.etl.settings import load_settings
from tests.corpus import mixed_home
from tests.test_pipeline import parquet_rows, run, snapshot

pytest.importorskip("prefect_dask", reason="prefect-dask is a dependency of the project: `uv sync` installs it")


def _config(tmp_path: Path, name: str, **run_settings: Any) -> Path:
    lines = ["[run]", "batch_files = 2", *(f"{k} = {v!r}".replace("'", '"') for k, v in run_settings.items())]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _options(home: Path, data: Path, config: Path) -> dict[str, Any]:
    return {"home": home, "data_dir": data, "config": config, "lock_wait": 5}


@pytest.fixture
def no_failpoint() -> Iterator[None]:
    yield
    os.environ.pop("TRANSCRIPTS_FAILPOINT", None)


def test_the_flow_on_a_local_dask_cluster_gives_the_corpus_of_a_local_run(
    tmp_path: Path, prefect_harness: None
) -> None:
    from flows.etl.flow import etl_flow

    home = mixed_home(tmp_path / "home")
    local = tmp_path / "local"
    run(load_settings(home=home, data_dir=local, env={"HOME": str(home)}, lock_wait=5))
    clustered = tmp_path / "dask"
    config = _config(tmp_path, "dask", dask="local", workers=2)
    report = etl_flow(_options(home, clustered, config))
    assert report.committed.sessions_loaded > 3
    assert sum(1 for _ in (clustered / "parquet").rglob("*.parquet")) > 0
    expected = snapshot(local)
    assert expected["rejects"], "the corpus has a rejected source: it is rejected on a worker as it is locally"
    assert snapshot(clustered) == expected


def test_a_worker_lost_mid_run_fails_the_run_and_keeps_the_previous_corpus(
    tmp_path: Path, prefect_harness: None, no_failpoint: None
) -> None:
    import dask

    from flows.etl.flow import etl_flow
    from tests.corpus import S1, claude_exchange, write_session

    home = mixed_home(tmp_path / "home")
    data = tmp_path / "data"
    run(load_settings(home=home, data_dir=data, env={"HOME": str(home)}, lock_wait=5))
    before = snapshot(data)
    write_session(home, S1, claude_exchange(S1, 5))  # work for the next run
    config = _config(tmp_path, "dask", dask="local", workers=2)
    os.environ["TRANSCRIPTS_FAILPOINT"] = "batch"  # every Dask worker dies on its first batch
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), pytest.raises(Exception) as failed:
        etl_flow(_options(home, data, config))
    assert "KilledWorker" in repr(failed.value) or "died" in str(failed.value).lower()
    assert snapshot(data) == before
    outcomes = [row for row in parquet_rows(data, "runs") if row[5] == "failed"]
    assert len(outcomes) == 1, "the failed run is in the ledger"


_WORKER_LOGS = """
import logging, os, sys
import distributed  # noqa: F401  (its logging setup: a stderr handler on distributed and tornado)
from flows.etl import cluster
cluster.dask_setup(None)  # as in a local cluster's worker process, whose nanny set TRANSCRIPTS_DASK_LOG
try:
    raise OSError("Stream is closed")
except OSError:
    logging.getLogger("distributed.worker").exception("Failed to communicate with scheduler during heartbeat.")
logging.getLogger("distributed.worker").info("Start worker at: tcp://127.0.0.1:1")
logging.getLogger("tornado.application").error("Exception in callback")
"""


def test_a_local_workers_log_records_go_to_the_clusters_log_never_the_terminal(tmp_path: Path) -> None:
    import subprocess
    import sys

    from flows.etl.cluster import LOG_ENV

    log = tmp_path / "state" / "dask.log"
    env = {**os.environ, LOG_ENV: str(log)}
    proc = subprocess.run([sys.executable, "-c", _WORKER_LOGS], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    text = log.read_text(encoding="utf-8")
    assert "distributed.worker ERROR Failed to communicate with scheduler during heartbeat." in text
    assert "Traceback" in text and "OSError: Stream is closed" in text
    assert "tornado.application ERROR Exception in callback" in text
    assert "Start worker" not in text, "INFO stays out: a worker's every step is not worth a line"


def test_the_commands_own_cluster_logs_go_to_the_file_while_it_runs_then_back_as_they_were(tmp_path: Path) -> None:
    import logging

    import distributed  # noqa: F401

    from flows.etl.cluster import logs_to

    loggers = [logging.getLogger(n) for n in ("distributed", "distributed.client", "tornado", "tornado.application")]
    before = [(list(x.handlers), x.level, x.propagate) for x in loggers]
    log = tmp_path / "dask.log"
    with logs_to(log):
        logging.getLogger("distributed.nanny").warning("Worker process 7 was killed by signal 9")
        logging.getLogger("distributed.client").error("a client error")
    text = log.read_text(encoding="utf-8")
    assert "distributed.nanny WARNING Worker process 7 was killed by signal 9" in text
    assert "distributed.client ERROR a client error" in text
    assert [(list(x.handlers), x.level, x.propagate) for x in loggers] == before
