"""Benchmark the ETL: full load, no-change rerun, append-one-session rerun; or the full load at several sizes.

    uv run python bench/run.py --mb 200 [--seed 1] [--mix claude=1.0] [--keep DIR | --corpus HOME] [--prefect]
    uv run python bench/run.py --scale 50,100,200 [--keep DIR]
    uv run python bench/run.py --mb 200 --stages --profile  # also time each step, and cProfile, a full load
    uv run python bench/run.py --mb 20 --shape small         # thousands of small sessions in one project folder
    uv run python bench/run.py --mb 500 --shape big          # one Claude session of 500 MB (peak RSS)
    uv run python bench/run.py --mb 2000 --shape big --mix codex=1   # one Codex rollout of 2 GB
    uv run python bench/run.py --mb 200 --dask local         # also the phases on a LocalCluster, through the flow
    uv run python bench/run.py --mb 50 --repeat 3 --compare-redaction  # also a full load without redaction

Each phase runs in its own process (`bench/phase.py`), so its peak RSS is its own (read with `os.wait4`, which
reports the largest resident set of the process and of its reaped children). Printed per phase: wall seconds of the
process (interpreter start, imports, and, with --prefect, Prefect's server start-up included), pipeline seconds
(`RunReport.seconds`, inside run_etl: lock, discover, plan, extract, commit, DuckDB load), MB read, MB/s and peak RSS.
Results are also written as JSON (default bench/out/results.json, or results-scale.json with --scale).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import MANIFEST, MB, SHAPE_NAMES, SMALL_MIX, generate, load_summary, parse_mix, stale
from bench.phase import STAGES

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
OUT = BENCH / "out"
MIB = 1024 * 1024

# Issue 12's targets, on 2 cores: full load MB of corpus per pipeline second, by corpus shape (the big shape is
# there for its memory figure); a no-change rerun and one appended session in pipeline seconds; peak RSS.
TARGET_FULL_MBPS = {"mixed": 100.0, "small": 50.0, "big": 0.0}
TARGET_NOCHANGE_SECONDS = 0.3
TARGET_APPEND_SECONDS = 0.5
TARGET_RSS_MIB = 1024.0  # peak RSS of any phase


@dataclass(slots=True)
class Phase:
    name: str
    wall_seconds: float
    pipeline_seconds: float
    import_seconds: float
    call_seconds: float
    mb_read: float
    peak_rss_mib: float  # the phase's process tree (largest single process)
    rss_self_mib: float  # the pipeline process alone
    rss_children_mib: float  # its reaped children (the Prefect server, with --prefect)
    tree_rss_mib: float  # sampled every 0.1 s: the largest sum of VmRSS over the phase's process tree
    worker_rss_mib: float  # sampled: the largest VmRSS of one process of the tree (extraction workers included)
    sessions_loaded: int
    sessions_rejected: int
    new_rejections: int
    sources_deferred: int
    turns_loaded: int
    plan_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    corpus_mb: float = 0.0
    stages: dict[str, list[float]] = field(default_factory=dict)  # label -> [seconds, calls] (--stages)
    load_before: float = 0.0  # 1-minute load average when the phase started (other work on the machine)
    cpu_seconds: float = 0.0  # user+sys of the phase's processes (workers and fork server included): see reap_cpu
    note: str = ""

    @property
    def prefect_seconds(self) -> float:
        """Time spent in the flow call outside run_etl (server start-up, flow and task runs)."""
        return round(self.call_seconds - self.pipeline_seconds, 3)

    def mbps_pipeline(self) -> float | None:
        return self.corpus_mb / self.pipeline_seconds if self.name == "full load" and self.pipeline_seconds else None

    def sessions_per_s(self) -> float | None:
        full = self.name == "full load" and self.pipeline_seconds
        return self.sessions_loaded / self.pipeline_seconds if full else None

    def mbps_wall(self) -> float | None:
        return self.corpus_mb / self.wall_seconds if self.name == "full load" and self.wall_seconds else None


def child_env(work: Path) -> dict[str, str]:
    """The phases' environment: no developer settings or agent overrides leak in; Prefect quiet and local."""
    # PYTHONDONTWRITEBYTECODE is dropped too, as on a person's machine: with it (this sandbox sets it), every phase
    # compiled again what a run imports lazily (the price database, the extractors), up to ~0.4 s of pipeline time.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRANSCRIPTS_", "PREFECT_"))
        and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GROK_HOME", "PYTHONDONTWRITEBYTECODE")
    }
    (work / "xdg").mkdir(parents=True, exist_ok=True)
    env.update(
        XDG_CONFIG_HOME=str(work / "xdg"),
        PREFECT_HOME=str(work / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90",
    )
    return env


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the VmRSS of a process and all its descendants every 0.1 s (Linux /proc).

    `os.wait4` alone misses the extraction workers: they are children of a fork server that is never reaped.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.tree_kib, self.single_kib = pid, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            pids, todo = [], [self.pid]
            while todo:
                pid = todo.pop()
                pids.append(pid)
                todo.extend(_children(pid))
            sizes = [_rss_kib(pid) for pid in pids]
            self.tree_kib = max(self.tree_kib, sum(sizes))
            self.single_kib = max(self.single_kib, max(sizes, default=0))


def become_subreaper() -> bool:
    """Adopt the orphans of the phases (Linux prctl PR_SET_CHILD_SUBREAPER), so that their CPU time is counted.

    The extraction pool's fork server is never reaped by the phase process: it outlives it by a moment and, with
    its workers' time, would be lost to init. As a subreaper this process inherits it and reaps it (reap_cpu).
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False  # not Linux: cpu_seconds is then the phase process and the children it reaped


def reap_cpu(wait: float = 5.0) -> float:
    """user+sys seconds of the orphans this process adopted (a subreaper), reaped as they exit (within `wait` s)."""
    total, deadline = 0.0, time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break  # no child left
        if pid == 0:
            time.sleep(0.01)  # an orphan still exiting (it gets SIGKILL with its parent)
            continue
        total += usage.ru_utime + usage.ru_stime
    return total


def run_phase(
    name: str,
    home: Path,
    data: Path,
    sources: list[str],
    env: dict[str, str],
    *,
    prefect: bool,
    corpus_mb: float,
    profile: Path | None = None,
    stages: bool = False,
    dask: str | None = None,
    redact: bool = True,
    texts: Path | None = None,
) -> Phase:
    cmd = [sys.executable, str(BENCH / "phase.py"), "--home", str(home), "--data", str(data)]
    cmd += ["--sources", ",".join(sources)]
    if not redact:
        cmd.append("--no-redact")
    if prefect:
        cmd.append("--prefect")
    if dask is not None:
        cmd += ["--dask", dask]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    if stages:
        cmd.append("--stages")
    if texts is not None:
        cmd += ["--texts", str(texts)]
    os.sync()  # the corpus just written (or the last phase's files) must not be flushed on this phase's time
    load = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=PROJECT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        cpu = usage.ru_utime + usage.ru_stime + reap_cpu()
        sampler.done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"phase '{name}' failed (exit {proc.returncode}):\n{stderr[-4000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"phase '{name}' printed no result:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    got: dict[str, Any] = json.loads(lines[-1])
    return Phase(
        name=name,
        wall_seconds=round(wall, 3),
        pipeline_seconds=float(got["pipeline_seconds"]),
        import_seconds=float(got["import_seconds"]),
        call_seconds=float(got["call_seconds"]),
        mb_read=round(int(got["bytes_read"]) / MB, 2),
        peak_rss_mib=round(usage.ru_maxrss / 1024, 1),
        rss_self_mib=float(got["maxrss_self_mib"]),
        rss_children_mib=float(got["maxrss_children_mib"]),
        tree_rss_mib=round(sampler.tree_kib / 1024, 1),
        worker_rss_mib=round(max(sampler.single_kib / 1024, usage.ru_maxrss / 1024), 1),
        sessions_loaded=int(got["sessions_loaded"]),
        sessions_rejected=int(got["sessions_rejected"]),
        new_rejections=int(got["new_rejections"]),
        sources_deferred=int(got["sources_deferred"]),
        turns_loaded=int(got["turns_loaded"]),
        plan_counts=got["plan_counts"],
        corpus_mb=corpus_mb,
        stages=got.get("stages", {}),
        load_before=round(load, 2),
        cpu_seconds=round(cpu, 3),
    )


def ensure_corpus(
    home: Path, mb: float, seed: int, mix: dict[str, float], shape: str = "mixed"
) -> tuple[dict[str, Any], float | None]:
    """Reuse the corpus at `home` when it was generated with the same arguments, else generate it there.

    Returns (its bench-corpus.json, seconds spent generating or None when reused).
    """
    if (home / MANIFEST).exists():
        summary = load_summary(home)
        same = summary["mb"] == mb and summary["seed"] == seed and summary["mix"] == mix
        if not same or summary.get("shape", "mixed") != shape:
            raise SystemExit(f"{home} holds a corpus generated with other arguments; use another --keep folder")
        if not stale(summary):
            return summary, None
        print(f"{home}: written by another version of the generator; writing it again", file=sys.stderr)
        shutil.rmtree(home)
    if home.exists() and any(home.iterdir()):
        raise SystemExit(f"{home} exists and is not a generated corpus")
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        generate(home, mb, seed, mix, shape)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    return load_summary(home), round(time.monotonic() - started, 2)


def sources_of(summary: dict[str, Any]) -> list[str]:
    """The agents of the corpus; each needs its extractor on this branch."""
    from extractors.registry import registered

    known = {agent for agent in registered()}
    agents = sorted(summary["agents"])
    missing = [a for a in agents if a not in known]
    if missing:
        raise SystemExit(
            f"no extractor for {', '.join(missing)} on this branch (extractors/<agent>.py); "
            "merge main once it lands, or run with a --mix without it"
        )
    return agents


def corpus_mb_of(summary: dict[str, Any]) -> float:
    return round(sum(int(a["bytes_sources"]) for a in summary["agents"].values()) / MB, 2)


def append_one(home: Path, summary: dict[str, Any], seed: int) -> tuple[Path, int, int, str]:
    """Append an exchange to one mid-size Claude session (the big Codex shape: to its rollout). Returns (file, old
    size, old mtime_ns, note)."""
    import random

    from bench import claude_gen, codex_gen
    from bench.material import Material

    relative = summary.get("append_candidate") or ""
    if not relative:
        raise SystemExit("the corpus has no Claude session to append to (the append phase needs one)")
    path = home / str(relative)
    st = path.stat()
    gen = codex_gen if path.name.startswith("rollout-") else claude_gen
    added = gen.append_exchange(Material(seed), random.Random(f"{seed}/append"), path)
    os.utime(path)  # written now, as an agent's append is (the generator dates its files by the sessions' times)
    return path, st.st_size, st.st_mtime_ns, f"appended {added / 1000:.0f} KB to a {st.st_size / 1000:.0f} KB session"


# How long before the full load the session appended to was last written: the append phase is "the session a person
# is working in" (its file hot: modified within `hot_days`), as a live session is. A discovery stats hot files on
# every run; a cold file that grows is found by the periodic full check instead (docs/operations.md, "How changes
# are found"), and an append to one would measure a no-op.
HOT_AGE_SECONDS = 3600


@contextlib.contextmanager
def hot_candidate(home: Path, summary: dict[str, Any]) -> Iterator[None]:
    """The append candidate's mtime set to HOT_AGE_SECONDS ago for the phases, and put back as generated after."""
    relative = summary.get("append_candidate") or ""
    if not relative:
        yield
        return
    path = home / str(relative)
    generated = path.stat().st_mtime_ns
    recent = time.time_ns() - HOT_AGE_SECONDS * 10**9
    os.utime(path, ns=(recent, recent))
    try:
        yield
    finally:
        os.utime(path, ns=(generated, generated))


def restore(path: Path, size: int, mtime_ns: int) -> None:
    """Put the appended file back as generated, so that the corpus can be reused."""
    os.truncate(path, size)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def machine() -> dict[str, Any]:
    versions: dict[str, str] = {}
    for name in ("pyarrow", "duckdb", "polars", "prefect", "orjson"):
        try:
            from importlib.metadata import version

            versions[name] = version(name)
        except Exception:  # a missing package is reported as such
            versions[name] = "?"
    mem = ""
    with contextlib.suppress(OSError, StopIteration):
        mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT, capture_output=True, text=True)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "memory": mem.split(":", 1)[-1].strip(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "commit": commit.stdout.strip(),
    }


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def print_phases(phases: list[Phase], prefect: bool) -> None:
    head = f"{'phase':16s} {'wall s':>7s} {'pipeline s':>10s} {'MB read':>8s} {'MB/s':>6s} {'MB/s wall':>9s}"
    head += f" {'sessions/s':>10s} {'CPU s':>6s} {'peak RSS MiB':>12s} {'1 proc MiB':>10s} {'tree MiB':>8s}"
    if prefect:
        head += f" {'prefect s':>9s} {'server RSS':>10s}"
    print(head)
    for p in phases:
        row = (
            f"{p.name:16s} {p.wall_seconds:7.2f} {p.pipeline_seconds:10.3f} {p.mb_read:8.1f} "
            f"{fmt(p.mbps_pipeline()):>6s} {fmt(p.mbps_wall()):>9s} {fmt(p.sessions_per_s(), '.0f'):>10s} "
            f"{p.cpu_seconds:6.2f} {p.peak_rss_mib:12.0f} {p.worker_rss_mib:10.0f} {p.tree_rss_mib:8.0f}"
        )
        if prefect:
            row += f" {p.prefect_seconds:9.2f} {p.rss_children_mib:10.0f}"
        print(row + (f"   {p.note}" if p.note else ""))
    print(
        "MB/s = corpus MB (10^6 bytes of sources) / pipeline seconds; MB/s wall = corpus MB / wall seconds of the "
        "process (interpreter, imports" + (", Prefect server" if prefect else "") + " included); sessions/s = "
        "sessions loaded / pipeline seconds. Full load only.\nCPU s = user+sys of the phase's processes (workers, "
        "fork server and interpreter start included).\npeak RSS = ru_maxrss of the phase process (os.wait4); "
        "1 proc = largest VmRSS of any one process of its tree (workers included), tree = largest sum of them, "
        "both sampled every 0.1 s."
    )


def verdicts(phases: list[Phase], expected_duplicates: int = 0, shape: str = "mixed") -> dict[str, Any]:
    """The target checks. Rejections: none but the `duplicate`s the generator writes on purpose (OpenCode)."""
    by = {p.name: p for p in phases}
    full, same, grown = by.get("full load"), by.get("no-change"), by.get("append one")
    target_mbps = TARGET_FULL_MBPS.get(shape, 0.0)
    out: dict[str, Any] = {}
    if full:
        out["full_load_mbps_pipeline"] = {
            "value": round(full.mbps_pipeline() or 0, 1),
            "target": f">= {target_mbps}",
            "ok": (full.mbps_pipeline() or 0) >= target_mbps,
        }
        out["full_load_mbps_wall"] = {
            "value": round(full.mbps_wall() or 0, 1),
            "target": f">= {target_mbps}",
            "ok": (full.mbps_wall() or 0) >= target_mbps,
        }
        out["zero_rejections"] = {
            "value": full.sessions_rejected,
            "target": f"{expected_duplicates} (expected duplicates)" if expected_duplicates else "0",
            "ok": full.sessions_rejected == expected_duplicates and full.new_rejections == 0,
        }
    if same:
        out["no_change_pipeline_seconds"] = {
            "value": same.pipeline_seconds,
            "target": f"< {TARGET_NOCHANGE_SECONDS}",
            "ok": same.pipeline_seconds < TARGET_NOCHANGE_SECONDS,
        }
    if grown:
        out["append_one_pipeline_seconds"] = {
            "value": grown.pipeline_seconds,
            "target": f"< {TARGET_APPEND_SECONDS}",
            "ok": grown.pipeline_seconds < TARGET_APPEND_SECONDS,
        }
    peak = max(max(p.peak_rss_mib, p.worker_rss_mib) for p in phases)  # any one process, workers included
    out["peak_rss_mib"] = {"value": peak, "target": f"< {TARGET_RSS_MIB:.0f}", "ok": peak < TARGET_RSS_MIB}
    return out


def print_verdicts(checks: dict[str, Any]) -> None:
    for name, check in checks.items():
        print(f"  {'PASS' if check['ok'] else 'FAIL'}  {name}: {check['value']} (target {check['target']})")


def write_results(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    print(f"results: {path}")


def print_profile(path: Path, top: int = 30) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    rows = []
    whole = 0.0
    for (file, line, func), (_cc, _nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tt, ct, f"{Path(file).name}:{line}({func})"))
        if func == "run_etl" and file.endswith("flows/etl/flow.py"):
            whole = ct
    whole = whole or stats.total_tt  # type: ignore[attr-defined]
    print(f"\ncProfile of the full load: {whole:.1f} s in run_etl under the profiler (it slows Python code ~2x, not")
    print(f"native Parquet/DuckDB work: use --stages for wall-clock shares); top {top} functions by own time:")
    print(f"{'own s':>7s} {'own %':>6s} {'cum s':>7s}  function")
    for tt, ct, name in sorted(rows, reverse=True)[:top]:
        print(f"{tt:7.2f} {100 * tt / whole:6.1f} {ct:7.2f}  {name}")
    print(f"full stats: {path}  (python -m pstats {path})")


def print_stages(phase: Phase) -> None:
    """The wall-clock time of each step of the run (inclusive; indented steps are part of the one above)."""
    whole = phase.pipeline_seconds
    print(f"\nstages of the full load ({whole:.2f} s pipeline, wall clock, inclusive):")
    for _, _, label in STAGES:
        seconds, calls = phase.stages.get(label, [-1.0, 0])
        if seconds < 0:
            print(f"{'':>7s}   {'':>5s}    {label}: not found in this version")
            continue
        print(f"{seconds:7.2f} s {100 * seconds / whole:5.1f} %  {label} ({int(calls)} calls)")


def hostile_texts() -> list[str]:
    """Long runs of near-matches of the redaction rules (tests/test_redact.py has the same kinds)."""
    import base64
    import random

    return [
        "key=" * 50_000,
        "api_key = " + "a1" * 100_000,
        "://" + "u:" * 100_000 + "@" * 10,
        "-----BEGIN RSA PRIVATE KEY-----" + "A" * 500_000,
        "eyJ" + "a" * 200_000 + ".eyJ" + "b" * 200_000 + ".",
        "xoxb-" + "1" * 500_000,
        ("AKIA" + "A" * 15 + " ") * 20_000,
        "M" + "a" * 24 + "." * 500_000,
        "Authorization: Bearer " + "=" * 500_000,
        ("token" + " " * 19 + ":" + "'" * 5) * 20_000,
        ("password = 'x1" + "a" * 140 + "' ") * 5_000,
        # A base64 blob (an inlined image, a key store) in a text that also holds a URL with a password: the
        # url-password regex then scans the whole blob, where every position could begin a scheme.
        base64.b64encode(random.Random(7).randbytes(750_000)).decode() + " postgres://app:s3cret@db/x",
        # Every position could begin a Discord token (the only rule without a keyword).
        "".join(random.Random(5).choice("MNOabc123_-.") for _ in range(500_000)),
    ]


def time_redaction(
    home: Path, sources: list[str], env: dict[str, str], work: Path, corpus_mb: float, cpu_full: float
) -> dict[str, float]:
    """The redactor alone over every text of a full load (collected by one run in one process), CPU seconds,
    best of 3, a new Redactor each time (as each batch gets): what redaction costs per MB of text and its share of
    the full load's CPU time, free of the noise a shared machine puts into two full loads."""
    import pickle

    from transforms.redact import Redactor, ruleset

    path = work / "texts.pickle"
    data = work / "data-texts"
    shutil.rmtree(data, ignore_errors=True)
    one = {**env, "TRANSCRIPTS_WORKERS": "1"}  # every text passes through the phase process
    run_phase("full load", home, data, sources, one, prefect=False, corpus_mb=corpus_mb, texts=path)
    shutil.rmtree(data, ignore_errors=True)
    texts: list[str] = pickle.loads(path.read_bytes())
    path.unlink()
    text_mb = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / MB
    ruleset()  # compiled once per process, not part of the figure
    best = float("inf")
    for _ in range(3):
        redactor = Redactor(bytes(32))
        started = time.process_time()
        for text in texts:
            redactor.redact(text)
        best = min(best, time.process_time() - started)
    share = 100 * best / cpu_full if cpu_full else 0.0
    print(
        f"redaction alone: {len(texts)} texts, {text_mb:.1f} MB of text, in {best:.3f} s CPU (best of 3): "
        f"{1000 * best / text_mb:.2f} ms per MB of text ({text_mb / best:.0f} MB/s); {share:.1f} % of the full "
        f"load's {cpu_full:.2f} CPU s"
    )
    return {
        "texts": len(texts),
        "text_mb": round(text_mb, 2),
        "cpu_seconds": round(best, 4),
        "ms_per_text_mb": round(1000 * best / text_mb, 3),
        "share_of_full_load_cpu_percent": round(share, 2),
    }


def time_hostile() -> dict[str, float]:
    """Redaction time of the hostile texts: RE2 keeps it linear; this is the bound the tests do not assert."""
    from transforms.redact import Redactor, ruleset

    ruleset().compile_all()
    redactor = Redactor(bytes(32))
    worst, total_mb, total_s = float("inf"), 0.0, 0.0
    for text in hostile_texts():
        started = time.perf_counter()
        redactor.redact(text)
        seconds = time.perf_counter() - started
        mb = len(text.encode()) / MB
        total_mb, total_s, worst = total_mb + mb, total_s + seconds, min(worst, mb / seconds)
    print(f"redaction of hostile texts: {total_mb:.1f} MB in {total_s:.2f} s; slowest kind {worst:.1f} MB/s")
    return {"mb": round(total_mb, 2), "seconds": round(total_s, 3), "slowest_mbps": round(worst, 2)}


def compare_redaction(runs: list[list[Phase]], corpus_mb: float) -> dict[str, Any]:
    """What redaction costs a full load: best of the runs, in pipeline seconds and in CPU seconds of the phase.

    CPU time (user+sys of the phase's processes) is the steadier figure on a shared machine: other work delays a
    phase's wall clock, not the CPU it spends; the 1-minute load average at each phase start is printed beside.
    """
    redacted, raw = [run[0] for run in runs], [run[-1] for run in runs]
    best = {
        "redacted": {
            "pipeline_seconds": min(p.pipeline_seconds for p in redacted),
            "cpu_seconds": min(p.cpu_seconds for p in redacted),
        },
        "raw": {
            "pipeline_seconds": min(p.pipeline_seconds for p in raw),
            "cpu_seconds": min(p.cpu_seconds for p in raw),
        },
    }
    out: dict[str, Any] = {"best": best}
    for figure in ("pipeline_seconds", "cpu_seconds"):
        with_, without = best["redacted"][figure], best["raw"][figure]
        out[f"extra_{figure}_percent"] = round(100 * (with_ / without - 1), 1) if without else None
    r, w = best["redacted"], best["raw"]
    print(
        f"redaction: full load {r['pipeline_seconds']:.2f} s ({corpus_mb / r['pipeline_seconds']:.1f} MB/s) vs raw "
        f"{w['pipeline_seconds']:.2f} s ({corpus_mb / w['pipeline_seconds']:.1f} MB/s): "
        f"{out['extra_pipeline_seconds_percent']:+.1f} %; CPU {r['cpu_seconds']:.2f} s vs {w['cpu_seconds']:.2f} s: "
        f"{out['extra_cpu_seconds_percent']:+.1f} % (best of {len(runs)} each)"
    )
    for label, phases in (("redacted", redacted), ("raw", raw)):
        print(
            f"  {label:8s} pipeline s / CPU s (1-min load at start): "
            + ", ".join(f"{p.pipeline_seconds:.2f} / {p.cpu_seconds:.2f} ({p.load_before:.1f})" for p in phases)
        )
    return out


def _phases(
    args: argparse.Namespace,
    home: Path,
    work: Path,
    env: dict[str, str],
    sources: list[str],
    summary: dict[str, Any],
    corpus_mb: float,
) -> list[Phase]:
    """One repetition: full load, no-change, append one (and a raw full load with --compare-redaction)."""
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    phases = [run_phase("full load", home, data, sources, env, prefect=args.prefect, corpus_mb=corpus_mb)]
    phases.append(run_phase("no-change", home, data, sources, env, prefect=args.prefect, corpus_mb=corpus_mb))
    path, size, mtime_ns, note = append_one(home, summary, args.seed)
    try:
        phases.append(run_phase("append one", home, data, sources, env, prefect=args.prefect, corpus_mb=corpus_mb))
        phases[-1].note = note
    finally:
        restore(path, size, mtime_ns)
    if args.compare_redaction:  # the same full load, text stored raw: what redaction costs
        shutil.rmtree(data, ignore_errors=True)
        raw = run_phase("full load", home, data, sources, env, prefect=args.prefect, corpus_mb=corpus_mb, redact=False)
        raw.name, raw.note = "full load raw", "--no-redact"
        phases.append(raw)
    return phases


def _best(runs: list[list[Phase]]) -> list[Phase]:
    """Best of the repetitions per phase (other work on the machine only ever adds time); RSS: the largest seen."""
    phases = [min((run[i] for run in runs), key=lambda p: p.pipeline_seconds) for i in range(len(runs[0]))]
    for i, phase in enumerate(phases):
        phase.peak_rss_mib = max(run[i].peak_rss_mib for run in runs)
        phase.worker_rss_mib = max(run[i].worker_rss_mib for run in runs)
        phase.tree_rss_mib = max(run[i].tree_rss_mib for run in runs)
    return phases


def bench(args: argparse.Namespace, mix: dict[str, float], work: Path) -> dict[str, Any]:
    env = child_env(work)
    home = args.corpus or work / "home"
    if args.corpus:
        summary = load_summary(args.corpus)
        generated = None
    else:
        summary, generated = ensure_corpus(home, args.mb, args.seed, mix, args.shape)
    sources = sources_of(summary)
    corpus_mb = corpus_mb_of(summary)
    sessions = sum(a["sessions"] for a in summary["agents"].values())
    files = sum(a["files"] for a in summary["agents"].values())
    print(
        f"corpus ({summary.get('shape', 'mixed')}): {corpus_mb:.1f} MB, {sessions} sessions in {files} files "
        f"({', '.join(sources)}) at {home}"
        + (f"; generated in {generated:.1f} s" if generated is not None else "; reused")
    )
    runs: list[list[Phase]] = []
    with hot_candidate(home, summary):
        for _ in range(args.repeat):
            runs.append(_phases(args, home, work, env, sources, summary, corpus_mb))
    phases = _best(runs)
    print()
    if args.repeat > 1:
        print(f"best of {args.repeat} runs per phase (pipeline seconds of each run below); peak RSS: the largest")
    print_phases(phases, args.prefect)
    if args.repeat > 1:
        for i, phase in enumerate(phases):
            print(f"  {phase.name}: " + ", ".join(f"{run[i].pipeline_seconds:.2f}" for run in runs))
    redaction_cost = compare_redaction(runs, corpus_mb) if args.compare_redaction else None
    if redaction_cost is not None:
        cpu_full = redaction_cost["best"]["redacted"]["cpu_seconds"]
        redaction_cost["alone"] = time_redaction(home, sources, env, work, corpus_mb, cpu_full)
    hostile = time_hostile() if args.compare_redaction else None
    busy = max(p.load_before for run in runs for p in run)
    if busy > 0.5:
        print(f"note: the machine was busy (1-min load average up to {busy:.1f} at a phase start): timings inflated")
    duplicates = sum(int(a.get("expected_duplicates", 0)) for a in summary["agents"].values())
    checks = verdicts(phases, duplicates, str(summary.get("shape", "mixed")))
    print_verdicts(checks)
    results: dict[str, Any] = {
        "mode": "prefect flow" if args.prefect else "run_etl(as_tasks=False)",
        "machine": machine(),
        "corpus": {**summary, "path": str(home), "generated_seconds": generated},
        "phases": [{**asdict(p), "mbps_pipeline": p.mbps_pipeline(), "mbps_wall": p.mbps_wall()} for p in phases],
        "runs": [[asdict(p) for p in run] for run in runs],
        "targets": checks,
    }
    if hostile is not None:
        results["redaction_hostile"] = hostile
    if redaction_cost is not None:
        results["redaction_cost"] = redaction_cost
    if args.prefect:
        results["prefect_note"] = (
            "prefect_seconds = etl_flow call - RunReport.seconds: temporary API server start-up (the first phase "
            "also migrates a fresh PREFECT_HOME), flow and task runs"
        )
    if args.commands:
        from bench.commands import command_phases, print_commands

        results["commands"] = command_phases(
            home, work, sources, env, repeat=args.repeat, plain_full_seconds=phases[0].pipeline_seconds
        )
        print_commands(results["commands"])
    if args.dask:
        results["dask"] = dask_phases(args, home, summary, work, env, sources, corpus_mb)
    if args.stages:
        shutil.rmtree(work / "data-stages", ignore_errors=True)
        # Timers live in this one process: extraction in worker processes would neither be timed nor pickle them.
        one = {**env, "TRANSCRIPTS_WORKERS": "1"}
        timed = run_phase(
            "full load", home, work / "data-stages", sources, one, prefect=False, corpus_mb=corpus_mb, stages=True
        )
        print_stages(timed)
        results["stages"] = {"pipeline_seconds": timed.pipeline_seconds, "steps": timed.stages}
    if args.profile:
        prof = OUT / "full-load.prof"
        prof.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work / "data-profile", ignore_errors=True)
        one_process = {**env, "TRANSCRIPTS_WORKERS": "1"}  # cProfile sees this process only
        profiled = run_phase(
            "full load",
            home,
            work / "data-profile",
            sources,
            one_process,
            prefect=False,
            corpus_mb=corpus_mb,
            profile=prof,
        )
        print_profile(prof)
        results["profile"] = {"file": str(prof), "pipeline_seconds_under_profiler": profiled.pipeline_seconds}
    return results


def dask_phases(
    args: argparse.Namespace,
    home: Path,
    summary: dict[str, Any],
    work: Path,
    env: dict[str, str],
    sources: list[str],
    corpus_mb: float,
) -> dict[str, Any]:
    """The three phases again through the flow with the extraction on a Dask cluster (`--dask local`: a
    LocalCluster started and stopped inside each run, so its start-up is pipeline time)."""
    data = work / "data-dask"
    shutil.rmtree(data, ignore_errors=True)
    kw: dict[str, Any] = {"prefect": True, "corpus_mb": corpus_mb, "dask": args.dask}
    with hot_candidate(home, summary):
        phases = [run_phase("full load", home, data, sources, env, **kw)]
        phases.append(run_phase("no-change", home, data, sources, env, **kw))
        path, size, mtime_ns, note = append_one(home, summary, args.seed)
        try:
            phases.append(run_phase("append one", home, data, sources, env, **kw))
            phases[-1].note = note
        finally:
            restore(path, size, mtime_ns)
    shutil.rmtree(data, ignore_errors=True)
    print(f"\non Dask ({args.dask}), through the Prefect flow (etl_flow; one run each):")
    print_phases(phases, prefect=True)
    return {
        "address": args.dask,
        "phases": [{**asdict(p), "mbps_pipeline": p.mbps_pipeline(), "mbps_wall": p.mbps_wall()} for p in phases],
    }


def scale(args: argparse.Namespace, mix: dict[str, float], work: Path) -> dict[str, Any]:
    env = child_env(work)
    rows: list[dict[str, Any]] = []
    print("full load, then a no-change rerun, at each size (MB/s = corpus MB / pipeline seconds):")
    for mb in args.scale:
        home = work / f"home-{mb:g}mb"
        summary, generated = ensure_corpus(home, mb, args.seed, mix, args.shape)
        sources = sources_of(summary)
        corpus_mb = corpus_mb_of(summary)
        data = work / f"data-{mb:g}mb"
        shutil.rmtree(data, ignore_errors=True)
        phase = run_phase("full load", home, data, sources, env, prefect=False, corpus_mb=corpus_mb)
        same = run_phase("no-change", home, data, sources, env, prefect=False, corpus_mb=corpus_mb)
        warehouse_mb = (data / "warehouse.duckdb").stat().st_size / MB
        shutil.rmtree(data, ignore_errors=True)
        largest = max(a["largest_session_bytes"] for a in summary["agents"].values()) / MB
        rows.append(
            {
                "mb": mb,
                "corpus_mb": corpus_mb,
                "sessions": sum(a["sessions"] for a in summary["agents"].values()),
                "largest_session_mb": round(largest, 1),
                "generated_seconds": generated,
                "phase": {**asdict(phase), "mbps_pipeline": phase.mbps_pipeline(), "mbps_wall": phase.mbps_wall()},
                "no_change": asdict(same),
                "warehouse_mb": round(warehouse_mb, 1),
            }
        )
        print(
            f"{corpus_mb:8.1f} MB {rows[-1]['sessions']:6d} sessions  largest {largest:5.1f} MB  "
            f"pipeline {phase.pipeline_seconds:7.2f} s  {fmt(phase.mbps_pipeline()):>6s} MB/s  "
            f"{fmt(phase.sessions_per_s(), '.0f'):>5s} sessions/s  "
            f"wall {phase.wall_seconds:6.2f} s  peak RSS {phase.peak_rss_mib:6.0f} MiB "
            f"(1 proc {phase.worker_rss_mib:.0f}, tree {phase.tree_rss_mib:.0f})  "
            f"| no-change {same.pipeline_seconds:5.2f} s (warehouse {warehouse_mb:.0f} MB)",
            flush=True,
        )
    first, last = rows[0], rows[-1]
    growth = last["phase"]["worker_rss_mib"] / first["phase"]["worker_rss_mib"]
    size_ratio = last["corpus_mb"] / first["corpus_mb"]
    print(
        f"peak RSS x{growth:.2f} for corpus x{size_ratio:.1f}: {'flat' if growth < 1.25 else 'GROWS with corpus size'} "
        f"(largest session {first['largest_session_mb']} MB -> {last['largest_session_mb']} MB)"
    )
    return {
        "mode": "scale (full load and no-change rerun, run_etl(as_tasks=False))",
        "machine": machine(),
        "rows": rows,
        "rss_growth": round(growth, 3),
        "size_ratio": round(size_ratio, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="corpus size in MB (default 200)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--mix", help="byte shares, e.g. claude=0.7,codex=0.2,grok=0.1 (default claude=1; small shape: claude+grok)"
    )
    parser.add_argument(
        "--shape",
        choices=SHAPE_NAMES,
        default="mixed",
        help="mixed (a heavy user's sizes), small (thousands of small sessions with subagents in one project "
        "folder), big (one Claude session of --mb MB; with --mix codex=1 one Codex rollout)",
    )
    parser.add_argument("--dask", help="also run the phases on a Dask cluster (local, or a scheduler address)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--keep", type=Path, help="work folder to keep (corpus, data); reused by the next run")
    where.add_argument("--corpus", type=Path, help="an already generated corpus (a HOME from bench/generate.py)")
    parser.add_argument("--prefect", action="store_true", help="run the phases through the Prefect flow etl_flow")
    parser.add_argument(
        "--scale",
        type=lambda text: [float(x) for x in text.split(",")],
        nargs="?",
        const=[50.0, 100.0, 200.0],
        help="full load and no-change rerun at these sizes in MB (default 50,100,200): does RSS grow with them?",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run the phases N times; report the best of each")
    parser.add_argument("--stages", action="store_true", help="also time the steps of a full load (wall clock)")
    parser.add_argument(
        "--compare-redaction", action="store_true", help="also a full load with --no-redact: what redaction costs"
    )
    parser.add_argument(
        "--commands",
        action="store_true",
        help="also time whole commands (run, a no-op run, status) against a managed Prefect server",
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile a full load (bench/out/full-load.prof)")
    parser.add_argument("--out", type=Path, help="results JSON (default bench/out/results.json or results-scale.json)")
    args = parser.parse_args(argv)
    try:
        mix = parse_mix(args.mix) if args.mix else dict(SMALL_MIX if args.shape == "small" else {"claude": 1.0})
    except ValueError as exc:
        parser.error(str(exc))
    if args.scale and args.corpus:
        parser.error("--scale generates its corpora; use --keep to reuse them")
    become_subreaper()
    work = args.keep or Path(tempfile.mkdtemp(prefix="transcripts-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.scale:
            results = scale(args, mix, work)
            write_results(args.out or OUT / "results-scale.json", results)
        else:
            results = bench(args, mix, work)
            write_results(args.out or OUT / "results.json", results)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
