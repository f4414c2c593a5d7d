"""Settings: flags win over the environment, which wins over the TOML file, which wins over defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors.model import Agent
from extractors.registry import extractor
from flows.etl import datahome
from flows.etl.settings import SettingsError, load_settings
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
