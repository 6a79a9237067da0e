"""``unmatched`` (command line; a count in ``health_check``): every scene with no Plex item.

Pages through every Stash scene, maps its files with ``path_map`` and looks them up
in the Plex index the way the sync does (``match_scene`` + ``choose``). The scenes
no item is accepted for are grouped by their Stash folder, largest group first,
with the ``path_map`` rule that would fix the largest group, when one would.
"""

from __future__ import annotations

import ntpath
import posixpath
from typing import TYPE_CHECKING, Any

from core.errors import AmbiguousMatch, InvalidMetadata, PlexNotFound
from plex.matcher import PathIndex, SceneFile, choose, match_scene
from validation.metadata import scene_from_stash
from validation.pathmap import PathRule, map_path, parse_path_map, suggest_path_map

if TYPE_CHECKING:
    from tasks.context import Context

PAGE_SIZE = 500
SHOWN_PER_GROUP = 10
COMMAND = "python Stash2Plex.py unmatched"


def _folder(path: str) -> str:
    module = ntpath if "\\" in path and "/" not in path else posixpath
    return module.dirname(path) or path


def find_unmatched(app: Context) -> list[dict[str, Any]]:
    """One entry per scene no Plex item is accepted for: id, title, paths, folder, reason."""
    settings = app.settings()
    index = app.index().index()
    rules, ci = settings.path_map, settings.case_insensitive_paths
    found: list[dict[str, Any]] = []
    page, seen = 1, 0
    while True:
        total, raw = app.stash().scenes_page(page, PAGE_SIZE)
        for item in raw:
            entry = _check(item, index, rules, ci, not settings.loose_matching)
            if entry is not None:
                found.append(entry)
        seen += len(raw)
        if not raw or seen >= total or len(raw) < PAGE_SIZE:
            return found
        page += 1


def _check(item: dict, index: PathIndex, rules: tuple[PathRule, ...], ci: bool, strict: bool) -> dict[str, Any] | None:
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
        choose(match_scene(files, index, rules, ci), strict, files)
        return None
    except (PlexNotFound, AmbiguousMatch) as exc:
        stash_path = scene.files[0].path
        return {
            "scene_id": sid,
            "title": scene.title,
            "stash_path": stash_path,
            "mapped_path": map_path(stash_path, rules, ci),
            "folder": _folder(stash_path),
            "reason": str(exc),
        }


def group_by_folder(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(entry["folder"], []).append(entry)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [
        {
            "folder": folder,
            "count": len(members),
            "scene_ids": [m["scene_id"] for m in members[:SHOWN_PER_GROUP]],
            "example": {"stash_path": members[0]["stash_path"], "looked_for": members[0]["mapped_path"]},
            "reason": members[0]["reason"],
        }
        for folder, members in ordered
    ]


def _suggestion(app: Context, members: list[dict[str, Any]]) -> tuple[str | None, int]:
    """The path_map rule that would fix the most of ``members``, and how many it fixes."""
    settings = app.settings()
    index, ci = app.index().index(), settings.case_insensitive_paths
    pairs = [(m["stash_path"], f.path) for m in members if m["stash_path"] for f in index.by_name(m["mapped_path"])]
    rule = suggest_path_map(pairs, ci)
    if rule is None:
        return None, 0
    rules = parse_path_map(rule) + tuple(settings.path_map)
    fixed = sum(1 for m in members if m["stash_path"] and index.by_path(map_path(m["stash_path"], rules, ci)))
    return rule, fixed


def run(app: Context) -> dict[str, Any]:
    entries = find_unmatched(app)
    groups = group_by_folder(entries)
    result: dict[str, Any] = {"count": len(entries), "groups": groups, "suggested_path_map": None}
    if groups:
        largest = [e for e in entries if e["folder"] == groups[0]["folder"]]
        rule, fixed = _suggestion(app, largest)
        if rule:
            result.update(suggested_path_map=rule, fixes={"folder": groups[0]["folder"], "scenes": fixed})
    for line in unmatched_lines(result):
        app.log.report(line)
    return result


def unmatched_lines(result: dict[str, Any]) -> list[str]:
    if not result["count"]:
        return ["every scene has a Plex item"]
    lines = [f"{result['count']:,} scenes have no Plex item, in {len(result['groups']):,} folders:"]
    for group in result["groups"]:
        ids = ", ".join(map(str, group["scene_ids"])) + (" …" if group["count"] > len(group["scene_ids"]) else "")
        lines.append(f"  {group['folder']}: {group['count']:,} (scenes {ids})")
        lines.append(f"      looked for {group['example']['looked_for']}")
    if result.get("suggested_path_map"):
        fixes = result["fixes"]
        lines.append(
            f"path_map rule '{result['suggested_path_map']}' would match {fixes['scenes']:,} scenes of "
            f"{fixes['folder']} (add it to the path_map setting)"
        )
    else:
        lines.append("no path_map rule would fix the largest group (no Plex file has the same names)")
    return lines
