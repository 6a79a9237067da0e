"""Recovery without clicks, and failures named by their real cause (issue 13).

End to end through the real plugin process and the emulators, as Stash runs it: a
user's task probes Plex at once; a short outage costs seconds; a drainer follows
changed settings; a handover request dies with its requester; a Stash outage or an
expired session costs no retry budget; one bad queue row costs one job; one job per
scene; clear_queue stops in-flight work.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
import time

import pytest

from sync_queue.job import Job
from sync_queue.queue import JobQueue
from tests.conftest import PLEX_TOKEN, STASH_COOKIE, Plugin, _stop_drainers
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import create_context, drainer_lock_held
from tests.test_reliability import hooks_concurrently, start_task, status, titles_match, wait_for

# The breaker's real timing (the ``real_breaker`` fixture; docs/configuration.md): the first probe
# 2 s after Plex went away, each failed probe doubling the wait, up to 60 s. Written out, not
# asked of worker/breaker.py, so a changed schedule fails these tests.
PROBE_WAITS = (2.0, 4.0, 8.0, 16.0, 32.0, 60.0)


def _open_breaker(plugin, probes: int) -> None:
    """The breaker as a Plex outage leaves it: open since now, ``probes`` probes failed."""
    from app.root import _fingerprint

    plugin.data_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "state": "open",
        "failures": 5 + probes,
        "opened_at": time.time(),
        "probe_started_at": 0.0,
        "probes": probes,
        "target": _fingerprint([plugin.plex.url, plugin.plex.token]),
    }
    (plugin.data_dir / "breaker.json").write_text(json.dumps(state))


def _breaker(plugin) -> dict:
    """The shared breaker file (replaced atomically: never half written)."""
    return json.loads((plugin.data_dir / "breaker.json").read_text())


def _probe_due(plugin) -> float:
    """When the open breaker lets the next probe go to Plex (epoch seconds, as the emulator's log)."""
    breaker = _breaker(plugin)
    assert breaker["state"] == "open", breaker
    return breaker["opened_at"] + PROBE_WAITS[min(breaker["probes"], len(PROBE_WAITS) - 1)]


def _first_request_since(plugin, count: int) -> dict:
    """The first request Plex received after its first ``count`` (the websocket's handshakes aside)."""
    return next(r for r in plugin.plex.requests[count:] if not r["path"].startswith("/:/websocket"))


@contextlib.contextmanager
def _stopping_drainers(data_dir):
    try:
        yield
    finally:
        _stop_drainers(data_dir)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def real_breaker(plugin):
    """The breaker's real timing (probe waits 2, 4, 8 … 60 s), not the suite's 2 s cap."""
    plugin.env["STASH2PLEX_BREAKER_RECOVERY_S"] = "60"
    return plugin


# -- 1. no dead minute after an outage ----------------------------------------------------
def test_a_click_after_a_long_outage_probes_plex_at_once(real_breaker):
    plugin = real_breaker
    scenes = dict(plugin.add_scene(n) for n in range(5))
    _open_breaker(plugin, probes=5)  # a long outage: the drainer's next probe is a minute away
    due = _probe_due(plugin)
    plugin.plex.refuse_connections()
    for sid in scenes:
        assert plugin.hook(plugin.stash.update_scene(sid, title=f"After outage {sid}")).error is None
    wait_for(plugin.drainer_busy, 10, "the drainer to start")
    plugin.plex.accept_connections()
    seen = len(plugin.plex.requests)
    run = plugin.task("process_queue")  # the click
    assert run.error is None, run.stderr[-3000:]
    assert titles_match(plugin, scenes) == [] and run.output["synced"] == 5, run.output
    # Order, not seconds: the click asked Plex before the breaker would have let anyone (a
    # click that waited for the drainer's probe would have come a minute after the outage began).
    first = _first_request_since(plugin, seen)
    assert first["time"] < due, (first, due, _breaker(plugin))


def test_a_short_outage_heals_by_itself_within_seconds(real_breaker):
    plugin = real_breaker
    scenes = dict(plugin.add_scene(n) for n in range(4))
    _open_breaker(plugin, probes=0)  # Plex just went away: probes after 2 s, then 4 s more …
    plugin.plex.refuse_connections()
    for sid in scenes:
        assert plugin.hook(plugin.stash.update_scene(sid, title=f"Short outage {sid}")).error is None
    wait_for(lambda: _breaker(plugin).get("probes", 0) >= 1, 15, "the first probe (at 2 s) to fail", step=0.05)
    due = _probe_due(plugin)  # the second probe: 4 s after the first failed
    seen = len(plugin.plex.requests)
    plugin.plex.accept_connections()
    wait_for(lambda: not titles_match(plugin, scenes), 30, "the jobs to sync by themselves", step=0.1)
    # Order, not seconds: healed by the probe the breaker let go once its wait ended (not sooner),
    # before a third would have been due; the 30 s above only stops a hung test.
    first = _first_request_since(plugin, seen)
    assert due <= first["time"] < due + PROBE_WAITS[2], (first, due)
    breaker = json.loads((plugin.data_dir / "breaker.json").read_text())
    assert breaker["state"] == "closed", breaker


def test_a_probe_job_that_fails_on_its_own_does_not_hold_the_others_back(real_breaker):
    """Issue 25.4: the first job after an outage is a scene Plex has not scanned yet. The
    breaker's verdict is its own request, so the ten good edits behind it sync at once
    (they waited for the 120 s probe timeout, synced 0 of 10)."""
    plugin = real_breaker
    files = [{"path": "/stash/media/not-scanned-yet.mp4", "size": 7, "duration": 60.0}]
    missing = plugin.stash.add_scene(title="Not in Plex yet", files=files)
    scenes = dict(plugin.add_scene(n) for n in range(10))
    _open_breaker(plugin, probes=5)
    with drainer_lock_held(plugin.data_dir):  # queued in this order; the task takes them
        for sid in [missing, *scenes]:
            assert plugin.hook(plugin.stash.update_scene(sid, title=f"After outage {sid}")).error is None
    run = plugin.task("process_queue")
    assert run.error is None, run.stderr[-3000:]
    assert run.output["synced"] == 10, run.output
    assert titles_match(plugin, scenes) == []
    assert _breaker(plugin)["state"] == "closed", _breaker(plugin)


@pytest.mark.parametrize("task", ["health_check", "reconcile"])
def test_a_task_that_reaches_plex_closes_the_breaker(real_breaker, task):
    plugin = real_breaker
    plugin.add_scene(1)
    _open_breaker(plugin, probes=5)
    run = plugin.task(task)
    assert run.error is None and run.output.get("ok", True) is True, run.output
    assert json.loads((plugin.data_dir / "breaker.json").read_text())["state"] == "closed"


def test_a_changed_plex_url_resets_the_breaker(real_breaker):
    plugin = real_breaker
    scenes = dict(plugin.add_scene(n) for n in range(2))
    _open_breaker(plugin, probes=5)  # open for the old address: a minute to the next probe
    plugin.configure(plex_url=f"http://localhost:{plugin.plex.port}")  # the user saved a new plex_url
    for sid in scenes:
        assert plugin.hook(plugin.stash.update_scene(sid, title=f"New address {sid}")).error is None
    wait_for(lambda: not titles_match(plugin, scenes), 15, "the drainer to sync without waiting", step=0.1)
    assert "circuit breaker starts closed again" in plugin.drainer_log()


# -- 2. a drainer never outlives its settings ---------------------------------------------
def test_a_drainer_waiting_on_an_old_plex_url_restarts_with_the_new_one(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(2))
    first, second = scenes
    plugin.configure(plex_url=f"http://127.0.0.1:{_closed_port()}")  # a mistyped port
    assert plugin.hook(plugin.stash.update_scene(first, title="Typo fixed")).error is None
    wait_for(lambda: "Plex is unavailable" in plugin.drainer_log(), 15, "the drainer to meet the wrong URL")
    plugin.configure()  # the user fixes plex_url in Stash, then edits another scene
    assert plugin.hook(plugin.stash.update_scene(second, title="Typo fixed")).error is None
    wait_for(lambda: not titles_match(plugin, scenes), 20, "both scenes to sync with the new URL", step=0.1)
    assert "settings changed" in plugin.drainer_log()


# -- 3. a cancelled task strands nothing ---------------------------------------------------
def _handover_requested(plugin) -> bool:
    """A task waits for the drainer: it holds drainer.handover.lock (older code: the file exists)."""
    held = plugin.data_dir / "drainer.handover.lock"
    if held.exists():
        return subprocess.run(["flock", "-s", "-n", str(held), "true"], capture_output=True).returncode != 0
    return (plugin.data_dir / "drainer.handover").exists()


def test_a_killed_task_waiting_for_the_handover_strands_no_job(plugin, tmp_path):
    scenes = dict(plugin.add_scene(n) for n in range(7))
    *batch, late = scenes
    plugin.configure(plex_concurrency=1)  # one job at a time on a slow Plex: a long batch
    with drainer_lock_held(plugin.data_dir):
        hooks_concurrently(plugin, [plugin.stash.update_scene(sid, title=f"Handover {sid}") for sid in batch])
    plugin.plex.latency = 0.4
    assert plugin.hook(plugin.stash.update_scene(batch[0], title=f"Handover {batch[0]}")).error is None
    wait_for(lambda: plugin.plex.edit_requests(), 30, "the drainer's first edit")
    plugin.plex.stall = 4.0  # the drainer's next Plex request hangs: the task surely waits for it
    assert plugin.hook(plugin.stash.update_scene(late, title=f"Handover {late}")).error is None  # after the take
    task, _ = start_task(plugin, "process_queue", tmp_path / "logs")
    wait_for(lambda: _handover_requested(plugin), 30, "the task to ask for the handover", step=0.01)
    task.kill()  # Stash cancels the task while it waits: SIGKILL
    task.wait()
    plugin.plex.latency = plugin.plex.stall = 0.0
    wait_for(lambda: not titles_match(plugin, scenes), 30, "every job to sync without another event", step=0.1)


# -- 4. Stash trouble does not burn the retry budget -------------------------------------------
def test_stash_unreachable_jobs_wait_and_resume_by_themselves(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(3))
    plugin.plex.refuse_connections()
    for sid in scenes:
        assert plugin.hook(plugin.stash.update_scene(sid, title=f"Stash back {sid}")).error is None
    wait_for(lambda: "Plex is unavailable" in plugin.drainer_log(), 15, "the jobs to wait for Plex")
    plugin.stash.stop()
    plugin.plex.accept_connections()
    wait_for(lambda: "Stash is unavailable" in plugin.drainer_log(), 15, "the drainer to meet Stash down")
    during = status(plugin)
    assert during["dlq"] == 0 and during["retrying"] == 0 and during["pending"] == 3, during
    plugin.stash.start()  # same port
    wait_for(lambda: not titles_match(plugin, scenes), 20, "the jobs to sync once Stash answers", step=0.1)
    assert status(plugin)["dlq"] == 0


def test_an_expired_session_leaves_the_jobs_queued_and_the_next_hook_resumes(plex, tmp_path):
    now = [time.time()]
    with StashEmulator(session_cookie=STASH_COOKIE) as stash, _stopping_drainers(tmp_path / "data"):
        stash.clock = lambda: now[0]
        data_dir = tmp_path / "data"  # a Stash with a login and no API key: the plugin uses the session
        plugin = Plugin(stash, plex, data_dir, {"STASH2PLEX_DATA_DIR": str(data_dir)})
        plugin.configure()
        scenes = dict(plugin.add_scene(n) for n in range(2))
        plex.refuse_connections()
        for sid in scenes:
            assert plugin.hook(stash.update_scene(sid, title=f"Session {sid}")).error is None
        wait_for(lambda: "Plex is unavailable" in plugin.drainer_log(), 15, "the jobs to wait for Plex")
        now[0] += 3700  # no request to Stash for over an hour: the drainer's session expired
        plex.accept_connections()
        wait_for(lambda: not plugin.drainer_busy(), 20, "the drainer to stop on the refused session")
        after = status(plugin)
        assert after["dlq"] == 0 and after["retrying"] == 0 and after["pending"] == 2, after
        assert "API key" in plugin.drainer_log()
        first = next(iter(scenes))
        assert plugin.hook(stash.update_scene(first, title="Fresh session")).error is None
        plugin.wait_drained(30)
        assert plex.item(scenes[first])["fields"]["title"] == "Fresh session"
        assert titles_match(plugin, scenes) == []
        assert status(plugin)["dlq"] == 0


def test_a_screenshot_refused_by_the_expired_session_holds_the_job_after_its_fields(plex, tmp_path):
    """The scene was read before the session expired, its screenshot after (a run that
    waited for Plex meanwhile): Stash redirects the download to its login page (302). That is the refused
    session (held: the job keeps its budget), not a poster failure (retried, budget spent)."""
    import io
    import random

    from app.root import App
    from core.errors import StashRefused
    from core.log import StashLog
    from validation.metadata import scene_from_stash
    from validation.plugin_input import ServerConnection
    from worker.settle import Action, decide

    now = [time.time()]
    with StashEmulator(session_cookie=STASH_COOKIE) as stash:
        stash.clock = lambda: now[0]
        plugin = Plugin(stash, plex, tmp_path / "data", {"STASH2PLEX_DATA_DIR": str(tmp_path / "data")})
        plugin.configure()
        sid, rk = plugin.add_scene(1)
        stash.update_scene(sid, title="Read in time")
        connection = ServerConnection.model_validate(plugin.connection)
        app = App(connection, plugin.env, StashLog(io.StringIO()), data_dir=plugin.data_dir)
        try:
            syncer = app.syncer()
            scene = scene_from_stash(app.stash().scenes_by_id([sid])[sid])
            assert scene.screenshot
            now[0] += 3700  # the session expired before the screenshot was read
            with pytest.raises(StashRefused) as refused:
                syncer.sync(scene, None, scan_allowed=False)
            assert plex.item(rk)["fields"]["title"] == "Read in time"  # the fields went first
            record = app.ledger().get_many([sid])[sid]
            assert record.poster_hash is None and not record.state_hash  # the next try does the poster
        finally:
            app.close()
    decision = decide(Job(sid), refused.value, now[0], random.Random(1))
    assert (decision.action, decision.job.attempt) == (Action.HOLD, 0)


# -- 5. one bad queue row costs one job ---------------------------------------------------------
def test_an_undecodable_row_is_set_aside_alone(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(4))
    with drainer_lock_held(plugin.data_dir):
        queue = JobQueue(plugin.data_dir / "queue")  # rows of the queue itself (a hook's wait in the inbox)
        for sid in scenes:
            plugin.stash.update_scene(sid, title=f"Kept {sid}")
            assert queue.put(Job(sid))
        queue.close()
        with sqlite3.connect(plugin.data_dir / "queue" / "data.db") as conn:
            rows = conn.execute("SELECT _id FROM ack_queue_interactive ORDER BY _id").fetchall()
            conn.execute("UPDATE ack_queue_interactive SET data = X'FF00' WHERE _id = ?", rows[1])
    run = plugin.task("process_queue")
    assert run.error is None, run.stderr[-3000:]
    bad = list(scenes)[1]
    assert titles_match(plugin, scenes) == [bad], run.output  # every other job synced
    assert any("1 unreadable queue entry set aside" in m for m in run.messages("warning")), run.logs
    report = plugin.task("queue_status")
    assert report.output["pending"] == 0 and report.output["set_aside"] == 1, report.output
    assert any("1 unreadable queue entry set aside" in m for m in report.messages("info")), report.logs


# -- 6. duplicates ------------------------------------------------------------------------------
def test_one_waiting_job_per_scene_and_one_poster_upload(plugin):
    sid, rk = plugin.add_scene(1)
    other, _ = plugin.add_scene(2)
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(create_context(sid)).output == f"scene {sid} queued"  # the scan's bulk job
        assert plugin.hook(plugin.stash.update_scene(sid, title="Edited")).output == f"scene {sid} queued"
        waiting = status(plugin)
        assert (waiting["pending"], waiting["interactive"], waiting["bulk"]) == (1, 1, 0), waiting  # interactive wins
        # a stale "already queued" mark (its job is gone) must not swallow the next event
        with sqlite3.connect(plugin.data_dir / "queue" / "data.db") as conn:
            table = (
                "s2p_waiting"
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name='s2p_waiting'").fetchone()
                else "s2p_pending"
            )
            width = len(conn.execute(f"SELECT * FROM {table} LIMIT 1").description)
            conn.execute(
                f"INSERT INTO {table} VALUES ({', '.join('?' * width)})", (other, "interactive", 0.0, 999999)[:width]
            )
        assert plugin.hook(plugin.stash.update_scene(other, title="Not swallowed")).output == f"scene {other} queued"
    plugin.plex.clear_requests()
    run = plugin.task("process_queue")
    assert run.error is None and run.output["synced"] == 2, run.output
    assert len(plugin.plex.upload_requests()) == 2  # one poster per scene, not one per event
    assert plugin.plex.item(rk)["fields"]["title"] == "Edited"


def test_all_twice_during_an_outage_leaves_one_job_per_scene(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(4))
    plugin.plex.refuse_connections()
    for _ in range(2):
        run = plugin.task("all")
        assert run.error is None, run.stderr[-2000:]
    assert status(plugin)["pending"] == 4
    plugin.plex.accept_connections()
    run = plugin.task("process_queue")
    assert run.error is None and titles_match(plugin, scenes) == [], run.output


def test_clear_queue_stops_in_flight_work(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(12))
    with drainer_lock_held(plugin.data_dir):
        hooks_concurrently(plugin, [plugin.stash.update_scene(sid, title=f"Cleared {sid}") for sid in scenes])
    plugin.configure(plex_concurrency=1)  # one job at a time, on a slow Plex: about a second a job,
    plugin.plex.latency = 0.5  # so the drainer is mid-way when the user clears the queue
    assert plugin.hook(plugin.stash.update_scene(next(iter(scenes)), title="Cleared")).error is None  # starts a drainer
    wait_for(lambda: plugin.plex.edit_requests(), 20, "the first edit")
    run = plugin.task("clear_queue")
    assert run.error is None, run.stderr[-2000:]
    landed = len(plugin.plex.edit_requests())
    assert landed < 12, "the drainer finished before the clear: nothing to stop"
    time.sleep(1.0)
    assert len(plugin.plex.edit_requests()) == landed  # nothing lands after the reply
    assert status(plugin)["pending"] == 0


# -- 10. secrets in every shape ------------------------------------------------------------------
PASSWORD = "pa55-w0rd-s3cr3t"


def test_url_credentials_never_reach_a_file_or_a_reply_and_files_are_private(plugin):
    sid, _ = plugin.add_scene(1)
    plugin.configure(plex_url=f"http://admin:{PASSWORD}@127.0.0.1:{plugin.plex.port}")
    plugin.plex.fail_edits = 400  # Plex answers 400: the error text carries the request URL
    assert plugin.hook(plugin.stash.update_scene(sid, title="Secret URL")).error is None
    wait_for(lambda: not plugin.drainer_busy() and status(plugin)["dlq"] == 1, 30, "the job to reach the DLQ")
    report = plugin.task("queue_status")
    assert PASSWORD not in report.stdout and PASSWORD not in report.stderr
    assert "admin:" not in json.dumps(report.output)
    for path in plugin.data_dir.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
    for name in ("state.db", "queue/data.db", "drainer.log"):
        assert (plugin.data_dir / name).stat().st_mode & 0o077 == 0, name


@pytest.mark.parametrize("mode", ["process_queue", "health_check"])
def test_a_token_with_a_non_latin1_character_is_a_clear_setting_error(plugin, mode):
    plugin.configure(plex_token=PLEX_TOKEN + "€")
    run = plugin.task(mode)
    text = run.error or json.dumps(run.output, ensure_ascii=False)
    assert "plex_token" in text and "'€'" in text, text
    assert "Traceback" not in run.stderr and "unexpected" not in run.stderr, run.stderr[-2000:]
