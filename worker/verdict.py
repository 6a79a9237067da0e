"""Does Plex already show this scene as Stash has it? The one answer to it.

The worker (what a job needs), ``all``/``recent`` and every preview (what to queue or plan),
``reconcile`` (what to check), ``inspect`` and the scene panel in Stash's UI all ask here:

- ``out_of_scope``: the settings (``skip_tags``, ``organized_only``) or the user's answer in
  the inbox leave the scene out; its Plex item is left as it is.
- ``unchanged``: what was last written (the ledger's state hash) is what Stash wants now,
  nothing was written to that item for another scene since, and Plex's listing still shows
  the item at the path written (the scene panel and ``inspect`` ask the item itself: one
  request, where a scan would have the index list the whole library first).
- ``stale``: anything else; ``why`` says which.

``sort_scenes`` applies it to a Stash page: what ``all``/``recent`` queue and every preview
plans are its stale scenes; scenes left out are never among them, only counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import InvalidMetadata
from validation.metadata import scene_from_stash

if TYPE_CHECKING:
    from sync_queue.ledger import Ledger, SceneRecord
    from validation.metadata import SceneMetadata
    from worker.sync import Syncer

OUT_OF_SCOPE, UNCHANGED, STALE = "out_of_scope", "unchanged", "stale"


@dataclass(frozen=True)
class Verdict:
    kind: str  # OUT_OF_SCOPE | UNCHANGED | STALE
    why: str


def verdict(syncer: Syncer, scene: SceneMetadata, record: SceneRecord | None, read_item: bool = False) -> Verdict:
    """The scene's verdict from its ledger ``record`` (None: never written); ``read_item``:
    the link is checked on the item itself, not the index (``Syncer.link_problem``)."""
    why = syncer.out_of_scope(scene)
    if why is not None:
        return Verdict(OUT_OF_SCOPE, why)
    if record is None or record.state_hash is None:
        return Verdict(STALE, "never written to Plex")
    if record.state_hash != syncer.state_hash(scene):
        return Verdict(STALE, "changed in Stash (or in the settings) since the last write")
    why = syncer.link_problem(record, read_item)
    if why is not None:
        return Verdict(STALE, why)
    return Verdict(UNCHANGED, f"Plex item {record.rating_key} shows what was last written")


def sort_scenes(
    syncer: Syncer, ledger: Ledger, scenes: list[dict], note_skipped: bool = False
) -> tuple[list[int], int]:
    """The ids of the scenes that may differ from what was last written (or unknown), and
    how many are out of scope.
    ``note_skipped``: the ledger records what the out-of-scope scenes depend on (a tag
    leaving a skipped tag brings its scenes back through the entity event)."""
    records = ledger.get_many([int(s["id"]) for s in scenes])
    changed, out_of_scope = [], 0
    skipped: dict[int, dict[str, list[int]]] = {}
    for raw in scenes:
        sid = int(raw["id"])
        try:
            scene = scene_from_stash(raw)
        except InvalidMetadata:
            changed.append(sid)  # queue it: the worker records why it cannot be synced
            continue
        found = verdict(syncer, scene, records.get(sid))
        if found.kind == OUT_OF_SCOPE:
            out_of_scope += 1
            skipped[sid] = syncer.depends_on(scene)
        elif found.kind == STALE:
            changed.append(sid)
    if note_skipped and skipped:
        ledger.set_entities_many(skipped)
    return changed, out_of_scope
