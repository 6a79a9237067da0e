"""The one place that maps plexapi/requests failures onto our exception tree.

By type and status code (plexapi/server.py ``PlexServer.query`` raises ``Unauthorized``
for 401, ``NotFound`` for 404 and ``BadRequest`` for any other error status; requests
raises ``ConnectionError``/``Timeout``): 401/403 → PlexAuthError
(permanent: the token is wrong), 404 → PlexNotFound, 429/5xx/timeouts/resets →
TransientError, connection refused and 503 → PlexUnavailable (the breaker counts
those), other 4xx → PlexBadRequest. Messages never carry the token: plexapi strips
it from URLs, and the redactor catches anything else.
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from core.errors import (
    PlexAuthError,
    PlexBadRequest,
    PlexNotFound,
    PlexUnavailable,
    Stash2PlexError,
    TransientError,
)

_STATUS = re.compile(r"^\((\d{3})\)")


def translate(exc: BaseException, what: str) -> Stash2PlexError:
    import requests
    from plexapi import exceptions as plex_exc

    if isinstance(exc, Stash2PlexError):
        return exc
    if isinstance(exc, plex_exc.Unauthorized):
        return PlexAuthError(
            f"Plex rejected the token while {what} (401). Check the plex_token setting: "
            "copy X-Plex-Token again from Plex Web (Get Info → View XML)."
        )
    if isinstance(exc, plex_exc.NotFound):
        return PlexNotFound(f"Plex has no such item while {what}")
    if isinstance(exc, plex_exc.BadRequest):
        return _from_status(exc, what)
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return PlexUnavailable(f"Plex did not accept a connection while {what}; is it running and is plex_url right?")
    if isinstance(exc, requests.exceptions.Timeout):
        return TransientError(f"Plex did not answer in time while {what}")
    if isinstance(exc, requests.exceptions.ConnectionError):
        if "refused" in str(exc).lower() or "Max retries" in str(exc):
            return PlexUnavailable(f"Plex refused the connection while {what}; is it running and is plex_url right?")
        return TransientError(f"the connection to Plex broke while {what}")
    if isinstance(exc, (ET.ParseError, TypeError, AttributeError)):
        return TransientError(f"Plex sent a reply Stash2Plex could not read while {what} ({type(exc).__name__})")
    raise exc


def _from_status(exc: BaseException, what: str) -> Stash2PlexError:
    match = _STATUS.match(str(exc))
    status = int(match.group(1)) if match else 0
    if status == 403:
        return PlexAuthError(
            f"Plex refused access while {what} (403). The plex_token's account cannot edit this library."
        )
    if status == 503:
        return PlexUnavailable(f"Plex is unavailable (503) while {what}")
    if status == 429 or status >= 500:
        return TransientError(f"Plex answered {status} while {what}")
    return PlexBadRequest(f"Plex rejected the request ({status}) while {what}: {str(exc)[:300]}")


@contextlib.contextmanager
def plex_errors(what: str) -> Iterator[None]:
    """Run a block of Plex calls; anything that escapes is one of ours."""
    try:
        yield
    except Exception as exc:
        raise translate(exc, what) from None
