"""The worker's run as one continuous, bounded pipeline, so Plex never waits for bookkeeping.

take a chunk (users' edits first) → breaker → Stash data → triage → one Plex detail read for the
chunk → staged → submitted → writer threads → settled. The caller's thread does the queue, triage
and settling, keeping ``limit × SUBMIT_DEPTH`` syncs handed ahead; a ``Limiter`` (plex/gate.py) bounds
the syncs in Plex, :class:`Pacer` adapts the bound (worker/gradient.py). One scene is never in flight
twice (of its jobs taken meanwhile, ``one_per_scene`` syncs after it); nothing is taken while the
breaker is not closed; ``stop`` leaves taken, unstarted jobs unacked.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from core.errors import PlexNotFound, StashUnavailable, TransientError
from plex.gate import Limiter
from sync_queue.job import BULK, Taken
from sync_queue.queue import one_per_scene
from worker.breaker import State
from worker.gradient import LatencyLimit
from worker.worker import CHUNK, Outcome, Worker

if TYPE_CHECKING:
    from sync_queue.ledger import SceneRecord
    from validation.metadata import SceneMetadata

Staged = tuple[Taken, "SceneMetadata", "SceneRecord | None", "_Chunk"]
# a sync's outcome, whether it was alone at Plex (no other of ours), when it ended (``clock``)
Written = tuple[Outcome, bool, float]

# Syncs handed to the pool per allowed Plex slot: enough that no writer runs dry while this
# thread stages the next chunk (docs/performance.md, "Every Plex slot stays busy").
SUBMIT_DEPTH = 6
READ_AHEAD = 2  # writer threads beyond the Plex slots: they read the next covers from Stash meanwhile
GATHER_S = 0.01  # how long a round of settling waits for more syncs to finish
CHECKPOINT_S = 1.0  # statistics and dead-letter cleanup at least this often
CHECKPOINT_JOBS = 100


class Pacer:
    """How many scenes may go to Plex at once: the lower of two limits.

    Errors: Plex struggling (a transient Plex error: timeout, reset, 5xx) halves ``cap``,
    at most once per round of work in flight (one burst of failures is one signal); after
    ``grow_after`` clean outcomes in a row it grows by one, back up to ``maximum``.
    A file Plex has not scanned yet, or Stash trouble, says nothing about Plex's load.
    Latency (``latency``, worker/gradient.py): each clean sync's time, against the
    unloaded time of its kind, moves a limit that stops growing when Plex starts to queue.
    """

    def __init__(self, maximum: int, grow_after: int = 50, latency: LatencyLimit | None = None) -> None:
        self.maximum = maximum
        self.cap = maximum
        self.grow_after = grow_after
        self.latency = latency
        self._clean = 0
        self._since_cut = maximum

    @property
    def limit(self) -> int:
        return self.cap if self.latency is None else min(self.cap, self.latency.limit)

    def outcome(
        self,
        error: BaseException | None,
        seconds: float | None = None,
        kind: str = "",
        now: float = 0.0,
        alone: bool = False,
        answered: float | None = None,
    ) -> int:
        """One sync's outcome (and, when it reached Plex, how long it took, of that how long
        Plex took to answer, and whether it was alone there); the limit after it."""
        troubled = isinstance(error, TransientError) and not isinstance(error, (PlexNotFound, StashUnavailable))
        self._since_cut += 1
        if troubled:
            self._clean = 0
            if self._since_cut > self.limit:
                self.cap = max(1, self.limit // 2)
                self._since_cut = 0
        else:
            self._clean += 1
            if self._clean >= self.grow_after and self.cap < self.maximum:
                self.cap += 1
                self._clean = 0
        if self.latency is not None and error is None and seconds is not None:
            self.latency.observe(seconds, kind, now, alone, answered)
        return self.limit


class _Chunk:
    """The jobs taken together: their prefetched Plex items are forgotten once all settled."""

    def __init__(self, keys: list[int], size: int) -> None:
        self.keys, self.left = keys, size


def work(
    worker: Worker,
    *,
    prefetched: dict[int, dict] | None = None,
    stop: threading.Event | None = None,
    wait_for_retries: bool = False,
    retry_waiting_now: bool = False,
    progress: Callable[[Counter[str]], None] | None = None,
    refill: Callable[[bool], bool] | None = None,
) -> Counter[str]:
    """The worker's run: work until nothing is due (or, with ``wait_for_retries``, until
    nothing is left); the run's counts.

    ``prefetched``: scene data a task already fetched (bulk jobs use it once).
    ``refill(force) -> bool``: asked to queue more jobs when they run low (a task's next
    page; ``force``: the queue ran dry); False when there are no more.
    ``progress(stats)`` after every outcome. ``retry_waiting_now``: jobs waiting for a
    retry are taken at once (each once).
    """
    worker.begin(stop, prefetched, retry_waiting_now)
    while not Pipeline(worker, worker.take, refill, progress).run():
        if not wait_for_retries or worker.queue.next_due() is None:
            break
        refill = None  # every page was asked for; only retries are left
        worker.nap()
    return worker.stats


class Pipeline:
    """One run of the worker's steps (worker/worker.py), in order admit → scenes_or_wait →
    triage → prefetch → sync_one (a writer thread) → report (which settles the job), with a
    checkpoint now and then."""

    def __init__(
        self,
        worker: Worker,
        take: Callable[[], list[Taken]],
        refill: Callable[[bool], bool] | None = None,
        progress: Callable[[Counter[str]], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.w = worker
        self.take = take
        # (force) -> bool: queue more jobs (a task's next page) when low; False when none are left
        self.refill = refill or (lambda force: False)
        self.progress = progress
        self.clock = clock
        self.latency = LatencyLimit(worker.max_concurrency)  # with viewers: ``headroom`` bounds our requests
        self.pacer = Pacer(worker.max_concurrency, latency=self.latency)
        self.pacer.cap = worker.concurrency
        self.limiter = Limiter(self.pacer.limit)
        self._logged_limit = self.pacer.limit
        self._logged_bound: int | None = None
        self.staged: deque[Staged] = deque()
        self.pending: dict[Future[Written | None], Staged] = {}  # None: never begun (closed)
        self.busy: set[int] = set()  # scenes staged or in flight
        self.deferred: list[Taken] = []  # taken jobs of a busy scene: staged once it settles
        self._settled_since = 0
        self._checkpoint_at = clock()

    # -- the loop --------------------------------------------------------------------
    def run(self) -> bool:
        """Work until no job is due and no more are coming; True when stopped early."""
        threads = self.w.max_concurrency + READ_AHEAD
        with self.w.syncer.saves_held(), ThreadPoolExecutor(max_workers=threads, thread_name_prefix="plex") as pool:
            try:
                while not self._stopping():
                    more = self._fill()
                    if self.w.gone:  # with no sync in flight: a release reads what they wrote
                        while self.pending:
                            self._settle(self._finished())
                        self.w.release_gone()
                    self._submit(pool)
                    if self.pending:
                        self._settle(self._finished())
                    elif not more and not self.staged:
                        break
            finally:
                self.staged.clear()  # taken, never started: unacknowledged, the next consumer gets them
                self.limiter.close()  # writers waiting for a Plex slot begin nothing: the same
                for future in [f for f in self.pending if f.cancel()]:  # and those no writer began:
                    del self.pending[future]  # a stop (or Ctrl-C) waits only for the syncs under way
                while self.pending:
                    self._settle(wait(self.pending)[0])
                self.w.release_gone()
                self.w.syncer.client.requests.bound(None)
                self.w.concurrency = self.pacer.cap  # the next run starts from it
                self._checkpoint(force=True)
        return self._stopping()

    def _finished(self) -> set[Future[Written | None]]:
        """The syncs finished so far, once one has: gathered for up to ``GATHER_S`` more,
        so that one round of settling (one ledger commit) covers several scenes while
        the writers still have ``SUBMIT_DEPTH`` syncs each handed to them."""
        done = wait(self.pending, timeout=CHECKPOINT_S, return_when=FIRST_COMPLETED)[0]
        if done and len(done) < len(self.pending):
            done = wait(self.pending, timeout=GATHER_S, return_when=ALL_COMPLETED)[0]
        return done

    def _stopping(self) -> bool:
        return self.w.stopping() is not None

    # -- staging ---------------------------------------------------------------------
    def _fill(self) -> bool:
        """Stage work until there is enough ahead of the writers; False when nothing more will come."""
        while len(self.staged) < CHUNK // 2:
            if self._stopping():
                return False
            if (self.pending or self.staged) and self.w.breaker_seen.state != State.CLOSED:
                return True  # a probe (or failures) in flight: let it decide before taking more
            self.refill(False)  # top the queue up before it runs dry
            batch = self.take()
            if not batch:
                if self.refill(True):
                    continue
                return bool(self.deferred)
            self._stage(batch)
        return True

    def _stage(self, batch: list[Taken]) -> None:
        w = self.w
        batch = w.admit(batch)
        fresh: list[Taken] = []
        for item in batch:
            (self.deferred if item.job.scene_id in self.busy else fresh).append(item)
        fresh, doubles = one_per_scene(fresh, lambda t: t.job)  # deferred jobs of one scene come back together
        for item in doubles:  # the one kept syncs the scene as it is now
            w.settle(item, None)
        if not fresh:
            return
        scenes = w.scenes_or_wait(fresh)
        if scenes is None:
            return
        work = w.triage(fresh, scenes)
        if not work:
            return
        keys = w.prefetch(work)
        if keys is None:
            return  # Plex is down or refused us: the chunk is settled
        chunk = _Chunk(keys, len(work))
        for item, scene, record in work:
            self.staged.append((item, scene, record, chunk))
            self.busy.add(item.job.scene_id)

    def _submit(self, pool: ThreadPoolExecutor) -> None:
        while self.staged and len(self.pending) < self.pacer.limit * SUBMIT_DEPTH:
            entry = self.staged.popleft()
            self.pending[pool.submit(self._write, *entry[:3])] = entry

    def _write(self, item: Taken, scene: SceneMetadata, record: SceneRecord | None) -> Written | None:
        with self.w.syncer.posters.cover_read_ahead(scene, record):
            ticket = self.limiter.acquire()
            try:
                if self.limiter.closed:
                    return None
                outcome = self.w.sync_one(item, scene, record)
            finally:
                alone = self.limiter.release(ticket)
            return outcome, alone, self.clock()

    # -- settling --------------------------------------------------------------------
    def _settle(self, done: set[Future[Written | None]]) -> None:
        w = self.w
        w.syncer.flush_saves()  # what the finished syncs wrote, saved before their jobs are acknowledged
        bulk = False
        for future in [f for f in self.pending if f in done]:  # in the order they were handed out
            item, scene, _, chunk = self.pending.pop(future)
            written = future.result()
            if written is None:  # never begun: unacknowledged, as a staged job
                continue
            (result, error, seconds, answered), alone, ended = written
            bulk = bulk or item.job.priority == BULK
            if seconds is not None:
                kind = result.poster if result is not None else ""  # an upload is one request more
                self.pacer.outcome(error, seconds, kind, ended, alone, answered)
                w.delta.timed(seconds)
            w.report(item, scene, result, error)
            self._release(item.job.scene_id, chunk)
            self._settled_since += 1
            if self.progress is not None:
                self.progress(w.run_counts())
        self.latency.viewing = w.viewers is not None and w.viewers.watching(poll=bulk)  # a bulk run polls sessions
        w.syncer.client.requests.bound(self.latency.headroom)
        self.limiter.bound(self.pacer.limit)
        self._checkpoint()

    def _release(self, scene_id: int, chunk: _Chunk) -> None:
        self.busy.discard(scene_id)
        chunk.left -= 1
        if chunk.left == 0:
            self.w.syncer.locator.end_batch(chunk.keys)
        waiting = [item for item in self.deferred if item.job.scene_id == scene_id]
        if waiting:
            self.deferred = [item for item in self.deferred if item.job.scene_id != scene_id]
            self._stage(waiting)

    def _checkpoint(self, force: bool = False) -> None:
        now = self.clock()
        if force or self._settled_since >= CHECKPOINT_JOBS or now - self._checkpoint_at >= CHECKPOINT_S:
            self._settled_since, self._checkpoint_at = 0, now
            self.w.checkpoint()
            self._log_limit()

    def _log_limit(self) -> None:
        """The concurrency and the bound left for viewers, when they changed: at most a line
        each per checkpoint."""
        limit = self.pacer.limit
        if limit != self._logged_limit:
            self.w.log.debug(f"Plex concurrency {self._logged_limit} -> {limit} ({self._why()})")
            self._logged_limit = limit
        bound = self.latency.headroom
        if bound != self._logged_bound:
            self._logged_bound = bound
            if bound is None:
                self.w.log.debug("nobody is watching Plex: our requests to it are no longer bounded")
            else:
                self.w.log.debug(
                    f"someone is watching Plex: at most {bound} of our requests at Plex at once "
                    f"(it serves us with {self.latency.workers} at once)"
                )

    def _why(self) -> str:
        if self.pacer.cap < self.latency.limit:
            return "Plex errors"
        if self.latency.probing:
            return "timing a sync alone at Plex"
        return f"about {self.latency.waiting:.1f} waiting at Plex"
