"""``inspect <scene id>`` (command line only): why a scene goes to the Plex item it goes to.

The sync's diagnosis (plex/matcher.py ``diagnose``): the scene's files and their mapped
paths, every candidate item (by exact path or by file name) with the evidence for and against
it, the matcher's confidence and the decision ``loose_matching`` leads to; the ledger's record, the verdict (worker/verdict.py:
out of scope, unchanged or stale, and why) and the planned edit (what a sync would send
now; nothing is written).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.errors import AmbiguousMatch, PlexNotFound, Stash2PlexError
from plex.matcher import SceneFile, diagnose
from tasks.context import Context
from validation.metadata import scene_from_stash
from validation.plugin_input import scene_id_arg
from worker.preview import entry_lines, plan_entry
from worker.verdict import verdict


def run(app: Context, params: dict[str, Any]) -> dict[str, Any]:
    scene_id = scene_id_arg(params)
    settings, syncer = app.settings(), app.syncer()
    raw = app.stash().scenes_by_id([scene_id]).get(scene_id)
    if raw is None:
        raise Stash2PlexError(f"Stash has no scene {scene_id}")
    scene = scene_from_stash(raw)
    diagnosis = diagnose(SceneFile.of(scene.files), app.index().index(), not settings.loose_matching)
    result: dict[str, Any] = {
        "scene_id": scene.id,
        "title": scene.title,
        "stash_paths": [f.path for f in scene.files],
        "mapped_paths": list(diagnosis.match.looked_for),
        "path_map": str(settings.path_map) or "(none)",
        "confidence": diagnosis.match.confidence.value,
        "match_reason": diagnosis.match.reason,
        "candidates": [c._asdict() for c in diagnosis.candidates],
        "decision": diagnosis.decision,
    }
    record = app.ledger().get_many([scene_id]).get(scene_id)
    result["ledger"] = dataclasses.asdict(record) if record is not None else None
    found = verdict(syncer, scene, record, read_item=True)  # the panel's answer, word for word
    result["verdict"] = {"kind": found.kind, "why": found.why}
    try:
        preview = syncer.preview(scene, record)
        result["planned"] = plan_entry(scene, preview.rating_key, preview.how, preview.plan, preview.poster)
    except (PlexNotFound, AmbiguousMatch) as exc:
        result["planned"] = None
        result["not_planned"] = str(exc)
    finally:
        syncer.locator.end_batch()
    return result


def inspect_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"scene {result['scene_id']} {result['title']!r}"]
    for stash, plex in zip(result["stash_paths"], result["mapped_paths"]):
        lines.append(f"  file {stash} → looked for {plex} (path_map {result['path_map']})")
    lines.append(f"  match: {result['confidence']}: {result['match_reason']}")
    for c in result["candidates"]:
        evidence = ", ".join(
            f"{what} {'agrees' if ok else 'differs'}"
            for what, ok in (("size", c["size_agrees"]), ("duration", c["duration_agrees"]))
            if ok is not None
        )
        lines.append(
            f"  candidate item {c['rating_key']} {c['path']} (by {c['by']}{'; ' + evidence if evidence else ''})"
        )
    lines.append(f"  decision: {result['decision']}")
    record = result["ledger"]
    if record is None:
        lines.append("  ledger: no record (never written)")
    else:
        lines.append(
            f"  ledger: item {record['rating_key']}, fields {sorted(record['fields'])}, poster from {record['poster_source']}"
        )
    lines.append(f"  verdict: {result['verdict']['kind'].replace('_', ' ')}: {result['verdict']['why']}")
    if result.get("planned"):
        planned = entry_lines(result["planned"])
        lines += ["  planned: " + planned[0]] + ["  " + line for line in planned[1:]]
        if len(planned) == 1:
            lines.append("    nothing to write: Plex already shows this")
    else:
        lines.append(f"  planned: nothing ({result.get('not_planned')})")
    return lines
