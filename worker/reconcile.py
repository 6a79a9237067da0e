"""Checking Plex against Stash item by item, and repairing what differs (``reconcile``).

Plex is the truth, the ledger a cache. ``check`` reads the items the fresh listing finds
(``Locator.listed``), 50 a request, and what differs: fields, locks, tags, the poster, a ledger
link gone, moved or missing; an item last written for another scene is compared with what was
written there. ``repair`` writes through ``Syncer.sync``, which reads the item again and writes
only if it still holds the file; a scene in line only gets its ledger record corrected.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import AmbiguousMatch, PlexNotFound
from plex.client import PlexItemState
from plex.desired import desired_for
from plex.plan import ItemPlan, Written, plan_item
from sync_queue.ledger import ItemRecord, SceneRecord
from validation.metadata import SceneMetadata

if TYPE_CHECKING:
    from sync_queue.ledger import Ledger
    from validation.config import Settings
    from worker.sync import Syncer, SyncResult

READ_CHUNK = 50
# Poster verdicts: upload (Plex shows a poster that is not ours: its thumb is not
# locked), check (Stash has a newer screenshot: upload when the bytes differ), adopt
# (a locked poster on an item the ledger has no record of: kept), ok, none.
POSTER_DRIFT = {"upload": "poster", "check": "screenshot_changed"}


@dataclass
class Finding:
    scene: SceneMetadata
    record: SceneRecord | None
    rating_key: int | None = None
    how: str = ""
    state: PlexItemState | None = None
    written: ItemRecord | None = None  # what was last written to the item, and for which scene
    plan: ItemPlan | None = None
    poster: str = "none"
    drift: list[str] = field(default_factory=list)
    reason: str = ""  # why no item was found

    @property
    def matched(self) -> bool:
        return self.state is not None

    @property
    def taken_over(self) -> bool:
        """Another scene's data was written to the item last (it changed owner)."""
        return self.written is not None and self.written.scene_id != self.scene.id

    @property
    def same_item(self) -> bool:
        """The scene's record links this item and nothing was written there for another scene since."""
        return self.record is not None and self.record.rating_key == self.rating_key and not self.taken_over

    @property
    def needs_write(self) -> bool:
        """A Plex write (fields, tags, locks or poster) is planned."""
        return self.plan is not None and (not self.plan.empty or self.poster in POSTER_DRIFT)


class Reconciler:
    def __init__(self, syncer: Syncer, ledger: Ledger, settings: Settings, chunk: int = READ_CHUNK) -> None:
        self.syncer, self.ledger, self.settings, self.chunk = syncer, ledger, settings, chunk
        self.reads = 0  # detail requests sent

    # -- looking -------------------------------------------------------------------
    def check(self, scenes: list[SceneMetadata]) -> list[Finding]:
        records = self.ledger.get_many([s.id for s in scenes])
        findings = [self._locate(scene, records.get(scene.id)) for scene in scenes]
        keys = [f.rating_key for f in findings if f.rating_key is not None]
        states = self._read(keys)
        written = self.ledger.items(keys)
        for finding in findings:
            if finding.rating_key is None:
                continue
            finding.state = states.get(finding.rating_key)
            finding.written = written.get(finding.rating_key)
            if finding.how == "linked" and finding.taken_over:
                finding.drift.append("owner_changed")  # the scene's item was written for another scene since
            if finding.state is None:  # gone between the listing and the read
                finding.drift.append("item_gone")
                finding.reason = f"Plex item {finding.rating_key} vanished while being checked"
                continue
            self._compare(finding)
        return findings

    def _locate(self, scene: SceneMetadata, record: SceneRecord | None) -> Finding:
        finding = Finding(scene, record)
        try:
            finding.rating_key, finding.how = self.syncer.locator.listed(scene, record)
        except (PlexNotFound, AmbiguousMatch) as exc:
            finding.reason = str(exc)
        linked = record.rating_key if record is not None else None
        if finding.how == "pinned":  # the user's answer comes before any match
            if record is None or linked != finding.rating_key:
                finding.drift.append("ledger_missing" if record is None else "item_moved")
        elif finding.how != "linked":
            if linked is None:
                finding.drift.append("ledger_missing")
            else:
                finding.drift.append("item_moved" if linked in self.syncer.index.index().rating_keys() else "item_gone")
        if finding.reason:
            finding.drift.append("unmatched")
        return finding

    def _read(self, keys: list[int]) -> dict[int, PlexItemState]:
        """Detail views of ``keys``, ``chunk`` items a request, with up to
        ``plex_concurrency`` requests in flight (as many as a sync may have)."""
        from concurrent.futures import ThreadPoolExecutor

        unique = list(dict.fromkeys(keys))
        chunks = [unique[start : start + self.chunk] for start in range(0, len(unique), self.chunk)]
        states: dict[int, PlexItemState] = {}
        workers = max(1, min(len(chunks), self.settings.plex_concurrency))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="plex-read") as pool:
            for read in pool.map(self.syncer.client.item_states, chunks):
                states.update(read)
                self.reads += 1
        return states

    def _compare(self, finding: Finding) -> None:
        state = finding.state
        assert state is not None
        item = finding.written  # the item's, whichever scene it was for: another scene's is removed
        written = Written(item.fields, item.written_tags) if item is not None else None
        desired = desired_for(finding.scene, self.syncer.choices)  # what the settings choose to write
        finding.plan = plan_item(desired, state, written, self.settings.preserve_plex_edits, relock=True)
        for change in finding.plan.fields:
            finding.drift.append(change.name if change.plex != change.stash else "unlocked")
        for tags in finding.plan.tags:
            moved = tags.removed or set(tags.result) != set(tags.plex)
            finding.drift.append(tags.tag_type if moved else "unlocked")
        finding.poster = self._poster(finding)
        if finding.poster in POSTER_DRIFT:
            finding.drift.append(POSTER_DRIFT[finding.poster])

    def _poster(self, finding: Finding) -> str:
        url, state = finding.scene.screenshot, finding.state
        assert state is not None
        if not url or not self.settings.writes("poster"):
            return "none"
        if "thumb" not in state.locked or finding.taken_over:
            return "ok" if self._no_cover(finding) else "upload"
        if not finding.same_item or finding.record is None:
            return "adopt"
        if finding.record.poster_source is None:
            return "upload" if finding.record.poster_hash is None else "check"
        return "ok" if finding.record.poster_source == url else "check"

    def _no_cover(self, finding: Finding) -> bool:
        """Stash has no cover for the scene (its default image: Plex keeps its own poster,
        unlocked), as the last sync of this screenshot found; its bytes tell it from an adopted
        poster, as the write's own decision reads them (``Posters.verdict``)."""
        record = finding.record
        if not finding.same_item or record is None or record.poster_hash is not None:
            return False
        if record.poster_source != finding.scene.screenshot or finding.rating_key is None:
            return False
        fresh = SceneRecord(scene_id=finding.scene.id, rating_key=finding.rating_key)  # the bytes decide
        return self.syncer.posters.verdict(finding.scene, fresh, finding.rating_key) == "none"

    # -- repairing -------------------------------------------------------------------
    def repair(self, finding: Finding) -> SyncResult | None:
        """Write what differs through the sync's write step; a scene in line only gets
        its ledger record corrected. Returns the SyncResult, or None when nothing was sent."""
        assert finding.state is not None and finding.rating_key is not None
        if not finding.needs_write and finding.same_item:
            self._correct_ledger(finding)
            return None
        # The sync reads the item again and checks it holds the scene's file on that read:
        # the view read for the check is older than the decision to write (files move).
        self.reads += 1
        return self.syncer.sync(finding.scene, self._record_for_sync(finding), scan_allowed=False, relock=True)

    def _record_for_sync(self, finding: Finding) -> SceneRecord:
        record = (
            dataclasses.replace(finding.record)
            if finding.record is not None and finding.same_item
            else SceneRecord(scene_id=finding.scene.id, rating_key=finding.rating_key)
        )
        if finding.poster == "upload":
            record.poster_source, record.poster_hash = None, None  # not ours any more: upload whatever its bytes
        elif finding.poster == "check":
            record.poster_source = None  # the bytes decide
        elif finding.poster == "adopt":
            record.poster_source = finding.scene.screenshot
        return record

    def _correct_ledger(self, finding: Finding) -> None:
        record = finding.record
        assert record is not None
        digest = self.syncer.state_hash(finding.scene)
        entities = self.syncer.depends_on(finding.scene)
        if record.state_hash != digest or record.entities != entities:
            self.ledger.save(dataclasses.replace(record, state_hash=digest, entities=entities))
