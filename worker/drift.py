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
from dataclasses import dataclass, field
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


@dataclass
class DriftWatch:
    reconciler: Reconciler
    ledger: Ledger
    stash: StashClient
    lock: Callable[[], HeldLock]  # a factory of the drainer lock (acquire(patience), release)
    log: StashLog
    let_go: Callable[[HeldLock], object]  # lets go of the lock and looks once more (App.let_go)
    clock: Callable[[], float] = time.time
    pending: dict[int, int] = field(default_factory=dict)  # ratingKey → the newest event's updatedAt
    _mutex: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __call__(self, event: Notification) -> None:
        if isinstance(event, ItemProcessed) and self.ledger.item(event.item_id) is not None:
            self._pend({event.item_id: event.updated_at})
            self.run()

    def run(self) -> int:
        """Check (and repair) the pending items; how many were repaired."""
        with self._mutex:
            pending, self.pending = self.pending, {}
        if not pending:
            return 0
        lock = self.lock()
        if not lock.acquire(patience=0):
            self._pend(pending)  # a drainer or a task writes now: next time
            return 0
        try:
            return sum(self._one(rk, at) for rk, at in sorted(pending.items()))
        finally:
            self.let_go(lock)  # a hook that found it held started no drainer

    def _pend(self, items: dict[int, int]) -> None:
        with self._mutex:
            for rk, at in items.items():
                self.pending[rk] = max(at, self.pending.get(rk, 0))

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
