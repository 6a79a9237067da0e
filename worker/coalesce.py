"""A flood of Plex notifications as a few looks: per item, per section, per session.

Plex may send thousands of frames for one item in a second (a client reporting, an agent
refreshing); each would cost a Plex request. Events are held by what they are about
(``key``): the first of a key goes at once, the ones after it within ``WINDOW_S`` are folded
into the newest, which goes when the window ends. So an item is looked at most once a
second, its last event is never lost, and an event about anything else passes the flood
at once (it is not queued behind it). With ``fold_at``, a section whose items come faster
than that in a window (a scan adding thousands) is looked at as a whole instead, at most
once a window (``LibraryScanned``), for a handler that reads sections. Pure: the caller
passes the clock.
"""

from __future__ import annotations

from collections.abc import Hashable

from plex.notifications import ItemProcessed, LibraryScanned, Notification, PlaybackState

WINDOW_S = 1.0


def key(event: Notification) -> Hashable:
    """What an event is about: events of the same key fold into one.

    >>> key(ItemProcessed(7, 1)) == key(ItemProcessed(7, 2)), key(LibraryScanned(3))
    (True, ('section', 3))
    >>> key(PlaybackState(7, "playing", "5")) == key(PlaybackState(7, "stopped", "5"))
    False
    """
    if isinstance(event, ItemProcessed):
        return ("item", event.item_id)
    if isinstance(event, LibraryScanned):
        return ("section", event.section_id)
    if isinstance(event, PlaybackState):  # a stop is never folded into the frames before it
        return ("session", event.session_key, event.rating_key, event.state == "stopped")
    return (type(event).__name__,)


class Coalescer:
    """``offer`` each event as it comes, ``take`` the ones due; ``wait`` says how long until
    the next is due (None: nothing held).

    >>> c = Coalescer()
    >>> c.offer(ItemProcessed(7, 1, 1), now=0.0); c.take(0.0)
    [ItemProcessed(item_id=7, section_id=1, updated_at=1)]
    >>> for at in (2, 3, 4): c.offer(ItemProcessed(7, 1, at), now=0.1)
    >>> c.offer(LibraryScanned(1), now=0.2); c.take(0.2), c.wait(0.2)
    ([LibraryScanned(section_id=1)], 0.8)
    >>> c.take(1.0), c.wait(1.0)
    ([ItemProcessed(item_id=7, section_id=1, updated_at=4)], None)
    """

    def __init__(self, window: float = WINDOW_S, fold_at: int | None = None) -> None:
        self.window, self.fold_at = window, fold_at
        self._bursts: dict[int, tuple[float, int]] = {}  # section → (its window's start, items in it)
        self._held: dict[Hashable, tuple[float, Notification]] = {}  # key → (when due, the newest event)
        self._last: dict[Hashable, float] = {}  # key → when its last event went
        self._pruned = float("-inf")

    def offer(self, event: Notification, now: float) -> None:
        if isinstance(event, ItemProcessed) and self._burst(event.section_id, now):
            event = LibraryScanned(event.section_id)
        k = key(event)
        last = self._last.get(k)
        due = now if last is None else max(now, last + self.window)
        held = self._held.pop(k, None)
        self._held[k] = (held[0] if held else due, event)
        if isinstance(event, PlaybackState) and event.state == "stopped":  # its session's reports are moot
            self._held.pop(key(PlaybackState(event.rating_key, "playing", event.session_key)), None)

    def take(self, now: float) -> list[Notification]:
        due = [(at, k, event) for k, (at, event) in self._held.items() if at <= now]
        for _, k, _ in due:
            del self._held[k]
            self._last[k] = now
        self._forget(now)
        return [event for _, _, event in sorted(due, key=lambda d: d[0])]

    def wait(self, now: float) -> float | None:
        if not self._held:
            return None
        return max(0.0, min(at for at, _ in self._held.values()) - now)

    def _burst(self, section: int, now: float) -> bool:
        """Whether this item of ``section`` is one too many for its window (``fold_at``)."""
        if self.fold_at is None:
            return False
        start, count = self._bursts.get(section, (now, 0))
        start, count = (start, count + 1) if now < start + self.window else (now, 1)
        self._bursts[section] = (start, count)
        return count > self.fold_at

    def _forget(self, now: float) -> None:
        """Keys whose window has passed are forgotten (their next event goes at once); looked
        for at most once a window, so a scan of many items costs no more than one pass each."""
        if len(self._last) > 256 and now >= self._pruned + self.window:
            self._last = {k: at for k, at in self._last.items() if now - at < self.window}
            self._pruned = now
