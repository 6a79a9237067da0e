"""``unmatched`` (command line; a count in ``health_check``): every scene with no Plex item.

The scenes no item is accepted for (worker/unmatched.py) grouped by their Stash folder,
largest group first, with the ``path_map`` rule that would fix the largest group, when one would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from validation.pathmap import map_path, parse_path_map, suggest_path_map
from worker.unmatched import find_unmatched

if TYPE_CHECKING:
    from tasks.context import Context

SHOWN_PER_GROUP = 10


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
    entries = find_unmatched(app.settings(), app.index().index(), app.stash())
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
