"""The background drainer: a detached process that empties the queue, then exits.

A hook starts it (``Stash2Plex.py drain``); it takes the drainer lock or exits. The worker
runs in a daemon thread; the main thread hands over to a task that asks and starts over
when the saved settings change (every ``SETTINGS_CHECK_S``, or on a hook's nudge). It
lingers ``LINGER_S`` when idle and looks once more after releasing the lock
(docs/architecture.md, "The queue and the drainer").
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from core.backoff import probe_wait
from core.errors import ConfigError, DiskRefused, PlexAuthError, Stash2PlexError, StashUnavailable
from core.log import Redactor, StashLog, capture_library_logs
from core.platform import HeldLock, lower_priority, retry_for
from sync_queue.sqlite import in_words
from validation.plugin_input import ServerConnection

if TYPE_CHECKING:
    from app.root import App
    from sync_queue.queue import JobQueue
    from worker.worker import Worker

WATCH_INTERVAL_S = 0.25
SETTINGS_CHECK_S = 30.0
STASH_WAIT_MAX_S = 600.0  # a drainer that never got its settings gives up waiting for Stash
NUDGE_MIN_GAP_S = 1.0  # a burst of hooks costs at most one settings request a second
LOCK_PATIENCE_S = 1.0  # a look at the lock (is_locked) holds it for milliseconds; a drainer for long
LINGER_S = 15.0  # how long an idle drainer waits for more work before it exits
LINGER_POLL_S = 0.2
FIX_CHECK_S = 3.0  # after a wrong setting stopped the run: how often the saved settings are compared
FIX_WAIT_S = 600.0  # and for how long
FIX_WAIT_LOCK = "drainer.fix.lock"  # held by the one drainer waiting for the fix
STARTS_OVER = "the plugin settings changed; the drainer starts over with them"
DISK_WAIT = "disk"  # drain_once: our own disk refused (full, a file held); wait, then again


def _worker_once_stash_answers(app: App, queue: JobQueue, stop: threading.Event) -> Worker | None:
    """The worker, built once Stash answers (it holds the settings): an unreachable Stash
    is probed again after 2, 4, 8 … 60 s, for at most ``STASH_WAIT_MAX_S`` (then the
    drainer stops; its jobs stay queued); None when the drainer was told to stop."""
    failures, started = 0, time.monotonic()
    while True:
        try:
            return app.worker(queue, listen=True)
        except StashUnavailable as exc:
            if time.monotonic() - started > STASH_WAIT_MAX_S:
                raise  # the jobs stay queued; the next hook or task starts a drainer again
            if failures == 0:
                app.log.warning(f"Stash is unavailable ({exc}); the drainer waits for it, the jobs stay queued")
            if stop.wait(probe_wait(failures)):
                return None
            failures += 1


def _work(app: App, lock: HeldLock, stop: threading.Event, outcome: dict) -> None:
    from worker.pipeline import work

    try:
        with app.consumer(lock=lock) as queue:
            worker = _worker_once_stash_answers(app, queue, stop)
            if worker is None:
                return
            linger_s = app.seconds("STASH2PLEX_DRAINER_LINGER_S", LINGER_S, zero_ok=True)
            outcome["stats"] = work(worker, stop=stop, wait_for_retries=True)
            while worker.abort_error is None and _work_arrives(app, queue, stop, linger_s):
                if app.settings_changed():  # saved while it lingered: the new job goes by them, as in a task
                    outcome["settings_changed"] = True
                    return
                outcome["stats"] = work(worker, stop=stop, wait_for_retries=True)
        if worker.abort_error is not None:  # the token or a setting is wrong: stop, and say so
            outcome["error"] = worker.abort_error
    except Exception as exc:  # logged with its type; the jobs stay queued
        outcome["error"] = exc


def _work_arrives(app: App, queue: JobQueue, stop: threading.Event, linger_s: float) -> bool:
    """Wait up to ``linger_s`` for a job (or an entity event) to be ready (with 0: one look);
    False when none came or the drainer was told to stop."""
    if linger_s:  # from here on a job that arrives waits for a settings check (tests wait for this line)
        app.log.debug(f"the queue is empty; the drainer waits up to {linger_s:g} s for more")
    ready = retry_for(lambda: stop.is_set() or queue.ready_count() > 0, linger_s, LINGER_POLL_S, sleep=stop.wait)
    return ready and not stop.is_set()


class SettingsWatch:
    """When to compare the settings: every ``SETTINGS_CHECK_S``, and soon after a nudge."""

    def __init__(self, app: App, clock: Callable[[], float] = time.monotonic) -> None:
        self.app, self.clock = app, clock
        self.checked_at = clock()
        self.nudge_seen = app.nudged_at()

    def changed(self) -> bool:
        now = self.clock()
        nudged = self.app.nudged_at()
        due = now - self.checked_at >= SETTINGS_CHECK_S
        if nudged != self.nudge_seen and now - self.checked_at >= NUDGE_MIN_GAP_S:
            self.nudge_seen, due = nudged, True
        if not due:
            return False
        self.checked_at = now
        return self.app.settings_changed()


def drain_once(app: App, log: StashLog, lock: HeldLock) -> bool | str | None:
    """Run the worker in a daemon thread until the queue is empty or a task takes over,
    then let go of the lock. True: a clean run; False: it stopped on an error; None: the
    settings changed; ``DISK_WAIT``: our own disk refused (full, or a data file held by
    another program), the lock still held for the wait (``_disk_back``)."""
    stop = threading.Event()
    outcome: dict = {}
    thread = threading.Thread(target=_work, args=(app, lock, stop, outcome), name="s2p-worker", daemon=True)
    thread.start()
    watch = SettingsWatch(app)
    try:
        while thread.is_alive():
            thread.join(WATCH_INTERVAL_S)
            if app.handover_requested():
                stop.set()
            elif not stop.is_set() and watch.changed():
                outcome["settings_changed"] = True  # as the worker notes it between runs (_work)
                stop.set()
    finally:  # a look failing here: the syncs in flight settle before the lock goes (_rounds)
        stop.set()
        thread.join()
    # the disk refusing waits for it (DISK_WAIT); a damaged data folder never heals by itself: stop
    error = (in_words(outcome["error"]) or outcome["error"]) if "error" in outcome else None
    if not isinstance(error, DiskRefused):
        lock.release()  # before the last look (main) and the wait for a fix (_settings_fixed)
    if outcome.get("settings_changed"):
        log.info(STARTS_OVER)
        if error is None:
            return None
    if error is not None:
        from app.root import fix_for

        # recorded for the next hook and queue_status before the log says it: the line is the end
        reason = str(error) if isinstance(error, Stash2PlexError) else f"{type(error).__name__}: {error}"
        app.health().failing(log.redact(reason), fix_for(error, app.surface))
        log.error(f"drainer stopped: {type(error).__name__}: {error}")
        if isinstance(error, (ConfigError, PlexAuthError)) and _settings_fixed(app, log):
            return None
        return DISK_WAIT if isinstance(error, DiskRefused) else False
    from worker.progress import counts_text

    app.health().ok()  # a clean run: an old reason would only mislead the hooks and queue_status
    log.info(f"drainer finished: {counts_text(outcome.get('stats') or {})}")
    return True


def _settings_fixed(app: App, log: StashLog) -> bool:
    """After a wrong setting or token stopped the run, watch the saved settings (one small
    request every ``FIX_CHECK_S``, for at most ``FIX_WAIT_S``): saving the fix in Stash
    runs no hook, and the queued jobs should not wait for the next edit. False when time
    ran out or another drainer or a task took the lock meanwhile (this one does not hold
    it while it waits: a hook or a task starts over as usual), or another drainer waits
    already (``FIX_WAIT_LOCK``: each hook starts a drainer, and each would wait)."""
    wait_s = app.seconds("STASH2PLEX_DRAINER_FIX_WAIT_S", FIX_WAIT_S, zero_ok=True)
    waiting = HeldLock(app.data_dir / FIX_WAIT_LOCK)
    if wait_s == 0 or not waiting.acquire():
        return False  # another drainer waits for the fix already, and drains every job when it comes
    try:
        log.info(f"the queued jobs wait for the fix; the settings are checked every {FIX_CHECK_S:.0f} s")
        changed = retry_for(lambda: app.drainer_running() or app.settings_changed(), wait_s, FIX_CHECK_S)
        if not changed or app.drainer_running():
            return False
        log.info(STARTS_OVER)
        return True
    finally:
        waiting.release()


def _disk_back(app: App, log: StashLog, lock: HeldLock, failures: int) -> bool:
    """After our own disk refused, still holding the lock of the run it stopped (never let go
    in between: a hook then would start a second drainer, and this one would give up):
    wait 2, 4, 8 … 60 s (``probe_wait``) while jobs wait. True: try again, the lock held.
    False, the lock let go: nothing waits (looked at once more after letting go, as the
    hooks expect), or a task asked for the lock."""
    if not app.work_waits():
        return app.let_go(lock, start=False)  # work waiting again: this drainer goes on
    wait = probe_wait(failures)
    log.info(f"the jobs wait for the disk; the drainer tries again in {wait:.0f} s")
    if retry_for(app.handover_requested, wait, WATCH_INTERVAL_S):
        lock.release()  # a task asked: it goes first
        return False
    return True


def main(stdin: TextIO, stderr: TextIO, env: dict[str, str]) -> int:
    from app.root import STASH_UI, App

    log = StashLog(stderr, Redactor(), plain=True)
    try:
        payload = json.loads(stdin.read())
        connection = ServerConnection.model_validate(payload["server_connection"])
    except (ValueError, KeyError, TypeError) as exc:
        log.error(f"drainer started without a valid connection on stdin: {type(exc).__name__}")
        return 2
    capture_library_logs(log)
    lower_priority()  # the hooks Stash waits for, and Stash itself, come first

    def new_app() -> App:  # new parts: clients, index, the breaker's binding to the settings
        overrides, surface = payload.get("settings_overrides") or {}, payload.get("surface") or STASH_UI
        return App(connection, env, log, Path(payload["data_dir"]), overrides, surface, log_read=False)

    return _rounds(new_app, log)


def _rounds(new_app: Callable[[], App], log: StashLog) -> int:
    """Drain until no job waits; new parts (``new_app``) after the settings changed or the disk came back."""
    app = new_app()
    lock = HeldLock(app.lock_path)
    disk_failures = 0
    try:
        app.take_over(start_drainer=False)  # the public plugin's jobs, for this drainer
        while True:
            if not lock.acquire(patience=LOCK_PATIENCE_S):  # held still after a disk wait
                return 0  # another drainer (or a task) is at work
            clean = drain_once(app, log, lock)  # lets go of the lock, unless the disk refused
            if clean == DISK_WAIT:
                app.close()  # its connections may be mid-transaction: new parts for the next try
                if not _disk_back(app, log, lock, disk_failures):
                    return 0
                disk_failures += 1
            if clean is None or clean == DISK_WAIT:  # new settings, or a disk that came back
                app.close()
                app = new_app()
                continue
            disk_failures = 0
            # pending, not only ready: jobs this drainer held back when a handover request
            # came (its requester may have died since) are left 'unack' until resumed
            if not clean or app.handover_requested() or not app.producer_queue().pending():
                return 0
            log.info("jobs arrived while finishing; draining again")
            if app.settings_changed():  # the hook found the lock held and only nudged: its job goes by them
                log.info(STARTS_OVER)
                app.close()
                app = new_app()
    finally:
        app.close()
        lock.release()
