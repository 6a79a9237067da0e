"""Cumulative sync statistics (in the state database), summed over every run of every process.

Counts (``synced``, ``unchanged``: the worker's skips and what a bulk task does not
queue, ``gone``, ``posters``, per error class ``failed`` and ``retried``), the Plex time
and jobs timed (the average), and the last success and failure. The worker records one
:class:`Delta` per batch in one transaction: Stash cancels a task with SIGKILL, so a
kill loses at most the batch in flight.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from core.log import shortened
from sync_queue import sqlite

MESSAGE_MAX = 200
_SCHEMA = """
CREATE TABLE IF NOT EXISTS totals (name TEXT PRIMARY KEY, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS latest (name TEXT PRIMARY KEY, at REAL NOT NULL, detail TEXT);
"""
COUNTS = ("synced", "unchanged", "gone", "posters")
PLEX_SECONDS, PLEX_JOBS = "plex_seconds", "plex_jobs"
FAILED, RETRIED = "failed", "retried"
# A run's counts only (a task's reply), not kept: a job that waits is not an outcome.
WAITING, WAITING_STASH = "waiting_for_plex", "waiting_for_stash"


def iso_local(timestamp: float | None) -> str | None:
    """An epoch time as ISO-8601 in local time with its offset (None stays None)."""
    if not timestamp:
        return None
    return dt.datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


@dataclass
class Delta:
    """One batch's counts; keys as in ``totals``: ``synced`` … and ``failed:<class>``."""

    counts: Counter[str] = field(default_factory=Counter)
    plex_seconds: float = 0.0
    last_success_at: float | None = None
    last_failure_at: float | None = None
    last_failure: dict[str, Any] | None = None

    def __bool__(self) -> bool:
        return any(self.counts.values())

    def synced(self, now: float, poster_uploaded: bool = False) -> None:
        self.counts["synced"] += 1
        self.counts["posters"] += int(poster_uploaded)
        self.last_success_at = now

    def unchanged(self, now: float, n: int = 1) -> None:
        if n:
            self.counts["unchanged"] += n
            self.last_success_at = now

    def gone(self) -> None:
        self.counts["gone"] += 1

    def timed(self, seconds: float) -> None:
        """One job's Plex work took ``seconds``."""
        self.plex_seconds += seconds
        self.counts[PLEX_JOBS] += 1

    def failed(self, error_class: str, message: str, now: float) -> None:
        """A job moved to the dead-letter queue."""
        self._failure(FAILED, error_class, message, now)

    def retried(self, error_class: str, message: str, now: float) -> None:
        """A transient failure, scheduled for a retry."""
        self._failure(RETRIED, error_class, message, now)

    def waiting(self, n: int = 1) -> None:
        """``n`` jobs wait for Plex (the breaker is open); they keep their retry budget."""
        self.counts[WAITING] += n

    def waiting_for_stash(self, n: int = 1) -> None:
        """``n`` jobs wait for Stash to answer again; they keep their retry budget."""
        self.counts[WAITING_STASH] += n

    def run_counts(self) -> Counter[str]:
        """The batch as a task's reply counts it: ``failed`` and ``retrying`` summed over classes.

        >>> d = Delta()
        >>> d.synced(1.0, poster_uploaded=True); d.retried("PlexNotFound", "m", 2.0); d.waiting(3)
        >>> dict(d.run_counts())
        {'synced': 1, 'posters': 1, 'retrying': 1, 'waiting_for_plex': 3}
        """
        run: Counter[str] = Counter()
        for name, n in self.counts.items():
            kind = name.split(":", 1)[0]
            if kind in (*COUNTS, WAITING, WAITING_STASH):
                run[kind] += n
            elif kind in (FAILED, RETRIED):
                run["retrying" if kind == RETRIED else FAILED] += n
        return +run  # drops zero counts

    def _failure(self, kind: str, error_class: str, message: str, now: float) -> None:
        self.counts[f"{kind}:{error_class}"] += 1
        self.last_failure_at = now
        self.last_failure = {"error_class": error_class, "message": _short(message), "dead_lettered": kind == FAILED}


def _short(message: str) -> str:
    return shortened(" ".join(message.split()), MESSAGE_MAX)


class StatsStore(sqlite.Store):
    OLD_FILE = "stats.db"
    SCHEMA = _SCHEMA

    def record(self, delta: Delta) -> None:
        """Add one batch's counts, in one transaction."""
        if not delta:
            return
        totals: list[tuple[str, float]] = [
            (name, n) for name, n in delta.counts.items() if n and name not in (WAITING, WAITING_STASH)
        ]
        if delta.plex_seconds:
            totals.append((PLEX_SECONDS, delta.plex_seconds))
        latest = [
            ("success", delta.last_success_at, None),
            ("failure", delta.last_failure_at, json.dumps(delta.last_failure)),
        ]
        with self._writing() as conn:
            conn.executemany(
                "INSERT INTO totals VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                totals,
            )
            conn.executemany(  # a batch recorded late never hides a newer one
                "INSERT INTO latest VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE "
                "SET at = excluded.at, detail = excluded.detail WHERE excluded.at >= latest.at",
                [row for row in latest if row[1] is not None],
            )

    def snapshot(self) -> dict[str, Any]:
        """Everything recorded, ready for JSON (times as local ISO-8601)."""
        totals = dict(self._rows("SELECT name, value FROM totals"))
        latest = {name: (at, detail) for name, at, detail in self._rows("SELECT name, at, detail FROM latest")}
        failed, retried = _by_class(totals, FAILED), _by_class(totals, RETRIED)
        jobs = int(totals.get(PLEX_JOBS, 0))
        failure_at, failure = latest.get("failure", (None, None))
        return {
            **{name: int(totals.get(name, 0)) for name in COUNTS},
            "failed": failed,
            "failed_total": sum(failed.values()),
            "retried": retried,
            "retried_total": sum(retried.values()),
            "timed_jobs": jobs,
            "avg_plex_ms": round(totals.get(PLEX_SECONDS, 0.0) * 1000 / jobs, 1) if jobs else None,
            "last_success_at": iso_local(latest.get("success", (None,))[0]),
            "last_failure_at": iso_local(failure_at),
            "last_failure": json.loads(failure) if failure else None,
        }


def _by_class(totals: dict[str, float], kind: str) -> dict[str, int]:
    """``failed:<class>`` rows as {class: n}, largest first."""
    found = {name.split(":", 1)[1]: int(n) for name, n in totals.items() if name.startswith(kind + ":")}
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))
