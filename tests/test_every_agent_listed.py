"""Every registered agent is in each hand-kept list of the tests and the bench: a new agent package fails here,
naming the list that still lacks it, instead of going untested."""

from __future__ import annotations

from extractors.registry import agents, specs

NIGHTLY = {spec.name for spec in specs() if spec.nightly}


def _missing(listed: object, wanted: set[str]) -> list[str]:
    return sorted(wanted - {str(name) for name in listed})  # type: ignore[attr-defined]


def test_the_shared_fixtures_map_a_folder_to_every_agent() -> None:
    from tests.support import SHARED_DIRS

    assert not _missing(SHARED_DIRS.values(), set(agents())), "tests/support.py SHARED_DIRS lacks these agents"


def test_the_fuzzer_has_a_format_of_every_agent() -> None:
    from tests.fuzz_support import FORMATS

    missing = _missing({f.agent for f in FORMATS.values()}, set(agents()))
    assert not missing, f"tests/fuzz_support.py FORMATS lacks these agents: {missing}"


def test_hostile_discovery_has_a_layout_of_every_discovered_agent() -> None:
    from tests.test_hostile_discovery import LAYOUTS

    missing = _missing(LAYOUTS, NIGHTLY)
    assert not missing, f"tests/test_hostile_discovery.py LAYOUTS lacks these agents: {missing}"


def test_the_bench_generator_has_a_shape_of_every_discovered_agent() -> None:
    from bench.generate import AGENTS, SHAPES, SMALL_SHAPES

    for name, listed in (("AGENTS", AGENTS), ("SHAPES", SHAPES), ("SMALL_SHAPES", SMALL_SHAPES)):
        missing = _missing(listed, NIGHTLY)
        assert not missing, f"bench/generate.py {name} lacks these agents: {missing}"
