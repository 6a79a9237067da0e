"""Whether someone is watching Plex now: bulk work then leaves Plex a worker (worker/gradient.py).

Two sources, one answer. A notification listener's ``playing`` frames (plex/notifications.py
``PlaybackState``) say at once when a session plays, pauses or stops; without a connected listener,
``/status/sessions`` (Plex's playing sessions, plex/sessions.py ``playing_sessions``) is read every
``POLL_S`` while a bulk run asks (less often when Plex is slow to answer it, so the looks never
take a small Plex's time from the writes), in a thread of its own so the run never waits for it. A session
counts while ``playing`` or ``buffering``; a frame-fed one that Plex has not mentioned for
``QUIET_S`` (clients report every ~10 s: shared/contracts/plex-events.md §1) is over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from core.errors import PlexAuthError, Stash2PlexError
from plex.notifications import Notification, PlaybackState

POLL_S = 2.0  # a session that starts during a bulk run is seen within this (and one request)
POLL_COST = 20  # ... or within this many times the last look's answer time: looks keep under 5% of a Plex worker
QUIET_S = 30.0
WATCHING = frozenset({"playing", "buffering"})


class Viewers:
    """``sessions() -> {session key: state}`` reads Plex's playing sessions (raising our
    errors); ``listening() -> bool``: a listener is connected, its frames are the source."""

    def __init__(
        self,
        sessions: Callable[[], dict[str, str]],
        listening: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions, self._listening, self._clock = sessions, listening, clock
        self._heard: dict[str, tuple[str, float]] = {}  # session → (state, when), from frames
        self._polled: dict[str, str] = {}
        self._polled_at: float | None = None
        self._every = POLL_S
        self._polling = threading.Lock()
        self._refused = False  # the token may not read sessions (a managed user's): frames only

    def saw(self, event: Notification) -> None:
        """A listener's event (the others are not ours)."""
        if isinstance(event, PlaybackState):
            key = event.session_key or str(event.rating_key)
            self._heard[key] = (event.state, self._clock())

    def watching(self, poll: bool = False) -> bool:
        """Someone is watching now; ``poll``: a bulk run asks (reads the sessions when due)."""
        now = self._clock()
        if self._listening():
            return any(state in WATCHING and now - at < QUIET_S for state, at in self._heard.values())
        if poll and not self._refused and (self._polled_at is None or now - self._polled_at >= self._every):
            self._poll_soon(now)
        return any(state in WATCHING for state in self._polled.values())

    def looked(self, timeout: float = 5.0) -> None:
        """Wait for a look at Plex's sessions under way (tests; a run never waits)."""
        if self._polling.acquire(timeout=timeout):
            self._polling.release()

    def _poll_soon(self, now: float) -> None:
        if not self._polling.acquire(blocking=False):
            return  # the last look is still under way
        self._polled_at = now
        threading.Thread(target=self._poll, name="s2p-plex-sessions", daemon=True).start()

    def _poll(self) -> None:
        started = self._clock()
        try:
            self._polled = self._sessions()
        except PlexAuthError:
            self._refused, self._polled = True, {}
        except Stash2PlexError:
            pass  # Plex trouble: the run's own requests meet it; the last answer stands
        finally:
            self._polled_at = self._clock()
            self._every = max(POLL_S, POLL_COST * (self._polled_at - started))
            self._polling.release()
