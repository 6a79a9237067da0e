"""How many scenes Plex takes at once, read from its latency (a Vegas-style limit).

As TCP Vegas (Brakmo and Peterson, 1994; Netflix ``concurrency-limits`` ``VegasLimit``), each round
of ``limit`` clean syncs estimates how many of ours waited at Plex,
``waiting = limit × (1 − unloaded / latency)``: fewer than ``alpha``, one more at once; more than
``beta``, one fewer; always within ``maximum`` (``plex_concurrency``). ``unloaded`` is the fastest
sync of each kind in the last ``window_s`` seconds. Why: docs/architecture.md, step 10.

Pure: ``observe(seconds, kind, now)`` with the time passed in; tests assert exact limits.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["GradientPolicy", "LatencyLimit"]


@dataclass(frozen=True)
class GradientPolicy:
    alpha: float = 2.0  # fewer of ours waiting at Plex than this: grow
    beta: float = 4.0  # more than this: shrink
    window_s: float = 10.0  # the unloaded latency is the fastest sync this recent
    start: int = 1

    def __post_init__(self) -> None:
        if not (0 <= self.alpha <= self.beta and self.window_s > 0 and self.start >= 1):
            raise ValueError(f"GradientPolicy needs 0 <= alpha <= beta, window_s > 0, start >= 1; got {self}")


class _WindowMin:
    """The smallest value observed in the last ``window`` seconds (a monotonic deque)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._items: deque[tuple[float, float]] = deque()  # (when, value), values increasing

    def add(self, value: float, now: float) -> float:
        while self._items and self._items[-1][1] >= value:
            self._items.pop()
        self._items.append((now, value))
        while self._items[0][0] < now - self.window:
            self._items.popleft()
        return self._items[0][1]


class LatencyLimit:
    """The limit, updated once per round of ``limit`` observed syncs."""

    def __init__(self, maximum: int, policy: GradientPolicy = GradientPolicy()) -> None:
        if maximum < 1:
            raise ValueError(f"maximum must be at least 1, not {maximum}")
        self.maximum, self.policy = maximum, policy
        self.limit = min(policy.start, maximum)
        self.waiting = 0.0  # the last round's estimate, for the log
        self._unloaded: dict[str, _WindowMin] = {}
        self._ratios: list[float] = []

    def observe(self, seconds: float, kind: str, now: float) -> int:
        """One clean sync took ``seconds`` at ``now``; the limit after it."""
        window = self._unloaded.setdefault(kind, _WindowMin(self.policy.window_s))
        unloaded = window.add(seconds, now)
        self._ratios.append(seconds / unloaded if unloaded > 0 else 1.0)
        if len(self._ratios) >= self.limit:
            self._decide(sum(self._ratios) / len(self._ratios))
            self._ratios = []
        return self.limit

    def _decide(self, slower: float) -> None:
        self.waiting = self.limit * (1 - 1 / slower)
        if self.waiting < self.policy.alpha:
            self.limit = min(self.maximum, self.limit + 1)
        elif self.waiting > self.policy.beta:
            self.limit = max(1, self.limit - 1)
