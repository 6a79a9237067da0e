"""Which errors are ours, said in words, and which are unexpected (a bug of ours, worth its
traceback): one answer for a hook's or a task's reply (app/main.py), the command line and
the drainer. Standard library and lean modules only: a hook's error goes through it."""

from __future__ import annotations

from core.errors import Stash2PlexError
from sync_queue.sqlite import disk_fault, os_fault


def in_words(exc: BaseException) -> Stash2PlexError | None:
    """The error as the user is told it: ours as raised, a data file the disk refused or the
    data folder damaged named with the path and what to do (sync_queue/sqlite.py); None
    when it is unexpected."""
    return disk_fault(exc) or os_fault(exc) or (exc if isinstance(exc, Stash2PlexError) else None)
