"""Which scenes no Plex item is accepted for, and why (the command ``unmatched``; a count in
Health check).

Pages through every Stash scene and asks the sync's diagnosis (plex/matcher.py ``diagnose``)
which item its files lead to in the Plex index.
"""

from __future__ import annotations

import ntpath
import posixpath
from typing import TYPE_CHECKING, Any

from core.errors import InvalidMetadata
from plex.matcher import PathIndex, SceneFile, diagnose
from validation.metadata import scene_from_stash

if TYPE_CHECKING:
    from stash.client import StashClient
    from validation.config import Settings

COMMAND = "python Stash2Plex.py unmatched"


def _folder(path: str) -> str:
    module = ntpath if "\\" in path and "/" not in path else posixpath
    return module.dirname(path) or path


def find_unmatched(settings: Settings, index: PathIndex, stash: StashClient) -> list[dict[str, Any]]:
    """One entry per scene no Plex item is accepted for: id, title, paths, folder, reason."""
    strict = not settings.loose_matching
    entries = (_check(item, index, strict) for _, raw in stash.scene_pages() for item in raw)
    return [entry for entry in entries if entry is not None]


def _check(item: dict, index: PathIndex, strict: bool) -> dict[str, Any] | None:
    entry = {"scene_id": int(item["id"]), "title": item.get("title") or "", "stash_path": "", "mapped_path": ""}
    try:
        scene = scene_from_stash(item)
    except InvalidMetadata as exc:
        return {**entry, "folder": "(no file)", "reason": str(exc)}
    found = diagnose(SceneFile.of(scene.files), index, strict)
    if found.problem is None:
        return None
    stash_path = scene.files[0].path
    return {
        **entry,
        "title": scene.title,
        "file": found.match.files[0],  # for the path_map suggestion (plex/suggest.py)
        "stash_path": stash_path,
        "mapped_path": found.match.looked_for[0],
        "folder": _folder(stash_path),
        "reason": str(found.problem),
    }
