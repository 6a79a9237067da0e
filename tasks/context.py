"""What a task is given: the parts of the composition root (app/root.py ``App``) it may use.

Tasks may not import app/ (tests/test_layers.py), so they see the root through this
Protocol; the dispatcher (tasks/__init__.py ``run_task``) takes a ``Context``, so strict
mypy checks that ``App`` has every part named here and every task's call on it. Below it,
the steps several tasks take (no task imports another).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from core.errors import FAILS_EVERY_SCENE, Stash2PlexError
from stash.timestamps import recent_since
from sync_queue.stats import iso_local

if TYPE_CHECKING:
    from core.log import StashLog
    from core.privacy import Placeholders
    from plex.client import PlexClient
    from plex.index import LibraryIndex
    from stash.client import StashClient
    from sync_queue.dlq import DeadLetterQueue, Requeued
    from sync_queue.health import HealthFile
    from sync_queue.ledger import Ledger
    from sync_queue.queue import JobQueue
    from sync_queue.stats import StatsStore
    from validation.config import Settings
    from worker.breaker import CircuitBreaker
    from worker.plays import PlayImport
    from worker.sync import Syncer
    from worker.worker import Worker


class Context(Protocol):
    log: StashLog
    data_dir: Path
    # How this run was asked for: mode, dry_run, full_reply (the command line).
    options: dict[str, object]

    def settings(self) -> Settings: ...
    def stash(self) -> StashClient: ...
    def plex(self) -> PlexClient: ...
    def index(self) -> LibraryIndex: ...
    def ledger(self) -> Ledger: ...
    def dlq(self) -> DeadLetterQueue: ...
    def stats(self) -> StatsStore: ...
    def health(self) -> HealthFile: ...
    def breaker(self) -> CircuitBreaker: ...
    def syncer(self) -> Syncer: ...
    def play_import(self) -> PlayImport: ...
    def private(self) -> Placeholders | None: ...
    def producer_queue(self) -> JobQueue: ...
    def consumer(self) -> AbstractContextManager[JobQueue]: ...
    def worker(self, queue: JobQueue, probe_now: bool = False) -> Worker: ...
    def drainer_running(self) -> bool: ...
    def watch_state(self) -> dict[str, Any]: ...
    def ensure_drainer(self) -> bool: ...
    def take_over(self) -> None: ...


def queue_again(app: Context, scene_ids: list[int] | None, priority: str) -> Requeued:
    """Scenes queued again, a dead letter's with a fresh budget (``None``: every dead letter;
    ``DeadLetterQueue.requeue``), and a drainer to take them."""
    requeued = app.dlq().requeue(app.producer_queue(), scene_ids, priority, time.time())
    if scene_ids or requeued.dead:
        app.ensure_drainer()
    return requeued


def queue_state(app: Context) -> dict[str, Any]:
    """The queue's counts as the page and ``queue_status`` show them."""
    counts = app.producer_queue().counts()
    in_flight = counts["in_flight"] if app.drainer_running() else 0  # no consumer: they only wait
    return {**counts, "in_flight": in_flight, "next_retry_at": iso_local(counts["next_retry_at"])}


def recent_start(app: Context, newest: str | None) -> str | None:
    """Where ``recent`` (and its preview) starts: after the last run's newest ``updated_at``
    (stash/timestamps.py ``recent_since``), said in the log."""
    since = recent_since(app.ledger().meta("last_sync_at"), newest)
    app.log.info(f"syncing scenes updated after {since}")
    return since


T = TypeVar("T")


def one_scene(work: Callable[..., T], *args: object) -> tuple[T | None, Stash2PlexError | None]:
    """``work(*args)`` for one scene of a bulk task: (its result, None), or (None, the error)
    when it failed this scene only; one that fails every scene (``FAILS_EVERY_SCENE``)
    raises, and the task stops on it."""
    try:
        return work(*args), None
    except FAILS_EVERY_SCENE:
        raise
    except Stash2PlexError as exc:
        return None, exc
