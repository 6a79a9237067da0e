"""The hook: what Stash runs inside the user's save, in one lane, standard library only.

Stash runs post hooks inside the mutation, one plugin run after another (pkg/plugin/plugins.go
``executePostHooks``), so a bulk edit waits for one run of ours per scene. The lane checks
stdin (validation/document.py), decides from ``hookContext`` alone whether Plex cares (a
scene's job, or a tag, performer, studio or group event), appends it to the spool
(sync_queue/spool.py: a file, never SQLite, so a busy disk never holds Stash up), warns
while background sync fails (at most once a minute), and makes sure a drainer runs: a
running one is nudged; otherwise the caller starts one (app/main.py: only then are the
packages checked). No network, no third-party package.
"""

from __future__ import annotations

import os
import time

from core.platform import is_locked
from sync_queue import health, spool
from sync_queue.owner import data_folder
from sync_queue.priority import BULK, INTERACTIVE
from validation.document import ENTITY_HOOKS, args_values, connection_values, hook_values, read_document
from validation.fields import SYNCED_INPUTS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from core.log import StashLog

# Stash's bulk scene editor (bulkSceneUpdate) fires Scene.Update.Post for each scene with
# the *bulk* input, BulkSceneUpdateInput [S:internal/api/resolver_mutation_scene.go
# `BulkSceneUpdate`]: the keys of SceneUpdateInput (values as {ids, mode}) except a
# scene's groups, which it names group_ids (v0.27 on) and movie_ids (every release).
# These are the SceneUpdateInput keys they stand for.
BULK_INPUT_KEYS = {"group_ids": "groups", "movie_ids": "movies"}
# Entity update keys whose change can alter what Plex shows (name; a studio's parent
# and a tag's parents/children, for settings that write or filter by them).
SYNCED_ENTITY_FIELDS = frozenset({"name", "parent_id", "parent_ids", "child_ids"})
# A performer's image is its photo in Plex (performer_photos). The hook reads no setting: an
# image-only change is marked (spool.IMAGE_ONLY) and the drainer drops it with photos off.
PERFORMER_FIELDS = SYNCED_ENTITY_FIELDS | {"image"}


def parse(raw: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(``server_connection``'s values, ``hookContext``'s values) of a hook's stdin; None
    for a task's. InputError names what is wrong, as a task's parse would."""
    document = read_document(raw)
    connection = connection_values(document["server_connection"])
    context = args_values(document.get("args"))["hookContext"]
    return None if context is None else (connection, hook_values(context))


def run(
    connection: dict[str, Any],
    context: dict[str, Any],
    env: dict[str, str],
    log: StashLog,
    start_drainer: Callable[[dict[str, Any], str], None],
) -> str:
    """Queue the hook's job and make sure a drainer runs; returns the reply's output."""
    data_dir = data_folder(connection["PluginDir"], connection["Dir"], env)
    now = time.time()
    kind = ENTITY_HOOKS.get(context["type"])
    what = f"{kind} {context['id']}" if kind else f"scene {context['id']}"
    records = entity_records(context, now) if kind else scene_records(context, now)
    if not records:
        log.debug(
            f"{what}: only {', '.join(context['inputFields'] or ())} changed, which Plex does not show; nothing queued"
        )
        return f"{what}: nothing to sync"
    for record in records:
        spool.put(data_dir, record)
    # Looked at after the write: its holder now (a drainer or a task) looks once more after
    # letting go of it, so it sees the line; a free lock means none will: start one.
    started = not is_locked(os.path.join(data_dir, spool.LOCK_FILE))
    busy_s = 0.0 if started else spool.moving_for(os.path.join(data_dir, spool.QUEUE_FOLDER), now)
    state = health.read(data_dir)  # once: both look at it
    for warning in (health.warning_due(data_dir, now, busy_s, state=state), health.notice_due(data_dir, state)):
        if warning:
            log.warning(warning)
    if started:
        start_drainer(connection, data_dir)
    else:
        spool.nudge(data_dir)
    done = "; drainer started" if started else ""
    if kind:
        log.debug(f"{what} changed ({context['type']}); its scenes will be checked{done}")
    else:
        log.debug(f"{what} queued ({records[0]['priority']}){done}")
    return f"{what} queued"


def scene_records(context: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """The spool line a scene event calls for: bulk for scans and sceneCreate (no input;
    they fire by the thousand, and users' edits always overtake them), else interactive with
    the synced fields changed (keys of Stash's SceneUpdateInput, graphql/schema/types/
    scene.graphql, which an update hook receives as its input); none when nothing Plex
    shows changed."""
    if context["input"] is None:
        return [spool.scene_record(context["id"], BULK, context["type"], (), now)]
    fields = context["inputFields"]
    synced = SYNCED_INPUTS.intersection(BULK_INPUT_KEYS.get(f, f) for f in fields or ())
    if fields is not None and not synced:
        return []
    return [spool.scene_record(context["id"], INTERACTIVE, context["type"], tuple(sorted(synced)), now)]


def entity_records(context: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """The entity events a tag/performer/studio/group hook calls for (none: nothing Plex shows)."""
    kind, trigger, given = ENTITY_HOOKS[context["type"]], context["type"], context["input"]
    fields = context["inputFields"]
    synced = PERFORMER_FIELDS if kind == "performer" else SYNCED_ENTITY_FIELDS
    if trigger.endswith(".Update.Post") and fields is not None and not synced.intersection(fields):
        return []
    if kind == "performer" and fields is not None and synced.intersection(fields) == {"image"}:
        trigger += spool.IMAGE_ONLY
    ids = [context["id"]]
    if trigger == "Tag.Merge.Post" and isinstance(given, dict):
        # The sources are gone from Stash; only the ledger still knows their scenes.
        ids += _ids(given.get("source"))
    if kind == "tag" and isinstance(given, dict):
        # Tags given new parents here (tagUpdate's child_ids list, bulkTagUpdate's {ids, mode}):
        # the ledger knows their scenes by the tags they carry and those tags' ancestors,
        # which did not include this tag until now. A tag's own parents changing, or a
        # child leaving, is this tag's event: its scenes and its descendants' record it.
        children = given.get("child_ids")
        ids += _ids(children.get("ids") if isinstance(children, dict) else children)
    return [spool.entity_record(kind, i, trigger, now) for i in dict.fromkeys(ids)]


def _ids(values: Any) -> list[int]:
    """The ids of a list Stash sent (numbers or their decimal strings); others are passed over."""
    if not isinstance(values, list):
        return []
    found = (int(v) if isinstance(v, str) and v.isascii() and v.isdigit() else v for v in values)
    return [v for v in found if spool.an_id(v)]
