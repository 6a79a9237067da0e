"""Which scenes of a Stash page may differ in Plex from what was last written.

What ``all``/``recent`` queue and every preview plans: the scenes whose verdict
(worker/verdict.py) is stale. Scenes left out (``skip_tags``, ``organized_only``, the
inbox's answers) are never among them, only counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import InvalidMetadata
from validation.metadata import scene_from_stash
from worker.verdict import OUT_OF_SCOPE, STALE, verdict

if TYPE_CHECKING:
    from sync_queue.ledger import Ledger
    from worker.sync import Syncer


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
