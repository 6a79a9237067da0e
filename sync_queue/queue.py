"""The job queue: persist-queue's SQLiteAckQueue behind a small interface of ours.

This is the only module that imports persist-queue or touches its tables. Facts it
is built on (persist-queue 1.1.0, persistqueue/sqlackqueue.py and sqlbase.py; measured):

* Two tables in one ``data.db``: ``interactive`` (users' edits) is always served
  before ``bulk`` (scans, all/recent tasks).
* Only the consumer (the process holding the drainer lock) opens with
  ``auto_resume=True``: a producer that did would hand a live worker's in-flight jobs
  out again. After a crash the consumer's resume re-delivers taken-but-unacked jobs.
* A job waiting for a retry stays *unacked* and is parked in an in-memory heap until
  due (its retry state is written into the row with ``update()``), so it is never
  spun through get/nack. A crash brings it back through ``auto_resume`` with its
  due time intact, and it is parked again.
* Counts come from SQL; persist-queue's in-process counters lie across processes.
* Acked rows are deleted regularly; left alone they make every ``get()`` slower.
* Events for a scene that already has a job waiting collapse into that job: a side
  table ``s2p_pending`` holds the scenes whose job has not been taken yet.
"""

from __future__ import annotations

import heapq
import itertools
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from core.errors import DataFileError
from sync_queue import sqlite
from sync_queue.job import BULK, INTERACTIVE, PRIORITIES, Job, Taken

QUEUE_FILE = "data.db"
CLEAR_ACKED_EVERY = 500
# Row statuses, as persist-queue 1.1.0 writes them (persistqueue/sqlackqueue.py, ``AckStatus``):
# put() writes INITED, nack() and auto_resume READY, get() UNACK; ack() writes 5 and
# ack_failed() 9, both done. get() hands out rows below UNACK.
INITED, READY, UNACK = 0, 1, 2
_READY_SQL = f"status IN ({INITED}, {READY})"
_NOT_DONE_SQL = f"status IN ({INITED}, {READY}, {UNACK})"
_SIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS s2p_pending (
    scene_id INTEGER PRIMARY KEY,
    priority TEXT NOT NULL,
    queued_at REAL NOT NULL
);
"""


def _table(priority: str) -> str:
    return f"ack_queue_{priority}"


class JobQueue:
    """Durable, prioritised job queue shared by hooks, tasks and the drainer."""

    def __init__(self, directory: Path, consumer: bool = False, clock=time.time) -> None:
        self.directory = directory
        self.consumer = consumer
        self.clock = clock
        self.path = directory / QUEUE_FILE
        self._queues: dict[str, Any] = {}
        self._side_conn: sqlite3.Connection | None = None
        self._parked: list[tuple[float, int, Taken]] = []
        self._seq = itertools.count()
        self._acks = 0
        self.rejected: list[tuple[str, int, str]] = []  # rows that could not be decoded

    # -- opening -------------------------------------------------------------
    def _side(self) -> sqlite3.Connection:
        if self._side_conn is None:
            self._side_conn = sqlite.connect(self.path, _SIDE_SCHEMA)
        return self._side_conn

    def _queue(self, priority: str):
        if priority not in self._queues:
            self._queues[priority] = self._open(priority)
            if self.consumer:
                with sqlite.corruption_named(self.path):
                    self._queues[priority].clear_acked_data(max_delete=None, keep_latest=None)
        return self._queues[priority]

    @sqlite.retry_locked
    def _open(self, priority: str):
        import persistqueue
        from persistqueue.serializers import json as json_serializer

        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            queue = persistqueue.SQLiteAckQueue(
                str(self.directory),
                name=priority,
                auto_resume=self.consumer,
                multithreading=True,
                timeout=sqlite.BUSY_TIMEOUT_S,
                serializer=json_serializer,
            )
            # WAL + synchronous=NORMAL survives any process crash (SIGKILL included);
            # only an OS crash or power cut can lose the last commits. FULL costs an
            # fsync per put and per ack (measured 3.8 ms a job here). persist-queue has
            # no option for it, so set it on its two connections.
            # (persist-queue annotates both as None until it opens them.)
            opened = cast(list[sqlite3.Connection], [queue._putter, queue._getter])
            for conn in {id(c): c for c in opened}.values():
                conn.execute("PRAGMA synchronous=NORMAL")
            return queue
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc).lower():
                raise
            raise sqlite.data_file_error(self.path, exc) from None

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        if self._side_conn is not None:
            self._side_conn.close()
            self._side_conn = None

    # -- producing -----------------------------------------------------------
    def put(self, job: Job) -> bool:
        """Enqueue ``job``; False when it collapsed into a job already waiting."""
        return bool(self.put_many([job]))

    def put_many(self, jobs: Iterable[Job]) -> int:
        """Enqueue jobs (collapsing duplicates); returns how many rows were added."""
        jobs = list(jobs)
        waiting = self._waiting_priorities([job.scene_id for job in jobs])
        added = []
        for job in jobs:
            have = waiting.get(job.scene_id)
            if have == INTERACTIVE or have == job.priority:
                continue
            with sqlite.corruption_named(self.path):
                self._queue(job.priority).put(job.to_dict())
            waiting[job.scene_id] = job.priority
            added.append(job)
        self._mark_waiting(added)
        return len(added)

    def _waiting_priorities(self, scene_ids: list[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for start in range(0, len(scene_ids), 500):
            chunk = scene_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._side().execute(
                f"SELECT scene_id, priority FROM s2p_pending WHERE scene_id IN ({marks})", chunk
            )
            found.update(rows.fetchall())
        return found

    @sqlite.retry_locked
    def _mark_waiting(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        with sqlite.write(self._side()) as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO s2p_pending VALUES (?, ?, ?)",
                [(j.scene_id, j.priority, j.enqueued_at) for j in jobs],
            )

    @sqlite.retry_locked
    def _unmark_waiting(self, scene_ids: list[int]) -> None:
        if not scene_ids:
            return
        with sqlite.write(self._side()) as conn:
            conn.executemany("DELETE FROM s2p_pending WHERE scene_id = ?", [(s,) for s in scene_ids])

    # -- consuming (drainer only) --------------------------------------------
    def take(self, limit: int, early=None) -> list[Taken]:
        """Up to ``limit`` due jobs: parked retries first, then interactive, then bulk.

        ``early(item) -> bool`` lets a caller take jobs that are not due yet
        (``process_queue`` retries waiting jobs once, now).
        """
        assert self.consumer, "only the drainer lock holder may take jobs"
        now = self.clock()
        taken = self._due_parked(now, limit, early)
        for priority in PRIORITIES:
            while len(taken) < limit:
                item = self._get(priority)
                if item is None:
                    break
                if item.job.next_attempt_at > now and not (early and early(item)):
                    self._park(item)
                else:
                    taken.append(item)
        self._unmark_waiting([t.job.scene_id for t in taken if t.job.attempt == 0])
        return taken

    def ready_count(self) -> int:
        """Jobs waiting to be taken (not in flight, not parked), from SQL."""
        return sum(self._count_where(p, _READY_SQL) for p in PRIORITIES)

    def _get(self, priority: str) -> Taken | None:
        import persistqueue

        queue = self._queue(priority)
        try:
            with sqlite.corruption_named(self.path):
                raw = queue.get(block=False, raw=True)
        except persistqueue.Empty:
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            self._quarantine_poison(priority, exc)
            return self._get(priority)
        try:
            job = Job.from_dict(raw["data"])
        except (ValueError, TypeError) as exc:
            self._fail_row(priority, raw["pqid"], exc)
            return self._get(priority)
        return Taken(job=job, pqid=raw["pqid"], table=priority)

    def _quarantine_poison(self, priority: str, exc: BaseException) -> None:
        """A row that cannot be decoded is stuck UNACK: persist-queue's ``get()`` marks the row
        before it deserializes it, and never tells us its id. Move such rows aside."""
        held = {t.pqid for _, _, t in self._parked if t.table == priority}
        rows = self._side().execute(f"SELECT _id FROM {_table(priority)} WHERE status = {UNACK}").fetchall()
        for (pqid,) in rows:
            if pqid not in held:
                self._fail_row(priority, pqid, exc)

    def _fail_row(self, priority: str, pqid: int, exc: BaseException) -> None:
        self.rejected.append((priority, pqid, f"{type(exc).__name__}: {exc}"))
        self._queue(priority).ack_failed(id=pqid)

    def _park(self, item: Taken) -> None:
        heapq.heappush(self._parked, (item.job.next_attempt_at, next(self._seq), item))

    def _due_parked(self, now: float, limit: int, early=None) -> list[Taken]:
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

    def next_due(self) -> float | None:
        return self._parked[0][0] if self._parked else None

    def parked_count(self) -> int:
        return len(self._parked)

    def ack(self, item: Taken) -> None:
        with sqlite.corruption_named(self.path):
            self._queue(item.table).ack(id=item.pqid)
            self._acks += 1
            if self._acks % CLEAR_ACKED_EVERY == 0:
                self._queue(item.table).clear_acked_data(max_delete=None, keep_latest=None)

    def retry_later(self, item: Taken, job: Job) -> None:
        """Store ``job``'s new retry state in its row and park it until due."""
        with sqlite.corruption_named(self.path):
            self._queue(item.table).update(job.to_dict(), id=item.pqid)
        item.job = job
        self._park(item)

    def postpone(self, item: Taken, until: float) -> None:
        """Park without spending the retry budget (the breaker is open)."""
        heapq.heappush(self._parked, (until, next(self._seq), item))

    # -- inspecting (any process) --------------------------------------------
    def _count_where(self, priority: str, where: str) -> int:
        try:
            row = self._side().execute(f"SELECT COUNT(*) FROM {_table(priority)} WHERE {where}").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return row[0]

    def counts(self) -> dict[str, Any]:
        """SQL counts: pending (not done, retries included), in flight, scheduled retries."""
        result: dict[str, Any] = {"pending": 0, "in_flight": 0, "retrying": 0, "next_retry_at": None}
        for priority in PRIORITIES:
            pending = self._count_where(priority, _NOT_DONE_SQL)
            result[priority] = pending
            result["pending"] += pending
            # taken and being worked on; a parked retry (also UNACK) only waits
            result["in_flight"] += self._count_where(
                priority, f"status = {UNACK} AND COALESCE(json_extract(CAST(data AS TEXT), '$.attempt'), 0) = 0"
            )
            retrying, next_at = self._retry_summary(priority)
            result["retrying"] += retrying
            if next_at is not None:
                result["next_retry_at"] = min(next_at, result["next_retry_at"] or next_at)
        return result

    def _retry_summary(self, priority: str) -> tuple[int, float | None]:
        try:
            row = (
                self._side()
                .execute(
                    f"SELECT COUNT(*), MIN(json_extract(CAST(data AS TEXT), '$.next_attempt_at')) "
                    f"FROM {_table(priority)} WHERE {_NOT_DONE_SQL} "
                    "AND json_extract(CAST(data AS TEXT), '$.attempt') > 0"
                )
                .fetchone()
            )
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0, None
            raise
        return row[0], row[1]

    @sqlite.retry_locked
    def clear(self) -> int:
        """Delete every job not yet done; returns how many. The DLQ is not touched."""
        removed = 0
        with sqlite.write(self._side()) as conn:
            for priority in PRIORITIES:
                try:
                    cur = conn.execute(f"DELETE FROM {_table(priority)} WHERE {_NOT_DONE_SQL}")
                except sqlite3.OperationalError as exc:
                    if "no such table" in str(exc):
                        continue
                    raise
                removed += cur.rowcount
            conn.execute("DELETE FROM s2p_pending")
        return removed


__all__ = ["JobQueue", "BULK", "INTERACTIVE", "DataFileError"]
