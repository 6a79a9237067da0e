"""What the resident ``watch`` process does with Plex's events, and on its timer.

An owned item Plex processed again is checked for drift (``worker/drift.py``). A stopped playback
may have become a history entry (PMS scrobbles at the end; the websocket says nothing of it) and
moved the owner's resume point: with ``import_plays`` the history is read then, with
``import_resume`` the item's resume point; a playback of an account ``plays_accounts`` does not
name is left alone. The timer (``poll``, also ``watch --once``) reads all of them and, with
``import_ratings``, Plex's ratings (Plex announces none): the websocket is a trigger, never the
only path, so what happened while the process was down is caught up by the next read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import Stash2PlexError
from plex.notifications import ItemProcessed, Notification, PlaybackState

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.sessions import SessionAccounts
    from validation.config import Settings
    from worker.drift import DriftWatch
    from worker.plays import PlayImport
    from worker.ratings import RatingsBack
    from worker.resume import ResumeBack


# What a ``watch`` brings back from Plex, by the setting that turns it on (app/watch.py, the page,
# Health check).
COMES_BACK = {"import_plays": "plays", "import_resume": "resume points", "import_ratings": "ratings"}
WATCH_COMMAND = "python Stash2Plex.py watch"


def watch_report(state: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The ``watch`` as the page and Health check tell it: ``state`` (``App.watch_state``: running,
    since) with the settings that need one, whether that is a problem, and the words for it."""
    needs = [name for name in COMES_BACK if getattr(settings, name)]
    report = {**state, "needed_for": needs, "problem": bool(needs) and not state["running"]}
    if state["running"]:
        report["message"] = f"a watch is running (since {state['since'] or 'a time not recorded'})"
    elif needs:
        report["message"] = (
            f"{', '.join(needs)} {'is' if len(needs) == 1 else 'are'} on, but no watch is running: plays, "
            f"resume points and ratings come back from Plex only while '{WATCH_COMMAND}' runs beside Stash "
            "(a docker-compose service or a systemd unit: see the usage docs)"
        )
    else:
        report["message"] = "no watch is running (needed only for import_plays, import_resume or import_ratings)"
    return report


@dataclass
class Watching:
    """What ``watch`` does; each part is built on first use (``App``'s builders)."""

    settings: Settings
    play_import: Callable[[], PlayImport]
    ratings: Callable[[], RatingsBack]
    resume: Callable[[], ResumeBack]
    sessions: Callable[[], SessionAccounts]
    drift: Callable[[], DriftWatch]
    log: StashLog

    def __call__(self, event: Notification) -> None:
        if isinstance(event, ItemProcessed):
            self._guarded("drift check", lambda: self.drift()(event))
        if isinstance(event, PlaybackState) and (self.settings.import_plays or self.settings.resume_on):
            self._playback(event)

    def _playback(self, event: PlaybackState) -> None:
        if event.state != "stopped":
            try:
                self.sessions().learn(event)
            except Stash2PlexError as exc:  # looked up again at the session's next report or its stop
                self.log.info(f"the account of a Plex playback is not known yet: {exc}")
            return
        account = self.sessions().stopped(event)
        if account is not None and account not in self.settings.play_accounts:
            self.log.info(
                f"Plex item {event.rating_key}: a playback of account {account} left alone (not in plays_accounts)"
            )
            return
        self._guarded("plays", self._plays)
        if self.settings.resume_on:
            self._guarded("resume point", lambda: self.resume().item(event.rating_key))

    def poll(self) -> None:
        """Read what Plex recorded since the last look (each setting that is on)."""
        self._guarded("plays", self._plays)
        if self.settings.resume_on:
            self._guarded("resume points", lambda: self.resume().run())
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
