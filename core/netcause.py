"""Why a network request failed, decided by exception TYPE (never by message text).

requests wraps urllib3, which wraps the socket layer (a refused connection is a
``requests.ConnectionError`` around ``MaxRetryError`` around ``NewConnectionError``, whose
``__cause__`` is ``ConnectionRefusedError``). :func:`network_cause` walks that chain
(``args``, ``reason``, ``__cause__``, ``__context__``) and names the innermost known cause;
``plex/errors.py`` and ``stash/client.py`` put it in their own words. requests and urllib3
are imported only once something failed (never on the hook path).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator


class Cause(str, enum.Enum):
    REFUSED = "refused"  # nothing listens there
    DNS = "dns"  # the host name does not resolve
    CONNECT_TIMEOUT = "connect_timeout"  # no answer to the connection attempt
    READ_TIMEOUT = "read_timeout"  # connected, but the reply did not come in time
    TLS_CERT = "tls_cert"  # the server's certificate was not trusted
    TLS = "tls"  # another TLS failure (an https URL on a plain-http port, ...)
    RESET = "reset"  # the connection broke (reset, closed, cut mid-reply)
    OTHER = "other"  # a network failure of another kind
    NONE = "none"  # not a network failure at all


def _chain(exc: BaseException, depth: int = 0) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps, outermost first (bounded: chains can loop)."""
    if depth > 12:
        return
    yield exc
    for each in (getattr(exc, "reason", None), *getattr(exc, "args", ()), exc.__cause__, exc.__context__):
        if isinstance(each, BaseException) and each is not exc:
            yield from _chain(each, depth + 1)


def network_cause(exc: BaseException) -> Cause:
    """The innermost known cause of a failed request; ``Cause.NONE`` when ``exc`` is not a network error."""
    import socket
    import ssl

    import requests  # requests' own exceptions; the stdlib's are the innermost causes it wraps

    chain = list(_chain(exc))
    kinds = [
        (Cause.TLS_CERT, (ssl.SSLCertVerificationError,)),
        (Cause.TLS, (ssl.SSLError, requests.exceptions.SSLError)),
        (Cause.DNS, (socket.gaierror,)),
        (Cause.REFUSED, (ConnectionRefusedError,)),
        (Cause.CONNECT_TIMEOUT, (requests.exceptions.ConnectTimeout,)),
        (Cause.READ_TIMEOUT, (requests.exceptions.ReadTimeout, socket.timeout)),
        (
            Cause.RESET,
            (
                ConnectionResetError,
                ConnectionAbortedError,
                BrokenPipeError,
                requests.exceptions.ChunkedEncodingError,
            ),
        ),
    ]
    for cause, types in kinds:
        if any(isinstance(e, types) for e in chain):
            return cause
    if isinstance(exc, requests.exceptions.Timeout):
        return Cause.READ_TIMEOUT
    # an error of urllib3 that requests did not wrap, told by its module (not imported here)
    if isinstance(exc, (requests.exceptions.ConnectionError, OSError)) or type(exc).__module__.startswith("urllib3"):
        return Cause.OTHER
    return Cause.NONE


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, without any user name or password."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "the configured host"
