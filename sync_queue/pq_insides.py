"""Every place we lean on persist-queue's insides (pinned by tests/test_pq_insides.py), one module.

Everything else uses ``SQLiteAckQueue``'s documented API; what it does not offer is here:
* :func:`load`: the package without its ``__init__`` (the hook's import cost).
* :func:`relax_sync`: ``PRAGMA synchronous=NORMAL`` on its two connections (it has no option).
* :func:`rows`, :func:`not_done_rows`, :func:`unack_rows`, :func:`finish_waiting`,
  :func:`delete_not_done`, :func:`last_row`: SQL on its table (``ack_queue_<name>``: ``_id``,
  ``data``, ``status``) and its ``AckStatus`` numbers, to read the jobs in its rows (by scene,
  counted, retrying: the job is kept there only), finish a row only if nobody took it, find a
  row it cannot decode (its ``get`` does not say which), clear many rows in one statement and
  read the public plugin's queue (``sync_queue/predecessor.py``).
"""

from __future__ import annotations

import sqlite3
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

from sync_queue import sqlite

PACKAGE = "persistqueue"
VERSION = "1.1.0"  # requirements.txt; tests/test_pq_insides.py checks the facts below against it
MODULES = ("sqlackqueue", "exceptions", "serializers.json")
# persistqueue/sqlackqueue.py ``AckStatus``: put() writes INITED, nack() and auto_resume
# READY, get() UNACK; ack() ACKED, ack_failed() ACK_FAILED. get() hands out rows below UNACK.
INITED, READY, UNACK, ACKED, ACK_FAILED = 0, 1, 2, 5, 9
TABLE_PREFIX, KEY, DATA, STATUS = "ack_queue_", "_id", "data", "status"
_NOT_DONE = f"{STATUS} IN ({INITED}, {READY}, {UNACK})"
_loaded: SimpleNamespace | None = None


def table(name: str) -> str:
    return TABLE_PREFIX + name


def load() -> SimpleNamespace:
    """``SQLiteAckQueue``, ``Empty`` and the JSON serializer, loaded without the package's ``__init__``.

    That ``__init__`` imports its asyncio queues (and through them ssl), the file queue, PDict and
    the MySQL queue. Its modules import each other absolutely, so a bare package module with the
    real folder as its path is registered, the three modules imported, then it and every
    ``persistqueue.*`` module taken out of ``sys.modules`` again (a later ``import persistqueue``
    loads the whole package afresh). Another layout falls back to the ordinary import.
    """
    global _loaded
    if _loaded is None:
        _loaded = _load_without_init() if PACKAGE not in sys.modules else None
        if _loaded is None:
            _loaded = _load_modules()
    return _loaded


def _load_modules() -> SimpleNamespace:
    import importlib

    mods = {name: importlib.import_module(f"{PACKAGE}.{name}") for name in MODULES}
    return SimpleNamespace(
        SQLiteAckQueue=mods["sqlackqueue"].SQLiteAckQueue,
        Empty=mods["exceptions"].Empty,
        json=mods["serializers.json"],
    )


def _load_without_init() -> SimpleNamespace | None:
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(PACKAGE, sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"No module named {PACKAGE!r}", name=PACKAGE)
    bare = ModuleType(PACKAGE)
    bare.__path__ = list(spec.submodule_search_locations)
    bare.__spec__, bare.__file__ = spec, spec.origin
    sys.modules[PACKAGE] = bare
    try:
        return _load_modules()
    except ImportError:
        return None  # not the layout we know: the ordinary import instead
    finally:
        # list() copies the keys at once: another thread may be importing meanwhile
        for name in [m for m in list(sys.modules) if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            sys.modules.pop(name, None)


def relax_sync(queue: Any) -> None:
    """WAL + synchronous=NORMAL survives any process crash (SIGKILL included); only an OS
    crash or power cut can lose the last commits. Set on its two private connections."""
    opened: list[sqlite3.Connection] = [queue._putter, queue._getter]
    for conn in {id(c): c for c in opened}.values():
        conn.execute("PRAGMA synchronous=NORMAL")


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return sqlite.has_table(conn, table(name))


def not_done_rows(conn: sqlite3.Connection, name: str, after: int = 0) -> list[tuple[int, bytes]]:
    """(row id, serialized data) of every row not acked nor failed (after row ``after``), in queue order."""
    if not has_table(conn, name):
        return []
    query = f"SELECT {KEY}, {DATA} FROM {table(name)} WHERE {_NOT_DONE} AND {KEY} > ? ORDER BY {KEY}"
    return conn.execute(query, (after,)).fetchall()


def last_row(conn: sqlite3.Connection, name: str) -> int:
    """The highest row id of the table (0 when it has none, or there is no table)."""
    if not has_table(conn, name):
        return 0
    return conn.execute(f"SELECT COALESCE(MAX({KEY}), 0) FROM {table(name)}").fetchone()[0]


def rows(names: list[str]) -> str:
    """A SELECT of every row not done of the tables ``names`` (none without names): ``name``,
    ``pqid``, ``taken`` (handed out, not settled), ``doc`` (the data as text: the serializer
    stores UTF-8 JSON as bytes, which SQLite's JSON functions read only as text; check
    ``json_valid`` first)."""
    return (
        " UNION ALL ".join(
            f"SELECT '{name}' AS name, {KEY} AS pqid, {STATUS} = {UNACK} AS taken, CAST({DATA} AS TEXT) AS doc "
            f"FROM {table(name)} WHERE {_NOT_DONE}"
            for name in names
        )
        or "SELECT NULL AS name, NULL AS pqid, 0 AS taken, NULL AS doc WHERE 0"
    )


def finish_waiting(conn: sqlite3.Connection, name: str, pqid: int) -> bool:
    """Mark a row done (``ack``) unless it was handed out; whether it was (one statement)."""
    query = f"UPDATE {table(name)} SET {STATUS} = {ACKED} WHERE {KEY} = ? AND {STATUS} IN ({INITED}, {READY})"
    return conn.execute(query, (pqid,)).rowcount > 0


def unack_rows(conn: sqlite3.Connection, name: str) -> list[tuple[int, bytes]]:
    """(row id, serialized data) of the rows handed out and not yet settled."""
    return conn.execute(f"SELECT {KEY}, {DATA} FROM {table(name)} WHERE {STATUS} = {UNACK}").fetchall()


def delete_not_done(conn: sqlite3.Connection, name: str) -> int:
    """Delete every row not acked nor failed (the caller holds a write transaction)."""
    if not has_table(conn, name):
        return 0
    return conn.execute(f"DELETE FROM {table(name)} WHERE {_NOT_DONE}").rowcount
