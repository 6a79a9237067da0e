"""A user's answer for a scene the matcher could not settle (a Plex item, "Not in Plex",
"Skip this scene"), and taking it back: ``ui_pin`` (``scene_id``, ``answer`` = item |
not_in_plex | skip, ``rating_key`` for item), ``ui_unpin`` (``scene_id``), ``pin``/``unpin``
on the command line (its operands are the same ``args``).

The answer lives in the ledger (``pins``), so index reloads, ``all`` and ``reconcile`` keep
it; the sync honours it before any match and still checks the pinned item at write time.
The scene leaves the dead-letter queue and is queued ahead of bulk work.
"""

from __future__ import annotations

from typing import Any

from core.errors import InputError, PlexNotFound
from sync_queue.job import INTERACTIVE
from sync_queue.ledger import ANSWERS, PIN_ITEM
from tasks.context import Context, queue_again
from validation.document import got
from validation.plugin_input import RATING_KEY, scene_id_arg, whole_arg


def _check_item(app: Context, scene_id: int, rating_key: int) -> dict[str, Any]:
    """The item must exist now, in a library the settings sync, and be no other scene's
    (else the pin could never hold)."""
    try:
        state = app.plex().item_state(rating_key)
    except PlexNotFound:
        raise InputError(f"Plex has no item {rating_key}: choose an item Plex shows (its ratingKey)") from None
    try:
        sections = {s.key: s.title for s in app.index().sections}
        if state.section_id not in sections:
            raise InputError(
                f"Plex item {rating_key} is in a library that plex_libraries leaves out; "
                "add that library to plex_libraries or choose another item"
            )
        holder = app.syncer().releaser.holders([(state, scene_id)])[0]
    finally:
        app.plex().forget(rating_key)
    plex_path = state.files[0] if state.files else None
    if holder is not None:
        raise InputError(_taken(app, scene_id, holder, rating_key, plex_path))
    return {"library": sections[state.section_id], "plex_path": plex_path}


def _taken(app: Context, scene_id: int, holder: int, rating_key: int, plex_path: str | None) -> str:
    """Why a pin onto another scene's item is refused, and what would work instead."""
    title = (app.stash().scenes_by_id([holder]).get(holder) or {}).get("title") or ""
    named = f"scene {holder}" + (f" ({title!r})" if title else "")
    return (
        f"Plex item {rating_key} is {named}'s: it holds that scene's file {plex_path or '(no file)'}. "
        f"Pinned to scene {scene_id} too, it would change hands on every sync, showing one scene's title, "
        f"tags and cover, then the other's. If scene {scene_id} is a copy of {named}, choose 'Skip this scene' "
        f"for it (or merge the two scenes in Stash); if its own file is not in Plex yet, choose 'Not in Plex' "
        "or let Plex scan it, then choose its own item."
    )


def pin(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    scene_id = scene_id_arg(params)
    answer = str(params.get("answer") or PIN_ITEM)
    if answer not in ANSWERS:
        raise InputError(f"args.answer must be one of {', '.join(ANSWERS)}, got {got(answer)}")
    reply: dict[str, Any] = {"scene_id": scene_id, "answer": answer, "rating_key": None}
    if answer == PIN_ITEM:
        reply["rating_key"] = whole_arg(params, "rating_key", RATING_KEY)
        reply.update(_check_item(app, scene_id, reply["rating_key"]))
    app.ledger().set_pin(scene_id, answer, reply["rating_key"])
    reply["queued"] = queue_again(app, [scene_id], INTERACTIVE).added > 0
    what = f"pinned to Plex item {reply['rating_key']}" if answer == PIN_ITEM else f"marked {answer}"
    app.log.info(f"scene {scene_id}: {what}; queued to sync now")
    return reply


def unpin(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    scene_id = scene_id_arg(params)
    had = app.ledger().unpin(scene_id)
    queued = queue_again(app, [scene_id], INTERACTIVE).added > 0 if had else False
    app.log.info(f"scene {scene_id}: {'answer removed; the matcher decides again' if had else 'had no pin'}")
    return {"scene_id": scene_id, "unpinned": had, "queued": queued}
