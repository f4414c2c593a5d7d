"""`transcripts run` with no --source discovers every nightly agent of a home, each into its own partition."""

from __future__ import annotations

from pathlib import Path

from flows.etl.settings import load_settings
from tests.corpus import G1, T1, codex_rollout, mixed_home
from tests.test_pipeline import dataset_files, run, snapshot, table_rows


def test_one_run_loads_claude_codex_and_grok_into_their_partitions(tmp_path: Path) -> None:
    home = mixed_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = load_settings(home=home, data_dir=data, env={"HOME": str(home)})
    report = run(settings)
    assert set(report.committed.counts_by_agent) >= {"claude", "codex", "grok"}
    sessions = {r[0]: r[1] for r in table_rows(data, "sessions")}
    assert sessions[f"codex-{T1}"] == "codex"
    assert sessions[f"grok-{G1}"] == "grok"
    partitions = {p.name for p in (data / "parquet" / "turns").iterdir()}
    assert {"agent=claude", "agent=codex", "agent=grok"} <= partitions
    turns = [r for r in table_rows(data, "turns") if r[2] == "codex"]
    assert [(r[4], r[5]) for r in sorted(turns, key=lambda r: r[3])][:2] == [
        ("user", "codex question 0"),
        ("assistant", "codex answer 0"),
    ]
    usage = [r for r in table_rows(data, "usage") if r[2] == "codex"]
    assert sum(r[7] + r[9] for r in usage) == 300, "cumulative totals become per-turn deltas, counted once"

    before, files = snapshot(data), dataset_files(data)
    run(settings)
    assert snapshot(data) == before
    assert {k: v for k, v in dataset_files(data).items() if not k.startswith("runs/")} == {
        k: v for k, v in files.items() if not k.startswith("runs/")
    }

    codex_rollout(home, T1, 4)  # the rollout grew by one exchange
    run(settings)
    after = snapshot(data)
    codex_turns = [r for r in after["turns"] if r[1] == f"codex-{T1}"]
    assert len(codex_turns) == len({r[0] for r in codex_turns}) == 8
    assert {r[0] for r in before["turns"] if r[1] == f"codex-{T1}"} < {r[0] for r in codex_turns}
    run(settings, full=True)
    assert snapshot(data) == after


def test_touched_files_are_not_reread_but_a_changed_grok_summary_is(tmp_path: Path) -> None:
    import json
    import os

    home = mixed_home(tmp_path / "home")
    data = tmp_path / "data"
    settings = load_settings(home=home, data_dir=data, env={"HOME": str(home)})
    run(settings)
    rollout = next((home / ".codex").rglob("rollout-*.jsonl"))
    os.utime(rollout, ns=(rollout.stat().st_atime_ns, rollout.stat().st_mtime_ns + 10**9))  # `touch`
    summary = next((home / ".grok").rglob("summary.json"))
    meta = json.loads(summary.read_text())
    meta["generated_title"] = "renamed in Grok"
    summary.write_text(json.dumps(meta))
    report = run(settings)
    assert report.committed.counts_by_agent["codex"].get("sources_read", 0) == 0, "same bytes: not read again"
    assert report.committed.counts_by_agent["grok"]["sessions_loaded"] == 1
    titles = {r[0]: r[7] for r in table_rows(data, "sessions")}
    assert titles[f"grok-{G1}"] == "renamed in Grok"
    mtimes = {r[0]: r[6] for r in table_rows(data, "sources")}
    assert mtimes[str(rollout)] == rollout.stat().st_mtime_ns, "the manifest learns the new mtime"


def test_gemini_and_opencode_load_by_default_and_a_live_opencode_db_is_read_safely(tmp_path: Path) -> None:
    import json

    from tests.opencode_support import (
        T0,
        add_exchange,
        add_message,
        add_part,
        add_session,
        checksum,
        create_db,
        text,
        user,
    )

    home = mixed_home(tmp_path / "home")
    chats = home / ".gemini" / "tmp" / "abc123" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2026-01-16T18-34-3739ef95.json").write_text(
        json.dumps(
            {
                "sessionId": "3739ef95-0000-4000-8000-000000000001",
                "startTime": "2026-01-16T18:34:00.000Z",
                "lastUpdated": "2026-01-16T18:35:00.000Z",
                "messages": [
                    {"id": "m1", "timestamp": "2026-01-16T18:34:01.000Z", "type": "user", "content": "gemini question"},
                    {
                        "id": "m2",
                        "timestamp": "2026-01-16T18:34:02.000Z",
                        "type": "gemini",
                        "content": "gemini answer",
                        "model": "gemini-2.5-pro",
                    },
                ],
            }
        )
    )
    db_path = home / ".local" / "share" / "opencode" / "opencode.db"
    writer = create_db(db_path)  # WAL mode, and OpenCode keeps its connection open during our runs
    add_session(writer, "ses_a")
    add_exchange(writer, "ses_a", 3)
    data = tmp_path / "data"
    settings = load_settings(home=home, data_dir=data, env={"HOME": str(home)})
    before = {p.name: checksum(p) for p in db_path.parent.iterdir() if p.name != "opencode.db-shm"}
    try:
        run(settings)
        sessions = {r[0]: r[1] for r in table_rows(data, "sessions")}
        assert sessions["opencode-ses_a"] == "opencode"
        assert sessions["gemini-3739ef95-0000-4000-8000-000000000001"] == "gemini"
        snap = snapshot(data)
        run(settings)
        assert snapshot(data) == snap, "idempotent"
        assert {p.name: checksum(p) for p in db_path.parent.iterdir() if p.name != "opencode.db-shm"} == before
        # OpenCode writes more of the session: it is read again and replaced whole.
        later = T0 + 3_600_000
        add_message(writer, "ses_a", "ses_a_msg_later_u", later, user(later))
        add_part(writer, "ses_a", "ses_a_msg_later_u", "ses_a_msg_later_u_prt", text("one more question"))
        run(settings)
        turns = [r for r in table_rows(data, "turns") if r[1] == "opencode-ses_a"]
        assert len(turns) == len({r[0] for r in turns}) == 7
    finally:
        writer.close()
