"""The queue's storage (``SQLiteStore``): persist-queue's ``SQLiteAckQueue`` and our tables in ``data.db``.

Tables ``interactive`` and ``bulk`` hold the jobs, each in its row and nowhere else (only
the consumer opens them with ``auto_resume``); beside them ``s2p_waiting`` marks each
scene's waiting job (which row: persist-queue cannot say) and ``s2p_entity_events`` holds
the entity events. Counts and look-ups read the jobs in persist-queue's rows
(sync_queue/pq_insides.py ``rows``). A SIGKILL may fall between any two steps, so a mark
only points at work still to start: put = mark, ``put``, then point the mark; take =
``get``, then unmark; a mark whose row is done counts as none. docs/architecture.md, "The
queue and the drainer", has the rest.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sync_queue import pq_insides, spool, sqlite
from sync_queue.job import INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken

Mark = tuple[str, int]  # (priority, row id) of a scene's waiting job
CLEAR_ACKED_EVERY = 500
_SIDE_SCHEMA = """
DROP TABLE IF EXISTS s2p_pending;
DROP TABLE IF EXISTS s2p_jobs;
CREATE TABLE IF NOT EXISTS s2p_waiting (
    scene_id INTEGER PRIMARY KEY,
    priority TEXT NOT NULL,
    queued_at REAL NOT NULL,
    pqid INTEGER
);
CREATE TABLE IF NOT EXISTS s2p_entity_events (
    kind TEXT NOT NULL,
    entity_id INTEGER NOT NULL,
    event TEXT NOT NULL,
    queued_at REAL NOT NULL,
    after_scene INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, entity_id)
);
"""
_SCENE = "json_extract(doc, '$.scene_id')"
# the rows holding JSON (one that does not is set aside when taken); the CASE, not a WHERE
# term, keeps json_extract from malformed data whatever order SQLite evaluates terms in
_JOBS = (
    "FROM (SELECT name, pqid, taken, CASE WHEN json_valid(doc) THEN doc END AS doc FROM ({rows})) WHERE doc NOT NULL"
)


def _decoded(data: Any) -> Job | BaseException:
    """The job of a persist-queue row's data (JSON), or why it is not one."""
    try:
        return Job.from_dict(json.loads(data.decode() if isinstance(data, bytes) else data))
    except (ValueError, TypeError, AttributeError) as exc:
        return exc


class SQLiteStore:
    """The rules' storage in ``data.db``: persist-queue's rows plus our marks and entity events."""

    def __init__(self, directory: Path, consumer: bool) -> None:
        self.directory = directory
        self.consumer = consumer
        self.path = directory / spool.QUEUE_FILE
        self._queues: dict[str, Any] = {}
        self._tables: list[str] = []  # persist-queue's tables known to exist (they never go)
        self._side_conn: sqlite3.Connection | None = None
        self._out: set[tuple[str, int]] = set()  # rows this consumer got and has not settled
        self._acks = 0
        self.rejected: list[tuple[str, int, str]] = []  # rows that could not be decoded

    # -- opening -------------------------------------------------------------
    def side(self) -> sqlite3.Connection:
        if self._side_conn is None:
            self._side_conn = sqlite.connect(self.path, _SIDE_SCHEMA)
        return self._side_conn

    def _queue(self, priority: str) -> Any:
        if priority not in self._queues:
            queue = self._queues[priority] = self._open(priority)
            if self.consumer:
                with sqlite.corruption_named(self.path):
                    queue.clear_acked_data(max_delete=None, keep_latest=None)
        return self._queues[priority]

    @sqlite.retry_locked  # persist-queue creates its table and resumes rows on connections of its own
    def _open(self, priority: str) -> Any:
        pq = pq_insides.load()
        sqlite.create_private(self.path)
        try:
            queue = pq.SQLiteAckQueue(
                str(self.directory),
                name=priority,
                auto_resume=self.consumer,
                multithreading=True,
                timeout=sqlite.BUSY_TIMEOUT_S,
                serializer=pq.json,
            )
            pq_insides.relax_sync(queue)
            return queue
        except sqlite3.DatabaseError as exc:
            if sqlite.is_locked(exc):
                raise
            raise sqlite.data_file_error(self.path, exc) from None

    def _rows(self) -> str:
        """The SELECT of the rows not done (pq_insides.rows), over the tables that exist;
        a consumer opens its tables first (once: ``auto_resume`` hands back what a killed
        drainer held)."""
        if self.consumer:
            for priority in PRIORITIES:
                self._queue(priority)
        if len(self._tables) < len(PRIORITIES):
            conn = self.side()
            self._tables = [p for p in PRIORITIES if pq_insides.has_table(conn, p)]
        return pq_insides.rows(self._tables)

    def _select(self, query: str, params: tuple | list = ()) -> list[tuple]:
        """``query`` with ``{rows}`` as the rows not done."""
        return self.side().execute(query.format(rows=self._rows()), params).fetchall()

    def opened(self) -> bool:
        return bool(self._queues)

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        if self._side_conn is not None:
            self._side_conn.close()
            self._side_conn = None

    # -- producing -----------------------------------------------------------
    def waiting(self, scene_ids: list[int]) -> dict[int, Mark]:
        """Scenes whose mark points at a row not done: (priority, row id)."""
        pq_insides.load()  # a missing package fails here, before any file is created
        rows = self._select(
            "SELECT w.scene_id, w.priority, w.pqid FROM s2p_waiting w JOIN ({rows}) r ON r.name = w.priority "
            "AND r.pqid = w.pqid WHERE w.scene_id IN (SELECT value FROM json_each(?))",
            (json.dumps(scene_ids),),
        )
        return {sid: (priority, pqid) for sid, priority, pqid in rows}

    def enqueue(self, jobs: list[Job], replacing: list[Mark]) -> None:
        """Put each job's row: its scene's mark first, without a row, then pointed at the row,
        so a SIGKILL between them leaves a mark that counts as none (a duplicate sync at
        worst, never a swallowed edit); each waiting row ``replacing`` names is finished,
        unless it was taken meanwhile (a taken one is superseded when next taken)."""
        self._mark(jobs)
        if replacing:
            with sqlite.write(self.side()) as conn:
                for priority, pqid in replacing:
                    pq_insides.finish_waiting(conn, priority, pqid)
        self._point([(job, self._put(job)) for job in jobs])

    def _mark(self, jobs: list[Job]) -> None:
        with sqlite.write(self.side()) as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO s2p_waiting VALUES (?, ?, ?, NULL)",
                [(j.scene_id, j.priority, j.enqueued_at) for j in jobs],
            )

    def _put(self, job: Job) -> int:
        with sqlite.corruption_named(self.path):
            return self._queue(job.priority).put(job.to_dict())

    def _point(self, rows: list[tuple[Job, int]]) -> None:
        """Point each fresh mark at its row, unless the consumer took a job of the scene
        meanwhile (it deleted the mark) or another producer marked it again."""
        with sqlite.write(self.side()) as conn:
            conn.executemany(
                "UPDATE s2p_waiting SET pqid = ? WHERE scene_id = ? AND priority = ? AND pqid IS NULL",
                [(pqid, job.scene_id, job.priority) for job, pqid in rows],
            )

    # -- consuming -----------------------------------------------------------
    def dequeue(self, priority: str) -> Taken | None:
        """The next row of ``priority`` (handed out: unacknowledged until settled); None when none waits."""
        queue = self._queue(priority)
        while True:
            try:
                with sqlite.corruption_named(self.path):
                    raw = queue.get(block=False, raw=True)
            except pq_insides.load().Empty:
                return None
            except (ValueError, UnicodeDecodeError):
                self._quarantine_poison(priority)
                continue
            try:
                job = Job.from_dict(raw["data"])
            except (ValueError, TypeError) as exc:
                self._fail_row(priority, raw["pqid"], exc)
                continue
            self._out.add((priority, raw["pqid"]))
            return Taken(job=job, pqid=raw["pqid"], table=priority)

    def _quarantine_poison(self, priority: str) -> None:
        """persist-queue marked a row taken and then failed to decode it, without telling
        which: set aside the taken rows that are not ours and cannot be decoded."""
        for pqid, data in pq_insides.unack_rows(self.side(), priority):
            if (priority, pqid) not in self._out and not isinstance(job := _decoded(data), Job):
                self._fail_row(priority, pqid, job)

    def _fail_row(self, priority: str, pqid: int, exc: BaseException) -> None:
        self.rejected.append((priority, pqid, f"{type(exc).__name__}: {exc}"))
        with sqlite.corruption_named(self.path):
            self._queue(priority).ack_failed(id=pqid)

    def take_rejected(self) -> list[tuple[str, int, str]]:
        rejected, self.rejected = self.rejected, []
        return rejected

    def started(self, taken: list[Taken]) -> None:
        """The jobs a take hands out no longer wait: their scenes' marks go, so a later
        edit makes a new job."""
        if not taken:
            return
        with sqlite.write(self.side()) as conn:
            conn.executemany(
                "DELETE FROM s2p_waiting WHERE scene_id = ? AND (pqid = ? OR pqid IS NULL)",
                [(t.job.scene_id, t.pqid) for t in taken],
            )

    def wait_again(self, items: list[Taken]) -> list[Taken]:
        """Parked jobs become their scenes' waiting jobs again (an edit collapses into them);
        the ones refused (the scene has a mark, or the row is done) are returned."""
        refused = []
        rows = self._rows()
        with sqlite.write(self.side()) as conn:
            for item in items:
                marked = conn.execute(
                    f"INSERT OR IGNORE INTO s2p_waiting SELECT ?, ?, ?, ? WHERE EXISTS "
                    f"(SELECT 1 FROM ({rows}) WHERE name = ? AND pqid = ?)",
                    (item.job.scene_id, item.table, item.job.enqueued_at, item.pqid, item.table, item.pqid),
                )
                if marked.rowcount == 0:
                    refused.append(item)
        return refused

    def ack(self, item: Taken) -> None:
        with sqlite.corruption_named(self.path):
            self._queue(item.table).ack(id=item.pqid)
            self._out.discard((item.table, item.pqid))
            self._acks += 1
            if self._acks % CLEAR_ACKED_EVERY == 0:
                self._queue(item.table).clear_acked_data(max_delete=None, keep_latest=None)

    def schedule(self, item: Taken, job: Job) -> None:
        """Keep ``job``'s retry state (attempt, due time, error) in its taken row."""
        with sqlite.corruption_named(self.path):
            self._queue(item.table).update(job.to_dict(), id=item.pqid)

    # -- inspecting ----------------------------------------------------------
    def jobs(self) -> list[tuple[int, str, int, int, float | None]]:
        """(scene, priority, taken, retrying, next attempt) of each row not done that holds a
        job: one pass over the rows, no sort (counts add them up)."""
        return self._select(
            f"SELECT {_SCENE} s, name, taken, json_extract(doc, '$.attempt') > 0, "
            f"json_extract(doc, '$.next_attempt_at') {_JOBS} AND s IS NOT NULL"
        )

    def ready(self) -> int:
        """Rows not taken and the entity events, in one statement (a lingering drainer asks
        at every poll)."""
        query = "SELECT (SELECT COUNT(*) FROM ({rows}) WHERE NOT taken) + (SELECT COUNT(*) FROM s2p_entity_events)"
        return self._select(query)[0][0]

    def set_aside(self, priority: str) -> int:
        with sqlite.corruption_named(self.path):
            return self._queue(priority).ack_failed_count()

    def job_of(self, scene_id: int) -> Job | None:
        found = self._select(
            f"SELECT doc {_JOBS} AND {_SCENE} = ? ORDER BY name != '{INTERACTIVE}', pqid LIMIT 1",
            (scene_id,),
        )
        job = _decoded(found[0][0]) if found else None
        return job if isinstance(job, Job) else None

    def clear(self) -> int:
        with sqlite.write(self.side()) as conn:
            removed = sum(pq_insides.delete_not_done(conn, priority) for priority in PRIORITIES)
            conn.execute("DELETE FROM s2p_waiting")
            removed += conn.execute("DELETE FROM s2p_entity_events").rowcount
        self._out.clear()
        return removed

    # -- entity events ---------------------------------------------------------
    def put_entity_events(self, events: list[EntityEvent]) -> None:
        with sqlite.write(self.side()) as conn:
            conn.executemany(
                "INSERT INTO s2p_entity_events (kind, entity_id, event, queued_at, after_scene) "
                "VALUES (?, ?, ?, ?, 0) ON CONFLICT (kind, entity_id) DO UPDATE SET "
                # An image-only change never hides the change it lands on (a rename waiting
                # would be dropped with it while performer_photos is off).
                "event = CASE WHEN substr(excluded.event, -?) = ? THEN s2p_entity_events.event "
                "ELSE excluded.event END, queued_at = excluded.queued_at, after_scene = 0",
                [(e.kind, e.entity_id, e.event, e.queued_at, len(spool.IMAGE_ONLY), spool.IMAGE_ONLY) for e in events],
            )

    def entity_events(self) -> list[EntityEvent]:
        rows = self.side().execute(
            "SELECT kind, entity_id, event, queued_at, after_scene FROM s2p_entity_events ORDER BY queued_at"
        )
        return [EntityEvent(*row) for row in rows.fetchall()]

    def advance_entity_event(self, event: EntityEvent, after_scene: int, finished: bool) -> None:
        key = (event.kind, event.entity_id, event.queued_at)
        with sqlite.write(self.side()) as conn:
            if finished:
                conn.execute("DELETE FROM s2p_entity_events WHERE kind = ? AND entity_id = ? AND queued_at = ?", key)
            else:
                conn.execute(
                    "UPDATE s2p_entity_events SET after_scene = ? WHERE kind = ? AND entity_id = ? AND queued_at = ?",
                    (after_scene, *key),
                )

    def entity_keys(self) -> set[tuple[str, int]]:
        return set(self.side().execute("SELECT kind, entity_id FROM s2p_entity_events").fetchall())
