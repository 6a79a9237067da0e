"""Turning a job's outcome into what happens to it: ack, retry later, wait for Plex, or DLQ.

A pure function of (job, error, now, rng, probe time): the class of the error
decides the route (core/errors.py), the retry policy decides the time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from core import errors
from core.backoff import NOT_FOUND, TRANSIENT, schedule
from sync_queue.job import Job
from sync_queue.sqlite import disk_fault

UNAVAILABLE_RECHECK_S = 2.0  # before the breaker opens; then its probe waits (2, 4, 8 … 60 s)
STASH_RECHECK_S = 5.0
HELD = (errors.ConfigError, errors.RunStopped, errors.StashRefused)  # a setting or the run, not the job


class Action(Enum):
    """What happens to a job; ``Worker.settle`` carries it out (worker/worker.py)."""

    ACK = "ack"  # done: acknowledged
    RETRY = "retry"  # failed: scheduled again with its attempt counted
    POSTPONE = "postpone"  # Plex unavailable: waits for the breaker's probe, its budget intact
    WAIT_STASH = "wait_stash"  # Stash unavailable: waits, its budget intact
    HOLD = "hold"  # a setting, the run or our disk, not the job: left unacked, the run stops
    DLQ = "dlq"  # given up: to the dead-letter queue, acknowledged


@dataclass(frozen=True)
class Decision:
    action: Action
    job: Job
    until: float | None = None
    message: str = ""


def _dlq_message(job: Job, error: BaseException) -> str:
    if isinstance(error, errors.PlexNotFound):
        paths = ", ".join(error.looked_for) or "its file"
        return (
            f"not in Plex after {job.attempt + 1} attempts: no Plex item holds {paths}. "
            "Check that Plex has scanned the file and that path_map maps Stash paths to Plex paths; "
            "then run 'Retry dead-letter queue'."
        )
    if isinstance(error, errors.AmbiguousMatch):
        return f"{error} An item chosen in the inbox syncs at once; after a fix in path_map or Plex, run 'Retry dead-letter queue'."
    if isinstance(error, errors.PermanentError):
        return str(error)
    if not isinstance(error, errors.Stash2PlexError):
        return (
            f"Stash2Plex hit a bug ({type(error).__name__}: {error}); the traceback is in the log. "
            "Please report it; after an update, run 'Retry dead-letter queue'."
        )
    return f"gave up after {job.attempt + 1} attempts: {type(error).__name__}: {error}"


def not_the_jobs(error: BaseException) -> bool:
    """Whether ``error`` holds or postpones every job alike (a wrong setting, the run
    stopping, a refused Stash session, Plex down), so the job keeps its retry budget. A
    poster that failed for one of these did not fail on its own (worker/poster.py ``Posters.write``)."""
    return isinstance(error, (*HELD, errors.PlexUnavailable))


def decide(
    job: Job, error: BaseException | None, now: float, rng: random.Random, probe_at: float | None = None
) -> Decision:
    if error is None:
        return Decision(Action.ACK, job)
    if isinstance(error, HELD) or disk_fault(error) is not None:
        # A setting is wrong, the run is stopping, or our own disk refuses (full, or a data file
        # held by another program), not the job: it keeps its budget and stays queued, and the
        # run stops so the reply can name the cause (the drainer tries again later).
        return Decision(Action.HOLD, job, now, str(disk_fault(error) or error))
    if isinstance(error, errors.PlexUnavailable):
        until = probe_at if probe_at and probe_at > now else now + UNAVAILABLE_RECHECK_S
        return Decision(Action.POSTPONE, job, until, f"Plex unavailable; waiting until {until:.0f}")
    if isinstance(error, errors.StashUnavailable):  # an outage of Stash: the job waits, its budget intact
        return Decision(Action.WAIT_STASH, job, now + STASH_RECHECK_S, str(error))
    if isinstance(error, errors.PermanentError) or not isinstance(error, errors.Stash2PlexError):
        # a bug of ours is not retried: it would fail the same way (the traceback is logged)
        return Decision(Action.DLQ, job, None, _dlq_message(job, error))
    missing = error if isinstance(error, errors.PlexNotFound) else None
    next_at = schedule(job.attempt + 1, TRANSIENT if missing is None else NOT_FOUND, now, rng)
    if next_at is None:
        return Decision(Action.DLQ, job, None, _dlq_message(job, error))
    scan = job.scan_requested or (missing is not None and missing.scan_requested)
    since = now if missing is not None and job.not_found_since is None else job.not_found_since  # the first miss
    retried = job.retry(next_at, error, scan_requested=scan, not_found_since=since)
    return Decision(Action.RETRY, retried, next_at, f"{type(error).__name__}: {error}")
