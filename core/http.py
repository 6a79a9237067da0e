"""HTTP session set-up shared by the Plex and Stash clients."""

from __future__ import annotations

from typing import Any


def fixed_environment_session(session, url: str):
    """Read proxy and CA settings from the environment once, not on every request.

    requests re-scans os.environ for proxies on each call (a third of the client's
    CPU time in bulk syncs, measured with py-spy); the environment does not change
    during a run, so resolve it once and turn the per-request lookup off.
    """
    import os

    import requests

    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle and url.lower().startswith("https:"):
        # Only for TLS: with a path in ``verify`` requests stats it on every request
        # (adapters._urllib3_request_context: os.path.isdir), 14% of a bulk sync's
        # CPU time over plain http (py-spy), where no certificate is ever checked.
        session.verify = bundle
    session.trust_env = False
    return session


class DirectPool:
    """Requests sent straight into a ``requests.Session``'s own urllib3 connection pool.

    A request through ``Session.request`` costs about 1 ms of CPU here, twice what the same
    request costs through the urllib3 pool beneath it (measured: 1,047 vs 560 µs a PUT
    against the Plex emulator, client thread only). The difference is the Session's
    per-request work: merging settings, preparing the request, the cookie jar on the way
    out and back, hooks, redirects. A bulk sync sends two or three requests per scene, so
    that work was a third of the sync's CPU. The requests that need none of it (no
    cookies, no redirects, a fixed set of headers) go through here: the same connections,
    TLS settings (``verify``/``cert``) and retry policy as the Session's adapter
    (``HTTPAdapter.send`` does exactly this ``urlopen`` call), and the headers the Session
    would merge. Behind an HTTP proxy there is no direct pool (``usable`` is False): the
    caller then uses the Session.
    """

    def __init__(self, session, base_url: str, headers: dict[str, str]) -> None:
        from urllib.parse import urlsplit

        import requests

        self.base_url = base_url.rstrip("/")
        self.headers = {k: v for k, v in {**session.headers, **headers}.items() if v is not None}
        parts = urlsplit(self.base_url)
        self._prefix = parts.path
        self._plain: _PlainConnections | None = None
        self._pool = None
        if requests.utils.select_proxy(self.base_url, session.proxies):
            return
        if parts.scheme == "http":
            self._plain = _PlainConnections(parts.hostname or "", parts.port or 80)
            return
        adapter = session.get_adapter(self.base_url)
        if not hasattr(adapter, "get_connection_with_tls_context"):  # requests < 2.32.2
            return
        prepared = requests.Request("GET", self.base_url + "/").prepare()
        self._pool = adapter.get_connection_with_tls_context(prepared, session.verify, proxies=None, cert=session.cert)
        adapter.cert_verify(self._pool, self.base_url, session.verify, session.cert)
        self._retries = adapter.max_retries

    @property
    def usable(self) -> bool:
        """False behind a proxy (or with a requests too old to share its pool): then the
        caller sends through the Session."""
        return self._plain is not None or self._pool is not None

    def send(
        self, method: str, target: str, body: bytes | None, timeout: float, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, Any]:
        """(status, body, headers) of ``method`` at ``target`` (path and query, after the
        base URL), with ``headers`` added to the fixed ones.
        Failures to connect or read raise ``requests.ConnectionError`` around urllib3's
        error, as the Session would (``core/netcause.py`` reads the cause from the chain)."""
        import requests
        import urllib3

        headers = {**self.headers, **(headers or {})}
        if body is not None or method not in ("GET", "HEAD"):
            headers["Content-Length"] = str(len(body or b""))  # as requests' prepare_content_length
        if self._plain is not None:
            return self._plain.send(method, self._prefix + target, body, timeout, headers)
        pool = self._pool
        if pool is None:
            raise RuntimeError("no direct pool behind a proxy: send through the session")
        try:
            response = pool.urlopen(
                method,
                self._prefix + target,
                body=body,
                headers=headers,
                redirect=False,
                assert_same_host=False,
                preload_content=True,
                decode_content=True,
                retries=self._retries,
                timeout=urllib3.Timeout(connect=timeout, read=timeout),
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise requests.exceptions.ConnectionError(exc) from exc
        return response.status, response.data, response.headers


class _PlainConnections:
    """Plain-http requests on one keep-alive ``http.client`` connection per thread.

    Over plain http (how most Plex servers and Stash are reached on a LAN) even urllib3's
    pool is half of a request's CPU: against the Plex emulator a PUT costs 560 µs of
    client CPU through urllib3 and 250 µs through ``http.client`` (whose request and
    response parsing urllib3 itself uses), and a bulk sync is bound by that CPU. Each
    writer thread keeps its own connection, so there is no pool to lock. What urllib3
    would add is kept: a kept-alive connection the server has closed meanwhile is
    noticed before it is reused (urllib3 ``is_connection_dropped``), a compressed body
    is decoded, and a failure arrives as ``requests.ConnectionError`` around the
    socket's own error (a connect timeout as ``requests.ConnectTimeout``). TLS stays
    with urllib3 (``DirectPool``), which applies the Session's certificate settings.
    """

    def __init__(self, host: str, port: int) -> None:
        import threading

        self.host, self.port = host, port
        self._local = threading.local()

    def send(
        self, method: str, target: str, body: bytes | None, timeout: float, headers: dict[str, str]
    ) -> tuple[int, bytes, Any]:
        import http.client

        import requests

        conn = self._connection(timeout)
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise requests.exceptions.ConnectionError(exc) from exc
        if response.will_close:
            self._drop()
        return response.status, _decoded(data, response.headers.get("Content-Encoding")), response.headers

    def _connection(self, timeout: float):
        import http.client
        import select

        import requests

        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            if not select.select([conn.sock], [], [], 0)[0]:
                return conn  # idle and open: an open kept-alive connection has nothing to read
            self._drop()  # closed by the server (or it sent something unasked): start afresh
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.connect()
        except TimeoutError as exc:
            raise requests.exceptions.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise requests.exceptions.ConnectionError(exc) from exc
        self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()


def _decoded(data: bytes, encoding: str | None) -> bytes:
    """The body as urllib3's ``decode_content`` would give it (gzip and deflate)."""
    import zlib

    kind = (encoding or "").strip().lower()
    if kind == "gzip":
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)
    if kind == "deflate":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return zlib.decompress(data, -zlib.MAX_WBITS)
    return data
