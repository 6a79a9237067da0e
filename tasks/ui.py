"""The plugin's page and scene panel in Stash's UI: ``ui_status``, ``ui_scene``, ``ui_sync_scene``
and ``ui_retry``.

Stash's UI calls them through ``runPluginOperation`` (one short run; the reply's ``output`` is the
JSON); long work goes through ``runPluginTask`` and the ordinary tasks. Answers come from the
plugin's own files plus, for Plex's state, one quick request to Plex.
"""

from __future__ import annotations

import time
from typing import Any

from core.errors import ConfigError, InputError, PlexAuthError, Stash2PlexError
from sync_queue.dlq import INBOX_KINDS
from sync_queue.health import drainer_stop
from sync_queue.job import INTERACTIVE
from sync_queue.ledger import ALL_CHECKED_AT, SceneRecord
from sync_queue.stats import iso_local
from tasks.context import Context, queue_again, queue_state
from validation.config import SETTINGS_PAGE
from validation.metadata import scene_or_why
from validation.plugin_input import scene_id_arg
from worker.photos import photo_notice
from worker.verdict import OUT_OF_SCOPE, STALE, UNCHANGED, verdict
from worker.watching import watch_report

PLEX_SEEN_KEY = "plex_seen"  # ledger meta: {"reachable": bool | None, "since": epoch seconds}
DLQ_LIMIT = 1000
# a dead-letter class → (the page's words for it, what to do); a setting is named as Stash's
# settings page shows it, with its key (tests/test_user_messages.py)
DEAD_LETTERS = {
    "PlexNotFound": (
        "Not found in Plex",
        "Plex has no file at the scene's mapped path. Check Path map (path_map): the inbox above suggests a rule "
        "when one fits; or let Plex scan the folder, or pin the scene to its Plex item in the inbox, then Retry.",
    ),
    "AmbiguousMatch": (
        "Several Plex items fit",
        "Several Plex items fit this scene, or the only one of its name is not confirmed. Choose its item in the "
        "match inbox above (This one; or 'python Stash2Plex.py pin <scene> <item>'): it syncs at once. Or remove "
        "the duplicate in Plex, fix Path map (path_map) or turn Loose matching (loose_matching) on, then Retry.",
    ),
    "PinnedItemGone": (
        "The chosen Plex item is gone",
        "The Plex item this scene was pinned to is gone (or in a library Plex libraries (plex_libraries) leaves "
        "out). Choose its item again in the inbox.",
    ),
    "PlexAuthError": (
        "Plex refused the token",
        f"Plex rejected the token. Set a valid Plex token (plex_token) in {SETTINGS_PAGE}, then Retry all.",
    ),
    "InvalidMetadata": (
        "Stash holds a value Plex cannot take",
        "Stash holds a value Plex cannot take (named in the reason). Fix it in Stash: saving the scene queues it "
        "again.",
    ),
    "PlexBadRequest": (
        "Plex refused the edit",
        "Plex refused the edit (see the reason). Retry once the cause is fixed; check the Plex server log.",
    ),
    "PlexUnavailable": (
        "Plex did not answer",
        "Plex did not answer. Retry once Plex is running and reachable from Stash.",
    ),
    "StashUnavailable": ("Stash did not answer", "Stash did not answer the plugin. Retry in a moment."),
}
UNKNOWN = ("Could not be synced", "See the reason; Retry once it is fixed.")


# -- ui_status ------------------------------------------------------------------------
def status(app: Context) -> dict[str, Any]:
    """Plex and its token, the queue, dead letters by reason with what to do, last sync, stats."""
    queue = queue_state(app)  # before the dead letters: a job done meanwhile is a dead letter by then
    ledger, dlq = app.ledger(), app.dlq()
    entries, by_reason = dlq.entries(DLQ_LIMIT), dlq.summary(newest=0)["by_reason"]
    watch, health = app.watch_state(), app.health().state()
    try:
        settings = app.settings()
        problems = list(settings.problems)  # bad optional values, each turns one feature off
        watch = watch_report(watch, settings)
    except ConfigError:  # a setting that stops the sync: ``plex.problem`` names it
        problems, watch = [], {**watch, "needed_for": [], "problem": False, "message": None}
    return {
        "plex": plex_state(app),
        "queue": queue,
        "drainer_running": app.drainer_running(),
        "dlq": {"count": sum(by_reason.values()), "shown": len(entries), "groups": dlq_groups(entries, by_reason)},
        "last_full_sync": ledger.meta("last_sync_at"),
        "synced_scenes": ledger.count(),
        "stats": app.stats().snapshot(),
        "last_drainer_error": drainer_stop(health),
        "settings_problems": problems,
        "performer_photos": photo_notice(health),
        "checked_at": iso_local(ledger.meta(ALL_CHECKED_AT)),
        "watch": watch,
    }


def dlq_groups(entries: list[dict[str, Any]], by_reason: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Entries grouped by error class (largest group first), each with what to do. A group's
    ``count`` is the queue's (``by_reason``), not the entries shown (the newest ``DLQ_LIMIT``)."""
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in by_reason or {}}
    for entry in entries:
        shown = {key: entry[key] for key in ("scene_id", "title", "reason", "attempts")}
        groups.setdefault(entry["error_class"], []).append({**shown, "failed_at": iso_local(entry["failed_at"])})
    counts = {name: (by_reason or {}).get(name, len(scenes)) for name, scenes in groups.items()}
    ordered = sorted(groups.items(), key=lambda kv: (-counts[kv[0]], kv[0]))
    return [
        {
            "error_class": name,
            "label": DEAD_LETTERS.get(name, UNKNOWN)[0],
            "in_inbox": name in INBOX_KINDS,  # the page lists these scenes once, in its match inbox
            "count": counts[name],
            "advice": DEAD_LETTERS.get(name, UNKNOWN)[1],
            "scenes": scenes,
        }
        for name, scenes in ordered
    ]


def plex_state(app: Context) -> dict[str, Any]:
    """Reachable (True/False, None when the settings stop us asking), since when (the ledger
    keeps when that last changed), token state."""
    state: dict[str, Any] = {"reachable": None, "token": "unknown", "version": None, "problem": None}
    try:
        app.settings()
    except ConfigError as exc:
        state["token"] = "missing" if "plex_token" in str(exc) else "unknown"
        state["problem"] = f"the plugin settings are not usable: {exc}"
    else:
        try:
            state["version"] = app.plex().version()
            state["reachable"], state["token"] = True, "accepted"
        except PlexAuthError as exc:
            state["reachable"], state["token"], state["problem"] = True, "rejected", str(exc)
        except Stash2PlexError as exc:
            state["reachable"], state["problem"] = False, str(exc)
    ledger = app.ledger()
    seen = ledger.meta(PLEX_SEEN_KEY) or {}
    if "reachable" not in seen or seen["reachable"] != state["reachable"]:
        seen = {"reachable": state["reachable"], "since": time.time()}
        ledger.set_meta(PLEX_SEEN_KEY, seen)
    return {**state, "since": iso_local(seen["since"])}


# -- ui_scene -------------------------------------------------------------------------
def scene(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    """A scene's item, last write, pin and sync state with the reason (worker/verdict.py)."""
    scene_id = scene_id_arg(params)
    record = app.ledger().get_many([scene_id]).get(scene_id)
    answer: dict[str, Any] = {"scene_id": scene_id, "rating_key": None, "plex_path": None, "library": None}
    answer.update(last_written=None, reason=None, advice=None, next_retry_at=None)
    if record is not None:
        answer.update(
            rating_key=record.rating_key, plex_path=record.plex_path, last_written=iso_local(record.synced_at)
        )
    pin = app.ledger().pin_of(scene_id)
    answer["pin"] = {"answer": pin.answer, "rating_key": pin.rating_key} if pin is not None else None
    answer["state"] = _scene_state(app, scene_id, record, answer)
    if record is not None and record.rating_key is not None:
        answer["library"] = _library(app, record.rating_key)
    return answer


def _scene_state(app: Context, scene_id: int, record: SceneRecord | None, answer: dict[str, Any]) -> str:
    dead = app.dlq().entry(scene_id)
    if dead is not None:
        answer["reason"], answer["advice"] = dead["reason"], DEAD_LETTERS.get(dead["error_class"], UNKNOWN)[1]
        return "dead_lettered"
    job = app.producer_queue().waiting_job(scene_id)
    if job is not None:
        if job.attempt:
            answer["reason"], answer["next_retry_at"] = job.last_error, iso_local(job.next_attempt_at)
        return "waiting"
    never = record is None or record.state_hash is None
    raw = app.stash().scenes_by_id([scene_id]).get(scene_id)
    if raw is None and never:
        return "never_synced"
    scene, why = scene_or_why(raw, scene_id)
    if scene is None:
        answer["reason"] = why
        return "changed"
    found = verdict(app.syncer(), scene, record, read_item=True)  # one scene: no listing
    if found.kind == UNCHANGED:
        return "in_sync"
    if found.kind == STALE and never:
        return "never_synced"
    answer["reason"] = found.why  # out of scope (its Plex item is left as it is) or changed
    return "out_of_scope" if found.kind == OUT_OF_SCOPE else "changed"


def _library(app: Context, rating_key: int) -> str | None:
    """The title of the Plex library holding the item (None when Plex does not answer)."""
    try:
        plex = app.plex()
        section = plex.item_state(rating_key).section_id
        return next((s.title for s in plex.sections() if s.key == section), None)
    except Stash2PlexError:
        return None


# -- actions --------------------------------------------------------------------------
def sync_scene(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    """Queue the scene ahead of bulk work; a dead-letter entry of it is retried with it
    (``ui_retry``: only a dead letter)."""
    scene_id = scene_id_arg(params)
    if app.options["mode"] == "ui_retry" and app.dlq().entry(scene_id) is None:
        raise InputError(
            f"scene {scene_id} is not in the dead-letter queue (it may have been retried already); reload the page"
        )
    requeued = queue_again(app, [scene_id], INTERACTIVE)
    what = "dead-letter entry queued again" if requeued.dead else "queued" if requeued.added else "already queued"
    app.log.info(f"scene {scene_id}: {what} from Stash's UI")
    return {"scene_id": scene_id, "queued": True, "already_queued": not requeued.added}
