"""An in-memory twin of :class:`sync_queue.queue.JobQueue`, for tests that do not care
about SQLite.

Same interface and the same observable behaviour (tests/test_queue.py runs one contract
suite against both): priorities, collapsing of events for a waiting scene, parking of
retries until due, SQL-like counts. What it cannot have is what a file gives: nothing
survives the object, and there is no crash recovery (``auto_resume``) to model.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sync_queue.job import INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken, one_per_scene
from sync_queue.parked import Parked


@dataclass
class _Row:
    job: Job
    taken: bool = False  # handed out, not yet acked (persist-queue's UNACK)


class MemoryQueue:
    """A queue that lives in one object; the consumer and producers share it."""

    def __init__(self, consumer: bool = True, clock: Callable[[], float] = time.time) -> None:
        self.consumer = consumer
        self.clock = clock
        self.rejected: list[tuple[str, int, str]] = []  # never filled: nothing is ever undecodable
        self._rows: dict[str, dict[int, _Row]] = {p: {} for p in PRIORITIES}  # row id -> row, in put order
        self._marks: dict[int, tuple[str, int]] = {}  # scene id -> (priority, row id) of its waiting job
        self._parked = Parked()
        self._remarks: list[Taken] = []  # back to waiting since the last take: marked again then
        self._events: dict[tuple[str, int], EntityEvent] = {}  # one per changed tag/performer/studio/group
        self._ids = itertools.count(1)

    def close(self) -> None:
        self._flush_remarks()

    # -- producing -----------------------------------------------------------
    def put(self, job: Job) -> bool:
        """Enqueue ``job``; False when it collapsed into a job already waiting."""
        return bool(self.put_many([job]))

    def put_many(self, jobs: Iterable[Job]) -> int:
        """One waiting job per scene: an event collapses into the scene's waiting job,
        except that a user's edit replaces a waiting bulk job."""
        chosen: dict[int, Job] = {}
        for job in jobs:
            have = chosen.get(job.scene_id)
            if have is not None and have.priority in (INTERACTIVE, job.priority):
                continue
            mark = self._waiting(job.scene_id)
            if mark is not None and mark[0] in (INTERACTIVE, job.priority):
                continue
            chosen[job.scene_id] = job
        for sid, job in chosen.items():
            mark = self._waiting(sid)
            if mark is not None and not self._rows[mark[0]][mark[1]].taken:
                del self._rows[mark[0]][mark[1]]  # a waiting bulk job, replaced by this interactive one
            pqid = next(self._ids)
            self._rows[job.priority][pqid] = _Row(job)
            self._marks[sid] = (job.priority, pqid)
        return len(chosen)

    def _waiting(self, scene_id: int) -> tuple[str, int] | None:
        """(priority, row id) of the scene's job that really waits (its row is not done)."""
        mark = self._marks.get(scene_id)
        return mark if mark is not None and mark[1] in self._rows[mark[0]] else None

    # -- entity events ---------------------------------------------------------
    def put_entity_events(self, events: Iterable[EntityEvent]) -> int:
        """One event per entity; a newer event replaces it and restarts its expansion."""
        n = 0
        for event in events:
            self._events[(event.kind, event.entity_id)] = dataclasses.replace(event, after_scene=0)
            n += 1
        return n

    def entity_events(self) -> list[EntityEvent]:
        return sorted(self._events.values(), key=lambda e: e.queued_at)

    def advance_entity_event(self, event: EntityEvent, after_scene: int, finished: bool) -> None:
        key = (event.kind, event.entity_id)
        current = self._events.get(key)
        if current is None or current.queued_at != event.queued_at:
            return  # a newer event replaced it meanwhile: that one starts over
        if finished:
            del self._events[key]
        else:
            self._events[key] = dataclasses.replace(current, after_scene=after_scene)

    def entity_event_count(self) -> int:
        return len(self._events)

    # -- consuming -----------------------------------------------------------
    def take(self, limit: int, early: Callable[[Taken], bool] | None = None) -> list[Taken]:
        assert self.consumer, "only the drainer lock holder may take jobs"
        self._flush_remarks()
        now = self.clock()
        taken = self._parked.due(now, limit, early)
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
            if self._marks.get(item.job.scene_id, (None, item.pqid))[1] == item.pqid:
                self._marks.pop(item.job.scene_id, None)
        return self._one_per_scene(taken)

    def _one_per_scene(self, taken: list[Taken]) -> list[Taken]:
        kept, doubles = one_per_scene(taken)
        for item in doubles:
            self.ack(item)
        return kept

    def _flush_remarks(self) -> None:
        """Jobs back to waiting are marked again; one whose scene meanwhile got a newer
        waiting job is superseded by it and leaves the queue."""
        items, self._remarks = self._remarks, []
        for item in items:
            sid = item.job.scene_id
            if sid not in self._marks:
                self._marks[sid] = (item.job.priority, item.pqid)
                continue
            newer = self._waiting(sid)
            if newer is not None and newer[1] != item.pqid:
                self._parked.drop(item)
                self.ack(item)

    def _park(self, item: Taken, until: float) -> None:
        self._parked.park(item, until)

    def take_rejected(self) -> list[tuple[str, int, str]]:
        rejected, self.rejected = self.rejected, []
        return rejected

    def ack(self, item: Taken) -> None:
        self._rows[item.table].pop(item.pqid, None)

    def retry_later(self, item: Taken, job: Job) -> None:
        row = self._rows[item.table].get(item.pqid)
        if row is not None:
            row.job = job
        item.job = job
        self._park(item, job.next_attempt_at)
        self._remarks.append(item)

    def postpone(self, item: Taken, until: float) -> None:
        self._park(item, until)
        self._remarks.append(item)

    def next_due(self) -> float | None:
        self._flush_remarks()
        return self._parked.next_at()

    def parked_count(self) -> int:
        self._flush_remarks()
        return len(self._parked)

    def ready_count(self) -> int:
        waiting = sum(not row.taken for rows in self._rows.values() for row in rows.values())
        return waiting + len(self._events)

    # -- inspecting ----------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "pending": len(self._events),
            "in_flight": 0,
            "retrying": 0,
            "next_retry_at": None,
            "set_aside": 0,
            "entity_events": len(self._events),
        }
        for priority, rows in self._rows.items():
            result[priority] = len(rows)
            result["pending"] += len(rows)
            result["in_flight"] += sum(row.taken and row.job.attempt == 0 for row in rows.values())
            retries = [row.job.next_attempt_at for row in rows.values() if row.job.attempt > 0]
            result["retrying"] += len(retries)
            if retries:
                result["next_retry_at"] = min(retries + [result["next_retry_at"] or min(retries)])
        return result

    def waiting_job(self, scene_id: int) -> Job | None:
        """The not-yet-done job of one scene (waiting, in flight or waiting for a retry)."""
        for rows in self._rows.values():
            for row in rows.values():
                if row.job.scene_id == scene_id:
                    return row.job
        return None

    def clear(self) -> int:
        removed = sum(len(rows) for rows in self._rows.values()) + len(self._events)
        for rows in self._rows.values():
            rows.clear()
        self._events.clear()
        self._marks.clear()
        self._parked.clear()
        self._remarks.clear()
        return removed
