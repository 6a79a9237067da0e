"""``unmatched`` (command line; a count in ``health_check``): every scene with no Plex item.

The scenes no item is accepted for (worker/unmatched.py) grouped by their Stash folder,
largest group first, with the ``path_map`` rule plex/suggest.py finds for them, when it finds one.
"""

from __future__ import annotations

from typing import Any

from core.log import first_ids
from plex.suggest import Unsettled, suggest_rule
from tasks.context import Context
from worker.unmatched import find_unmatched

SHOWN_PER_GROUP = 10
NO_RULE = (
    "no path_map rule is suggested: it takes at least two scenes whose file name exactly one Plex item "
    "holds, and a rule that settles no scene several Plex items fit"
)


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


def run(app: Context) -> dict[str, Any]:
    settings, index = app.settings(), app.index().index()
    entries = find_unmatched(settings, index, app.stash())
    groups = group_by_folder(entries)
    result: dict[str, Any] = {"count": len(entries), "groups": groups, "suggested_path_map": None}
    scenes = [Unsettled(e["scene_id"], e["title"], e["file"]) for e in entries if "file" in e]
    found = suggest_rule(scenes, index)
    if found is not None:
        ids = [scene.scene_id for scene, _ in found.matches]
        result.update(suggested_path_map=found.rule, fixes={"scenes": len(ids), "scene_ids": ids[:SHOWN_PER_GROUP]})
    for line in unmatched_lines(result):
        app.log.report(line)
    return result


def unmatched_lines(result: dict[str, Any]) -> list[str]:
    if not result["count"]:
        return ["every scene has a Plex item"]
    lines = [f"{result['count']:,} scenes have no Plex item, in {len(result['groups']):,} folders:"]
    for group in result["groups"]:
        ids = first_ids(group["scene_ids"], group["count"])
        lines.append(f"  {group['folder']}: {group['count']:,} (scenes {ids})")
        lines.append(f"      looked for {group['example']['looked_for']}")
    if result.get("suggested_path_map"):
        fixes = result["fixes"]
        ids = first_ids(fixes["scene_ids"], fixes["scenes"])
        lines.append(
            f"path_map rule '{result['suggested_path_map']}' would match {fixes['scenes']:,} scenes exactly, "
            f"each to the one Plex item of its file name (scenes {ids}); add it to the path_map setting"
        )
    else:
        lines.append(NO_RULE)
    return lines
