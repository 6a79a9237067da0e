"""Plex's watch history: who played which item when (``/status/sessions/history/all``).

Read as python-plexapi's ``PlexServer.history`` reads it (server.py; ``fetchItems`` in
base.py pages with ``X-Plex-Container-Start``/``-Size`` headers until ``totalSize``),
oldest first, from ``viewedAt >= since``, one account at a time (``accountID``: the owner
is 1, other users their plex.tv id; plexapi ``MyPlexUser.history``). The owner's token
sees every account's history. A row of deleted media has no ``ratingKey``; it is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
    return [p for p in map(_play, _rows(client, query, "reading Plex's watch history")) if p is not None]


def _rows(client: Any, query: str, doing: str) -> Iterator[Any]:
    """Every row of a paged listing, a page of ``PAGE`` at a time until ``totalSize``
    (plexapi base.py ``fetchItems``)."""
    start = 0
    while True:
        headers = {"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": str(PAGE)}
        with plex_errors(doing, client.url):
            root = client.server.query(query, headers=headers)
        rows = list(root)
        yield from rows
        start += len(rows)
        if not rows or start >= int(root.attrib.get("totalSize") or root.attrib.get("size") or 0):
            return


def _play(node) -> Play | None:
    a = node.attrib
    try:
        return Play(a["historyKey"], int(a["ratingKey"]), int(a["viewedAt"]), int(a.get("accountID") or 1))
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class Rated:
    rating_key: int
    user_rating: float | None  # 0-10; None: no rating (cleared)
    rated_at: int | None  # lastRatedAt (Plex's clock); None: not shown


def rated_since(client, section_key: int, since: int) -> list[Rated]:
    """The section's items rated at or after ``since`` (``lastRatedAt>>=``, a date filter of
    the section listing: plexapi library.py ``LibrarySection._manualFields``), with the
    token user's (the owner's) rating. Plex sends no notification for ratings: this is polled."""
    query = f"/library/sections/{int(section_key)}/all?type=1&lastRatedAt>>={int(since)}"
    found: list[Rated] = []
    for node in _rows(client, query, "reading Plex ratings"):
        a = node.attrib
        if a.get("ratingKey") and a.get("lastRatedAt"):
            rating = float(a["userRating"]) if a.get("userRating") else None
            found.append(Rated(int(a["ratingKey"]), rating, int(a["lastRatedAt"])))
    return found


def view_offset(client, rating_key: int) -> int:
    """The token user's (the owner's) resume point of an item, in ms (0: none, or watched)."""
    with plex_errors("reading an item's resume point", client.url):
        root = client.server.query(f"/library/metadata/{int(rating_key)}")
    for node in root:
        return int(node.attrib.get("viewOffset") or 0)
    return 0


def in_progress(client, section_key: int) -> dict[int, int]:
    """The section's items the token user (the owner) has a resume point in: ratingKey →
    ``viewOffset`` ms (``inProgress=1``, a boolean filter of the section listing: plexapi
    library.py ``LibrarySection.search``)."""
    query = f"/library/sections/{int(section_key)}/all?type=1&inProgress=1"
    found: dict[int, int] = {}
    for node in _rows(client, query, "reading Plex's resume points"):
        a = node.attrib
        if a.get("ratingKey") and int(a.get("viewOffset") or 0) > 0:
            found[int(a["ratingKey"])] = int(a["viewOffset"])
    return found
