"""Plex's playback sessions for the Plex emulator: ``GET /status/sessions``.

A playing item, as python-plexapi's ``PlexServer.sessions()`` reads it (server.py; base.py
``PlexSession._loadData``; media.py ``Session``; client.py ``PlexClient._loadData`` for the
``Player``): ``<Video ratingKey key title type sessionKey viewOffset>`` with a ``User id title
thumb`` (the owner is id 1: ``PlexSession.user``), a ``Player machineIdentifier state title
product userID`` and a ``Session id bandwidth location``. Every account's sessions are listed to
the owner's token (the contract, plex-events.md §4). Each session sends ``playing``
notifications (no account in them: PlexTraktSync PR #148's capture) and, at its end, ``stopped``;
by then it is gone from ``/status/sessions`` (PlexTraktSync ``WatchStateUpdater``'s comment), so a
reader must have learnt the account from the reports before.
"""

from __future__ import annotations

import itertools
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

OWNER = 1


@dataclass
class Playback:
    session_key: str
    rating_key: int
    title: str
    account_id: int
    offset_ms: int = 0
    state: str = "playing"


@dataclass
class Sessions:
    live: dict[str, Playback] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _keys: itertools.count = field(default_factory=lambda: itertools.count(1))

    def start(self, rating_key: int, title: str, account_id: int) -> Playback:
        with self.lock:
            playback = Playback(str(next(self._keys)), rating_key, title, account_id)
            self.live[playback.session_key] = playback
            return playback

    def end(self, session_key: str) -> Playback:
        with self.lock:
            return self.live.pop(session_key)

    def render(self, container) -> ET.Element:
        with self.lock:
            playing = list(self.live.values())
        mc = container(size=len(playing))
        for p in playing:
            video = ET.SubElement(
                mc,
                "Video",
                {
                    "ratingKey": str(p.rating_key),
                    "key": f"/library/metadata/{p.rating_key}",
                    "title": p.title,
                    "type": "movie",
                    "sessionKey": p.session_key,
                    "viewOffset": str(p.offset_ms),
                },
            )
            user = "owner" if p.account_id == OWNER else f"user{p.account_id}"
            ET.SubElement(video, "User", id=str(p.account_id), title=user, thumb="")
            player = {"machineIdentifier": f"emu-player-{p.session_key}", "state": p.state, "title": "Emulated player"}
            ET.SubElement(video, "Player", {**player, "product": "Plex Web", "userID": str(p.account_id)})
            ET.SubElement(video, "Session", id=f"emu-session-{p.session_key}", bandwidth="4000", location="lan")
        return mc
