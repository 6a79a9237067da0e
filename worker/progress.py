"""A foreground run of the worker (process_queue, all, recent, reconcile): its progress and its end.

Progress is Stash's progress bar plus a readable line every few seconds. The bar moves with
the work, not page by page: at most every ``bar_every_s`` while jobs settle (and with every
job when each takes longer than that). The log line and the command line's bar carry the
rate and an estimate of the time left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from core.log import StashLog
    from worker.worker import Worker

DONE_KEYS = ("synced", "unchanged", "gone", "failed", "retrying", "waiting_for_plex")


def rate_text(done: int, total: int, elapsed: float, unit: str) -> str:
    """``900/2,000 scenes, 75.0/s, ~15s left`` (pure: tests assert exact text)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    text = f"{done:,}/{total:,} {unit}, {rate:.1f}/s"
    if 0 < done < total and rate > 0:
        text += f", ~{(total - done) / rate:.0f}s left"
    return text


@dataclass
class ProgressReporter:
    log: StashLog
    total: int
    unit: str = "scenes"
    every_s: float = 5.0
    bar_every_s: float = 0.25
    clock: Callable[[], float] = time.monotonic
    _last_bar: float = field(default=float("-inf"), init=False)

    def __post_init__(self) -> None:
        self.started = self._last_line = self.clock()

    def update(self, done: int, total: int | None = None, final: bool = False) -> None:
        if total is not None:
            self.total = total
        now = self.clock()
        if self.total and (final or now - self._last_bar >= self.bar_every_s):
            self._last_bar = now
            self.log.progress(min(1.0, done / self.total), rate_text(done, self.total, now - self.started, self.unit))
        if now - self._last_line >= self.every_s:
            self._last_line = now
            self.log.info(rate_text(done, self.total, now - self.started, self.unit))


def counts_text(counts: Mapping[str, int]) -> str:
    """A run's counts as words, the biggest first: ``12 synced, 3 unchanged, 1 failed``.

    >>> counts_text({"synced": 12, "failed": 1, "unchanged": 3, "gone": 0})
    '12 synced, 3 unchanged, 1 failed'
    >>> counts_text({})
    'nothing to do'
    """
    parts = [(n, name.replace("_", " ")) for name, n in dict(counts).items() if n]
    parts.sort(key=lambda part: -part[0])
    return ", ".join(f"{n:,} {name}" for n, name in parts) or "nothing to do"


def sum_done(stats: Mapping[str, int]) -> int:
    """The jobs a run has settled so far, for its progress."""
    return sum(stats[k] for k in DONE_KEYS)


def finish(worker: Worker, left: int, ensure_drainer: Callable[[], object]) -> dict:
    """The run's reply; leftover retries handed to a background drainer. (The cumulative
    statistics were recorded batch by batch by the worker.)"""
    stats, log = worker.stats, worker.log
    result = {**{k: stats.get(k, 0) for k in (*DONE_KEYS, "posters")}, **dict(stats), "waiting": left}
    if worker.abort_error is not None:
        # The run stopped early (Plex rejected the token, or a setting is wrong): say
        # why. The jobs not yet done stay queued and no background drainer is started:
        # it would only stop the same way.
        raise worker.abort_error
    if left:
        ensure_drainer()
        log.info(f"{left} jobs wait for a retry; a background drainer will run them when due")
    log.info(f"done: {counts_text(stats)}")
    return result
