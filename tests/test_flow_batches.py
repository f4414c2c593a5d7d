"""The nightly path of a corpus larger than one batch: the real Prefect flow, several batches on a worker pool."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flows.etl import flow as etl
from flows.etl.flow import etl_flow, run_etl
from flows.etl.settings import load_settings
from tests.corpus import mixed_home
from tests.test_pipeline import snapshot


def _config(path: Path, *, batch_files: int, workers: int) -> Path:
    path.write_text(f"[run]\nbatch_files = {batch_files}\nworkers = {workers}\n", encoding="utf-8")
    return path


@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_over_several_batches_on_two_workers_gives_the_one_batch_corpus(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = mixed_home(tmp_path / "home")
    sources = ["claude", "codex", "grok"]
    env = {"HOME": str(home)}

    one = load_settings(
        home=home, data_dir=tmp_path / "one", sources=sources, env=env, lock_wait=5,
        config=_config(tmp_path / "one.toml", batch_files=400, workers=1),
    )  # fmt: skip
    single = run_etl(one, as_tasks=False)

    submitted: list[object] = []
    real_submit = etl.extract_batch.submit

    def counting_submit(*args: object, **kwargs: object) -> object:
        submitted.append(args[1])  # the batch number
        return real_submit(*args, **kwargs)

    monkeypatch.setattr(etl.extract_batch, "submit", counting_submit)
    options = {
        "home": home, "data_dir": tmp_path / "many", "sources": sources, "env": env, "lock_wait": 5,
        "config": _config(tmp_path / "many.toml", batch_files=1, workers=2),
    }  # fmt: skip
    with caplog.at_level(logging.INFO, logger="transcripts.etl"):
        several = etl_flow(options)

    found = sum(single.plan_counts[a]["new"] for a in sources)
    assert found >= 5, single.plan_counts
    assert submitted == list(range(found)), "every batch went to the worker pool as a Prefect task"
    batches = [m for r in caplog.records if (m := r.getMessage()).startswith(f"event=batch run={several.run_id} ")]
    assert len(batches) == found, batches
    assert several.flow_run_id, "it ran as a Prefect flow"
    assert several.committed.sessions_loaded == single.committed.sessions_loaded > 0
    assert several.committed.sessions_rejected == single.committed.sessions_rejected
    assert snapshot(tmp_path / "many") == snapshot(tmp_path / "one"), "the same corpus, table by table"


def test_a_load_is_cut_into_batches_that_keep_every_worker_busy_the_largest_first() -> None:
    from extractors.model import Agent, Source
    from flows.etl import pipeline

    mib = 1024 * 1024
    sizes = [30 * mib] + [mib] * 70 + [5 * mib, 2 * mib]  # one big session among many small ones: 107 MiB
    sources = [Source(Agent("claude"), f"/r/{i:03d}.jsonl", size, 0, "/r") for i, size in enumerate(sizes)]

    work = pipeline.work_of(sources, 64 * mib, 400, workers=2)
    sent = [sum(s.size for s in batch) for batch in work]
    assert sorted(s.path for batch in work for s in batch) == [s.path for s in sources], "each source once"
    assert sent == sorted(sent, reverse=True), "the largest batch is handed out first"
    assert sent[0] == 30 * mib and len(work[0]) == 1, "a big file is a batch alone"
    # A share is 107 MiB / (2 workers x 4) = 13.4 MiB: the big file, then 77 MiB in six batches (not two of 64 MiB).
    assert len(work) == 7, sent
    assert max(sent[1:]) <= -(-sum(sizes) // (2 * pipeline.BATCHES_PER_WORKER)), "none above its share"

    alone = pipeline.work_of(sources, 64 * mib, 400, workers=1)
    assert [sum(s.size for s in b) for b in alone] == [64 * mib, 43 * mib], "one process: batches of the set size"
    tiny = pipeline.work_of(sources[1:9], 64 * mib, 400, workers=2)
    assert [len(b) for b in tiny] == [4, 4], "no batch under MIN_BATCH_BYTES: eight 1 MiB files are two batches"


def test_a_big_source_is_read_in_a_worker_process_even_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What reading a big session took goes back to the system with the worker, before the commit (a 2 GB session
    read in the run's own process left it at 1.4 GiB for the rest of the run)."""
    from flows.etl import workers
    from tests.corpus import S1, claude_exchange, small_home, write_session
    from tests.test_pipeline import settings_for

    home = small_home(tmp_path / "home")
    asked: list[tuple[int, bool]] = []
    real_pool = workers.extraction_pool

    def pool(n: int, *, apart: bool = False, log: object = None) -> object:
        asked.append((n, apart))
        return real_pool(n, apart=apart, log=log)

    monkeypatch.setattr(etl, "extraction_pool", pool)
    config = _config(tmp_path / "one.toml", batch_files=400, workers=1)
    run_etl(settings_for(home, tmp_path / "small", config=config), as_tasks=False)
    assert asked == [(1, False)], "small sources: read in the run's own process"

    write_session(home, S1, claude_exchange(S1, 40, text="a long one " * 20))
    config.write_text(config.read_text() + "[limits]\nstream_source_bytes = 4000\n", encoding="utf-8")
    asked.clear()
    report = run_etl(settings_for(home, tmp_path / "small", config=config), as_tasks=False)
    assert asked == [(1, True)], "one batch, one worker setting: still a worker process for the big source"
    assert report.committed.sessions_loaded == 1 and report.committed.turns_loaded == 80
