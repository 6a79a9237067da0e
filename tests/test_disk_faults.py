"""The plugin's own machine: a data folder whose SQLite files another process holds, and a
disk that fills up and gets space back. Stash's save never waits on either, and every edit
still reaches Plex by itself (no task run) once the disk lets the drainer write again."""

from __future__ import annotations

import os
import time

from sync_queue.sqlite import BUSY_TIMEOUT_S
from tests.disk_faults import held, raise_file_size_limit, sqlite_files

# A hook that waited for a held or full file would spend SQLite's busy timeout before giving up
# (it did, before the spool): each must answer sooner. How fast it answers is the benchmark's
# (docs/performance.md, "Hook"), not this suite's.
HOOK_BOUND_S = BUSY_TIMEOUT_S
# Held longer than SQLite's busy timeout (sync_queue/sqlite.py BUSY_TIMEOUT_S), so a statement
# of the drainer that waits for it gives up, as in the 30 s of a backup tool; S2P_HOLD_S=30
# holds for those 30 s (the product logic is the same, the suite waits less).
HOLD_S = float(os.environ.get("S2P_HOLD_S", "13"))
ARRIVE_WITHIN_S = 30.0


def _titles_in_plex(plugin, items: dict[int, str]) -> dict[int, str]:
    return {rk: plugin.plex.item(rk)["fields"]["title"] for rk in items}


def _wait_in_plex(plugin, items: dict[int, str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _titles_in_plex(plugin, items) != items and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _titles_in_plex(plugin, items) == items, plugin.drainer_log()[-4000:]


def _moving_for(plugin) -> float:
    from sync_queue import spool

    return spool.moving_for(str(plugin.data_dir / "queue"), time.time())


def test_every_data_file_held_by_another_process_never_stalls_a_save_and_the_edits_arrive(plugin):
    """The hooks answer at once; once the drainer has been stuck moving their edits in for
    a few seconds, the next hook says so in one warning line (at most one a minute)."""
    from sync_queue.health import BUSY_WARN_S

    scenes = [plugin.add_scene(n) for n in range(10)]
    assert plugin.hook(plugin.stash.update_scene(scenes[0][0], title="Before")).error is None
    plugin.wait_drained()  # the data folder's files exist
    assert {p.name for p in sqlite_files(plugin.data_dir)} >= {"data.db", "state.db"}
    wanted: dict[int, str] = {}
    runs = []
    with held(plugin.data_dir, HOLD_S) as holder:
        for n, (sid, rk) in enumerate(scenes):
            if n == 5:  # the drainer has been stuck on the held queue file long enough to say so
                deadline = time.monotonic() + HOLD_S
                while _moving_for(plugin) < BUSY_WARN_S + 0.5 and time.monotonic() < deadline:
                    time.sleep(0.1)
            wanted[rk] = f"Saved while held {n}"
            runs.append(plugin.hook(plugin.stash.update_scene(sid, title=wanted[rk])))
        holder.wait_released(HOLD_S + 10)
    for run in runs:
        assert run.wall < HOOK_BOUND_S and run.error is None, (run.wall, run.reply, run.stderr[-2000:])
        assert "Traceback" not in run.stderr and not run.messages("error"), run.logs
    warnings = [m for run in runs for m in run.messages("warning")]
    assert len(warnings) == 1 and ("busy" in warnings[0] or "locked" in warnings[0]), warnings
    walls = sorted(r.wall * 1000 for r in runs)
    print(
        f"hook wall time while every data file was held: median {walls[len(walls) // 2]:.0f} ms, max {walls[-1]:.0f} ms"
    )
    _wait_in_plex(plugin, wanted, ARRIVE_WITHIN_S)
    plugin.wait_drained()
    assert plugin.status()["pending"] == 0


# No file may grow past this: the queue, the ledger and the drainer's log cannot grow (they
# are larger already, and their -wal files outgrow it at once), the hooks' spool can.
FULL_AT = 4096


def _health(plugin) -> dict:
    from sync_queue import health

    return health.read(plugin.data_dir)


def _drainer_pid(plugin) -> int:
    text = (plugin.data_dir / "drainer.lock").read_text().strip()
    return int(text) if text.isdigit() else 0


def test_after_a_full_disk_the_drainer_resumes_by_itself_and_pending_counts_scenes(plugin):
    scenes = [plugin.add_scene(n) for n in range(5)]
    assert plugin.hook(plugin.stash.update_scene(scenes[0][0], title="Before")).error is None
    plugin.wait_drained()
    wanted: dict[int, str] = {}
    for round_ in range(3):  # each scene saved three times while the disk is full
        for sid, rk in scenes:
            wanted[rk] = f"Saved on a full disk {round_}"
            run = plugin.hook(plugin.stash.update_scene(sid, title=wanted[rk]), file_size_limit=FULL_AT)
            assert run.error is None and "Traceback" not in run.stderr, (run.reply, run.stderr[-2000:])
            assert run.wall < HOOK_BOUND_S, run.wall
    deadline = time.monotonic() + 20
    while "full" not in str(_health(plugin).get("failing")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "is full" in _health(plugin)["failing"]["reason"], (_health(plugin), plugin.drainer_log()[-3000:])
    assert plugin.status()["pending"] == len(scenes)  # scenes waiting, not the 15 saves
    pid = _drainer_pid(plugin)
    assert pid and plugin.drainer_busy(), "the drainer that ran out of space should wait for it, not exit"
    raise_file_size_limit(pid)  # the space is back
    _wait_in_plex(plugin, wanted, ARRIVE_WITHIN_S)
    plugin.wait_drained()
    assert plugin.status()["pending"] == 0 and "failing" not in _health(plugin)


def test_a_drainer_killed_after_plex_took_its_edit_leaves_no_tag_the_ledger_does_not_know(plugin):
    """Killed after Plex applied the edit and before the ledger recorded it (here: at its
    poster upload; a full disk after Plex answered is the same): the tags it added were
    recorded as written before the edit went out, so the next sync takes them off when the
    scene no longer has them, instead of keeping them as the user's own."""
    from tests.runner import kill_lock_holder

    sid, rk = plugin.add_scene(1, performers=["Ann Lee"], tags=["Kept"])
    killed: list[bool] = []

    def kill_at_the_poster(record: dict) -> None:
        if record["method"] == "POST" and record["path"].endswith("/posters") and not killed:
            killed.append(kill_lock_holder(plugin.data_dir / "drainer.lock"))

    plugin.plex.on_request = kill_at_the_poster
    assert plugin.hook(plugin.stash.update_scene(sid, title="Killed mid-sync")).error is None
    deadline = time.monotonic() + 20
    while not killed and time.monotonic() < deadline:
        time.sleep(0.02)
    plugin.plex.on_request = None
    assert killed == [True]
    # SIGKILL is sent, not done: the drainer holds its lock until the kernel has ended it (at
    # its low priority on a busy machine, a while), and a hook meanwhile would only nudge it
    deadline = time.monotonic() + 20
    while plugin.drainer_busy() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not plugin.drainer_busy(), "the killed drainer still holds its lock"
    assert plugin.plex.item(rk)["tags"]["actor"] == ["Ann Lee"]  # Plex took the edit
    assert plugin.hook(plugin.stash.update_scene(sid, performers=[], tags=[])).error is None
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert item["tags"]["actor"] == [] and item["tags"]["genre"] == [], item["tags"]


def test_a_damaged_data_folder_stops_the_drainer_with_its_name_not_a_traceback(plugin):
    """A folder where the drainer keeps the hooks' taken spool file (put there by another
    program): the drainer stops at once (no wait for a disk that will not heal by itself) and
    records the path, what is wrong and what to do; the next hook warns of it, in those words,
    and a task meeting the same folder answers with them."""
    from sync_queue import spool

    sid, _rk = plugin.add_scene(1)
    taken = plugin.data_dir / spool.QUEUE_FOLDER / (spool.SPOOL_FILE + spool.TAKEN_SUFFIX)
    taken.mkdir(parents=True)
    run = plugin.hook(plugin.stash.update_scene(sid, title="Saved into a damaged folder"))
    assert run.error is None, run.reply
    deadline = time.monotonic() + 20
    while (plugin.drainer_busy() or not _health(plugin).get("failing")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not plugin.drainer_busy(), "a damaged folder is not a full disk: the drainer stops"
    reason = _health(plugin)["failing"]["reason"]
    assert reason.startswith(f"cannot write {taken}: {taken} is a folder where Stash2Plex keeps a file"), reason
    assert "Move it" in reason, reason
    assert "Traceback" not in plugin.drainer_log(), plugin.drainer_log()[-3000:]
    status = plugin.task("queue_status")  # a task meeting the same folder says the same
    assert status.error == reason and "Traceback" not in status.stderr, status.stderr[-2000:]
    after = plugin.hook(plugin.stash.update_scene(sid, title="Saved again"))
    assert after.error is None and any(reason in m for m in after.messages("warning")), after.logs
