"""``ui_preview``: what a sync of every changed scene would write, without writing.

Per scene whose desired state differs from what was last written (the same test Sync
all uses): the fields with their value in Plex now and after the sync, the tags the
sync adds and removes, and the poster verdict, from the same plan the sync executes
(``Syncer.preview``), in the same entry shape as the dry runs' plan file. The
page in Stash's UI shows it as a table before the user confirms with Sync all. At most
``PREVIEW_LIMIT`` scenes are planned (``more`` says there are others); a scene that cannot
be planned (not in Plex, ambiguous) is listed with the reason; Plex down or a rejected
token fails the whole preview with that error. ``labels`` names each field and tag type as
the page shows it (validation/fields.py ``LABELS``).
"""

from __future__ import annotations

from typing import Any

from core.errors import PlexAuthError, PlexUnavailable, Stash2PlexError
from tasks.sync_all import may_differ  # the same "differs from what was written" test as Sync all
from validation.fields import LABELS
from validation.metadata import scene_from_stash
from worker.preview import plan_entry, unmatched_entry, writes

PREVIEW_LIMIT = 50  # scenes with changes shown at most; the page says when there are more
PREVIEW_PAGE = 500


def run(app) -> dict[str, Any]:
    app.settings()
    stash, syncer, ledger = app.stash(), app.syncer(), app.ledger()
    result: dict[str, Any] = {"checked": 0, "changes": [], "failed": [], "more": False, "labels": LABELS}
    page = 1
    while not result["more"]:
        total, scenes = stash.scenes_page(page, PREVIEW_PAGE)
        changed = set(may_differ(app, scenes)) if scenes else set()  # out-of-scope scenes are not planned
        records = ledger.get_many(sorted(changed))
        for raw in scenes:
            if int(raw["id"]) in changed:
                _preview_one(syncer, raw, records.get(int(raw["id"])), result)
        result["checked"] += len(scenes)
        if not scenes or result["checked"] >= total or len(scenes) < PREVIEW_PAGE:
            break
        page += 1
    return result


def _preview_one(syncer, raw: dict[str, Any], record, result: dict[str, Any]) -> None:
    """One scene's entry in the dry runs' shape (worker/preview.py ``plan_entry``), or
    its reason in ``failed`` (``unmatched_entry``)."""
    if len(result["changes"]) + len(result["failed"]) >= PREVIEW_LIMIT:
        result["more"] = True
        return
    scene_id = int(raw["id"])
    scene = None
    try:
        scene = scene_from_stash(raw)
        preview = syncer.preview(scene, record)
    except (PlexUnavailable, PlexAuthError):
        raise  # no preview at all: the page says Plex is down or the token is wrong
    except Stash2PlexError as exc:
        paths = syncer.mapped_paths(scene) if scene is not None else []
        result["failed"].append(unmatched_entry(scene, scene_id, paths, str(exc)))
        return
    entry = plan_entry(scene, preview.rating_key, preview.how, preview.plan, preview.poster)
    if writes(entry):
        result["changes"].append(entry)
