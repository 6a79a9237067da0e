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

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header from the emulator's clock (the host's clock it plays): an origin
        server with a clock sends one on every reply (RFC 9110 §6.6.1); Go's net/http does
        (server.go ``chunkWriter.writeHeader``, Stash), and so does PMS."""
        from email.utils import formatdate

        return formatdate(self.server.emulator.clock() if timestamp is None else timestamp, usegmt=True)

    def finish(self) -> None:
        self.server.live.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass
