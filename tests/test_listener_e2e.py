"""Listening to Plex, end to end: the real plugin process against the emulators, whose
Plex serves the notification websocket (``tests/emulators/plex_notify.py``)."""

from __future__ import annotations

import contextlib
import time
from contextlib import contextmanager

from tests.conftest import POLL_S
from tests.runner import create_context
from worker.coalesce import WINDOW_S

SIZE, DURATION_S = 4242, 60.0
# The first not-found retry of seed 2 falls 28.7 s later (backoff's 30 s window): any
# Plex request before the event would be the listener's doing, not a timed retry.
SEED = "2"


def until(check, timeout: float, what: str, plugin=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(POLL_S)
    raise AssertionError(f"not within {timeout} s: {what}\n{plugin.drainer_log() if plugin else ''}")


def add_scene(plugin, path: str, title: str) -> int:
    return plugin.stash.add_scene(title=title, files=[{"path": path, "size": SIZE, "duration": DURATION_S}])


def plex_requests(plugin) -> list[dict]:
    """Every request to Plex but the notification websocket's handshakes."""
    return [r for r in plugin.plex.requests if not r["path"].startswith("/:/websocket")]


def job_waiting_for_plex(plugin, path: str, title: str) -> int:
    """A scene saved before Plex has its file: its job waits, the drainer listens (caught up)."""
    plugin.env["STASH2PLEX_RANDOM_SEED"] = SEED
    sid = add_scene(plugin, path, title)
    plugin.hook(create_context(sid))
    until(lambda: plugin.plex.notifications.listening == 1, 15, "the drainer listens", plugin)
    until(lambda: plugin.status()["retrying"] == 1, 10, "the job waits for Plex")
    until(lambda: caught_up(plugin), 10, "the listener's catch-up on connecting", plugin)
    return sid


def test_an_item_an_agentless_section_adds_is_written_when_its_scan_ends(plugin):
    """The section has no metadata agent (as "Other Videos" sections holding Stash content
    have): Plex's processing of the new item ends at timeline state 1, never state 5. The
    listener's event wakes the job (its log line says so), long before its timed retry
    (28.7 s away: the wait below only stops a hung test)."""
    job_waiting_for_plex(plugin, "/stash/media/new/fresh.mp4", "Fresh Scene")
    before = len(plex_requests(plugin))
    time.sleep(0.5)  # the drainer idles: nothing asks Plex while the job waits
    assert len(plex_requests(plugin)) == before

    rk = plugin.plex.add_item(1, "/plex/media/new/fresh.mp4", size=SIZE, duration_ms=60_000)
    until(lambda: plugin.plex.item(rk)["fields"]["title"] == "Fresh Scene", 20, "written", plugin)
    assert "1 waiting job(s) go now" in plugin.drainer_log()
    states = [
        e["state"] for m in plugin.plex.notifications.sent for e in m["NotificationContainer"].get("TimelineEntry", [])
    ]
    assert states[:3] == [0, 1, 1] and set(states[3:]) == {5}  # the scan ended at state 1; 5: our write
    until(lambda: not plugin.drainer_busy(), 10, "the drainer leaves once nothing waits")
    status = plugin.status()
    assert status["pending"] == 0 and status["dlq"] == 0


def test_a_scan_of_many_files_is_a_look_at_the_library_not_a_read_per_item(plugin):
    """300 files and the one a job waits for, in one scan: past 20 items in a second the
    drainer looks at the library once instead of reading each item."""
    import requests

    job_waiting_for_plex(plugin, "/stash/media/new/wanted.mp4", "Wanted")
    for n in range(300):
        plugin.plex.schedule_item(1, f"/plex/media/bulk/{n:03}.mp4", delay=3600)
    rk = plugin.plex.schedule_item(1, "/plex/media/new/wanted.mp4", delay=3600, size=SIZE, duration_ms=60_000)
    scan = f"{plugin.plex.url}/library/sections/1/refresh"
    requests.get(scan, headers={"X-Plex-Token": plugin.plex.token}, timeout=5).raise_for_status()
    until(lambda: titled(plugin, rk, "Wanted"), 5, "written", plugin)
    reads = [r for r in plugin.plex.requests_matching("GET", "/library/metadata/") if str(rk) not in r["path"]]
    assert len(reads) <= 20


def test_a_job_is_not_held_hostage_when_plex_sends_no_event(plugin):
    """The listener is connected but Plex announces nothing: the timed retry still runs."""
    plugin.env["STASH2PLEX_RANDOM_SEED"] = "8"  # first retry 6.8 s later
    sid = add_scene(plugin, "/stash/media/quiet.mp4", "Quiet")
    plugin.hook(create_context(sid))
    until(lambda: plugin.plex.notifications.listening == 1, 15, "the drainer listens")
    until(lambda: caught_up(plugin), 10, "the listener's catch-up on connecting", plugin)
    plugin.plex.notifications.muted = True
    rk = plugin.plex.add_item(1, "/plex/media/quiet.mp4", size=SIZE, duration_ms=60_000)
    until(lambda: plugin.plex.item(rk)["fields"]["title"] == "Quiet", 15, "written", plugin)
    assert "go now" not in plugin.drainer_log()


def caught_up(plugin) -> bool:
    """The listener's catch-up (a look at the libraries) came after its handshake."""
    paths = [r["path"] for r in plugin.plex.requests]
    handshake = max(i for i, p in enumerate(paths) if p.startswith("/:/websocket"))
    return "/library/sections" in paths[handshake:]


def test_the_listener_connects_again_after_plex_closes_or_drops_it(plugin):
    plugin.env["STASH2PLEX_RANDOM_SEED"] = SEED
    sid = add_scene(plugin, "/stash/media/later.mp4", "Later")
    plugin.hook(create_context(sid))
    notes = plugin.plex.notifications
    until(lambda: notes.connections == 1 and notes.listening == 1, 15, "the drainer listens")
    notes.close_all()  # a clean close: plexapi's thread just ends
    until(lambda: notes.connections == 2 and notes.listening == 1, 10, "listening again", plugin)
    notes.drop_all()  # the TCP connection cut (a PMS restart)
    until(lambda: notes.connections == 3 and notes.listening == 1, 10, "listening again", plugin)
    rk = plugin.plex.add_item(1, "/plex/media/later.mp4", size=SIZE, duration_ms=60_000)
    until(lambda: plugin.plex.item(rk)["fields"]["title"] == "Later", 5, "written", plugin)


def test_health_check_says_whether_the_notification_websocket_connects(plugin):
    run = plugin.task("health_check")
    assert run.output["plex"]["notifications"] is True, run.stderr
    plugin.plex.notifications.refuse = True  # e.g. a proxy that does not pass websockets
    run = plugin.task("health_check")
    assert run.output["plex"]["notifications"] is False
    assert any("notifications cannot be read" in p and "503" in p for p in run.output["problems"])


def test_watch_stays_connected_until_sigterm(plugin, tmp_path):
    import signal

    proc = start_watch(plugin, tmp_path / "watch.log")
    try:
        notes = plugin.plex.notifications
        until(lambda: notes.listening == 1 or proc.poll() is not None, 20, "watch listens")
        assert proc.poll() is None
        notes.drop_all()
        until(lambda: notes.connections == 2 and notes.listening == 1, 10, "watch listens again")
        # The kernel may hand SIGTERM to any thread; CPython runs the handler in the main
        # thread only, when that thread runs: here it lands on another one, as it did in CI.
        to_a_thread(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)  # within docker stop's 10 s, with room
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = (tmp_path / "watch.log").read_text()
    assert proc.returncode == 0, err
    assert "listening to Plex's notifications" in err and "stopped watching Plex" in err
    assert notes.listening == 0


def test_a_plex_that_closes_each_connection_at_once_is_tried_again_later_and_later(plugin, tmp_path):
    """Plex (or a proxy in front of it) accepts the websocket and closes it at once, every
    time: each such connection counts as a failed one, so the waits between them grow (it
    was connected again at once: hundreds of handshakes a second)."""
    notes = plugin.plex.notifications
    notes.close_at_once = True
    proc = start_watch(plugin, tmp_path / "watch.log")
    try:
        until(lambda: notes.connections >= 2 or proc.poll() is not None, 20, "watch connects, then again")
        time.sleep(2.0)  # watch runs on: the next wait is 2 to 4 s
        opened = notes.connections
    finally:
        proc.kill()
        proc.wait()
    assert opened <= 3, f"{opened} connections"
    assert "closed the notification websocket" in (tmp_path / "watch.log").read_text()


def to_a_thread(pid: int, signum: int) -> None:
    """``signum`` to a thread of ``pid`` other than its main one (Linux's tgkill; elsewhere
    to the process, where the kernel picks the thread)."""
    import os
    from pathlib import Path

    tasks = Path(f"/proc/{pid}/task")
    syscall = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine) if tasks.is_dir() else None
    others = sorted(int(t.name) for t in tasks.iterdir() if int(t.name) != pid) if syscall else []
    if not others:
        os.kill(pid, signum)
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(syscall, pid, others[0], signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill of thread {others[0]} of {pid}")


def test_a_flood_of_notifications_costs_a_few_plex_reads_and_a_stop_after_it_goes_at_once(plugin, tmp_path):
    """10,000 timeline frames for one item in a burst, then a playback stops: the flood is two
    looks at the item (the first at once, the newest folded into one a window later), and the
    stop is not queued behind it (unfolded, the flood's 10,000 reads came first). However fast
    the listener reads frames: its event thread is held (in the playing frame's session look-up)
    until it has read them all, so they are all queued at once when it goes on."""
    from tests.emulators.plex_notify import timeline

    sid, rk = synced_scene(plugin)
    notes = plugin.plex.notifications
    with watching_resume(plugin, tmp_path / "watch.log") as log:
        reads = len(plugin.plex.metadata_reads(rk))
        with answer_held(plugin.plex, "/status/sessions") as asked:
            session = plugin.plex.start_playback(rk)
            assert asked.wait(5), "the session looked up"
            notes.flood(timeline(rk, 1, 5, "Synced 1", int(time.time()) + 5), 10_000)
            plugin.plex.stop_playback(session, 125_000)
            notes.read_all(timeout=60)
        until(lambda: plugin.stash.scene(sid).get("resume_time") == 125.0, 10, f"the stop acted on {log.read_text()}")
        until(lambda: len(plugin.plex.metadata_reads(rk)) - reads >= 3, 10, "the flood's folded look")
        quiet(lambda: len(plugin.plex.metadata_reads(rk)), 2 * WINDOW_S)  # nothing more is held
    looks = [r["time"] for r in plugin.plex.metadata_reads(rk)[reads:]]
    stop_written = plugin.stash.graphql_requests("S2PResume")[-1]["time"]
    assert len([t for t in looks if t < stop_written]) == 2  # the flood's first look, the stop's
    assert len(looks) == 3  # and the flood's newest, folded: nothing more


@contextmanager
def answer_held(plex, path: str):
    """The first request to ``path`` is answered when the block ends (its client waits for it);
    yields an Event set when it arrived."""
    import threading

    arrived, release = threading.Event(), threading.Event()

    def hold(record: dict) -> None:
        if record["path"] == path and not arrived.is_set():
            arrived.set()
            release.wait(60)

    plex.on_request = hold
    try:
        yield arrived
    finally:
        release.set()
        plex.on_request = None


def quiet(count, for_s: float, timeout: float = 30.0) -> None:
    """Return once ``count()`` has not changed for ``for_s`` seconds."""
    deadline, last, since = time.monotonic() + timeout, count(), time.monotonic()
    while time.monotonic() - since < for_s:
        assert time.monotonic() < deadline, f"still changing after {timeout} s"
        time.sleep(POLL_S)
        if (now := count()) != last:
            last, since = now, time.monotonic()


@contextmanager
def watching_resume(plugin, log):
    """``watch`` with ``import_resume``, past its first look and listening; killed at the end."""
    plugin.configure(import_resume=True)
    watch = start_watch(plugin, log)
    try:
        until(lambda: "resume points go to Stash from now on" in log.read_text(), 20, "the first look")
        until(lambda: plugin.plex.notifications.listening == 1, 10, "watch listens")
        yield log
    finally:
        watch.kill()
        watch.wait()


# -- plays -------------------------------------------------------------------------------------
def start_watch(plugin, log_path):
    from tests.conftest import STASH_API_KEY
    from tests.runner import start_command

    env = {**plugin.env, "STASH2PLEX_STASH_URL": plugin.stash.url, "STASH2PLEX_STASH_API_KEY": STASH_API_KEY}
    return start_command(["watch"], env, log_path)


@contextlib.contextmanager
def watching(plugin, log_path, poll_s: float = 0.3):
    """``watch`` running (its timer every ``poll_s``) and listening, killed at the end."""
    plugin.env["STASH2PLEX_WATCH_POLL_S"] = str(poll_s)
    watch = start_watch(plugin, log_path)
    try:
        until(lambda: plugin.plex.notifications.listening == 1, 20, "watch listens")
        yield watch
    finally:
        watch.kill()
        watch.wait()


def synced_scene(plugin, n: int = 1) -> tuple[int, int]:
    sid, rk = plugin.add_scene(n)
    plugin.hook(plugin.stash.update_scene(sid, title=f"Synced {n}"))
    plugin.wait_drained()
    return sid, rk


def test_plex_plays_reach_stash_exactly_once_across_a_sigkill_of_watch(plugin, tmp_path):
    plugin.configure(import_plays=True)
    sid, rk = synced_scene(plugin)
    log = tmp_path / "watch.log"
    watch = start_watch(plugin, log)
    try:
        until(lambda: "go to Stash from now on" in log.read_text(), 20, "the first pass", None)
        until(lambda: plugin.plex.notifications.listening == 1, 10, "watch listens")
        start = int(time.time()) + 1
        apart = 61  # s: plays of one item closer than its duration (60 s) are one viewing
        for i in range(5):
            plugin.plex.play(rk, viewed_at=start + apart * i)
        until(lambda: plugin.stash.play_writes >= 2, 10, f"plays arrive {log.read_text()}")
        watch.kill()  # SIGKILL, wherever it is
        watch.wait()
        for i in range(5, 10):
            plugin.plex.play(rk, viewed_at=start + apart * i)
        watch = start_watch(plugin, log)
        until(lambda: len(plugin.stash.scene_plays(sid)) >= 10, 20, "every play in Stash")
        until(lambda: plugin.plex.notifications.listening == 1, 10, "listening again")
        writes = plugin.stash.play_writes
        plugin.plex.notifications.publish(plex_stopped(rk))  # a re-read of the same history
        plugin.plex.play(rk, viewed_at=start + apart * 10)  # … and one more play to know it was read
        until(lambda: len(plugin.stash.scene_plays(sid)) >= 11, 10, "the last play")
    finally:
        watch.kill()
        watch.wait()
    assert plugin.stash.scene_plays(sid) == list(range(start, start + apart * 11, apart))
    assert plugin.stash.play_writes == writes + 1


def plex_stopped(rk: int) -> dict:
    from tests.emulators.plex_notify import playing

    return playing("99", rk, 1000, "stopped")


def task(plugin, mode: str, **extra: str):
    from tests.runner import run_plugin, task_document

    return run_plugin(task_document(plugin.connection, mode, **extra), env=plugin.env)


def test_the_import_task_brings_older_plays_once_and_previews_them_first(plugin):
    sid, rk = synced_scene(plugin)
    plugin.plex.add_item(1, "/plex/media/not-ours.mp4")  # no scene: its plays are left alone
    for t in (1_600_000_000, 1_600_000_100):
        plugin.plex.play(rk, viewed_at=t)
    plugin.plex.play(rk, account_id=7, viewed_at=1_600_000_200)  # another Plex user
    run = task(plugin, "import_plays", dry_run="true")
    assert run.output["plays_to_add"] == 2 and run.output["accounts"] == [1], run.stderr
    assert plugin.stash.scene_plays(sid) == []
    run = plugin.task("import_plays")
    assert run.output["plays_added"] == 2, run.stderr
    assert plugin.stash.scene_plays(sid) == [1_600_000_000, 1_600_000_100]
    run = plugin.task("import_plays")
    assert run.output["plays_added"] == 0 and run.output["plays_known"] == 2
    plugin.configure(plays_accounts="1, 7")
    run = plugin.task("import_plays")
    assert run.output["plays_added"] == 1 and run.output["accounts"] == [1, 7]
    assert plugin.stash.scene_plays(sid) == [1_600_000_000, 1_600_000_100, 1_600_000_200]


def test_plays_of_a_scene_deleted_in_stash_are_skipped_and_the_others_imported(plugin):
    gone, gone_rk = synced_scene(plugin, 1)
    sid, rk = synced_scene(plugin, 2)
    plugin.plex.play(gone_rk, viewed_at=1_600_000_000)
    plugin.plex.play(rk, viewed_at=1_600_000_050)
    plugin.stash.delete_scene(gone)
    run = task(plugin, "import_plays")
    assert run.error is None, run.stderr
    assert run.output["plays_added"] == 1
    assert plugin.stash.scene_plays(sid) == [1_600_000_050]


# -- ratings and resume points -------------------------------------------------------------------
def rate_in_plex(plugin, rk: int, rating: float) -> None:
    import requests

    url = f"{plugin.plex.url}/:/rate"
    params = {"key": rk, "identifier": "com.plexapp.plugins.library", "rating": rating}
    requests.put(url, params=params, headers={"X-Plex-Token": plugin.plex.token}, timeout=5).raise_for_status()


def test_a_rating_set_on_each_side_in_turn_ends_equal_on_both_without_a_write_loop(plugin, tmp_path):
    plugin.configure(import_ratings=True)
    sid, rk = synced_scene(plugin)
    log = tmp_path / "watch.log"
    with watching(plugin, log):
        rate_in_plex_at(plugin, rk, 8, plugin.stash.updated_ts(sid) + 1)  # the user rates in Plex …
        until(lambda: plugin.stash.scene(sid)["rating100"] == 80, 10, f"in Stash {log.read_text()}")
        plugin.hook(plugin.stash.hook_contexts[-1])  # … our sceneUpdate fired the scene hook
        plugin.wait_drained()
        rates_before = len(plugin.plex.rate_requests())  # the test's own one: the hook wrote nothing back
        assert rates_before == 1
        rated_at = plugin.plex.item(rk)["lastRatedAt"]
        plugin.stash.clock = lambda: max(time.time(), rated_at + 1.0)  # a second later, without waiting
        plugin.hook(plugin.stash.update_scene(sid, rating100=40))  # then in Stash
        plugin.wait_drained()
        until(lambda: plugin.plex.item(rk)["fields"]["userRating"] == "4", 10, "in Plex")
        time.sleep(1.0)  # several polls see Plex's new lastRatedAt
    assert plugin.stash.scene(sid)["rating100"] == 40 and plugin.plex.item(rk)["fields"]["userRating"] == "4"
    assert len(plugin.plex.rate_requests()) == rates_before + 1  # the Stash rating, once
    assert len(plugin.stash.graphql_requests("S2PRate")) == 1  # the Plex rating, once


def watch_once(plugin) -> None:
    """``watch --once``: what ``watch`` does on its timer, once (a scheduled job)."""
    import os
    import sys

    from tests.conftest import STASH_API_KEY
    from tests.runner import REPO, run_command

    env = {**os.environ, **plugin.env, "STASH2PLEX_STASH_URL": plugin.stash.url}
    env["STASH2PLEX_STASH_API_KEY"] = STASH_API_KEY
    code, _, err = run_command([sys.executable, str(REPO / "Stash2Plex.py"), "watch", "--once"], env, 60)
    assert code == 0 and "not brought to Stash" not in err, err


def rate_in_plex_at(plugin, rk: int, rating: float, at: float) -> None:
    """A user's rating in Plex that Plex dates ``at`` (its clock, set for the request)."""
    plugin.plex.clock = lambda: at
    try:
        rate_in_plex(plugin, rk, rating)
    finally:
        plugin.plex.clock = time.time


def test_the_later_rating_wins_when_both_sides_change_whichever_runs_first(plugin):
    """Found by the convergence model's ratings (tests/convergence.py). A Stash rating still
    queued when the user rates in Plex a second later: the sync kept writing Stash's older
    rating over Plex's (and marked it its own). A Plex rating given 0.6 s after a Stash change
    that was synced already (the same second on both servers' whole-second stamps): Stash's
    ``updated_at`` against Plex's ``lastRatedAt`` called it a tie, Stash's, and wrote the older
    Stash rating back over it; only Plex's rating changed since both were seen, so it wins."""
    from tests.runner import drainer_lock_held

    plugin.configure(import_ratings=True)
    queued_sid, queued_rk = synced_scene(plugin)
    synced_sid, synced_rk = synced_scene(plugin, 2)
    watch_once(plugin)  # the first look: ratings are read from now on
    with drainer_lock_held(plugin.data_dir):  # the drainer is busy elsewhere: the job waits
        plugin.hook(plugin.stash.update_scene(queued_sid, rating100=40))
    rate_in_plex_at(plugin, queued_rk, 8, plugin.stash.updated_ts(queued_sid) + 1)
    saved = int(time.time()) + 2
    plugin.stash.clock = lambda: saved + 0.2
    plugin.hook(plugin.stash.update_scene(synced_sid, rating100=40))
    plugin.wait_drained()
    plugin.stash.clock = time.time
    rate_in_plex_at(plugin, synced_rk, 8, saved + 0.8)  # 0.6 s after the Stash save
    plugin.task("process_queue")
    plugin.wait_drained()
    assert plugin.plex.item(queued_rk)["fields"]["userRating"] == "8"  # Plex's, later, kept
    assert plugin.stash.scene(queued_sid)["rating100"] == 80  # and brought to Stash by the sync
    plugin.hook(plugin.stash.hook_contexts[-1])  # the hook our sceneUpdate fired: nothing written back
    plugin.wait_drained()
    watch_once(plugin)
    assert plugin.plex.item(synced_rk)["fields"]["userRating"] == "8"  # Plex's, 0.6 s later, kept
    assert plugin.stash.scene(synced_sid)["rating100"] == 80
    plugin.hook(plugin.stash.hook_contexts[-1])
    plugin.wait_drained()
    watch_once(plugin)  # nothing more to do: no loop
    assert len(plugin.plex.rate_requests()) == 2 + 1  # the user's two, the sync's 4.0
    assert len(plugin.stash.graphql_requests("S2PRate")) == 2


def test_a_stopped_playback_brings_the_owners_resume_point_to_stash(plugin, tmp_path):
    from tests.emulators.plex_notify import playing

    sid, rk = synced_scene(plugin)
    with watching_resume(plugin, tmp_path / "watch.log"):
        plugin.plex.set_view_offset(rk, 125_000)
        plugin.plex.notifications.publish(playing("5", rk, 125_000, "stopped"))
        until(lambda: plugin.stash.scene(sid).get("resume_time") == 125.0, 10, "resume point in Stash")
        plugin.plex.play(rk)  # watched to the end: Plex forgets the resume point, so does Stash
        until(lambda: plugin.stash.scene(sid).get("resume_time") == 0.0, 10, "resume point cleared")
    assert plugin.stash.activity_writes == 2


# -- drift -----------------------------------------------------------------------------------------
def edit_in_plex(plugin, rk: int, title: str) -> None:
    """What Plex Web sends when a user edits an item's title (the field is then locked)."""
    import requests

    params = {"type": 1, "id": rk, "title.value": title, "title.locked": 1}
    url = f"{plugin.plex.url}/library/sections/1/all"
    requests.put(url, params=params, headers={"X-Plex-Token": plugin.plex.token}, timeout=5).raise_for_status()


def test_watch_repairs_a_plex_edit_of_an_item_we_own_unless_plex_edits_are_preserved(plugin, tmp_path):
    sid, rk = synced_scene(plugin)
    other_sid, other_rk = synced_scene(plugin, 2)
    plugin.configure(preserve_plex_edits=False)
    log = tmp_path / "watch.log"
    watch = start_watch(plugin, log)
    try:
        until(lambda: plugin.plex.notifications.listening == 1, 20, "watch listens")
        time.sleep(1.1)  # Plex dates the edit in whole seconds: after our sync
        writes = len(plugin.plex.edit_requests())
        edit_in_plex(plugin, rk, "Renamed in Plex")
        until(lambda: plugin.plex.item(rk)["fields"]["title"] == "Synced 1", 10, f"repaired {log.read_text()}")
        assert "changed in Plex: title; repairing" in log.read_text()
        assert len(plugin.plex.edit_requests()) == writes + 2  # the user's edit and one repair: no echo loop
    finally:
        watch.kill()
        watch.wait()

    plugin.configure(preserve_plex_edits=True)
    watch = start_watch(plugin, log)
    try:
        until(lambda: plugin.plex.notifications.listening == 1, 20, "watch listens")
        time.sleep(1.1)
        edit_in_plex(plugin, other_rk, "Kept in Plex")
        time.sleep(2)
    finally:
        watch.kill()
        watch.wait()
    assert plugin.plex.item(other_rk)["fields"]["title"] == "Kept in Plex"
    assert plugin.stash.scene(other_sid)["title"] == "Synced 2"


def test_with_trigger_plex_scan_our_scan_and_plexs_answer_close_the_loop(plugin):
    """Our scan makes Plex add the file before the listener is even connected: the catch-up
    on connecting finds it, and the job goes without waiting for its timed retry."""
    plugin.env["STASH2PLEX_RANDOM_SEED"] = SEED
    plugin.configure(trigger_plex_scan=True)
    rk = plugin.plex.schedule_item(1, "/plex/media/new/scanned.mp4", delay=3600, size=SIZE, duration_ms=60_000)
    sid = add_scene(plugin, "/stash/media/new/scanned.mp4", "Scanned")
    plugin.hook(create_context(sid))
    until(lambda: titled(plugin, rk, "Scanned"), 5, "written", plugin)
    assert len(plugin.plex.scan_requests()) == 1
    assert "waiting job(s) now; they go now" in plugin.drainer_log()


def titled(plugin, rk: int, title: str) -> bool:
    try:
        return plugin.plex.item(rk)["fields"]["title"] == title
    except KeyError:  # not in Plex yet
        return False


def test_whether_a_watch_runs_shows_on_the_page_and_in_health_check(plugin, tmp_path):
    """Plays, resume points and ratings come back only while a watch runs: say whether one does."""
    import os
    import signal
    import sys

    from tests.conftest import STASH_API_KEY
    from tests.runner import REPO, run_command
    from tests.test_ui_modes import operation

    env = {**os.environ, **plugin.env, "STASH2PLEX_STASH_URL": plugin.stash.url}
    env["STASH2PLEX_STASH_API_KEY"] = STASH_API_KEY
    code, _, err = run_command([sys.executable, str(REPO / "Stash2Plex.py"), "watch", "--once"], env, 60)
    assert code == 0 and "watch --once: import_plays, import_resume and import_ratings are all off" in err, err
    assert operation(plugin, mode="ui_status").output["watch"] == {
        "running": False,
        "since": None,
        "needed_for": [],
        "problem": False,
        "message": "no watch is running (needed only for import_plays, import_resume or import_ratings)",
    }
    plugin.configure(import_plays=True, import_ratings=True)
    health = task(plugin, "health_check").output
    assert health["watch"]["problem"] is True and health["ok"] is False
    assert health["watch"]["message"].startswith("import_plays, import_ratings are on, but no watch is running")
    watch = start_watch(plugin, tmp_path / "watch.log")
    try:
        until(lambda: "watching Plex" in (tmp_path / "watch.log").read_text(), 20, "watch runs")
        state = operation(plugin, mode="ui_status").output["watch"]
        assert state["running"] is True and state["since"] and state["problem"] is False
        assert state["message"] == f"a watch is running (since {state['since']})"
        assert task(plugin, "health_check").output["watch"]["running"] is True
        code, _, err = run_command([sys.executable, str(REPO / "Stash2Plex.py"), "watch"], env, 60)
        assert code == 1 and f"a watch is running on this data folder already (since {state['since']})" in err
    finally:
        watch.send_signal(signal.SIGTERM)
        watch.wait()
    assert operation(plugin, mode="ui_status").output["watch"]["running"] is False
