"""Releasing a Plex item no scene owns now (a deleted scene's, one that changed hands): what
Stash2Plex wrote there is taken off (``release``); what the user changed in Plex stays."""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.errors import InvalidMetadata
from plex.plan import ItemPlan, Written, edit_batches, edit_params, rating_change, release_plan, split_removals
from validation.fields import SYNCED
from validation.metadata import scene_from_stash
from validation.pathmap import basename

if TYPE_CHECKING:
    from plex.client import PlexItemState
    from sync_queue.ledger import ItemRecord, SceneRecord
    from worker.locate import Locator
    from worker.poster import Posters


class Releaser:
    def __init__(self, locator: Locator, posters: Posters) -> None:
        self.client, self.index, self.ledger = locator.client, locator.index, locator.ledger
        self.settings, self.stash, self.locator, self.posters = locator.settings, posters.stash, locator, posters
        self.released: set[int] = set()  # items released by this process and not written since (worker/sync.py)

    def release_gone(self, scene_id: int, record: SceneRecord) -> list[int]:
        """The scene is gone from Stash (deleted; its file may stay, and Plex its item).
        The item its record links and every item now at its last path (files may have
        moved between items since) are released when the scene they were last written for
        is gone or no longer holds their file (``release``); the scene's record is dropped.
        Returns the items released."""
        keys = [record.rating_key] if record.rating_key is not None else []
        if record.plex_path:
            self.index.refresh(force=True)
            keys += [f.rating_key for f in self.index.index().by_path(record.plex_path)]
        released = [key for key in dict.fromkeys(keys) if self._release_if_orphaned(key, scene_id)]
        self.ledger.forget_scene(scene_id)
        return released

    def _release_if_orphaned(self, rating_key: int, gone: int) -> bool:
        prior = self.ledger.item(rating_key)
        if prior is None:
            return False  # nothing of ours is on it
        state = self.locator.read(rating_key, fresh=True)
        try:
            if state is None or self.locator.unusable(state, rating_key):
                return False  # gone, or in a library plex_libraries leaves out: never written
            if prior.scene_id != gone and self._holds(prior.scene_id, state):
                return False
            self.release(state, prior)
        finally:
            self.client.forget(rating_key)
        return True

    def _holds(self, scene_id: int, state: PlexItemState, raws: dict[int, dict[str, Any]] | None = None) -> bool:
        """Whether the scene the item was last written for still exists and holds its file
        (or was pinned to it, or accepted it by name): then the item is still its own.
        ``raws``: the scenes read from Stash already (``holders`` reads them in one request)."""
        if self.locator.pinned(scene_id) == state.rating_key:
            return True
        raw = (self.stash.scenes_by_id([scene_id]) if raws is None else raws).get(scene_id)
        if raw is None:
            return False
        try:
            scene = scene_from_stash(raw)
        except InvalidMetadata:
            return True  # cannot tell: left as it is
        return self.locator.mismatch(scene, state, state.rating_key, exact=False) is None

    def holders(self, asks: Sequence[tuple[PlexItemState, int]]) -> list[int | None]:
        """For each (item, scene): the scene besides that one whose item this is now: one
        pinned to it, or the one it was last written for while that scene still holds its
        file (``_holds``). A second scene pinned there would take the item over on every
        sync, and back. The one answer for a pin (tasks/pins.py) and the inbox's cards
        (tasks/inbox.py ``held_by``); the owners are read from Stash in one request."""
        pins = [(sid, pin.rating_key) for sid, pin in self.ledger.pins().items()]
        priors = self.ledger.items(list(dict.fromkeys(state.rating_key for state, _ in asks)))
        # the scene each item was last written for, unless it is the one asking
        owners = [priors[s.rating_key].scene_id if s.rating_key in priors else None for s, _ in asks]
        owners = [owner if owner != other_than else None for owner, (_, other_than) in zip(owners, asks)]
        read = [owner for owner in owners if owner is not None]
        raws = self.stash.scenes_by_id(read) if read else {}
        found: list[int | None] = []
        for (state, other_than), owner in zip(asks, owners):
            pinned = [sid for sid, key in pins if key == state.rating_key and sid != other_than]
            if pinned:
                found.append(min(pinned))
            else:
                found.append(owner if owner is not None and self._holds(owner, state, raws) else None)
        return found

    def release(self, state: PlexItemState, prior: ItemRecord) -> ItemPlan:
        """Take off the item everything written there for ``prior``'s scene, which no longer
        owns it (``plex/plan.py`` ``release_plan``: what goes, what the user's stays), unlocked;
        the rating cleared, our poster giving way to Plex's own (``Posters.restore``); fields in
        ``skip_fields`` are left alone. The item's record is dropped."""
        kept = {row.plex for row in SYNCED if self.settings.writes(row.name)}
        written = Written(
            {k: v for k, v in prior.fields.items() if k in kept},
            {k: v for k, v in prior.written_tags.items() if k in kept},
        )
        title = posixpath.splitext(basename(state.files[0]))[0] if state.files else ""
        plan = release_plan(state, written, title, self.settings.preserve_plex_edits)
        length = functools.partial(self.client.edit_target_length, state)
        if edit_params(plan):
            for params in edit_batches(plan, length, locked=False):
                for request in split_removals(params, length):
                    self.client.edit(state.rating_key, request)
        if rating_change(plan)[0]:
            self.client.rate(state.rating_key, None)
        uploaded = self.ledger.item_poster(state.rating_key)
        if uploaded is not None and "poster" in kept:
            self.posters.restore(state.rating_key, uploaded[1])
        self.ledger.forget_item(state.rating_key)
        self.locator.unread(state.rating_key)  # a batch's read of it shows what was taken off
        self.released.add(state.rating_key)
        return plan
