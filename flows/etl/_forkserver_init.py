"""Imported only by the extraction pool's fork server (as its preload): make it die with the run that started it,
and leave stopping to the run.

A terminal's Ctrl-C goes to every process of its group, and a service manager's SIGTERM (systemd) to every process
of the service: the fork server, still loading the readers, and the workers it forks (which inherit this) would
each print a KeyboardInterrupt traceback of their own, or die before the run, which would then see its pool broken
and call the load failed. The run handles the signal (one line; the ledger says interrupted) and they die with it.

A worker being forked as its run abandons the pool finds the pool's semaphores and pipes gone before it started
anything (FileNotFoundError, EOFError): it ends without a traceback on the run's terminal.

Never import this anywhere else: it would tie the importing process to its own parent.
"""

import signal
import sys
from types import TracebackType

from flows.etl.workers import die_with_parent

for _signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_signum, signal.SIG_IGN)
die_with_parent()


def _quiet_when_run_gone(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """sys.excepthook of the fork server's children (multiprocessing.forkserver calls it when a worker fails to
    start): a worker whose run went away while it was forked has nothing to say."""
    if issubclass(kind, OSError | EOFError):
        return
    sys.__excepthook__(kind, value, tb)


sys.excepthook = _quiet_when_run_gone
