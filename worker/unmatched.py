"""Which scenes no Plex item is accepted for, and why (the command ``unmatched``; a count in
Health check).

Pages through every Stash scene, maps its files with ``path_map`` and looks them up in the
Plex index the way the sync does (``match_scene`` + ``choose``).
"""

from __future__ import annotations

import ntpath
import posixpath
from typing import TYPE_CHECKING, Any

from core.errors import AmbiguousMatch, InvalidMetadata, PlexNotFound
from plex.matcher import PathIndex, SceneFile, choose, match_scene
from validation.metadata import scene_from_stash

if TYPE_CHECKING:
    from stash.client import StashClient
    from validation.config import Settings

PAGE_SIZE = 500
COMMAND = "python Stash2Plex.py unmatched"


def _folder(path: str) -> str:
    module = ntpath if "\\" in path and "/" not in path else posixpath
    return module.dirname(path) or path


def find_unmatched(settings: Settings, index: PathIndex, stash: StashClient) -> list[dict[str, Any]]:
    """One entry per scene no Plex item is accepted for: id, title, paths, folder, reason."""
    found: list[dict[str, Any]] = []
    page, seen = 1, 0
    while True:
        total, raw = stash.scenes_page(page, PAGE_SIZE)
        for item in raw:
            entry = _check(item, index, not settings.loose_matching)
            if entry is not None:
                found.append(entry)
        seen += len(raw)
        if not raw or seen >= total or len(raw) < PAGE_SIZE:
            return found
        page += 1


def _check(item: dict, index: PathIndex, strict: bool) -> dict[str, Any] | None:
    sid = int(item["id"])
    try:
        scene = scene_from_stash(item)
    except InvalidMetadata as exc:
        return {
            "scene_id": sid,
            "title": item.get("title") or "",
            "stash_path": "",
            "mapped_path": "",
            "folder": "(no file)",
            "reason": str(exc),
        }
    files = SceneFile.of(scene.files)
    try:
        choose(match_scene(files, index), strict, files)
        return None
    except (PlexNotFound, AmbiguousMatch) as exc:
        stash_path = scene.files[0].path
        return {
            "scene_id": sid,
            "title": scene.title,
            "file": files[0],  # for the path_map suggestion (plex/suggest.py)
            "stash_path": stash_path,
            "mapped_path": index.paths.map(stash_path),
            "folder": _folder(stash_path),
            "reason": str(exc),
        }
