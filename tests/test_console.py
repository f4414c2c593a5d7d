"""The commands' plain console: style tags become colours on a terminal only, and escaped text prints as it is."""

from __future__ import annotations

import io

import pytest

from flows.cli.console import PlainConsole, escape


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tags_are_dropped_in_a_pipe_and_coloured_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    pipe, tty = io.StringIO(), _Tty()
    console = PlainConsole(stderr=False)
    monkeypatch.setattr("sys.stdout", pipe)
    console.print("[red]error:[/red] no such file [1, 2]")
    monkeypatch.setattr("sys.stdout", tty)
    console.print("[yellow]warn [bold]x[/bold] y[/yellow]")
    assert pipe.getvalue() == "error: no such file [1, 2]\n"
    assert tty.getvalue() == "\x1b[33mwarn \x1b[1mx\x1b[0m\x1b[33m y\x1b[0m\n"


def test_no_color_keeps_a_terminal_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    PlainConsole(stderr=True).print("[red]busy:[/red] held")
    assert tty.getvalue() == "busy: held\n"


def test_escaped_text_that_looks_like_a_tag_prints_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stdout", pipe)
    PlainConsole(stderr=False).print(f"[red]error:[/red] {escape('/tmp/[red]/x [/] [bold]')}")
    assert pipe.getvalue() == "error: /tmp/[red]/x [/] [bold]\n"
