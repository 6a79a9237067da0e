"""A plan of writes as data, and as lines a person reads (dry runs, ``inspect``, ``reconcile``):
per scene its Plex item and why, fields current → new, tags ±, the poster's verdict; per scene
without an item, the reason. The one shape of the plan file, the command line's ``--json`` and
table, and the summary in Stash's log.
"""

from __future__ import annotations

import json
import time
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from core.log import shortened
from plex.plan import ItemPlan
from validation.fields import LABELS
from validation.metadata import SceneMetadata

if TYPE_CHECKING:
    from pathlib import Path

    from core.log import StashLog

LOG_LIMIT = 20  # scenes a task's summary in Stash's log lists
# The poster's line, by the verdict of a write (worker/poster.py) or of reconcile.
POSTER_WORDS = {
    "upload": "upload",
    "check": "upload if its bytes changed",
    "restore": "Plex's own back (the one shown was uploaded for another scene)",
}


def plan_entry(
    scene: SceneMetadata, rating_key: int, how: str, plan: ItemPlan, poster: str, drift: list[str] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "scene_id": scene.id,
        "title": scene.title,
        "rating_key": rating_key,
        "how": how,
        "fields": [{"field": c.name, "current": c.plex, "new": c.stash} for c in plan.fields],
        "tags": [
            {
                "type": t.tag_type,
                "added": t.added,
                "removed": list(t.removed),
                "photos": t.photographed,  # a performer photo sent with it
                "lock_only": not t.removed and not t.photos and set(t.result) == set(t.plex),
            }
            for t in plan.tags
        ],
        "poster": poster,
    }
    if drift:
        entry["drift"] = list(drift)
    return entry


def unmatched_entry(scene: SceneMetadata | None, scene_id: int, paths: list[str], reason: str) -> dict[str, Any]:
    return {"scene_id": scene_id, "title": scene.title if scene else "", "paths": paths, "reason": reason}


def writes(entry: dict[str, Any]) -> bool:
    """Does this entry send anything to Plex?"""
    return bool(entry["fields"] or entry["tags"] or entry["poster"] in ("upload", "restore"))


def _short(value: str, limit: int = 60) -> str:
    value = value.replace("\n", " ")
    return repr(shortened(value, limit))


def entry_lines(entry: dict[str, Any]) -> list[str]:
    head = f"scene {entry['scene_id']} {entry['title']!r} → Plex item {entry['rating_key']} ({entry['how']})"
    if entry.get("drift"):
        head += f" [{', '.join(entry['drift'])}]"
    lines = [head]
    for change in entry["fields"]:
        if change["current"] == change["new"]:
            lines.append(f"    {change['field']}: lock {_short(change['new'])}")
        else:
            lines.append(f"    {change['field']}: {_short(change['current'])} → {_short(change['new'])}")
    for tags in entry["tags"]:
        parts = [f"+{n}" for n in tags["added"]] + [f"−{n}" for n in tags["removed"]]
        parts += [f"photo of {n}" for n in tags.get("photos", ())]  # plan files saved before photos lack it
        lines.append(f"    {tags['type']}: {' '.join(parts) if parts else 'lock'}")
    if entry["poster"] in POSTER_WORDS:
        lines.append(f"    poster: {POSTER_WORDS[entry['poster']]}")
    return lines


def plan_lines(output: dict[str, Any], limit: int | None = None) -> list[str]:
    """The readable table of a dry run's reply (``limit`` scenes at most, then a count of the rest)."""
    scenes, unmatched = output.get("scenes") or [], output.get("unmatched") or []
    lines = [
        f"dry run of '{output.get('mode')}': nothing was written. {output.get('checked', 0):,} scenes checked, "
        f"{output.get('would_write', 0):,} would be written, {output.get('unmatched_count', len(unmatched)):,} "
        "have no Plex item"
    ]
    entries = chain(
        (entry_lines(entry) for entry in scenes),
        ([f"scene {e['scene_id']} {e['title']!r}: no Plex item: {e['reason']}"] for e in unmatched),
    )
    shown = list(islice(entries, limit))
    lines += [line for entry in shown for line in entry]
    rest = len(scenes) + len(unmatched) - len(shown)
    if rest > 0:
        lines.append(f"… and {rest:,} more scenes")
    if output.get("plan_file"):
        lines.append(f"the full plan: {output['plan_file']}")
    return lines


class PlanReport:
    """A plan's entries, at most ``limit`` (None: all); ``finish`` gives the reply's shape."""

    def __init__(self, mode: str, limit: int | None = None) -> None:
        self.mode, self.limit = mode, limit
        self.scenes: list[dict[str, Any]] = []
        self.unmatched: list[dict[str, Any]] = []
        self.no_change = 0
        self.more = False

    def room(self) -> bool:
        """Whether another entry fits; once not, ``more`` is set."""
        if self.limit is not None and len(self.scenes) + len(self.unmatched) >= self.limit:
            self.more = True
        return not self.more

    def finish(self, checked: int) -> dict[str, Any]:
        return {
            "dry_run": True,
            "mode": self.mode,
            "checked": checked,
            "would_write": len(self.scenes),
            "unmatched_count": len(self.unmatched),
            "no_change": self.no_change,
            "more": self.more,
            "labels": LABELS,
            "scenes": self.scenes,
            "unmatched": self.unmatched,
        }


def publish(plan: dict[str, Any], data_dir: Path, log: StashLog, full_reply: bool) -> dict[str, Any]:
    """A task's or command's plan: saved whole as a file in the data folder (named in
    ``plan_file``), summarised in the log; the reply leaves the lists out unless
    ``full_reply`` (the command line) asks for them."""
    folder = data_dir / "plans"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{plan['mode']}-dry-run-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(plan, ensure_ascii=False, indent=1), encoding="utf-8")
    plan = {**plan, "plan_file": str(path)}
    for line in plan_lines(plan, limit=LOG_LIMIT):
        log.report(line)
    if full_reply:
        return plan
    return {k: v for k, v in plan.items() if k not in ("scenes", "unmatched")}
