"""The queue in memory (``MemoryQueue``), for tests that do not care about SQLite: the
rules of sync_queue/rules.py over dicts. Nothing survives the object, so there is no
crash recovery to model; nothing is ever unreadable, so nothing is set aside.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from sync_queue.job import INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken
from sync_queue.rules import Mark, QueueRules, Tally


@dataclass
class _Row:
    job: Job
    taken: bool = False  # handed out, not yet acked (persist-queue's UNACK)


class MemoryStore:
    def __init__(self) -> None:
        self.rows: dict[str, dict[int, _Row]] = {p: {} for p in PRIORITIES}  # row id -> row, in put order
        self.marks: dict[int, tuple[str, int | None]] = {}  # scene id -> (priority, row id or None)
        self.events: dict[tuple[str, int], EntityEvent] = {}
        self._ids = itertools.count(1)

    def waiting(self, scene_ids: list[int]) -> dict[int, Mark]:
        found = {}
        for sid in scene_ids:
            priority, pqid = self.marks.get(sid, ("", None))
            if pqid is not None and pqid in self.rows[priority]:
                found[sid] = (priority, pqid)
        return found

    def mark(self, jobs: list[Job]) -> None:
        self.marks.update((job.scene_id, (job.priority, None)) for job in jobs)

    def put_row(self, job: Job) -> int:
        pqid = next(self._ids)
        self.rows[job.priority][pqid] = _Row(job)
        return pqid

    def point(self, rows: list[tuple[Job, int]]) -> None:
        for job, pqid in rows:
            if self.marks.get(job.scene_id, ("", 0))[1] is None:
                self.marks[job.scene_id] = (job.priority, pqid)

    def drop_waiting(self, priority: str, pqid: int) -> None:
        row = self.rows[priority].get(pqid)
        if row is not None and not row.taken:
            del self.rows[priority][pqid]

    def get(self, priority: str) -> Taken | None:
        pqid = next((i for i, row in self.rows[priority].items() if not row.taken), None)
        if pqid is None:
            return None
        self.rows[priority][pqid].taken = True
        return Taken(job=self.rows[priority][pqid].job, pqid=pqid, table=priority)

    def took(self, taken: list[Taken], parked: list[Taken]) -> None:
        for item in taken:
            if self.marks.get(item.job.scene_id, ("", item.pqid))[1] in (item.pqid, None):
                self.marks.pop(item.job.scene_id, None)

    def remark(self, items: list[Taken]) -> list[Taken]:
        refused = []
        for item in items:
            if item.job.scene_id in self.marks or item.pqid not in self.rows[item.table]:
                refused.append(item)
            else:
                self.marks[item.job.scene_id] = (item.table, item.pqid)
        return refused

    def ack(self, item: Taken) -> None:
        self.rows[item.table].pop(item.pqid, None)

    def update(self, item: Taken, job: Job) -> None:
        row = self.rows[item.table].get(item.pqid)
        if row is not None:
            row.job = job

    def tally(self, priority: str) -> list[Tally]:
        groups: dict[tuple[bool, bool], list[float]] = {}
        for row in self.rows[priority].values():
            groups.setdefault((row.taken, row.job.attempt > 0), []).append(row.job.next_attempt_at)
        return [(taken, retrying, len(ats), min(ats)) for (taken, retrying), ats in groups.items()]

    def ready(self) -> int:
        """Rows not taken, and entity events (there is no inbox here)."""
        return sum(not row.taken for p in PRIORITIES for row in self.rows[p].values()) + len(self.events)

    def set_aside(self, priority: str) -> int:
        return 0

    def scenes(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for priority in PRIORITIES:
            for row in self.rows[priority].values():
                if found.get(row.job.scene_id) != INTERACTIVE:
                    found[row.job.scene_id] = priority
        return found

    def inbox_entities(self) -> int:
        return 0

    def job_of(self, scene_id: int) -> Job | None:
        jobs = (row.job for rows in self.rows.values() for row in rows.values())
        return next((job for job in jobs if job.scene_id == scene_id), None)

    def clear(self) -> int:
        removed = sum(len(rows) for rows in self.rows.values()) + len(self.events)
        for rows in self.rows.values():
            rows.clear()
        self.events.clear()
        self.marks.clear()
        return removed

    def put_entity_events(self, events: list[EntityEvent]) -> None:
        for event in events:
            self.events[(event.kind, event.entity_id)] = dataclasses.replace(event, after_scene=0)

    def entity_events(self) -> list[EntityEvent]:
        return sorted(self.events.values(), key=lambda e: e.queued_at)

    def advance_entity_event(self, event: EntityEvent, after_scene: int, finished: bool) -> None:
        key = (event.kind, event.entity_id)
        current = self.events.get(key)
        if current is None or current.queued_at != event.queued_at:
            return
        if finished:
            del self.events[key]
        else:
            self.events[key] = dataclasses.replace(current, after_scene=after_scene)

    def entity_event_count(self) -> int:
        return len(self.events)

    def take_rejected(self) -> list[tuple[str, int, str]]:
        return []

    def close(self) -> None:
        pass


class MemoryQueue(QueueRules):
    """A queue that lives in one object; the consumer and producers share it."""

    def __init__(self, consumer: bool = True, clock: Callable[[], float] = time.time) -> None:
        super().__init__(MemoryStore(), consumer, clock)

    def close(self) -> None:
        self._flush_remarks()
