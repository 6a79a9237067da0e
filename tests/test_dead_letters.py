"""Dead letters queued again (sync_queue/dlq.py ``requeue``): the one step behind the task
'Retry dead-letter queue', the page's Retry and Sync, a pin and the inbox's recheck, run
against the queue with a fixed clock."""

from __future__ import annotations

import sqlite3

import pytest

from sync_queue.dlq import DeadLetterQueue, Requeued
from sync_queue.job import BULK, INTERACTIVE, Job
from sync_queue.queue import JobQueue

NOW = 1_800_000_000.0


@pytest.fixture
def queue(tmp_path):
    q = JobQueue(tmp_path / "queue", consumer=True, clock=lambda: NOW)
    yield q
    q.close()


@pytest.fixture
def dlq(tmp_path):
    failed_at = iter([NOW - 30, NOW - 20, NOW - 10])
    store = DeadLetterQueue(tmp_path, clock=lambda: next(failed_at))
    tired = Job(scene_id=1, priority=BULK, attempt=4, next_attempt_at=NOW + 60, last_error="gone")
    store.add(tired, "PlexNotFound", "not in Plex")
    store.add(Job(scene_id=2, attempt=2, scan_requested=True, not_found_since=NOW - 99), "AmbiguousMatch", "two")
    yield store
    store.close()


def taken(queue) -> list[Job]:
    return [item.job for item in queue.take(10)]


def test_every_entry_goes_back_with_a_fresh_budget_and_leaves_the_dlq(queue, dlq):
    assert dlq.requeue(queue, None, INTERACTIVE, NOW) == Requeued(dead=[1, 2], added=2, rebuilt=[])
    assert taken(queue) == [
        Job(scene_id=1, priority=INTERACTIVE, enqueued_at=NOW),
        Job(scene_id=2, priority=INTERACTIVE, enqueued_at=NOW),
    ]
    assert dlq.count() == 0


def test_an_unreadable_entry_is_rebuilt_from_its_scene_id(queue, dlq, tmp_path):
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("INSERT INTO dlq VALUES (7, '{not json', 'X', 'm', 1, ?, NULL)", (NOW,))
    assert dlq.requeue(queue, None, BULK, NOW) == Requeued(dead=[1, 2, 7], added=3, rebuilt=[7])
    assert [(j.scene_id, j.priority, j.attempt) for j in taken(queue)] == [(1, BULK, 0), (2, BULK, 0), (7, BULK, 0)]


def test_named_scenes_a_dead_one_retried_another_queued_anew(queue, dlq):
    assert dlq.requeue(queue, [2, 9], INTERACTIVE, NOW) == Requeued(dead=[2], added=2, rebuilt=[])
    assert taken(queue) == [
        Job(scene_id=2, priority=INTERACTIVE, enqueued_at=NOW),
        Job(scene_id=9, priority=INTERACTIVE, enqueued_at=NOW),
    ]
    assert [e["scene_id"] for e in dlq.entries()] == [1]


def test_a_scene_already_waiting_collapses_and_still_leaves_the_dlq(queue, dlq):
    queue.put(Job(scene_id=1, priority=INTERACTIVE, enqueued_at=NOW - 5))
    assert dlq.requeue(queue, [1], INTERACTIVE, NOW) == Requeued(dead=[1], added=0, rebuilt=[])
    assert [j.scene_id for j in taken(queue)] == [1] and dlq.count() == 1  # scene 2 stays


class RefusingQueue(JobQueue):
    def put_many(self, jobs):
        raise OSError(28, "No space left on device")


def test_the_queue_is_written_before_the_entries_go(dlq, tmp_path):
    with pytest.raises(OSError):
        dlq.requeue(RefusingQueue(tmp_path / "queue"), None, INTERACTIVE, NOW)
    assert [e["scene_id"] for e in dlq.entries()] == [2, 1]  # nothing lost
