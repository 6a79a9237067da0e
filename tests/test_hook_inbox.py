"""The hooks' inbox (sync_queue/inbox.py): one row per scene, moved into the queue by the
consumer, never lost across a crash in between, counted and cleared with the queue."""

from __future__ import annotations

import sqlite3

import pytest

from sync_queue import inbox
from sync_queue.job import BULK, INTERACTIVE, Job
from sync_queue.queue import JobQueue
from tests.runner import REPO, create_context, hook_document

NOW = 1_800_000_000.0


@pytest.fixture
def folder(tmp_path):
    JobQueue(tmp_path).put_hook_job(Job(1, INTERACTIVE, "Scene.Update.Post", ("title",), NOW))  # makes data.db
    return tmp_path


def put(folder, sid: int, priority: str = INTERACTIVE, at: float = NOW, fields=("title",)) -> bool | None:
    return inbox.put(str(folder / "data.db"), sid, priority, "Scene.Update.Post", fields, at)


def inbox_rows(folder) -> list[tuple]:
    with sqlite3.connect(folder / "data.db") as conn:
        return conn.execute("SELECT scene_id, priority, queued_at FROM s2p_inbox ORDER BY scene_id").fetchall()


def test_one_row_per_scene_and_an_edit_replaces_a_scan(folder):
    assert put(folder, 2, BULK, NOW + 1) is True
    assert put(folder, 2, BULK, NOW + 2) is False  # collapses: the older row stays
    assert put(folder, 1, INTERACTIVE, NOW + 3) is False
    assert put(folder, 2, INTERACTIVE, NOW + 4) is True  # a user's edit replaces the scan's row
    assert put(folder, 2, BULK, NOW + 5) is False
    assert inbox_rows(folder) == [(1, INTERACTIVE, NOW), (2, INTERACTIVE, NOW + 4)]


def test_no_queue_file_yet_is_left_to_the_full_lane(tmp_path):
    assert inbox.put(str(tmp_path / "data.db"), 1, INTERACTIVE, "e", (), NOW) is None
    assert not (tmp_path / "data.db").exists()


def test_the_consumer_takes_inbox_rows_as_jobs(folder):
    put(folder, 2, BULK, NOW + 1, fields=())
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    taken = queue.take(10)
    assert [(t.job.scene_id, t.job.priority, t.job.fields, t.job.enqueued_at) for t in taken] == [
        (1, INTERACTIVE, ("title",), NOW),
        (2, BULK, (), NOW + 1),
    ]
    assert inbox_rows(folder) == []
    queue.close()


def test_a_crash_between_put_and_forget_moves_a_row_twice_into_one_job(folder, monkeypatch):
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)

    def crash(rows):
        raise sqlite3.OperationalError("killed")

    monkeypatch.setattr(queue, "_forget_moved", crash)
    with pytest.raises(sqlite3.OperationalError):
        queue.take(10)  # the row is in the queue and still in the inbox
    monkeypatch.undo()
    queue.close()
    again = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in again.take(10)] == [1]  # collapsed into the waiting job
    assert again.take(10) == [] and inbox_rows(folder) == []
    again.close()


def test_a_row_replaced_while_it_moves_stays_for_the_next_take(folder, monkeypatch):
    put(folder, 2, BULK, NOW + 1)
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    put_many = queue.put_many

    def edit_meanwhile(jobs):
        added = put_many(jobs)
        put(folder, 2, INTERACTIVE, NOW + 2)  # a user's edit lands while the scan's row moves
        return added

    monkeypatch.setattr(queue, "put_many", edit_meanwhile)
    first = queue.take(1)
    monkeypatch.undo()
    assert [t.job.scene_id for t in first] == [1]
    assert inbox_rows(folder) == [(2, INTERACTIVE, NOW + 2)]
    second = queue.take(10)
    assert [(t.job.scene_id, t.job.priority) for t in second] == [(2, INTERACTIVE)]  # replaced the scan's job
    assert queue.take(10) == []
    queue.close()


def test_counts_waiting_job_and_clear_see_the_inbox(folder):
    put(folder, 2, BULK, NOW + 1, fields=())
    queue = JobQueue(folder)
    counts = queue.counts()
    assert (counts["pending"], counts[INTERACTIVE], counts[BULK]) == (2, 1, 1)
    assert queue.ready_count() == 2
    assert queue.waiting_job(2) == Job(2, BULK, "Scene.Update.Post", (), NOW + 1)
    assert queue.clear() == 2
    assert queue.counts()["pending"] == 0 and inbox_rows(folder) == []
    queue.close()


def test_a_damaged_inbox_row_is_set_aside_and_the_rest_move(folder):
    with sqlite3.connect(folder / "data.db") as conn:
        conn.execute("INSERT INTO s2p_inbox VALUES (5, 'urgent', 'e', '', 0)")
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in queue.take(10)] == [1]
    assert queue.take_rejected() == [("inbox", 5, "ValueError: not a scene job: scene 5, priority 'urgent'")]
    assert inbox_rows(folder) == []
    queue.close()


# -- a hook's row is one job, whichever lane finishes the hook ---------------------------------
def _run_hook(context: dict, data) -> str:
    """The plugin's entry as Stash runs it (in this process): the reply's output."""
    import io
    import json

    from app import main

    connection = {"Scheme": "http", "Host": "127.0.0.1", "Port": 9, "PluginDir": str(REPO), "Dir": "/stash/config"}
    connection["SessionCookie"] = {"Name": "session", "Value": "cookie-value"}
    out = io.StringIO()
    env = {"STASH2PLEX_DATA_DIR": str(data)}
    assert main.main(io.StringIO(json.dumps(hook_document(connection, context))), out, io.StringIO(), env) == 0
    reply = json.loads(out.getvalue())
    assert reply["error"] is None, reply
    return reply["output"]


@pytest.mark.parametrize("drainer_comes_back", [True, False])
def test_a_hook_that_sees_the_drainer_leave_after_writing_its_row_queues_one_job(
    tmp_path, monkeypatch, drainer_comes_back
):
    """The fast lane writes its row while a drainer holds the lock, then finds the lock
    free: the drainer has finished. That drainer looks once more, sees the row, takes the
    lock again, moves the row and takes its job, all before the hook's full lane runs. The
    full lane used to write the job again: a second row, moved as a second job of the same
    event (the scene synced, or dead-lettered, twice in one run). It only makes sure a
    drainer runs. Without a drainer coming back, the full lane starts one for the row."""
    from app import root
    from core.platform import HeldLock, is_locked
    from hooks import fast

    data = tmp_path / "data"
    spawned: list = []
    monkeypatch.setattr(root, "spawn_detached", lambda *args: spawned.append(args))
    assert _run_hook(create_context(3), data) == "scene 3 queued"  # the full lane: folder, queue file
    assert len(spawned) == 1
    lock = HeldLock(data / inbox.LOCK_FILE)
    assert lock.acquire()  # the drainer that started runs
    drainer = JobQueue(data / "queue", consumer=True, clock=lambda: NOW + 10)
    taken: list = []
    looks: list = []

    def drainer_leaves_as_the_hook_writes(path: str) -> bool:
        looks.append(path)
        if len(looks) == 1:
            return is_locked(path)  # before the write: the drainer runs
        lock.release()  # the drainer's run ends, its lock let go
        free = is_locked(path)
        if drainer_comes_back:  # it looks once more: the row arrived, it drains again
            assert lock.acquire()
            taken.extend(drainer.take(10))
        return free

    monkeypatch.setattr(fast, "is_locked", drainer_leaves_as_the_hook_writes)
    try:
        assert _run_hook(create_context(4), data) == "scene 4 queued"
        assert len(looks) == 2  # the fast lane wrote the row
        if drainer_comes_back:
            assert [t.job.scene_id for t in taken] == [3, 4]
            assert len(spawned) == 1  # the drainer runs: nudged, not started again
        else:
            assert len(spawned) == 2  # no drainer: the full lane started one
            assert lock.acquire()
            taken.extend(drainer.take(10))
            assert [t.job.scene_id for t in taken] == [3, 4]
        assert drainer.take(10) == [] and inbox_rows(data / "queue") == []  # one job for the hook's row
        assert drainer.counts()["pending"] == 2  # both in flight
    finally:
        drainer.close()
        lock.path.write_text("")
        lock.release()
