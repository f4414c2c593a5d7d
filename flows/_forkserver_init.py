"""Imported only by the extraction pool's fork server (as its preload): make it die with the run that started it.

Never import this anywhere else: it would tie the importing process to its own parent.
"""

from flows.workers import die_with_parent

die_with_parent()
