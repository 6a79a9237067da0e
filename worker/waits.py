"""The jobs this process holds because Plex has no item at their file yet, by Plex path.

The worker notes a job here when it parks it after ``PlexNotFound`` (with the mapped
paths it looked for) and forgets it when it takes the job again. When Plex announces
an item at one of those paths, ``wake`` marks the jobs: the worker takes them at its
next look instead of at their timed retry. The timed retry stays as it was, so a job
whose event never comes (the listener was down, Plex sent none) is not held back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from validation.pathmap import AS_IS, PathMap

Key = tuple[str, int]  # (queue table, row id): a taken job's identity


class PlexWaits:
    def __init__(self, paths: PathMap = AS_IS, on_wait: Callable[[], None] | None = None) -> None:
        self._fold = paths.key
        self._lock = threading.Lock()
        self._paths: dict[Key, frozenset[str]] = {}  # the paths each job waits for, as ``PathMap.key`` compares them
        self._woken: set[Key] = set()
        self.on_wait = on_wait  # called when a job starts waiting (e.g. to start listening to Plex)

    def wait_for(self, key: Key, paths: Iterable[str]) -> None:
        folded = frozenset(self._fold(p) for p in paths)
        with self._lock:
            self._paths[key] = folded
        if self.on_wait is not None and folded:
            self.on_wait()

    def forget(self, key: Key) -> None:
        with self._lock:
            self._paths.pop(key, None)
            self._woken.discard(key)

    def wake(self, paths: Iterable[str]) -> int:
        """Mark the jobs waiting for any of ``paths``; returns how many."""
        wanted = {self._fold(p) for p in paths}
        with self._lock:
            keys = {key for key, waited in self._paths.items() if waited & wanted}
            self._woken |= keys
            return len(keys)

    def paths(self) -> list[str]:
        """Every path a job waits for (as ``PathMap.key`` compares it)."""
        with self._lock:
            return sorted(set().union(*self._paths.values()))

    def woken(self, key: Key) -> bool:
        with self._lock:
            return key in self._woken

    def waiting(self) -> bool:
        with self._lock:
            return bool(self._paths)

    def __len__(self) -> int:
        with self._lock:
            return len(self._paths)
