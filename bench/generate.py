"""Generate a deterministic, realistic corpus of agent transcripts under a fake HOME.

    uv run python bench/generate.py --mb 200 --out DIR [--seed 1] [--mix claude=0.7,codex=0.2,grok=0.1]
    uv run python bench/generate.py --mb 20 --out DIR --shape small   # thousands of small sessions, one folder
    uv run python bench/generate.py --mb 500 --out DIR --shape big    # one Claude session of 500 MB

The same arguments give the same bytes every time: every id, time and text comes from `random.Random` seeded with
the seed (never the clock, never uuid4). Files get the time their session ended as mtime. `--mb` is the size of
what the ETL reads (transcripts and Grok's summary.json); companion journals the ETL must skip come on top.

Session sizes are skewed like a real heavy user's: many sessions of a few KB to a few hundred KB, some of 1-10 MB
(about 6 per 100 MB of Claude corpus) and one or two giants of 20-40 MB (from 50 MB of Claude corpus on: one per
100 MB, at least one). About 2,000 sessions per 200 MB. `DIR/bench-corpus.json` describes what was written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aider_gen import aider_session
from bench.amp_gen import amp_session
from bench.claude_gen import claude_session
from bench.cline_gen import cline_session
from bench.codex_gen import codex_session
from bench.copilot_gen import copilot_session
from bench.cursor_gen import cursor_session
from bench.droid_gen import droid_session
from bench.gemini_gen import gemini_session
from bench.goose_gen import GooseStore, goose_session
from bench.grok_gen import grok_session
from bench.kiro_gen import kiro_session
from bench.material import Material, Project, ms_of
from bench.opencode_gen import OpenCodeStore, opencode_session
from bench.output import Written
from bench.pi_gen import pi_session
from bench.qwen_gen import qwen_session

MB = 1_000_000
AGENTS = (
    "claude",
    "codex",
    "grok",
    "gemini",
    "opencode",
    "cursor",
    "copilot",
    "pi",
    "cline",
    "aider",
    "amp",
    "qwen",
    "droid",
    "goose",
    "kiro",
)
START = datetime(2025, 11, 1, tzinfo=UTC)
SPAN_DAYS = 150  # sessions are spread over Nov 2025 .. Mar 2026 (Claude CLI v2.0.64 .. v2.1.63)
MANIFEST = "bench-corpus.json"
# Corpus shapes: `mixed` (a heavy user's skewed sizes over 36 projects), `small` (thousands of small sessions, each
# with a subagent, all in one project folder: per-session costs and anything quadratic in a folder's sessions),
# `big` (one Claude session of --mb MB, or with --mix codex=1 one Codex rollout: memory follows the largest session).
SHAPE_NAMES = ("mixed", "small", "big")
SMALL_MIX = {"claude": 0.5, "grok": 0.5}
BIG_AGENTS = ({"claude"}, {"codex"})  # the big shape is one session of one of these
BIG_ONLY = "the big shape is one Claude session or one Codex rollout: give no --mix, claude=1 or codex=1"


def parse_mix(text: str) -> dict[str, float]:
    """`claude=0.7,codex=0.2,grok=0.1` -> shares that sum to 1. Raises ValueError."""
    shares: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if not sep or name not in AGENTS:
            raise ValueError(f"--mix takes AGENT=SHARE[,...] with AGENT in {', '.join(AGENTS)}; got {item!r}")
        share = float(value)
        if share < 0:
            raise ValueError(f"--mix share for {name} is negative")
        shares[name] = shares.get(name, 0.0) + share
    total = sum(shares.values())
    if total <= 0:
        raise ValueError("--mix shares sum to zero")
    return {name: share / total for name, share in shares.items() if share > 0}


@dataclass(frozen=True, slots=True)
class Planned:
    agent: str
    index: int
    target: int  # bytes
    kind: str  # small | large | giant
    start_ms: int
    big_image: bool = False  # a ~1 MB pasted screenshot (one session in 400, in budgets of 20 MB or more)


# Per agent: (giant sizes, large sessions per MB of budget, (low, high) MB of a large one, small median, small cap,
# written/planned ratio of a small session). The small median is of the planned size; a written session is whole
# exchanges, so small ones come out larger than planned (the ratio, measured); the medians give about 2,000
# sessions per 200 MB of Claude corpus.
SHAPES: dict[str, tuple[tuple[int, ...], float, tuple[float, float], int, int, float]] = {
    "claude": ((36 * MB, 24 * MB), 0.06, (1.0, 10.0), 9_000, 700_000, 2.65),
    "codex": ((), 0.03, (1.0, 6.0), 30_000, 700_000, 1.5),
    "grok": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.48),
    "gemini": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "opencode": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "cursor": ((), 0.0, (1.0, 2.0), 12_000, 300_000, 1.3),
    "pi": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "cline": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "copilot": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "aider": ((), 0.01, (0.5, 2.0), 12_000, 400_000, 1.1),
    "amp": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.3),
    "qwen": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "droid": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "goose": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
    "kiro": ((), 0.02, (1.0, 4.0), 16_000, 700_000, 1.5),
}


# The `small` shape: (small median, small cap, written/planned ratio), no large sessions or giants. Every Claude
# session has a subagent file, every other Grok session a subagent folder (both measured into the ratio).
SMALL_SHAPES: dict[str, tuple[int, int, float]] = {
    "claude": (3_000, 40_000, 10.0),
    "grok": (2_500, 30_000, 7.0),
    "codex": (4_000, 40_000, 1.5),
    "gemini": (3_000, 40_000, 1.5),
    "opencode": (3_000, 40_000, 1.5),
    "cursor": (3_000, 30_000, 2.5),
    "pi": (3_000, 40_000, 1.5),
    "cline": (3_000, 40_000, 1.5),
    "copilot": (3_000, 40_000, 1.5),
    "aider": (3_000, 30_000, 1.1),
    "amp": (3_000, 40_000, 1.3),
    "qwen": (3_000, 40_000, 1.5),
    "droid": (3_000, 40_000, 1.5),
    "goose": (3_000, 40_000, 1.5),
    "kiro": (3_000, 40_000, 1.5),
}


class SizePlan:
    """Session sizes for one agent filling `budget` bytes of what is actually written, skewed like a real corpus.

    Big sessions (1-10 MB, and 20-40 MB giants for a Claude budget of 50 MB or more: one per 100 MB, at least one)
    sit at fixed places in the sequence; small ones (lognormal, a few KB to a few hundred KB) are drawn one at a
    time until the written bytes reach the budget. Start times follow the place in the sequence over the expected
    number of sessions, so the CLI eras (and their record kinds) get their share of sessions whatever the sizes.
    """

    def __init__(self, rng: random.Random, agent: str, budget: int, shape: str = "mixed") -> None:
        giants, large_per_mb, (low, high), self.median, self.cap, ratio = SHAPES[agent]
        if shape == "small":
            giants, large_per_mb = (), 0.0
            self.median, self.cap, ratio = SMALL_SHAPES[agent]
        self.rng, self.agent, self.budget, self.shape = rng, agent, budget, shape
        bigs: list[tuple[int, str]] = []
        if shape == "big":
            bigs.append((budget, "giant"))  # one session of the whole budget, nothing else
            self.budget, large_per_mb = 0, 0.0
        elif budget >= 50 * MB:
            count = max(1, round(budget / (100 * MB)))
            bigs += [(giants[i % len(giants)], "giant") for i in range(count if giants else 0)]
        for _ in range(round(budget / MB * large_per_mb)):
            bigs.append((int(math.exp(rng.uniform(math.log(low * MB), math.log(high * MB)))), "large"))
        while sum(size for size, _ in bigs) > budget * 0.8 and bigs and shape != "big":
            bigs.pop()  # keep the giants, drop large ones
        self.bigs = sorted((rng.uniform(0.02, 0.95), size, kind) for size, kind in bigs)
        sample = random.Random(f"{agent}-calibration")
        small_mean = sum(self._small(sample) for _ in range(4000)) / 4000 * ratio
        self.expected = len(bigs) + max(budget - sum(size for size, _ in bigs), 0) / small_mean
        self.index = 0

    def _small(self, rng: random.Random) -> int:
        return min(self.cap, max(2_000, int(rng.lognormvariate(math.log(self.median), 1.1))))

    def next(self, written: int) -> Planned | None:
        """The next session to write, given the bytes written so far; None when the budget is reached."""
        if written >= self.budget and not self.bigs:
            return None
        position = min(self.index / max(self.expected, 1.0), 0.999)
        if self.shape == "big":
            position = 0.9  # the one session is of the latest CLI era (progress floods, subagent folders)
        if self.bigs and (self.bigs[0][0] <= position or written >= self.budget):
            _, size, kind = self.bigs.pop(0)
        else:
            size, kind = self._small(self.rng), "small"
        day = position * SPAN_DAYS + self.rng.uniform(0, 0.5)
        big_image = self.index % 400 == 17 and self.budget >= 20 * MB
        item = Planned(self.agent, self.index, size, kind, ms_of(START) + int(day * 86_400_000), big_image)
        self.index += 1
        return item


@dataclass(slots=True)
class AgentSummary:
    sessions: int = 0  # main sessions (a Claude subagent file is not counted here)
    files: int = 0  # source files (Claude subagent files included; Grok: chat_history.jsonl + summary.json)
    bytes_sources: int = 0
    bytes_other: int = 0
    largest_session_bytes: int = 0
    expected_duplicates: int = (
        0  # sources the ETL rejects as `duplicate` by design (OpenCode JSON units also in the db)
    )


@dataclass(slots=True)
class CorpusSummary:
    seed: int
    mb: float
    mix: dict[str, float]
    shape: str = "mixed"
    agents: dict[str, AgentSummary] = field(default_factory=dict)
    append_candidate: str = ""  # a mid-size Claude main session (the benchmark appends to it)
    seconds: float = 0.0
    generator: str = ""  # generator_digest() of the code that wrote it: a kept corpus from other code is stale

    @property
    def bytes_sources(self) -> int:
        return sum(a.bytes_sources for a in self.agents.values())


def generator_digest() -> str:
    """A digest of the generator's code (this module, its material and every agent's writer): the same digest, the
    same bytes for the same arguments. A corpus kept from another one (`--keep`) is written again, never measured: a
    Grok corpus kept from before the generator wrote Grok's real updates.jsonl read as 1,061 rejections."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*here.glob("*_gen.py"), here / "gen_chatgpt.py", here / "material.py", here / "generate.py"]):
        if path.exists():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def stale(summary: Mapping[str, Any]) -> bool:
    """Whether a kept corpus's bench-corpus.json was written by other generator code (see generator_digest)."""
    return summary.get("generator") != generator_digest()


def _projects(seed: int, material: Material) -> list[Project]:
    rng = random.Random(f"{seed}/projects")
    return [Project(rng, material) for _ in range(36)]


def _era(start_ms: int) -> int:
    day = (start_ms - ms_of(START)) / 86_400_000
    return 0 if day < 50 else 1 if day < 85 else 2


def generate(
    out: Path, mb: float, seed: int = 1, mix: Mapping[str, float] | None = None, shape: str = "mixed"
) -> CorpusSummary:
    """Write the corpus under `out` (a fake HOME); returns what was written (also saved as bench-corpus.json).

    `shape` is one of SHAPE_NAMES; `small` defaults to SMALL_MIX, `big` takes one agent, Claude or Codex.
    Raises ValueError.
    """
    started = time.monotonic()
    if shape not in SHAPE_NAMES:
        raise ValueError(f"shape must be one of {', '.join(SHAPE_NAMES)}; got {shape!r}")
    shares = dict(mix or (SMALL_MIX if shape == "small" else {"claude": 1.0}))
    if shape == "big" and set(shares) not in BIG_AGENTS:
        raise ValueError(BIG_ONLY)
    material = Material(seed)
    projects = _projects(seed, material)
    if shape == "small":
        projects = projects[:1]  # one project folder holds every session
    weights = [1.0 / (i + 1) for i in range(len(projects))]  # a few projects get most sessions
    summary = CorpusSummary(seed=seed, mb=mb, mix=shares, shape=shape, generator=generator_digest())
    for agent in AGENTS:
        if agent not in shares:
            continue
        plan = SizePlan(random.Random(f"{seed}/{agent}/plan"), agent, int(mb * MB * shares[agent]), shape)
        stats = summary.agents.setdefault(agent, AgentSummary())
        mid_sizes: list[tuple[int, str]] = []
        store = OpenCodeStore(out) if agent == "opencode" else None
        goose_store = GooseStore(out) if agent == "goose" else None
        while (item := plan.next(stats.bytes_sources)) is not None:
            rng = random.Random(f"{seed}/{agent}/{item.index}")
            project = rng.choices(projects, weights=weights)[0]
            for number, w in enumerate(_write(material, rng, out, project, item, agent, store, shape, goose_store)):
                stats.sessions += 1 if number == 0 else 0
                stats.files += len(w.files)
                stats.bytes_sources += w.bytes_sources
                stats.bytes_other += w.bytes_other
                stats.largest_session_bytes = max(stats.largest_session_bytes, w.bytes_sources)
                if agent == "claude" and number == 0 and (100_000 <= w.bytes_sources <= 400_000 or shape != "mixed"):
                    mid_sizes.append((w.bytes_sources, str(w.main_path.relative_to(out))))
                if agent == "codex" and shape == "big":
                    summary.append_candidate = str(w.main_path.relative_to(out))  # the one rollout
        if store is not None:
            # The database's real size (free space, page fill) replaces the per-session growth it was counted by.
            stats.bytes_sources = store.close() + store.legacy_bytes
            stats.files = 1 + store.legacy_files
            stats.expected_duplicates = store.duplicates
        if goose_store is not None:  # the database's real size, as for OpenCode
            stats.bytes_sources = goose_store.close()
            stats.files = 1
        if agent == "claude" and mid_sizes:
            summary.append_candidate = sorted(mid_sizes)[len(mid_sizes) // 2][1]
    summary.seconds = round(time.monotonic() - started, 2)
    (out / MANIFEST).write_text(json.dumps(asdict(summary), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def _write(
    material: Material,
    rng: random.Random,
    home: Path,
    project: Project,
    item: Planned,
    agent: str,
    store: OpenCodeStore | None = None,
    shape: str = "mixed",
    goose_store: GooseStore | None = None,
) -> list[Written]:
    start = item.start_ms
    small = shape == "small"
    grok_child = item.index % 2 == 1 if small else item.index % 30 == 5
    writers: dict[str, Callable[[], list[Written]]] = {
        "claude": lambda: [
            claude_session(
                material,
                rng,
                home,
                project,
                start,
                _era(start),
                item.target,
                big_image=item.big_image,
                copied_from=_copied_from(rng, item),
                odd_bytes=item.index % 500 == 123,
                with_subagent=small,
            )
        ],
        "codex": lambda: codex_session(
            material,
            rng,
            home,
            project,
            start,
            item.target,
            archived=item.index % 30 == 7,
            with_child=item.index % 50 == 11,
        ),
        "grok": lambda: grok_session(material, rng, home, project, start, item.target, with_child=grok_child),
        "gemini": lambda: gemini_session(material, rng, home, project, start, item.target),
        "cursor": lambda: cursor_session(
            material, rng, home, project, start, item.target, with_child=small or item.index % 25 == 9
        ),
        "pi": lambda: pi_session(material, rng, home, project, start, item.target),
        "cline": lambda: cline_session(
            material, rng, home, project, start, item.target, roo=item.index % 3 == 1, with_child=item.index % 20 == 7
        ),
        "copilot": lambda: copilot_session(material, rng, home, project, start, item.target),
        "aider": lambda: aider_session(material, rng, home, project, start, item.target),
        "amp": lambda: amp_session(material, rng, home, project, start, item.target),
        "qwen": lambda: qwen_session(material, rng, home, project, start, item.target),
        "droid": lambda: droid_session(material, rng, home, project, start, item.target),
        "kiro": lambda: kiro_session(material, rng, home, project, start, item.target),
    }
    if agent == "goose":
        assert goose_store is not None
        return goose_session(goose_store, material, rng, project, start, item.target, item.index)
    if agent == "opencode":
        assert store is not None
        return opencode_session(store, material, rng, project, start, item.target, item.index, ms_of(START))
    return writers[agent]()


def _copied_from(rng: random.Random, item: Planned) -> str | None:
    """About 2% of sessions were resumed: they start with copies of another session's records."""
    if item.index % 50 != 3:
        return None
    from bench.material import rand_uuid4

    return rand_uuid4(random.Random(f"resumed-{item.index}-{rng.random()}"))


def load_summary(out: Path) -> dict[str, Any]:
    """The bench-corpus.json of a generated corpus. Raises FileNotFoundError."""
    data: dict[str, Any] = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, required=True, help="size of the sources to write, in MB (10^6 bytes)")
    parser.add_argument("--out", type=Path, required=True, help="the fake HOME to write under (created)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--mix", help="byte shares per agent, e.g. claude=0.7,codex=0.2,grok=0.1 (default claude=1; small: SMALL_MIX)"
    )
    parser.add_argument("--shape", choices=SHAPE_NAMES, default="mixed", help="mixed | small | big (see above)")
    args = parser.parse_args(argv)
    try:
        mix = parse_mix(args.mix) if args.mix else None
        if args.shape == "big" and mix is not None and set(mix) not in BIG_AGENTS:
            raise ValueError(BIG_ONLY)
    except ValueError as exc:
        parser.error(str(exc))
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty; give a new folder (the generator never deletes)")
    args.out.mkdir(parents=True, exist_ok=True)
    summary = generate(args.out, args.mb, args.seed, mix, args.shape)
    for agent, stats in summary.agents.items():
        print(
            f"{agent:7s} {stats.sessions:6d} sessions {stats.files:6d} files "
            f"{stats.bytes_sources / MB:9.1f} MB sources (+{stats.bytes_other / MB:.1f} MB journals)  "
            f"largest {stats.largest_session_bytes / MB:.1f} MB"
        )
    print(f"total   {summary.bytes_sources / MB:.1f} MB in {summary.seconds:.1f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
