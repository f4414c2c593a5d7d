"""Settings: flags win over the environment, which wins over the TOML file, which wins over defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extractors.model import Agent
from extractors.registry import extractor, registered
from flows.etl import datahome
from flows.etl.settings import SettingsError, _defaults, _from_env, _from_file, _from_flags, load_settings
from tests.corpus import S1, claude_exchange
from tests.test_pipeline import run, table_rows


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_flag_beats_environment_beats_file_beats_default(tmp_path: Path) -> None:
    config = _toml(tmp_path, 'data_dir = "/from/file"\n[limits]\nmax_line_bytes = 111\nmax_records = 5\n')
    env = {"TRANSCRIPTS_DATA_DIR": "/from/env", "TRANSCRIPTS_LIMIT_MAX_LINE_BYTES": "222"}
    from_file = load_settings(config=config, env={})
    assert from_file.data_dir == Path("/from/file") and from_file.limits.max_line_bytes == 111
    from_env = load_settings(config=config, env=env)
    assert from_env.data_dir == Path("/from/env") and from_env.limits.max_line_bytes == 222
    assert from_env.limits.max_records == 5, "a limit the environment does not set still comes from the file"
    flagged = load_settings(config=config, env=env, data_dir=tmp_path / "flag", limits={"max_line_bytes": 333})
    assert flagged.data_dir == tmp_path / "flag" and flagged.limits.max_line_bytes == 333
    assert load_settings(env={}, data_dir=tmp_path).limits.max_source_bytes == 2 * 1024**3


def test_roots_from_flag_environment_and_file(tmp_path: Path) -> None:
    module = extractor(Agent("claude"))
    config = _toml(tmp_path, '[roots]\nclaude = ["/file/a", "/file/b"]\n')
    assert load_settings(config=config, env={}).roots(Agent("claude"), module) == [Path("/file/a"), Path("/file/b")]
    env = {"TRANSCRIPTS_ROOT_CLAUDE": "/env/a,/env/b"}
    assert load_settings(config=config, env=env).roots(Agent("claude"), module) == [Path("/env/a"), Path("/env/b")]
    flagged = load_settings(config=config, env=env, roots=["claude=/flag/a"])
    assert flagged.roots(Agent("claude"), module) == [Path("/flag/a")]


def test_home_flag_ignores_the_agents_own_environment(tmp_path: Path) -> None:
    module = extractor(Agent("claude"))
    env = {"HOME": "/home/real", "CLAUDE_CONFIG_DIR": "/real/claude"}
    assert load_settings(env=env).roots(Agent("claude"), module) == [Path("/real/claude/projects")]
    copied = load_settings(env=env, home=tmp_path / "copy").roots(Agent("claude"), module)
    assert copied == [tmp_path / "copy" / ".claude" / "projects", tmp_path / "copy" / ".config" / "claude" / "projects"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limits": {"max_lines": 3}}, "unknown limit 'max_lines'"),
        ({"limits": {"max_records": "many"}}, "must be a whole number"),
        ({"roots": ["claude"]}, "AGENT=PATH"),
        ({"sources": ["clade"]}, "Did you mean 'claude'"),
        ({"config": Path("/no/such/config.toml")}, "does not exist"),
    ],
)
def test_bad_settings_are_refused_clearly(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(env={}, **kwargs)  # type: ignore[arg-type]


def test_root_flag_points_one_agent_at_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere" / "-proj"
    folder.mkdir(parents=True)
    (folder / f"{S1}.jsonl").write_text("".join(line + "\n" for line in claude_exchange(S1, 1)))
    data = tmp_path / "data"
    settings = load_settings(
        home=tmp_path / "empty-home",
        data_dir=data,
        sources=["claude"],
        env={},
        roots=[f"claude={tmp_path / 'elsewhere'}"],
    )
    run(settings)
    assert [r[0] for r in table_rows(data, "sessions")] == [f"claude-{S1}"]


def test_the_default_data_dir_is_the_data_home_never_the_checkout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert datahome.default_data_dir({"HOME": str(home)}, "linux") == home / ".local" / "share" / "transcripts"
    assert datahome.default_data_dir({"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "x")}, "linux") == (
        tmp_path / "x" / "transcripts"
    )
    assert datahome.default_data_dir({"HOME": str(home), "XDG_DATA_HOME": "relative"}, "linux") == (
        home / ".local" / "share" / "transcripts"
    ), "the XDG spec ignores a relative path"
    assert datahome.default_data_dir({"HOME": str(home)}, "darwin") == (
        home / "Library" / "Application Support" / "transcripts"
    )
    assert datahome.sample_data_dir({"HOME": str(home)}, "linux") == home / ".local" / "share" / "transcripts-sample"
    settings = load_settings(env={"HOME": str(home)})
    assert settings.data_dir == home / ".local" / "share" / "transcripts"
    assert not settings.data_dir.is_relative_to(datahome.PROJECT_DIR)


def test_each_layer_alone_says_where_its_values_came_from(tmp_path: Path) -> None:
    config = _toml(tmp_path, 'data_dir = "/f"\n[run]\nworkers = 2\n[schedule]\ncron = "1 2 * * *"\n')
    assert {v.origin for v in _defaults().values.values()} == {"default"}
    file = _from_file(config).values
    assert (file["data_dir"].origin, file["workers"].origin, file["schedule_cron"].origin) == (
        f"settings file {config}",
        f"[run] of settings file {config}",
        f"[schedule] of settings file {config}",
    )
    env = _from_env({"TRANSCRIPTS_DATA_DIR": "/e", "TRANSCRIPTS_WORKERS": "", "TRANSCRIPTS_ROOT_CODEX": "/r"})
    assert env.values["data_dir"].origin == "TRANSCRIPTS_DATA_DIR (environment)"
    assert "workers" not in env.values, "an empty variable is not set"
    assert [(name, v.origin) for name, v in env.roots] == [("CODEX", "TRANSCRIPTS_ROOT_CODEX (environment)")]
    flags = _from_flags(
        data_dir=Path("/d"),
        home=None,
        sources=(),
        roots=["codex=/r"],
        limits={"max_records": 3},
        lock_wait=0.0,
        dask=None,
        redact=None,
    )
    assert {name: v.origin for name, v in flags.values.items()} == {
        "data_dir": "--data-dir",
        "lock_wait_seconds": "--wait",
    }
    assert [(name, v.origin) for name, v in [*flags.roots, *flags.limits]] == [
        ("codex", "--root"),
        ("max_records", "argument"),
    ]


def test_the_highest_of_the_four_layers_gives_the_value_and_is_named_as_its_origin(tmp_path: Path) -> None:
    config = _toml(tmp_path, "[run]\nlock_wait_seconds = 5\n")
    default = load_settings(env={}, data_dir=tmp_path)
    assert default.lock_wait_seconds == 60.0 and "lock_wait_seconds" not in default.origins
    from_file = load_settings(env={}, config=config)
    assert from_file.lock_wait_seconds == 5.0
    assert from_file.origins["lock_wait_seconds"] == f"[run] of settings file {config}"
    from_env = load_settings(env={"TRANSCRIPTS_LOCK_WAIT": "7"}, config=config)
    assert from_env.lock_wait_seconds == 7.0
    assert from_env.origins["lock_wait_seconds"] == "TRANSCRIPTS_LOCK_WAIT (environment)"
    flagged = load_settings(env={"TRANSCRIPTS_LOCK_WAIT": "7"}, config=config, lock_wait=2.5)
    assert flagged.lock_wait_seconds == 2.5 and flagged.origins["lock_wait_seconds"] == "--wait"
    assert flagged.origins["data_dir"] == "default", "only the data dir is named when it is a default"


@pytest.mark.parametrize(
    ("toml", "env", "flag", "message"),
    [
        ('[run]\nlock_wait_seconds = "x"\n', {}, None, "lock wait ([run] of settings file {config}) must be a number"),
        ("", {"TRANSCRIPTS_LOCK_WAIT": "-1"}, None, "lock wait (TRANSCRIPTS_LOCK_WAIT (environment)) must be a number"),
        ("", {}, -3.0, "lock wait (--wait) must be a number of at least 0, got -3.0"),
    ],
)
def test_a_bad_value_is_refused_naming_the_layer_it_came_from(
    tmp_path: Path, toml: str, env: dict[str, str], flag: float | None, message: str
) -> None:
    config = _toml(tmp_path, toml)
    with pytest.raises(SettingsError, match=re.escape(message.format(config=config))):
        load_settings(env=env, config=config, lock_wait=flag)


@pytest.mark.parametrize(
    ("toml", "env", "kwargs", "message"),
    [
        (
            "",
            {"TRANSCRIPTS_LIMIT_MAX_RECORDS": "lots"},
            {"limits": {"max_records": 3}},
            "TRANSCRIPTS_LIMIT_MAX_RECORDS",
        ),
        ("[roots]\nclaude = 3\n", {"TRANSCRIPTS_ROOT_CLAUDE": "/env"}, {}, "roots.claude (settings file"),
        ("[roots]\nclade = '/x'\n", {"TRANSCRIPTS_ROOT_CLAUDE": "/env"}, {}, "unknown agent 'clade'"),
        ("sources = 5\n", {}, {"sources": ["claude"]}, "sources (settings file"),
    ],
)
def test_a_bad_limit_root_or_file_sources_is_refused_even_when_a_higher_layer_overrides_it(
    tmp_path: Path, toml: str, env: dict[str, str], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        load_settings(env=env, config=_toml(tmp_path, toml), **kwargs)  # type: ignore[arg-type]


def test_roots_merge_per_agent_and_root_flags_add_up(tmp_path: Path) -> None:
    config = _toml(tmp_path, '[roots]\nclaude = "/file/claude"\ncodex = "/file/codex"\n')
    env = {"TRANSCRIPTS_ROOT_CLAUDE_CODE": "/env/claude"}
    from_env = load_settings(env=env, config=config)
    assert from_env.explicit_roots == {
        Agent("claude"): (Path("/env/claude"),),
        Agent("codex"): (Path("/file/codex"),),
    }, "an alias names the same agent, whose file roots it replaces"
    flagged = load_settings(env=env, config=config, roots=["claude=/flag/a", "claude-code=/flag/b"])
    assert flagged.flag_roots == {Agent("claude"): (Path("/flag/a"), Path("/flag/b"))}
    assert flagged.explicit_roots[Agent("claude")] == (Path("/flag/a"), Path("/flag/b"))
    assert flagged.explicit_roots[Agent("codex")] == (Path("/file/codex"),)


def test_sources_come_from_the_highest_layer_that_names_any(tmp_path: Path) -> None:
    config = _toml(tmp_path, 'sources = "codex"\n')
    assert load_settings(env={"TRANSCRIPTS_SOURCES": " , "}, config=config).agents == (Agent("codex"),)
    assert load_settings(env={"TRANSCRIPTS_SOURCES": "gemini"}, config=config).agents == (Agent("gemini"),)
    flagged = load_settings(env={"TRANSCRIPTS_SOURCES": "gemini"}, config=config, sources=["claude", "claude-code"])
    assert flagged.agents == (Agent("claude"),)
    nightly = load_settings(env={}, config=_toml(tmp_path, "sources = []\n")).agents
    assert nightly == tuple(a for a, m in registered().items() if m.SPEC.nightly)
