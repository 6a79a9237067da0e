"""Plex's watch history: who played which item when (``/status/sessions/history/all``).

Read as python-plexapi's ``PlexServer.history`` reads it, through its public paging (base.py
``fetchItems``: ``X-Plex-Container-Start``/``-Size`` headers until ``totalSize``), oldest first, from ``viewedAt >= since``, one account at a time (``accountID``: the owner
is 1, other users their plex.tv id; plexapi ``MyPlexUser.history``). The owner's token
sees every account's history. A row of deleted media has no ``ratingKey``; it is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
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


def _rows(client: Any, query: str, doing: str) -> list[Any]:
    """Every item of a paged listing as plexapi's objects, a page of ``PAGE`` at a time."""
    with plex_errors(doing, client.url):
        return list(client.server.fetchItems(query, container_size=PAGE))


def _epoch(moment: datetime | None) -> int | None:
    """plexapi's datetime of an epoch attribute (local and naive: utils.py ``toDatetime``) as it came."""
    return None if moment is None else int(moment.timestamp())


def _known(value: Any) -> Any:
    """plexapi's number, or None where it had none or could not read it (utils.py ``cast``: NaN)."""
    return None if value is None or value != value else value


def _play(item) -> Play | None:
    viewed_at, rating_key = _epoch(item.viewedAt), _known(item.ratingKey)
    if not item.historyKey or rating_key is None or viewed_at is None:
        return None
    return Play(item.historyKey, rating_key, viewed_at, _known(item.accountID) or 1)


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
    items = _rows(client, query, "reading Plex ratings")
    rated = [(item, _epoch(item.lastRatedAt)) for item in items if _known(item.ratingKey) is not None]
    return [Rated(item.ratingKey, _known(item.userRating), at) for item, at in rated if at is not None]


def view_offset(client, rating_key: int) -> int:
    """The token user's (the owner's) resume point of an item, in ms (0: none, or watched)."""
    items = _rows(client, f"/library/metadata/{int(rating_key)}", "reading an item's resume point")
    return next((_known(item.viewOffset) or 0 for item in items), 0)


def in_progress(client, section_key: int) -> dict[int, int]:
    """The section's items the token user (the owner) has a resume point in: ratingKey →
    ``viewOffset`` ms (``inProgress=1``, a boolean filter of the section listing: plexapi
    library.py ``LibrarySection.search``)."""
    query = f"/library/sections/{int(section_key)}/all?type=1&inProgress=1"
    items = _rows(client, query, "reading Plex's resume points")
    return {
        item.ratingKey: item.viewOffset
        for item in items
        if (_known(item.viewOffset) or 0) > 0 and _known(item.ratingKey) is not None
    }
