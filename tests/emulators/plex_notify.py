"""Plex's notification websocket for the Plex emulator: ``/:/websockets/notifications``.

A minimal RFC 6455 server over the emulator's own HTTP handler (no library of ours
beside it): the handshake answers ``101`` with ``Sec-WebSocket-Accept``, the server
sends unmasked text frames, reads the client's masked frames (answers a ping with a
pong, a close with a close) and nothing else. What PMS sends, as the contract
(``shared/contracts/plex-events.md`` §1) gives it from the clients that read it:

* the path is plural, ``/:/websockets/notifications`` (python-plexapi ``alert.py``
  ``AlertListener.key``; Tautulli ``web_socket.py`` ``run()``); the singular spelling
  of Plex's own docs is accepted too;
* the token comes as ``?X-Plex-Token=`` (plexapi builds the URL with
  ``PlexServer.url(key, includeToken=True)``) or as a header (Tautulli); a wrong one
  is refused with 401 at the handshake;
* every frame is ``{"NotificationContainer": {"type": T, "size": N, <Array>: [...]}}``
  with PMS's typing: ``itemID`` a string, ``state``/``type`` ints (Tautulli
  ``activity_handler.py`` ``TimelineHandler``; PlexTraktSync ``watch/events.py``);
* a scan (``scan_frames``) sends an ``activity`` ``library.update.section`` started
  with ``Context.librarySectionID`` (third-party readers of ``/activities``, reported),
  timeline entries state 0 (``metadataState: "created"``), then state 1 with
  ``mediaState`` while the media is analysed, then, in a section without a metadata
  agent (``tv.plex.agents.none``, ``com.plexapp.agents.none``), state 1 without
  ``mediaState`` as its last state (plexapi ``alert.py``'s state table: "When metadata
  agent is not set for the library processing ends with state=1"; its
  ``tools/plex-bootstraptest.py`` waits for state 1 there), else states 2, 3, 4 and 5
  (with ``mediaState``, then without: the bootstrap script reads a missing
  ``mediaState`` as analysed); then the activity ``ended`` and a ``status``
  "Library scan complete" (fuzeman/plex.activity.py ``sources/s_websocket/main.py``
  ``process_status``). The entries of every item of one scan share a frame (the
  contract §1 says to iterate the arrays: PMS's batching is not documented, and the
  emulator batches so a reader of only the first entry is caught);
* an edit sends state 5 again (PlexKodiConnect's "new or changed" comment); a
  deletion state 9 ``deleted``; a rating sends nothing (PlexTraktSync polls ratings);

Switches for tests: ``flood(message, count)`` (one notification many times in one
burst), ``close_all()`` (a clean close frame: plexapi's listener thread
just ends), ``drop_all()`` (the TCP connection cut: a PMS restart), ``connections``
(how many handshakes were accepted), ``read_all()`` (returns once every listener has read
all sent before: a ping after it, answered by a pong), ``refuse`` (answer every handshake with 503),
``muted`` (send nothing), ``close_at_once`` (accept each handshake, then the close frame
``close_all`` sends, at once: a PMS or a reverse proxy in front of it that ends every
connection as it opens; the contract §3: a clean close only ends the client's thread).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
PATHS = ("/:/websockets/notifications", "/:/websocket/notifications")
LIBRARY = "com.plexapp.plugins.library"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    """RFC 6455 §4.2.2: base64(SHA-1(key + GUID)).

    >>> accept_key("dGhlIHNhbXBsZSBub25jZQ==")
    's3pPLMBiTxaQ9kYGzzhZRbK+xOo='
    """
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked server frame."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def read_frame(rfile) -> tuple[int, bytes] | None:
    """(opcode, payload) of the client's next frame (masked, as RFC 6455 §5.3 requires); None at EOF."""
    head = rfile.read(2)
    if len(head) < 2:
        return None
    opcode, n = head[0] & 0x0F, head[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", rfile.read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", rfile.read(8))[0]
    mask = rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
    data = rfile.read(n)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


GOING_AWAY = frame(CLOSE, struct.pack("!H", 1001))  # RFC 6455 §7.4.1: a server going down


def container(kind: str, array: str, entries: list[dict[str, Any]]) -> dict:
    return {"NotificationContainer": {"type": kind, "size": len(entries), array: entries}}


def timeline(item_id: int, section_id: int, state: int, title: str, updated_at: int, **extra: Any) -> dict:
    """A ``TimelineEntry`` for a movie item (``type`` 1) of the library."""
    entry = {
        "identifier": LIBRARY,
        "sectionID": str(section_id),
        "itemID": str(item_id),
        "type": 1,
        "title": title,
        "state": state,
        "updatedAt": updated_at,
        **extra,
    }
    return container("timeline", "TimelineEntry", [entry])


AGENTLESS = ("tv.plex.agents.none", "com.plexapp.agents.none")


def scan_frames(section_id: int, items: list[tuple[int, str]], agent: str, now: int) -> list[dict]:
    """The notifications of one scan of ``section_id`` that added ``items`` ((ratingKey,
    title) each), in order (the module's docstring says where each comes from)."""

    def entries(state: int, **extra: Any) -> dict:
        rows = [timeline(rk, section_id, state, title, now, **extra) for rk, title in items]
        return container("timeline", "TimelineEntry", [r["NotificationContainer"]["TimelineEntry"][0] for r in rows])

    last = (
        [entries(1)]
        if agent in AGENTLESS
        else [entries(s) for s in (2, 3, 4)] + [entries(5, mediaState="analyzing"), entries(5)]
    )
    return [
        activity("started", section_id),
        entries(0, metadataState="created"),
        entries(1, mediaState="analyzing"),
        *last,
        activity("ended", section_id),
        container("status", "StatusNotification", [{"title": "Library scan complete", "description": ""}]),
    ]


def activity(event: str, section_id: int) -> dict:
    """An ``ActivityNotification`` of a section scan (the contract §1's recorded shape)."""
    uuid = f"5ca1ab1e-0000-4000-8000-{section_id:012d}"
    body = {
        "uuid": uuid,
        "type": "library.update.section",
        "cancellable": True,
        "userID": 1,
        "title": "Scanning",
        "subtitle": "",
        "progress": 100 if event == "ended" else 0,
        "Context": {"librarySectionID": str(section_id)},
    }
    return container("activity", "ActivityNotification", [{"event": event, "uuid": uuid, "Activity": body}])


def playing(session_key: str, rating_key: int, view_offset_ms: int, state: str, client_id: str = "emu-player") -> dict:
    """A ``PlaySessionStateNotification`` (PlexTraktSync PR #148's capture): no user, no duration."""
    entry = {
        "sessionKey": session_key,
        "clientIdentifier": client_id,
        "guid": "",
        "ratingKey": str(rating_key),
        "url": "",
        "key": f"/library/metadata/{rating_key}",
        "viewOffset": view_offset_ms,
        "playQueueItemID": 1,
        "state": state,
    }
    return container("playing", "PlaySessionStateNotification", [entry])


class Notifications:
    """The connected listeners and what is sent to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[socket.socket, threading.Lock] = {}
        self.connections = 0  # handshakes accepted so far
        self.refuse = False
        self.muted = False  # send nothing (a PMS whose events never come)
        self.close_at_once = False  # close each connection as soon as it is accepted
        self.sent: list[dict] = []
        self._pongs = threading.Condition()
        self._ponged: dict[bytes, int] = {}  # a ping's payload → how many listeners answered it
        self._pings = 0

    @property
    def listening(self) -> int:
        with self._lock:
            return len(self._clients)

    def serve(self, handler) -> None:
        """Answer the handshake on ``handler`` (token already checked), then read until the
        client closes; the handler's thread stays here for the connection's life."""
        key = handler.headers.get("Sec-WebSocket-Key")
        if self.refuse or not key or (handler.headers.get("Upgrade") or "").lower() != "websocket":
            handler.send_response(503 if self.refuse else 400)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            handler.close_connection = True
            return
        handler.send_response(101, "Switching Protocols")
        handler.send_header("Upgrade", "websocket")
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Sec-WebSocket-Accept", accept_key(key))
        handler.end_headers()
        handler.wfile.flush()
        conn, send_lock = handler.connection, threading.Lock()
        with self._lock:
            self._clients[conn] = send_lock
            self.connections += 1
        handler.close_connection = True
        try:
            if self.close_at_once:
                self._send(conn, send_lock, GOING_AWAY)
            self._read(handler.rfile, conn, send_lock)
        finally:
            with self._lock:
                self._clients.pop(conn, None)

    def _read(self, rfile, conn: socket.socket, send_lock: threading.Lock) -> None:
        while True:
            try:
                got = read_frame(rfile)
            except (OSError, struct.error):
                return
            if got is None:
                return
            opcode, payload = got
            if opcode == PING:
                self._send(conn, send_lock, frame(PONG, payload))
            elif opcode == PONG:
                with self._pongs:
                    self._ponged[payload] = self._ponged.get(payload, 0) + 1
                    self._pongs.notify_all()
            elif opcode == CLOSE:
                self._send(conn, send_lock, frame(CLOSE, payload[:2]))
                return

    @staticmethod
    def _send(conn: socket.socket, send_lock: threading.Lock, data: bytes) -> bool:
        try:
            with send_lock:
                conn.sendall(data)
            return True
        except OSError:
            return False

    def publish(self, message: dict) -> int:
        """Send one notification to every listener; returns how many got it."""
        if self.muted:
            return 0
        data = frame(TEXT, json.dumps(message).encode())
        with self._lock:
            clients = list(self._clients.items())
            self.sent.append(message)
        return sum(self._send(conn, lock, data) for conn, lock in clients)

    def flood(self, message: dict, count: int) -> None:
        """The same notification ``count`` times, as fast as the sockets take it (a client
        or an agent reporting on one item in a burst)."""
        data = frame(TEXT, json.dumps(message).encode()) * count
        with self._lock:
            clients = list(self._clients.items())
            self.sent.extend([message] * count)
        for conn, lock in clients:
            self._send(conn, lock, data)

    def read_all(self, timeout: float = 10.0) -> None:
        """Return once every listener has read everything sent before: a ping after it, which a
        client must answer with a pong once it reads it (RFC 6455 §5.5.2-3; websocket-client's
        ``_core.py`` ``recv_data_frame`` answers it, having handed each frame before it to
        ``on_message``, as frames are read in order)."""
        with self._lock:
            clients = list(self._clients.items())
            self._pings += 1
            payload = f"read-all {self._pings}".encode()
        for conn, lock in clients:
            self._send(conn, lock, frame(PING, payload))
        with self._pongs:
            if not self._pongs.wait_for(lambda: self._ponged.get(payload, 0) >= len(clients), timeout):
                raise TimeoutError(f"{len(clients)} listener(s) did not answer a ping within {timeout} s")

    def close_all(self) -> None:
        """A clean close frame (status 1001, going away) to every listener."""
        with self._lock:
            clients = list(self._clients.items())
        for conn, lock in clients:
            self._send(conn, lock, GOING_AWAY)

    def drop_all(self) -> None:
        """Cut every listener's TCP connection without a close frame."""
        with self._lock:
            clients = list(self._clients)
        for conn in clients:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
