"""What sync_queue/pq_insides.py relies on in persist-queue, checked against the pinned
version: a later release that renames, reshapes or renumbers any of it fails here first."""

from __future__ import annotations

import sqlite3

import persistqueue
from persistqueue.sqlackqueue import AckStatus

from sync_queue import pq_insides
from tests.runner import REPO


def test_the_pinned_version_is_the_one_installed():
    pins = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    assert f"persist-queue=={pq_insides.VERSION}" in pins
    assert persistqueue.__version__ == pq_insides.VERSION


def test_status_numbers_table_and_columns_are_persist_queues():
    assert (pq_insides.INITED, pq_insides.READY, pq_insides.UNACK, pq_insides.ACKED, pq_insides.ACK_FAILED) == (
        int(AckStatus.inited),
        int(AckStatus.ready),
        int(AckStatus.unack),
        int(AckStatus.acked),
        int(AckStatus.ack_failed),
    )
    assert persistqueue.SQLiteAckQueue._TABLE_NAME + "_" == pq_insides.TABLE_PREFIX
    assert persistqueue.SQLiteAckQueue._KEY_COLUMN == pq_insides.KEY


def test_the_lean_load_gives_the_same_classes_a_full_import_would():
    pq = pq_insides.load()
    assert pq.SQLiteAckQueue.__module__ == "persistqueue.sqlackqueue" and pq.SQLiteAckQueue.__name__ == "SQLiteAckQueue"
    assert pq.Empty.__name__ == "Empty" and pq.json.loads(pq.json.dumps({"a": 1})) == {"a": 1}


def test_private_connections_and_the_sql_on_its_table(tmp_path):
    pq = pq_insides.load()
    queue = pq.SQLiteAckQueue(str(tmp_path), name="bulk", auto_resume=False, multithreading=True, serializer=pq.json)
    try:
        assert isinstance(queue._putter, sqlite3.Connection) and isinstance(queue._getter, sqlite3.Connection)
        pq_insides.relax_sync(queue)
        assert {c.execute("PRAGMA synchronous").fetchone()[0] for c in (queue._putter, queue._getter)} == {1}
        ids = [queue.put({"n": n}) for n in range(5)]
        for n in range(4):
            raw = queue.get(block=False, raw=True)
            assert (raw["pqid"], raw["data"]) == (ids[n], {"n": n})
        queue.ack(id=ids[0])
        queue.ack_failed(id=ids[1])
        queue.nack(id=ids[2])  # ids[3] stays taken, ids[4] was never taken
    finally:
        queue.close()
    conn = sqlite3.connect(tmp_path / "data.db", isolation_level=None)
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({pq_insides.table('bulk')})")]
    assert columns[:1] + columns[1:2] + columns[3:] == [pq_insides.KEY, pq_insides.DATA, pq_insides.STATUS]
    statuses = dict(conn.execute(f"SELECT _id, status FROM {pq_insides.table('bulk')}").fetchall())
    assert [statuses[i] for i in ids] == [
        pq_insides.ACKED,
        pq_insides.ACK_FAILED,
        pq_insides.READY,
        pq_insides.UNACK,
        pq_insides.INITED,
    ]
    assert [i for i, _ in pq_insides.not_done_rows(conn, "bulk")] == ids[2:]
    assert [i for i, _ in pq_insides.not_done_rows(conn, "bulk", after=ids[3])] == ids[4:]
    assert [(i, pq.json.loads(d)) for i, d in pq_insides.unack_rows(conn, "bulk")] == [(ids[3], {"n": 3})]
    assert pq_insides.last_row(conn, "bulk") == ids[-1] and pq_insides.last_row(conn, "interactive") == 0
    rows = conn.execute(f"SELECT pqid, taken, json_extract(doc, '$.n') FROM ({pq_insides.rows(['bulk'])})").fetchall()
    assert rows == [(ids[2], 0, 2), (ids[3], 1, 3), (ids[4], 0, 4)]  # the JSON in the row, read by SQLite
    assert not pq_insides.finish_waiting(conn, "bulk", ids[3])  # handed out: left to its taker
    assert pq_insides.finish_waiting(conn, "bulk", ids[4])
    assert [i for i, _ in pq_insides.not_done_rows(conn, "bulk")] == ids[2:4]
    assert pq_insides.delete_not_done(conn, "bulk") == 2
    assert pq_insides.not_done_rows(conn, "interactive") == [] and pq_insides.delete_not_done(conn, "interactive") == 0
    assert dict(conn.execute(f"SELECT _id, status FROM {pq_insides.table('bulk')}").fetchall()) == {
        ids[0]: pq_insides.ACKED,
        ids[1]: pq_insides.ACK_FAILED,
        ids[4]: pq_insides.ACKED,
    }
    conn.close()
