"""Finding a scene's Plex item, the one place: the user's pin, else the item the ledger links,
else the index (``plex/matcher.py`` ``diagnose``), each verified on the item's fresh detail view
before anything is written; on a mismatch the index is reloaded and the scene matched once
more (docs/architecture.md, "Write-time invariants"). Also: a batch's items read ahead
(``prefetch``) and the matches by file name only noted for the inbox (``settled``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import AmbiguousMatch, PinnedItemGone, PlexNotFound
from plex.client import PlexClient, PlexItemState
from plex.index import LibraryIndex
from plex.matcher import CHOOSE, Confidence, Diagnosis, PathIndex, PlexFile, SceneFile, diagnose
from sync_queue.ledger import Ledger, Pin, SceneRecord
from validation.config import Settings
from validation.metadata import SceneMetadata
from validation.pathmap import parent

if TYPE_CHECKING:
    from core.log import StashLog


class Locator:
    """The Plex item a scene's data goes to (``locate``), and why."""

    def __init__(
        self, client: PlexClient, index: LibraryIndex, ledger: Ledger, settings: Settings, log: StashLog
    ) -> None:
        self.client, self.index, self.ledger, self.settings, self.log = client, index, ledger, settings, log
        self._prefetched: dict[int, PlexItemState] = {}
        self._pins: dict[int, Pin | None] = {}  # this batch's pins (load_pins); others are read when asked
        self._loose: set[int] | None = None  # scenes whose item was accepted by name only (ledger)

    def mapped_paths(self, scene: SceneMetadata) -> list[str]:
        return [self.settings.path_map.map(f.path) for f in scene.files]

    # -- a user's answers (the inbox; pin/unpin) ------------------------------------
    def load_pins(self, scene_ids: list[int]) -> None:
        """Read the pins of a batch's scenes in one query (``pin`` answers from it)."""
        found = self.ledger.pins(scene_ids)
        self._pins.update({sid: found.get(sid) for sid in scene_ids})

    def pin(self, scene_id: int) -> Pin | None:
        return self._pins[scene_id] if scene_id in self._pins else self.ledger.pin_of(scene_id)

    def pinned(self, scene_id: int) -> int | None:
        """The item the user pinned the scene to (None: no pin, or another answer)."""
        pin = self.pin(scene_id)
        return pin.rating_key if pin is not None else None

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
        """The item an exact or accepted match points at, without any refresh (nor a wait
        for a first listing that runs: a scene not listed yet is read when it syncs)."""
        files = SceneFile.of(scene.files)
        if self.index.listing:
            early = self._early_match(files)
            return early[0].rating_key if early is not None else None
        choice = self.diagnose(files).choice
        return choice.item.rating_key if choice is not None else None

    def end_batch(self, keys: list[int] | None = None) -> None:
        """Forget the items read for a batch (``keys``; all when None): a later sync reads them afresh."""
        for key in list(self._prefetched) if keys is None else keys:
            self._prefetched.pop(key, None)
            self.client.forget(key)

    def unread(self, rating_key: int) -> None:
        """Drop a batch's read of the item (it changed since)."""
        self._prefetched.pop(rating_key, None)

    # -- finding the item ------------------------------------------------------
    def locate(self, scene: SceneMetadata, record: SceneRecord | None) -> tuple[PlexItemState, str]:
        """The item to write, checked on its current detail view (see the module docstring).
        A pinned item comes first and needs not hold the scene's file (the user said so)."""
        pinned = self.pinned(scene.id)
        if pinned is not None:
            return self._pinned(scene, pinned), "pinned"
        if record is not None and record.rating_key is not None:
            state, problem = self._checked(scene, record.rating_key, exact=True)
            if state is not None and problem is None:
                return state, "linked"
            self.log.info(f"scene {scene.id}: {problem}; matching again")
        chosen, how = self.find_item(scene)
        state, problem = self._checked(scene, chosen.rating_key, exact=how.startswith(Confidence.HIGH.value))
        if state is not None and problem is None:
            return state, how
        # The cached index is a hint, never trusted at write time: a rescan may have moved
        # or re-added files. Reload the changed sections and match once more, on fresh reads.
        self.log.info(f"scene {scene.id}: {problem}; reloading the Plex library listing and matching again")
        self.index.refresh(force=True, missing=True)
        chosen, how = self.find_item(scene)
        state, problem = self._checked(scene, chosen.rating_key, how.startswith(Confidence.HIGH.value), fresh=True)
        if state is None:
            raise PlexNotFound(f"{problem}; nothing was written", looked_for=tuple(self.mapped_paths(scene)))
        if problem is not None:
            raise AmbiguousMatch(
                f"{problem}, also after reloading the Plex library listing; nothing was written. "
                f"Check path_map and that Plex has scanned the file, or {CHOOSE}.",
                candidates=state.files,
            )
        return state, how

    def _checked(
        self, scene: SceneMetadata, rating_key: int, exact: bool, fresh: bool = False
    ) -> tuple[PlexItemState | None, str | None]:
        """The item read, and why it must not receive the scene's data (``mismatch``); an
        item refused is forgotten (the next read is fresh)."""
        state = self.read(rating_key, fresh)
        problem = self.mismatch(scene, state, rating_key, exact)
        if state is not None and problem is not None:
            self.client.forget(rating_key)
        return state, problem

    def _pinned(self, scene: SceneMetadata, rating_key: int) -> PlexItemState:
        """The pinned item, if it still exists in a library we sync; else the pin is dropped
        and the scene goes to the dead-letter queue, back into the inbox."""
        state = self.read(rating_key)
        problem = self.unusable(state, rating_key)
        if state is not None:
            if problem is None:
                return state
            self.client.forget(state.rating_key)
        self.ledger.unpin(scene.id)
        self._pins.pop(scene.id, None)
        raise PinnedItemGone(
            f"the scene was pinned to Plex item {rating_key}, but {problem}; nothing was written and the pin is "
            "removed. Choose its Plex item again in the inbox (Stash2Plex page)."
        )

    def settled(self, scene: SceneMetadata, rating_key: int, how: str) -> None:
        """Keep the ledger's list of matches by name only (the inbox shows them) current."""
        if self._loose is None:
            self._loose = self.ledger.loose_ids()
        if how.startswith((Confidence.MEDIUM.value, Confidence.LOW.value)):
            reason = how.partition(": ")[2]  # "medium: …": the grade is ours, the reason is the user's
            self.ledger.note_loose(scene.id, rating_key, reason, scene.title or "")
            self._loose.add(scene.id)
        elif scene.id in self._loose:
            self.ledger.settle_loose(scene.id)
            self._loose.discard(scene.id)

    def read(self, rating_key: int, fresh: bool = False) -> PlexItemState | None:
        """The item's detail view (this batch's read unless ``fresh``); None when Plex has no such item."""
        state = None if fresh else self._prefetched.pop(rating_key, None)
        try:
            return state or self.client.item_state(rating_key)
        except PlexNotFound:
            return None

    def mismatch(self, scene: SceneMetadata, state: PlexItemState | None, rating_key: int, exact: bool) -> str | None:
        """Why ``state`` must not receive this scene's data (None: it may).

        ``exact``: the item was found by its path (or linked), so it must list one of
        the scene's mapped paths; otherwise (a name match) it must pass the name rule
        again, on the item's fresh parts.
        """
        problem = self.unusable(state, rating_key)
        if state is None or problem is not None:
            return problem
        mapped, key = self.mapped_paths(scene), self.settings.path_map.key
        holds = {key(p) for p in mapped} & {key(f) for f in state.files}
        if holds or (not exact and self._accepted_by_name(scene, state)):
            return None
        return f"Plex item {rating_key} holds {', '.join(state.files) or 'no file'}, not the scene's file {', '.join(mapped)}"

    def unusable(self, state: PlexItemState | None, rating_key: int) -> str | None:
        """Why no scene's data may go to this item, whatever it holds (None: it may)."""
        if state is None:
            return f"Plex item {rating_key} no longer exists"
        if state.section_id not in {s.key for s in self.index.sections}:
            return f"Plex item {rating_key} is in a library that plex_libraries leaves out"
        return None

    def _accepted_by_name(self, scene: SceneMetadata, state: PlexItemState) -> bool:
        parts = state.parts or tuple((f, None, None) for f in state.files)
        index = PathIndex(
            (PlexFile(state.rating_key, state.section_id, path, size, ms) for path, size, ms in parts),
            self.settings.path_map,
        )
        choice = self.diagnose(SceneFile.of(scene.files), index).choice
        return choice is not None and choice.item.rating_key == state.rating_key

    def listed(self, scene: SceneMetadata, record: SceneRecord | None) -> tuple[int, str]:
        """(the item, how) as the index lists it, no item read (``reconcile`` reads many at
        once): the pin, the linked item while the index lists it at one of the scene's mapped
        paths, else ``find_item``'s (raises PlexNotFound/AmbiguousMatch)."""
        pinned = self.pinned(scene.id)
        if pinned is not None:
            return pinned, "pinned"
        if record is not None and record.rating_key is not None:
            index = self.index.index()
            if any(f.rating_key == record.rating_key for p in self.mapped_paths(scene) for f in index.by_path(p)):
                return record.rating_key, "linked"
        item, how = self.find_item(scene)
        return item.rating_key, how

    def find_item(self, scene: SceneMetadata) -> tuple[PlexFile, str]:
        """(the Plex file a sync would pick, why) from the index; raises PlexNotFound/AmbiguousMatch."""
        files = SceneFile.of(scene.files)
        early = self._early_match(files) if self.index.listing else None
        if early is not None:
            return early
        found = self.diagnose(files)
        # A stale index causes either refusal (a file Plex has just scanned in, moved or
        # deleted): re-check the section stamps (rate-limited) and match once more.
        if found.problem is not None and self.index.refresh(missing=isinstance(found.problem, PlexNotFound)):
            found = self.diagnose(files)
        picked, confidence = found.chosen(), found.match.confidence.value
        if confidence != "high":
            self.log.info(f"scene {scene.id}: matched Plex item {picked.item.rating_key} ({picked.reason})")
        return picked.item, f"{confidence}: {picked.reason}"

    def diagnose(self, files: list[SceneFile], index: PathIndex | None = None) -> Diagnosis:
        """Where ``files`` lead in ``index`` (the whole index when None) under ``loose_matching``."""
        return diagnose(files, self.index.index() if index is None else index, not self.settings.loose_matching)

    def _early_match(self, files: list[SceneFile]) -> tuple[PlexFile, str] | None:
        """While the first listing of the library runs (plex/index.py ``early``): the item
        at exactly the primary file's path when it is listed already and passes ``choose``
        as a high match would; None leaves the scene to the whole index (a name match, or
        a file not listed yet, may only be decided on everything Plex holds)."""
        if not files:
            return None
        paths = self.settings.path_map
        held = self.index.early(paths.map(files[0].path))
        if not held:
            return None
        found = self.diagnose(files, PathIndex(held, paths))
        if found.match.confidence is not Confidence.HIGH or found.match.scene_index != 0 or found.choice is None:
            return None
        return found.choice.item, f"high: {found.choice.reason}"

    def request_scan(self, scene: SceneMetadata, exc: PlexNotFound) -> None:
        path = self.mapped_paths(scene)[0]
        section = self.index.section_for(path) or (self.index.sections[0] if len(self.index.sections) == 1 else None)
        if section is None:
            self.log.warning(f"scene {scene.id}: no configured Plex library holds {path}; cannot ask Plex to scan it")
            return
        folder = parent(path)
        self.client.scan_folder(section.key, folder)
        exc.scan_requested = True
        self.log.info(f"scene {scene.id}: asked Plex to scan {folder} (library {section.title!r})")
