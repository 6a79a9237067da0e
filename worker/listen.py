"""Keeping a Plex notification listener alive, and what its events do.

A connection to Plex's notification websocket (a thread) ends when Plex closes it and never
retries (plex/notifications.py). ``PlexListener`` opens a new one: at once after a connection that was
open ``STABLE_S``, else after ``probe_wait`` (the drainer's backoff for a server that is down, with
jitter), never while the shared circuit breaker is open; one that Plex (or a proxy) closed sooner
counts as failed, or closing each at once would be a reconnect loop. Events go through a queue to
a thread of their own, so a handler's Plex request never delays the socket's reads; there a flood
is folded (``worker/coalesce.py``: one look per item, section or session a second). Events are
triggers, never the only path: a job waiting for Plex keeps its timed retry.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.backoff import probe_wait
from core.errors import PlexNotFound, PlexUnavailable, Stash2PlexError
from plex.notifications import Connected, ItemProcessed, LibraryScanned, Notification, read_notifications
from worker.breaker import State
from worker.coalesce import Coalescer

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.client import PlexClient
    from plex.index import LibraryIndex
    from plex.notifications import Connection
    from worker.breaker import CircuitBreaker
    from worker.waits import PlexWaits

WATCH_S = 0.25  # how often the supervisor looks whether the connection's thread still runs
CLOSE_S = 3.0  # close() waits this long in all: ``docker stop`` sends SIGKILL 10 s after SIGTERM
STABLE_S = 10.0  # a connection open this long was a healthy one: when it ends, connect again at once


@dataclass
class ListenerStatus:
    connected: bool = False
    connects: int = 0  # connections opened so far
    last_error: str = ""
    events: int = 0


class PlexListener:
    """``connect(listener) -> Connection`` makes one connection's thread (raising our errors) that reports
    to the listener's ``on_*`` methods (plex/notifications.py ``Handler``); ``handle(event)`` acts
    on each event; ``breaker`` is the shared circuit breaker or None."""

    def __init__(
        self,
        connect: Callable[[PlexListener], Connection],
        handle: Callable[[Notification], None],
        log: StashLog,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        fold_at: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._connect, self._handle, self.log, self.breaker = connect, handle, log, breaker
        self._clock, self._coalescer = clock, Coalescer(fold_at=fold_at)
        self._rng, self._opened_at = rng or random.Random(), 0.0
        self.status = ListenerStatus()
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait  # tests record the waits instead
        self._events: queue.Queue[Notification | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    # -- life ----------------------------------------------------------------------
    def ensure_started(self) -> None:
        with self._lock:
            if self._threads or self._stop.is_set():
                return
            for target, name in ((self._supervise, "s2p-plex-listener"), (self._dispatch, "s2p-plex-events")):
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)

    def close(self, timeout: float = CLOSE_S) -> None:
        """Stop both threads, waiting ``timeout`` for them in all (they are daemons: one still
        closing its socket or finishing an event is left to end with the process)."""
        self._stop.set()
        self._events.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    # -- the supervisor ----------------------------------------------------------------
    def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            hold = self._breaker_hold()
            if hold > 0:
                self._sleep(hold)
                continue
            lasted = self._listen_once()
            if self._stop.is_set():
                return
            healthy = lasted is not None and lasted >= STABLE_S
            if healthy:
                self.log.info("the Plex notification connection closed; connecting again")
            elif lasted is not None:
                self.on_error(
                    PlexUnavailable(f"Plex closed the notification websocket {lasted:.1f} s after opening it")
                )
            failures = 0 if healthy else failures + 1
            self._sleep(0.0 if healthy else probe_wait(failures - 1, rng=self._rng))

    def _breaker_hold(self) -> float:
        if self.breaker is None:
            return 0.0
        try:
            if self.breaker.state().state is State.CLOSED:
                return 0.0
            return max(1.0, self.breaker.seconds_until_probe())
        except Stash2PlexError:
            return 0.0

    def _listen_once(self) -> float | None:
        """One connection, until it ends; how long it was open (None: it never opened)."""
        connects = self.status.connects
        try:
            connection = self._connect(self)
        except Stash2PlexError as exc:
            self.on_error(exc)
            return None
        connection.start()
        while connection.is_alive() and not self._stop.is_set():
            connection.join(WATCH_S)
        if self._stop.is_set():
            connection.stop()
        self.status.connected = False
        return self._clock() - self._opened_at if self.status.connects > connects else None

    # -- what the connection reports (on its thread: keep it short) ----------------------
    def on_open(self) -> None:
        self.status.connected, self.status.last_error = True, ""
        self.status.connects += 1
        self._opened_at = self._clock()
        self.log.info("listening to Plex's notifications")
        self._events.put(Connected())

    def on_close(self) -> None:
        self.status.connected = False

    def on_error(self, error: Stash2PlexError) -> None:
        if str(error) != self.status.last_error:
            self.log.warning(f"cannot listen to Plex's notifications ({error}); timed retries carry on")
        self.status.last_error = str(error)

    def on_message(self, container: dict) -> None:
        for event in read_notifications(container):
            self._events.put(event)

    def _dispatch(self) -> None:
        """Take what came, hand on what is due (folded), sleep until the next is due."""
        while not self._stop.is_set():
            try:
                event = self._events.get(timeout=self._coalescer.wait(self._clock()))
            except queue.Empty:  # nothing came: a held event is due
                pass
            else:
                if event is None or self._stop.is_set():
                    return
                self.status.events += 1
                self._coalescer.offer(event, self._clock())
            for due in self._coalescer.take(self._clock()):
                try:
                    self._handle(due)
                except Stash2PlexError as exc:  # one event lost; the timed paths cover it
                    self.log.info(f"a Plex event was not acted on: {exc}")


class WakeWaitingJobs:
    """An item Plex finished, in a section we sync, at a path jobs wait for: those jobs go
    now (``waits.wake``), and the section is listed again before they look (``index.expect``).
    A scan that ended (or more than ``FOLD_AT`` items of a section in a second: the listener
    folds them) is a catch-up instead: one look at the libraries, not a read per item."""

    FOLD_AT = 20

    def __init__(self, plex: PlexClient, index: LibraryIndex, waits: PlexWaits, log: StashLog) -> None:
        self.plex, self.index, self.waits, self.log = plex, index, waits, log

    def __call__(self, event: Notification) -> None:
        if isinstance(event, Connected | LibraryScanned):
            self.catch_up()
        if not isinstance(event, ItemProcessed) or not self.waits.waiting():
            return
        if event.section_id not in {s.key for s in self.index.sections}:  # not a section we sync
            return
        try:
            state = self.plex.item_state(event.item_id)
        except PlexNotFound:  # deleted again meanwhile
            return
        self.index.expect(event.section_id)
        woken = self.waits.wake(state.files)
        if woken:
            self.log.info(f"Plex added item {event.item_id}: {woken} waiting job(s) go now")

    def catch_up(self) -> None:
        """Connected (again): items Plex added while nobody listened (the job's own scan
        request may have finished first) are found by one stamp check of the sections, a
        listing of those that changed, and the waiting paths looked up in it."""
        if not self.waits.waiting():
            return
        self.index.refresh(force=True)
        index = self.index.index()
        found = [path for path in self.waits.paths() if index.by_path(path)]
        woken = self.waits.wake(found)
        if woken:
            self.log.info(f"Plex has the files of {woken} waiting job(s) now; they go now")
