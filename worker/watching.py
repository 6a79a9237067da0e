"""What the resident ``watch`` process does with Plex's events.

A playback that stopped may have become a watch-history entry (PMS scrobbles at the
end; the websocket says nothing of it): with ``import_plays`` the history is read
then, and on a timer (``poll``), since the websocket is a trigger and never the only
path (an event lost while the process was down or killed is caught up by the next
read: the history itself is the source).
"""

from __future__ import annotations

from collections.abc import Callable

from core.errors import Stash2PlexError
from plex.notifications import Event, PlaybackState


class Watching:
    def __init__(self, settings, play_import: Callable, log) -> None:
        self.settings, self.play_import, self.log = settings, play_import, log

    def __call__(self, event: Event) -> None:
        if isinstance(event, PlaybackState) and event.state == "stopped":
            self.poll()

    def poll(self) -> None:
        """Read what Plex recorded since the last look (each setting that is on)."""
        if not self.settings.import_plays:
            return
        try:
            self.play_import().run(self.settings.play_accounts)
        except Stash2PlexError as exc:  # tried again at the next event or poll
            self.log.warning(f"Plex plays not imported this time: {exc}")
