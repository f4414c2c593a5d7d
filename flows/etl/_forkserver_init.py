"""Imported only by the extraction pool's fork server (as its preload): make it die with the run that started it,
and leave Ctrl-C to the run.

A terminal's Ctrl-C goes to every process of its group: the fork server, still loading the readers, and the
workers it forks (which inherit this) would each print a KeyboardInterrupt traceback of their own. The run
handles Ctrl-C (one line, exit 130) and they die with it.

Never import this anywhere else: it would tie the importing process to its own parent.
"""

import signal

from flows.etl.workers import die_with_parent

signal.signal(signal.SIGINT, signal.SIG_IGN)
die_with_parent()
