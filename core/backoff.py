"""Retry timing: full-jitter exponential backoff as pure functions (the RNG a parameter).

Full jitter (AWS, "Exponential Backoff and Jitter") draws each delay from
``[0, min(cap, base * 2**n)]``, so jobs that failed together (a Plex restart) do not all
come back at the same second. Two policies, as the failures recover on different scales:
``TRANSIENT`` (timeouts, resets, 5xx: four waits, at most 75 s in all, then the
dead-letter queue) and ``NOT_FOUND`` (a file Plex has not scanned yet: eleven waits from
30 s up to 600 s, at most about 75 minutes in all).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["LOCKED", "NOT_FOUND", "TRANSIENT", "RetryPolicy", "next_delay", "probe_wait", "schedule"]


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between attempts and when to give up.

    ``base`` is the first jitter window in seconds, ``cap`` the largest window, and
    ``max_attempts`` the number of failures after which the job is dead-lettered.
    """

    base: float
    cap: float
    max_attempts: int

    def __post_init__(self) -> None:
        if not (self.base >= 0 and self.cap >= 0 and math.isfinite(self.cap)):
            raise ValueError(f"RetryPolicy needs finite base >= 0 and cap >= 0, got {self}")
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")


TRANSIENT = RetryPolicy(base=5.0, cap=80.0, max_attempts=5)
NOT_FOUND = RetryPolicy(base=30.0, cap=600.0, max_attempts=12)
LOCKED = RetryPolicy(base=0.05, cap=2.0, max_attempts=6)  # SQLite busy: 50 ms, 100 ms … at most 2 s


def window(attempt: int, policy: RetryPolicy) -> float:
    """Return the upper bound of the jitter window: ``min(cap, base * 2**attempt)``.

    Never overflows: ``math.ldexp`` is an exact ``base * 2**attempt`` that raises
    ``OverflowError`` instead of building a huge integer, and any overflow is past the cap.

    >>> window(0, TRANSIENT), window(3, TRANSIENT), window(10**9, TRANSIENT)
    (5.0, 40.0, 80.0)
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    try:
        return min(policy.cap, math.ldexp(policy.base, attempt))
    except OverflowError:
        return policy.cap


def next_delay(attempt: int, policy: RetryPolicy, rng: random.Random) -> float:
    """Return a delay in seconds drawn uniformly from ``[0, window(attempt, policy)]``.

    ``attempt`` counts retries from 0: pass 0 before the first retry (one failure so
    far), 1 before the second, and so on. Exactly one value is drawn from ``rng``
    (``rng.uniform``), so a seeded ``random.Random`` gives reproducible delays.
    """
    return rng.uniform(0.0, window(attempt, policy))


def schedule(attempt: int, policy: RetryPolicy, now: float, rng: random.Random) -> float | None:
    """Return the absolute time of the next attempt, or ``None`` to give up.

    ``attempt`` is the number of failures so far (1 after the first failure). Once it
    reaches ``policy.max_attempts`` the answer is ``None``: the job belongs in the
    dead-letter queue. Otherwise the answer is ``now + next_delay(attempt - 1, ...)``;
    ``rng`` is not touched when giving up.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts failures and must be >= 1, got {attempt}")
    if attempt >= policy.max_attempts:
        return None
    return now + next_delay(attempt - 1, policy, rng)


def probe_wait(failures: int, first: float = 2.0, cap: float = 60.0, rng: random.Random | None = None) -> float:
    """Seconds before probing a server that is down again, after ``failures`` failed tries
    in a row: 2, 4, 8, … capped at 60 s (a short outage costs seconds, a long one a
    request a minute). No jitter: one process probes, not many jobs. With ``rng``, a draw
    from the upper half (AWS's "equal jitter"), for clients that lost a server together:
    they spread out, and none comes back sooner than half the wait.

    >>> [probe_wait(n) for n in range(7)]
    [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    >>> round(probe_wait(2, rng=random.Random(1)), 3)
    4.537
    """
    if failures < 0:
        raise ValueError(f"failures must be >= 0, got {failures}")
    wait = cap if failures >= 32 else min(cap, first * 2**failures)
    return wait if rng is None else rng.uniform(wait / 2, wait)
