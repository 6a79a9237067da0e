"""Which Plex account each playback is, remembered from the session's first reports.

A ``stopped`` frame names no account and its session has left ``/status/sessions`` by then
(PlexTraktSync ``WatchStateUpdater``), so the account is learnt while the session plays: its
first report looks the session up once (plex/sessions.py), later reports cost nothing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from plex.sessions import session_accounts

if TYPE_CHECKING:
    from plex.client import PlexClient
    from plex.notifications import PlaybackState

KEEP = 1000  # sessions remembered at most (a session whose stop never came is forgotten in time)


class SessionAccounts:
    def __init__(self, plex: PlexClient) -> None:
        self.plex = plex
        self._known: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def learn(self, event: PlaybackState) -> None:
        """A session's report: look its account up unless known."""
        if self._get(event) is None:
            self._read()

    def stopped(self, event: PlaybackState) -> int | None:
        """The stopped session's account (forgotten then); None when it cannot be known."""
        if self._get(event) is None:
            self._read()  # a session whose reports came before we listened
        with self._lock:
            return self._known.pop((event.session_key, event.rating_key), None)

    def _get(self, event: PlaybackState) -> int | None:
        with self._lock:
            return self._known.get((event.session_key, event.rating_key))

    def _read(self) -> None:
        found = session_accounts(self.plex)
        with self._lock:
            self._known.update(found)
            for stale in list(self._known)[: max(0, len(self._known) - KEEP)]:
                del self._known[stale]
