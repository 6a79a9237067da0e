"""Plex's watch history: who played which item when (``/status/sessions/history/all``).

Read as python-plexapi's ``PlexServer.history`` reads it (server.py; ``fetchItems`` in
base.py pages with ``X-Plex-Container-Start``/``-Size`` headers until ``totalSize``),
oldest first, from ``viewedAt >= since``, one account at a time (``accountID``: the owner
is 1, other users their plex.tv id; plexapi ``MyPlexUser.history``). The owner's token
sees every account's history. A row of deleted media has no ``ratingKey``; it is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from plex.errors import plex_errors

PAGE = 100  # plexapi's container_size
PATH = "/status/sessions/history/all"


@dataclass(frozen=True)
class Play:
    history_key: str  # Plex's id of this play: never reused
    rating_key: int
    viewed_at: int  # epoch seconds
    account_id: int


def read_history(client, account_id: int, since: int | None) -> list[Play]:
    """Every play of ``account_id`` from ``since`` (epoch seconds, inclusive) on, oldest first."""
    query = f"{PATH}?sort=viewedAt:asc&accountID={int(account_id)}"
    if since is not None:
        query += f"&viewedAt>={int(since)}"  # the key 'viewedAt>' unencoded, as plexapi sends it
    plays: list[Play] = []
    start = 0
    while True:
        headers = {"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": str(PAGE)}
        with plex_errors("reading Plex's watch history", client.url):
            root = client.server.query(query, headers=headers)
        rows = list(root)
        plays.extend(p for p in map(_play, rows) if p is not None)
        start += len(rows)
        total = int(root.attrib.get("totalSize") or root.attrib.get("size") or 0)
        if not rows or start >= total:
            return plays


def _play(node) -> Play | None:
    a = node.attrib
    try:
        return Play(a["historyKey"], int(a["ratingKey"]), int(a["viewedAt"]), int(a.get("accountID") or 1))
    except (KeyError, ValueError):
        return None
