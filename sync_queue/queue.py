"""The job queue: persist-queue's SQLiteAckQueue behind a small interface of ours.

This is the only module that imports persist-queue or touches its tables. Facts it
is built on (persist-queue 1.1.0, persistqueue/sqlackqueue.py and sqlbase.py):

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
* Events for a scene that already has a job waiting collapse into that job (a user's
  edit replaces a waiting bulk job): a side table ``s2p_waiting`` marks each scene's
  waiting job by its row id, so a mark whose row is gone is ignored.
* A changed tag, performer, studio or group is ONE row in ``s2p_entity_events``
  (a newer event for the same entity replaces it and starts its expansion over);
  the drainer expands it into bulk scene jobs a batch at a time.
* persist-queue is loaded without its package ``__init__`` (:func:`persist_queue`):
  the hook, which Stash waits for inside every scene edit, would otherwise pay for
  asyncio, ssl and the async/MySQL queues it never uses.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, cast

from core.errors import DataFileError
from sync_queue import inbox, sqlite
from sync_queue.job import BULK, INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken, one_per_scene
from sync_queue.parked import Parked

QUEUE_FILE = inbox.QUEUE_FILE
CLEAR_ACKED_EVERY = 500
# Row statuses, as persist-queue 1.1.0 writes them (persistqueue/sqlackqueue.py, ``AckStatus``):
# put() writes INITED, nack() and auto_resume READY, get() UNACK; ack() writes 5 and
# ack_failed() 9, both done. get() hands out rows below UNACK.
INITED, READY, UNACK, ACK_FAILED = 0, 1, 2, 9
_READY_SQL = f"status IN ({INITED}, {READY})"
_NOT_DONE_SQL = f"status IN ({INITED}, {READY}, {UNACK})"
_SIDE_SCHEMA = (
    """
DROP TABLE IF EXISTS s2p_pending;
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
    + inbox.SCHEMA
)


def _table(priority: str) -> str:
    return f"ack_queue_{priority}"


PERSIST_QUEUE = "persistqueue"
_MODULES = ("sqlackqueue", "exceptions", "serializers.json")
_loaded: SimpleNamespace | None = None


def persist_queue() -> SimpleNamespace:
    """persist-queue's ``SQLiteAckQueue``, ``Empty`` and JSON serializer, loaded cheaply.

    ``import persistqueue`` runs the package's ``__init__``, which (in 1.1.0) imports
    its asyncio queues (asyncio, and through it ssl; docs/performance.md, "Hook"), the
    file queue, PDict and the MySQL queue, none of which we use. Its modules import
    each other absolutely (``sqlbase`` does ``import persistqueue.serializers.pickle``),
    so the package itself must exist: we register a bare package module with the real
    package folder as its path, import the three modules we need, and then take the
    bare package and every ``persistqueue.*`` module out of ``sys.modules`` again. The
    adapter keeps its own references; a later ``import persistqueue`` elsewhere in the
    process loads the whole package afresh, complete and untouched by this. Both
    copies read and write the same tables (the test checks that too).

    Anything unexpected (another persist-queue layout) falls back to the ordinary
    import. tests/test_queue_loading.py checks this against the pinned version.
    """
    global _loaded
    if _loaded is None:
        _loaded = _load_without_init() if PERSIST_QUEUE not in sys.modules else None
        if _loaded is None:
            _loaded = _load_modules()
    return _loaded


def _load_modules() -> SimpleNamespace:
    import importlib

    mods = {name: importlib.import_module(f"{PERSIST_QUEUE}.{name}") for name in _MODULES}
    return SimpleNamespace(
        SQLiteAckQueue=mods["sqlackqueue"].SQLiteAckQueue,
        Empty=mods["exceptions"].Empty,
        json=mods["serializers.json"],
    )


def _load_without_init() -> SimpleNamespace | None:
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(PERSIST_QUEUE, sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"No module named {PERSIST_QUEUE!r}", name=PERSIST_QUEUE)
    bare = ModuleType(PERSIST_QUEUE)
    bare.__path__ = list(spec.submodule_search_locations)
    bare.__spec__, bare.__file__ = spec, spec.origin
    sys.modules[PERSIST_QUEUE] = bare
    try:
        return _load_modules()
    except ImportError:
        return None  # not the layout we know: the ordinary import instead
    finally:
        # list() copies the keys at once: another thread may be importing meanwhile (a
        # task reads Plex's listing in a thread), and a comprehension over the live dict
        # then fails with "dictionary changed size during iteration".
        for name in [m for m in list(sys.modules) if m == PERSIST_QUEUE or m.startswith(PERSIST_QUEUE + ".")]:
            sys.modules.pop(name, None)


def _inbox_job(row: inbox.Row) -> Job:
    """The job of an inbox row (ValueError/TypeError when the row is not one)."""
    scene_id, priority, event, fields, queued_at = row
    if priority not in PRIORITIES or isinstance(scene_id, bool) or not isinstance(scene_id, int) or scene_id < 1:
        raise ValueError(f"not a scene job: scene {scene_id!r}, priority {priority!r}")
    return Job(scene_id, priority, str(event), tuple(f for f in str(fields).split(",") if f), float(queued_at))


class JobQueue:
    """Durable, prioritised job queue shared by hooks, tasks and the drainer."""

    def __init__(self, directory: Path, consumer: bool = False, clock=time.time) -> None:
        self.directory = directory
        self.consumer = consumer
        self.clock = clock
        self.path = directory / QUEUE_FILE
        self._queues: dict[str, Any] = {}
        self._side_conn: sqlite3.Connection | None = None
        self._parked = Parked()
        self._acks = 0
        self.rejected: list[tuple[str, int, str]] = []  # rows that could not be decoded
        self._remarks: list[Taken] = []  # back to waiting since the last take: marked again then

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
        pq = persist_queue()
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
            # WAL + synchronous=NORMAL survives any process crash (SIGKILL included);
            # only an OS crash or power cut can lose the last commits. FULL costs an
            # fsync per put and per ack. persist-queue has
            # no option for it, so set it on its two connections.
            # (persist-queue annotates both as None until it opens them.)
            opened = cast(list[sqlite3.Connection], [queue._putter, queue._getter])
            for conn in {id(c): c for c in opened}.values():
                conn.execute("PRAGMA synchronous=NORMAL")
            return queue
        except sqlite3.DatabaseError as exc:
            if sqlite.is_locked(exc):
                raise
            raise sqlite.data_file_error(self.path, exc) from None

    def close(self) -> None:
        if self._remarks and self._queues:
            with contextlib.suppress(sqlite3.Error, DataFileError):
                self._flush_remarks()
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
        """Enqueue jobs; returns how many rows were added.

        A scene has at most one waiting job across priorities: an event for a scene
        whose job waits collapses into it, except that a user's edit replaces a waiting
        bulk job (the interactive one wins). The mark is written before the row and
        points at it once the row exists; the consumer deletes it when it takes the row,
        so a mark can never outlive its job (and one whose row is gone is ignored)."""
        jobs = list(jobs)
        persist_queue()  # a missing package fails here, before any file is created
        waiting = self._waiting([job.scene_id for job in jobs])
        chosen: dict[int, Job] = {}
        for job in jobs:
            have = chosen.get(job.scene_id)
            if have is not None and (have.priority == INTERACTIVE or have.priority == job.priority):
                continue
            mark = waiting.get(job.scene_id)
            if mark is not None and (mark[0] == INTERACTIVE or mark[0] == job.priority):
                continue
            chosen[job.scene_id] = job
        if not chosen:
            return 0
        self._mark(list(chosen.values()))
        rows = []
        for sid, job in chosen.items():
            mark = waiting.get(sid)
            if mark is not None:  # a waiting bulk job, replaced by this interactive one
                self._drop_row(mark[0], mark[1])
            with sqlite.corruption_named(self.path):
                rows.append((sid, self._queue(job.priority).put(job.to_dict())))
        self._point_marks(rows)
        return len(chosen)

    def put_hook_job(self, job: Job) -> bool:
        """Write a hook's job to the inbox (sync_queue/inbox.py), as the fast lane does:
        False when it collapsed into the scene's row. The consumer moves it into the queue."""
        added = inbox.put_on(self._side(), job.scene_id, job.priority, job.event, job.fields, job.enqueued_at)
        return added

    def _waiting(self, scene_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Scenes with a job that really waits: (priority, row id) of that job."""
        found: dict[int, tuple[str, int]] = {}
        tables = self._tables()
        for start in range(0, len(scene_ids), 500):
            chunk = scene_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._side().execute(
                f"SELECT scene_id, priority, pqid FROM s2p_waiting WHERE pqid IS NOT NULL AND scene_id IN ({marks})",
                chunk,
            )
            for sid, priority, pqid in rows.fetchall():
                if priority in PRIORITIES and _table(priority) in tables:
                    alive = self._side().execute(
                        f"SELECT 1 FROM {_table(priority)} WHERE _id = ? AND {_NOT_DONE_SQL}", (pqid,)
                    )
                    if alive.fetchone() is not None:
                        found[sid] = (priority, pqid)
        return found

    @sqlite.retry_locked
    def _mark(self, jobs: list[Job]) -> None:
        with sqlite.write(self._side()) as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO s2p_waiting VALUES (?, ?, ?, NULL)",
                [(j.scene_id, j.priority, j.enqueued_at) for j in jobs],
            )

    @sqlite.retry_locked
    def _point_marks(self, rows: list[tuple[int, int]]) -> None:
        """Point each scene's fresh mark at its row (scene id, row id), unless the consumer
        took the row meanwhile (it deleted the mark). One transaction once every row is
        put: until then a mark with no row counts as no waiting job, as after a crash."""
        with sqlite.write(self._side()) as conn:
            conn.executemany(
                "UPDATE s2p_waiting SET pqid = ? WHERE scene_id = ? AND pqid IS NULL", [(p, s) for s, p in rows]
            )

    @sqlite.retry_locked
    def _drop_row(self, priority: str, pqid: int) -> None:
        """Delete a waiting row nobody has taken (a taken one is superseded when next taken)."""
        with sqlite.write(self._side()) as conn:
            conn.execute(f"DELETE FROM {_table(priority)} WHERE _id = ? AND {_READY_SQL}", (pqid,))

    @sqlite.retry_locked
    def _unmark(self, items: list[Taken]) -> None:
        if not items:
            return
        with sqlite.write(self._side()) as conn:
            conn.executemany(
                "DELETE FROM s2p_waiting WHERE scene_id = ? AND (pqid = ? OR pqid IS NULL)",
                [(t.job.scene_id, t.pqid) for t in items],
            )

    @sqlite.retry_locked
    def _flush_remarks(self) -> None:
        """Jobs that went back to waiting (postponed, retried) are marked again; one whose
        scene meanwhile got a newer waiting job is superseded by it and leaves the queue."""
        items, self._remarks = self._remarks, []
        if not items:
            return
        superseded = []
        with sqlite.write(self._side()) as conn:
            for item in items:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO s2p_waiting VALUES (?, ?, ?, ?)",
                    (item.job.scene_id, item.job.priority, item.job.enqueued_at, item.pqid),
                )
                if cur.rowcount == 0:
                    superseded.append(item)
        if superseded:
            newer = self._waiting([t.job.scene_id for t in superseded])
            for item in superseded:
                if item.job.scene_id in newer and newer[item.job.scene_id][1] != item.pqid:
                    self._parked.drop(item)
                    with sqlite.corruption_named(self.path):
                        self._queue(item.table).ack(id=item.pqid)

    # -- entity events ---------------------------------------------------------
    @sqlite.retry_locked
    def put_entity_events(self, events: Iterable[EntityEvent]) -> int:
        """Record entity events (one row per entity; a newer event restarts its expansion)."""
        rows = [(e.kind, e.entity_id, e.event, e.queued_at) for e in events]
        if rows:
            with sqlite.write(self._side()) as conn:
                conn.executemany(
                    "INSERT INTO s2p_entity_events (kind, entity_id, event, queued_at, after_scene) "
                    "VALUES (?, ?, ?, ?, 0) ON CONFLICT (kind, entity_id) DO UPDATE SET "
                    "event = excluded.event, queued_at = excluded.queued_at, after_scene = 0",
                    rows,
                )
        return len(rows)

    def entity_events(self) -> list[EntityEvent]:
        rows = self._side().execute(
            "SELECT kind, entity_id, event, queued_at, after_scene FROM s2p_entity_events ORDER BY queued_at"
        )
        return [EntityEvent(*row) for row in rows.fetchall()]

    @sqlite.retry_locked
    def advance_entity_event(self, event: EntityEvent, after_scene: int, finished: bool) -> None:
        """Note how far ``event`` is expanded (or drop it when done), unless a newer
        event for the same entity replaced it meanwhile (that one starts over)."""
        key = (event.kind, event.entity_id, event.queued_at)
        with sqlite.write(self._side()) as conn:
            if finished:
                conn.execute("DELETE FROM s2p_entity_events WHERE kind = ? AND entity_id = ? AND queued_at = ?", key)
            else:
                conn.execute(
                    "UPDATE s2p_entity_events SET after_scene = ? WHERE kind = ? AND entity_id = ? AND queued_at = ?",
                    (after_scene, *key),
                )

    def entity_event_count(self) -> int:
        return self._side().execute("SELECT COUNT(*) FROM s2p_entity_events").fetchone()[0]

    # -- consuming (drainer only) --------------------------------------------
    def take(self, limit: int, early=None) -> list[Taken]:
        """Up to ``limit`` due jobs: parked retries first, then interactive, then bulk;
        at most one job per scene (another job of the same scene in the take is acked:
        the one kept syncs the scene as it is now, so its poster is uploaded once).

        ``early(item) -> bool`` lets a caller take jobs that are not due yet
        (``process_queue`` retries waiting jobs once, now).
        """
        assert self.consumer, "only the drainer lock holder may take jobs"
        self._move_inbox()
        self._flush_remarks()
        now = self.clock()
        taken = self._parked.due(now, limit, early)
        for priority in PRIORITIES:
            while len(taken) < limit:
                item = self._get(priority, taken)
                if item is None:
                    break
                if item.job.next_attempt_at > now and not (early and early(item)):
                    self._park(item)
                else:
                    taken.append(item)
        self._unmark(taken)
        return self._one_per_scene(taken)

    def _one_per_scene(self, taken: list[Taken]) -> list[Taken]:
        kept, doubles = one_per_scene(taken)
        for item in doubles:
            self.ack(item)
        return kept

    def _move_inbox(self) -> None:
        """The hooks' fast-lane rows into the queue (sync_queue/inbox.py): put first, then
        forgotten, so a crash in between puts a row twice and never loses one."""
        while rows := inbox.rows(self._side()):
            self.put_many(self._inbox_jobs(rows))
            self._forget_moved(rows)
            if len(rows) < inbox.MOVE_BATCH:
                return

    def _inbox_jobs(self, rows: list[inbox.Row]) -> list[Job]:
        """The jobs of inbox rows; a row that is not one (a damaged file) is set aside, said
        in the log like an unreadable queue row, and forgotten with the rest."""
        jobs = []
        for row in rows:
            try:
                jobs.append(_inbox_job(row))
            except (ValueError, TypeError, AttributeError) as exc:
                self.rejected.append(("inbox", row[0] if row else 0, f"{type(exc).__name__}: {exc}"))
        return jobs

    @sqlite.retry_locked
    def _forget_moved(self, rows: list[inbox.Row]) -> None:
        with sqlite.write(self._side()) as conn:
            inbox.forget(conn, rows)

    def ready_count(self) -> int:
        """Jobs waiting to be taken (not in flight, not parked; the inbox's too), from SQL."""
        waiting = sum(self._count_where(p, _READY_SQL) for p in PRIORITIES)
        return waiting + inbox.count(self._side()) + self.entity_event_count()

    def _get(self, priority: str, taken: list[Taken]) -> Taken | None:
        queue = self._queue(priority)
        try:
            with sqlite.corruption_named(self.path):
                raw = queue.get(block=False, raw=True)
        except persist_queue().Empty:
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            self._quarantine_poison(priority, exc, taken)
            return self._get(priority, taken)
        try:
            job = Job.from_dict(raw["data"])
        except (ValueError, TypeError) as exc:
            self._fail_row(priority, raw["pqid"], exc)
            return self._get(priority, taken)
        return Taken(job=job, pqid=raw["pqid"], table=priority)

    def _quarantine_poison(self, priority: str, exc: BaseException, taken: list[Taken]) -> None:
        """persist-queue marked a row 'unack' and then failed to decode it, without telling
        which (its ``_pop`` marks the row before ``loads``): set aside exactly the rows of ours that cannot be decoded."""
        held = {t.pqid for t in self._parked if t.table == priority}
        held |= {t.pqid for t in taken if t.table == priority}
        serializer = self._queue(priority)._serializer
        rows = self._side().execute(f"SELECT _id, data FROM {_table(priority)} WHERE status = {UNACK}").fetchall()
        for pqid, data in rows:
            if pqid in held:
                continue
            try:
                serializer.loads(data)
            except (ValueError, UnicodeDecodeError, TypeError) as bad:
                self._fail_row(priority, pqid, bad)

    def _fail_row(self, priority: str, pqid: int, exc: BaseException) -> None:
        self.rejected.append((priority, pqid, f"{type(exc).__name__}: {exc}"))
        self._queue(priority).ack_failed(id=pqid)

    def take_rejected(self) -> list[tuple[str, int, str]]:
        """The rows set aside since the last call (for the log)."""
        rejected, self.rejected = self.rejected, []
        return rejected

    def _park(self, item: Taken) -> None:
        self._parked.park(item, item.job.next_attempt_at)

    def next_due(self) -> float | None:
        self._flush_remarks()
        return self._parked.next_at()

    def parked_count(self) -> int:
        self._flush_remarks()
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
        self._remarks.append(item)

    def postpone(self, item: Taken, until: float) -> None:
        """Park without spending the retry budget (the breaker is open)."""
        self._parked.park(item, until)
        self._remarks.append(item)

    # -- inspecting (any process) --------------------------------------------
    def _tables(self) -> set[str]:
        """The queue tables that exist (persist-queue creates each on first open)."""
        rows = self._side().execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {name for (name,) in rows}

    def _count_where(self, priority: str, where: str) -> int:
        if _table(priority) not in self._tables():
            return 0
        return self._side().execute(f"SELECT COUNT(*) FROM {_table(priority)} WHERE {where}").fetchone()[0]

    def counts(self) -> dict[str, Any]:
        """SQL counts: pending (not done, retries included; tag/performer/studio/group changes
        still to fan out count too), in flight, scheduled retries, and rows set aside because
        they could not be read (persist-queue's ack_failed, status 9)."""
        events = self.entity_event_count()
        result: dict[str, Any] = {
            "pending": events,
            "in_flight": 0,
            "retrying": 0,
            "next_retry_at": None,
            "set_aside": 0,
        }
        result["entity_events"] = events
        for priority in PRIORITIES:
            # a scene of the inbox may also have a waiting job: counted twice until moved
            pending = self._count_where(priority, _NOT_DONE_SQL) + inbox.count(self._side(), priority)
            result[priority] = pending
            result["pending"] += pending
            # taken and being worked on; a parked retry (also UNACK) only waits
            result["in_flight"] += self._count_where(
                priority,
                f"status = {UNACK} AND (NOT json_valid(CAST(data AS TEXT)) "
                "OR COALESCE(json_extract(CAST(data AS TEXT), '$.attempt'), 0) = 0)",
            )
            result["set_aside"] += self._count_where(priority, f"status = {ACK_FAILED}")
            retrying, next_at = self._retry_summary(priority)
            result["retrying"] += retrying
            if next_at is not None:
                result["next_retry_at"] = min(next_at, result["next_retry_at"] or next_at)
        return result

    def waiting_job(self, scene_id: int) -> Job | None:
        """The not-yet-done job of one scene (waiting, in flight or waiting for a retry)."""
        row = inbox.waiting(self._side(), scene_id)
        if row is not None:
            return _inbox_job(row)
        tables = self._tables()
        for priority in PRIORITIES:
            if _table(priority) not in tables:
                continue
            row = (
                self._side()
                .execute(
                    f"SELECT data FROM {_table(priority)} WHERE {_NOT_DONE_SQL} AND json_valid(CAST(data AS TEXT)) "
                    "AND json_extract(CAST(data AS TEXT), '$.scene_id') = ? ORDER BY _id LIMIT 1",
                    (scene_id,),
                )
                .fetchone()
            )
            if row is not None:
                data = row[0]
                try:
                    return Job.from_dict(json.loads(data.decode() if isinstance(data, bytes) else data))
                except ValueError:
                    return None  # an unreadable row: the drainer sets it aside and says so
        return None

    def _retry_summary(self, priority: str) -> tuple[int, float | None]:
        if _table(priority) not in self._tables():
            return 0, None
        row = (
            self._side()
            .execute(
                f"SELECT COUNT(*), MIN(json_extract(CAST(data AS TEXT), '$.next_attempt_at')) "
                f"FROM {_table(priority)} WHERE {_NOT_DONE_SQL} AND json_valid(CAST(data AS TEXT)) "
                "AND json_extract(CAST(data AS TEXT), '$.attempt') > 0"
            )
            .fetchone()
        )
        return row[0], row[1]

    @sqlite.retry_locked
    def clear(self) -> int:
        """Delete every job not yet done; returns how many. The DLQ is not touched."""
        removed = 0
        tables = self._tables()
        with sqlite.write(self._side()) as conn:
            for priority in PRIORITIES:
                if _table(priority) in tables:
                    cur = conn.execute(f"DELETE FROM {_table(priority)} WHERE {_NOT_DONE_SQL}")
                    removed += cur.rowcount
            conn.execute("DELETE FROM s2p_waiting")
            removed += conn.execute("DELETE FROM s2p_entity_events").rowcount + inbox.clear(conn)
        self._parked.clear()
        self._remarks.clear()
        return removed


__all__ = ["JobQueue", "BULK", "INTERACTIVE", "DataFileError"]
