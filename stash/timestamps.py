"""Stash's timestamps, compared the way Stash compares them: as text.

Stash stores ``created_at``/``updated_at`` as Go ``time.RFC3339`` text in the server's
zone [S:pkg/sqlite/timestamp.go `Timestamp.Value`] and turns a timestamp criterion into
``updated_at > ?`` with the caller's string [S:pkg/sqlite/sql.go
`getTimestampWhereClause`]: SQLite compares text. A value in another zone or form
(the plugin's own clock, ``+00:00`` instead of ``Z``) compares wrongly, so every value
sent is derived from a timestamp Stash itself returned, in that timestamp's offset.
"""

from __future__ import annotations

import datetime as dt

from core.clock import rfc3339

RECENT_DEFAULT_S = 24 * 3600  # recent's window when no sync came before it


def format_like(instant: dt.datetime, template: dt.datetime) -> str:
    """``instant`` as Go's RFC3339 text in ``template``'s offset (whole seconds, ``Z`` for UTC).

    >>> utc = dt.timezone.utc
    >>> format_like(dt.datetime(2025, 3, 30, 0, 30, tzinfo=utc), dt.datetime(2025, 1, 1, tzinfo=utc))
    '2025-03-30T00:30:00Z'
    """
    text = instant.astimezone(template.tzinfo).replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def recent_since(last: str | None, marker: str | None, default_s: float = RECENT_DEFAULT_S) -> str | None:
    """The ``updated_at > since`` value for a ``recent`` run, in Stash's current form.

    ``marker`` is Stash's newest ``updated_at`` now, ``last`` the previous run's (none: ``default_s``
    before ``marker``); a server offset that changed in between (DST) opens the window that much earlier.

    >>> recent_since("2025-10-26T02:30:00+02:00", "2025-10-26T05:00:00+01:00", 86400)
    '2025-10-26T00:30:00+01:00'
    >>> recent_since("2025-06-01T10:00:00Z", "2025-06-02T10:00:00Z", 86400)
    '2025-06-01T10:00:00Z'
    """
    now = rfc3339(marker or "")
    if now is None:
        return last or None
    before = rfc3339(last or "")
    if before is None:
        return format_like(now - dt.timedelta(seconds=default_s), now)
    shift = abs((before.utcoffset() or dt.timedelta()) - (now.utcoffset() or dt.timedelta()))
    return format_like(before - shift, now)
