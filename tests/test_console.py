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


def test_after_ctrl_c_the_one_line_is_all_prefect_leaves_on_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """Prefect's threads log the tasks an interrupt cancelled after the command's line (CI, the runner's Ctrl-C
    test): once interrupted, its loggers say nothing more; ours are left as they were."""
    import logging

    import typer

    from flows.cli.console import INTERRUPTED, reporting

    names = ("prefect", "prefect.task_runs", "prefect.events.clients", "transcripts.etl")
    loggers = [logging.getLogger(name) for name in names]
    saved = [(logger.level, logger.handlers[:], logger.propagate) for logger in loggers]
    levels = {name: logging.getLogger(name).level for name in list(logging.root.manager.loggerDict)}
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    try:
        for logger in loggers:
            logger.setLevel(logging.WARNING)
            logger.handlers = [handler]
            logger.propagate = False
        with pytest.raises(typer.Exit) as ended, reporting("run"):
            raise KeyboardInterrupt
        assert ended.value.exit_code == INTERRUPTED
        logging.getLogger("prefect.task_runs").error("Crash detected! CancelledError")
        logging.getLogger("prefect.events.clients").warning("Still processing items")
        logging.getLogger("prefect.flow_runs.new").error("a logger made after the interrupt")
        logging.getLogger("transcripts.etl").warning("event=cleanup_left")
        assert stream.getvalue() == "event=cleanup_left\n"
        assert capsys.readouterr().err == "run interrupted; the previous corpus is intact.\n"
    finally:
        for logger, (level, handlers, propagate) in zip(loggers, saved, strict=True):
            logger.setLevel(level)
            logger.handlers = handlers
            logger.propagate = propagate
        for name in list(logging.root.manager.loggerDict):  # Prefect's loggers, as this process had them
            logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))
