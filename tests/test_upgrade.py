"""Upgrading from the public Stash2Plex plugin (v1.6.14): its queued edits and dead letters are ours.

The fixture is the data folder its own code wrote (tests/fixtures/public-stash2plex-1.6.14,
README there): scenes 1, 2, 3, 4 and 7 waiting (never tried, retried while Plex was down,
taken by a killed worker, given back, and one whose row holds a value only pickle rebuilds),
scene 5 synced, scene 6 dead-lettered as PlexNotFound.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.runner import REPO

FIXTURE = REPO / "tests" / "fixtures" / "public-stash2plex-1.6.14" / "data"
WAITING = (1, 2, 3, 4, 7)
DEAD = 6
THEIR_TABLES = {"queue/data.db": "ack_queue_default", "dlq.db": "dead_letters"}


def _their_rows(data_dir: Path) -> dict[str, list[tuple]]:
    rows = {}
    for name, table in THEIR_TABLES.items():
        conn = sqlite3.connect(data_dir / name)
        try:
            schema = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            rows[name] = [schema, *conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()]
        finally:
            conn.close()
    return rows


def _upgraded(plugin) -> dict[int, int]:
    """The public plugin's data folder under ours, and the scenes it names in Stash and Plex."""
    shutil.copytree(FIXTURE, plugin.data_dir)
    return {n: plugin.add_scene(n, scene_id=n)[1] for n in range(1, 8)}


def test_the_first_run_over_the_public_plugins_data_syncs_its_edits_and_lists_its_dead_letter(plugin):
    items = _upgraded(plugin)
    before = _their_rows(plugin.data_dir)
    for n in (*WAITING, 5, DEAD):
        plugin.stash.update_scene(n, title=f"Edited {n}")  # saved while the public plugin was installed
    plugin.stash.update_scene(5, title="Synced five")
    run = plugin.hook(plugin.stash.update_scene(5, title="Edited after the upgrade"))  # the first run
    assert run.error is None, run.stderr
    plugin.wait_drained(timeout=30)
    for n in WAITING:
        assert plugin.plex.item(items[n])["fields"]["title"] == f"Edited {n}", (n, plugin.drainer_log()[-3000:])
    assert plugin.plex.item(items[5])["fields"]["title"] == "Edited after the upgrade"
    assert plugin.plex.item(items[DEAD])["fields"]["title"] != f"Edited {DEAD}"  # listed, not retried by itself
    said = [line for line in plugin.drainer_log().splitlines() if "taken over from the public Stash2Plex" in line]
    assert len(said) == 1 and "5 waiting scene(s) queued, 1 dead letter(s) listed" in said[0], said
    # the drainer's log is a file nobody reads: the next scene edit's hook says it in Stash's log, once
    told = []
    for title in ("Seen", "Seen again"):
        hook = plugin.hook(plugin.stash.update_scene(5, title=title))
        told.append([m for m in hook.messages("warning") if "taken over from the public Stash2Plex" in m])
    assert [len(lines) for lines in told] == [1, 0] and "5 waiting scene(s) queued" in told[0][0], told
    plugin.wait_drained(timeout=30)
    assert "1 job(s) read by scene id only" in said[0]  # scene 7's row holds a datetime: pickle is not run
    status = plugin.task("queue_status").output
    assert status["pending"] == 0 and status["dlq"] == 1, status
    (entry,) = status["dlq_newest"]
    assert entry["scene_id"] == DEAD and entry["error_class"] == "PlexNotFound"
    assert entry["reason"].startswith("Could not find Plex item for path: /plex/media/scene-00006.mp4"), entry
    # going back to the public plugin keeps working: its tables are as it left them
    assert _their_rows(plugin.data_dir) == before
    # a second run takes nothing over again
    assert plugin.task("process_queue").error is None
    assert "taken over" not in plugin.drainer_log().split(said[0])[1]
    assert plugin.task("queue_status").output["dlq"] == 1


def test_retry_dlq_retries_the_public_plugins_dead_letter(plugin):
    items = _upgraded(plugin)
    plugin.stash.update_scene(DEAD, title="Fixed in Stash")
    run = plugin.task("retry_dlq")  # the first run: a task
    assert run.error is None, run.stderr[-2000:]
    plugin.wait_drained(timeout=30)  # the drainer it started: nothing else is run
    assert plugin.plex.item(items[DEAD])["fields"]["title"] == "Fixed in Stash", plugin.drainer_log()[-3000:]
    for n in WAITING:
        assert plugin.plex.item(items[n])["fields"]["title"] == f"Scene {n}"
    assert any("taken over from the public Stash2Plex" in m for m in run.messages("warning")), run.messages()


def test_queue_status_as_the_first_run_shows_them_and_a_drainer_syncs_them(plugin):
    items = _upgraded(plugin)
    status = plugin.task("queue_status")
    assert status.output["pending"] == len(WAITING) and status.output["dlq"] == 1, status.output
    assert any("taken over from the public Stash2Plex" in m for m in status.messages("warning"))
    plugin.wait_drained(timeout=30)
    for n in WAITING:
        assert plugin.plex.item(items[n])["fields"]["title"] == f"Scene {n}", plugin.drainer_log()[-3000:]


def test_a_row_is_read_as_data_never_run(tmp_path):
    """A pickle that would run a command when loaded gives its scene id, and runs nothing."""
    import os
    import pickle

    from sync_queue import predecessor

    class Run:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    conn = sqlite3.connect(data_dir / "queue" / "data.db")
    with conn:
        conn.execute(
            "INSERT INTO ack_queue_default (data, timestamp, status) VALUES (?, 0, 0)",
            (pickle.dumps({"scene_id": 9, "data": Run()}),),
        )
        conn.execute("INSERT INTO ack_queue_default (data, timestamp, status) VALUES (?, 0, 0)", (b"not a pickle",))
    conn.close()
    found = predecessor.find(data_dir)
    assert sorted(j.scene_id for j in found.jobs) == [1, 2, 3, 4, 7, 9]
    assert (found.by_id_only, found.unreadable, found.last_queue, found.last_dead) == (2, 1, 10, 1)
    assert not (tmp_path / "ran").exists()
    ((dead, error_class, reason, attempts, _),) = found.dead
    assert (dead.scene_id, error_class, attempts) == (6, "PlexNotFound", 13)
    assert reason.endswith("(dead-lettered by the public Stash2Plex plugin)")
    assert not predecessor.find(data_dir, after_queue=10, after_dead=1)


def test_a_row_with_odd_values_is_taken_over_without_a_traceback(tmp_path):
    """A damaged row's values (a time pickle keeps whole however large, not a number, or NaN)
    give the job a time of now, never an OverflowError at the start of every run."""
    import math
    import pickle
    import time

    from sync_queue import predecessor

    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    conn = sqlite3.connect(data_dir / "queue" / "data.db")
    with conn:
        for n, at in ((11, 10**400), (12, float("nan")), (13, float("inf")), (14, True), (15, -(10**30))):
            row = pickle.dumps({"scene_id": n, "enqueued_at": at})
            conn.execute("INSERT INTO ack_queue_default (data, timestamp, status) VALUES (?, 0, 0)", (row,))
    conn.close()
    before = time.time()
    found = predecessor.find(data_dir)
    odd = {j.scene_id: j.enqueued_at for j in found.jobs if j.scene_id > 10}
    assert sorted(odd) == [11, 12, 13, 14, 15]
    assert all(math.isfinite(at) and before <= at <= time.time() for at in odd.values()), odd


def test_a_dead_letter_with_odd_values_is_listed_without_a_traceback(tmp_path):
    """A dead letter whose retry count is SQLite's largest integer (one more does not fit our
    table) or not a number, and whose time is not a time: listed, with sane values."""
    from sync_queue import predecessor
    from sync_queue.dlq import DeadLetterQueue

    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    conn = sqlite3.connect(data_dir / "dlq.db")
    with conn:
        conn.execute(
            "INSERT INTO dead_letters (scene_id, error_type, error_message, retry_count, failed_at) "
            "VALUES (21, 'PlexNotFound', 'gone', ?, 'yesterday'), (22, NULL, NULL, 'many', NULL)",
            (2**63 - 1,),
        )
    conn.close()
    found = predecessor.find(data_dir)
    dlq = DeadLetterQueue(data_dir)
    try:
        for job, error_class, reason, attempts, failed_at in found.dead:
            dlq.adopt(job, error_class, reason, attempts, failed_at)
        assert dlq.count() == 3
    finally:
        dlq.close()
    attempts = {job.scene_id: tries for job, _, _, tries, _ in found.dead}
    assert attempts[22] == 1 and 1 <= attempts[21] < 2**63
