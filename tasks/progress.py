"""Progress for long tasks: Stash's progress bar plus a readable line every few seconds."""

from __future__ import annotations

import time


class ProgressReporter:
    def __init__(self, log, total: int, unit: str = "scenes", every_s: float = 5.0, clock=time.monotonic) -> None:
        self.log, self.total, self.unit, self.every_s, self.clock = log, total, unit, every_s, clock
        self.started = clock()
        self._last_line = self.started

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        if self.total:
            self.log.progress(min(1.0, done / self.total))
        now = self.clock()
        if now - self._last_line >= self.every_s:
            self._last_line = now
            rate = done / max(now - self.started, 1e-6)
            self.log.info(f"{done}/{self.total} {self.unit}, {rate:.1f}/s")
