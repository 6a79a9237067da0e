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


class PlexRequests:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.limit: int | None = None
        self.active = 0
        self._waited = _Waited()

    def bound(self, limit: int | None) -> None:
        """At most ``limit`` requests at Plex at once from now on (None: no bound)."""
        if limit == self.limit:
            return
        with self._cond:
            self.limit = limit
            self._cond.notify_all()

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
            with self._cond:
                while self.limit is not None and self.active >= self.limit:
                    self._cond.wait()
                self.active += 1
            held = time.perf_counter() - started  # ours, not Plex's: taken off the answer's time
            self._waited.seconds -= held
            try:
                return send(request, **kwargs)
            finally:
                with self._cond:
                    self.active -= 1
                    self._cond.notify()

        return bounded_send

    def _answered(self, response: Any, *args: Any, **kwargs: Any) -> None:
        self._waited.seconds += response.elapsed.total_seconds()
