"""Another host's clock, learned from its replies: times from two hosts are compared only in one clock.

Every HTTP reply carries the server's time in its ``Date`` header (RFC 9110 §6.6.1: whole
seconds, "the time at which the message was originated"). A reply that left the server at
``D`` seconds (its clock, ``D <= t < D + 1``) and came back between ``sent`` and ``got`` on
our clock bounds the server's offset (its clock minus ours) to ``(D - got, D + 1 - sent)``;
the bounds of several replies are intersected, so a handful of quick replies pins the offset
to well under a second. Bounds that stop overlapping (a clock was set meanwhile) start again
from the newest reply.
"""

from __future__ import annotations

import datetime as dt
import threading
from email.utils import parsedate_to_datetime


class ServerClock:
    """The offset of one server's clock from ours (server minus ours), in seconds.

    >>> clock = ServerClock()
    >>> clock.offset()
    0.0
    >>> T = 1795773600.0  # Fri, 27 Nov 2026 10:00:00 GMT; the server is 600.45 s behind ours
    >>> clock.note("Fri, 27 Nov 2026 09:59:59 GMT", sent=T + 600.0, got=T + 600.1)
    >>> clock.note("Fri, 27 Nov 2026 10:00:00 GMT", sent=T + 600.5, got=T + 600.6)
    >>> clock.low, clock.high, clock.offset()
    (-600.6, -600.0, -600.3)
    """

    def __init__(self) -> None:
        self.low: float | None = None
        self.high: float | None = None
        self._lock = threading.Lock()

    def note(self, date: str | None, sent: float, got: float) -> None:
        """A reply dated ``date`` (its ``Date`` header) sent at ``sent``, received at ``got`` (ours)."""
        try:
            at = parsedate_to_datetime(date or "").timestamp()
        except (TypeError, ValueError):
            return  # no Date header, or not a date: nothing learned
        low, high = round(at - got, 3), round(at + 1 - sent, 3)
        with self._lock:
            if self.low is None or self.high is None or low > self.high or high < self.low:
                self.low, self.high = low, high
            else:
                self.low, self.high = max(self.low, low), min(self.high, high)

    def offset(self) -> float:
        """The best guess (the middle of the bounds); 0 before any reply."""
        with self._lock:
            if self.low is None or self.high is None:
                return 0.0
            return (self.low + self.high) / 2

    def to_ours(self, server_time: float) -> float:
        """A time read from the server, on our clock."""
        return server_time - self.offset()

    def to_server(self, our_time: float) -> float:
        """A time of ours, on the server's clock."""
        return our_time + self.offset()


def response_hook(clock: ServerClock, now):
    """A requests response hook noting each reply's ``Date`` in ``clock`` (``now``: our clock).
    ``Response.elapsed`` runs from sending the request to reading the headers."""

    def hook(response, *args, **kwargs):
        got = now()
        clock.note(response.headers.get("Date"), got - response.elapsed.total_seconds(), got)
        return response

    return hook


def rfc3339(stamp: object) -> dt.datetime | None:
    """An RFC3339 time with its offset (Stash's, Go's ``time.RFC3339``/``RFC3339Nano``) as an aware
    datetime; None when it is not one (or not text). ``datetime.fromisoformat`` reads ``Z`` and fractions of
    any length from Python 3.11 on, the oldest the plugin runs on (``Stash2Plex.py`` ``MIN_PYTHON``).

    >>> rfc3339("2025-01-02T03:04:05Z"), rfc3339("2025-01-02T03:04:05.123456789+01:00").isoformat()
    (datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), '2025-01-02T03:04:05.123456+01:00')
    >>> rfc3339("2025-01-02T03:04:05"), rfc3339("yesterday"), rfc3339(None)
    (None, None, None)
    """
    if not isinstance(stamp, str):
        return None
    try:
        value = dt.datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    return value if value.tzinfo is not None else None
