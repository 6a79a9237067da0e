"""What both emulators' HTTP servers share: threads that never block ``stop()``, and the
open keep-alive connections tracked so an outage can cut them (a real server that goes
away does not keep answering on connections its clients hold)."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stalled handler threads must not block stop()

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler], emulator: Any) -> None:
        self.emulator = emulator
        self.live: set[socket.socket] = set()
        super().__init__(("127.0.0.1", port), handler)

    def drop_connections(self) -> None:
        """Cut every open keep-alive connection, so clients cannot reuse them."""
        for conn in list(self.live):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TrackedHandler(BaseHTTPRequestHandler):
    """A request handler whose connection is in ``server.live`` while it is open."""

    server: EmulatorServer

    def setup(self) -> None:
        super().setup()
        self.server.live.add(self.connection)

    def finish(self) -> None:
        self.server.live.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass
