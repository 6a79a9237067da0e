"""What a run reports beyond each job's fate: Plex outages and dead-lettered jobs.

The worker calls ``plex_down(why)``, ``plex_up()`` and ``dead_lettered(...)``; this keeps
``sync_health.json`` true (the hook's warning) and, with notification URLs set, notifies
once when an outage has lasted ``down_after_s`` (across drainers), once when Plex is back
after such a notice, and at most once per ten minutes for dead-lettered jobs, grouped by
reason (what comes sooner is held in the health file). A failed notification changes
nothing here.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.log import first_ids
from core.notify import FAILURE, SUCCESS, WARNING

if TYPE_CHECKING:
    from core.notify import Notifier
    from sync_queue.health import HealthFile

PLEX_DOWN = "Plex is unavailable"
DEAD_LETTER_EVERY_S = 600.0  # at most one dead-letter message per this many seconds


def minutes(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


@dataclass
class RunNotices:
    health: HealthFile
    notifier: Notifier | None = None
    down_after_s: float = 600.0
    fix: str = ""
    clock: Callable[[], float] = time.time
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _known_up: bool = field(default=False, init=False)  # this process has seen the file say Plex is not down
    _dead: defaultdict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list), init=False)

    # -- Plex outages ---------------------------------------------------------------
    def plex_down(self, why: str) -> None:
        now = self.clock()
        with self._lock:
            self._known_up = False
            state = self.health.state()
            since = float(state.get("plex_down_since") or now)
            changes: dict = {}
            if "plex_down_since" not in state:
                reason = f"{PLEX_DOWN} ({why})"
                changes.update(plex_down_since=now, failing={"reason": reason, "fix": self.fix, "at": now})
            if self.notifier is not None and not state.get("plex_down_notified") and now - since >= self.down_after_s:
                started = time.strftime("%H:%M", time.localtime(since))
                self.notifier.send(
                    "Stash2Plex: Plex is unreachable",
                    f"Plex has been unreachable for {minutes(now - since)} (since {started}): {why}. "
                    "Queued jobs wait and resume by themselves when it answers.",
                    WARNING,
                )
                changes["plex_down_notified"] = True
            if changes:
                self.health.update(**changes)

    def plex_up(self) -> None:
        if self._known_up:  # the common case: one check per process, then no file access
            return
        with self._lock:
            state = self.health.state()
            self._known_up = True
            if "plex_down_since" not in state:
                return
            failing = state.get("failing") or {}
            plex_failing = str(failing.get("reason", "")).startswith(PLEX_DOWN)
            self.health.update(
                plex_down_since=None,
                plex_down_notified=None,
                failing=None if plex_failing else failing or None,
            )
            if self.notifier is not None and state.get("plex_down_notified"):
                lasted = minutes(self.clock() - float(state["plex_down_since"]))
                self.notifier.send(
                    "Stash2Plex: Plex is reachable again",
                    f"Plex answers again after {lasted}; waiting jobs resume.",
                    SUCCESS,
                )

    # -- the dead-letter queue --------------------------------------------------------
    def dead_lettered(self, scene_id: int, error_class: str, message: str) -> None:
        with self._lock:
            self._dead[error_class].append((scene_id, message))

    def dead_letter_text(self, held: dict | None = None) -> tuple[str, str] | None:
        """This run's dead-lettered jobs, plus those ``held`` from earlier runs, as one
        (title, message) grouped by reason."""
        groups = self._take_dead(held or {})
        if not groups:
            return None
        total = sum(group["count"] for group in groups.values())
        lines = []
        for error_class, group in sorted(groups.items(), key=lambda item: -item[1]["count"]):
            n = group["count"]
            ids = first_ids(group["scenes"], n)
            lines.append(f"{n} × {error_class} (scenes {ids}): {group['message'][:300]}")
        title = f"Stash2Plex: {total} scene{'s' if total != 1 else ''} moved to the dead-letter queue"
        return title, "\n".join(lines)

    def _take_dead(self, held: dict) -> dict[str, dict]:
        """``held`` groups (the health file's) with this run's dead letters added: per error class
        ``{"count", "scenes" (the first ten ids), "message" (the first)}``."""
        groups = {k: dict(v) for k, v in held.items() if isinstance(v, dict) and isinstance(v.get("count"), int)}
        with self._lock:
            dead, self._dead = self._dead, defaultdict(list)
        for error_class, jobs in dead.items():
            group = groups.setdefault(error_class, {"count": 0, "scenes": [], "message": jobs[0][1]})
            group["count"] += len(jobs)
            group["scenes"] = (list(group.get("scenes") or []) + [sid for sid, _ in jobs])[:10]
        return groups

    def _dead_letter_notice(self) -> None:
        """At most one dead-letter message per ``DEAD_LETTER_EVERY_S`` for all runs together
        (a burst of hooks is many short drainer runs): what enters the queue sooner is held
        in the health file and told in the next message, at the end of the first run after."""
        state = self.health.state()
        held = self._take_dead(state.get("dead_letters_held") or {})
        if not held:
            return
        now = self.clock()
        last = float(state.get("dead_letters_notified_at") or 0.0)
        if 0.0 <= now - last < DEAD_LETTER_EVERY_S:
            self.health.update(dead_letters_held=held)
            return
        text = self.dead_letter_text(held)
        if text is not None and self.notifier is not None:  # finish() calls this only with a notifier
            self.notifier.send(*text, FAILURE)
        self.health.update(dead_letters_held=None, dead_letters_notified_at=now)

    def close(self) -> None:
        """The run is over: send (or hold) the dead-letter summary, wait briefly for deliveries."""
        if self.notifier is None:
            return
        self._dead_letter_notice()
        self.notifier.close()
