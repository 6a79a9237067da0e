"""The one place that maps plexapi/requests failures onto our exception tree.

plexapi/server.py ``PlexServer.query`` raises ``Unauthorized`` (401), ``NotFound`` (404) or
``BadRequest`` (any other error status), a request sent beside it requests' ``HTTPError``; by
status: 401/403 → PlexAuthError, 404 → PlexNotFound, 503 → PlexUnavailable, 429/5xx →
TransientError, other 4xx → PlexBadRequest. Network failures by
cause (core/netcause.py): no connection → PlexUnavailable, broken mid-reply → TransientError,
TLS rejected → ConfigError. ``TypeError``/``AttributeError`` mean an unreadable reply only when
plexapi raised them (ours are bugs). Messages never carry the token.
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from core.errors import (
    ConfigError,
    PlexAuthError,
    PlexBadRequest,
    PlexNotFound,
    PlexRequestTooLong,
    PlexUnavailable,
    Stash2PlexError,
    TransientError,
)
from core.netcause import Cause, host_of, network_cause

_STATUS = re.compile(r"^\((\d{3})\)")
_OUR_PACKAGES = ("app", "core", "hooks", "plex", "stash", "sync_queue", "tasks", "validation", "worker")


def translate(exc: BaseException, what: str, url: str = "") -> Stash2PlexError:
    """Our exception for ``exc``, decided by its type and status (a network failure by its
    cause, ``core/netcause.py``). A ``TypeError``/``AttributeError`` raised by our own
    code is a bug and is re-raised as it is, with its traceback."""
    import requests
    from plexapi import exceptions as plex_exc

    if isinstance(exc, Stash2PlexError):
        return exc
    if isinstance(exc, (plex_exc.BadRequest, plex_exc.NotFound, requests.HTTPError)):
        return _from_status(exc, what)
    cause = network_cause(exc)
    if cause is not Cause.NONE:
        return _from_network(cause, what, url)
    if isinstance(exc, ET.ParseError) or (isinstance(exc, (TypeError, AttributeError)) and _raised_in_plexapi(exc)):
        return TransientError(f"Plex sent a reply Stash2Plex could not read while {what} ({type(exc).__name__})")
    raise exc


def _from_network(cause: Cause, what: str, url: str) -> Stash2PlexError:
    host = host_of(url) if url else "the plex_url host"
    if cause is Cause.REFUSED:
        return PlexUnavailable(
            f"Plex refused the connection at {host} while {what}; is Plex running and is plex_url right?"
        )
    if cause is Cause.DNS:
        return PlexUnavailable(
            f"the host name in plex_url ({host}) could not be resolved while {what}; check plex_url for a typo"
        )
    if cause is Cause.CONNECT_TIMEOUT:
        return PlexUnavailable(f"Plex at {host} did not accept a connection in time while {what}; is it running?")
    if cause is Cause.READ_TIMEOUT:
        return TransientError(f"Plex did not answer in time while {what}")
    if cause is Cause.TLS_CERT:
        return ConfigError(
            f"Plex's TLS certificate at {host} was rejected while {what} (self-signed or unknown issuer). "
            "Point the environment variable REQUESTS_CA_BUNDLE at the certificate (or its CA) file, "
            "or use an http:// plex_url"
        )
    if cause is Cause.TLS:
        return ConfigError(
            f"the TLS handshake with {host} failed while {what}; does that port speak https? "
            "If not, use an http:// plex_url"
        )
    if cause is Cause.RESET:
        return TransientError(f"the connection to Plex broke mid-reply while {what}")
    return TransientError(f"the connection to Plex failed while {what}")


def _raised_in_plexapi(exc: BaseException) -> bool:
    """Whether plexapi (reading an odd reply), not our code, raised ``exc``."""
    import os
    import traceback

    import plexapi

    root = os.path.dirname(plexapi.__file__)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = tuple(os.path.join(repo, d) + os.sep for d in _OUR_PACKAGES)
    for frame, _ in reversed(list(traceback.walk_tb(exc.__traceback__))):  # the innermost of plexapi's or ours
        path = os.path.abspath(frame.f_code.co_filename)
        if path.startswith(root):
            return True
        if path.startswith(ours):
            return False
    return False


def _status(exc: BaseException) -> int:
    """The status of a failed request: requests' ``HTTPError`` carries its reply, plexapi's
    errors name it first (``(404) not_found; <url> …``, server.py ``PlexServer.query``)."""
    response = getattr(exc, "response", None)
    if response is not None:
        return int(response.status_code)
    match = _STATUS.match(str(exc))
    return int(match.group(1)) if match else 0


def _from_status(exc: BaseException, what: str) -> Stash2PlexError:
    from plexapi import exceptions as plex_exc

    status = _status(exc)
    if isinstance(exc, plex_exc.Unauthorized) or status == 401:
        return PlexAuthError(
            f"Plex rejected the token while {what} (401). Check the plex_token setting: "
            "copy X-Plex-Token again from Plex Web (Get Info → View XML)."
        )
    if isinstance(exc, plex_exc.NotFound) or status == 404:
        return PlexNotFound(f"Plex has no such item while {what}")
    if status == 403:
        return PlexAuthError(
            f"Plex refused access while {what} (403). The plex_token's account cannot edit this library."
        )
    if status in (413, 414):
        return PlexRequestTooLong(
            f"Plex, or a proxy in front of it, refused the request as too long ({status}) while {what}"
        )
    if status == 503:
        return PlexUnavailable(f"Plex is unavailable (503) while {what}")
    if status == 429 or status >= 500:
        return TransientError(f"Plex answered {status} while {what}")
    return PlexBadRequest(f"Plex rejected the request ({status}) while {what}: {str(exc)[:300]}")


@contextlib.contextmanager
def plex_errors(what: str, url: str = "") -> Iterator[None]:
    """Run a block of Plex calls; anything that escapes is one of ours (or a bug of ours)."""
    try:
        yield
    except Exception as exc:
        translated = translate(exc, what, url)
        if translated is exc:
            raise
        raise translated from None


@contextlib.contextmanager
def not_plex_named(url: str) -> Iterator[None]:
    """Around the first request (``GET /`` at plex_url): an answer that is not Plex's
    (a 404, an HTML page such as Plex Web's at ``/web``) means plex_url points at the
    wrong place, which no retry can fix (it would otherwise look like "item not found")."""
    from plexapi import exceptions as plex_exc

    try:
        yield
    except (plex_exc.NotFound, ET.ParseError) as exc:
        raise ConfigError(
            _not_plex(url, "404 Not Found" if isinstance(exc, plex_exc.NotFound) else "not Plex's XML")
        ) from None
    except plex_exc.BadRequest as exc:
        code = _status(exc)
        if code in (401, 403, 429) or code >= 500:
            raise
        raise ConfigError(_not_plex(url, f"status {code}")) from None


def _not_plex(url: str, answer: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path or "/"
    return (
        f"setting plex_url: the server at {host_of(url)} answered {answer} at {path}, which is not Plex's answer. "
        f"plex_url must be the server's address only, like {parts.scheme}://{host_of(url)} "
        f"(no {path} or other path)"
        if path not in ("", "/")
        else f"setting plex_url: the server at {host_of(url)} answered {answer} at /, which is not Plex's answer; "
        "is plex_url the address of your Plex Media Server (usually port 32400)?"
    )
