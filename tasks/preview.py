"""One planner for every preview: the page (``ui_preview``), the command line (``all`` /
``recent`` with ``--dry-run``) and the task "Preview sync (no writes)".

The scenes ``all`` would queue (worker/verdict.py ``sort_scenes``), found and planned as the worker's
write step plans them (``Syncer.preview``), so the plan is what the real run then does.
All three answer one JSON shape, described in docs/usage.md ("The preview's reply");
``reconcile --dry-run`` adds its plan in the same shape.
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidMetadata
from tasks.context import Context, one_scene, recent_start
from validation.metadata import SceneMetadata, scene_from_stash
from worker.preview import PlanReport, plan_entry, publish, unmatched_entry, writes
from worker.verdict import sort_scenes

PAGE_LIMIT = 50  # scenes the page lists at most (``more`` says there are others)


def plan_sync(app: Context, mode: str, updated_after: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """What ``all`` (or ``recent``, with ``updated_after``) would write, in the preview's shape.

    A scene that cannot be planned (not in Plex, ambiguous, invalid) is in ``unmatched``
    with its reason; Plex down, a refused token or a bad setting fail the whole plan.
    """
    app.settings()
    ledger = app.ledger()
    report = PlanReport(mode, limit)
    seen = 0
    for _, raw in app.stash().scene_pages(updated_after=updated_after, wanted=report.room):  # room() sets ``more``
        changed = set(sort_scenes(app.syncer(), ledger, raw)[0])  # out-of-scope scenes are never planned
        records = ledger.get_many(sorted(changed))
        work = []
        for item in raw:
            sid = int(item["id"])
            if sid not in changed:
                continue
            try:
                work.append((scene_from_stash(item), records.get(sid)))
            except InvalidMetadata as exc:
                if report.room():
                    report.unmatched.append(unmatched_entry(None, sid, [], str(exc)))
        _plan_page(app.syncer(), work, report)
        seen += len(raw)
    return report.finish(checked=seen)


def _plan_page(syncer: Any, work: list[tuple[SceneMetadata, Any]], report: PlanReport) -> None:
    try:
        syncer.locator.prefetch(work)
        for scene, record in work:
            if not report.room():
                return
            preview, error = one_scene(syncer.preview, scene, record)
            if preview is None:  # failed this scene only
                report.unmatched.append(
                    unmatched_entry(scene, scene.id, syncer.locator.mapped_paths(scene), str(error))
                )
                continue
            entry = plan_entry(scene, preview.rating_key, preview.how, preview.plan, preview.poster)
            if writes(entry):
                report.scenes.append(entry)
            else:
                report.no_change += 1
    finally:
        syncer.locator.end_batch()


def plan(app: Context) -> dict[str, Any]:
    """The dry run of ``all`` (the task "Preview sync" and ``all --dry-run``) or of ``recent``."""
    since = None
    if app.options["mode"] == "recent":
        since = recent_start(app, app.stash().newest_updated_at())
    planned = plan_sync(app, str(app.options["mode"]), since)
    return publish(planned, app.data_dir, app.log, bool(app.options.get("full_reply")))


def run(app: Context) -> dict[str, Any]:
    """``ui_preview``: the page's table before the user confirms Sync all."""
    return plan_sync(app, "all", limit=PAGE_LIMIT)
