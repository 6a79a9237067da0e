"""Syncing one scene into its Plex item: locate, read, plan, write, poster, ledger.

The caller has already skipped scenes whose desired state is unchanged since the
last successful write (``Syncer.state_hash``), so everything here is real work.
"""

from __future__ import annotations

import hashlib
import ntpath
import posixpath
from dataclasses import dataclass, field

from core.errors import AmbiguousMatch, PlexNotFound, Stash2PlexError
from plex.client import PlexClient, PlexItemState
from plex.desired import Choices, desired_for
from plex.index import LibraryIndex
from plex.matcher import SceneFile, choose, match_scene
from plex.plan import ItemPlan, Written, edit_params, plan_item, rating_change
from sync_queue.ledger import Ledger, SceneRecord, entity_map
from validation.config import Settings
from validation.metadata import SceneMetadata
from validation.pathmap import map_path, normalize


@dataclass(frozen=True)
class Preview:
    """What a sync would do now (dry runs, ``inspect``): the item, the plan, the poster verdict."""

    rating_key: int
    how: str
    plan: ItemPlan
    poster: str  # upload | unchanged | none | failed (the screenshot could not be read)


@dataclass
class SyncResult:
    scene_id: int
    rating_key: int
    plan: ItemPlan
    poster: str  # uploaded | unchanged | none | failed
    how: str  # why this item: linked | high | medium | chosen: <reason>
    warnings: list[str] = field(default_factory=list)


class Syncer:
    def __init__(
        self,
        client: PlexClient,
        index: LibraryIndex,
        ledger: Ledger,
        stash,
        settings: Settings,
        log,
        choices: Choices | None = None,
    ) -> None:
        self.client = client
        self.index = index
        self.ledger = ledger
        self.stash = stash
        self.settings = settings
        self.choices = choices or Choices.build(settings)
        self.log = log
        self._prefetched: dict[int, PlexItemState] = {}

    # -- what Stash wants ------------------------------------------------------
    def mapped_paths(self, scene: SceneMetadata) -> list[str]:
        return [map_path(f.path, self.settings.path_map, self.settings.case_insensitive_paths) for f in scene.files]

    def state_hash(self, scene: SceneMetadata) -> str:
        extra = [self.mapped_paths(scene), self.settings.preserve_plex_edits]
        return desired_for(scene, self.choices).digest(extra)

    def out_of_scope(self, scene: SceneMetadata) -> str | None:
        """Why this scene is not synced (its Plex item is then left as it is), or None."""
        if self.settings.organized_only and not scene.organized:
            return "not organized (organized_only is on)"
        skipped = [t for t in scene.tags if t.casefold() in self.choices.skipped]
        return f"it carries the tag {skipped[0]!r} (skip_tags)" if skipped else None

    # -- reading many items at once ----------------------------------------------
    def prefetch(self, work: list[tuple[SceneMetadata, SceneRecord | None]], chunk: int = 50) -> list[int]:
        """Read the items a batch will most likely touch in one request per ``chunk``
        (instead of one GET per scene); returns their keys. A scene missed here only
        costs a GET later; a Plex that cannot be reached raises at once (one request,
        not one per scene)."""
        keys = []
        for scene, record in work:
            key = record.rating_key if record is not None and record.rating_key is not None else self._quick_key(scene)
            if key is not None:
                keys.append(key)
        for start in range(0, len(keys), chunk):
            self._prefetched.update(self.client.item_states(keys[start : start + chunk]))
        return keys

    def _quick_key(self, scene: SceneMetadata) -> int | None:
        """The item an exact or accepted match points at, without any refresh."""
        files = [SceneFile(path=f.path, size=f.size, duration_s=f.duration) for f in scene.files]
        match = match_scene(files, self.index.index(), self.settings.path_map, self.settings.case_insensitive_paths)
        try:
            return choose(match, not self.settings.loose_matching, files).item.rating_key
        except (PlexNotFound, AmbiguousMatch):
            return None

    def end_batch(self, keys: list[int] | None = None) -> None:
        """Forget the items read for a batch (``keys``; all when None): a later sync reads them afresh."""
        for key in list(self._prefetched) if keys is None else keys:
            self._prefetched.pop(key, None)
            self.client.forget(key)

    def use_states(self, states: dict[int, PlexItemState]) -> None:
        """Detail views the caller has just read (``reconcile``): the next sync of these items reads none."""
        self._prefetched.update(states)

    def _state(self, rating_key: int) -> PlexItemState:
        state = self._prefetched.pop(rating_key, None)
        return state if state is not None else self.client.item_state(rating_key)

    # -- the sync --------------------------------------------------------------
    def sync(
        self, scene: SceneMetadata, record: SceneRecord | None, scan_allowed: bool, relock: bool = False
    ) -> SyncResult:
        try:
            state, how = self._locate(scene, record)
        except PlexNotFound as exc:
            if scan_allowed and self.settings.trigger_plex_scan:
                self._request_scan(scene, exc)
            raise
        try:
            return self._write(scene, record, state, how, relock)
        finally:
            self.client.forget(state.rating_key)

    def preview(self, scene: SceneMetadata, record: SceneRecord | None) -> Preview:
        """What ``sync`` would send now, found and planned the same way; nothing is written."""
        state, how = self._locate(scene, record)
        try:
            record, plan = self._plan(scene, record, state, relock=False)
            return Preview(state.rating_key, how, plan, self._poster_verdict(scene, record))
        finally:
            self.client.forget(state.rating_key)

    def _plan(
        self, scene: SceneMetadata, record: SceneRecord | None, state: PlexItemState, relock: bool
    ) -> tuple[SceneRecord | None, ItemPlan]:
        if record is not None and record.rating_key != state.rating_key:
            record = SceneRecord(scene_id=scene.id)  # a new item: nothing of ours is on it yet
        written = Written(record.fields, record.written_tags) if record is not None else None
        desired = desired_for(scene, self.choices)
        return record, plan_item(desired, state, written, self.settings.preserve_plex_edits, relock)

    def _write(
        self, scene: SceneMetadata, record: SceneRecord | None, state: PlexItemState, how: str, relock: bool = False
    ) -> SyncResult:
        record, plan = self._plan(scene, record, state, relock)
        params = edit_params(plan)
        if params:
            self.client.edit(state.rating_key, params)
        rerate, rating = rating_change(plan)
        if rerate:
            self.client.rate(state.rating_key, rating)
        new = SceneRecord(
            scene_id=scene.id,
            rating_key=state.rating_key,
            plex_path=state.files[0] if state.files else None,
            fields=plan.written_fields,
            written_tags=plan.written_tags,
            poster_source=record.poster_source if record else None,
            poster_hash=record.poster_hash if record else None,
            entities=entity_map(scene.entities),
        )
        result = SyncResult(scene.id, state.rating_key, plan, "none", how, list(scene.warnings))
        result.poster = self._poster(scene, new, result.warnings)
        new.state_hash = self.state_hash(scene) if result.poster != "failed" else None
        self.ledger.save(new)
        return result

    # -- finding the item ------------------------------------------------------
    def _locate(self, scene: SceneMetadata, record: SceneRecord | None) -> tuple[PlexItemState, str]:
        wanted = {normalize(p, self.settings.case_insensitive_paths) for p in self.mapped_paths(scene)}
        if record is not None and record.rating_key is not None:
            try:
                state = self._state(record.rating_key)
            except PlexNotFound:
                state = None
            if state is not None:
                if wanted & {normalize(f, self.settings.case_insensitive_paths) for f in state.files}:
                    return state, "linked"
                self.client.forget(state.rating_key)
            self.log.info(f"scene {scene.id}: Plex item {record.rating_key} no longer holds its file; matching again")
        chosen, how = self._match(scene)
        try:
            return self._state(chosen.rating_key), how
        except PlexNotFound:
            # The index still lists an item Plex has deleted (a long-lived drainer):
            # reload the changed sections and match once more.
            self.index.refresh(force=True)
            chosen, how = self._match(scene)
            return self.client.item_state(chosen.rating_key), how

    def find_item(self, scene: SceneMetadata):
        """(the Plex file a sync would pick, why) from the index; raises PlexNotFound/AmbiguousMatch."""
        return self._match(scene)

    def _match(self, scene: SceneMetadata):
        files = [SceneFile(path=f.path, size=f.size, duration_s=f.duration) for f in scene.files]
        rules, ci = self.settings.path_map, self.settings.case_insensitive_paths
        match = match_scene(files, self.index.index(), rules, ci)
        try:
            picked = choose(match, not self.settings.loose_matching, files)
        except (PlexNotFound, AmbiguousMatch) as exc:
            # A stale index causes either (a file Plex has just scanned in, moved or
            # deleted): re-check the section stamps (rate-limited) and match once more.
            if not self.index.refresh(missing=isinstance(exc, PlexNotFound)):
                raise
            match = match_scene(files, self.index.index(), rules, ci)
            picked = choose(match, not self.settings.loose_matching, files)
        if match.confidence.value != "high":
            self.log.info(f"scene {scene.id}: matched Plex item {picked.item.rating_key} ({picked.reason})")
        return picked.item, f"{match.confidence.value}: {picked.reason}"

    def _request_scan(self, scene: SceneMetadata, exc: PlexNotFound) -> None:
        path = self.mapped_paths(scene)[0]
        section = self.index.section_for(path) or (self.index.sections[0] if len(self.index.sections) == 1 else None)
        if section is None:
            self.log.warning(f"scene {scene.id}: no configured Plex library holds {path}; cannot ask Plex to scan it")
            return
        module = ntpath if "\\" in path and "/" not in path else posixpath
        folder = module.dirname(path)
        self.client.scan_folder(section.key, folder)
        exc.scan_requested = True
        self.log.info(f"scene {scene.id}: asked Plex to scan {folder} (library {section.title!r})")

    # -- poster ----------------------------------------------------------------
    def _poster_verdict(self, scene: SceneMetadata, record: SceneRecord | None) -> str:
        """What ``_poster`` would do, without uploading (the screenshot is read to compare its bytes)."""
        url = scene.screenshot
        if not url:
            return "none"
        if record is not None and url == record.poster_source:
            return "unchanged"
        try:
            digest = hashlib.sha1(self.stash.image(url)).hexdigest()
        except Stash2PlexError:
            return "failed"
        return "unchanged" if record is not None and digest == record.poster_hash else "upload"

    def _poster(self, scene: SceneMetadata, record: SceneRecord, warnings: list[str]) -> str:
        url = scene.screenshot if self.settings.writes("poster") else None
        if not url:
            return "none"
        if url == record.poster_source:
            return "unchanged"
        try:
            image = self.stash.image(url)
            digest = hashlib.sha1(image).hexdigest()
            if digest != record.poster_hash:
                self.client.upload_poster(record.rating_key, image)
                record.poster_hash = digest
                outcome = "uploaded"
            else:
                outcome = "unchanged"
        except Stash2PlexError as exc:
            warnings.append(f"poster not updated ({exc}); it is retried on the next sync")
            return "failed"
        record.poster_source = url
        return outcome
