"""The drainer waiting for its disk (app/drainer.py ``_disk_back``) leaves no hook's line
without a drainer: a hook that finds the lock held only nudges, so the drainer looks once
more after letting go of it."""

from __future__ import annotations

import io
from pathlib import Path

from app import drainer
from core.log import Redactor, StashLog
from sync_queue import spool
from sync_queue.queue import JobQueue


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
        return False


def test_a_line_written_while_the_drainer_lets_go_is_drained(tmp_path):
    app = _App(tmp_path)
    log = StashLog(io.StringIO(), Redactor(), plain=True)
    assert drainer._disk_back(app, log, 0) is True  # type: ignore[arg-type]
    assert app.queue.queue.pending() == 1
    app.queue.queue.close()
