"""Cumulative statistics (the state database): the store, the worker's per-batch bookkeeping, the
``queue_status`` rendering, and end to end through the emulators (hooks, the drainer,
tasks, a SIGKILL)."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import io
import signal
import time

from app.root import App
from core.errors import DiskRefused
from core.log import StashLog
from sync_queue.job import BULK, INTERACTIVE, Job, Taken
from sync_queue.queue import JobQueue
from sync_queue.sqlite import STATE_FILE
from sync_queue.stats import Delta, StatsStore, iso_local
from tasks.queue_status import format_status
from tests.runner import drainer_lock_held, start_plugin, task_document
from validation.metadata import scene_from_stash
from validation.plugin_input import ServerConnection
from worker.breaker import BreakerPolicy, BreakerStore, CircuitBreaker
from worker.pipeline import Pipeline
from worker.worker import Parts, Worker

NOW = 1_790_000_000.0  # a fixed wall-clock time for the worker and the store


def local(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


EMPTY = {
    "synced": 0,
    "unchanged": 0,
    "gone": 0,
    "posters": 0,
    "failed": {},
    "failed_total": 0,
    "retried": {},
    "retried_total": 0,
    "timed_jobs": 0,
    "avg_plex_ms": None,
    "last_success_at": None,
    "last_failure_at": None,
    "last_failure": None,
}


# -- the store -----------------------------------------------------------------------------
def test_empty_store_snapshot_and_empty_delta_writes_nothing(tmp_path):
    store = StatsStore(tmp_path)
    store.record(Delta())
    assert not (tmp_path / STATE_FILE).exists()
    assert store.snapshot() == EMPTY
    store.close()


def test_deltas_add_up_with_exact_values(tmp_path):
    first = Delta()
    first.synced(NOW, poster_uploaded=True)
    first.synced(NOW + 1)
    first.unchanged(NOW + 2, 3)
    first.gone()
    first.timed(0.100)
    first.timed(0.050)
    first.failed("PlexNotFound", "not in Plex", NOW + 3)
    first.retried("PlexNotFound", "no item yet", NOW + 4)
    second = Delta()
    second.failed("AmbiguousMatch", "two items", NOW + 10)
    second.failed("PlexNotFound", "still not in Plex", NOW + 11)
    second.timed(0.030)
    second.unchanged(NOW + 5, 0)  # nothing skipped: neither a count nor a success time
    store = StatsStore(tmp_path)
    store.record(first)
    store.record(second)
    assert store.snapshot() == {
        "synced": 2,
        "unchanged": 3,
        "gone": 1,
        "posters": 1,
        "failed": {"PlexNotFound": 2, "AmbiguousMatch": 1},
        "failed_total": 3,
        "retried": {"PlexNotFound": 1},
        "retried_total": 1,
        "timed_jobs": 3,
        "avg_plex_ms": 60.0,
        "last_success_at": local(NOW + 2),
        "last_failure_at": local(NOW + 11),
        "last_failure": {"error_class": "PlexNotFound", "message": "still not in Plex", "dead_lettered": True},
    }
    store.close()


def test_counts_survive_reopening_and_a_late_batch_never_hides_a_newer_time(tmp_path):
    newer, older = Delta(), Delta()
    newer.synced(NOW + 100)
    newer.retried("PlexTimeout", "slow", NOW + 100)
    older.synced(NOW)
    older.failed("InvalidMetadata", "no files", NOW)
    store = StatsStore(tmp_path)
    store.record(newer)
    store.close()
    reopened = StatsStore(tmp_path)
    reopened.record(older)
    snap = reopened.snapshot()
    assert snap["synced"] == 2 and snap["failed"] == {"InvalidMetadata": 1} and snap["retried"] == {"PlexTimeout": 1}
    assert snap["last_success_at"] == local(NOW + 100) and snap["last_failure_at"] == local(NOW + 100)
    assert snap["last_failure"] == {"error_class": "PlexTimeout", "message": "slow", "dead_lettered": False}
    reopened.close()


def test_failure_message_is_one_short_line():
    delta = Delta()
    delta.failed("PlexBadRequest", "line one\nline two   " + "x" * 500, NOW)
    message = delta.last_failure["message"]
    assert message.startswith("line one line two xxx") and len(message) == 200 and message.endswith("…")


def test_iso_local_keeps_the_offset():
    assert iso_local(None) is None
    assert iso_local(NOW) == local(NOW)
    assert dt.datetime.fromisoformat(iso_local(NOW)).utcoffset() is not None


# -- the worker's bookkeeping: the real Stash client and syncer against the emulators, the queue in the data folder --
class CountingStats(StatsStore):
    def __init__(self, directory) -> None:
        super().__init__(directory)
        self.recorded: list[Delta] = []

    def record(self, delta: Delta) -> None:
        self.recorded.append(delta)
        super().record(delta)


def library(plugin) -> dict[str, int]:
    """One scene to sync, one synced already, one two Plex items fit, one not in Plex, one
    without a file and one id Stash does not have."""
    synced, _ = plugin.add_scene(1)
    same, _ = plugin.add_scene(2, title="Same")
    for folder in ("x", "y"):  # two same-name candidates, strict matching: AmbiguousMatch
        plugin.plex.add_item(1, f"/plex/media/{folder}/clip.mp4", size=77, duration_ms=60000)
    clip = [{"path": "/stash/media/clip.mp4", "size": 77, "duration": 60.0}]
    four = [{"path": "/stash/media/four.mp4", "size": 4, "duration": 60.0}]
    ambiguous = plugin.stash.add_scene(title="Clip", files=clip)
    missing = plugin.stash.add_scene(title="Four", files=four)
    no_file = plugin.stash.add_scene(title="No file", files=[])
    return {"synced": synced, "same": same, "ambiguous": ambiguous, "missing": missing, "no_file": no_file}


@contextlib.contextmanager
def real_worker(plugin, ticks: list[float], breaker: CircuitBreaker | None = None):
    """A worker on the plugin's own parts (App), with the clock at NOW and Plex work timed by ``ticks``."""
    app = App(ServerConnection.model_validate(plugin.connection), plugin.env, StashLog(io.StringIO()), plugin.data_dir)
    stats = CountingStats(plugin.data_dir)
    timer = iter(ticks)
    parts = Parts(
        queue=JobQueue(plugin.data_dir / "queue", consumer=True, clock=lambda: NOW),
        dlq=app.dlq(),
        ledger=app.ledger(),
        stash=app.stash(),
        syncer=app.syncer(),
        breaker=breaker or app.breaker(),
        stats_store=stats,
        log=StashLog(io.StringIO()),
        clock=lambda: NOW,
        timer=lambda: next(timer),
    )
    try:
        yield Worker(parts, concurrency=1), stats, app
    finally:
        parts.queue.close()
        stats.close()
        app.close()


def process_batch(worker, batch: list[Taken]) -> None:
    """Work through these taken jobs only (the steps ``Worker.run`` takes for each chunk)."""
    chunks = [batch]
    Pipeline(worker, lambda: chunks.pop() if chunks else []).run()


def taken(*ids: int) -> list[Taken]:
    return [Taken(Job(scene_id=sid, priority=INTERACTIVE), pqid=sid, table="interactive") for sid in ids]


def test_worker_records_each_batch_once_with_timed_plex_work(plugin):
    ids = library(plugin)
    gone = max(ids.values()) + 1  # not in Stash
    # concurrency 1: three scenes reach Plex, one after another, and take 0.2 s, 0.05 s, 0.35 s
    with real_worker(plugin, [10.0, 10.2, 20.0, 20.05, 30.0, 30.35]) as (worker, stats, app):
        same = scene_from_stash(app.stash().scenes_by_id([ids["same"]])[ids["same"]])
        app.syncer().sync(same, None, scan_allowed=False)  # written before: unchanged
        process_batch(worker, taken(*ids.values(), gone))
        assert len(stats.recorded) == 1
        snapshot = stats.snapshot()
        last_failure = snapshot.pop("last_failure")
        assert snapshot == {
            "synced": 1,
            "unchanged": 1,
            "gone": 1,
            "posters": 1,
            "failed": {"AmbiguousMatch": 1, "InvalidMetadata": 1},
            "failed_total": 2,
            "retried": {"PlexNotFound": 1},
            "retried_total": 1,
            "timed_jobs": 3,
            "avg_plex_ms": 200.0,
            "last_success_at": local(NOW),
            "last_failure_at": local(NOW),
        }
        assert last_failure["error_class"] in ("AmbiguousMatch", "InvalidMetadata", "PlexNotFound")
        assert last_failure["dead_lettered"] is (last_failure["error_class"] != "PlexNotFound")
        # the run's own counter (a task's reply) is kept as before
        assert dict(worker.stats) == {"synced": 1, "posters": 1, "unchanged": 1, "gone": 1, "failed": 2, "retrying": 1}
        assert not worker.delta  # a fresh delta for the next batch
        process_batch(worker, taken(ids["same"]))
        assert len(stats.recorded) == 2 and stats.snapshot()["unchanged"] == 2


def test_jobs_of_one_scene_staged_together_sync_it_once_and_the_users_edit_is_the_one_kept(plugin):
    sid, rk = plugin.add_scene(1)
    with real_worker(plugin, [10.0, 10.2]) as (worker, stats, _):
        worker.log = StashLog(out := io.StringIO())
        bulk = Taken(Job(scene_id=sid, priority=BULK), pqid=7, table="bulk")
        process_batch(worker, [bulk, *taken(sid)])  # as deferred jobs of a scene in flight come back
        assert dict(worker.stats) == {"synced": 1, "posters": 1}
        assert f"\x01i\x02scene {sid} → Plex item {rk} (" in out.getvalue()  # the user's edit: at info


def test_a_data_file_the_disk_refuses_during_a_sync_is_logged_in_words_not_as_a_bug(plugin):
    """The ledger's file refused mid-sync (a full disk): the scene's log line names the file
    and what to do, as a task's reply does (sync_queue/sqlite.py ``in_words``), without the
    traceback of an unexpected error; the run stops on it, the job held with its budget (worker/settle.py)."""
    sid, _rk = plugin.add_scene(1)
    with real_worker(plugin, [10.0, 10.2]) as (worker, stats, app):
        worker.log = StashLog(out := io.StringIO())
        state = str(plugin.data_dir / STATE_FILE)

        def full(record) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", state)

        app.ledger().claim = full
        process_batch(worker, taken(sid))
        assert "Traceback" not in out.getvalue() and "unexpected" not in out.getvalue(), out.getvalue()
        assert isinstance(worker.abort_error, DiskRefused) and state in str(worker.abort_error)


def test_jobs_held_by_an_open_breaker_add_up_in_the_run_and_stay_out_of_stats_db(plugin, tmp_path):
    ids = list(library(plugin).values())
    policy = BreakerPolicy(threshold=1, recovery=30.0, first_probe=30.0)
    breaker = CircuitBreaker(BreakerStore(tmp_path / "breaker.json"), policy, clock=lambda: NOW)
    breaker.record_failure()  # Plex failed once: open, the next probe in 30 s
    with real_worker(plugin, [], breaker) as (worker, stats, _):
        process_batch(worker, taken(*ids[:2]))
        process_batch(worker, taken(*ids[2:]))
        assert dict(worker.stats) == {"waiting_for_plex": 5}
        assert worker.queue.parked_count() == 5 and worker.queue.next_due() == NOW + 30  # waiting, budget kept
        assert stats.snapshot() == EMPTY


def test_a_batch_that_ends_early_is_recorded_too(plugin):
    one, _ = plugin.add_scene(1)
    two, _ = plugin.add_scene(2)
    with real_worker(plugin, []) as (worker, stats, _):
        plugin.stash.stop()  # Stash is down: both wait (no retry spent), no Plex work
        process_batch(worker, taken(one, two))
        assert len(stats.recorded) == 1
        snap = stats.snapshot()
        assert (
            snap["retried"] == {} and snap["failed"] == {} and snap["timed_jobs"] == 0 and snap["avg_plex_ms"] is None
        )
        assert worker.queue.parked_count() == 2  # postponed, not retried
        assert dict(worker.stats) == {"waiting_for_stash": 2}


# -- rendering -------------------------------------------------------------------------------
def test_format_status_renders_queue_dlq_and_stats_lines():
    status = {
        "pending": 1234,
        "interactive": 4,
        "bulk": 1230,
        "in_flight": 0,
        "retrying": 2,
        "next_retry_at": "2026-11-26T10:05:00+00:00",
        "dlq": 3,
        "dlq_by_reason": {"PlexNotFound": 2, "AmbiguousMatch": 1},
        "dlq_newest": [
            {
                "scene_id": 7,
                "title": "Seven",
                "error_class": "PlexNotFound",
                "reason": "not in Plex",
                "attempts": 9,
                "failed_at": "2026-11-26T09:00:00+00:00",
            }
        ],
        "drainer_running": True,
        "last_sync": None,
        "synced_scenes": 5678,
        "last_drainer_error": None,
        "stats": {
            **EMPTY,
            "synced": 1234,
            "unchanged": 5678,
            "failed": {"PlexNotFound": 2, "AmbiguousMatch": 1},
            "failed_total": 3,
            "posters": 12,
            "timed_jobs": 1234,
            "avg_plex_ms": 84.4,
            "last_success_at": "2026-11-26T10:00:00+00:00",
            "last_failure_at": "2026-11-26T09:00:00+00:00",
            "last_failure": {"error_class": "PlexNotFound", "message": "not in Plex", "dead_lettered": True},
        },
    }
    assert format_status(status) == [
        "1,234 pending (2 waiting for a retry, the next at 2026-11-26T10:05:00+00:00), 3 in the dead-letter queue"
        "; 2 × PlexNotFound; 1 × AmbiguousMatch",
        "a background drainer is running; 5,678 scenes in the sync ledger; last sync never; last 'all'/'recent' never",
        "DLQ scene 7 'Seven': not in Plex",
        "synced 1,234, unchanged 5,678, failed 3 (PlexNotFound 2, AmbiguousMatch 1), retried 0, gone 0, "
        "posters 12, avg Plex 84 ms/job, last success 2026-11-26T10:00:00+00:00",
        "last failure 2026-11-26T09:00:00+00:00 (dead-lettered): PlexNotFound: not in Plex",
    ]


# -- end to end ----------------------------------------------------------------------------------
def stats_of(plugin) -> tuple[dict, object]:
    run = plugin.task("queue_status")
    assert run.error is None, run.stderr
    return run.output["stats"], run


def test_queue_status_shows_cumulative_stats_across_processes(plugin):
    a, _ = plugin.add_scene(1)
    b, _ = plugin.add_scene(2)
    for folder in ("x", "y"):  # two same-name candidates, strict matching: AmbiguousMatch
        plugin.plex.add_item(1, f"/plex/media/{folder}/clip.mp4", size=77, duration_ms=60000)
    c = plugin.stash.add_scene(title="Clip", files=[{"path": "/stash/media/clip.mp4", "size": 77, "duration": 60.0}])
    d = plugin.stash.add_scene(title="No file", files=[])  # InvalidMetadata
    started = time.time()
    contexts = {sid: plugin.stash.update_scene(sid, title=f"Edited {sid}") for sid in (a, b, c, d)}
    for sid in (a, b, c, d):
        assert plugin.hook(contexts[sid]).error is None
    plugin.wait_drained()
    assert plugin.hook(contexts[a]).error is None  # the same event again: nothing changed since
    plugin.wait_drained()

    stats, run = stats_of(plugin)
    assert "outcomes" not in run.output
    assert {k: stats[k] for k in ("synced", "unchanged", "gone", "posters", "failed", "failed_total", "retried")} == {
        "synced": 2,
        "unchanged": 1,
        "gone": 0,
        "posters": 2,
        "failed": {"AmbiguousMatch": 1, "InvalidMetadata": 1},
        "failed_total": 2,
        "retried": {},
    }
    assert stats["timed_jobs"] == 3  # a, b and c reached Plex; d failed before
    assert stats["avg_plex_ms"] > 0
    success = dt.datetime.fromisoformat(stats["last_success_at"])
    assert started - 1 <= success.timestamp() <= time.time() and success.utcoffset() is not None
    assert stats["last_failure"]["error_class"] in ("AmbiguousMatch", "InvalidMetadata")
    assert stats["last_failure"]["dead_lettered"] is True
    line = [m for m in run.messages("info") if m.startswith("synced ")]
    assert len(line) == 1 and line[0].startswith(
        "synced 2, unchanged 1, failed 2 (AmbiguousMatch 1, InvalidMetadata 1), retried 0, gone 0, posters 2, avg Plex "
    )
    assert "ms/job, last success 20" in line[0]

    # 'all': a and b are filtered out before queueing (unchanged); c and d fail again
    run_all = plugin.task("all")
    assert run_all.error is None and run_all.output["queued"] == 2 and run_all.output["failed"] == 2
    stats, _ = stats_of(plugin)
    assert (stats["synced"], stats["unchanged"], stats["failed"]) == (2, 3, {"AmbiguousMatch": 2, "InvalidMetadata": 2})
    assert stats["timed_jobs"] == 4
    # written by the drainer and the tasks, read here from the file by this process
    store = StatsStore(plugin.data_dir)
    assert store.snapshot() == stats
    store.close()


def test_counts_recorded_before_a_sigkill_survive_it(plugin, tmp_path):
    """Stash cancels a task with SIGKILL: every finished batch is already in stats.db."""
    total = 240  # long enough at 10 ms a request that the kill lands mid-run (stats are recorded each second)
    for n in range(total):
        plugin.add_scene(n)
    plugin.configure(plex_concurrency=1)
    plugin.plex.latency = 0.01  # 240 scenes of edit+poster at concurrency 1: seconds of work to kill it in
    proc = start_plugin(task_document(plugin.connection, "all"), plugin.env, tmp_path / "all.stderr")
    store = StatsStore(plugin.data_dir)
    try:
        deadline = time.monotonic() + 60
        while store.snapshot()["synced"] < 100 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "the task finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        after_kill = store.snapshot()
        assert 100 <= after_kill["synced"] < total  # the first batch survived; the one in flight did not finish
        plugin.configure()  # the rest at full speed: the kill has been tested
        plugin.plex.latency = 0
        run = plugin.task("process_queue")  # takes the killed batch's jobs back
        assert run.error is None, run.stderr[-2000:]
        final = store.snapshot()
        # each scene counted once (synced, or unchanged when the killed batch had written it),
        # except at most the one batch in flight at the kill
        assert total - 100 <= final["synced"] + final["unchanged"] <= total
        assert final["synced"] >= after_kill["synced"] and final["failed_total"] == 0
    finally:
        store.close()
        if proc.poll() is None:
            proc.kill()


def test_last_sync_tells_when_the_background_drainer_last_synced(plugin):
    sid, _ = plugin.add_scene(1)
    assert plugin.task("queue_status").output["last_sync"] is None
    assert plugin.hook(plugin.stash.update_scene(sid, title="Synced in the background")).error is None
    plugin.wait_drained()
    status = plugin.task("queue_status").output
    assert status["last_sync"] is not None and status["last_sync"] == status["stats"]["last_success_at"]
    assert status["last_full_sync"] is None  # no 'all'/'recent' ran


def test_queue_status_counts_the_entity_changes_waiting_to_fan_out(plugin):
    plugin.add_scene(1, tags=["Drama"])
    with drainer_lock_held(plugin.data_dir):  # no drainer takes the change meanwhile
        context = plugin.stash.rename_entity("tag", plugin.stash.entity_id("tag", "Drama"), "Melodrama")
        assert plugin.hook(context).error is None
        run = plugin.task("queue_status")
    assert run.error is None and run.output["entity_events"] == 1 and run.output["pending"] == 1, run.output
    assert any("1 tag/performer/studio/group changes to fan out" in m for m in run.messages("info")), run.logs
