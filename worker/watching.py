"""What the resident ``watch`` process does with Plex's events, and on its timer.

An item Stash2Plex owns that Plex processed again (a user's edit, an agent refresh) is
checked and repaired as ``reconcile`` would (``worker/drift.py``). A playback that stopped may have become a watch-history entry (PMS scrobbles at the
end; the websocket says nothing of it) and has moved the item's resume point: with
``import_plays`` the history is read then, with ``import_resume`` the resume point. The
timer (``poll``) reads the history again and, with ``import_ratings``, Plex's ratings
(Plex announces none): the websocket is a trigger, never the only path, so what happened
while the process was down or killed is caught up by the next read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from core.errors import Stash2PlexError
from plex.notifications import Event, ItemProcessed, PlaybackState

if TYPE_CHECKING:
    from core.log import StashLog
    from validation.config import Settings
    from worker.drift import DriftWatch
    from worker.plays import PlayImport
    from worker.ratings import RatingsBack


class Watching:
    def __init__(
        self,
        settings: Settings,
        play_import: Callable[[], PlayImport],
        ratings: Callable[[], RatingsBack],
        drift: Callable[[], DriftWatch],
        log: StashLog,
    ) -> None:
        self.settings, self.play_import, self.ratings, self.log = settings, play_import, ratings, log
        self.drift = drift

    def __call__(self, event: Event) -> None:
        if isinstance(event, ItemProcessed):
            self._guarded("drift check", lambda: self.drift()(event))
        if isinstance(event, PlaybackState) and event.state == "stopped":
            self._guarded("plays", self._plays)
            if self.settings.import_resume:
                self._guarded("resume point", lambda: self.ratings().resume(event.rating_key))

    def poll(self) -> None:
        """Read what Plex recorded since the last look (each setting that is on)."""
        self._guarded("plays", self._plays)
        self._guarded("drift check", lambda: self.drift().run())
        if self.settings.import_ratings:
            self._guarded("ratings", lambda: self.ratings().run())

    def _plays(self) -> None:
        if self.settings.import_plays:
            self.play_import().run(self.settings.play_accounts)

    def _guarded(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Stash2PlexError as exc:  # tried again at the next event or poll
            self.log.warning(f"Plex {what} not brought to Stash this time: {exc}")
