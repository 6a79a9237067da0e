"""Drift noticed as it happens: an item Stash2Plex owns changed in Plex, seen from its timeline
event in the resident ``watch``, and repaired as ``reconcile`` does (worker/reconcile.py: the
same plan, ``preserve_plex_edits`` and ``skip_fields`` apply, the write reads the item again).

Our own writes make the same event: one whose ``updatedAt`` is not after the ledger's
``synced_at`` for the scene (saved after the write) is an echo and skipped (without ``updatedAt``:
within ``ECHO_S`` of the sync). Only one process writes to Plex: the repair takes the drainer lock
without waiting, else the item stays pending until the next poll.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.errors import InvalidMetadata, Stash2PlexError
from plex.notifications import ItemProcessed, Notification
from validation.metadata import scene_from_stash

if TYPE_CHECKING:
    from core.log import StashLog
    from core.platform import HeldLock
    from stash.client import StashClient
    from sync_queue.ledger import Ledger
    from worker.reconcile import Reconciler

ECHO_S = 30.0  # an event this soon after our own sync of the item is that sync's echo


class DriftWatch:
    def __init__(
        self,
        reconciler: Reconciler,
        ledger: Ledger,
        stash: StashClient,
        lock: Callable[[], HeldLock],
        log: StashLog,
        after_lock: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.reconciler, self.ledger, self.stash, self.log, self.clock = reconciler, ledger, stash, log, clock
        self.lock = lock  # a factory of the drainer lock (a HeldLock: acquire(patience), release)
        self.after_lock = after_lock  # called after the lock is let go (a hook that found it held)
        self.pending: dict[int, int] = {}  # ratingKey → the newest event's updatedAt
        self._mutex = threading.Lock()

    def __call__(self, event: Notification) -> None:
        if isinstance(event, ItemProcessed) and self.ledger.item(event.item_id) is not None:
            with self._mutex:
                self.pending[event.item_id] = max(event.updated_at, self.pending.get(event.item_id, 0))
            self.run()

    def run(self) -> int:
        """Check (and repair) the pending items; how many were repaired."""
        with self._mutex:
            pending, self.pending = self.pending, {}
        if not pending:
            return 0
        lock = self.lock()
        if not lock.acquire(patience=0):
            with self._mutex:
                for rk, at in pending.items():  # a drainer or a task writes now: next time
                    self.pending[rk] = max(at, self.pending.get(rk, 0))
            return 0
        try:
            return sum(self._one(rk, at) for rk, at in sorted(pending.items()))
        finally:
            lock.release()
            if self.after_lock is not None:
                self.after_lock()

    def _one(self, rating_key: int, updated_at: int) -> int:
        owner = self.ledger.item(rating_key)
        if owner is None:
            return 0
        record = self.ledger.get_many([owner.scene_id]).get(owner.scene_id)
        if record is not None and record.synced_at is not None and _echo(updated_at, record.synced_at, self.clock()):
            return 0
        raw = self.stash.scenes_by_id([owner.scene_id]).get(owner.scene_id)
        if raw is None:
            return 0
        try:
            scene = scene_from_stash(raw)
            [finding] = self.reconciler.check([scene])
            if not finding.matched or finding.rating_key != rating_key or not finding.drift:
                return 0
            self.log.warning(
                f"Plex item {rating_key} (scene {scene.id}) changed in Plex: {', '.join(finding.drift)}; repairing"
            )
            self.reconciler.repair(finding)
        except (InvalidMetadata, Stash2PlexError) as exc:
            self.log.warning(f"Plex item {rating_key}: drift not repaired: {exc}")
            return 0
        finally:
            self.reconciler.syncer.client.forget(rating_key)
        return 1


def _echo(updated_at: int, synced_at: float, now: float) -> bool:
    """Whether an event is our own write's: Plex dated the change no later than our sync.

    >>> _echo(1000, 1000.4, 2000), _echo(1002, 1000.4, 2000), _echo(0, 1000.4, 1010)
    (True, False, True)
    """
    if updated_at:
        return updated_at <= int(synced_at)
    return now - synced_at < ECHO_S
