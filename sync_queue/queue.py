"""The job queue on disk (``JobQueue``): the queue's rules, written once, over its storage
(sync_queue/storage.py), with the hooks' spool (sync_queue/spool.py) moved in before each
take, so a hook's job meets the same rules as a task's.

* A scene has at most one *waiting* job; an event collapses into it, but a user's edit
  replaces a waiting bulk job.
* ``interactive`` before ``bulk``; a take holds one job per scene; a job not due is parked,
  and gets back to waiting at the next take, unless a newer waiting job supersedes it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from core.errors import DataFileError
from core.platform import discard
from sync_queue import spool, sqlite
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


def chosen(jobs: list[Job], waiting: dict[int, Mark]) -> list[Job]:
    """The jobs that become rows: none for a scene whose waiting job is interactive or of the
    same priority (it collapses); of the rest, one per scene."""
    fresh = [j for j in jobs if waiting.get(j.scene_id, ("", 0))[0] not in (INTERACTIVE, j.priority)]
    return one_per_scene(fresh, lambda j: j)[0]


def scene_priorities(jobs: list[tuple[int, str]]) -> dict[int, str]:
    """Each scene of ``(scene, priority)`` pairs and its priority: interactive when any job of it is."""
    found: dict[int, str] = {}
    for scene, priority in jobs:
        if found.get(scene) != INTERACTIVE:
            found[scene] = priority
    return found


def _spool_item(record: dict[str, Any]) -> Job | EntityEvent:
    """The job or entity event of a spool line (ValueError/TypeError when it is none)."""
    if "entity" in record:
        kind, entity_id = record["entity"], record["id"]
        if not isinstance(kind, str) or not spool.an_id(entity_id):
            raise ValueError(f"not an entity event: {kind!r} {entity_id!r}")
        return EntityEvent(kind, entity_id, str(record["event"]), float(record["at"]))
    scene_id, priority = record["scene"], record["priority"]
    if priority not in PRIORITIES or not spool.an_id(scene_id):
        raise ValueError(f"not a scene job: scene {scene_id!r}, priority {priority!r}")
    return Job(scene_id, priority, float(record["at"]))  # the hook's event and fields are not read


def _spool_items(records: list[dict[str, Any]]) -> tuple[list[Job | EntityEvent], list[str]]:
    """The jobs and entity events of spool lines, and why each line that is none is not."""
    items: list[Job | EntityEvent] = []
    bad: list[str] = []
    for record in records:
        try:
            items.append(_spool_item(record))
        except (KeyError, ValueError, TypeError) as exc:
            bad.append(f"{type(exc).__name__}: {exc}")
    return items, bad


class JobQueue:
    """Durable, prioritised job queue shared by hooks, tasks and the drainer."""

    def __init__(self, directory: Path, consumer: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.consumer = consumer
        self.clock = clock
        self.store = SQLiteStore(directory, consumer)
        self._parked = Parked()
        self._back: list[Taken] = []  # back to waiting since the last take: marked so at the next
        self._legacy_checked = False

    def close(self) -> None:
        if self._back and self.store.opened():
            with contextlib.suppress(sqlite3.Error, DataFileError):
                self._wait_again()
        self.store.close()

    # -- producing -----------------------------------------------------------
    def put(self, job: Job) -> bool:
        """Enqueue ``job``; False when it collapsed into a job already waiting."""
        return bool(self.put_many([job]))

    def put_many(self, jobs: Iterable[Job]) -> int:
        """Enqueue jobs (one waiting job per scene); returns how many rows were added."""
        jobs = list(jobs)
        waiting = self.store.waiting([job.scene_id for job in jobs])
        rows = chosen(jobs, waiting)
        if rows:
            replaced = [waiting[j.scene_id] for j in rows if j.scene_id in waiting]  # bulk jobs an edit replaces
            self.store.enqueue(rows, replaced)
        return len(rows)

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

    # -- consuming (drainer only) --------------------------------------------
    def take(self, limit: int, early: Callable[[Taken], bool] | None = None) -> list[Taken]:
        """Up to ``limit`` due jobs: parked retries first, then interactive, then bulk; at
        most one job per scene. ``early(item) -> bool`` takes a job before it is due."""
        assert self.consumer, "only the drainer lock holder may take jobs"
        self._move_spool()
        self._wait_again()
        now = self.clock()
        taken = self._parked.due(now, limit, early)
        for priority in PRIORITIES:
            while len(taken) < limit and (item := self.store.dequeue(priority)) is not None:
                if item.job.next_attempt_at > now and not (early and early(item)):
                    self._parked.park(item, item.job.next_attempt_at)
                else:
                    taken.append(item)
        self.store.started(taken)
        kept, doubles = one_per_scene(taken, lambda t: t.job)
        for item in doubles:  # the one kept syncs the scene as it is now
            self.ack(item)
        return kept

    def _move_spool(self) -> None:
        """The hooks' spool into the queue (sync_queue/spool.py): a file left by an interrupted
        move first; lines written meanwhile wait for the next take."""
        self._move_legacy_spool()
        for _ in range(2):
            taken = spool.take(str(self.directory))
            if taken is None:
                return
            self._put_lines(*spool.read(taken))
            # One a reader holds open on Windows stays: the next take moves its lines again,
            # into the same jobs.
            discard(taken)

    def _move_legacy_spool(self) -> None:
        """Jobs an older version's hooks left in the ``s2p_inbox`` table, moved in once."""
        if self._legacy_checked:
            return
        conn = self.store.side()
        if sqlite.has_table(conn, "s2p_inbox"):
            rows = conn.execute("SELECT scene_id, priority, queued_at FROM s2p_inbox").fetchall()
            self._put_lines([{"scene": r[0], "priority": r[1], "at": r[2]} for r in rows], [])
            conn.execute("DROP TABLE s2p_inbox")
        self._legacy_checked = True

    def _put_lines(self, records: list[dict[str, Any]], cut: list[str]) -> None:
        """Put the jobs and entity events of spool lines; a line that is none (``cut``: not
        JSON; a damaged file) is set aside, said in the log like an unreadable queue row."""
        items, bad = _spool_items(records)
        self.put_many(item for item in items if isinstance(item, Job))
        self.put_entity_events(item for item in items if isinstance(item, EntityEvent))
        self.store.rejected.extend(("inbox", 0, why) for why in [*bad, *(f"not a job: {line!r}" for line in cut)])

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
        self.postpone(item, job.next_attempt_at)

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
    def _spooled(self) -> list[Job | EntityEvent]:
        """The jobs and entity events in the hooks' spool, in the order they move in (the
        taken file first): the one reader of the spool for counts and look-ups."""
        path = spool.spool_path(str(self.directory))
        records = [record for file in (path + spool.TAKEN_SUFFIX, path) for record in spool.read(file)[0]]
        return _spool_items(records)[0]

    def _waiting(self, rows: list[tuple] | None) -> tuple[dict[int, str], set[tuple[str, int]]]:
        """The scenes waiting (interactive when any job of theirs is) and the entities, in the
        spool and, unless ``rows`` is None, in the queue (``rows``: the storage's ``jobs``):
        each once, whether it waits in one or in both."""
        items = self._spooled()
        jobs = [(j.scene_id, j.priority) for j in items if isinstance(j, Job)]
        entities = {(e.kind, e.entity_id) for e in items if isinstance(e, EntityEvent)}
        if rows is not None:
            jobs = [(row[0], row[1]) for row in rows] + jobs
            entities |= self.store.entity_keys()
        return scene_priorities(jobs), entities

    def ready_count(self) -> int:
        """Jobs waiting to be taken (not in flight, not parked), entity events included; the
        spool is read only when a file of it holds something (a lingering drainer asks often)."""
        found = self.store.ready()
        if spool.holds_work(str(self.directory)):
            scenes, entities = self._waiting(None)
            found += len(scenes) + len(entities)
        return found

    def pending(self) -> int:
        """``counts()["pending"]`` alone, from the rows not done and the spool: it leaves out the
        rows set aside, so persist-queue's tables stay closed (the drainer's last look)."""
        scenes, entities = self._waiting(self.store.jobs())
        return len(scenes) + len(entities)

    def counts(self) -> dict[str, Any]:
        """pending: scenes waiting (a scene counts once, whatever its jobs: waiting, in
        flight, retrying, spooled), and entity events to fan out; per priority the scenes (one
        with an interactive job counts there); in flight (taken, first attempt) and retrying
        jobs (and the soonest due); rows set aside."""
        rows = self.store.jobs()
        scenes, entities = self._waiting(rows)
        retries = [at for _, _, _, retrying, at in rows if retrying]
        return {
            "pending": len(scenes) + len(entities),
            "in_flight": sum(taken and not retrying for _, _, taken, retrying, _ in rows),
            "retrying": len(retries),
            "next_retry_at": min((at for at in retries if at is not None), default=None),
            "set_aside": sum(self.store.set_aside(priority) for priority in PRIORITIES),
            "entity_events": len(entities),
            **{priority: sum(p == priority for p in scenes.values()) for priority in PRIORITIES},
        }

    def waiting_job(self, scene_id: int) -> Job | None:
        """The not-yet-done job of one scene (waiting, in flight or waiting for a retry), else
        the last one a hook spooled for it."""
        job = self.store.job_of(scene_id)
        if job is None:
            spooled = [j for j in self._spooled() if isinstance(j, Job) and j.scene_id == scene_id]
            job = spooled[-1] if spooled else None
        return job

    def clear(self) -> int:
        """Delete every job not yet done, the spool's too; returns how many. Rows set aside stay."""
        scenes, entities = self._waiting(None)  # the spool's, read before it goes
        removed = len(scenes) + len(entities) + self.store.clear()
        spool.clear(str(self.directory))
        self._parked.clear()
        self._back.clear()
        return removed
