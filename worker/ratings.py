"""Plex ratings back into Stash (the owner's only: the owner's token sees only the owner's
``userRating``; resume points: worker/resume.py).

Ratings: Plex sends no event for them, so the synced sections are read for items rated since
``lastRatedAt``; a Plex rating that wins (docs/architecture.md, "Plex back into Stash", says which)
is saved as ``rating100 = round(userRating × 10)``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from plex.desired import half_stars
from plex.history import rated_since
from stash.timestamps import parse as parse_timestamp
from validation.fields import RATING, rating_text

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.client import PlexClient
    from plex.history import Rated
    from plex.index import LibraryIndex
    from stash.client import StashClient
    from sync_queue.ledger import Ledger
    from sync_queue.plays import PlayJournal

OVERLAP_S = 120
RATING_TOLERANCE = 5


def to_rating100(user_rating: float | None) -> int | None:
    """Plex's 0-10 as Stash's 1-100; no rating (or 0) is none.

    >>> to_rating100(7.5), to_rating100(None), to_rating100(0.0)
    (75, None, None)
    """
    return round(user_rating * 10) if user_rating else None


def agrees(rating100: int | None, user_rating: float | None) -> bool:
    want = to_rating100(user_rating)
    if want is None or rating100 is None:
        return want is None and not rating100
    return abs(rating100 - want) <= RATING_TOLERANCE


class RatingsBack:
    def __init__(
        self,
        plex: PlexClient,
        stash: StashClient,
        ledger: Ledger,
        index: LibraryIndex,
        journal: PlayJournal,
        log: StashLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.plex, self.stash, self.ledger, self.index = plex, stash, ledger, index
        self.journal, self.log, self.clock = journal, log, clock

    def run(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        mark = self.journal.since(RATINGS_MARK)
        now = int(self.clock())
        since = now if mark is None else mark[0] - OVERLAP_S
        for section in self.index.sections:
            for rated in rated_since(self.plex, section.key, since):
                counts[self._one(rated)] += 1
        self.journal.set_since(RATINGS_MARK, now, now if mark is None else mark[1])
        if counts["ratings_to_stash"]:
            self.log.info(f"{counts['ratings_to_stash']} Plex rating(s) written to Stash")
        return counts

    def _one(self, rated: Rated) -> str:
        record = self.ledger.item(rated.rating_key)
        if record is None:
            return "ratings_not_synced"
        if rating_text(rated.user_rating) == record.fields.get(RATING, ""):
            return "ratings_ours"
        scene = self.stash.scene_state(record.scene_id)
        if scene is None or agrees(scene.get("rating100"), rated.user_rating):
            return "ratings_agree"
        changed = parse_timestamp(scene.get("updated_at") or "")
        if changed is not None and changed.timestamp() >= rated.rated_at:
            return self._stash_newer(record.scene_id, rated.rating_key, scene.get("rating100"))
        self.stash.set_rating(record.scene_id, to_rating100(rated.user_rating))
        return "ratings_to_stash"

    def _stash_newer(self, scene_id: int, rating_key: int, rating100: int | None) -> str:
        """Stash's rating changed after the one given in Plex: Plex shows Stash's again. The
        scene's sync may have written it before the user rated in Plex (the same second: a tie
        is Stash's), and an unchanged scene is not synced again. A scene without a rating
        leaves the user's alone, as the sync does."""
        want = half_stars(rating100)
        record = self.ledger.get_many([scene_id]).get(scene_id)
        if not want or record is None or record.rating_key != rating_key:
            return "ratings_stash_newer"
        self.plex.rate(rating_key, float(want))
        record.fields[RATING] = want
        self.ledger.save(record)
        self.log.info(f"Plex item {rating_key}: scene {scene_id}'s rating, changed in Stash since, written again")
        return "ratings_to_plex"


RATINGS_MARK = -1  # the journal's "since" row for ratings (account ids are >= 1)
