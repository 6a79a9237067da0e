"""The queue's rules that need no storage (``JobQueue``, sync_queue/queue.py, applies them):
which jobs become rows, one job per scene, parked retries."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import TypeVar

from sync_queue.job import INTERACTIVE, Job, Taken
from sync_queue.storage import Mark

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
