"""`transcripts watch` on its real path: the command in a subprocess on a temporary home and data dir, sessions
written as an agent writes them, the warehouse read read-only until the change shows. Every wait is bounded by
HANG (a hang, never a guess at how long a step takes); every watch is stopped in a `finally`."""

from __future__ import annotations

import contextlib
import os
import plistlib
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.generate import generate
from flows.service import units
from sinks import ledger
from sinks.lock import writer_lock
from tests.corpus import PROJECT, S1, S2, claude_exchange, codex_rollout, small_home, write_session

TRANSCRIPTS = Path(sys.executable).parent / "transcripts"
HANG = 180.0
NEW = "eeeeeeee-0000-4000-8000-000000000005"
THREAD = "019a0000-0000-7000-8000-0000000000c1"

pytestmark = pytest.mark.skipif(not TRANSCRIPTS.exists(), reason=f"no {TRANSCRIPTS}: `uv sync` installs it")


def until(what: Callable[[], Any], why: str, seconds: float = HANG) -> Any:
    """Poll `what` until it is truthy (and return it); fail after `seconds` saying what never happened."""
    deadline = time.monotonic() + seconds
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"never happened within {seconds:g} s: {why}")
        time.sleep(0.1)


def query(data: Path, sql: str) -> list[tuple[Any, ...]] | None:
    """`sql` on the warehouse opened read-only, as a person's shell would; None while there is none (or while a
    load swaps it in)."""
    try:
        con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    except duckdb.Error:
        return None
    try:
        return con.sql(sql).fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()


def turns_of(data: Path, session: str) -> int:
    rows = query(data, f"SELECT count(*) FROM turns WHERE session_id = 'claude-{session}'")
    return int(rows[0][0]) if rows else 0


def watch_runs(data: Path) -> list[dict[str, Any]]:
    return [r for r in ledger.runs(data) if r.get("flow") == "watch"]


CHECKED = "event=watch_checked "  # logged once a check ends (the first at start: the catch-up), whatever it loaded


def watch_log(state: Path) -> str:
    path = state / "watch.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


@dataclass
class Watching:
    proc: subprocess.Popen[str]
    home: Path
    data: Path
    state: Path
    checks_before: int = 0  # checks an earlier watch with the same state dir logged

    def checks(self) -> int:
        return self.log().count(CHECKED)

    def log(self) -> str:
        return watch_log(self.state)

    def stop(self, signum: int = signal.SIGTERM, *, release: Path | None = None) -> tuple[int, str, str]:
        """Signal the watch and wait for it to end. `release`: the flag of a pause point (sinks/failpoints.py), made
        a moment after the signal: a pause point holds the threads that reached it (a commit's merge threads) as no
        real work holds them, and they would otherwise keep the process waiting for them (PAUSE_WAIT_SECONDS)."""
        self.proc.send_signal(signum)
        if release is not None:
            time.sleep(0.5)
            release.touch()
        try:
            out, err = self.proc.communicate(timeout=HANG)
        except subprocess.TimeoutExpired as hung:
            said = f"stdout: {hung.output!r}\nstderr: {hung.stderr!r}\nlog: {self.log()[-4000:]}"
            raise AssertionError(
                f"the watch did not end {HANG:g} s after {signal.Signals(signum).name}:\n{said}"
            ) from None
        return self.proc.returncode, out, err

    def loaded_once(self) -> None:
        """This watch made its catch-up check (so it is serving, its signal handlers in place), and a watch's load
        is in the corpus. An earlier watch's `ok` load alone said nothing of this one: a SIGTERM sent then could find
        it still starting, and end it as the signal's default does (-15, seen once in CI on 3.13)."""
        until(
            lambda: self.checks() > self.checks_before and any(r["outcome"] == "ok" for r in watch_runs(self.data)),
            "the catch-up load at start",
        )


@contextlib.contextmanager
def watching(tmp_path: Path, home: Path, *args: str, stdout: int = subprocess.PIPE, **extra: str) -> Iterator[Watching]:
    """`transcripts watch` on `home` into tmp_path/data, stopped (SIGTERM, then SIGKILL) whatever happens."""
    data, state = tmp_path / "data", tmp_path / "state"
    env = {
        **os.environ,
        "TRANSCRIPTS_STATE_DIR": str(state),
        "TRANSCRIPTS_WATCH_QUIET_SECONDS": "0.3",
        **extra,
    }
    command = [str(TRANSCRIPTS), "watch", "--home", str(home), "--data-dir", str(data), "--source", "claude,codex"]
    before = watch_log(state).count(CHECKED)
    proc = subprocess.Popen(
        [*command, *args], env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, text=True
    )
    try:
        yield Watching(proc, home, data, state, checks_before=before)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def test_an_appended_exchange_is_loaded_while_watching_and_status_shows_the_watch_loads(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home) as w:
        w.loaded_once()
        before = until(lambda: turns_of(w.data, S1), "the first session in the warehouse")
        write_session(home, S1, claude_exchange(S1, 1, start_minute=30, text="appended"), append=True)
        until(lambda: turns_of(w.data, S1) == before + 2, "the appended exchange's two turns")
        rows = query(w.data, f"SELECT text FROM turns WHERE session_id = 'claude-{S1}' AND text LIKE 'appended%'")
        assert rows == [("appended 30",)]
        status = subprocess.run(
            [str(TRANSCRIPTS), "status", "--data-dir", str(w.data)], capture_output=True, text=True, timeout=HANG
        )
        assert status.returncode == 0, status.stderr
        assert sum(" watch " in line and " ok " in line for line in status.stdout.splitlines()) >= 2
        code, out, err = w.stop()
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "Stopped watching (SIGTERM)."
    assert err == "", "nothing but errors on stderr, and there were none"
    assert "event=plan" in w.log(), "each load's records go to watch.log"
    assert not (w.data / "logs").exists(), "not to a run log per load"
    assert (w.state / "watch.log").stat().st_mode & 0o777 == 0o600


def test_an_append_to_a_session_untouched_for_a_month_is_loaded_by_its_event(tmp_path: Path) -> None:
    """A cold session (last written 30 days ago) is taken as recorded by an incremental discovery, without a stat
    (docs/operations.md "How changes are found"); its file event hands its path to the discovery, which stats it."""
    home = small_home(tmp_path / "home")
    month_ago = time.time() - 30 * 86400
    for path in home.rglob("*"):
        os.utime(path, (month_ago, month_ago))
    with watching(tmp_path, home) as w:
        w.loaded_once()
        assert (w.data / "cache" / "listing.json").exists(), "the catch-up load saved what it listed"
        before = until(lambda: turns_of(w.data, S1), "the first session in the warehouse")
        write_session(home, S1, claude_exchange(S1, 1, start_minute=40, text="late"), append=True)
        until(lambda: turns_of(w.data, S1) == before + 2, "the cold session's appended exchange")
        code, _out, err = w.stop()
    assert code == 0, err


def test_on_a_terminal_each_load_is_one_line_saying_what_it_loaded(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    screen, terminal = pty.openpty()
    seen: list[str] = []

    def shown(text: str) -> bool:
        while select.select([screen], [], [], 0.1)[0]:
            try:
                chunk = os.read(screen, 65536)
            except OSError:  # the watch has exited
                break
            if not chunk:
                break
            seen.append(chunk.decode("utf-8", "replace"))
        return text in "".join(seen)

    try:
        with watching(tmp_path, home, stdout=terminal) as w:
            until(lambda: shown(f"into {w.data}. Log: {w.state / 'watch.log'}. Ctrl-C stops."), "the start line")
            until(lambda: shown(" loaded (check) claude 2 sessions, 1 rejected · 10 turns · "), "the catch-up line")
            write_session(home, S1, claude_exchange(S1, 1, start_minute=20), append=True)
            # the session is loaded again whole, as in any run: its 6 turns and the 2 new ones
            until(lambda: shown(" loaded claude 1 session · 8 turns · "), "the line of the append's load")
            code, _out, err = w.stop()
            until(lambda: shown("Stopped watching (SIGTERM)."), "the stop line")
    finally:
        os.close(screen)
        os.close(terminal)
    assert code == 0, err
    lines = [line for line in "".join(seen).splitlines() if line.strip()]
    assert len(lines) == 4, lines  # start, two loads, stop: nothing else on the terminal
    assert re.fullmatch(r"\d\d:\d\d:\d\d loaded claude 1 session · 8 turns · \d+\.\ds", lines[2].strip())


def test_a_burst_of_fifty_appends_is_loaded_in_a_few_loads(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home, TRANSCRIPTS_WATCH_QUIET_SECONDS="1.0") as w:  # the default quiet period
        w.loaded_once()
        before = until(lambda: turns_of(w.data, S2), "the second session in the warehouse")
        loads_before = len(watch_runs(w.data))
        for n in range(50):  # an agent streaming its answer: a write every 20 ms
            write_session(home, S2, claude_exchange(S2, 1, start_minute=100 + n), append=True)
            time.sleep(0.02)
        until(lambda: turns_of(w.data, S2) == before + 100, "all fifty exchanges loaded")
        loads = [r for r in watch_runs(w.data)[: len(watch_runs(w.data)) - loads_before]]
        assert all(r["outcome"] == "ok" for r in loads)
        assert 1 <= len(loads) <= 5, f"50 writes coalesced into a few loads, got {len(loads)}"


def test_a_root_created_after_the_watch_started_is_watched_and_loaded(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    assert not (home / ".codex").exists()
    with watching(tmp_path, home) as w:
        w.loaded_once()
        codex_rollout(home, THREAD, 2)  # creates ~/.codex/sessions/2026/05/11/rollout-...
        until(lambda: query(w.data, "SELECT count(*) FROM sessions WHERE agent = 'codex'") == [(1,)], "codex loaded")
        # and it is watched from then on: a second rollout shows up as well
        (home / ".codex" / "sessions" / "2026" / "05" / "12").mkdir(parents=True)
        codex_rollout(home, THREAD.replace("c1", "c2"), 1, day="2026-05-12")
        until(lambda: query(w.data, "SELECT count(*) FROM sessions WHERE agent = 'codex'") == [(2,)], "second rollout")
        assert w.proc.poll() is None


def test_a_root_removed_while_watched_does_not_stop_the_watch_and_is_followed_when_it_returns(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    root = home / ".claude" / "projects"
    with watching(tmp_path, home) as w:
        w.loaded_once()
        shutil.rmtree(root)
        until(lambda: "event=watch_root_gone" in w.log(), "the watch noticing the root is gone")
        assert w.proc.poll() is None, "the watch goes on without the root"
        # the sessions loaded before stay (the corpus is the archive), marked gone only by a load of that agent
        assert turns_of(w.data, S1) > 0
        write_session(home, NEW, claude_exchange(NEW, 2))  # the root made again, a new session in it
        until(lambda: turns_of(w.data, NEW) == 4, "the session in the root made again")
        write_session(home, NEW, claude_exchange(NEW, 1, start_minute=9), append=True)
        until(lambda: turns_of(w.data, NEW) == 6, "an append in the root made again: the new folder is watched")
        code, _out, err = w.stop()
    assert code == 0, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_watch_with_exit_0_and_the_lock_free(tmp_path: Path, signum: int) -> None:
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home) as w:
        w.loaded_once()
        code, out, err = w.stop(signum)
        assert code == 0, err
        assert out.strip().splitlines()[-1] == f"Stopped watching ({signal.Signals(signum).name})."
        assert "Traceback" not in err, err
        assert not ledger.lock_held(w.data)
        assert all(r["outcome"] == "ok" for r in watch_runs(w.data))


def test_a_signal_after_the_load_is_recorded_abandons_nothing(tmp_path: Path) -> None:
    """Signalled as the load returns, its outcome already in the ledger: the watch stops with the plain line and the
    load stays `ok` (nothing of it was abandoned)."""
    home = small_home(tmp_path / "home")
    flag = tmp_path / "go"
    with watching(tmp_path, home, TRANSCRIPTS_PAUSEPOINT=f"recorded:{flag}") as w:
        until(lambda: Path(f"{flag}.reached").exists(), "the load held after its end is recorded")
        code, out, err = w.stop(signal.SIGTERM)
    assert code == 0, err
    assert out.strip().splitlines() == ["Stopped watching (SIGTERM)."], out
    assert err == ""
    [load] = watch_runs(w.data)
    assert load["outcome"] == "ok", load
    assert query(w.data, "SELECT count(*) FROM sessions") == [(2,)]


def test_a_change_no_event_announces_is_found_by_the_periodic_check(tmp_path: Path) -> None:
    """A root that is the home itself is not watched with events (a kernel watch per folder of the home): a
    session written there is found by the light check, here every 3 s (check_minutes 0.05)."""
    home = tmp_path / "home"
    project = home / PROJECT
    project.mkdir(parents=True)
    (project / f"{S1}.jsonl").write_text("".join(line + "\n" for line in claude_exchange(S1, 1)))
    with watching(tmp_path, home, "--root", f"claude={home}", TRANSCRIPTS_WATCH_CHECK_MINUTES="0.05") as w:
        w.loaded_once()
        assert "event=watch_roots" not in w.log(), "the home is not watched"
        (project / f"{S2}.jsonl").write_text("".join(line + "\n" for line in claude_exchange(S2, 2)))
        until(lambda: turns_of(w.data, S2) == 4, "the session found by a check")
        code, _out, err = w.stop()
    assert code == 0, err


def test_a_signal_during_a_load_abandons_it_whole_and_the_next_watch_loads_it(tmp_path: Path) -> None:
    """SIGTERM once the catch-up load of a 20 MB corpus has begun (seconds of work): the load is abandoned, the
    ledger says interrupted, the lock is free; the next watch loads everything. How far the load got first depends
    on the machine (on a loaded one the signal may find it loading the warehouse): what is in the corpus at each
    stage is the next test's, which holds the load at each stage. Python may swallow the signal's KeyboardInterrupt
    (raised in a finalizer, it is ignored): the load then ends well, and the watch says no more than that it stopped,
    the ledger `ok` (seen once in CI on 3.13); what it says and what the ledger says always agree."""
    home = tmp_path / "home"
    home.mkdir()
    generate(home, 20.0, seed=3, mix={"claude": 1.0})
    with watching(tmp_path, home) as w:
        # Begun: logged, and its run recorded (the log line comes a moment before the ledger's started record).
        until(lambda: "event=watch_load " in w.log() and watch_runs(w.data) != [], "the catch-up load beginning")
        code, out, err = w.stop()
    assert code == 0, err
    said = out.strip().splitlines()[-1]
    [load] = watch_runs(w.data)
    if load["outcome"] == "interrupted":
        assert said == (
            "Stopped watching (SIGTERM); the load in progress was abandoned (nothing of it is lost or half-written; "
            "the next start finishes it)."
        ), said
        assert "Traceback" not in err, err
    else:
        assert (load["outcome"], said) == ("ok", "Stopped watching (SIGTERM)."), (load, said, err)
    assert not ledger.lock_held(w.data)
    with watching(tmp_path, home) as again:
        again.loaded_once()
        rows = query(again.data, "SELECT count(*) FROM sessions")
        assert rows and rows[0][0] > 100
        code, _out, err = again.stop()
    assert code == 0, err


@pytest.fixture(scope="module")
def home20(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 20 MB Claude home: a catch-up load of several batches, read by the extraction pool's workers."""
    home = tmp_path_factory.mktemp("home20")
    generate(home, 20.0, seed=3, mix={"claude": 1.0})
    return home


ABANDONED = "the load in progress was abandoned (nothing of it is lost or half-written; the next start finishes it)."


@pytest.mark.parametrize(
    ("point", "signum"),
    [
        ("batch", signal.SIGTERM),  # in the pool's workers, reading: the watch waits on their results
        ("extract", signal.SIGINT),  # between two batches, in the watch's process
        ("parquet", signal.SIGTERM),  # committing: the new Parquet version half written
        ("warehouse", signal.SIGINT),  # the Parquet version swapped in; the new warehouse built, not swapped in
    ],
)
def test_a_signal_at_any_stage_of_a_load_ends_it_interrupted_with_one_line_and_the_next_watch_loads_it(
    tmp_path: Path, home20: Path, point: str, signum: int
) -> None:
    """The load is held at a failpoint (TRANSCRIPTS_PAUSEPOINT) and signalled there: whatever exception the signal
    becomes on its way out (DuckDB, the process pool), the ledger says interrupted, the terminal gets the one
    line and nothing on stderr (no traceback of the watch, the fork server or a worker), the lock is free. Up to
    the commit nothing of the load is in the corpus; stopped at the warehouse, its Parquet version is in and the
    warehouse is not: the next watch brings it up to date."""
    flag = tmp_path / "go"
    with watching(tmp_path, home20, TRANSCRIPTS_PAUSEPOINT=f"{point}:{flag}") as w:
        until(lambda: Path(f"{flag}.reached").exists(), f"the load held at {point}")
        code, out, err = w.stop(signum, release=flag)
    name = signal.Signals(signum).name
    assert code == 0, err
    assert err == ""
    assert out.strip().splitlines() == [f"Stopped watching ({name}); {ABANDONED}"]
    [load] = watch_runs(w.data)
    assert load["outcome"] == "interrupted", load
    assert name in load["error"]
    assert not ledger.lock_held(w.data)
    assert not (w.data / "warehouse.duckdb").exists()
    assert (w.data / "parquet").exists() == (point == "warehouse")
    with watching(tmp_path, home20) as again:
        again.loaded_once()
        rows = query(again.data, "SELECT count(*) FROM sessions")
        assert rows and rows[0][0] > 100
        code, _out, err = again.stop()
    assert code == 0, err


def test_a_live_tail_is_deferred_then_loaded_when_its_line_ends(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home) as w:
        w.loaded_once()
        before = turns_of(w.data, S1)
        first, second = claude_exchange(S1, 1, start_minute=40, text="live")
        path = home / ".claude" / "projects" / PROJECT / f"{S1}.jsonl"
        with path.open("a", encoding="utf-8") as handle:  # the agent is in the middle of writing a line
            handle.write(first + "\n" + second[:25])
        deferred = until(
            lambda: [r for r in watch_runs(w.data) if (r.get("counts") or {}).get("sources_deferred")],
            "a load that deferred the session being written",
        )
        assert deferred[0]["outcome"] == "ok"
        assert turns_of(w.data, S1) == before, "nothing of a session being written is loaded"
        with path.open("a", encoding="utf-8") as handle:  # the line ends
            handle.write(second[25:] + "\n")
        until(lambda: turns_of(w.data, S1) == before + 2, "the session completed once its line ended")


def test_the_watch_waits_while_another_writer_holds_the_lock_and_loads_after(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home) as w:
        w.loaded_once()
        before = turns_of(w.data, S1)
        with writer_lock(w.data, 0):  # a nightly run writing
            runs = len(watch_runs(w.data))
            write_session(home, S1, claude_exchange(S1, 1, start_minute=50), append=True)
            until(lambda: "event=watch_waiting" in w.log(), "the watch seeing the lock held")
            assert turns_of(w.data, S1) == before
            assert len(watch_runs(w.data)) == runs, "no load started while the lock was held"
        until(lambda: turns_of(w.data, S1) == before + 2, "the pending change loaded once the lock was free")
        assert all(r["outcome"] == "ok" for r in watch_runs(w.data))


def test_a_nightly_run_during_a_watch_waits_for_the_lock_and_both_succeed(tmp_path: Path) -> None:
    """Both want to write at once (the test holds the lock until both wait for it): one writes, the other waits,
    neither fails, and the corpus has every change."""
    home = small_home(tmp_path / "home")
    with watching(tmp_path, home) as w:
        w.loaded_once()
        before = turns_of(w.data, S1)
        with writer_lock(w.data, 0):
            write_session(home, S1, claude_exchange(S1, 1, start_minute=55), append=True)
            write_session(home, NEW, claude_exchange(NEW, 1))
            until(lambda: "event=watch_waiting" in w.log(), "the watch waiting for the lock")
            command = ["run", "--home", str(home), "--data-dir", str(w.data), "--source", "claude,codex"]
            nightly = subprocess.Popen(
                [str(TRANSCRIPTS), *command, "--wait", str(int(HANG))],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                until(
                    lambda: any(r.get("flow") == "etl" for r in ledger.runs(w.data)) or nightly.poll() is not None,
                    "the nightly run started (it records itself, then waits for the lock)",
                )
            except BaseException:
                nightly.kill()
                nightly.communicate()
                raise
        try:
            out, err = nightly.communicate(timeout=HANG * 2)
        finally:
            if nightly.poll() is None:
                nightly.kill()
                nightly.communicate()
        assert nightly.returncode == 0, out + err
        until(lambda: turns_of(w.data, S1) == before + 2 and turns_of(w.data, NEW) == 2, "both changes loaded")
        outcomes = [(r["flow"], r["outcome"]) for r in ledger.runs(w.data)]
        assert ("etl", "ok") in outcomes or ("etl", "noop") in outcomes, outcomes
        assert all(o in ("ok", "noop") for _f, o in outcomes), outcomes
        assert w.proc.poll() is None, "the watch goes on after the nightly run"
        write_session(home, NEW, claude_exchange(NEW, 1, start_minute=5), append=True)
        until(lambda: turns_of(w.data, NEW) == 4, "the watch loading again after the nightly run")


def test_a_bad_watch_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "TRANSCRIPTS_WATCH_QUIET_SECONDS": "soon", "TRANSCRIPTS_STATE_DIR": str(tmp_path / "s")}
    proc = subprocess.run(
        [str(TRANSCRIPTS), "watch", "--home", str(tmp_path), "--data-dir", str(tmp_path / "data")],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: watch quiet_seconds (TRANSCRIPTS_WATCH_QUIET_SECONDS (environment)) must be a number of at least "
        "0.05, got 'soon'"
    )


# --- the user service ---------------------------------------------------------------------------------------------


def _cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), TRANSCRIPTS_STATE_DIR=str(tmp_path / "state"), **extra)
    command = [str(TRANSCRIPTS), *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG)


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing in CI (apt package systemd)")
        pytest.skip("systemd-analyze is not installed (apt package systemd)")
    return subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=120)


def test_the_printed_systemd_unit_runs_watch_with_the_options_and_passes_verify(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    data = tmp_path / "data dir"
    proc = _cli(tmp_path, "watch", "install", "--print", "--home", str(tmp_path / "home"), "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    exe = str(TRANSCRIPTS.resolve())
    assert f'ExecStart="{exe}" "watch" "--data-dir" "{data}" "--home" "{tmp_path / "home"}"' in text
    assert "Description=transcripts: load agent transcripts as they are written (watch mode)" in text
    assert "Restart=on-failure" in text and "Type=simple" in text and "WantedBy=default.target" in text
    assert f'Environment="TRANSCRIPTS_STATE_DIR={tmp_path / "state"}"' in text
    assert not (tmp_path / "config" / "systemd").exists(), "--print writes nothing"
    unit = tmp_path / units.WATCH.unit
    unit.write_text(text)
    done = _verify(unit)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_printed_launchd_agent_keeps_watch_alive(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "watch", "install", "--print", "--manager", "launchd", "--data-dir", str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    agent = plistlib.loads(proc.stdout.encode())
    assert agent["Label"] == "io.github.transcripts.watch"
    assert agent["ProgramArguments"] == [str(TRANSCRIPTS.resolve()), "watch", "--data-dir", str(tmp_path / "d")]
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == str(tmp_path / "state" / "watch.log")
    assert agent["EnvironmentVariables"]["TRANSCRIPTS_STATE_DIR"] == str(tmp_path / "state")


@pytest.mark.skipif(sys.platform == "darwin", reason="the launchd agent is written on macOS")
def test_install_writes_the_watch_unit_beside_the_schedule_one_and_remove_removes_it(tmp_path: Path) -> None:
    """No service manager answers (TRANSCRIPTS_SYSTEMCTL names none: the fault injected), so nothing is enabled
    for real: the unit is written and the commands to run are printed."""
    no_manager = {"TRANSCRIPTS_SYSTEMCTL": str(tmp_path / "no-systemctl")}
    proc = _cli(tmp_path, "watch", "install", "--data-dir", str(tmp_path / "d"), **no_manager)
    assert proc.returncode == 0, proc.stderr
    unit = tmp_path / "config" / "systemd" / "user" / "transcripts-watch.service"
    assert f'"watch" "--data-dir" "{tmp_path / "d"}"' in unit.read_text()
    assert unit.stat().st_mode & 0o077 == 0
    assert not (unit.parent / units.SCHEDULE.unit).exists()
    assert "systemctl --user enable --now transcripts-watch.service" in proc.stdout
    assert "loginctl enable-linger" in proc.stdout
    removed = _cli(tmp_path, "watch", "remove", **no_manager)
    assert removed.returncode == 0, removed.stderr
    assert f"Removed {unit}" in removed.stdout and not unit.exists()
    assert "systemctl --user disable --now transcripts-watch.service" in removed.stdout
