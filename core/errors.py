"""The one exception tree of Stash2Plex: the class decides the route (``worker/settle.py``).

``TransientError`` is retried on the transient schedule, ``PlexNotFound`` on the slow one;
``PlexUnavailable`` trips the breaker and ``StashUnavailable`` makes the jobs wait, neither
spending retry budget; ``PermanentError`` goes to the dead-letter queue with what to do;
``ConfigError`` and ``StashRefused`` stop the run (``RunStopped``: a job it did not try),
the jobs queued with their budget; ``DataFileError`` names a corrupt data file, never
deleted. Library errors are translated once per client: ``plex/errors.py``, ``stash/client.py``.
"""

from __future__ import annotations


class Stash2PlexError(Exception):
    """Root of every error Stash2Plex raises on purpose."""


class TransientError(Stash2PlexError):
    """A failure that may go away by itself: timeout, connection reset, 5xx, 429."""


class PlexUnavailable(TransientError):
    """Plex refuses connections or answers 503: the circuit breaker counts it."""


class StashUnavailable(TransientError):
    """Stash cannot be reached (refused, not resolved, timed out, reset, a 5xx or a page
    that is not GraphQL): an outage of Stash. Jobs wait without spending their retry
    budget and Stash is probed again, like Plex."""


class StashQueryError(TransientError):
    """Stash answered, but with GraphQL errors: retried on the transient schedule."""


class SlowDownload(TransientError):
    """A screenshot did not arrive within the download's overall deadline (it trickled in)."""


class StashRefused(Stash2PlexError):
    """Stash refused the plugin's session or API key (401/403). The run stops; the jobs
    stay queued with their budget intact (the next hook or task brings a fresh session)."""


class PlexNotFound(TransientError):
    """No Plex item holds the scene's file (yet); retried on the slow schedule.

    ``scan_requested`` is set once Plex has been asked to scan the file's folder, so
    the job's retries do not ask again.
    """

    def __init__(self, message: str, looked_for: tuple[str, ...] = (), scan_requested: bool = False) -> None:
        super().__init__(message)
        self.looked_for = looked_for
        self.scan_requested = scan_requested


class PermanentError(Stash2PlexError):
    """Retrying cannot help; the job goes to the dead-letter queue."""


class InvalidMetadata(PermanentError):
    """The scene's metadata from Stash cannot be written to Plex."""


class PlexAuthError(PermanentError):
    """Plex rejected the token (401/403)."""


class PlexBadRequest(PermanentError):
    """Plex rejected the request itself (400-class other than 401/403/404/429)."""


class PlexRequestTooLong(PlexBadRequest):
    """Plex, or a proxy in front of it, refused a request as too long (414 or 413). An
    edit is then sent again in smaller requests; only what cannot be made smaller ends here."""


class AmbiguousMatch(PermanentError):
    """Several Plex items could hold the scene and none is clearly right."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


class PinnedItemGone(PermanentError):
    """The Plex item a user pinned the scene to is gone (or in a library not synced); the
    pin is dropped and the scene waits in the inbox for a new answer."""


class ConfigError(Stash2PlexError):
    """A plugin setting is missing or malformed; the message names the setting."""


# Plex down, the token refused, a bad setting: every further scene of a bulk task (a preview,
# reconcile) would fail the same way, so the task stops on them instead of failing scene by scene.
FAILS_EVERY_SCENE = (PlexUnavailable, PlexAuthError, ConfigError)


class RunStopped(Stash2PlexError):
    """The run stopped (token rejected, bad setting) before this job reached Plex; it stays
    queued as it was."""


class DependencyError(Stash2PlexError):
    """The packages of requirements.txt are missing and could not be installed; the message
    says what to run (app/bootstrap.py)."""


class InputError(Stash2PlexError):
    """The document Stash wrote on stdin is malformed; the message names the field."""


class DataFileError(Stash2PlexError):
    """A queue, ledger or DLQ file cannot be read; the message names the file."""


class DiskRefused(DataFileError):
    """The plugin's own disk refuses for now (full, read-only, no permission) or another
    program holds a data file: nothing is wrong with the file or the job. The run stops
    with the jobs queued, their budget intact, and the drainer tries again by itself."""
