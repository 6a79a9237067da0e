"""The SQLite queue across a crash between two of its writes (sync_queue/queue.py,
"Orderings"): persist-queue's write and ours are separate transactions, so each window is
cut here by making the second write die (``Killed``), dropping the process's connections
unflushed, and opening the queue again as the next process would. A duplicate sync is
allowed; a lost edit (an event collapsing into a dead or in-flight row) never is."""

from __future__ import annotations

import json
import sqlite3

import pytest

from sync_queue import pq_insides
from sync_queue.job import BULK, INTERACTIVE, Job
from sync_queue.queue import JobQueue
from sync_queue.storage import SQLiteStore

NOW = 1_800_000_000.0


class Killed(BaseException):
    """The process died here (SIGKILL): nothing after this point ran."""


def die(*_args, **_kwargs):
    raise Killed


def job(sid: int, priority: str = INTERACTIVE, **kw) -> Job:
    return Job(scene_id=sid, priority=priority, enqueued_at=NOW, **kw)


def ids(items) -> list[int]:
    return [item.job.scene_id for item in items]


def opened(tmp_path, consumer: bool = False) -> JobQueue:
    return JobQueue(tmp_path / "queue", consumer=consumer, clock=lambda: NOW)


def killed(queue: JobQueue, call) -> None:
    with pytest.raises(Killed):
        call()
    queue.store.close()  # its connections go as a killed process's do: nothing flushed


def drained(tmp_path) -> list[tuple[int, str]]:
    consumer = opened(tmp_path, consumer=True)
    done = []
    while items := consumer.take(10):
        for item in items:
            done.append((item.job.scene_id, item.job.priority))
            consumer.ack(item)
    assert consumer.counts()["pending"] == 0
    consumer.close()
    return done


def test_a_producer_killed_after_its_mark_leaves_no_mark_that_swallows_the_next_edit(tmp_path, monkeypatch):
    producer = opened(tmp_path)
    monkeypatch.setattr(SQLiteStore, "_put", die)
    killed(producer, lambda: producer.put(job(1)))
    monkeypatch.undo()
    assert opened(tmp_path).put(job(1)) is True
    assert drained(tmp_path) == [(1, INTERACTIVE)]


def test_a_producer_killed_between_its_row_and_its_mark_leaves_a_row_that_drains(tmp_path, monkeypatch):
    producer = opened(tmp_path)
    monkeypatch.setattr(SQLiteStore, "_point", die)
    killed(producer, lambda: producer.put(job(1, BULK)))
    monkeypatch.undo()
    assert opened(tmp_path).put(job(1, BULK)) is True  # the first row has no live mark: a duplicate, not a loss
    consumer = opened(tmp_path, consumer=True)
    assert [r[1] for r in consumer.store.jobs()].count(BULK) == 2  # the orphan row counts: it is in its table
    assert consumer.counts()[BULK] == 1  # one scene waiting
    consumer.close()
    assert drained(tmp_path) == [(1, BULK)]  # one take: one job per scene, the double acked


def test_a_consumer_killed_between_get_and_unmarking_gets_the_job_again(tmp_path, monkeypatch):
    opened(tmp_path).put(job(1))
    consumer = opened(tmp_path, consumer=True)
    monkeypatch.setattr(SQLiteStore, "started", die)
    killed(consumer, lambda: consumer.take(10))
    monkeypatch.undo()
    # the mark still points at the row: an edit now collapses into it, and the row is
    # handed out again by the next consumer, which syncs the scene as it is then
    assert opened(tmp_path).put(job(1)) is False
    assert drained(tmp_path) == [(1, INTERACTIVE)]


def test_a_consumer_killed_before_its_ack_syncs_the_job_again(tmp_path):
    opened(tmp_path).put(job(1))
    consumer = opened(tmp_path, consumer=True)
    [item] = consumer.take(10)
    consumer.store._queue(INTERACTIVE).ack = die
    killed(consumer, lambda: consumer.ack(item))
    again = opened(tmp_path, consumer=True)
    assert again.counts()["pending"] == 1  # persist-queue's row is handed back
    again.close()
    assert drained(tmp_path) == [(1, INTERACTIVE)]


def test_a_consumer_killed_after_a_retry_keeps_the_retry_state(tmp_path):
    opened(tmp_path).put(job(1))
    consumer = opened(tmp_path, consumer=True)
    [item] = consumer.take(10)
    consumer.retry_later(item, item.job.retry(NOW + 30, RuntimeError("Plex timed out")))
    consumer.store.close()  # killed before its next take marked the job waiting again
    again = opened(tmp_path, consumer=True)
    counts = again.counts()
    assert (counts["retrying"], counts["next_retry_at"]) == (1, NOW + 30)
    assert again.take(10) == [] and again.next_due() == NOW + 30  # parked with its due time
    again.close()


def test_a_row_the_consumer_finished_before_its_producer_recorded_it_is_not_waiting(tmp_path, monkeypatch):
    producer, consumer = opened(tmp_path), opened(tmp_path, consumer=True)
    point = SQLiteStore._point

    def consumer_first(store, rows):  # the consumer takes and finishes the row before the producer records it
        for item in consumer.take(10):
            consumer.ack(item)
        point(store, rows)

    monkeypatch.setattr(SQLiteStore, "_point", consumer_first)
    assert producer.put(job(1)) is True
    monkeypatch.undo()
    assert producer.counts()["pending"] == 0
    assert producer.put(job(1)) is True  # not collapsed into the finished row
    consumer.close()
    assert drained(tmp_path) == [(1, INTERACTIVE)]


def test_a_mark_points_only_at_a_row_of_its_own_priority_and_scene(tmp_path):
    """Two producers on one scene, interleaved: a scan's bulk put marks the scene and puts
    its row; an edit re-marks the scene as interactive and puts its row; the bulk put then
    points the mark. Row ids count per table, so the bulk row's id is also an interactive
    row of another scene: a mark pointed there swallowed the scene's next edit while its
    own job was already in flight (the previous queue: the edit was lost)."""
    first, second = opened(tmp_path), opened(tmp_path)
    assert first.put(job(9)) is True  # interactive row 1, another scene's
    scan, edit = job(1, BULK), job(1)
    first.store._mark([scan])
    scan_row = first.store._put(scan)  # bulk row 1
    assert second.store.waiting([1]) == {}
    second.store._mark([edit])
    edit_row = second.store._put(edit)
    first.store._point([(scan, scan_row)])
    second.store._point([(edit, edit_row)])
    consumer = opened(tmp_path, consumer=True)
    assert ids(consumer.take(1)) == [9]  # scene 9's row is in flight, not done
    assert [(t.job.scene_id, t.job.priority) for t in consumer.take(1)] == [(1, INTERACTIVE)]
    assert second.put(job(1)) is True  # the next edit is not swallowed by scene 9's row
    consumer.close()


def test_a_parked_job_whose_row_was_cleared_is_not_marked_again(tmp_path):
    opened(tmp_path).put(job(1))
    drainer = opened(tmp_path, consumer=True)
    [item] = drainer.take(10)
    drainer.retry_later(item, item.job.retry(NOW + 30, RuntimeError("x")))  # marked again at the next take
    drainer.store.close()
    task = opened(tmp_path, consumer=True)  # clear_queue took the lock over
    assert task.clear() == 1
    task.close()
    drainer.close()  # the old drainer's close flushes its remarks
    assert opened(tmp_path).put(job(1)) is True
    assert drained(tmp_path) == [(1, INTERACTIVE)]


# -- data.db files of earlier versions: the queue of 0.x (no s2p_jobs, sync_queue/queue.py at
# 2fd561d), and the one that copied every job into s2p_jobs (at 1ddacef) --
OLD_SIDE_SCHEMA = """
CREATE TABLE s2p_waiting (scene_id INTEGER PRIMARY KEY, priority TEXT NOT NULL, queued_at REAL NOT NULL, pqid INTEGER);
CREATE TABLE s2p_entity_events (kind TEXT NOT NULL, entity_id INTEGER NOT NULL, event TEXT NOT NULL,
    queued_at REAL NOT NULL, after_scene INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kind, entity_id));
"""
COPIES_SCHEMA = """
CREATE TABLE s2p_jobs (priority TEXT NOT NULL, pqid INTEGER NOT NULL, scene_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL, next_attempt_at REAL NOT NULL, taken INTEGER NOT NULL, job TEXT NOT NULL,
    PRIMARY KEY (priority, pqid));
CREATE INDEX s2p_jobs_scene ON s2p_jobs (scene_id);
"""


def old_data_db(folder, copies: bool = False) -> None:
    """What an earlier queue left after a SIGKILL: rows in persist-queue's tables (waiting,
    taken, a parked retry, one set aside, one unreadable), its marks (live and stale) and,
    with ``copies``, its copies of the jobs (one of them of a job done since: never read)."""
    pq = pq_insides.load()
    folder.mkdir()
    tables = {
        p: pq.SQLiteAckQueue(str(folder), name=p, auto_resume=False, serializer=pq.json) for p in (INTERACTIVE, BULK)
    }
    waiting = tables[INTERACTIVE].put(job(1).to_dict())
    tables[INTERACTIVE].put(job(2).to_dict())
    tables[INTERACTIVE].get(block=False)  # scene 2: taken when the drainer died, its mark deleted
    tables[BULK].put(job(3, BULK).to_dict())
    retry = tables[BULK].get(block=False, raw=True)["pqid"]
    tables[BULK].update(job(3, BULK).retry(NOW + 60, RuntimeError("x")).to_dict(), id=retry)  # parked, marked again
    failed = tables[BULK].put(job(5, BULK).to_dict())
    tables[BULK].ack_failed(id=failed)
    unreadable = tables[BULK].put(job(6, BULK).to_dict())
    for table in tables.values():
        table.close()
    conn = sqlite3.connect(folder / "data.db", isolation_level=None)
    conn.executescript(OLD_SIDE_SCHEMA + (COPIES_SCHEMA if copies else ""))
    conn.execute("UPDATE ack_queue_bulk SET data = X'FF00' WHERE _id = ?", (unreadable,))
    marks = [(1, INTERACTIVE, NOW, waiting), (3, BULK, NOW, retry), (4, INTERACTIVE, NOW, 99)]  # 4: stale
    conn.executemany("INSERT INTO s2p_waiting VALUES (?, ?, ?, ?)", marks)
    if copies:
        copied = [(INTERACTIVE, waiting, job(1)), (BULK, retry, job(3, BULK)), (INTERACTIVE, 99, job(4))]
        conn.executemany(
            "INSERT INTO s2p_jobs VALUES (?, ?, ?, 0, 0, 0, ?)",
            [(p, pqid, j.scene_id, json.dumps(j.to_dict())) for p, pqid, j in copied],
        )
    conn.close()


@pytest.mark.parametrize("copies", [False, True], ids=["0.x", "copies"])
def test_a_data_db_of_an_earlier_queue_drains_and_keeps_its_marks(tmp_path, copies):
    old_data_db(tmp_path / "queue", copies)
    look = opened(tmp_path)  # a task's look before any drainer opened it
    assert look.pending() == 3 and look.waiting_job(3).attempt == 1  # scenes 1, 2, 3 (the unreadable row has none)
    look.close()
    consumer = opened(tmp_path, consumer=True)
    counts = consumer.counts()
    assert (counts[INTERACTIVE], counts[BULK], counts["retrying"], counts["set_aside"]) == (2, 1, 1, 1), counts
    assert consumer.put(job(1)) is False  # its live mark still collapses an edit
    assert consumer.put(job(4)) is True  # the stale one does not
    assert sorted(t.job.scene_id for t in consumer.take(10)) == [1, 2, 4]
    assert [r[:2] for r in consumer.take_rejected()] == [(BULK, 3)]  # the unreadable row (id 3), set aside
    assert consumer.next_due() == NOW + 60 and consumer.counts()["set_aside"] == 2
    consumer.close()
    conn = sqlite3.connect(tmp_path / "queue" / "data.db")
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 's2p_jobs'").fetchone() is None  # no copies left
