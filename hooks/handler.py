"""The hook: decide from ``hookContext`` alone whether Plex cares, enqueue, return.

Stash runs this synchronously inside the user's mutation, so it must be fast: it
never touches the network and imports no HTTP client, plexapi or stashapi. It
enqueues one job per scene (events for a scene whose job is still waiting collapse
into it) and makes sure one background drainer is running.
"""

from __future__ import annotations

import time

from core.log import StashLog
from sync_queue.job import BULK, INTERACTIVE, Job
from validation.plugin_input import HookContext

# Keys of Stash's SceneUpdateInput (graphql/schema/types/scene.graphql), which a
# Scene.Update.Post hook receives as its input, whose change can alter what Plex shows.
SYNCED_INPUT_FIELDS = frozenset(
    {"title", "details", "date", "studio_id", "performer_ids", "tag_ids", "cover_image", "primary_file_id"}
)


def job_for(context: HookContext, now: float) -> Job | None:
    """The job this event calls for, or None when nothing Plex shows changed."""
    if context.input is None:
        # Scans and sceneCreate: no field list. Scans fire these by the thousand,
        # so they queue as bulk work, which users' edits always overtake.
        return Job(scene_id=context.id, priority=BULK, event=context.type, enqueued_at=now)
    fields = context.inputFields
    if fields is not None:
        synced = sorted(SYNCED_INPUT_FIELDS.intersection(fields))
        if not synced:
            return None
        return Job(scene_id=context.id, priority=INTERACTIVE, event=context.type, fields=tuple(synced), enqueued_at=now)
    return Job(scene_id=context.id, priority=INTERACTIVE, event=context.type, enqueued_at=now)


def handle(context: HookContext, app, log: StashLog) -> str:
    """Enqueue the event's job and start the drainer; returns the reply's output."""
    job = job_for(context, time.time())
    if job is None:
        changed = ", ".join(context.inputFields or [])
        log.debug(f"scene {context.id}: only {changed} changed, which Plex does not show; nothing queued")
        return f"scene {context.id}: nothing to sync"
    added = app.producer_queue().put(job)
    started = app.ensure_drainer()
    what = "queued" if added else "already queued"
    log.debug(f"scene {context.id} {what} ({job.priority}){'; drainer started' if started else ''}")
    return f"scene {context.id} {what}"
