"""The worker: take due jobs, fetch their scenes in one request, sync, settle.

Runs in the drainer's daemon thread and in the foreground tasks. Jobs come in chunks
(users' edits first), their scenes in one GraphQL request per chunk (or from a bulk task's
page); unchanged scenes are acknowledged without a Plex request; the rest go through
worker/pipeline.py, which runs this class's public steps with bounded, adaptive
concurrency. The breaker is asked before any Plex work (while open, jobs wait without
spending budget); outcomes reach the statistics (``state.db``) at least every second.
"""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, assert_never

from core.backoff import probe_wait
from core.errors import (
    ConfigError,
    InvalidMetadata,
    PlexAuthError,
    PlexNotFound,
    PlexUnavailable,
    RunStopped,
    Stash2PlexError,
    StashRefused,
    StashUnavailable,
    TransientError,
)
from sync_queue.job import BULK, EntityEvent, Job, Taken
from sync_queue.spool import IMAGE_ONLY
from sync_queue.sqlite import in_words
from sync_queue.stats import Delta
from validation.metadata import entities_of, scene_from_stash
from worker.breaker import BreakerState, State
from worker.settle import Action, Decision, decide
from worker.verdict import OUT_OF_SCOPE, UNCHANGED, verdict

if TYPE_CHECKING:
    from core.log import StashLog
    from stash.client import StashClient
    from sync_queue.dlq import DeadLetterQueue
    from sync_queue.ledger import Ledger, SceneRecord
    from sync_queue.queue import JobQueue
    from sync_queue.stats import StatsStore
    from validation.metadata import SceneMetadata
    from worker.breaker import CircuitBreaker
    from worker.notices import RunNotices
    from worker.sync import Syncer, SyncResult
    from worker.viewers import Viewers
    from worker.waits import PlexWaits

Work = tuple[Taken, "SceneMetadata", "SceneRecord | None"]  # a job, its scene, what was last written
# result, error, the sync's seconds (None: not tried), of them the seconds Plex took to answer
Outcome = tuple["SyncResult | None", BaseException | None, float | None, float]

NAP_MAX_S = 1.0
CHUNK = 50  # jobs taken at once: one Plex detail request reads all their items
# Added to a scene's Stash data: when it was asked for, in wall-clock seconds (time.time(),
# the clock hooks stamp entity events with, in their own processes). Data asked for before
# an entity event of one of its tags, performers, studio or groups may predate the change.
READ_AT = "_s2p_read_at"


@dataclasses.dataclass(frozen=True)
class Parts:
    """What a worker works with, built once by the composition root (app/root.py): the queue,
    the stores, both servers' sides, the listeners, and the clocks (injected in tests)."""

    queue: JobQueue
    dlq: DeadLetterQueue
    ledger: Ledger
    stash: StashClient
    syncer: Syncer
    breaker: CircuitBreaker
    stats_store: StatsStore
    log: StashLog
    notices: RunNotices | None = None  # worker/notices.py: outages and dead-lettered jobs (health file, notifications)
    waits: PlexWaits | None = None  # worker/waits.py: jobs parked until Plex has their file; an event wakes them
    viewers: Viewers | None = None  # worker/viewers.py: someone watching Plex (bulk work leaves them a worker)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    timer: Callable[[], float] = time.perf_counter
    rng: random.Random | None = None


class Worker:
    def __init__(self, parts: Parts, *, concurrency: int = 6, probe_now: bool = False) -> None:
        p = parts
        self.queue, self.dlq, self.ledger, self.stash, self.syncer = p.queue, p.dlq, p.ledger, p.stash, p.syncer
        self.breaker, self.stats_store, self.log, self.notices = p.breaker, p.stats_store, p.log, p.notices
        self.waits, self.viewers, self.clock, self.sleep, self.timer = p.waits, p.viewers, p.clock, p.sleep, p.timer
        self.rng = parts.rng or random.Random()
        self.max_concurrency = self.concurrency = concurrency
        self.delta = Delta()  # outcomes since the last checkpoint, then added to the statistics
        self.stats: Counter[str] = Counter()  # the run's (a task's reply): the checkpoints' deltas summed
        self.abort_error: Stash2PlexError | None = None  # what stopped the run (the reply raises it)
        # The breaker's state lives in a file shared by every process; within a batch the
        # worker keeps the copy it read at admission and updates it on its own outcomes,
        # instead of locking and reading that file once per scene.
        self.breaker_seen = BreakerState()
        self._unavailable_said = False
        self._in_sync: list[int] = []  # scenes now in sync with Plex since the last checkpoint
        self._probe_now = probe_now  # a task the user started: probe Plex at once, whatever the breaker says
        self._stash_failures = 0  # Stash outage: consecutive batches that could not reach it
        self._stop: threading.Event | None = None  # the run's, as the prefetched scene data (``begin``)
        self._prefetched: dict[int, dict] = {}
        self._tried: set[int] | None = None  # with retry_waiting_now: the jobs this run took
        self._fetched_at: dict[int, float] = {}  # per scene: when its newest data was asked of Stash
        self._entity_changed: dict[tuple[str, int], float] = {}  # (kind, id) → newest event's time seen
        self._read_at: dict[int, float] = {}  # scenes being synced → when their data was asked of Stash
        self.gone: list[tuple[Taken, SceneRecord]] = []  # jobs of scenes deleted in Stash, for ``release_gone``

    # -- taking jobs (worker/pipeline.py ``work`` runs the steps below) -----------------
    def begin(self, stop: threading.Event | None, prefetched: dict[int, dict] | None, retry_waiting_now: bool) -> None:
        """A run's inputs: ``stop``, the scene data a task already fetched (bulk jobs use it
        once), and whether jobs waiting for a retry are taken at once."""
        self._stop, self._prefetched = stop, prefetched if prefetched is not None else {}
        self._tried = set() if retry_waiting_now else None

    def take(self) -> list[Taken]:
        """The next chunk: the jobs due, and early those an event woke (Plex has their file
        now, worker/waits.py) or, with ``retry_waiting_now``, not tried yet in this run."""
        self.fan_out(CHUNK)
        early = self._early if self._tried is not None or self.waits is not None else None
        batch = self.queue.take(CHUNK, early=early)
        self._say_set_aside()
        for item in batch:
            if self._tried is not None:
                self._tried.add(item.pqid)
            if self.waits is not None:
                self.waits.forget((item.table, item.pqid))
        return batch

    def _early(self, item: Taken) -> bool:
        woken = self.waits is not None and self.waits.woken((item.table, item.pqid))
        return woken or (self._tried is not None and item.pqid not in self._tried)

    def _say_set_aside(self) -> None:
        rejected = self.queue.take_rejected()
        if rejected:
            n = len(rejected)
            rows = "; ".join(f"{table} row {pqid}: {why[:200]}" for table, pqid, why in rejected[:5])
            self.log.warning(
                f"{n} unreadable queue entr{'y' if n == 1 else 'ies'} set aside ({rows}); every other job is kept. "
                "Queue status counts them; the scene syncs again with its next edit or 'Sync all scenes'."
            )
            self.stats["set_aside"] += n

    def fan_out(self, room: int) -> int:
        """Expand entity events into up to ``room`` bulk scene jobs: the scenes whose
        Plex items show the entity (the ledger's record). Duplicates of waiting jobs
        collapse; a scene whose desired state did not change is later acked without
        a Plex request. Returns how many scenes were queued."""
        queued = 0
        events = self._unwritten_dropped(self.queue.entity_events())
        for event in events:  # every older page of the scenes it touches is stale from now on
            key = (event.kind, event.entity_id)
            self._entity_changed[key] = max(self._entity_changed.get(key, event.queued_at), event.queued_at)
        if self.syncer is not None and any(e.kind == "tag" and e.after_scene == 0 for e in events):
            self.syncer.tags_changed()  # before any of its scenes is synced
        for event in events:
            if queued >= room:
                break
            scenes = self.ledger.scenes_with(event.kind, event.entity_id, event.after_scene, room - queued)
            if event.after_scene == 0:
                self.log.info(
                    f"{event.kind} {event.entity_id} changed ({event.event}); checking the scenes that show it"
                )
            now = self.clock()
            self.queue.put_many(Job(scene_id=s, priority=BULK, enqueued_at=now) for s in scenes)
            last = scenes[-1] if scenes else event.after_scene
            self.queue.advance_entity_event(event, last, finished=len(scenes) < room - queued)
            queued += len(scenes)
        if queued:
            self.stats["fanned_out"] += queued
        return queued

    def _unwritten_dropped(self, events: list[EntityEvent]) -> list[EntityEvent]:
        """The events that can change what Plex shows: a performer's new image, with
        performer_photos off, is settled here without a scene queued."""
        if self.syncer is None or self.syncer.settings.performer_photos:
            return events
        for event in (e for e in events if e.event.endswith(IMAGE_ONLY)):
            self.log.debug(f"{event.kind} {event.entity_id}: only its image changed, and performer_photos is off")
            self.queue.advance_entity_event(event, event.after_scene, finished=True)
        return [e for e in events if not e.event.endswith(IMAGE_ONLY)]

    def nap(self) -> None:
        """Wait for the next retry, a second at most (or until the run's ``stop``)."""
        due = self.queue.next_due() or self.clock()
        wait = self._stop.wait if self._stop is not None else self.sleep
        wait(max(0.05, min(NAP_MAX_S, due - self.clock())))

    def checkpoint(self) -> None:
        """Add the outcomes since the last checkpoint to the statistics; drop old dead letters of
        scenes now in sync (they would only mislead)."""
        delta, self.delta = self.delta, Delta()
        self.stats += delta.run_counts()
        self.stats_store.record(delta)
        done, self._in_sync = self._in_sync, []
        if done:
            self.dlq.remove(done)

    def run_counts(self) -> Counter[str]:
        """The run's counts so far, the outcomes since the last checkpoint included."""
        return self.stats + self.delta.run_counts()

    # -- the steps worker/pipeline.py runs ------------------------------------------
    def admit(self, batch: list[Taken]) -> list[Taken]:
        """The circuit breaker's say: all, one probe, or none (the rest wait). A task the
        user started probes Plex at once, whatever the breaker says."""
        now = self.clock()
        forced, self._probe_now = self._probe_now and self.breaker.force_probe(), False
        allowed = forced or self.breaker.allow()
        if allowed:
            self.breaker_seen = self.breaker.state()
            if self.breaker_seen.state != State.HALF_OPEN or self._probe():
                return batch
        wait = max(1.0, self.breaker.seconds_until_probe())
        for item in batch:
            self.queue.postpone(item, now + wait)
        if not allowed:
            self._say_unavailable(f"circuit breaker open; next try in {wait:.0f} s")
        self.delta.waiting(len(batch))
        return []

    def _probe(self) -> bool:
        """This process is the breaker's probe: one request of its own decides, not a job
        (a job's own fate, a scene not in Plex yet or a 414, says nothing of whether Plex is
        up, and left the breaker half-open until the probe timed out). Any answer from
        Plex but a 5xx, a 4xx included, proves it is up; no answer keeps it open."""
        try:
            self.syncer.client.sections()
        except TransientError as exc:  # refused, 503, no answer in time, reset: not up
            self._plex_failed(exc)
            return False
        except Stash2PlexError as exc:  # Plex answered (a 401), or a setting is wrong: the jobs meet it and say so
            self.log.debug(f"the breaker's probe reached Plex: {exc}")
        self._plex_ok()
        return True

    def scenes_or_wait(self, batch: list[Taken]) -> dict[int, dict | None] | None:
        """Each job's scene data; None when Stash could not give it (the jobs then wait, or
        are settled). A bulk job may use the page its task fetched, unless a newer event
        for that scene exists (an interactive job in this batch, or data fetched in this run
        after the page was read: a user's edit is never reverted by an older page), or an
        entity event touching the scene came after the page was read (a performer destroyed
        or renamed while ``all`` works is never written back from its page)."""
        found: dict[int, dict | None] = {}
        interactive = {item.job.scene_id for item in batch if item.job.priority != BULK}
        need = set()
        for item in batch:
            sid = item.job.scene_id
            raw = self._prefetched.get(sid) if item.job.priority == BULK and sid not in interactive else None
            if raw is not None and not self._outdated(sid, raw):
                found[sid] = raw
            else:
                need.add(sid)
        if need:
            asked = time.time()  # before the request: whatever Stash committed earlier is in the answer
            try:
                fetched = self.stash.scenes_by_id(sorted(need))
            except StashUnavailable as exc:
                self._stash_down(batch, exc)
                return None
            except StashRefused as exc:
                for item in batch:
                    self.settle(item, exc)
                return None
            self._stash_up()
            for sid in need:
                raw = found[sid] = fetched.get(sid)
                if raw is not None:
                    raw[READ_AT] = self._fetched_at[sid] = asked
        for sid in found:
            self._prefetched.pop(sid, None)  # used once; a retry reads Stash again
        return found

    def _outdated(self, sid: int, raw: dict) -> bool:
        """True when this run fetched the scene after ``raw`` was read, or an entity event
        of one of its tags, performers, studio or groups is as new as ``raw`` or newer (it
        may show the entity as it was)."""
        read_at = raw.get(READ_AT, 0.0)
        if read_at < self._fetched_at.get(sid, -math.inf):
            return True
        return bool(self._entity_changed) and self._changed_since(entities_of(raw), read_at)

    def _changed_since(self, entities: dict, read_at: float) -> bool:
        changed = self._entity_changed
        return any(changed.get((kind, i), -math.inf) >= read_at for kind, ids in entities.items() for i in ids)

    def _requeue_if_outdated(self, scene: SceneMetadata, synced: bool) -> None:
        """A sync's data predates an entity event seen while it ran: the scene is queued
        again, and that job reads Stash afresh (the fan-out may have run before this sync
        recorded which entities the item shows). A failed sync's retry reads Stash anyway."""
        read_at = self._read_at.pop(scene.id, None)
        if synced and read_at is not None and self._changed_since(scene.entities, read_at):
            self.queue.put(Job(scene_id=scene.id, priority=BULK, enqueued_at=self.clock()))

    def triage(self, batch: list[Taken], scenes: dict[int, dict | None]) -> list[Work]:
        """Settle what needs no Plex work (gone, invalid, unchanged); return the rest."""
        records = self.ledger.get_many([item.job.scene_id for item in batch])
        self.syncer.locator.load_pins([item.job.scene_id for item in batch])
        work = []
        for item in batch:  # one job per scene (worker/pipeline.py)
            sid = item.job.scene_id
            raw = scenes.get(sid)
            if raw is None:
                if sid in records:  # what was written for it may be on an item no scene owns now
                    self.gone.append((item, records[sid]))
                    continue
                self.log.info(f"scene {sid} no longer exists in Stash; nothing to sync")
                self.queue.ack(item)
                self.delta.gone()
                continue
            try:
                scene = scene_from_stash(raw)
            except InvalidMetadata as exc:
                self.settle(item, exc, title=str(raw.get("title") or ""))
                continue
            self._note_private(scene)
            record = records.get(sid)
            found = verdict(self.syncer, scene, record)
            if found.kind == OUT_OF_SCOPE:  # filtered out: its Plex item is left as it is
                self.log.info(f"scene {sid} is not synced: {found.why}; its Plex item is left as it is")
                self.ledger.set_entities(sid, self.syncer.depends_on(scene))  # a tag's move may bring it back
                self.queue.ack(item)
                self.stats["out_of_scope"] += 1
                continue
            if record is not None and found.kind == UNCHANGED:
                depends = self.syncer.depends_on(scene)
                if record.entities != depends:  # e.g. merged into a same-named tag, or a tag moved
                    self.ledger.set_entities(sid, depends)
                self.queue.ack(item)
                self.delta.unchanged(self.clock())
                self._in_sync.append(sid)
                continue
            self._read_at[sid] = float(raw.get(READ_AT, 0.0))
            work.append((item, scene, record))
        return work

    @property
    def _private(self) -> Any:
        """core/privacy.py's placeholders when private_logs is on, else None."""
        return getattr(self.log.redact, "private", None)

    def _note_private(self, scene: SceneMetadata) -> None:
        """With private_logs on, the scene's title and paths become placeholders in every line."""
        private = self._private
        if private is not None:
            private.note_title(scene.title)
            for path in [f.path for f in scene.files] + self.syncer.locator.mapped_paths(scene):
                private.note_path(path)

    def prefetch(self, work: list[Work]) -> list[int] | None:
        """Read the chunk's Plex items at once; the keys read, or None when Plex is down:
        the whole chunk then waits for the breaker after ONE failed request instead of
        one per scene (and is settled here)."""
        if self._held_back() is not None:
            return []  # each job is held back on its own when it is tried
        try:
            return list(self.syncer.locator.prefetch([(scene, record) for _, scene, record in work]) or [])
        except PlexUnavailable as exc:
            self._plex_failed(exc)
            for item, scene, _ in work:
                self.settle(item, exc, title=scene.title)
            return None
        except (PlexAuthError, ConfigError) as exc:  # hopeless for every job: settle one, hold the rest
            (first, scene, _), rest = work[0], work[1:]
            self.settle(first, exc, title=scene.title)
            for item, scene, _ in rest:
                self.settle(item, RunStopped(f"not tried: {exc}"), title=scene.title)
            return None
        except Stash2PlexError as exc:  # each scene meets it again and is settled by its class
            self.log.debug(f"reading the chunk's Plex items failed ({exc}); reading them one by one")
        return []

    def stopping(self) -> RunStopped | None:
        """Why the run stops (a 401, a bad setting, or ``stop``), or None."""
        if self.abort_error is not None:
            return RunStopped(f"not tried: {self.abort_error}")
        if self._stop is not None and self._stop.is_set():
            return RunStopped("not tried: the run is stopping (another task takes over, or the queue was cleared)")
        return None

    def _held_back(self) -> Stash2PlexError | None:
        """Why this job must not go to Plex at all: the run is stopping, or the breaker opened
        while this batch was under way (the rest of the batch then waits for the probe
        instead of each trying a Plex that is down)."""
        stopping = self.stopping()
        if stopping is None and self.breaker_seen.state == State.OPEN:
            return PlexUnavailable("Plex is unavailable (circuit breaker open); waiting for the next probe")
        return stopping

    def release_gone(self) -> None:
        """Settle the jobs of scenes deleted in Stash that had a record: the items written
        for them that no scene owns now are released (worker/release.py ``release_gone``).
        The pipeline calls this with no sync in flight, after their records are saved: a
        release reads what the syncs wrote. A run that stops leaves them unacknowledged
        for the next consumer."""
        gone, self.gone = self.gone, []
        if self.stopping() is not None:
            return
        self.syncer.flush_saves()
        for item, record in gone:
            sid = item.job.scene_id
            held = self._held_back()
            if held is not None:
                self.settle(item, held)
                continue
            try:
                released = self.syncer.releaser.release_gone(sid, record)
            except Stash2PlexError as exc:
                if isinstance(exc, PlexUnavailable):
                    self._plex_failed(exc)
                self.settle(item, exc)
                continue
            for key in released:
                self.log.info(
                    f"scene {sid} no longer exists in Stash: what Stash2Plex wrote to Plex item {key} is taken off "
                    "(no scene in Stash holds its file)"
                )
            if not released:
                self.log.info(f"scene {sid} no longer exists in Stash; nothing to sync")
            self.queue.ack(item)
            self.delta.gone()
            self.stats["released"] += len(released)

    def sync_one(self, item: Taken, scene: SceneMetadata, record: SceneRecord | None) -> Outcome:
        """(result, error, seconds the sync took: None when it was not tried, of them the
        seconds Plex took to answer)."""
        held = self._held_back()
        if held is not None:
            return None, held, None, 0.0
        self.syncer.client.requests.waited()  # from 0: what this thread waited for before is not this sync's
        started = self.timer()
        try:
            result, error = self.syncer.sync(scene, record, scan_allowed=not item.job.scan_requested), None
        except Exception as exc:  # a bug must cost one job a retry, not the whole drainer
            result, error = None, exc
            if in_words(exc) is None:
                self.log.error(f"scene {scene.id}: unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        seconds = self.timer() - started
        if error is None:
            self._plex_ok()
        elif isinstance(error, PlexUnavailable):
            self._plex_failed(error)
        return result, error, seconds, self.syncer.client.requests.waited()

    def _plex_failed(self, error: TransientError) -> None:
        self.breaker.record_failure()
        self.breaker_seen = self.breaker.state()
        self._say_unavailable(str(error))

    def _plex_ok(self) -> None:
        if self.notices is not None:
            self.notices.plex_up()
        if self._unavailable_said:
            self._unavailable_said = False
            self.log.info("Plex answers again; resuming")
        if self.breaker_seen != BreakerState():
            self.breaker.record_success()
            self.breaker_seen = BreakerState()

    def _say_unavailable(self, why: str) -> None:
        """Once per outage, not once per job: the jobs wait (no retry budget spent) and resume by themselves."""
        if self.notices is not None:
            self.notices.plex_down(self.log.redact(why))
        if not self._unavailable_said:
            self._unavailable_said = True
            self.log.warning(f"Plex is unavailable ({why}); jobs wait and resume by themselves when it answers")

    # -- Stash outages: jobs wait (no retry budget spent), Stash is probed on a growing interval
    def _stash_down(self, batch: list[Taken], error: StashUnavailable) -> None:
        wait = probe_wait(self._stash_failures)
        self._stash_failures += 1
        for item in batch:
            self.queue.postpone(item, self.clock() + wait)
        self.delta.waiting_for_stash(len(batch))
        if self._stash_failures == 1:
            self.log.warning(f"Stash is unavailable ({error}); jobs wait and resume by themselves when it answers")
        else:
            self.log.debug(f"Stash still unavailable; next try in {wait:.0f} s")

    def _stash_up(self) -> None:
        if self._stash_failures:
            self._stash_failures = 0
            self.log.info("Stash answers again; resuming")

    # -- outcomes ----------------------------------------------------------------
    def report(self, item: Taken, scene: SceneMetadata, result: SyncResult | None, error: BaseException | None) -> None:
        """A sync's outcome: what it wrote is logged and counted, then the job is settled."""
        self._requeue_if_outdated(scene, synced=result is not None)
        if result is not None:
            private = self._private
            if private is not None:
                for change in result.plan.fields:
                    if change.name == "title":
                        private.note_title(change.plex)  # Plex's old title, shown beside the new one
            for warning in result.warnings:
                self.log.warning(f"scene {scene.id}: {warning}")
            level = "info" if item.job.priority != BULK else "debug"
            summary = "; ".join(result.plan.describe()) or "no field changes"
            poster = " poster uploaded;" if result.poster == "uploaded" else ""
            self.log.log(level, f"scene {scene.id} → Plex item {result.rating_key} ({result.how}):{poster} {summary}")
            self.delta.synced(self.clock(), poster_uploaded=result.poster == "uploaded")
            self._in_sync.append(scene.id)
        self.settle(item, error, title=scene.title)

    def settle(self, item: Taken, error: BaseException | None, title: str = "") -> None:
        """Carry out what worker/settle.py ``decide`` routes the job's outcome to."""
        private = self._private
        if private is not None:
            for path in getattr(error, "candidates", ()) + getattr(error, "looked_for", ()):
                private.note_path(path)  # Plex's paths in the message
        probe_at = self.clock() + self.breaker.seconds_until_probe() if isinstance(error, PlexUnavailable) else None
        decision = decide(item.job, error, self.clock(), self.rng, probe_at)
        until = decision.until if decision.until is not None else self.clock()  # set for all but ACK and DLQ
        match decision.action:
            case Action.ACK:
                self.queue.ack(item)
            case Action.POSTPONE:
                self.queue.postpone(item, until)
                self.delta.waiting()
            case Action.WAIT_STASH:
                self.queue.postpone(item, until)
                self.delta.waiting_for_stash()
            case Action.HOLD:
                self.queue.postpone(item, until)  # stays unacked: the next consumer gets it back
                if not isinstance(error, RunStopped):
                    self._abort(in_words(error) if error is not None else None)  # a disk's refusal in words
            case Action.RETRY:
                self._retry(item, decision, error)
            case Action.DLQ:
                self._dead_letter(item, decision, error, title)
            case _:
                assert_never(decision.action)

    def _retry(self, item: Taken, decision: Decision, error: BaseException | None) -> None:
        assert decision.until is not None
        wait = decision.until - self.clock()
        self.log.warning(f"scene {item.job.scene_id}: {decision.message}; retry {decision.job.attempt} in {wait:.0f} s")
        job = dataclasses.replace(decision.job, last_error=self.log.redact(decision.job.last_error or ""))
        self.queue.retry_later(item, job)
        self.delta.retried(type(error).__name__, self.log.redact(str(error)), self.clock())
        if self.waits is not None and isinstance(error, PlexNotFound):
            self.waits.wait_for((item.table, item.pqid), error.looked_for)

    def _dead_letter(self, item: Taken, decision: Decision, error: BaseException | None, title: str) -> None:
        sid, kind, why = item.job.scene_id, type(error).__name__, self.log.redact(decision.message)
        self.dlq.add(item.job, kind, why, title or None)
        self.queue.ack(item)
        self.delta.failed(kind, self.log.redact(str(error)), self.clock())
        self.log.error(f"scene {sid} moved to the dead-letter queue: {decision.message}")
        if self.notices is not None:
            self.notices.dead_lettered(sid, kind, why)
        if isinstance(error, PlexAuthError):
            self._abort(error)

    def _abort(self, error: BaseException | None) -> None:
        """Stop taking jobs: every further job would fail the same way (token, settings)."""
        if self.abort_error is None and isinstance(error, Stash2PlexError):  # HOLD and DLQ errors always are
            self.abort_error = error
