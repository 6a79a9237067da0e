"""Plex's notification websocket (opened as plexapi's ``AlertListener`` opens it) and the events we read.

:class:`Connection` opens ``/:/websockets/notifications`` through websocket-client, reports the open
and the close and sends pings. It never reconnects: ``worker/listen.py`` does.
websocket-client is imported only here, when a listener starts (never by the hook). Frames:
``shared/contracts/plex-events.md`` §1 and §7 (plexapi ``alert.py``, Tautulli ``activity_handler.py``,
PlexTraktSync ``watch/events.py``, fuzeman/plex.activity.py ``sources/s_websocket/main.py``).

"Look at the item again" is any of: timeline ``state 0`` with ``metadataState "created"`` (Tautulli's
new-item signal), ``state 1`` without ``mediaState`` (the last state of a section without a metadata
agent: plexapi ``alert.py``, its ``tools/plex-bootstraptest.py``; "Other Videos" sections usually
have none), ``state 5`` without ``metadataState`` (processed, with an agent). "Look at the library
again": an ``activity`` of a section scan that ``ended``, a ``status`` "Library scan complete".
A flood of these is coalesced by the listener (``worker/coalesce.py``), not here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from core.errors import PlexAuthError, PlexUnavailable, Stash2PlexError
from plex.client import as_int
from plex.errors import plex_errors

LIBRARY = "com.plexapp.plugins.library"
CREATED, PROGRESS, PROCESSED = 0, 1, 5
SECTION_SCAN = "library.update.section"  # the activity of a section's scan
SCAN_COMPLETE = "library scan complete"  # a status notification's title, case aside
PING_S = 30.0  # a silent peer is noticed after PING_S + PING_TIMEOUT_S
PING_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ItemProcessed:
    """Plex has an item to look at: it was created, or its processing (or an edit) ended."""

    item_id: int
    section_id: int
    updated_at: int = 0  # epoch s (the entry's updatedAt; 0 when absent)


@dataclass(frozen=True)
class LibraryScanned:
    """A scan ended: of section ``section_id``, or of some section (None: a status notification
    names none)."""

    section_id: int | None = None


@dataclass(frozen=True)
class PlaybackState:
    """A playback session's state (``playing``, ``paused``, ``buffering``, ``stopped``). The frame
    names no account: ``session_key`` is looked up in ``/status/sessions`` (plex/sessions.py)."""

    rating_key: int
    state: str
    session_key: str = ""


@dataclass(frozen=True)
class Connected:
    """The listener's connection opened (again): what happened while it was closed was
    not announced to us, so a handler catches up."""


Notification = ItemProcessed | LibraryScanned | PlaybackState | Connected


def read_notifications(container: dict) -> list[Notification]:
    """The events we act on in one ``NotificationContainer`` (PMS may batch several); the rest is skipped:
    >>> read_notifications({"type": "timeline", "size": 6, "TimelineEntry": [
    ...     {"identifier": LIBRARY, "itemID": "7", "sectionID": "1", "state": 0, "metadataState": "created"},
    ...     {"identifier": LIBRARY, "itemID": "8", "sectionID": "1", "state": 1, "mediaState": "analyzing"},
    ...     {"identifier": LIBRARY, "itemID": "8", "sectionID": "1", "state": 1},
    ...     {"identifier": LIBRARY, "itemID": "9", "sectionID": "1", "state": 3},
    ...     {"identifier": "tv.plex.grabbers", "itemID": "7", "sectionID": "1", "state": 5},
    ...     {"identifier": LIBRARY, "itemID": "7", "sectionID": 1, "state": 5, "updatedAt": 1700000000}]})
    [ItemProcessed(item_id=7, section_id=1, updated_at=0), ItemProcessed(item_id=8, section_id=1, updated_at=0), ItemProcessed(item_id=7, section_id=1, updated_at=1700000000)]
    >>> read_notifications({"type": "playing", "PlaySessionStateNotification": [
    ...     {"ratingKey": "7", "state": "stopped", "viewOffset": 61000, "sessionKey": "3"}]})
    [PlaybackState(rating_key=7, state='stopped', session_key='3')]
    >>> read_notifications({"type": "activity", "ActivityNotification": [
    ...     {"event": "ended", "Activity": {"type": SECTION_SCAN, "Context": {"librarySectionID": "2"}}},
    ...     {"event": "updated", "Activity": {"type": SECTION_SCAN, "Context": {"librarySectionID": "2"}}}]})
    [LibraryScanned(section_id=2)]
    >>> read_notifications({"type": "status", "StatusNotification": [{"title": "Library scan complete"}]})
    [LibraryScanned(section_id=None)]
    """
    kind = container.get("type")
    read, array = _READERS.get(kind, (None, "")) if isinstance(kind, str) else (None, "")
    if read is None:
        return []
    return [e for e in map(read, _entries(container, array)) if e is not None]


def _entries(container: dict, array: str) -> list[dict]:
    entries = container.get(array) or container.get("_children") or []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _look_again(entry: dict) -> bool:
    """The entry says the item is there to look at (the module's docstring says which)."""
    state, metadata = as_int(entry.get("state")), entry.get("metadataState")
    if state == CREATED:
        return metadata == "created"
    if state == PROGRESS:
        return metadata is None and "mediaState" not in entry
    return state == PROCESSED and metadata is None


def _timeline(entry: dict) -> ItemProcessed | None:
    if entry.get("identifier") != LIBRARY or not _look_again(entry):
        return None
    item, section = as_int(entry.get("itemID")), as_int(entry.get("sectionID"))
    if item is None or section is None:
        return None
    return ItemProcessed(item, section, as_int(entry.get("updatedAt")) or 0)


def _playing(entry: dict) -> PlaybackState | None:
    key, state = as_int(entry.get("ratingKey")), entry.get("state")
    if key is None or not isinstance(state, str):
        return None
    return PlaybackState(key, state, str(entry.get("sessionKey") or ""))


def _activity(entry: dict) -> LibraryScanned | None:
    activity = entry.get("Activity")
    if entry.get("event") != "ended" or not isinstance(activity, dict) or activity.get("type") != SECTION_SCAN:
        return None
    context = activity.get("Context")
    return LibraryScanned(as_int(context.get("librarySectionID")) if isinstance(context, dict) else None)


def _status(entry: dict) -> LibraryScanned | None:
    title = entry.get("title")
    return LibraryScanned() if isinstance(title, str) and title.strip().lower() == SCAN_COMPLETE else None


_READERS: dict[str, tuple[Callable[[dict], Notification | None], str]] = {
    "timeline": (_timeline, "TimelineEntry"),
    "playing": (_playing, "PlaySessionStateNotification"),
    "activity": (_activity, "ActivityNotification"),
    "status": (_status, "StatusNotification"),
}


def connection_error(error: BaseException) -> Stash2PlexError:
    """Our error for what websocket-client raised (its messages carry no URL, hence no token)."""
    status = getattr(error, "status_code", None)
    if status in (401, 403):
        return PlexAuthError(f"Plex refused the token on its notification websocket ({status})")
    if status is not None:
        return PlexUnavailable(f"Plex answered {status} to the notification websocket")
    return PlexUnavailable(f"Plex's notification websocket: {type(error).__name__}: {error}")


class Handler(Protocol):
    """What a connection reports: each ``NotificationContainer``, a failure (ours), open and close."""

    def on_message(self, container: dict) -> None: ...
    def on_error(self, error: Stash2PlexError) -> None: ...
    def on_open(self) -> None: ...
    def on_close(self) -> None: ...


def _ws_args(client) -> tuple[str, dict[str, str], dict]:
    """The websocket's URL, headers and TLS options. It is verified as plexapi's own requests are:
    the session's ``verify`` (a CA bundle from REQUESTS_CA_BUNDLE, core/http.py; or False)
    becomes websocket-client's ``sslopt``. ``client.server`` raises our errors when Plex cannot
    be reached."""
    url = client.server.url(Connection.KEY).replace("http", "ws", 1)
    verify = getattr(client.session, "verify", True)
    if verify is False:
        import ssl

        sslopt: dict = {"cert_reqs": ssl.CERT_NONE}
    else:
        sslopt = {"ca_certs": verify} if isinstance(verify, str) else {}
    return url, client.auth_headers(), sslopt


class Connection(threading.Thread):
    """One connection to Plex's notification websocket, on a daemon thread once started, as plexapi alert.py's ``AlertListener``
    opens it (``KEY``; each message's ``NotificationContainer`` handed on), with the token in a
    header (plexapi puts it in the URL, and logs that; Tautulli ``web_socket.py`` sends a header
    too), pings (plexapi sends none, so a half-open connection would go unnoticed), open and
    close reported, and no reconnect of its own. Plex is reached when it is made, so a wrong token
    or a Plex that is down raises then, translated."""

    KEY = "/:/websockets/notifications"

    def __init__(self, client, handler: Handler) -> None:
        try:
            import websocket
        except ImportError:  # checked here: a run would only report its absence as a failure
            raise Stash2PlexError(
                "the package websocket-client is missing (requirements.txt); Plex's notifications are not read"
            ) from None
        super().__init__(daemon=True)
        url, headers, self._sslopt = _ws_args(client)
        self._handler = handler
        self._stopping = threading.Event()
        self._ws = websocket.WebSocketApp(
            url,
            header=headers,
            on_open=lambda ws: handler.on_open(),
            on_message=lambda ws, message: self._message(message),
            on_error=lambda ws, error: handler.on_error(connection_error(error)),
            on_close=lambda ws, code, reason: handler.on_close(),
        )

    def run(self) -> None:
        if not self._stopping.is_set():  # a stop before run_forever began would be lost in it
            self._ws.run_forever(ping_interval=PING_S, ping_timeout=PING_TIMEOUT_S, reconnect=0, sslopt=self._sslopt)

    def _message(self, message: str) -> None:
        """A frame that is not a ``NotificationContainer`` is skipped (plexapi logs and skips it)."""
        try:
            container = json.loads(message)["NotificationContainer"]
        except (ValueError, TypeError, KeyError):
            return
        if isinstance(container, dict):
            self._handler.on_message(container)

    def stop(self) -> None:
        self._stopping.set()
        self._ws.close()


def probe(client, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Open the notification websocket once and close it; raises our error when it cannot."""
    import websocket

    with plex_errors("connecting to Plex", client.url):
        url, headers, sslopt = _ws_args(client)
    try:
        ws = websocket.create_connection(url, timeout=timeout, header=headers, sslopt=sslopt)
    except Exception as exc:  # websocket-client raises its own, socket's and ssl's errors
        raise connection_error(exc) from None
    ws.close()
