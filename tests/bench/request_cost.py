"""CPU of one HTTP request through requests (as the plugin sends every Plex and Stash
request) beside the same request through the standard library's http.client, in the same
run: where the plugin's CPU per scene goes when the server answers at once.

    python tests/bench/request_cost.py [requests]
"""

from __future__ import annotations

import http.client
import http.server
import multiprocessing
import sys
import time

HEADERS = {"Accept": "application/xml", "X-Plex-Token": "token", "X-Plex-Client-Identifier": "bench"}
PATH = "/library/metadata/123?includeGuids=1"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


def _serve(port_queue) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def _with_requests(port: int, n: int) -> float:
    import requests

    session = requests.Session()
    session.trust_env = False  # as core/http.py fixed_environment_session leaves it
    url = f"http://127.0.0.1:{port}{PATH}"
    for _ in range(50):
        session.get(url, headers=HEADERS)
    started = time.process_time()
    for _ in range(n):
        _ = session.get(url, headers=HEADERS).content
    return (time.process_time() - started) / n


def _with_http_client(port: int, n: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(50):
        conn.request("GET", PATH, headers=HEADERS)
        conn.getresponse().read()
    started = time.process_time()
    for _ in range(n):
        conn.request("GET", PATH, headers=HEADERS)
        conn.getresponse().read()
    return (time.process_time() - started) / n


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 2000
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)  # the server's CPU is not ours
    server.start()
    port = ports.get()
    import requests

    base = min(_with_http_client(port, n) for _ in range(3))
    ours = min(_with_requests(port, n) for _ in range(3))
    print(f"client CPU per GET ({n} requests, best of 3), Python {sys.version.split()[0]}")
    print(f"  requests {requests.__version__} Session: {ours * 1000:.2f} ms")
    print(f"  http.client (baseline):    {base * 1000:.2f} ms")
    print(f"  ratio:                     {ours / base:.2f}x")
    server.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
