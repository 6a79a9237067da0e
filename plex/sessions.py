"""Who is playing what: ``/status/sessions``, the account of each playback session.

A ``playing`` notification names no account (``shared/contracts/plex-events.md`` §1 and §7);
PlexTraktSync and Tautulli look the session up here. Each entry is the item being played with
its ``sessionKey`` and a ``User`` (``id``: 1 for the server owner, else the account's plex.tv
id; ``title``), read as python-plexapi's ``PlexServer.sessions()`` reads it (server.py; base.py
``PlexSession._loadData``). A session is gone from it by the time it stopped.
"""

from __future__ import annotations

from plex.errors import plex_errors

PATH = "/status/sessions"


def session_accounts(client) -> dict[tuple[str, int], int]:
    """(sessionKey, ratingKey) → account id of every playback Plex has now."""
    with plex_errors("reading Plex's playback sessions", client.url):
        root = client.server.query(PATH)
    found: dict[tuple[str, int], int] = {}
    for node in root:
        user, a = node.find("User"), node.attrib
        account = user.attrib.get("id", "") if user is not None else ""
        if a.get("sessionKey") and a.get("ratingKey", "").isdigit() and account.isdigit():
            found[(a["sessionKey"], int(a["ratingKey"]))] = int(account)
    return found
