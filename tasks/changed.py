"""Which scenes of a Stash page may differ in Plex from what was last written.

The one test ``all``/``recent`` queue by and every preview plans by: a scene whose
desired state hash differs from the ledger's (or has no record, or whose Plex link
is stale). Scenes the settings leave out (``skip_tags``, ``organized_only``) are never
among them, only counted.
"""

from __future__ import annotations

from core.errors import InvalidMetadata
from tasks import App
from validation.metadata import scene_from_stash


def may_differ(app: App, scenes: list[dict]) -> list[int]:
    """The ids of the scenes whose desired state differs from what was last written (or is unknown)."""
    return sort_scenes(app, scenes)[0]


def sort_scenes(app: App, scenes: list[dict], note_skipped: bool = False) -> tuple[list[int], int]:
    """The scenes that may differ (``may_differ``), and how many are out of scope.
    ``note_skipped``: the ledger records what the out-of-scope scenes depend on (a tag
    leaving a skipped tag brings its scenes back through the entity event)."""
    syncer = app.syncer()
    records = app.ledger().get_many([int(s["id"]) for s in scenes])
    changed, out_of_scope = [], 0
    skipped: dict[int, dict[str, list[int]]] = {}
    for raw in scenes:
        sid = int(raw["id"])
        try:
            scene = scene_from_stash(raw)
        except InvalidMetadata:
            changed.append(sid)  # queue it: the worker records why it cannot be synced
            continue
        if syncer.out_of_scope(scene) is not None:
            out_of_scope += 1
            skipped[sid] = syncer.depends_on(scene)
        else:
            record = records.get(sid)
            stale = record is None or record.state_hash != syncer.state_hash(scene)
            if stale or not syncer.link_current(record):  # a rescan may have re-added the file
                changed.append(sid)
    if note_skipped and skipped:
        app.ledger().set_entities_many(skipped)
    return changed, out_of_scope
