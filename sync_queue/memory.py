"""An in-memory twin of :class:`sync_queue.queue.JobQueue`, for tests that do not care
about SQLite.

Same interface and the same observable behaviour (tests/test_queue.py runs one contract
suite against both): priorities, collapsing of events for a waiting scene, parking of
retries until due, SQL-like counts. What it cannot have is what a file gives: nothing
survives the object, and there is no crash recovery (``auto_resume``) to model.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sync_queue.job import INTERACTIVE, PRIORITIES, Job, Taken


@dataclass
class _Row:
    job: Job
    taken: bool = False  # handed out, not yet acked (persist-queue's UNACK)


class MemoryQueue:
    """A durable-looking queue that lives in one object; the consumer and producers share it."""

    def __init__(self, consumer: bool = True, clock: Callable[[], float] = time.time) -> None:
        self.consumer = consumer
        self.clock = clock
        self.rejected: list[tuple[str, int, str]] = []  # never filled: nothing is ever undecodable
        self._rows: dict[str, dict[int, _Row]] = {p: {} for p in PRIORITIES}  # pqid -> row, in put order
        self._waiting: dict[int, str] = {}  # scene id -> priority of its job not taken yet
        self._parked: list[tuple[float, int, Taken]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)

    def close(self) -> None:
        pass

    # -- producing -----------------------------------------------------------
    def put(self, job: Job) -> bool:
        """Enqueue ``job``; False when it collapsed into a job already waiting."""
        return bool(self.put_many([job]))

    def put_many(self, jobs: Iterable[Job]) -> int:
        added = 0
        for job in jobs:
            have = self._waiting.get(job.scene_id)
            if have == INTERACTIVE or have == job.priority:
                continue
            self._rows[job.priority][next(self._ids)] = _Row(job)
            self._waiting[job.scene_id] = job.priority
            added += 1
        return added

    # -- consuming -----------------------------------------------------------
    def take(self, limit: int, early: Callable[[Taken], bool] | None = None) -> list[Taken]:
        assert self.consumer, "only the drainer lock holder may take jobs"
        now = self.clock()
        taken = self._due_parked(now, limit, early)
        for priority in PRIORITIES:
            rows = self._rows[priority]
            for pqid in [i for i, row in rows.items() if not row.taken]:
                if len(taken) >= limit:
                    break
                rows[pqid].taken = True
                item = Taken(job=rows[pqid].job, pqid=pqid, table=priority)
                if item.job.next_attempt_at > now and not (early and early(item)):
                    self._park(item, item.job.next_attempt_at)
                else:
                    taken.append(item)
        for item in taken:
            if item.job.attempt == 0:
                self._waiting.pop(item.job.scene_id, None)
        return taken

    def _due_parked(self, now: float, limit: int, early) -> list[Taken]:
        due: list[Taken] = []
        while self._parked and self._parked[0][0] <= now and len(due) < limit:
            due.append(heapq.heappop(self._parked)[2])
        if early is not None and len(due) < limit:
            keep = []
            for entry in self._parked:
                if len(due) < limit and early(entry[2]):
                    due.append(entry[2])
                else:
                    keep.append(entry)
            heapq.heapify(keep)
            self._parked = keep
        return due

    def _park(self, item: Taken, until: float) -> None:
        heapq.heappush(self._parked, (until, next(self._seq), item))

    def ack(self, item: Taken) -> None:
        self._rows[item.table].pop(item.pqid, None)

    def retry_later(self, item: Taken, job: Job) -> None:
        row = self._rows[item.table].get(item.pqid)
        if row is not None:
            row.job = job
        item.job = job
        self._park(item, job.next_attempt_at)

    def postpone(self, item: Taken, until: float) -> None:
        self._park(item, until)

    def next_due(self) -> float | None:
        return self._parked[0][0] if self._parked else None

    def parked_count(self) -> int:
        return len(self._parked)

    def ready_count(self) -> int:
        return sum(not row.taken for rows in self._rows.values() for row in rows.values())

    # -- inspecting ----------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        result: dict[str, Any] = {"pending": 0, "in_flight": 0, "retrying": 0, "next_retry_at": None}
        for priority, rows in self._rows.items():
            result[priority] = len(rows)
            result["pending"] += len(rows)
            result["in_flight"] += sum(row.taken and row.job.attempt == 0 for row in rows.values())
            retries = [row.job.next_attempt_at for row in rows.values() if row.job.attempt > 0]
            result["retrying"] += len(retries)
            if retries:
                result["next_retry_at"] = min(retries + [result["next_retry_at"] or min(retries)])
        return result

    def clear(self) -> int:
        removed = sum(len(rows) for rows in self._rows.values())
        for rows in self._rows.values():
            rows.clear()
        self._waiting.clear()
        return removed
