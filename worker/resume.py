"""Plex resume points (the server owner's) back into Stash, only when they moved in Plex.

Plex gives the owner's token the owner's ``viewOffset`` only (python-plexapi issue #21), so these
are the owner's resume points. Each look (the timer, ``watch --once``, a stopped playback) compares
Plex's value with the one it saw last (``resume_seen`` in the ledger) and brings only a value that
changed there: a resume point Stash's own player saved since is kept, whatever another account did in
Plex. The first look only notes what Plex shows (from now on, as the plays import does). A changed
value is saved with ``sceneSaveActivity`` (``resume_time`` only) when it is 5 s or more from the
scene's; an item watched to the end has none in Plex, so Stash's is reset too.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plex.history import in_progress, view_offset

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.client import PlexClient
    from plex.index import LibraryIndex
    from stash.client import StashClient
    from sync_queue.ledger import Ledger

SEEN = "resume_seen"  # ledger meta: {ratingKey: viewOffset ms} of owned items Plex showed in progress
TOLERANCE_S = 5.0


@dataclass
class ResumeBack:
    plex: PlexClient
    stash: StashClient
    ledger: Ledger
    index: LibraryIndex
    log: StashLog
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)  # the timer and the events both look

    def run(self) -> Counter[str]:
        """Every owned item's resume point in the synced sections, against the last look."""
        with self._lock:  # a look and its record are one step: a stop's look never falls between
            showing: dict[int, int] = {}
            for section in self.index.sections:
                showing.update(in_progress(self.plex, section.key))
            owned = self.ledger.items(sorted(showing))
            now = {rk: offset for rk, offset in showing.items() if rk in owned}
            seen = self._seen()
            if seen is None:  # the first look: from now on
                self.log.info("Plex resume points go to Stash from now on")
                seen = now
            moved = [rk for rk in sorted(set(now) | set(seen)) if now.get(rk, 0) != seen.get(rk, 0)]
            counts = Counter(self._bring(rk, now.get(rk, 0)) for rk in moved)
            self._save(now)  # after the writes: one that failed is tried again at the next look
            return counts

    def item(self, rating_key: int) -> str:
        """One item's resume point (a playback of it stopped), against the last look."""
        if self.ledger.item(rating_key) is None:
            return "resume_not_synced"
        with self._lock:
            seen = self._seen()
            if seen is None:
                return "resume_first_look"
            offset = view_offset(self.plex, rating_key)
            outcome = "resume_same" if offset == seen.pop(rating_key, 0) else self._bring(rating_key, offset)
            self._save({**seen, rating_key: offset})
            return outcome

    def _seen(self) -> dict[int, int] | None:
        stored = self.ledger.meta(SEEN)
        return None if stored is None else {int(rk): int(offset) for rk, offset in stored.items()}

    def _save(self, seen: dict[int, int]) -> None:
        self.ledger.set_meta(SEEN, {str(rk): offset for rk, offset in seen.items() if offset})

    def _bring(self, rating_key: int, offset_ms: int) -> str:
        record = self.ledger.item(rating_key)
        scene = None if record is None else self.stash.scene_state(record.scene_id)
        seconds = offset_ms / 1000
        if record is None or scene is None or abs((scene.get("resume_time") or 0.0) - seconds) < TOLERANCE_S:
            return "resume_same"
        self.stash.save_resume(record.scene_id, seconds)
        return "resume_to_stash"
