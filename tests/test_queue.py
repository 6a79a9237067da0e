"""The job queue's contract, run along both ways a job enters (as huey runs one storage
suite against each backend): a task's ``put`` and the path every hook takes, a line in the
spool file moved in by the consumer (``ThroughSpool``). Then what only a task's put can
carry (a job not due yet), and the file outliving the object.
"""

from __future__ import annotations

import pytest

from sync_queue import spool
from sync_queue.job import BULK, INTERACTIVE, EntityEvent, Job
from sync_queue.queue import JobQueue

NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


class ThroughSpool(JobQueue):
    """Each job written as a hook writes it (hooks/lane.py: one spool line), then moved in as
    the consumer does before a take; ``put_many`` says how many rows the move added."""

    added: int | None = None

    def put_many(self, jobs) -> int:
        if self.added is not None:  # the move's own put
            self.added += super().put_many(jobs)
            return 0
        for j in jobs:
            assert (j.attempt, j.next_attempt_at) == (0, 0.0), "a hook's line carries no retry state"
            record = spool.scene_record(j.scene_id, j.priority, "Scene.Update.Post", ("title",), NOW)
            spool.put(str(self.directory.parent), record)
        self.added = 0
        self._move_spool()
        added, self.added = self.added, None
        return added


@pytest.fixture(params=["put", "spool"])
def queue(request, tmp_path, clock):
    kind = JobQueue if request.param == "put" else ThroughSpool
    q = kind(tmp_path / "queue", consumer=True, clock=clock)
    yield q
    q.close()


@pytest.fixture
def put_queue(tmp_path, clock):
    q = JobQueue(tmp_path / "queue", consumer=True, clock=clock)
    yield q
    q.close()


def job(sid: int, priority: str = INTERACTIVE, **kw) -> Job:
    return Job(scene_id=sid, priority=priority, enqueued_at=NOW, **kw)


def ids(items) -> list[int]:
    return [item.job.scene_id for item in items]


def counted(queue) -> dict:
    """``counts()``, with ``pending()`` (the drainer's last look) checked against it."""
    counts = queue.counts()
    assert queue.pending() == counts["pending"]
    return counts


EMPTY = {
    "pending": 0,
    "in_flight": 0,
    "retrying": 0,
    "next_retry_at": None,
    "set_aside": 0,
    "entity_events": 0,
    INTERACTIVE: 0,
    BULK: 0,
}


# -- the contract ----------------------------------------------------------------------------
def test_an_empty_queue(queue):
    assert queue.take(10) == [] and queue.next_due() is None and queue.parked_count() == 0
    assert queue.ready_count() == 0 and counted(queue) == EMPTY and queue.clear() == 0


def test_interactive_first_then_bulk_each_in_order(queue):
    assert queue.put_many([job(1, BULK), job(2, BULK), job(3), job(4)]) == 4
    assert queue.ready_count() == 4
    assert counted(queue) == {**EMPTY, "pending": 4, INTERACTIVE: 2, BULK: 2}
    assert ids(queue.take(3)) == [3, 4, 1]
    assert counted(queue) == {**EMPTY, "pending": 4, "in_flight": 3, INTERACTIVE: 2, BULK: 2}
    assert ids(queue.take(3)) == [2]
    assert queue.ready_count() == 0


def test_one_waiting_job_per_scene_and_a_users_edit_replaces_bulk_work(queue):
    assert queue.put(job(1, BULK)) is True
    assert queue.put(job(1, BULK)) is False  # the same scene, waiting: one job
    assert queue.put(job(1)) is True  # a user's edit is not held back behind bulk work: it replaces it
    assert queue.put(job(1)) is False and queue.put(job(1, BULK)) is False
    assert queue.put_many([job(2, BULK), job(2), job(2, BULK)]) == 1  # within one call too
    assert counted(queue) == {**EMPTY, "pending": 2, INTERACTIVE: 2}
    assert [(t.job.scene_id, t.job.priority) for t in queue.take(10)] == [(1, INTERACTIVE), (2, INTERACTIVE)]
    assert queue.put(job(1)) is True  # taken: a new event is a new job


def test_ack_finishes_a_job(queue):
    queue.put_many([job(1), job(2)])
    first, second = queue.take(2)
    queue.ack(first)
    assert counted(queue) == {**EMPTY, "pending": 1, "in_flight": 1, INTERACTIVE: 1}
    queue.ack(second)
    assert counted(queue) == EMPTY and queue.take(10) == []


def test_a_retry_is_parked_until_due_and_counted(queue, clock):
    queue.put(job(1))
    [item] = queue.take(1)
    retried = item.job.retry(NOW + 30, RuntimeError("Plex timed out"))
    queue.retry_later(item, retried)
    assert queue.next_due() == NOW + 30 and queue.parked_count() == 1
    assert counted(queue) == {**EMPTY, "pending": 1, "retrying": 1, "next_retry_at": NOW + 30, INTERACTIVE: 1}
    assert queue.put(job(1)) is False  # a new edit of the scene collapses into the waiting retry
    assert queue.take(10) == [] and queue.parked_count() == 1
    clock.now = NOW + 30
    [again] = queue.take(10)
    assert again.job == retried and again.pqid == item.pqid
    queue.ack(again)
    assert queue.parked_count() == 0


def test_a_newer_job_supersedes_a_parked_one_of_the_same_scene(queue, clock):
    queue.put(job(1, BULK))
    [item] = queue.take(1)
    queue.retry_later(item, item.job.retry(NOW + 5, RuntimeError("x")))
    assert queue.put(job(1)) is True  # before the retry is marked as waiting again
    clock.now = NOW + 5
    [newer] = queue.take(10)
    assert (newer.job.priority, newer.job.attempt) == (INTERACTIVE, 0)
    assert queue.parked_count() == 0 and counted(queue)["pending"] == 1  # the retry left the queue


def test_one_job_per_scene_in_a_take_and_the_users_edit_is_kept(put_queue, clock):
    queue = put_queue
    queue.put(job(1, BULK, next_attempt_at=NOW + 10))
    assert queue.take(10) == []  # parked until due, still the scene's waiting job
    assert queue.put(job(1)) is True  # a user's edit is not held back behind it
    clock.now = NOW + 10
    [kept] = queue.take(10)
    assert kept.job.priority == INTERACTIVE
    assert counted(queue) == {**EMPTY, "pending": 1, "in_flight": 1, INTERACTIVE: 1}  # the bulk one was acked


def test_early_takes_parked_jobs_before_they_are_due(queue):
    queue.put_many([job(1), job(2)])
    for item in queue.take(2):
        queue.retry_later(item, item.job.retry(NOW + 60 * item.job.scene_id, RuntimeError("x")))
    assert queue.take(10) == []
    assert ids(queue.take(10, early=lambda item: item.job.scene_id == 2)) == [2]
    assert queue.next_due() == NOW + 60 and queue.parked_count() == 1


def test_postpone_parks_without_touching_the_job(queue, clock):
    queue.put(job(1))
    [item] = queue.take(1)
    queue.postpone(item, NOW + 5)
    assert queue.take(1) == [] and queue.next_due() == NOW + 5
    assert counted(queue) == {**EMPTY, "pending": 1, "in_flight": 1, INTERACTIVE: 1}
    clock.now = NOW + 5
    [back] = queue.take(1)
    assert back.job == job(1) and back.job.attempt == 0


def test_a_job_put_with_a_future_attempt_time_waits_for_it(put_queue, clock):
    queue = put_queue
    queue.put(job(1, next_attempt_at=NOW + 10))
    assert queue.take(1) == [] and queue.next_due() == NOW + 10
    clock.now = NOW + 10
    assert ids(queue.take(1)) == [1]


def test_take_honours_the_limit_across_parked_and_new_jobs(queue, clock):
    queue.put_many([job(1), job(2)])
    for item in queue.take(2):
        queue.retry_later(item, item.job.retry(NOW + 1, RuntimeError("x")))
    queue.put_many([job(3), job(4, BULK)])
    clock.now = NOW + 1
    assert ids(queue.take(3)) == [1, 2, 3]  # due retries first
    assert ids(queue.take(3)) == [4]


def test_the_waiting_job_of_one_scene(queue):
    assert queue.waiting_job(1) is None
    queue.put_many([job(2), job(1, BULK)])
    assert queue.waiting_job(1) == job(1, BULK)
    [first, second] = queue.take(2)
    retried = second.job.retry(NOW + 9, RuntimeError("x"))
    queue.retry_later(second, retried)
    assert queue.waiting_job(1) == retried  # in flight or waiting for a retry: still not done
    queue.ack(first)
    assert queue.waiting_job(2) is None


def test_one_event_per_entity_expanded_step_by_step(queue):
    renamed = EntityEvent("tag", 5, "Tag.Update.Post", NOW)
    assert queue.put_entity_events([renamed, EntityEvent("performer", 9, "Performer.Destroy.Post", NOW + 1)]) == 2
    assert queue.ready_count() == 2
    assert counted(queue) == {**EMPTY, "pending": 2, "entity_events": 2}
    queue.advance_entity_event(renamed, after_scene=40, finished=False)
    assert queue.entity_events()[0] == EntityEvent("tag", 5, "Tag.Update.Post", NOW, after_scene=40)
    again = EntityEvent("tag", 5, "Tag.Merge.Post", NOW + 2)
    queue.put_entity_events([again])  # a newer event for the same tag starts its expansion over
    queue.advance_entity_event(renamed, after_scene=80, finished=True)  # the old one's progress no longer counts
    assert [(e.kind, e.event, e.after_scene) for e in queue.entity_events()] == [
        ("performer", "Performer.Destroy.Post", 0),
        ("tag", "Tag.Merge.Post", 0),
    ]
    queue.advance_entity_event(again, after_scene=0, finished=True)
    assert [e.kind for e in queue.entity_events()] == ["performer"]


def test_an_image_only_change_never_hides_the_change_it_lands_on(queue):
    """With performer_photos off an image-only event is dropped: a rename waiting under it
    must keep its name (and one that comes later replaces it as any newer event does)."""
    from sync_queue.spool import IMAGE_ONLY

    queue.put_entity_events([EntityEvent("performer", 9, "Performer.Update.Post", NOW)])
    queue.put_entity_events([EntityEvent("performer", 9, "Performer.Update.Post" + IMAGE_ONLY, NOW + 1)])
    assert [(e.event, e.queued_at) for e in queue.entity_events()] == [("Performer.Update.Post", NOW + 1)]
    queue.put_entity_events([EntityEvent("performer", 7, "Performer.Update.Post" + IMAGE_ONLY, NOW + 2)])
    queue.put_entity_events([EntityEvent("performer", 7, "Performer.Update.Post", NOW + 3)])
    assert [e.event for e in queue.entity_events()] == ["Performer.Update.Post", "Performer.Update.Post"]


def test_clear_drops_what_is_not_done(queue):
    queue.put_many([job(1), job(2, BULK), job(3, BULK)])
    queue.put_entity_events([EntityEvent("studio", 3, "Studio.Update.Post", NOW)])
    queue.ack(queue.take(1)[0])
    assert queue.clear() == 3
    assert counted(queue) == EMPTY and queue.take(10) == []
    assert queue.put(job(2, BULK)) is True  # cleared scenes may be queued again


# -- the file outlives the object --------------------------------------------------------------
def _two_taken_and_the_first_retried(tmp_path, clock) -> Job:
    """Jobs of scenes 1 and 2 put and taken, the first to be retried at NOW + 30, the drainer
    gone without acking either: the retried job."""
    producer = JobQueue(tmp_path / "queue", clock=clock)
    producer.put_many([job(1), job(2, BULK)])
    producer.close()
    consumer = JobQueue(tmp_path / "queue", consumer=True, clock=clock)
    first, _ = consumer.take(2)
    retried = first.job.retry(NOW + 30, RuntimeError("x"))
    consumer.retry_later(first, retried)
    consumer.close()  # as if the drainer died: nothing acked
    return retried


def test_jobs_and_their_retry_state_survive_reopening(tmp_path, clock):
    _two_taken_and_the_first_retried(tmp_path, clock)
    look = JobQueue(tmp_path / "queue", clock=clock)  # the drainer's last look: a producer
    assert look.pending() == 2 and not look.store.opened()  # persist-queue's tables stay closed
    look.close()
    again = JobQueue(tmp_path / "queue", consumer=True, clock=clock)
    assert counted(again)["pending"] == 2
    assert ids(again.take(10)) == [2]  # the retry came back parked, with its due time intact
    assert again.next_due() == NOW + 30
    again.close()


def test_a_lingering_drainers_look_for_work_is_one_statement(tmp_path, clock):
    queue = JobQueue(tmp_path / "queue", consumer=True, clock=clock)
    queue.put_many([job(1), job(2, BULK), job(3)])
    queue.put_entity_events([EntityEvent("tag", 4, "Tag.Update.Post", NOW)])
    assert ids(queue.take(1)) == [1]  # in flight: not ready
    statements: list[str] = []
    queue.store.side().set_trace_callback(statements.append)
    assert queue.ready_count() == 3 and len(statements) == 1, statements
    queue.close()


def test_parked_jobs_come_back_soonest_first_early_ones_on_request_dropped_ones_never():
    from sync_queue.job import Taken
    from sync_queue.queue import Parked

    def taken(pqid: int) -> Taken:
        return Taken(job=Job(scene_id=pqid), pqid=pqid, table=BULK)

    parked = Parked()
    for pqid, until in ((1, 30.0), (2, 10.0), (3, 20.0), (4, 10.0), (5, 40.0)):
        parked.park(taken(pqid), until)
    parked.drop(taken(3))
    assert parked.next_at() == 10.0 and len(parked) == 5  # a drop is applied on the next read
    assert [t.pqid for t in parked.due(now=25.0, limit=10)] == [2, 4]  # ties in parking order; 3 dropped
    assert [t.pqid for t in parked.due(now=25.0, limit=1, early=lambda t: t.pqid == 5)] == [5]
    assert [t.pqid for t in parked] == [1] and parked.next_at() == 30.0
    parked.clear()
    assert parked.due(now=99.0, limit=10) == [] and parked.next_at() is None


# -- jobs stored by earlier versions ---------------------------------------------------------
OLD_KEYS = {"event": "Scene.Update.Post", "fields": ["title", "tag_ids"]}  # stored until they went unread


def _as_earlier_versions_stored(path) -> int:
    """Every job stored in the SQLite file at ``path`` rewritten as earlier versions stored it
    (with ``event`` and ``fields``), whatever table and column holds it; how many."""
    import json
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    rewritten = 0
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        for rowid, *cells in conn.execute(f"SELECT rowid, * FROM {table}").fetchall():
            for column, cell in zip(columns, cells):
                try:
                    stored = json.loads(cell)
                except (TypeError, ValueError):
                    continue
                if isinstance(stored, dict) and "scene_id" in stored and stored.get("v") == 1:
                    text = json.dumps({**stored, **OLD_KEYS})
                    value = text.encode() if isinstance(cell, bytes) else text
                    conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, rowid))
                    rewritten += 1
    conn.close()
    return rewritten


def test_a_stored_job_of_an_earlier_version_loads_without_its_event_and_fields():
    old = {**job(3, BULK, attempt=2, next_attempt_at=NOW + 60).to_dict(), **OLD_KEYS}
    assert Job.from_dict(old) == job(3, BULK, attempt=2, next_attempt_at=NOW + 60)
    assert "event" not in job(3).to_dict() and "fields" not in job(3).to_dict()


def test_jobs_and_dead_letters_queued_by_an_earlier_version_still_load(tmp_path, clock):
    from sync_queue.dlq import DeadLetterQueue

    retried = _two_taken_and_the_first_retried(tmp_path, clock)
    dlq = DeadLetterQueue(tmp_path)
    dlq.add(job(9, attempt=5), "PlexNotFound", "gone")
    dlq.close()
    assert _as_earlier_versions_stored(tmp_path / "queue" / "data.db") >= 2
    assert _as_earlier_versions_stored(tmp_path / "state.db") == 1
    again = JobQueue(tmp_path / "queue", consumer=True, clock=clock)
    assert [t.job for t in again.take(10)] == [job(2, BULK)]
    clock.now = NOW + 30
    assert [t.job for t in again.take(10)] == [retried]
    again.close()
    dlq = DeadLetterQueue(tmp_path)
    assert dlq.jobs() == ([job(9, attempt=5)], [])
    dlq.close()
