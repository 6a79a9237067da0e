"""The journal of Plex plays written into Stash (``plays.db``).

Stash's ``sceneAddPlay`` is not idempotent: the same time twice is two plays. So every
Plex watch-history entry applied is recorded here by its server's ``machineIdentifier`` and
its ``historyKey`` (Plex's id of that play on that server: another server, after a migration
or a new ``plex_url``, counts its own from 1 again), after the Stash write; an entry found
here is never applied again. A crash between the write and this record is caught by the
caller's check of the scene's ``play_history`` before writing. ``since`` is how far back, per
server and Plex account, the next read of Plex's history starts. ``pending``: plays of items
no scene is linked to yet, kept ``PENDING_DAYS`` for when the link appears.

Journals from before the server was recorded hold their rows under the server ``''``; the
first server read claims them (``claim``): it is the one they came from, unless ``plex_url``
was changed in the same upgrade.
"""

from __future__ import annotations

from typing import Any

from sync_queue import sqlite

PLAYS_FILE = "plays.db"
PENDING_DAYS = 30
_SCHEMA = """
CREATE TABLE IF NOT EXISTS plays (
    server TEXT NOT NULL,
    history_key TEXT NOT NULL,
    scene_id INTEGER NOT NULL,
    rating_key INTEGER NOT NULL,
    viewed_at INTEGER NOT NULL,
    account_id INTEGER NOT NULL,
    written INTEGER NOT NULL,
    duplicate INTEGER NOT NULL,  -- 1: a second row of one viewing (nothing written for it)
    at REAL NOT NULL,
    PRIMARY KEY (server, history_key)
);
CREATE INDEX IF NOT EXISTS plays_item ON plays (server, rating_key, account_id, viewed_at);
CREATE TABLE IF NOT EXISTS marks (
    server TEXT NOT NULL,
    account_id INTEGER NOT NULL,
    viewed_at INTEGER NOT NULL,  -- the newest play read: the next read starts a little before it
    floor INTEGER NOT NULL,  -- when import_plays was first on: older plays are the task's
    PRIMARY KEY (server, account_id)
);
CREATE TABLE IF NOT EXISTS pending (
    server TEXT NOT NULL,
    history_key TEXT NOT NULL,
    rating_key INTEGER NOT NULL,
    viewed_at INTEGER NOT NULL,
    account_id INTEGER NOT NULL,
    seen_at REAL NOT NULL,  -- our clock: dropped PENDING_DAYS after
    PRIMARY KEY (server, history_key)
);
"""
# The journal before the server was part of its keys: moved into the tables above under ''.
_LEGACY = (
    (
        "applied",
        "INSERT OR IGNORE INTO plays SELECT '', history_key, scene_id, rating_key, viewed_at, "
        "account_id, written, 0, at FROM applied",
    ),
    ("since", "INSERT OR IGNORE INTO marks SELECT '', account_id, viewed_at, floor FROM since"),
)
_UNCLAIMED = ("plays", "marks", "pending")


class PlayJournal(sqlite.Store):
    FILE = PLAYS_FILE
    SCHEMA = _SCHEMA

    def _db(self) -> Any:
        fresh = self._conn is None
        conn = super()._db()
        if fresh:
            self._migrate(conn)
        return conn

    def _migrate(self, conn: Any) -> None:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        if not names & {old for old, _ in _LEGACY}:
            return
        with sqlite.write(conn):
            for old, copy in _LEGACY:
                if old in names:
                    conn.execute(copy)
                    conn.execute(f"DROP TABLE {old}")

    def claim(self, server: str) -> None:
        """Rows recorded before the server was (``''``) are this server's."""
        with self._lock:
            db = self._db()
            if not any(db.execute(f"SELECT 1 FROM {t} WHERE server = '' LIMIT 1").fetchone() for t in _UNCLAIMED):
                return
            with sqlite.write(db) as conn:
                for table in _UNCLAIMED:
                    conn.execute(f"UPDATE OR IGNORE {table} SET server = ? WHERE server = ''", (server,))

    def applied(self, server: str, history_keys: list[str]) -> set[str]:
        """Which of these history entries of ``server`` were applied already."""
        found: set[str] = set()
        with self._lock:
            db = self._db()
            for start in range(0, len(history_keys), 500):
                chunk = history_keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT history_key FROM plays WHERE server = ? AND history_key IN ({marks})", [server, *chunk]
                )
                found.update(r[0] for r in rows.fetchall())
        return found

    def record(
        self,
        server: str,
        history_key: str,
        scene_id: int,
        rating_key: int,
        viewed_at: int,
        account_id: int,
        written: bool,
        duplicate: bool = False,
    ) -> None:
        """``written``: we added the play (False: Stash had it already, e.g. after a crash);
        ``duplicate``: a second row of a viewing recorded already (nothing written). A pending
        row of the play is done with."""
        row = (server, history_key, scene_id, rating_key, viewed_at, account_id, int(written), int(duplicate))
        with self._lock, sqlite.write(self._db()) as conn:
            conn.execute("INSERT OR IGNORE INTO plays VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*row, self.clock()))
            conn.execute("DELETE FROM pending WHERE server = ? AND history_key = ?", (server, history_key))

    def count_at(self, scene_id: int, viewed_at: int) -> int:
        """How many applied plays of this scene are at this second (any server: one Stash)."""
        with self._lock:
            row = (
                self._db()
                .execute(
                    "SELECT COUNT(*) FROM plays WHERE scene_id = ? AND viewed_at = ? AND NOT duplicate",
                    (scene_id, viewed_at),
                )
                .fetchone()
            )
        return int(row[0])

    def viewing_near(self, server: str, rating_key: int, account_id: int, viewed_at: int, within: float) -> bool:
        """Whether a viewing of this item by this account is recorded less than ``within`` seconds
        from ``viewed_at`` (its second rows are not viewings)."""
        with self._lock:
            row = (
                self._db()
                .execute(
                    "SELECT 1 FROM plays WHERE server = ? AND rating_key = ? AND account_id = ? AND NOT duplicate "
                    "AND viewed_at > ? AND viewed_at < ? LIMIT 1",
                    (server, rating_key, account_id, viewed_at - within, viewed_at + within),
                )
                .fetchone()
            )
        return row is not None

    def since(self, server: str, account_id: int) -> tuple[int, int] | None:
        """(the newest play read, the floor) for this account; None before its first pass."""
        with self._lock:
            row = (
                self._db()
                .execute("SELECT viewed_at, floor FROM marks WHERE server = ? AND account_id = ?", (server, account_id))
                .fetchone()
            )
        return (int(row[0]), int(row[1])) if row else None

    def set_since(self, server: str, account_id: int, viewed_at: int, floor: int) -> None:
        with self._lock, sqlite.write(self._db()) as conn:
            conn.execute("INSERT OR REPLACE INTO marks VALUES (?, ?, ?, ?)", (server, account_id, viewed_at, floor))

    # -- plays of items no scene is linked to yet --------------------------------------
    def keep(self, server: str, plays: list[tuple[str, int, int, int]]) -> None:
        """Keep these plays (history key, item, viewed at, account) for when their item is linked."""
        now = self.clock()
        with self._lock, sqlite.write(self._db()) as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO pending VALUES (?, ?, ?, ?, ?, ?)", [(server, *p, now) for p in plays]
            )

    def pending(self, server: str) -> list[tuple[str, int, int, int]]:
        """The plays kept for their item's link (history key, item, viewed at, account), oldest
        first; those kept over ``PENDING_DAYS`` are dropped."""
        with self._lock, sqlite.write(self._db()) as conn:
            conn.execute("DELETE FROM pending WHERE seen_at < ?", (self.clock() - PENDING_DAYS * 86400,))
            rows = conn.execute(
                "SELECT history_key, rating_key, viewed_at, account_id FROM pending WHERE server = ? "
                "ORDER BY viewed_at",
                (server,),
            ).fetchall()
        return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

    def count(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM plays WHERE NOT duplicate").fetchone()[0])
