"""``ui_preview``: what a sync of every changed scene would write, without writing.

Per scene whose desired state differs from what was last written (the same test Sync
all uses): the fields with their value in Plex now and after the sync, and the tags the
sync adds and removes, from the same plan the sync executes (``Syncer.preview``). The
page in Stash's UI shows it as a table before the user confirms with Sync all. At most
``PREVIEW_LIMIT`` scenes are planned (``more`` says there are others); a scene that cannot
be planned (not in Plex, ambiguous) is listed with the reason; Plex down or a rejected
token fails the whole preview with that error.
"""

from __future__ import annotations

from typing import Any

from core.errors import PlexAuthError, PlexUnavailable, Stash2PlexError
from tasks.sync_all import may_differ  # the same "differs from what was written" test as Sync all
from validation.metadata import scene_from_stash

PREVIEW_LIMIT = 50  # scenes with changes shown at most; the page says when there are more
PREVIEW_PAGE = 500


def run(app) -> dict[str, Any]:
    app.settings()
    stash, syncer, ledger = app.stash(), app.syncer(), app.ledger()
    result: dict[str, Any] = {"checked": 0, "changes": [], "failed": [], "more": False}
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
    if len(result["changes"]) + len(result["failed"]) >= PREVIEW_LIMIT:
        result["more"] = True
        return
    scene_id, title = int(raw["id"]), raw.get("title") or None
    try:
        plan = syncer.preview(scene_from_stash(raw), record).plan
    except (PlexUnavailable, PlexAuthError):
        raise  # no preview at all: the page says Plex is down or the token is wrong
    except Stash2PlexError as exc:
        result["failed"].append({"scene_id": scene_id, "title": title, "reason": str(exc)})
        return
    if plan.empty:
        return
    result["changes"].append(
        {
            "scene_id": scene_id,
            "title": title,
            "rating_key": plan.rating_key,
            "fields": [{"name": c.name, "current": c.plex, "new": c.stash} for c in plan.fields],
            "tags": [
                {"type": c.tag_type, "added": [t for t in c.result if t not in c.plex], "removed": list(c.removed)}
                for c in plan.tags
            ],
        }
    )
