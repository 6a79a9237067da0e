"""Which job a scene hook calls for, decided from the hook context's plain values.

The hook (hooks/lane.py) decides here. The standard library and the table of synced fields only.
"""

from __future__ import annotations

from sync_queue.priority import BULK, INTERACTIVE
from validation.fields import SYNCED_INPUTS

# Keys of Stash's SceneUpdateInput (graphql/schema/types/scene.graphql), which a
# Scene.Update.Post hook receives as its input, whose change can alter what Plex shows:
# derived from the table of synced fields.
SYNCED_INPUT_FIELDS = SYNCED_INPUTS

# Stash's bulk scene editor (bulkSceneUpdate) fires Scene.Update.Post for each scene with
# the *bulk* input, BulkSceneUpdateInput [S:internal/api/resolver_mutation_scene.go
# `BulkSceneUpdate`]: the keys of SceneUpdateInput (values as {ids, mode}) except a
# scene's groups, which it names group_ids (v0.27 on) and movie_ids (every release).
# These are the SceneUpdateInput keys they stand for.
BULK_INPUT_KEYS = {"group_ids": "groups", "movie_ids": "movies"}


def scene_job(has_input: bool, input_fields: tuple[str, ...] | list[str] | None) -> tuple[str, tuple[str, ...]] | None:
    """(priority, synced fields changed) of the job a scene event calls for; None when
    nothing Plex shows changed."""
    if not has_input:
        # Scans and sceneCreate: no field list. Scans fire these by the thousand,
        # so they queue as bulk work, which users' edits always overtake.
        return BULK, ()
    if input_fields is None:
        return INTERACTIVE, ()
    synced = sorted(SYNCED_INPUT_FIELDS.intersection(BULK_INPUT_KEYS.get(f, f) for f in input_fields))
    return (INTERACTIVE, tuple(synced)) if synced else None
