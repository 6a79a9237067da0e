"""The hook: decide from ``hookContext`` alone whether Plex cares, enqueue, return.

Stash runs it inside the user's mutation: no network, no HTTP client, plexapi or
stashapi. One job per scene (a waiting job absorbs newer events for its scene), and a
background drainer made sure of. A tag, performer, studio or group hook records ONE
entity event; the drainer queues the scenes whose Plex items show it, a batch at a time.
"""

from __future__ import annotations

import time

from core.log import StashLog
from hooks.scene_event import scene_job
from sync_queue import inbox
from sync_queue.job import EntityEvent, Job
from validation.plugin_input import HookContext

# Entity update keys whose change can alter what Plex shows (name; a studio's parent
# and a tag's parents/children, for settings that write or filter by them).
SYNCED_ENTITY_FIELDS = frozenset({"name", "parent_id", "parent_ids", "child_ids"})
# A performer's image is its photo in Plex (performer_photos). The hook reads no setting: with
# photos off, the scenes it queues hash as before and are passed over without a Plex request.
PERFORMER_FIELDS = SYNCED_ENTITY_FIELDS | {"image"}


def entity_events_for(context: HookContext, now: float) -> list[EntityEvent]:
    """The entity events a tag/performer/studio/group hook calls for (empty: nothing Plex shows)."""
    kind = context.entity_kind
    assert kind is not None
    fields = context.inputFields
    synced = PERFORMER_FIELDS if kind == "performer" else SYNCED_ENTITY_FIELDS
    if context.type.endswith(".Update.Post") and fields is not None and not synced.intersection(fields):
        return []
    ids = [context.id]
    if context.type == "Tag.Merge.Post" and isinstance(context.input, dict):
        # The sources are gone from Stash; only the ledger still knows their scenes.
        ids += _ids(context.input.get("source"))
    if kind == "tag" and isinstance(context.input, dict):
        # Tags given new parents here (tagUpdate's child_ids list, bulkTagUpdate's {ids, mode}):
        # the ledger knows their scenes by the tags they carry and those tags' ancestors,
        # which did not include this tag until now. A tag's own parents changing, or a
        # child leaving, is this tag's event: its scenes and its descendants' record it.
        children = context.input.get("child_ids")
        ids += _ids(children.get("ids") if isinstance(children, dict) else children)
    return [EntityEvent(kind, i, context.type, now) for i in dict.fromkeys(ids)]


def _ids(values) -> list[int]:
    return [int(v) for v in values if str(v).isdigit()] if isinstance(values, list) else []


def handle_entity(context: HookContext, app, log: StashLog) -> str:
    events = entity_events_for(context, time.time())
    what = f"{context.entity_kind} {context.id}"
    if not events:
        log.debug(f"{what}: only {', '.join(context.inputFields or [])} changed, which Plex does not show")
        return f"{what}: nothing to sync"
    for event in events:
        inbox.put(str(app.data_dir), inbox.entity_record(event.kind, event.entity_id, event.event, event.queued_at))
    started = app.ensure_drainer()
    log.debug(f"{what} changed ({context.type}); its scenes will be checked{'; drainer started' if started else ''}")
    return f"{what} queued"


def job_for(context: HookContext, now: float) -> Job | None:
    """The job this event calls for, or None when nothing Plex shows changed."""
    decided = scene_job(context.input is not None, context.inputFields)
    if decided is None:
        return None
    priority, fields = decided
    return Job(scene_id=context.id, priority=priority, event=context.type, fields=fields, enqueued_at=now)


def handle(context: HookContext, app, log: StashLog, queued: bool | None = None) -> str:
    """Enqueue the event's job and start the drainer; returns the reply's output.
    ``queued``: the fast lane wrote the job's inbox line already and found no drainer
    (hooks/fast.py): only the drainer is started."""
    if context.entity_kind is not None:
        return handle_entity(context, app, log)
    job = job_for(context, time.time())
    if job is None:
        changed = ", ".join(context.inputFields or [])
        log.debug(f"scene {context.id}: only {changed} changed, which Plex does not show; nothing queued")
        return f"scene {context.id}: nothing to sync"
    if queued is None:
        record = inbox.scene_record(job.scene_id, job.priority, job.event, job.fields, job.enqueued_at)
        inbox.put(str(app.data_dir), record)
    _warn_if_failing(app, log)
    started = app.ensure_drainer()
    log.debug(f"scene {context.id} queued ({job.priority}){'; drainer started' if started else ''}")
    return f"scene {context.id} queued"


def _warn_if_failing(app, log: StashLog) -> None:
    """Background failures surface where the user looks: one warning in Stash's log
    (at most once a minute), read from the small file the drainer leaves behind, and
    once each notice the drainer could only write to its own log."""
    from sync_queue.health import notice_due, warning_due

    for warning in (warning_due(app.data_dir, time.time()), notice_due(app.data_dir)):
        if warning:
            log.warning(warning)
