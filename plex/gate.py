"""How this process's requests meet Plex: at most ``limit`` of them at Plex at once, and how
long Plex took to answer each thread's.

The bound (None: none) leaves Plex's other workers to people watching (worker/gradient.py
``headroom``); it wraps the transport adapter's ``send``, so every request through the client's
session counts, reads and the sessions look included. ``waited()`` is the time from sending a
request to Plex's answer's headers (requests sessions.py ``Session.send`` sets ``elapsed``
around the adapter's ``send``), without the time a request waited here for the bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


class _Waited(threading.local):
    seconds = 0.0  # this thread's requests' time at Plex since it last asked


class Limiter:
    """At most ``limit`` holders at once (None: no bound); the limit may change at any time
    (pacing). Once ``closed``, waiters go in at once (and see ``closed``: they begin nothing).
    ``acquire`` returns a ticket; ``release(ticket)`` says whether its holder was alone
    (no other holder from its entry to its exit: what Plex does unloaded, worker/gradient.py).
    The pipeline bounds its syncs with one (worker/pipeline.py), ``PlexRequests`` the requests."""

    def __init__(self, limit: int | None = None) -> None:
        self._cond = threading.Condition()
        self.limit = limit
        self.active = 0
        self.closed = False
        self._entries = 0

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def bound(self, limit: int | None) -> None:
        """At most ``limit`` holders at once from now on (None: no bound)."""
        if limit == self.limit:
            return  # the common case, once per settled scene: no lock, no wake-ups
        with self._cond:
            self.limit = limit
            self._cond.notify_all()

    def acquire(self) -> tuple[int, bool]:
        with self._cond:
            while self.limit is not None and self.active >= self.limit and not self.closed:
                self._cond.wait()
            self.active += 1
            self._entries += 1
            return self._entries, self.active == 1

    def release(self, ticket: tuple[int, bool]) -> bool:
        with self._cond:
            self.active -= 1
            self._cond.notify()
            entry, first = ticket
            return first and entry == self._entries


class PlexRequests(Limiter):
    def __init__(self) -> None:
        super().__init__()
        self._waited = _Waited()

    def install(self, session: Any, adapter: Any) -> None:
        """Bound ``adapter``'s requests and time the answers of ``session``'s."""
        adapter.send = self._bounded(adapter.send)
        session.hooks["response"].append(self._answered)

    def waited(self) -> float:
        """Seconds this thread's requests waited for Plex's answers since it last asked (then from 0)."""
        seconds, self._waited.seconds = self._waited.seconds, 0.0
        return seconds

    def _bounded(self, send: Callable[..., Any]) -> Callable[..., Any]:
        def bounded_send(request: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            ticket = self.acquire()
            self._waited.seconds -= time.perf_counter() - started  # ours, not Plex's: taken off the answer's time
            try:
                return send(request, **kwargs)
            finally:
                self.release(ticket)

        return bounded_send

    def _answered(self, response: Any, *args: Any, **kwargs: Any) -> None:
        self._waited.seconds += response.elapsed.total_seconds()
