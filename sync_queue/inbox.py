"""What a hook hands the drainer: a row in the inbox, a nudge, and the drainer's lock.

The fast lane (hooks/fast.py) writes its job as one row of ``s2p_inbox`` (in the queue's
``data.db``) with ``sqlite3`` alone, committed (WAL) before the hook replies. One row per scene,
under the queue's rule: a newer event collapses into it, a user's edit replaces a scan's.
``JobQueue`` moves the rows in (:func:`rows`, then :func:`forget`): it puts them first, then
deletes each moved row unless a newer event replaced it, so a crash in between moves a row
twice, never loses one. Standard library only.
"""

from __future__ import annotations

import os
import sqlite3

from sync_queue.priority import BULK, INTERACTIVE

LOCK_FILE = "drainer.lock"  # held by the one consumer for its life (core/platform.py)
NUDGE_FILE = "drainer.nudge"  # touched by a hook: something happened (the drainer compares settings)
QUEUE_FOLDER, QUEUE_FILE = "queue", "data.db"
MOVE_BATCH = 5000
BUSY_TIMEOUT_S = 10.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS s2p_inbox (
    scene_id INTEGER PRIMARY KEY,
    priority TEXT NOT NULL,
    event TEXT NOT NULL,
    fields TEXT NOT NULL,
    queued_at REAL NOT NULL
);
"""
_PUT = (
    "INSERT INTO s2p_inbox VALUES (?, ?, ?, ?, ?) ON CONFLICT (scene_id) DO UPDATE SET "
    "priority = excluded.priority, event = excluded.event, fields = excluded.fields, "
    f"queued_at = excluded.queued_at WHERE s2p_inbox.priority = '{BULK}' AND excluded.priority = '{INTERACTIVE}'"
)
Row = tuple  # (scene_id, priority, event, fields joined by ",", queued_at)


def queue_path(data_dir: str) -> str:
    return os.path.join(data_dir, QUEUE_FOLDER, QUEUE_FILE)


def nudge(data_dir: str) -> None:
    """Tell a running drainer that something happened (best effort: it also looks by itself)."""
    try:
        with open(os.path.join(data_dir, NUDGE_FILE), "a"):
            pass
        os.utime(os.path.join(data_dir, NUDGE_FILE))
    except OSError:
        pass


def put(path: str, scene_id: int, priority: str, event: str, fields: tuple[str, ...], queued_at: float) -> bool | None:
    """Write a scene's job to the inbox of the queue file at ``path``: True when added (or a
    scan's row replaced), False when it collapsed into the scene's row; None when the file
    does not exist yet (the full lane creates it, owner-only, with the queue's tables).
    SQLite's errors are raised: the caller hands the event to the full lane."""
    if not os.path.isfile(path):
        return None
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=NORMAL")  # the file is WAL (the queue made it so)
        conn.execute(SCHEMA)
        return put_on(conn, scene_id, priority, event, fields, queued_at)
    finally:
        conn.close()


def put_on(
    conn: sqlite3.Connection, scene_id: int, priority: str, event: str, fields: tuple[str, ...], queued_at: float
) -> bool:
    """:func:`put` on an open connection (the full lane's, sync_queue/sqlite.py)."""
    cursor = conn.execute(_PUT, (scene_id, priority, event, ",".join(fields), queued_at))
    return cursor.rowcount > 0


def rows(conn: sqlite3.Connection, limit: int = MOVE_BATCH) -> list[Row]:
    """The oldest rows, up to ``limit``."""
    found = conn.execute(
        "SELECT scene_id, priority, event, fields, queued_at FROM s2p_inbox ORDER BY queued_at LIMIT ?", (limit,)
    )
    return found.fetchall()


def forget(conn: sqlite3.Connection, moved: list[Row]) -> None:
    """Delete the rows moved into the queue that are still as they were (one a newer event
    replaced meanwhile stays for the next move). The caller holds a write transaction."""
    conn.executemany(
        "DELETE FROM s2p_inbox WHERE scene_id = ? AND priority = ? AND queued_at = ?",
        [(row[0], row[1], row[4]) for row in moved],
    )


def count(conn: sqlite3.Connection, priority: str | None = None) -> int:
    if priority is None:
        return conn.execute("SELECT COUNT(*) FROM s2p_inbox").fetchone()[0]
    return conn.execute("SELECT COUNT(*) FROM s2p_inbox WHERE priority = ?", (priority,)).fetchone()[0]


def waiting(conn: sqlite3.Connection, scene_id: int) -> Row | None:
    found = conn.execute(
        "SELECT scene_id, priority, event, fields, queued_at FROM s2p_inbox WHERE scene_id = ?", (scene_id,)
    )
    return found.fetchone()


def clear(conn: sqlite3.Connection) -> int:
    return conn.execute("DELETE FROM s2p_inbox").rowcount
