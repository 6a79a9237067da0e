"""The background drainer: a detached process that empties the queue, then exits.

A hook starts it (``Stash2Plex.py drain``) with the Stash connection on stdin. It
takes the drainer lock or exits at once (at most one drainer exists; the OS frees
the lock of a killed drainer). The worker runs in a daemon thread; the main thread
watches for a task asking to take over. The drainer stays while jobs wait for a
retry, and exits when none are left. After releasing the lock it looks once more:
a job a hook enqueued while the drainer was finishing (that hook found the lock
taken) is picked up by taking the lock again.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TextIO

from core.errors import Stash2PlexError
from core.log import Redactor, StashLog, capture_library_logs
from core.platform import HeldLock
from validation.plugin_input import ServerConnection

WATCH_INTERVAL_S = 0.25
LOCK_PATIENCE_S = 1.0  # a look at the lock (is_locked) holds it for milliseconds; a drainer for long


def _work(app, lock: HeldLock, stop: threading.Event, outcome: dict) -> None:
    try:
        with app.consumer(lock=lock) as queue:
            worker = app.worker(queue)
            outcome["stats"] = worker.run(stop=stop, wait_for_retries=True)
        if worker.abort_error is not None:  # the token or a setting is wrong: stop, and say so
            outcome["error"] = worker.abort_error
    except Stash2PlexError as exc:
        outcome["error"] = exc
    except Exception as exc:  # logged with its type; the jobs stay queued
        outcome["error"] = exc


def drain_once(app, log: StashLog, lock: HeldLock) -> bool:
    """Run the worker in a daemon thread until the queue is empty or a task takes over."""
    stop = threading.Event()
    outcome: dict = {}
    thread = threading.Thread(target=_work, args=(app, lock, stop, outcome), name="s2p-worker", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(WATCH_INTERVAL_S)
        if app.handover_requested():
            stop.set()
    if "error" in outcome:
        error = outcome["error"]
        log.error(f"drainer stopped: {type(error).__name__}: {error}")
        _remember_error(app, f"{type(error).__name__}: {error}")
        return False
    log.info(f"drainer finished: {dict(outcome.get('stats') or {})}")
    _remember_error(app, None)  # a clean run: an old reason would only mislead queue_status
    return True


def _remember_error(app, text: str | None) -> None:
    """Keep the reason (or its absence) for queue_status: the drainer has no reply to give."""
    try:
        ledger = app.ledger()
        if text is not None:
            ledger.set_meta("last_drainer_error", {"error": text, "at": time.time()})
        elif ledger.meta("last_drainer_error") is not None:
            ledger.set_meta("last_drainer_error", None)
    except Stash2PlexError:
        pass


def main(stdin: TextIO, stderr: TextIO, env: dict[str, str]) -> int:
    from app.root import App

    redactor = Redactor()
    log = StashLog(stderr, redactor, plain=True)
    try:
        payload = json.loads(stdin.read())
        connection = ServerConnection.model_validate(payload["server_connection"])
    except (ValueError, KeyError, TypeError) as exc:
        log.error(f"drainer started without a valid connection on stdin: {type(exc).__name__}")
        return 2
    capture_library_logs(log)
    app = App(
        connection,
        env,
        log,
        data_dir=Path(payload["data_dir"]),
        settings_overrides=payload.get("settings_overrides") or {},
    )
    try:
        while True:
            lock = HeldLock(app.lock_path)
            if not lock.acquire(patience=LOCK_PATIENCE_S):
                return 0  # another drainer (or a task) is at work
            clean = drain_once(app, log, lock)  # releases the lock when done
            if not clean or app.handover_requested() or not app.producer_queue().ready_count():
                return 0
            log.info("jobs arrived while finishing; draining again")
    finally:
        app.close()
