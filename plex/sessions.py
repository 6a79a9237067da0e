"""Who is playing what: ``/status/sessions``, each playback session's account and state, and
``SessionAccounts``: which account each playback is, learnt at the session's first report.

A ``playing`` notification names no account (``shared/contracts/plex-events.md`` §1 and §7);
PlexTraktSync and Tautulli look the session up here. Each entry is the item being played with
its ``sessionKey``, a ``User`` (``id``: 1 for the server owner, else the account's plex.tv
id; ``title``) and a ``Player`` whose ``state`` is ``playing``, ``paused`` or ``buffering``,
read as python-plexapi's ``PlexServer.sessions()`` reads it (server.py; base.py
``PlexSession._loadData``; client.py ``PlexClient._loadData``). A session is gone from it by the
time it stopped, and a ``stopped`` frame names no account (PlexTraktSync ``WatchStateUpdater``),
so the account is learnt while the session plays. The owner's token reads every account's sessions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from core.errors import Stash2PlexError
from plex.client import as_int
from plex.errors import plex_errors
from plex.notifications import PlaybackState

PATH = "/status/sessions"
KEEP = 1000  # sessions remembered at most (a session whose stop never came is forgotten in time)


@dataclass(frozen=True)
class Session:
    key: str
    rating_key: int
    account: int | None
    state: str  # the player's


def sessions(client) -> list[Session]:
    """Every playback Plex has now (one request)."""
    with plex_errors("reading Plex's playback sessions", client.url):
        root = client.server.query(PATH)
    found = []
    for node in root:
        user, player, a = node.find("User"), node.find("Player"), node.attrib
        key, account = as_int(a.get("ratingKey")), as_int(user.attrib.get("id")) if user is not None else None
        if a.get("sessionKey") and key is not None:
            state = player.attrib.get("state", "") if player is not None else ""
            found.append(Session(a["sessionKey"], key, account, state))
    return found


def playing_sessions(client) -> dict[str, str]:
    """{session key: its player's state} of every playback Plex has now."""
    return {s.key: s.state for s in sessions(client)}


class SessionAccounts:
    def __init__(self, client) -> None:
        self.client = client
        self._known: dict[tuple[str, int], int] = {}  # (sessionKey, ratingKey) → account id
        self._lock = threading.Lock()

    def learn(self, event: PlaybackState) -> None:
        """A session's report: its account looked up unless known (raises our errors)."""
        with self._lock:
            if (event.session_key, event.rating_key) in self._known:
                return
        found = {(s.key, s.rating_key): s.account for s in sessions(self.client) if s.account is not None}
        with self._lock:
            self._known.update(found)
            for stale in list(self._known)[: max(0, len(self._known) - KEEP)]:
                del self._known[stale]

    def stopped(self, event: PlaybackState) -> int | None:
        """The stopped session's account (forgotten then); None when it cannot be known."""
        try:
            self.learn(event)  # a session whose reports came before we listened
        except Stash2PlexError:
            pass
        with self._lock:
            return self._known.pop((event.session_key, event.rating_key), None)
