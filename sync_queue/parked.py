"""Taken jobs held in this process until their retry is due (both queue implementations).

A parked job stays unacknowledged in its queue, so another process (or the next
consumer after a crash) sees it; this heap only orders this process's own retries.
A job superseded by a newer one of its scene is dropped lazily (``drop``), when the
heap is next read.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator

from sync_queue.job import Taken


class Parked:
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
