"""Opening our own SQLite files safely (the state database of ``Store``, the queue's side tables).

WAL and a 10 s busy timeout (hooks, the drainer and tasks share the files); writes in
``immediate`` transactions (:func:`write`), whose ``BEGIN`` is the one statement that waits
for another process's write lock: it alone is tried again a bounded number of times when the
busy timeout ran out (:func:`retry_locked`, also on opening a file). A corrupt file, or one that is not a database, raises
:class:`DataFileError` naming the file and what to do; it is never deleted or recreated.
A full, read-only or forbidden disk is told apart from corruption (SQLite's result code,
then a write probe for the errno). Corruption seen by any later statement is translated
too (``_Connection``/``_Cursor``; persist-queue's calls through :func:`corruption_named`).
"""

from __future__ import annotations

import contextlib
import errno as _errno
import functools
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from core.backoff import LOCKED, next_delay
from core.errors import DataFileError, DiskRefused, Stash2PlexError

BUSY_TIMEOUT_S = 10.0


# SQLite result codes (primary: the low byte of ``sqlite_errorcode``): the cause is
# decided by the code SQLite reports, never by its message text.
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_DISK_CODES = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
}
PROBE_BYTES = 256 * 1024  # written (then deleted) to learn why a folder refuses writes


def error_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc`` (None when it carries none)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and error_code(exc) in _BUSY_CODES


def is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: the file's content is damaged (or not a database)."""
    return isinstance(exc, sqlite3.Error) and error_code(exc) in _CORRUPT_CODES


def is_disk_problem(exc: BaseException) -> bool:
    """The disk or folder refuses: full, read-only, no permission, I/O error."""
    return isinstance(exc, sqlite3.Error) and error_code(exc) in _DISK_CODES


def locked_wait(attempt: int, rng) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): uniform in
    [0, min(2, 0.05 * 2**(attempt-1))] (core/backoff.py's full jitter, policy ``LOCKED``)."""
    return next_delay(attempt - 1, LOCKED, rng)


def retry_locked(func):
    """Call ``func`` again, up to ``LOCKED.max_attempts`` (6) in all with jittered
    exponential waits, while SQLite reports the database locked or busy; any other error,
    or the last, is raised. Not tenacity: a task reading a data file would import it for
    this one policy."""

    @functools.wraps(func)
    def call(*args, **kwargs):
        for attempt in range(1, LOCKED.max_attempts + 1):
            try:
                return func(*args, **kwargs)
            except sqlite3.Error as exc:
                if attempt == LOCKED.max_attempts or not is_locked(exc):
                    raise
                time.sleep(locked_wait(attempt, random))

    return call


def probe_folder(folder: Path) -> int | None:
    """Write and delete a small file in ``folder``; the errno that stops it, or None."""
    probe = folder / f".s2p-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            left = memoryview(b"\0" * PROBE_BYTES)
            while left:  # a short write is how a nearly full disk (or a size limit) starts refusing
                left = left[os.write(fd, left) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc.errno
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def data_file_error(path: Path, exc: BaseException, probe=probe_folder) -> DataFileError:
    """A DataFileError naming the file and the real cause: corruption (then moving the
    file aside is the remedy) or the disk and folder (never advise moving a healthy file)."""
    if is_corrupt(exc) or not isinstance(exc, (sqlite3.Error, OSError)):
        return DataFileError(
            f"{path} cannot be read ({exc}). Stash2Plex left it untouched. Stop Stash, move the "
            f"file (and any {path.name}-wal / {path.name}-shm beside it) to a backup folder, then "
            "run the 'Sync all scenes' task to rebuild what it held."
        )
    errno_ = exc.errno if isinstance(exc, OSError) else None
    if errno_ is None and error_code(exc) != sqlite3.SQLITE_FULL:
        errno_ = probe(path.parent)
    if errno_ is None and error_code(exc) == sqlite3.SQLITE_FULL:
        errno_ = _errno.ENOSPC
    return disk_error(path, errno_, exc)


def disk_error(path: Path, errno_: int | None, exc: BaseException) -> DiskRefused:
    folder = path.parent
    untouched = "The file itself is not damaged and nothing in it was lost; leave it where it is."
    if errno_ in (_errno.ENOSPC, getattr(_errno, "EDQUOT", -1), _errno.EFBIG):
        why = f"the disk holding {folder} is full (or a size limit was reached)"
        remedy = "Free some space there, then run the task again (an edit made meanwhile: edit it again or run 'Sync recent changes')."
    elif errno_ == _errno.EROFS:
        why = f"{folder} is on a read-only file system"
        remedy = "Make it writable again (or set STASH2PLEX_DATA_DIR to a writable folder), then run the task again."
    elif errno_ in (_errno.EACCES, _errno.EPERM):
        why = f"permission denied in {folder}"
        remedy = "Give the user Stash runs as write access to that folder and its files, then run the task again."
    elif errno_ == _errno.EBUSY:
        why = f"another program kept it busy ({exc.strerror if isinstance(exc, OSError) else exc})"
        remedy = (
            "Close what holds it (a backup tool, antivirus), then edit the scene again or run 'Sync recent changes'."
        )
    else:
        why = f"the disk holding {folder} reported an error ({exc})"
        remedy = "Check that disk (space, permissions, health), then run the task again."
    return DiskRefused(f"cannot write {path}: {why}. {untouched} {remedy}")


def misplaced_error(path: Path) -> DataFileError:
    """A data folder another program damaged: a file where one of our folders belongs, or a
    folder where one of our files does (the first of ``path`` and its parents that exists)."""
    culprit = next((p for p in (path, *path.parents) if p.exists()), path)
    what = "a folder where Stash2Plex keeps a file" if culprit.is_dir() else "a file where Stash2Plex keeps a folder"
    return DataFileError(
        f"cannot write {path}: {culprit} is {what}. Stash2Plex left it untouched. Move it to a backup "
        "folder (Stash2Plex makes its own again), then edit the scene again or run 'Sync recent changes'."
    )


# The plugin's own disk refusing for now (``DiskRefused``): full, read-only, forbidden, held.
DISK_ERRNOS = {
    _errno.ENOSPC,
    _errno.EROFS,
    _errno.EACCES,
    _errno.EPERM,
    _errno.EFBIG,
    _errno.EBUSY,
    getattr(_errno, "EDQUOT", -1),
}
# A data folder damaged by another program (:func:`misplaced_error`).
MISPLACED_ERRNOS = {_errno.EEXIST, _errno.ENOTDIR, _errno.EISDIR}


def disk_fault(exc: BaseException) -> DiskRefused | None:
    """The plugin's own disk refusing for now (core/errors.py ``DiskRefused``): a full,
    read-only or forbidden folder, or a data file another program holds past every retry
    (a backup tool, a ``sqlite3`` shell); None for anything else (corruption included)."""
    if isinstance(exc, DiskRefused):
        return exc
    if is_locked(exc):
        return DiskRefused(
            f"a data file stayed locked by another program ({exc}): a backup tool, antivirus or "
            "sqlite3 shell holding it. Nothing was lost; the jobs wait and the drainer tries again."
        )
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS and exc.filename:
        return disk_error(Path(exc.filename), exc.errno, exc)
    return None


def os_error(path: Path, exc: OSError) -> DataFileError:
    """An OSError writing one of our files (breaker.json, a log, the hooks' spool), in the same
    words: the disk refusing (``DiskRefused``), or the data folder damaged."""
    if exc.errno in MISPLACED_ERRNOS:
        return misplaced_error(path)
    return disk_error(path, exc.errno, exc)


def os_fault(exc: BaseException) -> DataFileError | None:
    """An OSError naming one of our files, in words (:func:`os_error`): the disk refusing
    for now, or the data folder damaged (which no wait heals); None for anything else."""
    if isinstance(exc, OSError) and exc.filename and exc.errno in DISK_ERRNOS | MISPLACED_ERRNOS:
        return os_error(Path(exc.filename), exc)
    return None


def in_words(exc: BaseException) -> Stash2PlexError | None:
    """Which errors are ours, told in words, and which are unexpected (a bug of ours, worth
    its traceback): one answer for a hook's or a task's reply, the command line, the drainer
    and a scene's sync. Ours as raised, a data file the disk refused or the data folder
    damaged named with the path and what to do; None when it is unexpected."""
    return disk_fault(exc) or os_fault(exc) or (exc if isinstance(exc, Stash2PlexError) else None)


@contextlib.contextmanager
def corruption_named(path: Path) -> Iterator[None]:
    """Turn a corrupt-file or disk error raised inside the block into a DataFileError naming
    ``path`` and the cause."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc) or is_disk_problem(exc):
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


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the database of ``conn`` holds the table ``name``."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def create_private(path: Path) -> None:
    """Create ``path`` empty and owner-only (0600) unless it exists: our files hold error
    texts and job data. SQLite gives its -wal and -shm files the database file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def _empty_file(path: Path) -> bool:
    """A database file of 0 bytes, nothing in its WAL (SQLite silently treats it as a new, empty database)."""
    wal = Path(f"{path}-wal")
    with contextlib.suppress(OSError):
        return path.stat().st_size == 0 and (not wal.exists() or wal.stat().st_size == 0)
    return False


def connect(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating if absent, owner-only) the database at ``path`` and apply ``schema``."""
    try:
        create_private(path)
    except OSError as exc:
        raise os_error(path, exc) from None
    try:
        conn = _open(path)
        retry_locked(conn.executescript)(schema)
    except sqlite3.DatabaseError as exc:
        if is_locked(exc):
            raise
        raise data_file_error(path, exc) from None
    return conn


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction: the write lock is taken first, so no statement
    inside it waits (WAL); the ``BEGIN`` waits the busy timeout, then is tried again."""
    retry_locked(conn.execute)("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


STATE_FILE = "state.db"  # our records: the ledger, dead letters, statistics and the plays' journal
_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS moved_in (file TEXT PRIMARY KEY, at REAL NOT NULL);  -- an earlier version's file
CREATE TABLE IF NOT EXISTS found_empty (at REAL NOT NULL);  -- the file was 0 bytes, not said yet
"""


def move_in(conn: sqlite3.Connection, old: Path, schema: str, legacy: tuple[tuple[str, str], ...] = ()) -> None:
    """Copy the rows of ``old``, the file an earlier version kept these tables in, into the state
    database once. The copy and its mark (``moved_in``) are one write transaction, so a hook, the
    drainer and ``watch`` opening at the same moment copy it once: the others find the mark.
    ``old`` is only read and stays where it is (the public plugin's dead letters share
    ``dlq.db``). ``legacy``: (a table of an older layout, its ``INSERT … SELECT … FROM old.<table>``)."""
    done = "SELECT 1 FROM moved_in WHERE file = ?"
    if not old.is_file() or conn.execute(done, (old.name,)).fetchone():
        return
    named = cast(_Connection, conn)
    named.s2p_path, state = old, named.s2p_path  # a damaged old file is named in the error
    try:
        conn.execute("ATTACH DATABASE ? AS old", (str(old),))
        try:
            with write(conn):
                if conn.execute(done, (old.name,)).fetchone() is None:
                    _copy_all(conn, schema, legacy)
                    conn.execute("INSERT INTO moved_in VALUES (?, ?)", (old.name, time.time()))
        finally:
            conn.execute("DETACH DATABASE old")
    finally:
        named.s2p_path = state


def _copy_all(conn: sqlite3.Connection, schema: str, legacy: tuple[tuple[str, str], ...]) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM old.sqlite_master WHERE type = 'table'")}
    for table in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", schema):
        if table in tables:
            _copy(conn, table)
    for table, copy in legacy:
        if table in tables:
            conn.execute(copy)


def _copy(conn: sqlite3.Connection, table: str) -> None:
    """The rows of ``old.<table>``, by the columns both layouts have; a row already here wins."""
    ours = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")]
    theirs = {row[1] for row in conn.execute(f"PRAGMA old.table_info({table})")}
    columns = ", ".join(c for c in ours if c in theirs)
    conn.execute(f"INSERT OR IGNORE INTO main.{table} ({columns}) SELECT {columns} FROM old.{table}")


class Store:
    """Some tables of the one state database (``state.db``), opened on first use, safe to
    share between threads.

    Subclasses set ``SCHEMA`` (their tables) and ``OLD_FILE`` (where earlier versions kept
    them: :func:`move_in`). The worker's Plex threads use a store concurrently; one sqlite3
    connection must not run two transactions at once, so every use goes through ``self._lock``.
    """

    OLD_FILE = ""
    SCHEMA = ""
    LEGACY: tuple[tuple[str, str], ...] = ()

    def __init__(self, directory: Path, clock=time.time) -> None:
        self.path = directory / STATE_FILE
        self.clock = clock
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            empty = _empty_file(self.path)
            conn = connect(self.path, _STATE_SCHEMA + self.SCHEMA)
            try:
                move_in(conn, self.path.parent / self.OLD_FILE, self.SCHEMA, self.LEGACY)
                if empty:  # said by the ledger's ``open``, whichever store found it
                    with write(conn):
                        conn.execute("INSERT INTO found_empty VALUES (?)", (self.clock(),))
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._db().execute(sql, args).fetchall()

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._db().execute(sql, args).fetchone()

    def _in(self, sql: str, keys: Sequence[Any], before: Sequence[Any] = ()) -> list[Any]:
        """The rows of ``sql`` (whose ``{marks}`` is an ``IN`` list) for every key, 500 a statement."""
        rows: list[Any] = []
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            rows += self._rows(sql.format(marks=",".join("?" * len(chunk))), [*before, *chunk])
        return rows

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (:func:`write`) under the store's lock."""
        with self._lock, write(self._db()) as conn:
            yield conn

    def _write(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One statement in a write transaction of its own; the rows it changed."""
        with self._writing() as conn:
            return conn.execute(sql, args).rowcount

    def open(self) -> str | None:
        """Open the file now; a sentence worth logging (once) when it was found empty, else None."""
        if self._one("SELECT 1 FROM found_empty") is None:
            return None
        self._write("DELETE FROM found_empty")
        return (
            f"{self.path} was empty (0 bytes; a crash or a full disk while it was first written?): "
            "it starts over as a new, empty file"
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
