"""How many scenes Plex takes at once, read from its latency (a Vegas-style limit).

As TCP Vegas (Brakmo and Peterson, 1994; Netflix ``concurrency-limits`` ``VegasLimit``), each round
of ``limit`` clean syncs estimates how many of ours waited at Plex by Little's law (the time queued
over the round's time): ``waiting = Σ(answered − unloaded) / round``, where ``answered`` is how
long Plex took to answer a sync's requests (our own CPU is never read as Plex's queue): fewer than
``alpha``, one more at once; more than ``beta``, fewer (down to where nothing would wait); always
within ``maximum`` (``plex_concurrency``). Until Plex first queues, the limit doubles per round (a
slow start). ``unloaded`` is, per kind of sync, Plex's answer time of the fastest of the last
``remembered`` syncs that ran *alone* (no other of ours in flight): a sync beside others measures a
queue, not Plex (one Plex answered faster still lowers it). At the start, and when no sync ran alone
for ``window_s``, the limit is 1 until ``probe`` syncs have (as BBR's ProbeRTT), so a queue of ours
never becomes the "unloaded" time, and a Plex slower for everyone, read as a queue at first, is
learnt anew from the syncs alone once the limit is down to 1. ``workers``: how many of our requests Plex serves at once, the most read
(``Σ unloaded / round``) in a round that queued (a queue now and then leaves workers idle between). While someone watches (``viewing``), ``headroom``
is ``workers − 1``: the pipeline keeps that many of our requests at Plex at most (plex/gate.py),
so one worker stays free for them.
Why: docs/architecture.md, step 10 of the sync.

Pure: ``observe(seconds, kind, now, alone, answered)`` with the time passed in; tests assert exact limits.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

__all__ = ["GradientPolicy", "LatencyLimit"]

SERVED_ROUNDS = 3  # rounds with a queue before Plex's workers are known (one round's reading is noisy)


@dataclass(frozen=True)
class GradientPolicy:
    alpha: float = 0.5  # fewer of ours waiting at Plex than this: grow
    beta: float = 1.0  # more than this: shrink
    window_s: float = 15.0  # a sync alone at least this often (else a probe at 1)
    remembered: int = 3  # the unloaded time: the fastest of this many last syncs alone
    probe: int = 1  # syncs alone per probe (the first one before anything else)
    start: int = 2  # the limit after the first probe

    def __post_init__(self) -> None:
        if not (
            0 <= self.alpha <= self.beta and self.window_s > 0 and min(self.start, self.probe, self.remembered) >= 1
        ):
            raise ValueError(
                f"GradientPolicy needs 0 <= alpha <= beta, window_s > 0, start, probe, remembered >= 1; got {self}"
            )


class LatencyLimit:
    """The limit, updated once per round of ``limit`` observed syncs."""

    def __init__(self, maximum: int, policy: GradientPolicy = GradientPolicy()) -> None:
        if maximum < 1:
            raise ValueError(f"maximum must be at least 1, not {maximum}")
        self.maximum, self.policy = maximum, policy
        self._limit = min(policy.start, maximum)
        self.waiting = 0.0  # the last round's estimate, for the log
        self.workers: int | None = None  # Plex's workers serving us, once a round saw them all busy
        self.viewing = False  # someone watches Plex: leave them a worker (``headroom``)
        self._unloaded: dict[str, deque[float]] = {}  # per kind: Plex's answer times of the last syncs alone
        self._probe_left = policy.probe  # syncs alone still wanted (one at a time meanwhile)
        self._alone_at = 0.0  # when a sync last ran alone
        self._since = 0.0  # when the round began (the last round's end, or the probe's)
        self._served: deque[float] = deque(maxlen=5)  # how many Plex served, in the last rounds with a queue
        self._round: list[tuple[float, float, float]] = []  # per sync: seconds queued at Plex, served, in all

    @property
    def limit(self) -> int:
        return 1 if self.probing else self._limit

    @property
    def headroom(self) -> int | None:
        """The most of our requests at Plex at once: while someone watches, one worker fewer
        than Plex serves us with (None: no bound, or the workers are not known yet)."""
        return max(1, self.workers - 1) if self.viewing and self.workers is not None else None

    @property
    def probing(self) -> bool:
        """Timing syncs alone: one at a time until ``probe`` of them ran."""
        return self._probe_left > 0

    def observe(self, seconds: float, kind: str, now: float, alone: bool = False, answered: float | None = None) -> int:
        """One clean sync took ``seconds`` and ended at ``now``, of which Plex took ``answered``
        to answer (default: all of it); ``alone``: no other of ours was in flight meanwhile.
        The limit after it."""
        answered = seconds if answered is None else answered
        if not self.probing and now - self._alone_at > self.policy.window_s:
            self._probe_left = self.policy.probe
        recent = self._unloaded.setdefault(kind, deque(maxlen=self.policy.remembered))
        if alone or not recent or answered < min(recent):
            recent.append(answered)
        unloaded = min(recent)
        if alone:
            self._alone_at = now
        if self.probing:  # a sync alone counts; those draining count in no round
            self._probe_left -= alone
            self._since, self._round = now, []
            return self.limit
        queued = max(0.0, answered - unloaded)
        self._round.append((queued, answered - queued, seconds))
        queued, served, took = (sum(column) for column in zip(*self._round, strict=True))
        span = now - self._since
        # a round spans half a sync's time at least: syncs settled together say nothing of a rate
        if len(self._round) >= self.limit and span >= took / len(self._round) / 2:
            self._decide(queued / span, served / span)
            self._since, self._round = now, []
        return self.limit

    def _decide(self, waiting: float, served: float) -> None:
        """Little's law over the round: ``waiting`` of ours queued at Plex on average, ``served``
        being served (not probing: the limit is ``_limit``)."""
        self.waiting, limit = waiting, self._limit
        if waiting < self.policy.alpha:
            self._limit = min(self.maximum, limit + 1 if self._served else limit * 2)  # doubling till a queue
            return
        self._served.append(served)  # a queue: Plex's workers were busy with ours
        if len(self._served) >= SERVED_ROUNDS:
            self.workers = max(1, round(statistics.median(self._served)))
        if waiting > self.policy.beta:
            self._limit = max(1, min(limit - 1, math.ceil(limit - waiting)))
