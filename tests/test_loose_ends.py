"""Small failures of issue 25.7, each through the real plugin process and the emulators:
a wrong setting fixed in Stash resumes the queued edit by itself, the page counts every
dead letter, a data folder that is a file is named, one unreadable dead-letter row
costs nothing to the others."""

from __future__ import annotations

import sqlite3

import pytest

from sync_queue.dlq import DeadLetterQueue
from sync_queue.job import Job
from tests.runner import drainer_lock_held, run_plugin
from tests.test_reliability import wait_for


def operation(plugin, **args):
    return run_plugin({"server_connection": plugin.connection, "args": args}, env=plugin.env)


def test_a_fixed_library_typo_resumes_the_queued_edit_and_the_page_shows_nothing_in_flight(plugin):
    plugin.env["STASH2PLEX_DRAINER_FIX_WAIT_S"] = "60"
    sid, rk = plugin.add_scene(1)
    plugin.configure(plex_libraries="Stsah")  # a typo: Plex's library is "Stash"
    assert plugin.hook(plugin.stash.update_scene(sid, title="After the fix")).error is None
    wait_for(lambda: "Stsah" in plugin.drainer_log(), 30, "the drainer to stop on the typo", step=0.1)
    wait_for(lambda: not plugin.drainer_busy(), 30, "the drainer to let the queue go", step=0.1)
    queue = operation(plugin, mode="ui_status").output["queue"]
    assert queue["pending"] == 1 and queue["in_flight"] == 0, queue  # it waits: no worker holds it
    plugin.configure(plex_libraries="Stash")  # saved in Stash: no hook runs
    wait_for(lambda: plugin.plex.item(rk)["fields"]["title"] == "After the fix", 30, "the edit to reach Plex", step=0.2)
    plugin.wait_drained()


def test_the_page_counts_every_dead_letter_not_the_newest_thousand(plugin):
    dlq = DeadLetterQueue(plugin.data_dir)
    dlq.add(Job(scene_id=1), "PlexNotFound", "no Plex item", "one")
    dlq.close()
    with sqlite3.connect(plugin.data_dir / "state.db") as conn:  # 1,500 more, quickly
        row = conn.execute("SELECT job, error_class, message, attempts, failed_at, title FROM dlq").fetchone()
        conn.executemany(
            "INSERT INTO dlq VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(sid, row[0], "AmbiguousMatch" if sid % 3 else row[1], *row[2:]) for sid in range(2, 1502)],
        )
    out = operation(plugin, mode="ui_status").output["dlq"]
    assert out["count"] == 1501 and out["shown"] == 1000, {k: out[k] for k in ("count", "shown")}
    assert [(g["error_class"], g["count"]) for g in out["groups"]] == [("AmbiguousMatch", 1000), ("PlexNotFound", 501)]


def test_a_data_folder_that_is_a_file_is_named(plugin):
    plugin.data_dir.parent.mkdir(parents=True, exist_ok=True)
    plugin.data_dir.write_text("not a folder")
    for run in (
        plugin.task("process_queue"),
        plugin.hook(plugin.stash.update_scene(plugin.add_scene(1)[0], title="x")),
    ):
        assert run.error is not None and "Traceback" not in run.stderr, run.stderr[-2000:]
        assert f"STASH2PLEX_DATA_DIR ({plugin.data_dir}) is a file, not a folder" in run.error, run.error


def test_one_unreadable_dead_letter_row_never_stops_retry_all(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(3))
    dlq = DeadLetterQueue(plugin.data_dir)
    for sid in scenes:
        dlq.add(Job(scene_id=sid, attempt=4), "PlexNotFound", "no Plex item", f"Scene {sid}")
    dlq.close()
    broken = list(scenes)[1]
    with sqlite3.connect(plugin.data_dir / "state.db") as conn:
        conn.execute("UPDATE dlq SET job = '{not json' WHERE scene_id = ?", (broken,))
    for sid in scenes:
        plugin.stash.update_scene(sid, title=f"Retried {sid}")
    run = plugin.task("retry_dlq")
    assert run.error is None and run.output == "3 dead-letter entries queued again", (run.output, run.stderr[-2000:])
    assert f"1 dead-letter entry could not be read (scenes {broken})" in run.stderr
    plugin.wait_drained()
    assert [plugin.plex.item(rk)["fields"]["title"] for rk in scenes.values()] == [f"Retried {sid}" for sid in scenes]


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("plex_url", "http://127.0.0.1:324000", "has a port that is not a number from 1 to 65535"),
        ("content_rating", "R" * 100_000, "must be at most 64 characters, a rating such as R or TV-MA"),
    ],
)
def test_a_setting_out_of_range_is_named_where_it_is_read_and_nothing_is_dead_lettered(plugin, setting, value, says):
    sid, _ = plugin.add_scene(1)
    plugin.configure(**{setting: value})
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(plugin.stash.update_scene(sid, title="Held")).error is None
    run = plugin.task("process_queue")
    assert run.error is not None and f"setting {setting}" in run.error and says in run.error, run.error
    status = plugin.status()
    assert status["pending"] == 1 and status["dlq"] == 0, status


def test_a_cover_that_trickles_in_is_given_up_at_the_download_deadline(plugin):
    """Issue 25.7: one byte every few seconds never trips a per-read timeout (a cover at one
    byte per 5 s kept process_queue busy 301 s). The download has an overall deadline: the
    fields are written, the poster is retried later."""
    plugin.env["STASH2PLEX_COVER_DEADLINE_S"] = "2"
    sid, rk = plugin.add_scene(1)
    plugin.stash.image_trickle_s = 0.5
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(plugin.stash.update_scene(sid, title="Fields first")).error is None
    run = plugin.task("process_queue", timeout=60)
    assert run.error is None, run.stderr[-2000:]
    assert plugin.plex.item(rk)["fields"]["title"] == "Fields first"
    assert run.output["retrying"] == 1, run.output
    assert "took longer than 2 s to send a screenshot" in run.stderr, run.stderr[-2000:]
    assert plugin.stash.screenshot_requests == [sid], plugin.stash.screenshot_requests  # read once, not twice


def test_edits_saved_while_a_setting_is_wrong_leave_one_drainer_waiting_for_the_fix(plugin):
    """Each hook finds no drainer holding the lock (the one waiting for the fix lets it go),
    so each starts one; one of them waits for the fix (it drains every job once it comes),
    the others exit instead of each polling Stash's settings for ten minutes."""
    plugin.env["STASH2PLEX_DRAINER_FIX_WAIT_S"] = "60"
    scenes = [plugin.add_scene(i) for i in (1, 2, 3)]
    plugin.configure(plex_libraries="Stsah")
    for n, (sid, _) in enumerate(scenes, start=1):
        assert plugin.hook(plugin.stash.update_scene(sid, title=f"Fixed {n}")).error is None
        wait_for(lambda n=n: plugin.drainer_log().count("drainer stopped") >= n, 30, "the drainer to stop", step=0.1)
        wait_for(lambda: not plugin.drainer_busy(), 30, "the drainer to let the queue go", step=0.1)
    assert plugin.drainer_log().count("the queued jobs wait for the fix") == 1
    plugin.configure(plex_libraries="Stash")
    for n, (_, rk) in enumerate(scenes, start=1):
        wait_for(lambda rk=rk, n=n: plugin.plex.item(rk)["fields"]["title"] == f"Fixed {n}", 30, "the edits", step=0.2)
    plugin.wait_drained()
