"""Syncing one scene into its Plex item: locate (worker/locate.py), plan, write, poster
(worker/poster.py), ledger; an item no scene owns is released by worker/release.py.

Scenes unchanged since the last write were skipped by the caller (worker/verdict.py).
Nothing is written to an item the locator has not verified on its fresh detail view
(docs/architecture.md, "Write-time invariants").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import (
    PlexBadRequest,
    PlexNotFound,
    PlexRequestTooLong,
    Stash2PlexError,
)
from plex.client import PlexClient, PlexItemState
from plex.desired import Choices, desired_for
from plex.index import LibraryIndex
from plex.plan import (
    EDIT_URL_BUDGET,
    ItemPlan,
    Written,
    cut_count,
    edit_batches,
    edit_params,
    fit_plan,
    rating_change,
)
from sync_queue.ledger import NOT_IN_PLEX, SKIP, ItemRecord, Ledger, SceneRecord, entity_map
from validation.config import Settings
from validation.metadata import SceneMetadata
from worker.locate import Locator
from worker.poster import Posters
from worker.ratings import RatingRule
from worker.release import Releaser

if TYPE_CHECKING:
    from core.log import StashLog
    from stash.client import StashClient

MIN_EDIT_BUDGET = 1024  # bytes: an edit refused as too long is made smaller down to this


def _locks_only(plan: ItemPlan) -> bool:
    """Whether every change of ``plan`` sends what Plex shows already (only its lock)."""
    return all(c.plex == c.stash for c in plan.fields) and all(
        not t.removed and not t.photos and t.result == t.plex for t in plan.tags
    )


@dataclass
class SyncResult:
    """What a sync did, or (``Syncer.preview``: dry runs, ``inspect``) would do now."""

    scene_id: int
    rating_key: int
    plan: ItemPlan
    poster: str  # uploaded | unchanged | none | failed; a preview's: upload | … | failed (the screenshot unread)
    how: str  # why this item: linked | high | medium | chosen: <reason>
    warnings: list[str] = field(default_factory=list)


class Syncer:
    def __init__(
        self,
        client: PlexClient,
        index: LibraryIndex,
        ledger: Ledger,
        stash: StashClient,
        settings: Settings,
        log: StashLog,
        choices: Choices | None = None,
    ) -> None:
        self.client, self.index, self.ledger, self.stash, self.settings = client, index, ledger, stash, settings
        self.choices, self.log = choices or Choices.build(settings), log
        self._held_saves: list[SceneRecord] | None = None  # see saves_held
        self._held_lock = threading.Lock()
        # performer photos this process wrote: actor (case-folded) → URL. Plex keeps one per actor
        # for the whole library, so another item needs it not again (plex/plan.py ``_photos``).
        self._photos_sent: dict[str, str] = {}
        self.locator = Locator(client, index, ledger, settings, log)
        self.posters = Posters(client, stash, ledger, settings)
        self.releaser = Releaser(self.locator, self.posters)
        self.ratings = RatingRule(ledger, client, stash, log) if settings.import_ratings else None

    # -- what Stash wants ------------------------------------------------------
    def state_hash(self, scene: SceneMetadata) -> str:
        extra: list = [self.locator.mapped_paths(scene), self.settings.preserve_plex_edits]
        pin = self.locator.pin(scene.id)
        if pin is not None:  # a new answer syncs the scene again; unpinned hashes are as before
            extra.append([pin.answer, pin.rating_key])
        return desired_for(scene, self.choices).digest(extra)

    def depends_on(self, scene: SceneMetadata) -> dict[str, list[int]]:
        """The entities the scene's item depends on, in the ledger's form (``scene_entities``):
        an entity event finds the scene by any of them."""
        return entity_map(self.choices.depends_on(scene))

    def tags_changed(self) -> None:
        """A tag moved in Stash's tree (or was merged or deleted): with tag filters set, the
        tags they cover and the tags' ancestors are read again before its scenes are synced."""
        if self.settings.hide_tags or self.settings.skip_tags:
            self.choices = Choices.from_tree(self.settings, self.stash.tag_tree(), self.choices.photo_base)

    def out_of_scope(self, scene: SceneMetadata) -> str | None:
        """Why this scene is not synced (its Plex item is then left as it is), or None."""
        pin = self.locator.pin(scene.id)
        if pin is not None and pin.answer == NOT_IN_PLEX:
            return "marked 'Not in Plex' in the inbox (unpin it to match it again)"
        if pin is not None and pin.answer == SKIP:
            return "marked 'Skip this scene' in the inbox (unpin it to sync it again)"
        if self.settings.organized_only and not scene.organized:
            return "not organized (organized_only is on)"
        skipped = [t for t in scene.tags if t.casefold() in self.choices.skipped]
        return f"it carries the tag {skipped[0]!r} (skip_tags)" if skipped else None

    def link_problem(self, record: SceneRecord, read_item: bool = False) -> str | None:
        """Why the ledger's item is no longer the scene's as written (None: it is).

        The state hash says what Stash2Plex wrote; this says the item it wrote is still
        the scene's and still there (a rescan can re-add a file as a new item with fresh
        metadata). It reads the cached index, reloaded per section stamp once per process,
        or with ``read_item`` the item's detail view (one request, never a listing: after a
        scan the scene panel would wait for the listing of the whole library); when Plex
        cannot be asked, the hash alone decides (a sync could not run anyway).
        """
        if record.rating_key is None or not record.plex_path:
            return "no Plex item is linked"
        if record.owner not in (None, record.scene_id):
            return f"Plex item {record.rating_key} was written for scene {record.owner} since (it changed owner)"
        try:
            if read_item:
                state = self.locator.read(record.rating_key, fresh=True)
                problem = self.locator.unusable(state, record.rating_key)
                if problem is not None or state is None:
                    return problem
                key = self.settings.path_map.key
                held = key(record.plex_path) in {key(f) for f in state.files}
            else:
                listed = self.index.index().by_path(record.plex_path)
                held = any(f.rating_key == record.rating_key for f in listed)
        except Stash2PlexError:
            return None
        if held:
            return None
        return f"Plex no longer lists item {record.rating_key} at {record.plex_path} (a rescan may have re-added it)"

    # -- the sync --------------------------------------------------------------
    def sync(
        self, scene: SceneMetadata, record: SceneRecord | None, scan_allowed: bool, relock: bool = False
    ) -> SyncResult:
        try:
            state, how = self.locator.locate(scene, record)
        except PlexNotFound as exc:
            if scan_allowed and self.settings.trigger_plex_scan:
                self.locator.request_scan(scene, exc)
            raise
        try:
            return self._write(scene, record, state, how, relock)
        finally:
            self.client.forget(state.rating_key)

    def preview(self, scene: SceneMetadata, record: SceneRecord | None) -> SyncResult:
        """What ``sync`` would send now, found and planned the same way; nothing is written."""
        state, how = self.locator.locate(scene, record)
        try:
            record, plan, _ = self._plan(scene, record, state, relock=False)
            return SyncResult(
                scene.id, state.rating_key, plan, self.posters.verdict(scene, record, state.rating_key), how
            )
        finally:
            self.client.forget(state.rating_key)

    def _plan(
        self,
        scene: SceneMetadata,
        record: SceneRecord | None,
        state: PlexItemState,
        relock: bool,
        budget: int = EDIT_URL_BUDGET,
    ) -> tuple[SceneRecord | None, ItemPlan, int | None]:
        # What was written to the item is the item's, whichever scene it was for: when the
        # item changes owner (a new scene at a deleted one's path, two items exchanging
        # files), everything written there for the previous owner is removed.
        # An item released since the scene's record was read (worker/release.py; the ledger no
        # longer links it, a record read before does) holds nothing of this scene either.
        prior = self.ledger.item(state.rating_key)
        if record is not None and (
            record.rating_key != state.rating_key
            or (prior is not None and prior.scene_id != scene.id)
            or state.rating_key in self.releaser.released
        ):
            record = SceneRecord(scene_id=scene.id)  # not this scene's item until now: no poster of its own is there
        written = Written(prior.fields, prior.written_tags) if prior is not None else None
        desired = desired_for(scene, self.choices)
        if self.ratings is not None:
            desired, written = self.ratings.plan(scene, state, desired, written)
        with self._held_lock:
            sent = dict(self._photos_sent)
        length = functools.partial(self.client.edit_target_length, state)
        plan, shortened = fit_plan(
            desired, state, written, self.settings.preserve_plex_edits, length, budget, relock, sent
        )
        return record, plan, shortened

    def _write(
        self, scene: SceneMetadata, record: SceneRecord | None, state: PlexItemState, how: str, relock: bool = False
    ) -> SyncResult:
        record, plan, shortened = self._edit(scene, record, state, relock)
        if shortened is not None:
            self.log.info(
                f"scene {scene.id}: details shortened from {len(scene.details or '')} to {shortened} characters "
                "for Plex (the fields must fit in one request); the other fields are written in full"
            )
        rerate, rating = rating_change(plan)
        if rerate:
            self.client.rate(state.rating_key, rating)
        if self.ratings is not None:
            self.ratings.written(scene, state, plan)
        new = SceneRecord(
            scene_id=scene.id,
            rating_key=state.rating_key,
            plex_path=state.files[0] if state.files else None,
            fields=plan.written_fields,
            written_tags=plan.written_tags,
            poster_source=record.poster_source if record else None,
            poster_hash=record.poster_hash if record else None,
            entities=self.depends_on(scene),
        )
        result = SyncResult(scene.id, state.rating_key, plan, "none", how, list(scene.warnings))
        try:
            result.poster = self.posters.write(scene, new)
        except Stash2PlexError:
            self._save(new)  # the fields are in Plex; no state hash, so the next try does the poster
            raise
        new.state_hash = self.state_hash(scene)
        self._save(new)
        self.releaser.released.discard(state.rating_key)
        self.locator.settled(scene, state.rating_key, how)
        return result

    def _edit(
        self, scene: SceneMetadata, record: SceneRecord | None, state: PlexItemState, relock: bool
    ) -> tuple[SceneRecord | None, ItemPlan, int | None]:
        """Plan and send the edit within ``EDIT_URL_BUDGET``; when Plex, or a proxy in front
        of it, refuses a request as too long, plan and send it again within half that
        request's length (requests already answered are sent again: an edit sets values
        and whole lists, so sending it twice changes nothing)."""
        budget, length = EDIT_URL_BUDGET, functools.partial(self.client.edit_target_length, state)
        while True:
            # Planned with relock: an edit that goes anyway also locks what we own that is
            # unlocked; locks alone are not worth an edit (reconcile asks for them).
            planned, plan, shortened = self._plan(scene, record, state, True, budget)
            if not relock and _locks_only(plan):
                plan = dataclasses.replace(plan, fields=(), tags=())
            if not edit_params(plan):
                return planned, plan, shortened
            batches = edit_batches(plan, length, budget, cut_tags=budget < EDIT_URL_BUDGET)
            self._claim_tags(scene.id, state.rating_key, plan)
            claimed = self._claim_photos(plan)
            try:
                for params in batches:
                    self.client.edit(state.rating_key, params)
            except BaseException as exc:
                self._unclaim_photos(claimed)
                if not isinstance(exc, PlexRequestTooLong):
                    raise
                longest = max(length(b) for b in batches)
                if budget <= MIN_EDIT_BUDGET:
                    raise PlexBadRequest(
                        f"{exc}, also at {longest} bytes; raise the request line limit of the proxy in front "
                        "of Plex (nginx: large_client_header_buffers; Apache: LimitRequestLine)"
                    ) from None
                budget = max(MIN_EDIT_BUDGET, min(budget, longest) // 2)
                continue
            left_out = cut_count(batches, plan)
            if left_out:
                self.log.warning(
                    f"scene {scene.id}: {left_out} of its tags were left out of Plex item {state.rating_key}: "
                    f"Plex, or a proxy in front of it, refuses a tag list that long (at most {budget} bytes "
                    "a request went through)"
                )
            return planned, plan, shortened

    def _claim_photos(self, plan: ItemPlan) -> dict[str, str]:
        """Note the plan's performer photos as sent (before the edit, so a sync planned
        meanwhile on another thread leaves them out); returns what was noted."""
        claimed = {name: url for change in plan.tags for name, url in change.photos.items()}
        with self._held_lock:
            self._photos_sent.update(claimed)
        return claimed

    def _unclaim_photos(self, claimed: dict[str, str]) -> None:
        """The edit failed: its photos count as not sent."""
        with self._held_lock:
            for name, url in claimed.items():
                if self._photos_sent.get(name) == url:
                    del self._photos_sent[name]

    # -- the ledger ------------------------------------------------------------
    def _claim_tags(self, scene_id: int, rating_key: int, plan: ItemPlan) -> None:
        """Before an edit adds tags to an item, record them as written there (with what was
        recorded before; fields and the owner as they were): were the record made after the
        edit lost, a tag the scene no longer wants would stay on the item as the user's."""
        prior = self.ledger.item(rating_key)
        wrote = prior.written_tags if prior is not None else {}
        claimed = {
            kind: list(dict.fromkeys([*wrote.get(kind, []), *plan.written_tags.get(kind, [])]))
            for kind in {*wrote, *plan.written_tags}
        }
        if claimed == wrote:
            return
        owner, fields = (prior.scene_id, prior.fields) if prior is not None else (scene_id, {})
        self.ledger.claim(ItemRecord(rating_key, owner, fields, claimed))

    def _save(self, record: SceneRecord) -> None:
        with self._held_lock:
            if self._held_saves is not None:
                self._held_saves.append(record)
                return
        self.ledger.save(record)

    @contextlib.contextmanager
    def saves_held(self) -> Iterator[None]:
        """Hold the ledger records of finished syncs until ``flush_saves``, which the
        pipeline's thread calls before it acknowledges their jobs: a writer then leaves
        its Plex slot without a commit of its own, and a round of syncs is one commit.
        A crash before the flush loses records of writes Plex already has; their jobs
        were not acknowledged, so they run again and find Plex as they left it."""
        with self._held_lock:
            self._held_saves = []
        try:
            yield
        finally:
            self.flush_saves()
            with self._held_lock:
                self._held_saves = None

    def flush_saves(self) -> None:
        with self._held_lock:
            done = self._held_saves
            if not done:
                return
            self._held_saves = []
        try:
            self.ledger.save_many(done)
        except BaseException:
            with self._held_lock:  # kept for the next flush; the jobs stay unacknowledged meanwhile
                if self._held_saves is not None:
                    self._held_saves[:0] = done
            raise
