"""Reliability end to end: SIGKILLs, concurrent hooks, Plex down or refusing the token,
the dead-letter tasks, and corrupt data files. Everything runs through the runner
against the emulators, exactly as Stash would run the plugin.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tests.runner import StartedRun, drainer_lock_held, kill_lock_holder, start_plugin, task_document

SEED = 20240229


# -- helpers ---------------------------------------------------------------------
def start_task(plugin, mode: str, log_dir: Path) -> tuple[StartedRun, Path]:
    """Start a task as ``run_plugin`` would, without waiting for it (so it can be killed)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stderr_path = log_dir / f"{mode}-{time.monotonic_ns()}.stderr"
    return start_plugin(task_document(plugin.connection, mode), plugin.env, stderr_path), stderr_path


def wait_for(predicate, timeout: float, what: str, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill_drainer(plugin) -> bool:
    """SIGKILL the drainer holding the lock (pid in the lock file); False when none runs."""
    if not plugin.drainer_busy():
        return False
    if not kill_lock_holder(plugin.data_dir / "drainer.lock"):
        return False
    wait_for(lambda: not plugin.drainer_busy(), 10, "the killed drainer's lock to be freed")
    return True


def status(plugin) -> dict:
    return plugin.status()


def hooks_concurrently(plugin, contexts: list[dict]) -> list:
    runs: list = [None] * len(contexts)

    def fire(i: int) -> None:
        runs[i] = plugin.hook(contexts[i])

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(len(contexts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return runs


def titles_match(plugin, scenes: dict[int, int]) -> list[int]:
    """Scene ids whose Plex item does not show the scene's current title."""
    return [
        sid for sid, rk in scenes.items() if plugin.plex.item(rk)["fields"]["title"] != plugin.stash.scene(sid)["title"]
    ]


# -- SIGKILL at random points ------------------------------------------------------
def test_sigkill_of_task_or_drainer_at_random_points_loses_nothing(plugin, tmp_path):
    rng = random.Random(SEED)
    scenes = dict(plugin.add_scene(n) for n in range(40))
    plugin.plex.latency = 0.02

    def edits_reach(n: int) -> None:  # the kill lands after a random number of Plex writes
        wait_for(lambda: len(plugin.plex.edit_requests()) >= n, 60, f"{n} Plex edits")

    resumed = drainers_killed = 0
    for round_no in range(6):
        for n, sid in enumerate(scenes):
            plugin.stash.update_scene(sid, title=f"Scene {n} v{round_no}")
        plugin.plex.clear_requests()
        task, _ = start_task(plugin, "all", tmp_path / "logs")
        wait_for(lambda t=task: plugin.plex.edit_requests() or t.poll() is not None, 60, "the first Plex edit")
        if round_no % 2 == 0:  # kill the task mid-way
            edits_reach(rng.randint(1, 27))
            task.kill()
            task.wait()
        else:  # kill the task at once, let a hook's drainer take over, kill the drainer mid-way
            task.kill()
            task.wait()
            first = next(iter(scenes))
            assert plugin.hook(plugin.stash.update_scene(first, title=f"Scene 0 v{round_no}")).error is None
            edits_reach(len(plugin.plex.edit_requests()) + rng.randint(1, 20))
            drainers_killed += kill_drainer(plugin)
        run = plugin.task("process_queue")
        assert run.error is None, run.stderr[-3000:]
        resumed += run.output["synced"] > 0
        wait_for(lambda: not plugin.drainer_busy(), 30, "the background drainer to finish")
        after = status(plugin)
        assert after["pending"] == 0 and after["dlq"] == 0, (round_no, after)
        assert titles_match(plugin, scenes) == [], f"round {round_no}: not synced"
    assert len(plugin.plex.items()) == 40
    assert resumed >= 4 and drainers_killed >= 2, (resumed, drainers_killed)  # the kills did land mid-way


# -- many hooks at once --------------------------------------------------------------
def test_sixteen_concurrent_hooks_while_a_drainer_runs(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(17))
    plugin.plex.latency = 0.05
    ids = list(scenes)
    first = plugin.hook(plugin.stash.update_scene(ids[0], title="First edit"))
    assert first.error is None
    wait_for(plugin.drainer_busy, 10, "the drainer to start")
    contexts = [plugin.stash.update_scene(sid, title=f"Concurrent {sid}") for sid in ids[1:]]
    runs = hooks_concurrently(plugin, contexts)
    for run in runs:
        assert run is not None and run.error is None, run and run.stderr
        assert run.returncode == 0
        assert "database is locked" not in run.stderr.lower()
    plugin.wait_drained(90)
    assert titles_match(plugin, scenes) == []
    assert "database is locked" not in plugin.drainer_log().lower()
    assert status(plugin)["dlq"] == 0


# -- Plex down ---------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["refused", "503"])
def test_plex_down_breaker_holds_requests_and_work_resumes_by_itself(plugin, fault):
    scenes = dict(plugin.add_scene(n) for n in range(20))
    plugin.plex.clear_requests()
    if fault == "refused":
        plugin.plex.refuse_connections()
    else:
        plugin.plex.fail_503 = True
    contexts = [plugin.stash.update_scene(sid, title=f"While down {sid}") for sid in scenes]
    runs = []
    if fault == "refused":  # bursts of five, as a bulk edit in Stash fires them, while a drainer runs
        for start in range(0, 20, 5):
            runs += hooks_concurrently(plugin, contexts[start : start + 5])
    else:  # all twenty wait for process_queue: one batch, the breaker must hold most of it back
        with drainer_lock_held(plugin.data_dir):
            runs += hooks_concurrently(plugin, contexts)
    assert all(run.error is None for run in runs), [r.stderr for r in runs if r.error]
    run = plugin.task("process_queue", timeout=120)
    assert run.error is None, run.stderr[-3000:]
    assert run.output["waiting"] == 20, run.output
    assert run.output["failed"] == 0
    assert 1 <= sum("Plex is unavailable" in m for m in run.messages("warning")) <= 2, run.stderr  # not per job
    during = status(plugin)
    assert during["dlq"] == 0 and during["pending"] == 20, during
    if fault == "503":
        # the breaker opens after 5 failures; every further try is a single probe
        assert len(plugin.plex.requests) <= 10, [r["path"] for r in plugin.plex.requests]
    breaker = json.loads((plugin.data_dir / "breaker.json").read_text())
    # each batch that met the outage counted once (one request, not one per scene)
    assert breaker["state"] in ("open", "half_open") or breaker["failures"] >= 1, breaker
    # process_queue starts a detached drainer for the waiting jobs before it replies; the
    # drainer takes the lock once it has started (a moment later, longer on a loaded machine)
    wait_for(plugin.drainer_busy, 15, "process_queue's background drainer to take the waiting jobs")
    if fault == "refused":
        plugin.plex.accept_connections()
    else:
        plugin.plex.fail_503 = False
    wait_for(lambda: not titles_match(plugin, scenes), 45, "the jobs to sync after Plex came back", step=0.2)
    plugin.wait_drained(30)
    assert status(plugin)["dlq"] == 0


# -- Plex rejecting the token ----------------------------------------------------------------
def test_plex_401_dead_letters_after_one_attempt_without_retry_storm(plugin):
    scenes = dict(plugin.add_scene(n) for n in range(5))
    plugin.plex.fail_401 = True
    plugin.plex.clear_requests()
    ids = list(scenes)
    assert plugin.hook(plugin.stash.update_scene(ids[0], title="Token test")).error is None
    wait_for(lambda: not plugin.drainer_busy() and status(plugin)["dlq"] == 1, 30, "the job to reach the DLQ")
    report = status(plugin)
    entry = report["dlq_newest"][0]
    assert entry["scene_id"] == ids[0] and entry["attempts"] == 1
    assert "token" in entry["reason"].lower() and entry["error_class"] == "PlexAuthError"
    assert report["pending"] == 0
    assert len(plugin.plex.requests) <= 2, [r["path"] for r in plugin.plex.requests]
    # a foreground run with several queued jobs stops at the first 401 and says why
    with drainer_lock_held(plugin.data_dir):
        for sid in ids[1:]:
            assert plugin.hook(plugin.stash.update_scene(sid, title=f"Token {sid}")).error is None
    plugin.plex.clear_requests()
    run = plugin.task("process_queue")
    assert run.error and "plex_token" in run.error, run.stderr
    assert ("error", run.error) in run.logs or any("token" in m for m in run.messages("error"))
    assert len(plugin.plex.requests) <= 4, [r["path"] for r in plugin.plex.requests]
    after = status(plugin)
    assert after["dlq"] + after["pending"] == 5, after  # nothing lost: each job is in the DLQ or queued


def test_a_dead_letter_entry_leaves_once_its_scene_syncs(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.plex.fail_401 = True
    assert plugin.hook(plugin.stash.update_scene(sid, title="Token refused")).error is None
    wait_for(lambda: not plugin.drainer_busy() and status(plugin)["dlq"] == 1, 30, "the job to reach the DLQ")
    plugin.plex.fail_401 = False  # the user fixed the token, then edits the scene again
    assert plugin.hook(plugin.stash.update_scene(sid, title="Token fixed")).error is None
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Token fixed"
    assert status(plugin)["dlq"] == 0


def test_a_corrupt_breaker_file_is_reset_and_said(plugin):
    sid, rk = plugin.add_scene(1)
    (plugin.data_dir).mkdir(parents=True, exist_ok=True)
    (plugin.data_dir / "breaker.json").write_text("{not json")
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert any("breaker.json is corrupt" in m and "reset to closed" in m for m in run.messages("warning")), run.logs
    assert plugin.plex.item(rk)["fields"]["title"] == "Scene 1"


# -- dead-letter tasks -------------------------------------------------------------------------
def _dlq_rows(plugin) -> list[tuple]:
    with sqlite3.connect(plugin.data_dir / "state.db") as conn:
        return conn.execute("SELECT scene_id, error_class, attempts FROM dlq ORDER BY scene_id").fetchall()


def test_dlq_tasks_group_retry_purge_clear(plugin):
    (a, ra), (b, rb) = plugin.add_scene(1), plugin.add_scene(2)
    c = plugin.stash.add_scene(title="No file", files=[])
    # C cannot be synced (no file): InvalidMetadata, straight to the DLQ
    assert plugin.hook(plugin.stash.update_scene(c, title="No file at all")).error is None
    plugin.wait_drained()
    # A and B meet a Plex that rejects the token
    plugin.plex.fail_401 = True
    with drainer_lock_held(plugin.data_dir):
        for sid in (a, b):
            assert plugin.hook(plugin.stash.update_scene(sid, title=f"Fixed later {sid}")).error is None
    run = plugin.task("process_queue")
    assert run.error and "token" in run.error
    for _ in range(3):  # one run stops at the first 401; a second run takes the rest
        if status(plugin)["pending"] == 0:
            break
        plugin.task("process_queue")
    report = plugin.task("queue_status")
    assert report.error is None
    summary = report.output
    assert summary["dlq"] == 3
    assert summary["dlq_by_reason"] == {"PlexAuthError": 2, "InvalidMetadata": 1}
    newest = {e["scene_id"]: e for e in summary["dlq_newest"]}
    assert set(newest) == {a, b, c}
    assert newest[c]["title"] == "No file at all" and "no files" in newest[c]["reason"]
    assert newest[a]["title"] == f"Fixed later {a}" and "token" in newest[a]["reason"].lower()
    infos = " | ".join(report.messages("info"))
    assert "3 in the dead-letter queue" in infos and "2 × PlexAuthError" in infos and "No file at all" in infos

    # the same scene failing again replaces its entry: one entry per scene
    assert plugin.hook(plugin.stash.update_scene(c, title="Still no file")).error is None
    plugin.wait_drained()
    assert [row[0] for row in _dlq_rows(plugin)] == sorted([a, b, c])

    # fix both causes, retry: everything syncs with a fresh budget
    plugin.plex.fail_401 = False
    plugin.stash.update_scene(c, files=[{"path": "/stash/media/scene-c.mp4", "size": 77, "duration": 60.0}])
    rc = plugin.plex.add_item(1, "/plex/media/scene-c.mp4", size=77, duration_ms=60000)
    retry = plugin.task("retry_dlq")
    assert retry.error is None and retry.output == "3 dead-letter entries queued again"
    plugin.wait_drained()
    assert status(plugin)["dlq"] == 0
    assert titles_match(plugin, {a: ra, b: rb, c: rc}) == []

    # purge removes only entries older than 30 days; clear removes the rest
    plugin.plex.fail_401 = True
    for sid in (a, b):
        plugin.hook(plugin.stash.update_scene(sid, title=f"Again {sid}"))
        wait_for(lambda: not plugin.drainer_busy(), 20, "the drainer")
    plugin.task("process_queue")
    assert len(_dlq_rows(plugin)) == 2
    with sqlite3.connect(plugin.data_dir / "state.db") as conn:
        conn.execute("UPDATE dlq SET failed_at = failed_at - 31 * 86400 WHERE scene_id = ?", (a,))
    purge = plugin.task("purge_dlq")
    assert purge.error is None and purge.output.startswith("deleted 1 ")
    assert [row[0] for row in _dlq_rows(plugin)] == [b]
    cleared = plugin.task("clear_dlq")
    assert cleared.error is None and cleared.output == "deleted 1 dead-letter entries"
    assert _dlq_rows(plugin) == []

    # clear_queue drops pending jobs and leaves the DLQ alone
    plugin.plex.fail_401 = False
    plugin.hook(plugin.stash.update_scene(c, files=[]))  # back into the DLQ
    plugin.wait_drained()
    assert len(_dlq_rows(plugin)) == 1
    with drainer_lock_held(plugin.data_dir):
        for sid in (a, b):
            plugin.hook(plugin.stash.update_scene(sid, title=f"Dropped {sid}"))
        assert status(plugin)["pending"] == 2
    dropped = plugin.task("clear_queue")  # it takes the drainer lock itself
    assert dropped.error is None and dropped.output == "removed 2 pending jobs"
    after = status(plugin)
    assert after["pending"] == 0 and after["dlq"] == 1


# -- corrupt data files ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["queue/data.db", "state.db"])
def test_corrupt_data_file_is_named_and_left_untouched(plugin, name):
    sid, _ = plugin.add_scene(1)
    contexts = [plugin.stash.update_scene(sid, title="Before corruption")]
    if name == "state.db":  # give the DLQ a row, so its table has pages to corrupt
        contexts.append(plugin.stash.update_scene(plugin.stash.add_scene(title="x", files=[]), title="No file"))
    # Synced by a task that has exited when it answers: a background drainer that is still
    # closing its databases could write into the file after the test has corrupted it.
    with drainer_lock_held(plugin.data_dir):
        assert all(plugin.hook(context).error is None for context in contexts)
    assert plugin.task("process_queue").error is None
    path = plugin.data_dir / name
    assert path.exists()
    for extra in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        extra.unlink(missing_ok=True)
    original = path.read_bytes()
    noise = random.Random(SEED).randbytes(max(len(original), 8192))
    plugin.stash.update_scene(sid, title="After corruption")
    # whole: not a database at all; pages: a valid header and schema, garbage in the tables
    for how, garbage in (("whole", noise), ("pages", original[:4096] + noise[4096:])):
        for extra in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            extra.unlink(missing_ok=True)
        path.write_bytes(garbage)
        _each_task_names_the_file_and_leaves_it(plugin, name, path, garbage, how)
        if name == "queue/data.db":  # a hook never opens it: the edit waits in the inbox beside it
            hook = plugin.hook(plugin.stash.update_scene(sid, title="Hook on corrupt queue"))
            assert hook.error is None and hook.output == f"scene {sid} queued", how
        kill_drainer(plugin)
        assert path.read_bytes() == garbage, how


def _each_task_names_the_file_and_leaves_it(plugin, name: str, path: Path, garbage: bytes, how: str) -> None:
    """Each task that opens the file says which file and what to do; none touches it."""
    opens = {
        "queue_status": True,
        "process_queue": True,
        "all": True,
        "retry_dlq": name == "state.db",
        "purge_dlq": name == "state.db",
        "clear_queue": name == "queue/data.db",
    }
    for mode, must_fail in opens.items():
        run = plugin.task(mode)
        if must_fail:
            assert run.error, (how, mode, run.output)
            assert str(path) in run.error and "move the file" in run.error, (how, mode, run.error)
            assert any(str(path) in m for m in run.messages("error")), (how, mode)
        assert path.read_bytes() == garbage, f"{how}: {mode} changed {path}"
