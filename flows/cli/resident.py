"""The command runner's process, started by `transcripts` itself: `python -m flows.cli.resident serve STATE_DIR
API_URL`. The runner (flows.service.runner) sets Prefect's environment, then has this module import the CLI (every
command module, typer) and the ETL flow (Prefect, the pipeline, pyarrow, DuckDB) once, and runs each command it is
sent with the CLI's main, in a child forked from this process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from flows.service import runner


def _load() -> Callable[[], object]:
    # Imported here, not at the top: Prefect reads its settings once, at its import, and the runner sets them first.
    import flows.etl.flow  # noqa: F401
    from flows.cli.app import main

    return main


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "serve":
        print(
            "usage: python -m flows.cli.resident serve STATE_DIR API_URL (started by transcripts itself)",
            file=sys.stderr,
        )
        return 2
    return runner.serve(Path(args[1]), args[2], _load)


if __name__ == "__main__":
    raise SystemExit(main())
