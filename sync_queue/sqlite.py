"""Opening our own SQLite files safely (DLQ, ledger, the queue's side tables).

* WAL mode and a 10 s busy timeout: several processes (hooks, the drainer, tasks)
  use the same files, and "database is locked" must never reach the user.
* ``immediate`` transactions for writes, retried a bounded number of times by
  tenacity when SQLite still reports the database locked or busy.
* A file that is not a database, or is corrupt, raises :class:`DataFileError`
  naming the file and what to do. It is never deleted or recreated. Corruption
  inside a table is only seen when a query reaches it, so every statement and
  fetch on our connections translates it (``_Connection``/``_Cursor``), and the
  queue wraps persist-queue's calls in :func:`corruption_named`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from core.errors import DataFileError

BUSY_TIMEOUT_S = 10.0


def _is_locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


retry_locked = retry(
    retry=retry_if_exception(_is_locked),
    stop=stop_after_attempt(6),
    wait=wait_random_exponential(multiplier=0.05, max=2.0),
    reraise=True,
)


def data_file_error(path: Path, exc: BaseException) -> DataFileError:
    return DataFileError(
        f"{path} cannot be read ({exc}). Stash2Plex left it untouched. Stop Stash, move the "
        f"file (and any {path.name}-wal / {path.name}-shm beside it) to a backup folder, then "
        "run the 'Sync all scenes' task to rebuild what it held."
    )


def is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB surface as a bare DatabaseError (locked, full,
    missing table... are OperationalError and friends)."""
    return type(exc) is sqlite3.DatabaseError


@contextlib.contextmanager
def corruption_named(path: Path) -> Iterator[None]:
    """Turn a corrupt-file error raised inside the block into DataFileError naming ``path``."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            raise data_file_error(path, exc) from None
        raise


class _Cursor(sqlite3.Cursor):
    @property
    def s2p_path(self) -> Path:
        return cast(_Connection, self.connection).s2p_path

    def execute(self, *args):
        with corruption_named(self.s2p_path):
            return super().execute(*args)

    def executemany(self, *args):
        with corruption_named(self.s2p_path):
            return super().executemany(*args)

    def fetchone(self):
        with corruption_named(self.s2p_path):
            return super().fetchone()

    def fetchall(self):
        with corruption_named(self.s2p_path):
            return super().fetchall()


class _Connection(sqlite3.Connection):
    """A connection whose statements name the file when it turns out to be corrupt."""

    s2p_path: Path

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, *args):  # the C shortcut would bypass ``cursor()``
        return self.cursor().execute(*args)

    def executemany(self, *args):
        return self.cursor().executemany(*args)

    def executescript(self, script):
        with corruption_named(self.s2p_path):
            return super().executescript(script)


@retry_locked
def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False, factory=_Connection
    )
    conn.s2p_path = path
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA schema_version").fetchone()
    except (sqlite3.DatabaseError, DataFileError):
        conn.close()
        raise
    return conn


def connect(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating if absent) the database at ``path`` and apply ``schema``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = _open(path)
        _apply_schema(conn, schema)
    except sqlite3.DatabaseError as exc:
        if _is_locked(exc):
            raise
        raise data_file_error(path, exc) from None
    return conn


@retry_locked
def _apply_schema(conn: sqlite3.Connection, schema: str) -> None:
    conn.executescript(schema)


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction (callers wrap it in ``retry_locked``)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Store:
    """One SQLite file of ours, opened on first use, safe to share between threads.

    Subclasses set ``FILE`` and ``SCHEMA``. The worker's Plex threads use a store
    concurrently; one sqlite3 connection must not run two transactions at once, so
    every use goes through ``self._lock``.
    """

    FILE = ""
    SCHEMA = ""

    def __init__(self, directory: Path, clock=time.time) -> None:
        self.path = directory / self.FILE
        self.clock = clock
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.path, self.SCHEMA)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
