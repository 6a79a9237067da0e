"""The public Stash2Plex plugin's waiting jobs and dead letters, taken over once and never changed.

The public plugin (github.com/trek-e/Stash2Plex, v1.6.x) has the same plugin id and data
folder: its jobs are rows of persist-queue's default table (``ack_queue_default`` in
``queue/data.db``, each a pickled dict with ``scene_id``) and its dead letters rows of
``dead_letters`` in ``dlq.db``. Its waiting rows become our jobs (a sync reads the scene
afresh, so the scene id is all a job needs), its dead letters our entries with their reason.
Its tables are only read, so going back to it keeps working; how far they were taken over
(the last row id of each) is kept in the ledger, so a row it writes later is taken over too.

Pickle is never run: a row is read by an unpickler that builds plain values only (it refuses
every class); a row it cannot read gives its scene id from the pickle's opcodes read as data
(``pickletools``), else it is counted as unreadable.
"""

from __future__ import annotations

import calendar
import contextlib
import io
import pickle
import pickletools
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sync_queue import pq_insides, spool, sqlite
from sync_queue.job import INTERACTIVE, Job

if TYPE_CHECKING:
    from sync_queue.dlq import DeadLetterQueue
    from sync_queue.ledger import Ledger
    from sync_queue.queue import JobQueue

ORIGIN = "the public Stash2Plex plugin"
QUEUE_NAME = "default"  # persist-queue's table name when none is given (its QueueManager gives none)
DEAD_FILE, DEAD_TABLE = "dlq.db", "dead_letters"  # (our own dead letters were kept in dlq.db too before state.db)
MAX_ATTEMPTS = 1_000_000  # a retry count beyond any real one is a damaged row's (2**63-1 + 1 fits no table)
HEALTH_KEY = "predecessor_taken"  # sync_health.json: the line, until a hook said it (sync_queue/health.py NOTICES)
MARK = "predecessor_taken"  # ledger meta: {"queue": last row id, "dead": last row id, "line": what was said}


@dataclass
class Found:
    """What the predecessor's tables hold beyond the rows taken over before."""

    jobs: list[Job] = field(default_factory=list)
    by_id_only: int = 0  # rows whose scene id came from the opcodes (the rest unreadable)
    unreadable: int = 0
    dead: list[tuple[Job, str, str, int, float]] = field(default_factory=list)  # job, class, reason, attempts, at
    last_queue: int = 0
    last_dead: int = 0

    def __bool__(self) -> bool:
        return bool(self.jobs or self.unreadable or self.dead)


def take_over(data_dir: Path, queue: JobQueue, dlq: DeadLetterQueue, ledger: Ledger) -> str | None:
    """Queue the predecessor's waiting jobs and list its dead letters, each once; the line
    that says what was taken over (None when there was nothing new)."""
    mark = ledger.meta(MARK) or {}
    found = find(data_dir, int(mark.get("queue", 0)), int(mark.get("dead", 0)))
    if not found:
        return None
    queue.put_many(found.jobs)
    for job, error_class, reason, attempts, failed_at in found.dead:
        dlq.adopt(job, error_class, reason, attempts, failed_at)
    line = _line(found)
    ledger.set_meta(MARK, {"queue": found.last_queue, "dead": found.last_dead, "line": line, "at": time.time()})
    return line


def _line(found: Found) -> str:
    scenes = len({job.scene_id for job in found.jobs})
    parts = [f"{scenes} waiting scene(s) queued", f"{len(found.dead)} dead letter(s) listed with their reasons"]
    if found.by_id_only:
        parts.append(f"{found.by_id_only} job(s) read by scene id only")
    if found.unreadable:
        parts.append(f"{found.unreadable} job(s) unreadable, left in its queue")
    return f"taken over from {ORIGIN}'s data folder: {', '.join(parts)}; its own files are left as they were"


def present(data_dir: Path) -> bool:
    """Whether the data folder holds the predecessor's tables (a look that creates no file)."""
    for path, is_theirs in (
        (data_dir / spool.QUEUE_FOLDER / spool.QUEUE_FILE, lambda c: pq_insides.has_table(c, QUEUE_NAME)),
        (data_dir / DEAD_FILE, lambda c: sqlite.has_table(c, DEAD_TABLE)),
    ):
        if path.is_file():
            with _reading(path) as conn:
                if is_theirs(conn):
                    return True
    return False


def find(data_dir: Path, after_queue: int = 0, after_dead: int = 0) -> Found:
    """The predecessor's waiting jobs after row ``after_queue`` and dead letters after row
    ``after_dead`` (nothing when its files or tables are absent)."""
    found = Found(last_queue=after_queue, last_dead=after_dead)
    queue_file = data_dir / spool.QUEUE_FOLDER / spool.QUEUE_FILE
    if queue_file.is_file():
        with _reading(queue_file) as conn:
            for _, data in pq_insides.not_done_rows(conn, QUEUE_NAME, after_queue):
                _add_job(found, data)
            found.last_queue = max(after_queue, pq_insides.last_row(conn, QUEUE_NAME))
    dead_file = data_dir / DEAD_FILE
    if dead_file.is_file():
        with _reading(dead_file) as conn:
            if sqlite.has_table(conn, DEAD_TABLE):
                rows = conn.execute(
                    f"SELECT id, scene_id, error_type, error_message, retry_count, failed_at FROM {DEAD_TABLE} "
                    "WHERE id > ? ORDER BY id",
                    (after_dead,),
                ).fetchall()
                for row in rows:
                    _add_dead(found, *row)
                found.last_dead = max([after_dead, *(row[0] for row in rows)])
    return found


def _reading(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A connection that only reads (closed at the end; no schema, no pragma)."""
    return contextlib.closing(sqlite3.connect(str(path), timeout=10.0))


def _add_job(found: Found, data: bytes) -> None:
    record = _plain(data)
    scene_id = _scene_id(record.get("scene_id")) if isinstance(record, dict) else None
    if scene_id is None:
        scene_id = _scene_id_in_opcodes(data)
        if scene_id is None:
            found.unreadable += 1
            return
        found.by_id_only += 1
        record = {}
    found.jobs.append(Job(scene_id=scene_id, priority=INTERACTIVE, enqueued_at=_when(record)))


def _when(record: dict) -> float:
    """The row's ``enqueued_at`` when it is a time up to now, else now (a damaged row's value
    may be any size, NaN, or not a number; compared before ``float`` sees it)."""
    now = time.time()
    value = record.get("enqueued_at")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= now:
        return float(value)
    return now


def _add_dead(found: Found, row_id: int, scene_id: Any, error_type: Any, message: Any, retries: Any, at: Any) -> None:
    sid = _scene_id(scene_id)
    if sid is None:
        found.unreadable += 1
        return
    reason = f"{message or error_type or 'failed'} (dead-lettered by {ORIGIN})"
    attempts = retries + 1 if isinstance(retries, int) and 0 <= retries < MAX_ATTEMPTS else 1
    job = Job(scene_id=sid, priority=INTERACTIVE)
    found.dead.append((job, str(error_type or "Unknown"), reason, attempts, _utc(at)))


def _scene_id(value: Any) -> int | None:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        return value
    return None


def _utc(text: Any) -> float:
    """SQLite's CURRENT_TIMESTAMP (UTC text) as epoch seconds; now when it is not one."""
    try:
        return float(calendar.timegm(time.strptime(str(text), "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return time.time()


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, strings and numbers; refuses every class or function."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain value")


def _plain(data: Any) -> Any:
    try:
        return _PlainUnpickler(io.BytesIO(bytes(data))).load()
    except Exception:  # noqa: BLE001 - any failure of a foreign row means "not readable as plain values"
        return None


def _scene_id_in_opcodes(data: Any) -> int | None:
    """The integer that follows the key ``scene_id`` among the pickle's opcodes (read, never run)."""
    try:
        ops = [arg for _, arg, _ in pickletools.genops(bytes(data)) if arg is not None]  # MEMOIZE has none
    except Exception:  # noqa: BLE001 - a damaged pickle: no scene id
        return None
    for key, value in zip(ops, ops[1:]):
        if key == "scene_id":
            return _scene_id(value)
    return None
