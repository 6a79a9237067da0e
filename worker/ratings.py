"""Plex ratings back into Stash (the owner's only: the owner's token sees only the owner's
``userRating``; resume points: worker/resume.py).

``winner`` is the one rule for both directions (``RatingRule``), applied within a sync
(worker/sync.py) and by the poll here, which brings Plex's to Stash (Stash's go by the sync its
scene hook queued). Plex sends no event for ratings, so the synced sections are read for items
rated since the last look (a watermark in Plex's clock), plus the items last seen rated, whose
rating may have been cleared without a ``lastRatedAt``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.clock import rfc3339
from plex.desired import plex_rating
from plex.history import Rated, rated_since
from plex.plan import Desired, ItemPlan, Written, rating_change
from validation.fields import RATING, rating_text

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.client import PlexClient, PlexItemState
    from plex.index import LibraryIndex
    from stash.client import StashClient
    from sync_queue.ledger import Ledger
    from sync_queue.plays import PlayJournal
    from validation.metadata import SceneMetadata

OVERLAP_S = 120
STASH, PLEX = "stash", "plex"
Stamps = tuple[float | None, float | None]  # (Stash's, Plex's) time of a rating's change, each on its server's clock
SAME_SECOND_S = 0.5  # two whole-second stamps on our clock closer than this are the same second
CLEARED_BATCH = 100  # items looked at per poll for a rating cleared without lastRatedAt (one request)
CLEARED_CURSOR = "ratings_cleared_after"  # the ledger's meta key: where the next look starts


def to_rating100(plex: str) -> int | None:
    """Plex's 0-10 rating (its text) as Stash's 1-100; no rating (or 0) is none.

    >>> to_rating100("7.5"), to_rating100(""), to_rating100("0.0")
    (75, None, None)
    """
    return round(float(plex) * 10) if plex and float(plex) else None


def agrees(rating100: int | None, plex: str) -> bool:
    """Whether the two sides show one rating: Stash's as Plex shows it (to the nearest 0.5), or
    Plex's as Stash gets it; neither rated is agreeing too.

    >>> agrees(73, "7.5"), agrees(73, "7.3"), agrees(80, "7.5"), agrees(None, ""), agrees(None, "4.0")
    (True, True, False, True, False)
    """
    plex_100 = to_rating100(plex)
    if rating100 is None or plex_100 is None:
        return rating100 is None and plex_100 is None
    return plex_100 == rating100 or plex_rating(rating100) == rating_text(float(plex))


def winner(
    stash: int | None,
    plex: str,
    seen: tuple[int | None, str] | None,
    written: str | None,
    stash_at: float | None,
    plex_at: float | None,
) -> str | None:
    """Whose rating is copied to the other side: ``STASH``, ``PLEX``, or None (they agree, or neither changed).

    ``stash``: the scene's rating100; ``plex``: the item's rating (``rating_text``); ``seen``: both
    as last seen (None: never; then Plex's last is what Stash2Plex wrote there, ``written``, and
    Stash's changed when Plex would show otherwise). ``stash_at``/``plex_at``: when each last
    changed, on our clock (each server's offset learnt from its replies, core/clock.py); both are whole seconds on their server, so a change less than
    ``SAME_SECOND_S`` later (the same second, give or take the offsets' error) is a tie, and a
    tie, or a time not known, is Stash's.

    >>> winner(40, "8.0", (40, "4.0"), "4.0", 2000.0, 1000.0)  # only Plex's changed: a later edit of the scene does not count
    'plex'
    >>> winner(60, "8.0", (40, "4.0"), "4.0", 1000.0, 1001.02), winner(60, "8.0", (40, "4.0"), "4.0", 1000.0, 1000.1)
    ('plex', 'stash')
    >>> winner(60, "", None, "4.0", None, None), winner(None, "8.0", None, None, None, None), winner(80, "8.0", (40, "4.0"), "", 0, 0)
    ('stash', 'plex', None)
    """
    if agrees(stash, plex):
        return None
    if seen is None:
        seen_plex = written or ""
        stash_changed = plex_rating(stash) != seen_plex
    else:
        stash_changed, seen_plex = stash != seen[0], seen[1]
    plex_changed = plex != seen_plex
    if stash_changed and plex_changed:
        if stash_at is None or plex_at is None:
            return STASH
        return PLEX if plex_at > stash_at + SAME_SECOND_S else STASH
    return PLEX if plex_changed else STASH if stash_changed else None


@dataclass
class RatingRule:
    """``winner`` against the servers and the ledger: the poll's, and a sync's (``plan``, ``written``)."""

    ledger: Ledger
    plex: PlexClient
    stash: StashClient
    log: StashLog

    def side(
        self, scene_id: int, rating_key: int, ratings: tuple[int | None, str], times: Stamps, written: str | None
    ) -> str | None:
        """``winner`` for one scene and its item: ``ratings`` (Stash's rating100, Plex's text) now,
        ``times`` (Stash's ``updated_at``, Plex's ``lastRatedAt``) each on its own server's clock;
        ``written``: the rating Stash2Plex last wrote to the item."""
        stash_at, plex_at = times
        return winner(
            *ratings,
            self.ledger.rating_seen(scene_id, rating_key),
            written,
            None if stash_at is None else self.stash.clock.to_ours(stash_at),
            None if plex_at is None else self.plex.clock.to_ours(plex_at),
        )

    def seen(self, scene_id: int, rating_key: int, stash: int | None, plex: str) -> None:
        """Both sides now show these ratings: the next changes are measured from them."""
        if agrees(stash, plex) and self.ledger.rating_seen(scene_id, rating_key) != (stash, plex):
            self.ledger.set_rating_seen(scene_id, rating_key, stash, plex)

    def _synced(self, scene: SceneMetadata, state: PlexItemState, written: str | None) -> str | None:
        ratings, times = (scene.rating100, state.fields.get(RATING, "")), (scene.updated_at, state.rated_at)
        return self.side(scene.id, state.rating_key, ratings, times, written)

    def plan(
        self, scene: SceneMetadata, state: PlexItemState, desired: Desired, written: Written | None
    ) -> tuple[Desired, Written | None]:
        """What the sync plans from: Plex's rating stays unless Stash's wins; Stash's cleared rating
        that wins clears Plex's, whoever gave it (the plan alone leaves one given in Plex)."""
        if self._synced(scene, state, written.fields.get(RATING) if written else None) != STASH:
            return dataclasses.replace(desired, fields={**desired.fields, RATING: None}), written
        if desired.fields.get(RATING) == "":
            base = written or Written()
            written = Written({**base.fields, RATING: state.fields.get(RATING, "")}, base.tags)
        return desired, written

    def written(self, scene: SceneMetadata, state: PlexItemState, plan: ItemPlan) -> None:
        """The item is written: Plex's rating, when it wins, goes to Stash now (the poll may have
        missed it: the scene had no item then); our ``sceneUpdate``'s hook finds both sides equal."""
        rerate, rating = rating_change(plan)
        if rerate:
            self.seen(scene.id, state.rating_key, scene.rating100, rating_text(rating))
            return
        prior = self.ledger.item(state.rating_key)
        side = self._synced(scene, state, prior.fields.get(RATING) if prior else None)
        plex = state.fields.get(RATING, "")
        self._settle(scene.id, state.rating_key, scene.rating100, plex, side)
        if side == PLEX:
            self.log.info(f"scene {scene.id}: the rating given in Plex ({plex or 'none'}) written to Stash")

    def _settle(self, scene_id: int, rating_key: int, stash: int | None, plex: str, side: str | None) -> None:
        """Plex's rating to Stash when it wins (Stash's goes by a sync), then both sides seen as they are."""
        if side == PLEX:
            stash = to_rating100(plex)
            self.stash.set_rating(scene_id, stash)
        self.seen(scene_id, rating_key, stash, plex)


@dataclass
class RatingsBack(RatingRule):
    """The poll: Plex's ratings into Stash."""

    index: LibraryIndex
    journal: PlayJournal

    def run(self) -> Counter[str]:
        """Items rated since the last look (Plex's clock, as ``lastRatedAt``), and the items last
        seen rated, whose rating may be gone without a ``lastRatedAt``."""
        counts: Counter[str] = Counter()
        server = self.plex.machine_id
        mark = self.journal.since(server, RATINGS_MARK)
        now = int(self.plex.now())
        since = now if mark is None else mark[0] - OVERLAP_S
        found: dict[int, Rated] = {}
        for section in self.index.sections:
            found.update((r.rating_key, r) for r in rated_since(self.plex, section.key, since))
        found.update(self._cleared(set(found)))
        for rated in found.values():
            counts[self._one(rated)] += 1
        self.journal.set_since(server, RATINGS_MARK, now, now if mark is None else mark[1])
        if counts["ratings_to_stash"]:
            self.log.info(f"{counts['ratings_to_stash']} Plex rating(s) written to Stash")
        return counts

    def _cleared(self, listed: set[int]) -> dict[int, Rated]:
        """Items last seen rated whose rating is gone (Plex may clear ``lastRatedAt`` with it, so
        the listing by ``lastRatedAt`` misses them): ``CLEARED_BATCH`` of them per look, in turn."""
        after = int(self.ledger.meta(CLEARED_CURSOR, 0))
        keys = self.ledger.rated_items(after, CLEARED_BATCH)
        self.ledger.set_meta(CLEARED_CURSOR, keys[-1] if len(keys) == CLEARED_BATCH else 0)
        states = self.plex.item_states([k for k in keys if k not in listed])
        return {k: Rated(k, None, s.rated_at) for k, s in states.items() if not s.fields.get(RATING)}

    def _one(self, rated: Rated) -> str:
        record = self.ledger.item(rated.rating_key)
        if record is None:
            return "ratings_not_synced"
        scene = self.stash.scene_state(record.scene_id)
        if scene is None:
            return "ratings_scene_gone"
        stash, plex = scene.get("rating100"), rating_text(rated.user_rating)
        changed = rfc3339(scene.get("updated_at") or "")
        times = (None if changed is None else changed.timestamp(), rated.rated_at)
        side = self.side(record.scene_id, rated.rating_key, (stash, plex), times, record.fields.get(RATING))
        self._settle(record.scene_id, rated.rating_key, stash, plex, side)
        # Stash's winning: the scene hook of its change queued the sync that writes it to Plex
        return {PLEX: "ratings_to_stash", STASH: "ratings_stash_wins"}.get(side or "", "ratings_agree")


RATINGS_MARK = -1  # the journal's "since" row for ratings (account ids are >= 1)
