"""One contract for every registered agent: each check below runs once per agent of `extractors.registry.registered()`,
against that agent's own hand-written sources in `tests/agents/<agent>/` and the facts in its `contract.toml`
(tests/agents/README.md). Registering an agent puts it under every check; one without a fixture folder fails
`test_every_registered_agent_has_a_fixture_folder` saying what to add.

The per-agent knowledge lives in the data files, not here: no check branches on an agent's name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
import tomllib
import tracemalloc
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from extractors.bounded import Limits
from extractors.errors import RejectCode
from extractors.model import Agent, Deferred, Disposition, Loaded, Outcome, Rejected, Role, Session, Source
from extractors.registry import detect_format, read_source, read_streaming, registered, spec
from tests.support import SETTLED, SHARED_DIRS, canonical, shared_fixtures

AGENTS_DIR = Path(__file__).resolve().parent / "agents"
AGENTS = sorted(registered())
# A time long before any fixture's: the files' mtimes are set to it, so a time read from the file system shows.
OLD_MTIME_NS = 978_307_200 * 10**9  # 2001-01-01T00:00:00Z


def by_agent(test: Any) -> Any:
    """Parametrise a check over every registered agent (ids are the agent values: `-k codex`)."""
    return pytest.mark.parametrize("agent", AGENTS, ids=list(AGENTS))(test)


def contract(agent: Agent) -> dict[str, Any]:
    path = AGENTS_DIR / agent / "contract.toml"
    assert path.is_file(), f"no {path}: see tests/agents/README.md"
    with path.open("rb") as f:
        return tomllib.load(f)


def module(agent: Agent) -> ModuleType:
    return cast(ModuleType, registered()[agent])


# --- the fixture home, copied (and built) into a temporary folder ---------------------------------------------------


def materialise(agent: Agent, where: Path, *, patch: dict[str, Any] | None = None) -> Path:
    """Copy the agent's fixture home under `where`, build its SQLite databases from their scripts, and apply `patch`
    (`file` relative to the agent folder: a file of the home or a build script; `edit`: see `_patched`). Returns the
    home."""
    facts = contract(agent)
    folder = AGENTS_DIR / agent
    home = where / "home"
    shutil.copytree(folder / facts["home"], home)
    patched = _patched(folder, patch)
    for build in facts.get("build", []):
        script = patched.get(build["script"], (folder / build["script"]).read_text(encoding="utf-8"))
        schema = (folder / build["schema"]).read_text(encoding="utf-8") if "schema" in build else ""
        build_database(home / build["database"], schema + script)
    for rel, text in patched.items():
        if rel.startswith(facts["home"] + "/"):
            (home / rel.removeprefix(facts["home"] + "/")).write_text(text, encoding="utf-8")
    for path in files_under(home):
        os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return home


def _patched(folder: Path, patch: dict[str, Any] | None) -> dict[str, str]:
    """{file: its text after the patch's edits}: each edit replaces the first occurrence of `old` by `new` (where
    `new` says `{fill}`, the patch's `fill` repeated `times` times)."""
    if patch is None:
        return {}
    text = (folder / patch["file"]).read_text(encoding="utf-8")
    fill = patch.get("fill", "") * patch.get("times", 0)
    for edit in patch["edit"]:
        assert edit["old"] in text, f"{edit['old']!r} is not in {patch['file']}"
        text = text.replace(edit["old"], edit["new"].replace("{fill}", fill) if fill else edit["new"], 1)
    return {patch["file"]: text}


def build_database(path: Path, script: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(script)
    finally:
        conn.close()


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def roots(agent: Agent, home: Path) -> list[Path]:
    """`default_roots(home, {})`, then the contract's explicit roots (an export given by path)."""
    explicit = [home / rel for rel in contract(agent).get("explicit_roots", [])]
    return [*module(agent).default_roots(home, {}), *explicit]


def discovered(agent: Agent, home: Path) -> list[Source]:
    return [source for root in roots(agent, home) if root.exists() for source in module(agent).discover(root)]


def sample(agent: Agent, home: Path) -> Source:
    """The discovered source of the contract's sample file."""
    want = home / contract(agent)["sample"]
    found = [s for s in discovered(agent, home) if Path(s.path) == want]
    assert len(found) == 1, f"{want} is not discovered once: {[s.path for s in discovered(agent, home)]}"
    return found[0]


def read(agent: Agent, home: Path, limits: Limits = SETTLED) -> list[Outcome]:
    return list(read_source(sample(agent, home), limits))


def loaded(outcomes: list[Outcome]) -> list[Session]:
    return [o.session for o in outcomes if isinstance(o, Loaded)]


def rejected(outcomes: list[Outcome]) -> list[Rejected]:
    return [o for o in outcomes if isinstance(o, Rejected)]


def good_sessions(agent: Agent, where: Path) -> list[Session]:
    outcomes = read(agent, materialise(agent, where))
    assert all(isinstance(o, Loaded) for o in outcomes), outcomes
    return loaded(outcomes)


def time(value: str) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in files_under(root)
    }


# --- the checks ------------------------------------------------------------------------------------------------------


def test_every_registered_agent_has_a_fixture_folder() -> None:
    missing = [a for a in AGENTS if not (AGENTS_DIR / a / "contract.toml").is_file()]
    assert not missing, (
        f"registered agents without tests/agents/<agent>/contract.toml: {missing}. Add the folder with small "
        "hand-written sources in the agent's on-disk layout and a contract.toml (tests/agents/README.md)"
    )
    strays = sorted(p.name for p in AGENTS_DIR.iterdir() if p.is_dir() and p.name not in set(AGENTS))
    assert not strays, f"fixture folders of no registered agent (a typo?): {strays}"


@by_agent
def test_good_sample_loads_the_contract_sessions_with_turns_in_source_order(agent: Agent, tmp_path: Path) -> None:
    sessions = good_sessions(agent, tmp_path)
    expected = contract(agent)["sessions"]
    assert [s.session_id for s in sessions] == [e["session_id"] for e in expected]
    for session, want in zip(sessions, expected, strict=True):
        assert [(t.role.value, t.text) for t in session.turns] == [(r, text) for r, _, text in want["turns"]]
        assert [c.call_id for c in session.tool_calls] == want["tool_calls"]
        # indexes are the records' positions in the source, strictly increasing in source order
        indexes = [t.index for t in session.turns]
        assert indexes == want["turn_indexes"]
        assert indexes == sorted(set(indexes)), f"turn indexes not strictly increasing: {indexes}"
        calls = [c.turn_index for c in session.tool_calls]
        assert calls == want["tool_turns"]
        assert calls == sorted(calls), f"tool calls out of source order: {calls}"


@by_agent
def test_truncated_sample_is_rejected_whole_with_a_stable_code(agent: Agent, tmp_path: Path) -> None:
    facts = contract(agent)["truncated"]
    good = [canonical(s) for s in good_sessions(agent, tmp_path / "good")]
    home = materialise(agent, tmp_path / "cut")
    path = home / contract(agent)["sample"]
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * facts["fraction"])])
    outcomes = read(agent, home)
    codes = [r.code.value for r in rejected(outcomes)]
    assert codes == [facts["code"]], outcomes
    kept = loaded(outcomes)
    # Only sessions complete before the cut may load (a multi-session export), each exactly as from the whole file.
    assert len(kept) == facts["loaded"]
    assert all(canonical(s) in good for s in kept)


@by_agent
def test_corrupt_sample_is_rejected_with_a_stable_code(agent: Agent, tmp_path: Path) -> None:
    cases = contract(agent)["corrupt"]
    assert len(cases) >= 2, "name at least garbage bytes and a wrong top-level type"
    for n, case in enumerate(cases):
        home = materialise(agent, tmp_path / str(n))
        path = home / case.get("file", contract(agent)["sample"])  # another file of the unit, or the sample
        if "sql" in case:
            path.unlink()
            build_database(path, case["sql"])
        elif "hex" in case:
            path.write_bytes(bytes.fromhex(case["hex"]))
        else:
            path.write_text(case["text"], encoding="utf-8")
        outcomes = read(agent, home)
        assert [type(o).__name__ for o in outcomes] == ["Rejected"], (case["name"], outcomes)
        assert rejected(outcomes)[0].code.value == case["code"], (case["name"], outcomes)


@by_agent
def test_same_bytes_give_the_same_sessions_and_ids_under_any_root(agent: Agent, tmp_path: Path) -> None:
    home = materialise(agent, tmp_path / "a")
    first, second = loaded(read(agent, home)), loaded(read(agent, home))
    assert first and [canonical(s) for s in first] == [canonical(s) for s in second]
    assert [s.census for s in first] == [s.census for s in second]
    # The ids come from the source's content and its layout below the root, never from where the root is (true of
    # all six readers today: a session id is the agent and the native id; Claude's subagent parent is a folder name).
    elsewhere = loaded(read(agent, materialise(agent, tmp_path / "b" / "other place")))
    assert [canonical(s) for s in elsewhere] == [canonical(s) for s in first]


@by_agent
def test_times_are_the_ones_written_in_the_source_never_the_file_times(agent: Agent, tmp_path: Path) -> None:
    sessions = good_sessions(agent, tmp_path)  # every file's mtime is OLD_MTIME_NS (2001)
    for session, want in zip(sessions, contract(agent)["sessions"], strict=True):
        assert session.started_at == time(want["started_at"])
        assert session.ended_at == time(want.get("ended_at", ""))
        assert [t.timestamp for t in session.turns] == [time(when) for _, when, _ in want["turns"]]


@by_agent
def test_harness_text_is_never_a_persons_turn(agent: Agent, tmp_path: Path) -> None:
    facts = contract(agent)
    harness = facts["harness"]
    assert harness, "name the harness texts the sample holds"
    home = materialise(agent, tmp_path)
    written = (home / facts["sample"]).read_bytes() + b"".join(
        (AGENTS_DIR / agent / b["script"]).read_bytes() for b in facts.get("build", [])
    )
    for text in harness:
        assert text.encode() in written, f"the sample holds no {text!r}: the check would prove nothing"
    users = [t.text for s in loaded(read(agent, home)) for t in s.turns if t.role is Role.USER]
    assert users, "the sample has a person's turn"
    for text in harness:
        assert not [u for u in users if text in u], f"{text!r} became a person's turn"


@by_agent
def test_unknown_record_kind_follows_the_declared_policy(agent: Agent, tmp_path: Path) -> None:
    policy = spec(agent).unknown_records  # declared in the agent's SPEC
    facts = contract(agent)["unknown"]
    good = good_sessions(agent, tmp_path / "good")[0]  # the record is injected into the first session
    outcomes = read(agent, materialise(agent, tmp_path / "unknown", patch=facts))
    if policy == "reject":
        assert [r.code.value for r in rejected(outcomes)] == [facts["code"]], outcomes
        assert not loaded(outcomes)
        return
    assert not rejected(outcomes), outcomes
    session = loaded(outcomes)[0]
    assert [(t.role, t.text) for t in session.turns] == [(t.role, t.text) for t in good.turns]
    assert session.tool_calls == good.tool_calls
    skipped = {kind: n for (kind, _, d), n in session.census.items() if d is Disposition.SKIPPED}
    before = {kind: n for (kind, _, d), n in good.census.items() if d is Disposition.SKIPPED}
    assert skipped.get(facts["census_kind"], 0) == before.get(facts["census_kind"], 0) + 1, session.census


@by_agent
def test_detection_never_claims_another_agents_source(agent: Agent, tmp_path: Path) -> None:
    own = materialise(agent, tmp_path / agent) / contract(agent)["sample"]
    if contract(agent)["detected"]:
        assert detect_format(own) == agent
    else:
        with pytest.raises(ValueError, match="--format"):
            detect_format(own)
    others = [other for other in AGENTS if other != agent]
    assert others, "one registered agent: nothing to be told apart from"
    for other in others:
        path = materialise(other, tmp_path / other) / contract(other)["sample"]
        try:
            answer = detect_format(path)
        except ValueError:
            continue
        assert answer != agent, f"{other}'s sample {path} was taken for {agent}"


def tiny_limits(agent: Agent) -> tuple[Limits, str]:
    """The contract's tiny `Limits` (settled) and the code they give."""
    facts = {k: v for k, v in contract(agent)["limits"].items() if k not in {"code", "pad"}}
    return dataclasses.replace(SETTLED, **facts), contract(agent)["limits"]["code"]


@by_agent
def test_tiny_limits_reject_the_sample_with_the_limit_code(agent: Agent, tmp_path: Path) -> None:
    tiny, code = tiny_limits(agent)
    bounds = [name for name in Limits.field_names() if getattr(tiny, name) != getattr(SETTLED, name)]
    home = materialise(agent, tmp_path)
    for outcomes in (read(agent, home, tiny), list(read_streaming(sample(agent, home), tiny))):
        assert outcomes and not [o for o in outcomes if not isinstance(o, Rejected | Deferred)], outcomes
        assert {cast(Rejected | Deferred, o).code.value for o in outcomes} == {code}, outcomes
        # the detail names the bound that stopped the read
        assert all(any(name in cast(Rejected, o).detail for name in bounds) for o in outcomes), outcomes


@by_agent
def test_tiny_limits_stop_the_read_before_a_big_record_is_held(agent: Agent, tmp_path: Path) -> None:
    pad = contract(agent)["limits"]["pad"]
    tiny, code = tiny_limits(agent)
    home = materialise(agent, tmp_path, patch=pad)
    source = sample(agent, home)
    assert source.size > pad["times"], "the pad did not land in the sample"
    tracemalloc.start()
    try:
        outcomes = list(read_source(source, tiny))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert {o.code.value for o in outcomes if isinstance(o, Rejected | Deferred)} == {code}, outcomes
    assert not loaded(outcomes)
    # The big record is never read into memory whole: the peak stays below half its size (a streaming reader holds
    # at most its chunk and the limit).
    assert peak < pad["times"] // 2, f"peak {peak} bytes while reading past a {pad['times']}-byte record"


@by_agent
def test_source_is_byte_identical_after_every_read(agent: Agent, tmp_path: Path) -> None:
    home = materialise(agent, tmp_path)
    before = snapshot(home)
    source = sample(agent, home)
    list(read_source(source, SETTLED))
    for item in read_streaming(source, SETTLED):
        if not isinstance(item, Loaded | Rejected | Deferred):
            list(item.parts)
    list(read_source(source, tiny_limits(agent)[0]))
    assert snapshot(home) == before, "a file changed, appeared (-wal, -shm, -journal) or vanished while read"


@by_agent
def test_discovery_under_the_default_roots_finds_exactly_the_session_files(agent: Agent, tmp_path: Path) -> None:
    facts = contract(agent)
    home = materialise(agent, tmp_path)
    assert all(root.is_relative_to(home) for root in module(agent).default_roots(home, {}))
    found = sorted(os.path.relpath(s.path, home) for s in discovered(agent, home))
    assert found == sorted(facts["sources"])
    on_disk = {str(p.relative_to(home)) for p in files_under(home)}
    assert facts["not_sources"], "name the non-session files the layout holds (sidecars, settings, history)"
    for rel in facts["not_sources"]:
        assert rel in on_disk, f"{rel} is not in the fixture home: the check would prove nothing"
        assert rel not in found
    assert spec(agent).nightly is bool(module(agent).default_roots(home, {}))


# --- real captures ---------------------------------------------------------------------------------------------------


def capture_outcomes(
    agent: Agent, base: Path, captures: list[dict[str, Any]], tmp_path: Path
) -> Iterator[tuple[dict[str, Any], list[Outcome]]]:
    """Each capture with its outcomes, read under `base` (or from a copy of the capture's folder at `copy_to` under
    `tmp_path`, for a capture kept outside its real layout)."""
    for capture in captures:
        path = base / capture["path"]
        assert path.exists(), f"{path}: listed in real_captures.toml but absent"
        root = base / capture.get("root", os.path.dirname(capture["path"]))
        if "copy_to" in capture:
            shutil.copytree(path.parent, tmp_path / capture["copy_to"])
            path, root = tmp_path / capture["copy_to"] / path.name, tmp_path
        kind = capture.get("kind", "file")
        if kind in ("directory", "discovered"):
            # the unit as discovery lists it (a directory, or a file whose sidecars count in its fingerprint)
            [source] = [s for s in module(agent).discover(root) if Path(s.path) == path]
        else:
            st = path.stat()
            source = Source(agent, str(path), st.st_size, st.st_mtime_ns, str(root), kind)
        yield capture, list(read_source(source, SETTLED))


def real_captures_toml(agent: Agent) -> dict[str, Any]:
    with (AGENTS_DIR / agent / "real_captures.toml").open("rb") as f:
        return tomllib.load(f)


def check_counts(captures: Iterator[tuple[dict[str, Any], list[Outcome]]]) -> tuple[int, int]:
    """Compare each capture's outcomes with the counts checked by hand; returns (captures seen, checked by hand)."""
    seen = checked = 0
    for capture, outcomes in captures:
        seen += 1
        checked += "checked" in capture
        where = capture["path"]
        assert sorted(r.code.value for r in rejected(outcomes)) == sorted(capture.get("rejected", [])), where
        sessions = loaded(outcomes)
        want = capture.get("sessions", [])
        assert [s.session_id for s in sessions] == [w["session_id"] for w in want], where
        for session, w in zip(sessions, want, strict=True):
            users = sum(t.role is Role.USER for t in session.turns)
            assistants = sum(t.role is Role.ASSISTANT for t in session.turns)
            got = (users, assistants, len(session.tool_calls))
            assert got == (w["user"], w["assistant"], w["tools"]), (where, session.session_id, got)
    return seen, checked


@by_agent
def test_real_captures_give_the_counts_checked_by_hand(agent: Agent, tmp_path: Path) -> None:
    folder = next(name for name, a in SHARED_DIRS.items() if a == agent)
    base = shared_fixtures(folder)
    if not base.is_dir():
        # The shared fixtures are here but hold no capture of this agent: its real captures are public files in
        # other projects, listed under [[external]] and checked by the test below.
        pytest.skip(f"no {folder}/ in the shared fixtures: the [[external]] captures check this agent")
    seen, checked = check_counts(capture_outcomes(agent, base, real_captures_toml(agent).get("capture", []), tmp_path))
    assert seen, f"tests/agents/{agent}/real_captures.toml lists no capture"
    assert checked, "say (`checked`) how at least one capture's counts were verified by hand"


EXTERNAL = [a for a in AGENTS if real_captures_toml(a).get("external")]


@pytest.mark.parametrize("agent", EXTERNAL, ids=list(EXTERNAL))
def test_external_real_captures_give_the_counts_checked_by_hand(agent: Agent, tmp_path: Path) -> None:
    """Real captures found in other public projects, which this project must not copy in: `[[external]]` names each
    by repository, commit and path, and `python -m tests.external_captures DIR` lays them out under DIR (from
    GitHub, or from local git mirrors). Without TRANSCRIPTS_EXTERNAL_CAPTURES the check cannot read them."""
    where = os.environ.get("TRANSCRIPTS_EXTERNAL_CAPTURES", "")
    if not where:
        pytest.skip("TRANSCRIPTS_EXTERNAL_CAPTURES is unset: `python -m tests.external_captures DIR` fetches them")
    entries = real_captures_toml(agent)["external"]
    for entry in entries:
        assert entry.get("checked"), f"{entry['path']}: say (`checked`) how its counts were verified by hand"
    captures = [{**e, "path": f"{e['repo'].replace('/', '__')}/{e['path']}"} for e in entries]
    for capture in captures:
        if "root" in capture:
            capture["root"] = f"{capture['path'].split('/', 1)[0]}/{capture['root']}"
    seen, _ = check_counts(capture_outcomes(agent, Path(where), captures, tmp_path))
    assert seen == len(entries)


def test_reject_codes_in_the_contracts_are_known_codes() -> None:
    known = {c.value for c in RejectCode}
    for agent in AGENTS:
        facts = contract(agent)
        codes = [facts["truncated"]["code"], facts["limits"]["code"], *(c["code"] for c in facts["corrupt"])]
        assert set(codes) <= known, (agent, set(codes) - known)
