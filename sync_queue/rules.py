"""The queue's rules, written once, over its storage (sync_queue/storage.py ``SQLiteStore``:
persist-queue's rows and our marks); ``JobQueue`` is this class with the hooks' spool.

* A scene has at most one *waiting* job, found by its mark; an event collapses into it, but a
  user's edit replaces a waiting bulk job. A mark is written before its row is put and pointed
  at it after; a mark without a live row counts as none.
* ``interactive`` before ``bulk``; a take holds one job per scene; a job not due is parked.
* Taking a job removes its mark first, so a mark always points at work still to start.
* A parked job gets its mark back at the next take, unless a newer waiting job supersedes it.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from sync_queue.job import INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken
from sync_queue.storage import Mark, SQLiteStore

T = TypeVar("T")


class Parked:
    """Taken jobs held in this process until their retry is due; they stay unacknowledged
    in the storage. A superseded one is dropped lazily, when the heap is next read."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Taken]] = []
        self._seq = itertools.count()  # ties keep their order; Taken is never compared
        self._dropped: set[tuple[str, int]] = set()

    def park(self, item: Taken, until: float) -> None:
        heapq.heappush(self._heap, (until, next(self._seq), item))

    def drop(self, item: Taken) -> None:
        self._dropped.add((item.table, item.pqid))

    def due(self, now: float, limit: int, early: Callable[[Taken], bool] | None = None) -> list[Taken]:
        """Up to ``limit`` jobs due by ``now``, soonest first; then, if room is left, any
        that ``early`` lets through before their time."""
        self._forget_dropped()
        due: list[Taken] = []
        while self._heap and self._heap[0][0] <= now and len(due) < limit:
            due.append(heapq.heappop(self._heap)[2])
        if early is not None and len(due) < limit:
            keep = []
            for entry in self._heap:
                if len(due) < limit and early(entry[2]):
                    due.append(entry[2])
                else:
                    keep.append(entry)
            heapq.heapify(keep)
            self._heap = keep
        return due

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Taken]:
        return (entry[2] for entry in self._heap)

    def clear(self) -> None:
        self._heap.clear()
        self._dropped.clear()

    def _forget_dropped(self) -> None:
        if self._dropped:
            self._heap = [e for e in self._heap if (e[2].table, e[2].pqid) not in self._dropped]
            heapq.heapify(self._heap)
            self._dropped.clear()


def one_per_scene(items: list[T], job: Callable[[T], Job]) -> tuple[list[T], list[T]]:
    """(kept, doubles): one item per scene, a user's edit over bulk work, else the first.
    The one home of the rule: for the jobs a put makes rows of, the jobs a take hands out, and
    the jobs of one scene the worker's pipeline stages together (worker/pipeline.py)."""
    kept: dict[int, T] = {}
    for item in items:
        have = kept.get(job(item).scene_id)
        if have is None or (job(have).priority != INTERACTIVE and job(item).priority == INTERACTIVE):
            kept[job(item).scene_id] = item
    return [t for t in items if kept[job(t).scene_id] is t], [t for t in items if kept[job(t).scene_id] is not t]


def _chosen(jobs: list[Job], waiting: dict[int, Mark]) -> list[Job]:
    """The jobs that become rows: none for a scene whose waiting job is interactive or of the
    same priority (it collapses); of the rest, one per scene."""
    fresh = [j for j in jobs if waiting.get(j.scene_id, ("", 0))[0] not in (INTERACTIVE, j.priority)]
    return one_per_scene(fresh, lambda j: j)[0]


class QueueRules:
    """Durable, prioritised job queue."""

    def __init__(self, store: SQLiteStore, consumer: bool, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.consumer = consumer
        self.clock = clock
        self._parked = Parked()
        self._back: list[Taken] = []  # back to waiting since the last take: marked so at the next

    def close(self) -> None:
        self.store.close()

    # -- producing -----------------------------------------------------------
    def put(self, job: Job) -> bool:
        """Enqueue ``job``; False when it collapsed into a job already waiting."""
        return bool(self.put_many([job]))

    def put_many(self, jobs: Iterable[Job]) -> int:
        """Enqueue jobs (one waiting job per scene); returns how many rows were added."""
        jobs = list(jobs)
        waiting = self.store.waiting([job.scene_id for job in jobs])
        chosen = _chosen(jobs, waiting)
        if not chosen:
            return 0
        replaced = [waiting[j.scene_id] for j in chosen if j.scene_id in waiting]  # bulk jobs an edit replaces
        self.store.enqueue(chosen, replaced)
        return len(chosen)

    # -- entity events ---------------------------------------------------------
    def put_entity_events(self, events: Iterable[EntityEvent]) -> int:
        """Record entity events (one row per entity; a newer event restarts its expansion)."""
        events = list(events)
        if events:
            self.store.put_entity_events(events)
        return len(events)

    def entity_events(self) -> list[EntityEvent]:
        return self.store.entity_events()

    def advance_entity_event(self, event: EntityEvent, after_scene: int, finished: bool) -> None:
        """Note how far ``event`` is expanded (or drop it when done), unless a newer event
        for the same entity replaced it meanwhile (that one starts over)."""
        self.store.advance_entity_event(event, after_scene, finished)

    def entity_event_count(self) -> int:
        return self.store.entity_event_count()

    # -- consuming (drainer only) --------------------------------------------
    def take(self, limit: int, early: Callable[[Taken], bool] | None = None) -> list[Taken]:
        """Up to ``limit`` due jobs: parked retries first, then interactive, then bulk; at
        most one job per scene. ``early(item) -> bool`` takes a job before it is due."""
        assert self.consumer, "only the drainer lock holder may take jobs"
        self._wait_again()
        now = self.clock()
        taken = self._parked.due(now, limit, early)
        for priority in PRIORITIES:
            while len(taken) < limit:
                item = self.store.dequeue(priority)
                if item is None:
                    break
                if item.job.next_attempt_at > now and not (early and early(item)):
                    self._parked.park(item, item.job.next_attempt_at)
                else:
                    taken.append(item)
        self.store.started(taken)
        kept, doubles = one_per_scene(taken, lambda t: t.job)
        for item in doubles:  # the one kept syncs the scene as it is now
            self.ack(item)
        return kept

    def _wait_again(self) -> None:
        items, self._back = self._back, []
        if not items:
            return
        refused = self.store.wait_again(items)
        newer = self.store.waiting([t.job.scene_id for t in refused]) if refused else {}
        for item in refused:
            mark = newer.get(item.job.scene_id)
            if mark is not None and mark != (item.table, item.pqid):
                self._parked.drop(item)
                self.store.ack(item)

    def take_rejected(self) -> list[tuple[str, int, str]]:
        """The rows set aside (unreadable) since the last call, for the log."""
        return self.store.take_rejected()

    def ack(self, item: Taken) -> None:
        self.store.ack(item)

    def retry_later(self, item: Taken, job: Job) -> None:
        """Store ``job``'s new retry state in its row and park it until due."""
        self.store.schedule(item, job)
        item.job = job
        self._parked.park(item, job.next_attempt_at)
        self._back.append(item)

    def postpone(self, item: Taken, until: float) -> None:
        """Park without spending the retry budget (the breaker is open)."""
        self._parked.park(item, until)
        self._back.append(item)

    def next_due(self) -> float | None:
        self._wait_again()
        return self._parked.next_at()

    def parked_count(self) -> int:
        self._wait_again()
        return len(self._parked)

    # -- inspecting (any process) --------------------------------------------
    def ready_count(self) -> int:
        """Jobs waiting to be taken (not in flight, not parked), entity events included."""
        return self.store.ready()

    def pending(self) -> int:
        """``counts()["pending"]`` alone, from the rows not done and the spool: it leaves out the
        rows set aside, so persist-queue's tables stay closed (the drainer's last look)."""
        return len(self.store.scenes()) + self.store.entity_event_count() + self.store.spool_entities()

    def counts(self) -> dict[str, Any]:
        """pending: scenes waiting (a scene counts once, whatever its jobs: waiting, in
        flight, retrying), and entity events to fan out; per priority the scenes (one with
        an interactive job counts there); in flight (taken, first attempt) and retrying
        jobs (and the soonest due); rows set aside."""
        events = self.store.entity_event_count() + self.store.spool_entities()
        scenes = self.store.scenes()
        result: dict[str, Any] = {"pending": len(scenes) + events, "in_flight": 0, "retrying": 0}
        result.update(next_retry_at=None, set_aside=0, entity_events=events)
        for priority in PRIORITIES:
            tally = self.store.tally(priority)
            result[priority] = sum(p == priority for p in scenes.values())
            result["in_flight"] += sum(n for taken, retrying, n, _ in tally if taken and not retrying)
            result["retrying"] += sum(n for _, retrying, n, _ in tally if retrying)
            soonest = [at for _, retrying, _, at in tally if retrying and at is not None]
            if result["next_retry_at"] is not None:
                soonest.append(result["next_retry_at"])
            result["next_retry_at"] = min(soonest, default=None)
            result["set_aside"] += self.store.set_aside(priority)
        return result

    def waiting_job(self, scene_id: int) -> Job | None:
        """The not-yet-done job of one scene (waiting, in flight or waiting for a retry)."""
        return self.store.job_of(scene_id)

    def clear(self) -> int:
        """Delete every job not yet done; returns how many. Rows set aside stay."""
        removed = self.store.clear()
        self._parked.clear()
        self._back.clear()
        return removed
