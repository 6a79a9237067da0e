"""The job queue on disk (``JobQueue``): the rules (sync_queue/rules.py) over the storage
(sync_queue/storage.py), and the hooks' spool file moved in before each take."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from core.errors import DataFileError
from sync_queue import spool, sqlite
from sync_queue.job import BULK, INTERACTIVE, PRIORITIES, EntityEvent, Job, Taken
from sync_queue.rules import QueueRules
from sync_queue.storage import SQLiteStore


def _spool_item(record: dict[str, Any]) -> Job | EntityEvent:
    """The job or entity event of an spool line (ValueError/TypeError when it is none)."""
    if "entity" in record:
        kind, entity_id = record["entity"], record["id"]
        if not isinstance(kind, str) or not spool.an_id(entity_id):
            raise ValueError(f"not an entity event: {kind!r} {entity_id!r}")
        return EntityEvent(kind, entity_id, str(record["event"]), float(record["at"]))
    scene_id, priority = record["scene"], record["priority"]
    if priority not in PRIORITIES or not spool.an_id(scene_id):
        raise ValueError(f"not a scene job: scene {scene_id!r}, priority {priority!r}")
    return Job(scene_id, priority, float(record["at"]))  # the hook's event and fields are not read


class JobQueue(QueueRules):
    """Durable, prioritised job queue shared by hooks, tasks and the drainer."""

    store: SQLiteStore

    def __init__(self, directory: Path, consumer: bool = False, clock=time.time) -> None:
        super().__init__(SQLiteStore(directory, consumer), consumer, clock)
        self.directory = directory
        self.path = self.store.path
        self._legacy_checked = False

    def close(self) -> None:
        if self._back and self.store.opened():
            with contextlib.suppress(sqlite3.Error, DataFileError):
                self._wait_again()
        super().close()

    def take(self, limit: int, early=None) -> list[Taken]:
        assert self.consumer, "only the drainer lock holder may take jobs"
        self._move_spool()
        return super().take(limit, early)

    def _move_spool(self) -> None:
        """The hooks' spool file into the queue (sync_queue/spool.py): put first, then the
        file deleted, so a crash in between puts a line twice and never loses one. One left
        by an interrupted move goes first; lines written meanwhile wait for the next take."""
        self._move_legacy_spool()
        for _ in range(2):
            taken = spool.take(str(self.directory))
            if taken is None:
                return
            records, bad = spool.read(taken)
            items = self._spool_items(records)
            self.put_many(item for item in items if isinstance(item, Job))
            self.put_entity_events(item for item in items if isinstance(item, EntityEvent))
            self.store.rejected.extend(("inbox", 0, f"not a job: {line!r}") for line in bad)
            spool.moved(taken)

    def _spool_items(self, records: list[dict[str, Any]]) -> list[Job | EntityEvent]:
        """The jobs and entity events of spool lines; a line that is none (a damaged file) is
        set aside, said in the log like an unreadable queue row."""
        items: list[Job | EntityEvent] = []
        for record in records:
            try:
                items.append(_spool_item(record))
            except (KeyError, ValueError, TypeError) as exc:
                self.store.rejected.append(("inbox", 0, f"{type(exc).__name__}: {exc}"))
        return items

    def _move_legacy_spool(self) -> None:
        """Jobs an older version's hooks left in the ``s2p_inbox`` table, moved in once."""
        if self._legacy_checked:
            return
        conn = self.store.side()
        if not sqlite.has_table(conn, "s2p_inbox"):
            self._legacy_checked = True
            return
        rows = conn.execute("SELECT scene_id, priority, queued_at FROM s2p_inbox").fetchall()
        records = [{"scene": r[0], "priority": r[1], "at": r[2]} for r in rows]
        self.put_many(item for item in self._spool_items(records) if isinstance(item, Job))
        conn.execute("DROP TABLE s2p_inbox")
        self._legacy_checked = True

    def waiting_job(self, scene_id: int) -> Job | None:
        job = super().waiting_job(scene_id)
        if job is not None:
            return job
        spool_file = spool.spool_path(str(self.directory))
        for path in (spool_file, spool_file + spool.TAKEN_SUFFIX):
            for record in reversed(spool.read(path)[0]):
                if record.get("scene") == scene_id:
                    item = self._spool_items([record])
                    if item and isinstance(item[0], Job):
                        return item[0]
        return None


__all__ = ["JobQueue", "BULK", "INTERACTIVE", "DataFileError"]
