"""The dead-letter queue: jobs that can never succeed, with the reason.

A table of the state database (``sync_queue/sqlite.py``), rows are JSON, at most one entry
per scene: a newer failure replaces the older one. Listing groups entries by reason so a user sees
"37 scenes: not in Plex" rather than 37 lines.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sync_queue import sqlite
from sync_queue.job import Job

if TYPE_CHECKING:
    from sync_queue.queue import JobQueue

# The classes whose scenes the page's match inbox lists (tasks/inbox.py), by the inbox's kind:
# the page shows them there, once, not again among the dead letters.
INBOX_KINDS = {"AmbiguousMatch": "ambiguous", "PlexNotFound": "unmatched", "PinnedItemGone": "unmatched"}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS dlq (
    scene_id INTEGER PRIMARY KEY,
    job TEXT NOT NULL,
    error_class TEXT NOT NULL,
    message TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    failed_at REAL NOT NULL,
    title TEXT
);
CREATE INDEX IF NOT EXISTS dlq_failed_at ON dlq (failed_at);
"""


_ENTRY_SQL = "SELECT scene_id, title, error_class, message, attempts, failed_at FROM dlq"
_ENTRY_KEYS = ("scene_id", "title", "error_class", "reason", "attempts", "failed_at")


@dataclass(frozen=True)
class Requeued:
    """What ``DeadLetterQueue.requeue`` did: the scenes that were dead letters, how many jobs
    the queue added (a scene already waiting collapses), the entries rebuilt from the scene id."""

    dead: list[int]
    added: int
    rebuilt: list[int]


class DeadLetterQueue(sqlite.Store):
    OLD_FILE = "dlq.db"
    SCHEMA = _SCHEMA

    def add(self, job: Job, error_class: str, message: str, title: str | None = None) -> None:
        """Record a job that will not succeed; replaces an older entry for the scene."""
        self._put("REPLACE", job, error_class, message, job.attempt + 1, self.clock(), title)

    def adopt(self, job: Job, error_class: str, message: str, attempts: int, failed_at: float) -> bool:
        """Record a dead letter of another plugin's (sync_queue/predecessor.py) as it was;
        False when the scene has an entry of ours already (it is kept)."""
        return self._put("IGNORE", job, error_class, message, attempts, failed_at, None)

    def _put(
        self,
        conflict: str,
        job: Job,
        error_class: str,
        message: str,
        attempts: int,
        failed_at: float,
        title: str | None,
    ) -> bool:
        row = (job.scene_id, json.dumps(job.to_dict()), error_class, message[:4000], attempts, failed_at, title)
        return self._write(f"INSERT OR {conflict} INTO dlq VALUES (?, ?, ?, ?, ?, ?, ?)", row) > 0

    def count(self) -> int:
        return self._one("SELECT COUNT(*) FROM dlq")[0]

    def summary(self, newest: int = 5) -> dict[str, Any]:
        """Entries grouped by error class, plus the newest few (scene id, title, reason)."""
        groups = self._rows("SELECT error_class, COUNT(*) FROM dlq GROUP BY error_class ORDER BY COUNT(*) DESC")
        return {"count": sum(n for _, n in groups), "by_reason": dict(groups), "newest": self.entries(newest)}

    def entries(self, limit: int = 1000) -> list[dict[str, Any]]:
        """Every entry (newest first, at most ``limit``): scene id, title, class, reason, attempts, time."""
        rows = self._rows(f"{_ENTRY_SQL} ORDER BY failed_at DESC, scene_id LIMIT ?", (limit,))
        return [dict(zip(_ENTRY_KEYS, row)) for row in rows]

    def entry(self, scene_id: int) -> dict[str, Any] | None:
        """One scene's entry (the shape of ``entries``), or None."""
        row = self._one(f"{_ENTRY_SQL} WHERE scene_id = ?", (scene_id,))
        return dict(zip(_ENTRY_KEYS, row)) if row else None

    def job(self, scene_id: int) -> Job | None:
        row = self._one("SELECT scene_id, job FROM dlq WHERE scene_id = ?", (scene_id,))
        return _job(*row)[0] if row else None

    def jobs(self) -> tuple[list[Job], list[int]]:
        """Every entry's job, and the scenes whose stored job could not be read: those are
        rebuilt from the scene id (a sync reads everything else afresh), so one bad row
        never stops the others."""
        read = [_job(*row) for row in self._rows("SELECT scene_id, job FROM dlq ORDER BY failed_at")]
        return [job for job, _ in read], [job.scene_id for job, ok in read if not ok]

    def requeue(self, queue: JobQueue, scene_ids: list[int] | None, priority: str, now: float) -> Requeued:
        """Queue scenes again: a dead letter's job with a fresh retry budget, a scene that is
        none a new job; ``None`` is every entry. The queue is written first, then
        the entries removed: a crash in between leaves a scene queued and dead, never neither."""
        if scene_ids is None:
            jobs, rebuilt = self.jobs()
            fresh = [job.fresh() for job in jobs]
        else:
            dead = [self.job(scene_id) for scene_id in scene_ids]
            fresh = [job.fresh() if job else Job(scene_id) for job, scene_id in zip(dead, scene_ids)]
            jobs, rebuilt = [job for job in dead if job is not None], []
        added = queue.put_many([dataclasses.replace(job, priority=priority, enqueued_at=now) for job in fresh])
        self.remove([job.scene_id for job in jobs])
        return Requeued([job.scene_id for job in jobs], added, rebuilt)

    def remove(self, scene_ids: list[int]) -> None:
        with self._writing() as conn:
            conn.executemany("DELETE FROM dlq WHERE scene_id = ?", [(s,) for s in scene_ids])

    def clear(self, older_than: float | None = None) -> int:
        """Delete every entry, or only those failed before ``older_than``."""
        with self._writing() as conn:
            if older_than is None:
                return conn.execute("DELETE FROM dlq").rowcount
            return conn.execute("DELETE FROM dlq WHERE failed_at < ?", (older_than,)).rowcount


def _job(scene_id: int, text: str) -> tuple[Job, bool]:
    """The stored job, or one rebuilt from the scene id when it is unreadable (False)."""
    try:
        return Job.from_dict(json.loads(text)), True
    except (ValueError, TypeError):
        return Job(scene_id=int(scene_id)), False
