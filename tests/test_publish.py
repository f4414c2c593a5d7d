"""`transcripts publish` and the team queries, against a real S3 endpoint (moto's server, started by the tests) and a
plain folder, through the real CLI in subprocesses: incremental, atomic for readers, resumable, a session on two
machines counted once, errors as one line with the local corpus untouched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.etl.flow import run_etl
from flows.etl.settings import load_settings
from tests.corpus import S1, S2, S3, claude_exchange, write_session
from tests.s3_endpoint import BUCKET, Endpoint, client, refusing_port, s3_endpoint
from tests.test_cli import ROOT, cli
from transforms.schema import BY_NAME, holds_text, metrics_columns

URL = f"s3://{BUCKET}"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    with s3_endpoint(tmp_path_factory.mktemp("s3")) as found:
        yield found


def load(home: Path, data: Path, env: dict[str, str] | None = None) -> None:
    """A `transcripts run` of `home` into `data` (no Prefect API)."""
    settings = load_settings(home=home, data_dir=data, env={"TRANSCRIPTS_TIMEZONE": "UTC", **(env or {})}, lock_wait=5)
    run_etl(settings, as_tasks=False)


def machine(base: Path, name: str, sessions: dict[str, int]) -> Path:
    """A machine's data dir with Claude sessions of so many exchanges each."""
    home = base / f"{name}-home"
    for session, exchanges in sessions.items():
        write_session(home, session, claude_exchange(session, exchanges, text=f"{name} asks"))
    data = base / f"{name}-data"
    load(home, data)
    return data


def publish(
    endpoint: Endpoint, data: Path, label: str, *args: str, url: str = URL, **env: str
) -> subprocess.CompletedProcess[str]:
    return cli("publish", url, "--machine", label, "--data-dir", str(data), *args, env=endpoint.env(**env))


def team_sql(endpoint: Endpoint, reader: Path, sql: str, url: str) -> list[dict[str, object]]:
    proc = cli("sql", "--team", url, "--data-dir", str(reader), "--json", sql, env=endpoint.env())
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, object]] = json.loads(proc.stdout)
    return rows


def keys(endpoint: Endpoint, prefix: str) -> dict[str, int]:
    found = client(endpoint).list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return {o["Key"]: o["Size"] for o in found.get("Contents", [])}


def clear(endpoint: Endpoint, prefix: str) -> None:
    s3 = client(endpoint)
    for key in keys(endpoint, prefix):
        s3.delete_object(Bucket=BUCKET, Key=key)  # type: ignore[attr-defined]


def test_a_republish_with_no_change_sends_no_data_and_makes_a_handful_of_requests(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    data = machine(tmp_path, "solo", {S1: 3, S2: 2})
    url = f"{URL}/norepeat"
    first = publish(endpoint, data, "solo", url=url)
    assert first.returncode == 0, first.stderr
    sent = keys(endpoint, "norepeat/machine=solo/")
    assert "norepeat/machine=solo/manifest.json" in sent
    manifest = json.loads(
        client(endpoint).get_object(Bucket=BUCKET, Key="norepeat/machine=solo/manifest.json")["Body"].read()
    )  # type: ignore[attr-defined]
    assert {f"norepeat/machine=solo/objects/{f['sha256']}.parquet" for f in manifest["files"]} == set(sent) - {
        "norepeat/machine=solo/manifest.json"
    }
    before = len(endpoint.requests())
    again = publish(endpoint, data, "solo", url=url)
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout
    requests = endpoint.requests()[before:]
    assert not [r for r in requests if r.startswith(("PUT", "POST", "DELETE"))], requests
    assert len(requests) <= 5, requests
    assert keys(endpoint, "norepeat/machine=solo/") == sent


def test_a_team_of_three_machines_is_queried_as_one_and_a_shared_session_counts_once_as_its_fuller_copy(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    # S1 is on all three (one home folder synced): the desktop's copy has the most turns and wins.
    laptop = machine(tmp_path, "laptop", {S1: 2, S2: 1})
    desktop = machine(tmp_path, "desktop", {S1: 4})
    build = machine(tmp_path, "build", {S1: 3, S3: 2})
    url = f"{URL}/three"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "flows.cli.app", "publish", url, "--machine", label, "--data-dir", str(data)],
            cwd=ROOT,
            env=endpoint.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for label, data in (("laptop", laptop), ("desktop", desktop), ("build", build))
    ]
    for proc in procs:  # all three at once: each writes only under its own label
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    reader = tmp_path / "reader"
    rows = team_sql(
        endpoint, reader, "SELECT machine, count(*) AS n FROM all_sessions GROUP BY ALL ORDER BY machine", url=url
    )
    assert rows == [{"machine": "build", "n": 2}, {"machine": "desktop", "n": 1}, {"machine": "laptop", "n": 2}]
    shared = team_sql(
        endpoint, reader, f"SELECT machine, turn_count FROM sessions WHERE session_id = 'claude-{S1}'", url=url
    )
    assert shared == [{"machine": "desktop", "turn_count": 8}]
    assert team_sql(endpoint, reader, "SELECT count(*) AS n FROM sessions", url=url) == [{"n": 3}]
    # the other session tables follow the winning copy: S1's turns are the desktop's only
    turns = team_sql(
        endpoint,
        reader,
        f"SELECT machine, count(*) AS n FROM turns WHERE session_id = 'claude-{S1}' GROUP BY ALL",
        url=url,
    )
    assert turns == [{"machine": "desktop", "n": 8}]
    # the views are the warehouse's: session_overview carries the machine column
    overview = team_sql(
        endpoint, reader, "SELECT machine, session_id FROM session_overview ORDER BY session_id", url=url
    )
    assert [r["machine"] for r in overview] == ["desktop", "laptop", "build"]
    prompts = team_sql(
        endpoint, reader, "SELECT DISTINCT machine, session_id FROM prompts ORDER BY session_id", url=url
    )
    assert [r["machine"] for r in prompts] == ["desktop", "laptop", "build"]
    machines = team_sql(endpoint, reader, "SELECT machine, level FROM machines ORDER BY machine", url=url)
    assert machines == [{"machine": m, "level": "full"} for m in ("build", "desktop", "laptop")]
    report = tmp_path / "team.html"
    proc = cli("report", "--team", url, "--data-dir", str(reader), "--out", str(report), env=endpoint.env())
    assert proc.returncode == 0, proc.stderr
    assert "3 sessions" in proc.stdout and report.exists()
    found = cli("search", "--team", url, "--data-dir", str(reader), "--json", "desktop", env=endpoint.env())
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits and {h["session_id"] for h in hits} == {f"claude-{S1}"}


def test_a_publish_killed_mid_upload_leaves_no_manifest_and_the_next_one_sends_only_the_rest(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    data = machine(tmp_path, "crashy", {S1: 3, S2: 2})
    url = f"{URL}/killed"
    killed = publish(endpoint, data, "crashy", url=url, TRANSCRIPTS_FAILPOINT="team_upload")
    assert killed.returncode == -9
    after_kill = keys(endpoint, "killed/machine=crashy/")
    # killed once its first object was in place (others may have completed beside it): no manifest yet
    assert after_kill and "killed/machine=crashy/manifest.json" not in after_kill
    reader = tmp_path / "reader"
    nothing = cli("sql", "--team", url, "--data-dir", str(reader), "SELECT 1", env=endpoint.env())
    assert nothing.returncode == 1 and "no machine has published" in nothing.stderr
    resumed = publish(endpoint, data, "crashy", url=url)
    assert resumed.returncode == 0, resumed.stderr
    sent = re.search(r"(\d+) of (\d+) files sent", resumed.stdout)
    assert sent is not None, resumed.stdout
    assert int(sent.group(1)) == int(sent.group(2)) - len(after_kill)  # all but what the killed publish sent
    assert team_sql(endpoint, reader, "SELECT count(*) AS n FROM sessions", url=url) == [{"n": 2}]


def test_a_team_query_during_a_publish_sees_the_previous_publish_whole(endpoint: Endpoint, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2))
    data = tmp_path / "data"
    load(home, data)
    url = f"{URL}/during"
    assert publish(endpoint, data, "busy", url=url).returncode == 0
    write_session(home, S2, claude_exchange(S2, 2))
    load(home, data)
    flag = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli.app", "publish", url, "--machine", "busy", "--data-dir", str(data)],
        cwd=ROOT,
        env=endpoint.env(TRANSCRIPTS_PAUSEPOINT=f"team_manifest:{flag}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{flag}.reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        reader = tmp_path / "reader"
        # every new object is in the bucket, the manifest not yet replaced: the reader sees the old publish, whole
        assert team_sql(endpoint, reader, "SELECT count(*) AS n FROM sessions", url=url) == [{"n": 1}]
        assert team_sql(endpoint, reader, "SELECT count(DISTINCT session_id) AS n FROM turns", url=url) == [{"n": 1}]
    finally:
        flag.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert team_sql(endpoint, tmp_path / "reader", "SELECT count(*) AS n FROM sessions", url=url) == [{"n": 2}]


def test_a_metrics_publish_holds_no_column_with_text(endpoint: Endpoint, tmp_path: Path) -> None:
    data = machine(tmp_path, "private", {S1: 3})
    url = f"{URL}/metrics"
    done = publish(endpoint, data, "private", "--level", "metrics", url=url)
    assert done.returncode == 0, done.stderr
    s3 = client(endpoint)
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="metrics/machine=private/manifest.json")["Body"].read())  # type: ignore[attr-defined]
    assert manifest["level"] == "metrics"
    for file in manifest["files"]:
        body = s3.get_object(Bucket=BUCKET, Key=f"metrics/machine=private/objects/{file['sha256']}.parquet")["Body"]  # type: ignore[attr-defined]
        local = tmp_path / "object.parquet"
        local.write_bytes(body.read())
        table = BY_NAME[file["path"].split("/")[0]]
        names = pq.read_schema(local).names
        assert set(names) <= set(metrics_columns(table)), file["path"]
        assert not {"text", "title", "input", "output", "detail", "error", "secret_hmac"} & set(names)
        texts = pq.read_table(local).to_pylist()
        assert not any("private asks" in str(v) for row in texts for v in row.values())
    rows = team_sql(endpoint, tmp_path / "reader", "SELECT count(*) AS n, count(text) AS texts FROM turns", url=url)
    assert rows == [{"n": 6, "texts": 0}]
    nothing = cli("search", "--team", url, "--data-dir", str(tmp_path / "reader"), "asks", env=endpoint.env())
    assert nothing.returncode == 2 and "--level metrics" in nothing.stderr


def test_every_column_a_metrics_publish_keeps_is_declared_or_holds_no_text() -> None:
    from transforms.schema import METRIC_SAFE, TABLES

    for table in TABLES:
        declared = METRIC_SAFE.get(table.name, frozenset())
        assert declared <= set(table.column_names), table.name  # no stale declaration
        for column in table.columns:
            kept = column.name in metrics_columns(table)
            assert kept == (not holds_text(column.type) or column.name in declared), (table.name, column.name)
    assert "text" not in metrics_columns(BY_NAME["turns"])
    assert {"input", "output"}.isdisjoint(metrics_columns(BY_NAME["tool_calls"]))


def test_wrong_credentials_are_one_line_without_the_secret_and_the_local_corpus_is_untouched(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    data = machine(tmp_path, "wrong", {S1: 2})
    before = snapshot(data)
    bad = publish(endpoint, data, "wrong", AWS_SECRET_ACCESS_KEY="not-the-secret-at-all")
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "access denied" in lines[0] and "credentials" in lines[0], bad.stderr
    assert "not-the-secret-at-all" not in bad.stdout + bad.stderr
    assert endpoint.secret_key not in bad.stdout + bad.stderr
    assert snapshot(data) == before
    query = cli(
        "sql",
        "--team",
        URL,
        "--data-dir",
        str(tmp_path / "r"),
        "SELECT 1",
        env=endpoint.env(AWS_SECRET_ACCESS_KEY="nope-nope"),
    )
    assert query.returncode == 1 and "access denied" in query.stderr and "nope-nope" not in query.stderr
    none = endpoint.env()
    del none["AWS_ACCESS_KEY_ID"], none["AWS_SECRET_ACCESS_KEY"]
    anonymous = cli("sql", "--team", URL, "--data-dir", str(tmp_path / "r"), "SELECT 1", env=none)
    assert anonymous.returncode == 1 and "no credentials found" in anonymous.stderr, anonymous.stderr


def snapshot(data: Path) -> dict[str, tuple[int, int]]:
    """The corpus files (versions, the parquet link's target, the warehouse) with size and mtime."""
    found = {
        str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in (data / "versions").rglob("*")
        if p.is_file()
    }
    found["parquet"] = (0, hash(os.readlink(data / "parquet")))
    found["warehouse.duckdb"] = (
        (data / "warehouse.duckdb").stat().st_size,
        (data / "warehouse.duckdb").stat().st_mtime_ns,
    )
    return found


def test_a_missing_bucket_no_network_a_foreign_object_and_a_newer_manifest_are_one_line_each(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    data = machine(tmp_path, "errs", {S1: 2})
    before = snapshot(data)
    nobucket = publish(endpoint, data, "errs", url="s3://no-such-bucket/x")
    assert (
        nobucket.returncode == 1
        and "does not exist" in nobucket.stderr
        and len(nobucket.stderr.strip().splitlines()) == 1
    )
    with refusing_port() as port:
        offline = publish(endpoint, data, "errs", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    assert offline.returncode == 1 and "cannot reach" in offline.stderr, offline.stderr
    assert len(offline.stderr.strip().splitlines()) == 1
    s3 = client(endpoint)
    s3.put_object(Bucket=BUCKET, Key="foreign/notes.txt", Body=b"someone else's")  # type: ignore[attr-defined]
    foreign = publish(endpoint, data, "errs", url=f"{URL}/foreign")
    assert foreign.returncode == 1 and "foreign object" in foreign.stderr, foreign.stderr
    s3.put_object(Bucket=BUCKET, Key="foreign2/machine=errs/objects/readme.txt", Body=b"x")  # type: ignore[attr-defined]
    inside = publish(endpoint, data, "errs", url=f"{URL}/foreign2")
    assert inside.returncode == 1 and "foreign object" in inside.stderr, inside.stderr
    newer = {"format": "transcripts-team", "format_version": 99, "machine": "future"}
    s3.put_object(Bucket=BUCKET, Key="newer/machine=future/manifest.json", Body=json.dumps(newer).encode())  # type: ignore[attr-defined]
    query = cli("sql", "--team", f"{URL}/newer", "--data-dir", str(tmp_path / "r"), "SELECT 1", env=endpoint.env())
    assert query.returncode == 1 and "newer than this version" in query.stderr and "upgrade" in query.stderr
    assert snapshot(data) == before
    badurl = publish(endpoint, data, "errs", url="gs://bucket/x")
    assert badurl.returncode == 2 and "S3 API" in badurl.stderr
    badlabel = publish(endpoint, data, "not/a label")
    assert badlabel.returncode == 2 and "machine label" in badlabel.stderr


def test_publishing_to_a_folder_keeps_retired_objects_through_the_grace_period(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from sinks import publish as publishing
    from sinks import remote

    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2))
    data = tmp_path / "data"
    load(home, data)
    shared = tmp_path / "shared"
    target = remote.open_target(str(shared))
    start = datetime(2026, 5, 1, tzinfo=UTC)
    publishing.publish(data, target, "desk", now=lambda: start)
    objects = shared / "machine=desk" / "objects"
    first = set(os.listdir(objects))
    write_session(home, S1, claude_exchange(S1, 3))
    load(home, data)
    done = publishing.publish(data, target, "desk", now=lambda: start + timedelta(minutes=5))
    assert done.uploaded and not done.removed
    manifest = json.loads((shared / "machine=desk" / "manifest.json").read_text())
    replaced = {f"objects/{n}" for n in first} - {f"objects/{f['sha256']}.parquet" for f in manifest["files"]}
    assert replaced and {r["object"] for r in manifest["retired"]} == replaced
    assert first <= set(os.listdir(objects))  # a reader of the first manifest still has its files
    later = publishing.publish(data, target, "desk", now=lambda: start + timedelta(hours=2))
    assert later.removed == len(replaced) and not later.uploaded
    assert not {n for n in first if f"objects/{n}" in replaced} & set(os.listdir(objects))
    assert json.loads((shared / "machine=desk" / "manifest.json").read_text())["retired"] == []
    proc = cli(
        "sql", "--team", str(shared), "--data-dir", str(tmp_path / "r"), "--json", "SELECT turn_count FROM sessions"
    )
    assert proc.returncode == 0 and json.loads(proc.stdout) == [{"turn_count": 6}]


def test_a_run_with_a_team_folder_set_publishes_after_its_commit_and_a_failed_publish_does_not_fail_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2))
    shared = tmp_path / "shared"
    env = {"TRANSCRIPTS_PUBLISH_URL": str(shared), "TRANSCRIPTS_MACHINE": "nightly", "TRANSCRIPTS_TIMEZONE": "UTC"}
    settings = load_settings(home=home, data_dir=tmp_path / "data", env=env, lock_wait=5)
    report = run_etl(settings, as_tasks=False)
    assert report.published is not None and "published" in report.published
    assert (shared / "machine=nightly" / "manifest.json").exists()
    shared_file = tmp_path / "not-a-folder"
    shared_file.write_text("x")
    write_session(home, S2, claude_exchange(S2, 2))
    broken = load_settings(
        home=home,
        data_dir=tmp_path / "data",
        env={**env, "TRANSCRIPTS_PUBLISH_URL": str(shared_file / "sub")},
        lock_wait=5,
    )
    report = run_etl(broken, as_tasks=False)
    assert report.committed is not None and report.committed.sessions_loaded == 1
    assert report.published is not None and report.published.startswith("publish failed")


def test_a_full_publish_of_a_corpus_stored_unredacted_is_refused_and_a_metrics_one_goes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2, text="raw words"))
    data = tmp_path / "data"
    load(home, data, {"TRANSCRIPTS_REDACT": "false"})
    shared = tmp_path / "shared"
    refused = cli("publish", str(shared), "--machine", "raw", "--data-dir", str(data))
    assert refused.returncode == 1 and "never sends unredacted text" in refused.stderr
    assert not (shared / "machine=raw" / "manifest.json").exists()
    metrics = cli("publish", str(shared), "--machine", "raw", "--data-dir", str(data), "--level", "metrics")
    assert metrics.returncode == 0, metrics.stderr
    assert (shared / "machine=raw" / "manifest.json").exists()


def test_a_manifest_of_a_newer_corpus_schema_is_refused_by_a_team_query(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "machine=future").mkdir(parents=True)
    manifest = {"format": "transcripts-team", "format_version": 1, "machine": "future", "level": "full"}
    manifest |= {"published_at": "2026-01-01T00:00:00+00:00", "corpus_version": 1, "schema_version": "999"}
    (shared / "machine=future" / "manifest.json").write_text(json.dumps(manifest | {"files": [], "retired": []}))
    proc = cli("sql", "--team", str(shared), "--data-dir", str(tmp_path / "r"), "SELECT 1")
    assert proc.returncode == 1 and "schema 999, newer than" in proc.stderr


def test_a_run_with_nothing_new_publishes_what_an_earlier_failed_publish_did_not_send(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_session(home, S1, claude_exchange(S1, 2))
    data = tmp_path / "data"
    load(home, data)  # loaded with no team folder set: nothing published yet
    shared = tmp_path / "shared"
    env = {"TRANSCRIPTS_PUBLISH_URL": str(shared), "TRANSCRIPTS_MACHINE": "later", "TRANSCRIPTS_RUNNER": "off"}
    proc = cli("run", "--home", str(home), "--data-dir", str(data), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "nothing new, changed or deleted" in proc.stdout  # the no-op path: no flow started
    assert "published to" in proc.stdout and (shared / "machine=later" / "manifest.json").exists()
