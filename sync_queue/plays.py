"""The journal of Plex plays written into Stash (``plays.db``).

Stash's ``sceneAddPlay`` is not idempotent: the same time twice is two plays. So every
Plex watch-history entry applied is recorded here by its ``historyKey`` (Plex's id of
that play), after the Stash write; an entry found here is never applied again. A crash
between the write and this record is caught by the caller's check of the scene's
``play_history`` before writing. ``since`` is how far back, per Plex account, the next
read of Plex's history starts.
"""

from __future__ import annotations

from sync_queue import sqlite

PLAYS_FILE = "plays.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS applied (
    history_key TEXT PRIMARY KEY,
    scene_id INTEGER NOT NULL,
    rating_key INTEGER NOT NULL,
    viewed_at INTEGER NOT NULL,
    account_id INTEGER NOT NULL,
    written INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS since (
    account_id INTEGER PRIMARY KEY,
    viewed_at INTEGER NOT NULL,  -- the newest play read: the next read starts a little before it
    floor INTEGER NOT NULL  -- when import_plays was first on: older plays are the task's
);
"""


class PlayJournal(sqlite.Store):
    FILE = PLAYS_FILE
    SCHEMA = _SCHEMA

    def applied(self, history_keys: list[str]) -> set[str]:
        """Which of these history entries were applied already."""
        found: set[str] = set()
        with self._lock:
            db = self._db()
            for start in range(0, len(history_keys), 500):
                chunk = history_keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(f"SELECT history_key FROM applied WHERE history_key IN ({marks})", chunk)
                found.update(r[0] for r in rows.fetchall())
        return found

    @sqlite.retry_locked
    def record(
        self, history_key: str, scene_id: int, rating_key: int, viewed_at: int, account_id: int, written: bool
    ) -> None:
        """``written``: we added the play (False: Stash had it already, e.g. after a crash)."""
        with self._lock, sqlite.write(self._db()) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO applied VALUES (?, ?, ?, ?, ?, ?, ?)",
                (history_key, scene_id, rating_key, viewed_at, account_id, int(written), self.clock()),
            )

    def count_at(self, scene_id: int, viewed_at: int) -> int:
        """How many applied plays of this scene are at this second."""
        with self._lock:
            row = (
                self._db()
                .execute("SELECT COUNT(*) FROM applied WHERE scene_id = ? AND viewed_at = ?", (scene_id, viewed_at))
                .fetchone()
            )
        return int(row[0])

    def since(self, account_id: int) -> tuple[int, int] | None:
        """(the newest play read, the floor) for this account; None before its first pass."""
        with self._lock:
            row = (
                self._db().execute("SELECT viewed_at, floor FROM since WHERE account_id = ?", (account_id,)).fetchone()
            )
        return (int(row[0]), int(row[1])) if row else None

    @sqlite.retry_locked
    def set_since(self, account_id: int, viewed_at: int, floor: int) -> None:
        with self._lock, sqlite.write(self._db()) as conn:
            conn.execute("INSERT OR REPLACE INTO since VALUES (?, ?, ?)", (account_id, viewed_at, floor))

    def count(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM applied").fetchone()[0])
