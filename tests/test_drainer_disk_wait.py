"""The drainer waiting for its disk (app/drainer.py ``_disk_back``) holds its lock from the
run the disk stopped to its next try, and leaves no hook's line without a drainer: a hook
that finds the lock held only nudges, so the drainer looks once more after letting go of it."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest

from app import drainer
from app.root import App
from core.log import Redactor, StashLog
from core.platform import HeldLock, is_locked
from sync_queue import health, spool
from sync_queue.queue import JobQueue
from validation.plugin_input import ServerConnection


class _HookRightAfterTheLook:
    """The queue as ``_disk_back`` reads it; a hook appends its line right after the first look."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir, self.queue, self.looks = data_dir, JobQueue(data_dir / spool.QUEUE_FOLDER), 0

    def pending(self) -> int:
        found = self.queue.pending()
        self.looks += 1
        if self.looks == 1:
            spool.put(str(self.data_dir), spool.scene_record(4, "interactive", "Scene.Update.Post", (), 0.0))
        return found


class _App:
    """What ``_disk_back`` reads of the App: its lock, its queue, a task's handover request."""

    def __init__(self, data_dir: Path) -> None:
        self.lock_path = data_dir / spool.LOCK_FILE
        self.queue = _HookRightAfterTheLook(data_dir)

    def producer_queue(self) -> _HookRightAfterTheLook:
        return self.queue

    def handover_requested(self) -> bool:
        return self.handover

    handover = False
    work_waits, let_go = App.work_waits, App.let_go  # the real look (and let go) over this queue


def _held(app: _App) -> HeldLock:
    lock = HeldLock(app.lock_path)
    assert lock.acquire()
    return lock


def test_a_line_written_while_the_drainer_lets_go_is_drained(tmp_path):
    app = _App(tmp_path)
    log = StashLog(io.StringIO(), Redactor(), plain=True)
    lock = _held(app)
    assert drainer._disk_back(app, log, lock, 0) is True  # type: ignore[arg-type]
    assert not is_locked(app.lock_path)  # it let go before its second look
    assert app.queue.queue.pending() == 1
    app.queue.queue.close()


def test_the_drainer_waits_for_the_disk_holding_its_lock_until_a_task_asks(tmp_path, monkeypatch):
    """A look at the lock from anywhere (a hook, this test) sees it held for the whole wait."""
    monkeypatch.setattr(drainer, "probe_wait", lambda failures: 0.0)
    app = _App(tmp_path)
    app.queue.looks = 1  # a line waits already
    spool.put(str(tmp_path), spool.scene_record(4, "interactive", "Scene.Update.Post", (), 0.0))
    log = StashLog(io.StringIO(), Redactor(), plain=True)
    lock = _held(app)
    assert drainer._disk_back(app, log, lock, 0) is True  # type: ignore[arg-type]
    assert is_locked(app.lock_path)  # kept for the next try
    app.handover = True
    assert drainer._disk_back(app, log, lock, 1) is False  # type: ignore[arg-type]
    assert not is_locked(app.lock_path)  # the task goes first
    app.queue.queue.close()


def test_a_run_the_disk_stopped_leaves_the_drainer_holding_its_lock(plugin, monkeypatch):
    """The run stops on a full disk, records why, and hands the wait its lock: no moment
    without it, in which a hook would start a second drainer (the first then gives up) and
    a look would find no drainer waiting."""
    from app.root import App

    def full(queue_dir: str) -> str:
        raise OSError(errno.ENOSPC, "No space left on device", spool.spool_path(queue_dir))

    monkeypatch.setattr(spool, "take", full)
    log = StashLog(io.StringIO(), Redactor(), plain=True)
    app = App(ServerConnection.model_validate(plugin.connection), plugin.env, log, data_dir=plugin.data_dir)
    lock = HeldLock(app.lock_path)
    try:
        assert lock.acquire()
        assert drainer.drain_once(app, log, lock) == drainer.DISK_WAIT
        assert "is full" in health.read(plugin.data_dir)["failing"]["reason"]
        assert is_locked(app.lock_path), "let go between the run and the wait"
    finally:
        lock.release()
        app.close()


def test_an_error_of_the_watching_thread_lets_the_jobs_in_flight_settle_before_the_lock_goes(tmp_path, monkeypatch):
    """A look at a task's request failing mid-run (too many open files): the drainer's lock is
    let go only once its worker has stopped, never while a sync is still in flight (a hook
    would start a second drainer, which would take the in-flight jobs again)."""
    seen: dict = {}

    def in_flight(app, lock, stop, outcome) -> None:  # the worker, a sync in flight until told to stop
        seen["stopped"] = stop.wait(5)
        seen["held"] = is_locked(app.lock_path)

    class _Failing(_App):
        def take_over(self, start_drainer: bool) -> None:
            pass

        def nudged_at(self) -> float:
            return 0.0

        def handover_requested(self) -> bool:
            raise OSError(errno.EMFILE, "Too many open files", str(self.lock_path))

        def close(self) -> None:
            self.queue.queue.close()

    monkeypatch.setattr(drainer, "_work", in_flight)
    with pytest.raises(OSError):
        drainer._rounds(lambda: _Failing(tmp_path), StashLog(io.StringIO(), Redactor(), plain=True))  # type: ignore[arg-type,return-value]
    assert seen == {"stopped": True, "held": True}
