"""One state database (sync_queue/sqlite.py ``Store``, ``move_in``): the ledger, the dead
letters, the statistics and the plays' journal share ``state.db``; the four files earlier
versions kept them in (``ledger.db``, ``dlq.db``, ``stats.db``, ``plays.db``, made here as
those versions made them: each module's own tables in its own file) are moved in on first
open, once, also when several processes open it at the same moment, and are left as they were.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import sqlite3
from pathlib import Path

import pytest

from core.errors import DataFileError
from sync_queue import dlq, ledger, plays, stats
from sync_queue.dlq import DeadLetterQueue
from sync_queue.job import Job
from sync_queue.ledger import ItemRecord, Ledger, Pin
from sync_queue.plays import PlayJournal
from sync_queue.sqlite import STATE_FILE
from sync_queue.stats import StatsStore

NOW = 1_800_000_000.0
JOB = Job(scene_id=7, attempt=3)


def _old_files(data_dir: Path) -> dict[str, bytes]:
    """The four files of an earlier version, with a few rows each; their bytes."""
    rows = {
        "ledger.db": (
            ledger._SCHEMA,
            [
                "INSERT INTO scenes VALUES (1, 11, '/p/1.mp4', 'h1', '{\"title\": \"t\"}', '{}', NULL, 'ph', 5.0)",
                "INSERT INTO items VALUES (11, 1, '{\"title\": \"t\"}', '{}')",
                # written before items had records of their own: the scene's record says what is on item 12
                "INSERT INTO scenes VALUES (3, 12, '/p/2.mp4', 'h3', '{\"title\": \"u\"}', '{}', NULL, 'p3', 4.0)",
                "INSERT INTO pins VALUES (2, 'skip', NULL, 6.0)",
                "INSERT INTO meta VALUES ('client_id', '\"abc\"')",
                "INSERT INTO plex_index VALUES (3, 11, '/p/1.mp4', 10, 60000)",
                "INSERT INTO plex_index VALUES (3, 12, '/p/2.mp4', 20, 90000)",
                "INSERT INTO scene_entities VALUES ('tags', 4, 1)",
            ],
        ),
        "dlq.db": (
            dlq._SCHEMA,
            [
                f"INSERT INTO dlq VALUES (7, '{json.dumps(JOB.to_dict())}', 'PlexNotFound', 'not in Plex', 4, 9.0, 'T')",
            ],
        ),
        "stats.db": (
            stats._SCHEMA,
            ["INSERT INTO totals VALUES ('synced', 40)", "INSERT INTO totals VALUES ('failed:PlexNotFound', 2)"],
        ),
        "plays.db": (
            plays._SCHEMA,
            [
                "INSERT INTO plays VALUES ('srv', 'h/1', 1, 11, 100, 1, 1, 0, 5.0)",
                "INSERT INTO marks VALUES ('srv', 1, 100, 50)",
            ],
        ),
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, (schema, inserts) in rows.items():
        with sqlite3.connect(data_dir / name) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(schema)
            for insert in inserts:
                conn.execute(insert)
        conn.close()
    return {name: (data_dir / name).read_bytes() for name in rows}


def _assert_moved_in(data_dir: Path) -> None:
    store = Ledger(data_dir)
    record = store.get_many([1])[1]
    assert (record.rating_key, record.plex_path, record.state_hash, record.fields) == (
        11,
        "/p/1.mp4",
        "h1",
        {"title": "t"},
    )
    assert (record.poster_hash, record.entities, record.owner) == ("ph", {"tags": [4]}, 1)
    assert store.pins() == {2: Pin(2, "skip", None, 6.0)} and store.meta("client_id") == "abc"
    assert store.index_rows(3) == [(11, "/p/1.mp4", 10, 60000), (12, "/p/2.mp4", 20, 90000)]  # once, not twice
    assert store.item(12) == ItemRecord(12, 3, {"title": "u"}, {}) and store.item_poster(12) == (3, "p3")
    assert store.owners([11, 12]) == {11: [(0.0, 1)], 12: [(0.0, 3)]} and store.item_poster(11) == (1, "ph")
    store.close()
    dead = DeadLetterQueue(data_dir)
    assert dead.jobs() == ([JOB], []) and dead.entry(7)["reason"] == "not in Plex"
    dead.close()
    counts = StatsStore(data_dir)
    snapshot = counts.snapshot()
    assert (snapshot["synced"], snapshot["failed"]) == (40, {"PlexNotFound": 2})  # added once
    counts.close()
    journal = PlayJournal(data_dir)
    assert journal.applied("srv", ["h/1", "h/2"]) == {"h/1"} and journal.since("srv", 1) == (100, 50)
    assert journal.count() == 1
    journal.close()


def test_an_earlier_versions_four_files_are_moved_in_once_and_left_as_they_were(tmp_path):
    before = _old_files(tmp_path)
    _assert_moved_in(tmp_path)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    with sqlite3.connect(tmp_path / "ledger.db") as conn:  # a row an old process added later is not copied again
        conn.execute("INSERT INTO plex_index VALUES (3, 13, '/p/3.mp4', 30, 1000)")
    conn.close()
    _assert_moved_in(tmp_path)
    with sqlite3.connect(tmp_path / STATE_FILE) as conn:
        moved = sorted(row[0] for row in conn.execute("SELECT file FROM moved_in"))
    conn.close()
    assert moved == ["dlq.db", "ledger.db", "plays.db", "stats.db"]


def test_a_row_written_to_the_state_database_first_is_kept(tmp_path):
    _old_files(tmp_path)
    with sqlite3.connect(tmp_path / STATE_FILE) as conn:  # the new version's own record of scene 1 wins
        conn.executescript(ledger._SCHEMA)
        conn.execute("INSERT INTO scenes VALUES (1, 11, '/p/new.mp4', 'h2', '{}', '{}', NULL, NULL, 8.0)")
    conn.close()
    store = Ledger(tmp_path)
    assert store.get_many([1])[1].plex_path == "/p/new.mp4" and store.pins()[2].answer == "skip"
    store.close()


def test_rows_an_old_process_has_not_checkpointed_yet_are_moved_in(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    writer = sqlite3.connect(tmp_path / "stats.db", isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.executescript(stats._SCHEMA)
    writer.execute("INSERT INTO totals VALUES ('gone', 3)")
    assert Path(f"{tmp_path / 'stats.db'}-wal").stat().st_size > 0  # an old drainer still has it open
    store = StatsStore(tmp_path)
    assert store.snapshot()["gone"] == 3
    store.close()
    writer.close()


def _open_all(data_dir: str, barrier) -> None:
    barrier.wait()
    for kind in (Ledger, DeadLetterQueue, StatsStore, PlayJournal):
        store = kind(Path(data_dir))
        store.open()
        store.close()


def test_several_processes_opening_at_the_same_moment_move_each_file_in_once(tmp_path):
    """A hook's drainer, a task and ``watch`` start together on an upgraded data folder."""
    _old_files(tmp_path)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    runs = [context.Process(target=_open_all, args=(str(tmp_path), barrier)) for _ in range(4)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
    assert [run.exitcode for run in runs] == [0, 0, 0, 0]
    _assert_moved_in(tmp_path)


def test_a_journal_of_before_servers_were_recorded_is_moved_in_under_no_server(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    with sqlite3.connect(tmp_path / "plays.db") as conn:
        conn.executescript(
            "CREATE TABLE applied (history_key TEXT PRIMARY KEY, scene_id INTEGER NOT NULL, rating_key INTEGER "
            "NOT NULL, viewed_at INTEGER NOT NULL, account_id INTEGER NOT NULL, written INTEGER NOT NULL, at REAL "
            "NOT NULL); CREATE TABLE since (account_id INTEGER PRIMARY KEY, viewed_at INTEGER NOT NULL, floor "
            "INTEGER NOT NULL);"
        )
        conn.execute("INSERT INTO applied VALUES ('h/1', 1, 11, 100, 1, 1, 5.0)")
        conn.execute("INSERT INTO since VALUES (1, 100, 50)")
    conn.close()
    journal = PlayJournal(tmp_path)
    assert journal.applied("", ["h/1"]) == {"h/1"} and journal.since("", 1) == (100, 50)
    journal.claim("srv")
    assert journal.applied("srv", ["h/1"]) == {"h/1"} and journal.since("srv", 1) == (100, 50)
    journal.close()


STORES = {"ledger.db": Ledger, "dlq.db": DeadLetterQueue, "stats.db": StatsStore, "plays.db": PlayJournal}


@pytest.mark.parametrize("how", ["whole", "pages"])
@pytest.mark.parametrize("name", sorted(STORES))
def test_a_damaged_old_file_is_named_and_left_untouched(tmp_path, name, how):
    """Not a database at all, or a sound header and schema over garbage tables: the copy stops
    naming the old file, copies nothing and marks nothing; moved aside, the store opens."""
    original = _old_files(tmp_path)[name]
    noise = bytes(range(256)) * 64
    garbage = b"SQLite format 3\x00" + noise if how == "whole" else original[:4096] + noise
    (tmp_path / name).write_bytes(garbage)
    store = STORES[name](tmp_path)
    with pytest.raises(DataFileError) as raised:
        store.open()
    assert str(tmp_path / name) in str(raised.value) and "move the file" in str(raised.value)
    assert (tmp_path / name).read_bytes() == garbage
    with sqlite3.connect(tmp_path / STATE_FILE) as conn:
        assert conn.execute("SELECT COUNT(*) FROM moved_in WHERE file = ?", (name,)).fetchone() == (0,)
        tables = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", STORES[name].SCHEMA)
        assert [conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables] == [0] * len(tables)
    conn.close()
    (tmp_path / name).rename(tmp_path / f"{name}.damaged")
    assert store.open() is None
    store.close()


def test_a_state_database_found_empty_is_said_once_whichever_store_opened_it(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / STATE_FILE).write_bytes(b"")
    stores = [DeadLetterQueue(tmp_path), Ledger(tmp_path), Ledger(tmp_path)]
    stores[0].count()  # the dead letters open it first
    said = [stores[1].open(), stores[2].open()]
    for store in stores:
        store.close()
    assert said[0] is not None and "state.db was empty (0 bytes" in said[0] and said[1] is None
