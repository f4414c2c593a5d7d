"""`transcripts sql`: read-only queries as a table (80 columns), CSV or JSON; a shell; one-line errors."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import cmd_sql
from flows.cli.app import app
from sinks import query
from tests.test_warehouse_views import load_sample

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("sql") / "data"
    load_sample(data, "UTC")
    return data


def sql(data: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["sql", *args, "--data-dir", str(data)], input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_a_table_fits_80_columns_with_wide_cells_cut_by_an_ellipsis(data: Path) -> None:
    code, out, err = sql(data, "SELECT agent, timestamp, text, cwd, title FROM prompts ORDER BY timestamp")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" in out
    assert "11 rows" in out and "opencode" in out
    assert "times in Etc/UTC" in err or "times in UTC" in err


def test_json_is_an_array_of_objects_in_column_order_with_iso_times(data: Path) -> None:
    code, out, _ = sql(
        data, "--json", "SELECT agent, day, prompts, [1, 2] AS list FROM daily_activity ORDER BY day LIMIT 2"
    )
    assert code == 0
    assert out.startswith("[\n{")
    assert json.loads(out) == [
        {"agent": "opencode", "day": "2025-12-29", "prompts": 1, "list": [1, 2]},
        {"agent": "gemini", "day": "2026-01-16", "prompts": 1, "list": [1, 2]},
    ]
    code, out, _ = sql(
        data, "--json", "SELECT timestamp FROM prompts WHERE agent = 'codex'", "--timezone", "Asia/Tokyo"
    )
    assert json.loads(out) == [{"timestamp": "2026-05-11T20:26:02+09:00"}]
    code, out, _ = sql(data, "--json", "SELECT 1 AS a WHERE false")
    assert json.loads(out) == []


def test_csv_has_a_header_empty_nulls_and_nested_values_as_json(data: Path) -> None:
    code, out, _ = sql(data, "--csv", "SELECT project, cwd, agents FROM project_activity ORDER BY project")
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["project", "cwd", "agents"],
        ["(none)", "", '["aider", "cursor", "gemini"]'],
        ["webapp", "/home/dev/webapp", '["claude", "codex", "grok", "opencode"]'],
    ]
    code, out, _ = sql(data, "--csv", "SELECT 1 AS a, 2 AS a")
    assert out.splitlines() == ["a,a_1", "1,2"]


def test_sql_errors_are_duckdbs_first_line_and_exit_1(data: Path) -> None:
    code, _, err = sql(data, "SELEC 1")
    assert code == 1
    assert err.strip() == 'error: Parser Error: syntax error at or near "SELEC"'
    code, _, err = sql(data, "SELECT nope FROM turns")
    assert code == 1 and err.startswith('error: Binder Error: Referenced column "nope" not found')
    assert "\n" not in err.strip()
    code, _, err = sql(data, "SELECT CAST('x' AS INTEGER)")  # fails while rows are produced
    assert code == 1 and err.startswith("error: Conversion Error")


def test_the_warehouse_cannot_be_written(data: Path) -> None:
    code, _, err = sql(data, "CREATE TABLE mine (a INTEGER)")
    assert code == 1
    assert "read-only" in err
    code, _, err = sql(data, "DELETE FROM turns")
    assert code == 1


def test_no_warehouse_is_one_line_saying_what_to_run_exit_2(tmp_path: Path) -> None:
    code, _, err = sql(tmp_path / "nothing", "SELECT 1")
    assert code == 2
    assert err.strip() == (
        f"error: no warehouse in {tmp_path / 'nothing'} yet: run `transcripts run` "
        "(or `transcripts run --sample` to try the sample)"
    )
    code, _, _ = sql(tmp_path / "nothing")  # the shell too
    assert code == 2


def test_bad_arguments_exit_2(data: Path) -> None:
    assert sql(data, "--csv", "--json", "SELECT 1")[0] == 2
    code, _, err = sql(data, "--timezone", "Europe/Berln", "SELECT 1")
    assert code == 2 and "did you mean Europe/Berlin" in err


def test_the_builtin_shell_runs_multi_line_statements_and_goes_on_after_an_error(data: Path) -> None:
    code, out, _ = sql(
        data, "--builtin-shell", stdin="SELECT 40 +\n  2 AS answer;\nSELEC 1;\n.tables\nSELECT 'still here' AS s;\n"
    )
    assert code == 1  # a statement failed (piped input, like the DuckDB CLI)
    assert "42" in out and "still here" in out
    assert 'error: Parser Error: syntax error at or near "SELEC"' in out
    assert "daily_activity" in out and "turns" in out


def test_the_builtin_shell_keeps_a_private_history_of_whole_statements(tmp_path: Path) -> None:
    pytest.importorskip("readline", reason="this Python has no readline; the shell works without history")
    history = tmp_path / ".sql_history"
    remember = cmd_sql._history(history)
    remember("SELECT 1\n, 2;")
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "SELECT 1" in history.read_text()


def test_the_shell_function_reads_until_a_semicolon() -> None:
    import duckdb

    con = duckdb.connect()
    lines = iter(["SELECT", "  'a' AS x", ";", "", "SELECT 2 AS y;"])
    seen: list[str] = []
    out: list[str] = []

    def read(prompt: str) -> str:
        seen.append(prompt)
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    failed = query.shell(con, read, out.append, zone="UTC", remember=seen.append, width=lambda: 80)
    assert failed == 0
    assert seen[:3] == ["transcripts> ", "   ...> ", "   ...> "]
    assert "SELECT\n  'a' AS x\n;" in seen and "SELECT 2 AS y;" in seen
    text = "".join(out)
    assert "│ a       │" in text and "│     2 │" in text


def test_sql_alone_hands_over_to_a_duckdb_cli_that_can_open_the_warehouse(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv"
    fake = bin_dir / "duckdb"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\n[ "$1" = --version ] && echo "v0.0.0 fake"\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, _, err = sql(data, "--timezone", "Asia/Tokyo")
    assert code == 0, err
    calls = log.read_text().split("\n")
    assert "-readonly" in calls
    assert str(data / "warehouse.duckdb") in calls
    assert any("SET VARIABLE transcripts_timezone = 'Asia/Tokyo'" in line for line in calls)
    assert "DuckDB CLI" in err and "Asia/Tokyo" in err


def test_a_cli_on_path_that_cannot_open_the_warehouse_gives_way_to_the_one_installed_with_transcripts(
    data: Path, tmp_path: Path
) -> None:
    bundled = query.bundled_cli()
    assert bundled is not None, "duckdb-cli is a dev dependency: `uv sync` installs it"
    assert Path(bundled).parent.name == "duckdb_cli"  # the package's binary, not its wrapper script
    old = tmp_path / "duckdb"
    old.write_text("#!/bin/sh\necho 'Error: unsupported storage version' >&2\nexit 1\n")  # e.g. a DuckDB 1.1
    old.chmod(0o755)
    assert query.duckdb_cli(data, which=lambda name: str(old)) == bundled
    assert query.duckdb_cli(data, which=lambda name: None) == bundled  # the venv's bin not on PATH (cron)


def test_without_a_duckdb_cli_an_interactive_sql_says_how_to_get_one_and_opens_the_builtin_shell(
    data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(query, "duckdb_cli", lambda data_dir: None)  # the fault: no CLI installed
    monkeypatch.setattr(cmd_sql, "_history", lambda path: lambda sql: None)
    monkeypatch.setattr("sys.stdin", Terminal("SELECT 6 * 7 AS answer;\n"))
    cmd_sql._interactive(cmd_sql.settings_of(data, None), "UTC", "--timezone", builtin=False)
    out, err = capsys.readouterr()
    assert "No DuckDB CLI" in err and "uv tool install duckdb-cli==1.5.5" in err
    assert "42" in out
    monkeypatch.setattr("sys.stdin", Terminal(".quit\n"))
    cmd_sql._interactive(cmd_sql.settings_of(data, None), "UTC", "--timezone", builtin=True)
    assert "No DuckDB CLI" not in capsys.readouterr().err  # asked for the built-in shell: nothing to say
