"""Who is playing what: ``/status/sessions``, each playback session's account and state.

A ``playing`` notification names no account (``shared/contracts/plex-events.md`` §1 and §7);
PlexTraktSync and Tautulli look the session up here. Each entry is the item being played with
its ``sessionKey``, a ``User`` (``id``: 1 for the server owner, else the account's plex.tv
id; ``title``) and a ``Player`` whose ``state`` is ``playing``, ``paused`` or ``buffering``,
read as python-plexapi's ``PlexServer.sessions()`` reads it (server.py; base.py
``PlexSession._loadData``; client.py ``PlexClient._loadData``). A session is gone from it by the
time it stopped. The owner's token reads every account's sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

from plex.errors import plex_errors

PATH = "/status/sessions"


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
        account = user.attrib.get("id", "") if user is not None else ""
        if a.get("sessionKey") and a.get("ratingKey", "").isdigit():
            state = player.attrib.get("state", "") if player is not None else ""
            found.append(
                Session(a["sessionKey"], int(a["ratingKey"]), int(account) if account.isdigit() else None, state)
            )
    return found


def session_accounts(client) -> dict[tuple[str, int], int]:
    """(sessionKey, ratingKey) → account id of every playback Plex has now."""
    return {(s.key, s.rating_key): s.account for s in sessions(client) if s.account is not None}


def playing_sessions(client) -> dict[str, str]:
    """{session key: its player's state} of every playback Plex has now."""
    return {s.key: s.state for s in sessions(client)}
