"""Logging for the standalone command line: readable lines and a progress bar.

The same interface as :class:`core.log.StashLog` (the tasks cannot tell them
apart), but written for a person at a terminal: ``warning:``/``error:`` prefixes,
debug lines only with ``--verbose``, and progress drawn as one bar that redraws in
place on a terminal (log lines are printed above it). When stderr is not a
terminal (cron, a Docker log) there is no bar: the tasks' periodic
``done/total, rate`` lines are the progress. The bar is a few lines of our own
rather than ``tqdm``: the runtime package list is fixed (requirements.txt).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from core.log import Redactor, StashLog

BAR_WIDTH = 30
REDRAW_S = 0.1


def render_bar(fraction: float, elapsed: float, width: int = BAR_WIDTH, detail: str = "") -> str:
    """``[#########---------]  45%  12s, ~15s left``, or with the task's ``detail``
    (count, rate and time left): ``[###------]  45%  12s  900/2,000 scenes, 75.0/s, ~15s left``
    (pure: tests assert exact text)."""
    fraction = min(1.0, max(0.0, fraction))
    filled = int(round(fraction * width))
    text = f"[{'#' * filled}{'-' * (width - filled)}] {fraction * 100:3.0f}%  {elapsed:.0f}s"
    if detail:
        return f"{text}  {detail}"
    if 0.0 < fraction < 1.0:
        text += f", ~{elapsed * (1 - fraction) / fraction:.0f}s left"
    return text


class TerminalLog(StashLog):
    def __init__(
        self,
        stream: TextIO,
        redactor: Redactor | None = None,
        verbose: bool = False,
        bar: bool | None = None,
        quiet: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(stream, redactor)
        self.verbose = verbose
        self.quiet = quiet  # warnings and errors only (the reply on stdout says it all)
        self.bar = stream.isatty() if bar is None else bar
        self.clock = clock
        self._started = clock()
        self._shown = ""  # the bar as drawn now ("" when none is on screen)
        self._drawn_at = 0.0

    def log(self, level: str, message: object) -> None:
        if (level in ("trace", "debug") and not self.verbose) or (level == "info" and self.quiet):
            return
        prefix = "" if level in ("info", "trace", "debug") else f"{level}: "
        text = self.redact(str(message))
        lines = [line for line in text.splitlines() if line.strip()] or ["(empty message)"]
        self._write(self._clear() + "".join(f"{prefix}{line}\n" for line in lines) + self._shown)

    def report(self, message: object, level: str = "info") -> None:
        """Left out: the result these lines repeat is printed on stdout."""

    def progress(self, fraction: float, detail: str = "") -> None:
        if not self.bar:
            return
        now = self.clock()
        if fraction < 1.0 and now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        old = self._clear()
        self._shown = render_bar(fraction, now - self._started, detail=detail)
        self._write(old + self._shown)

    def finish(self) -> None:
        """Leave the bar on its own finished line."""
        if self._shown:
            self._write("\n")
            self._shown = ""

    def _clear(self) -> str:
        return "\r\x1b[K" if self._shown else ""
