"""The `transcripts` executable: a command through a flow goes to the command runner when one is ready
(flows.service.runner: Prefect loaded already); every other command, or one the runner declines, runs here
(flows.cli.app)."""

from __future__ import annotations

import sys

from flows.service import runner


def main() -> None:
    try:
        code = runner.delegate(sys.argv[1:])
    except KeyboardInterrupt:  # Ctrl-C in the moment before the runner answered: the command had not started
        print("interrupted.", file=sys.stderr)
        raise SystemExit(130) from None
    if code is not None:
        sys.stdout.flush()
        raise SystemExit(code)
    # here: the CLI (~0.3 s) runs in this process only when the runner is off or declines
    from flows.cli.app import main as run_here

    run_here()


if __name__ == "__main__":
    main()
