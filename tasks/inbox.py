"""The match inbox of the Stash2Plex page: every scene the matcher could not settle.

A scene is in it when its dead-letter entry says no item was found (``PlexNotFound``,
``PinnedItemGone``) or several fit (``AmbiguousMatch``), or its item was accepted by name only
(the ledger's ``loose_matches``), unless the user answered it (``pins``). The list comes from our
own files; only the page shown is read from Stash and matched against the cached Plex index.
Modes: ``ui_inbox`` (a searchable page), ``ui_path_help`` (a ``path_map`` rule and what it would match),
``ui_recheck`` (queue them all again), ``ui_thumbs`` (Plex posters as ``data:`` URLs: the page
never sees the Plex token or address).
"""

from __future__ import annotations

import base64
from typing import Any

from core.errors import InputError, PlexNotFound, Stash2PlexError
from plex.client import PlexItemState
from plex.matcher import PathIndex, PlexFile, SceneFile, distinct_items, duration_agrees, match_scene, size_agrees
from plex.suggest import suggest_rule, unsettled
from sync_queue.dlq import INBOX_KINDS
from sync_queue.job import BULK
from tasks.context import Context, queue_again
from validation.document import got
from validation.metadata import scene_or_why
from validation.plugin_input import RATING_KEY, whole_arg

ORDER = {"ambiguous": 0, "unmatched": 1, "loose": 2}
PER_PAGE, MAX_PER_PAGE = 25, 100
MAX_CANDIDATES = 6
MAX_THUMBS = MAX_PER_PAGE * MAX_CANDIDATES
THUMB_TYPES = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"RIFF": "image/webp"}


def entries(app: Context) -> list[dict[str, Any]]:
    """Every scene of the inbox (scene id, title, kind, reason), most pressing first."""
    pinned = set(app.ledger().pins())
    found: dict[int, dict[str, Any]] = {}
    for entry in app.dlq().entries(limit=1_000_000):
        kind = INBOX_KINDS.get(entry["error_class"])
        if kind is not None and entry["scene_id"] not in pinned:
            found[entry["scene_id"]] = {
                "scene_id": entry["scene_id"],
                "title": entry["title"] or "",
                "kind": kind,
                "reason": entry["reason"],
                "linked": None,
            }
    for sid, (rk, reason, title) in app.ledger().loose_matches().items():
        if sid not in pinned and sid not in found:
            found[sid] = {"scene_id": sid, "title": title, "kind": "loose", "reason": reason, "linked": rk}
    return sorted(found.values(), key=lambda e: (ORDER[e["kind"]], e["scene_id"]))


def run(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    per_page = whole_arg(params, "per_page", f"a whole number from 1 to {MAX_PER_PAGE}", MAX_PER_PAGE, PER_PAGE)
    page = whole_arg(params, "page", f"a whole number from 1 to {2**31}", 2**31, 1)
    query = str(params.get("query") or "").strip()
    everything = entries(app)
    counts = {kind: sum(e["kind"] == kind for e in everything) for kind in ORDER}
    words = query.casefold().split()
    shown = [e for e in everything if all(w in f"{e['scene_id']} {e['title']} {e['reason']}".casefold() for w in words)]
    start = (page - 1) * per_page
    try:  # the synced libraries' titles and Plex's files (the cached index)
        index = app.index()
        plex: tuple[dict[int, str], PathIndex] | None = ({s.key: s.title for s in index.sections}, index.index())
        plex_problem = None
    except Stash2PlexError as exc:  # the list is ours; only the candidates need Plex
        plex, plex_problem = None, str(exc)
    return {
        "total": len(shown),
        "counts": counts,
        "page": page,
        "per_page": per_page,
        "query": query,
        "plex_problem": plex_problem,
        "scenes": _details(app, shown[start : start + per_page], plex),
    }


# -- one page: Stash's files beside Plex's candidates ------------------------------------
def _details(
    app: Context, page: list[dict[str, Any]], plex: tuple[dict[int, str], PathIndex] | None
) -> list[dict[str, Any]]:
    if not page:
        return []
    raw = app.stash().scenes_by_id([e["scene_id"] for e in page])
    settings = app.settings()
    by_size: dict[int, list[PlexFile]] | None = None
    shown = [{**entry, "files": [], "candidates": [], "screenshot": None} for entry in page]
    for item in shown:
        scene, why = scene_or_why(raw.get(item["scene_id"]), item["scene_id"])
        if scene is None:
            item["reason"] = why
            continue
        item["title"] = scene.title or item["title"]
        item["screenshot"] = scene.screenshot  # Stash's own URL: the browser reads it from Stash
        files = SceneFile.of(scene.files)
        item["files"] = [
            {"path": f.path, "mapped_path": settings.path_map.map(f.path), "size": f.size, "duration": f.duration_s}
            for f in files
        ]
        if plex is None:  # Plex did not answer: the files only (``plex_problem`` says why)
            continue
        libraries, paths = plex
        candidates = list(match_scene(files, paths).candidates)
        if not candidates and files and files[0].size:
            if by_size is None:
                by_size = {}
                for plex_file in paths.files():
                    if plex_file.size:
                        by_size.setdefault(plex_file.size, []).append(plex_file)
            candidates = by_size.get(files[0].size, [])
        item["candidates"] = [_candidate(c, libraries, files) for c in _first(candidates, item["linked"])]
    if plex is not None:
        _mark_held(app, shown, plex[1])
    return shown


def _mark_held(app: Context, shown: list[dict[str, Any]], paths: PathIndex) -> None:
    """``held_by``: the other scene whose item a candidate is now, as a pin onto it would
    be refused (worker/release.py ``holders``, tasks/pins.py), so the card says so before a
    click. The item's files come from the cached index (no Plex request); the holders are
    read from Stash in one request for the whole page."""
    cards = [(card["scene_id"], c) for card in shown for c in card["candidates"]]
    if not cards:
        return
    keys = {c["rating_key"] for _, c in cards}
    parts: dict[int, list[PlexFile]] = {}
    for plex_file in paths.files():
        if plex_file.rating_key in keys:
            parts.setdefault(plex_file.rating_key, []).append(plex_file)
    states = {rk: _state(files) for rk, files in parts.items()}
    asks = [(states[c["rating_key"]], scene_id) for scene_id, c in cards]
    for (_, c), holder in zip(cards, app.syncer().releaser.holders(asks), strict=True):
        c["held_by"] = holder


def _state(files: list[PlexFile]) -> PlexItemState:
    """An item as the index lists it (its files; no fields): what ``holders`` compares."""
    first = files[0]
    return PlexItemState(
        first.rating_key,
        first.section_id,
        tuple(f.path for f in files),
        {},
        {},
        parts=tuple((f.path, f.size, f.duration_ms) for f in files),
    )


def _first(candidates: list[PlexFile], linked: int | None) -> list[PlexFile]:
    """One per item, the linked item first, at most ``MAX_CANDIDATES``."""
    return list(distinct_items(sorted(candidates, key=lambda c: (c.rating_key != linked, c.path))))[:MAX_CANDIDATES]


def _candidate(c: PlexFile, libraries: dict[int, str], files: list[SceneFile]) -> dict[str, Any]:
    first = files[0] if files else None
    duration = None if c.duration_ms is None else c.duration_ms / 1000.0
    return {
        "rating_key": c.rating_key,
        "library": libraries.get(c.section_id, str(c.section_id)),
        "path": c.path,
        "size": c.size,
        "duration": duration,
        "same_size": None if first is None else size_agrees(c, first),
        "same_duration": None if first is None else duration_agrees(c, first),
    }


# -- path_map help --------------------------------------------------------------------------
def path_help(app: Context) -> dict[str, Any]:
    """The ``path_map`` rule for the inbox's scenes (plex/suggest.py decides when there is
    one), the scenes it would match exactly, and the setting with it in front."""
    ids = [e["scene_id"] for e in entries(app)]
    answer: dict[str, Any] = {"unmatched": len(ids), "rule": None, "fixes": 0, "path_map": None, "matches": []}
    if not ids:
        return answer
    try:
        index = app.index().index()
    except Stash2PlexError:  # no rule without Plex's files (the inbox says Plex did not answer)
        return answer
    raws: list[dict[str, Any]] = []
    for start in range(0, len(ids), 500):
        raws.extend(app.stash().scenes_by_id(ids[start : start + 500]).values())
    found = suggest_rule(unsettled(raws), index)
    if found is None:
        return answer
    current = app.stash().plugin_settings().get("path_map") or ""
    answer.update(
        rule=found.rule,
        fixes=len(found.matches),
        path_map=f"{found.rule};{current}" if current.strip() else found.rule,
        matches=found.as_dict(),
    )
    return answer


def recheck(app: Context) -> dict[str, Any]:
    """Every scene of the inbox queued again (a dead-letter entry with a fresh budget)."""
    scene_ids = [entry["scene_id"] for entry in entries(app)]
    queue_again(app, scene_ids, BULK)
    app.log.info(f"inbox: {len(scene_ids)} scenes queued to be matched again")
    return {"queued": len(scene_ids)}


# -- Plex items' posters as image data -----------------------------------------------------
def _keys_arg(params: dict[str, Any]) -> list[int]:
    raw = params.get("rating_keys")
    parts = [p for p in raw.split(",") if p.strip()] if isinstance(raw, str) else raw if isinstance(raw, list) else None
    if not parts or len(parts) > MAX_THUMBS:
        raise InputError(f'args.rating_keys must list 1 to {MAX_THUMBS} Plex ratingKeys (e.g. "12,34"), got {got(raw)}')
    return [whole_arg({"rating_keys": p}, "rating_keys", RATING_KEY) for p in parts]


def thumbs(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    """``rating_keys`` → each item's poster as a ``data:`` URL (None when it has none):
    one plugin run for a page's candidates."""
    images: dict[str, str | None] = {}
    for rating_key in dict.fromkeys(_keys_arg(params)):
        try:
            image = app.plex().thumbnail(rating_key)
        except PlexNotFound:
            image = b""  # no poster
        kind = next((t for magic, t in THUMB_TYPES.items() if image.startswith(magic)), None)
        data = base64.b64encode(image).decode("ascii")
        images[str(rating_key)] = None if kind is None else f"data:{kind};base64,{data}"  # a picture or nothing
    return {"images": images}
