"""Plex's watch history and per-user play state, for the Plex emulator.

``GET /status/sessions/history/all`` as python-plexapi reads it (server.py
``PlexServer.history``; base.py ``fetchItems`` pages with ``X-Plex-Container-Start`` /
``-Size`` headers and stops at ``totalSize``; library.py ``PlexHistory._loadData`` reads
the rows): ``<Video historyKey="/status/sessions/history/<id>" ratingKey key
librarySectionID title type viewedAt accountID deviceID/>``. Filters: ``accountID``,
``librarySectionID``, ``metadataItemID`` and ``viewedAt>=`` (plexapi's ``mindate`` puts the
key ``viewedAt>`` in the query unencoded, so it arrives as ``viewedAt>=<epoch>``: key
``viewedAt>``); ``sort=viewedAt:asc|desc``. Whether PMS compares inclusively is not known
(the contract's open question): the emulator does, which is what the wire says.

A play (``play``) makes a history row and moves the item's ``viewCount`` and
``lastViewedAt`` for that account (python-plexapi video.py ``Video._loadData``); the
emulator shows the owner's (account 1) state on items, as a PMS answers the owner's
token (plexapi issue #21). "Mark as played" makes no history row (plexapi
tests/test_history.py), since PMS 1.40.0.7998; before it, each "Mark as played" wrote a row
(python-plexapi PR #1366, "No longer create a view history entry for items marked as played").

Two quirks of real servers (``second_row``, ``forget_item``): some clients make a second row
for one viewing, at the same time or a minute later (edde746/plezy issue #1740, PMS
1.30.0.6486; Tautulli issue #1053), and a row of an item Plex deleted (trash emptied) keeps
its ``historyKey`` and time but loses its ``ratingKey`` and ``key`` (blacktwin/JBOPS issue
#119: "the rating key can be deleted or removed if the item is deleted and Plex has Emptied
Trash"; plex/history.py skips such rows).
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

OWNER = 1


@dataclass
class Row:
    history_id: int
    rating_key: int
    section: int
    title: str
    viewed_at: int
    account_id: int
    device_id: int = 1
    deleted: bool = False  # the item is gone: the row shows no ratingKey


@dataclass
class History:
    rows: list[Row] = field(default_factory=list)
    views: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)  # (ratingKey, account) → state
    lock: threading.Lock = field(default_factory=threading.Lock)

    def play(self, rating_key: int, section: int, title: str, viewed_at: int, account_id: int = OWNER) -> Row:
        with self.lock:
            row = Row(len(self.rows) + 1, rating_key, section, title, viewed_at, account_id)
            self.rows.append(row)
            state = self.views.setdefault((rating_key, account_id), {"viewCount": 0, "viewOffset": 0})
            state["viewCount"] += 1
            state["lastViewedAt"] = max(viewed_at, state.get("lastViewedAt", 0))
            state["viewOffset"] = 0
            return row

    def second_row(self, row: Row, after_s: int) -> Row:
        """The second row some clients write for one viewing, ``after_s`` seconds after the first."""
        with self.lock:
            again = Row(
                len(self.rows) + 1, row.rating_key, row.section, row.title, row.viewed_at + after_s, row.account_id
            )
            self.rows.append(again)
            state = self.views[(row.rating_key, row.account_id)]
            state["viewCount"] += 1  # a row as ``play`` writes one: the count and the last view move
            state["lastViewedAt"] = max(again.viewed_at, state.get("lastViewedAt", 0))
            return again

    def forget_item(self, rating_key: int) -> None:
        """The item was deleted: its rows stay, without its ratingKey."""
        with self.lock:
            for row in self.rows:
                if row.rating_key == rating_key:
                    row.deleted = True

    def set_offset(self, rating_key: int, offset_ms: int, account_id: int = OWNER) -> None:
        with self.lock:
            self.views.setdefault((rating_key, account_id), {"viewCount": 0, "viewOffset": 0})["viewOffset"] = offset_ms

    def item_attrs(self, rating_key: int) -> dict[str, str]:
        """The owner's state on an item's XML (absent when zero, as PMS leaves them out)."""
        with self.lock:
            state = self.views.get((rating_key, OWNER), {})
        return {k: str(v) for k, v in state.items() if v}

    def select(self, query: dict[str, list[str]]) -> list[Row]:
        def first(name: str) -> str | None:
            values = query.get(name)
            return values[0] if values else None

        with self.lock:
            rows = list(self.rows)
        for name, attr in (
            ("accountID", "account_id"),
            ("librarySectionID", "section"),
            ("metadataItemID", "rating_key"),
        ):
            value = first(name)
            if value is not None:
                rows = [r for r in rows if getattr(r, attr) == int(value) and not (attr == "rating_key" and r.deleted)]
        since = first("viewedAt>")
        if since is not None:
            rows = [r for r in rows if r.viewed_at >= int(since)]
        descending = (first("sort") or "viewedAt:desc").endswith(":desc")
        return sorted(rows, key=lambda r: (r.viewed_at, r.history_id), reverse=descending)


def render_rows(rows: list[Row], start: int, size: int, container) -> ET.Element:
    page = rows[start : start + max(size, 0)]
    mc = container(size=len(page), totalSize=len(rows), offset=start)
    for r in page:
        attrs: dict[str, Any] = {
            "historyKey": f"/status/sessions/history/{r.history_id}",
            **({} if r.deleted else {"key": f"/library/metadata/{r.rating_key}", "ratingKey": r.rating_key}),
            "librarySectionID": r.section,
            "title": r.title,
            "type": "movie",
            "viewedAt": r.viewed_at,
            "accountID": r.account_id,
            "deviceID": r.device_id,
        }
        ET.SubElement(mc, "Video", {k: str(v) for k, v in attrs.items()})
    return mc
