"""The journal of Plex plays written into Stash (in the state database, ``sync_queue/sqlite.py``).

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

from sync_queue import sqlite

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
# The journal before the server was part of its keys: moved in under the server ''.
_LEGACY = (
    (
        "applied",
        "INSERT OR IGNORE INTO plays SELECT '', history_key, scene_id, rating_key, viewed_at, "
        "account_id, written, 0, at FROM old.applied",
    ),
    ("since", "INSERT OR IGNORE INTO marks SELECT '', account_id, viewed_at, floor FROM old.since"),
)
_UNCLAIMED = ("plays", "marks", "pending")


class PlayJournal(sqlite.Store):
    OLD_FILE = "plays.db"
    SCHEMA = _SCHEMA
    LEGACY = _LEGACY

    def claim(self, server: str) -> None:
        """Rows recorded before the server was (``''``) are this server's."""
        if not any(self._one(f"SELECT 1 FROM {t} WHERE server = '' LIMIT 1") for t in _UNCLAIMED):
            return
        with self._writing() as conn:
            for table in _UNCLAIMED:
                conn.execute(f"UPDATE OR IGNORE {table} SET server = ? WHERE server = ''", (server,))

    def applied(self, server: str, history_keys: list[str]) -> set[str]:
        """Which of these history entries of ``server`` were applied already."""
        sql = "SELECT history_key FROM plays WHERE server = ? AND history_key IN ({marks})"
        return {row[0] for row in self._in(sql, history_keys, before=[server])}

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
        with self._writing() as conn:
            conn.execute("INSERT OR IGNORE INTO plays VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*row, self.clock()))
            conn.execute("DELETE FROM pending WHERE server = ? AND history_key = ?", (server, history_key))

    def count_at(self, scene_id: int, viewed_at: int) -> int:
        """How many applied plays of this scene are at this second (any server: one Stash)."""
        sql = "SELECT COUNT(*) FROM plays WHERE scene_id = ? AND viewed_at = ? AND NOT duplicate"
        return int(self._one(sql, (scene_id, viewed_at))[0])

    def viewing_near(self, server: str, rating_key: int, account_id: int, viewed_at: int, within: float) -> bool:
        """Whether a viewing of this item by this account is recorded less than ``within`` seconds
        from ``viewed_at`` (its second rows are not viewings)."""
        row = self._one(
            "SELECT 1 FROM plays WHERE server = ? AND rating_key = ? AND account_id = ? AND NOT duplicate "
            "AND viewed_at > ? AND viewed_at < ? LIMIT 1",
            (server, rating_key, account_id, viewed_at - within, viewed_at + within),
        )
        return row is not None

    def since(self, server: str, account_id: int) -> tuple[int, int] | None:
        """(the newest play read, the floor) for this account; None before its first pass."""
        row = self._one("SELECT viewed_at, floor FROM marks WHERE server = ? AND account_id = ?", (server, account_id))
        return (int(row[0]), int(row[1])) if row else None

    def set_since(self, server: str, account_id: int, viewed_at: int, floor: int) -> None:
        self._write("INSERT OR REPLACE INTO marks VALUES (?, ?, ?, ?)", (server, account_id, viewed_at, floor))

    # -- plays of items no scene is linked to yet --------------------------------------
    def keep(self, server: str, plays: list[tuple[str, int, int, int]]) -> None:
        """Keep these plays (history key, item, viewed at, account) for when their item is linked."""
        now = self.clock()
        with self._writing() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO pending VALUES (?, ?, ?, ?, ?, ?)", [(server, *p, now) for p in plays]
            )

    def pending(self, server: str) -> list[tuple[str, int, int, int]]:
        """The plays kept for their item's link (history key, item, viewed at, account), oldest
        first; those kept over ``PENDING_DAYS`` are dropped."""
        with self._writing() as conn:
            conn.execute("DELETE FROM pending WHERE seen_at < ?", (self.clock() - PENDING_DAYS * 86400,))
            rows = conn.execute(
                "SELECT history_key, rating_key, viewed_at, account_id FROM pending WHERE server = ? "
                "ORDER BY viewed_at",
                (server,),
            ).fetchall()
        return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

    def count(self) -> int:
        return int(self._one("SELECT COUNT(*) FROM plays WHERE NOT duplicate")[0])
