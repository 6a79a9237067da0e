"""One planner for every preview: the page (``ui_preview``), the command line (``all`` /
``recent`` with ``--dry-run``) and the task "Preview sync (no writes)".

The scenes ``all`` would queue (tasks/changed.py), found and planned as the worker's
write step plans them (``Syncer.preview``), so the plan is what the real run then does.
All three answer one JSON shape, described in docs/usage.md ("The preview's reply");
``reconcile --dry-run`` adds its plan in the same shape.
"""

from __future__ import annotations

import json
import time
from typing import Any

from core.errors import ConfigError, InvalidMetadata, PlexAuthError, PlexUnavailable, Stash2PlexError
from tasks.changed import may_differ
from tasks.context import Context
from validation.fields import LABELS
from validation.metadata import SceneMetadata, scene_from_stash
from worker.preview import plan_entry, plan_lines, unmatched_entry, writes

PAGE_SIZE = 500
PAGE_LIMIT = 50  # scenes the page lists at most (``more`` says there are others)
LOG_LIMIT = 20  # scenes a task's summary in Stash's log lists


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


def plan_sync(app: Context, mode: str, updated_after: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """What ``all`` (or ``recent``, with ``updated_after``) would write, in the preview's shape.

    A scene that cannot be planned (not in Plex, ambiguous, invalid) is in ``unmatched``
    with its reason; Plex down, a refused token or a bad setting fail the whole plan.
    """
    app.settings()
    stash, ledger = app.stash(), app.ledger()
    report = PlanReport(mode, limit)
    page, seen = 1, 0
    while report.room():
        total, raw = stash.scenes_page(page, PAGE_SIZE, updated_after)
        if not raw:
            break
        changed = set(may_differ(app, raw))  # out-of-scope scenes are never planned
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
        if seen >= total or len(raw) < PAGE_SIZE:
            break
        page += 1
    return report.finish(checked=seen)


def _plan_page(syncer: Any, work: list[tuple[SceneMetadata, Any]], report: PlanReport) -> None:
    try:
        syncer.prefetch(work)
        for scene, record in work:
            if not report.room():
                return
            try:
                preview = syncer.preview(scene, record)
            except (PlexUnavailable, PlexAuthError, ConfigError):
                raise  # every further scene would fail the same way
            except Stash2PlexError as exc:
                report.unmatched.append(unmatched_entry(scene, scene.id, syncer.mapped_paths(scene), str(exc)))
                continue
            entry = plan_entry(scene, preview.rating_key, preview.how, preview.plan, preview.poster)
            if writes(entry):
                report.scenes.append(entry)
            else:
                report.no_change += 1
    finally:
        syncer.end_batch()


def publish(app: Context, plan: dict[str, Any]) -> dict[str, Any]:
    """A task's or command's plan: saved whole as a file in the data folder (named in
    ``plan_file``), summarised in the log; the reply leaves the lists out unless
    ``full_reply`` (the command line) asks for them."""
    folder = app.data_dir / "plans"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{plan['mode']}-dry-run-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(plan, ensure_ascii=False, indent=1), encoding="utf-8")
    plan = {**plan, "plan_file": str(path)}
    for line in plan_lines(plan, limit=LOG_LIMIT):
        app.log.report(line)
    if app.options.get("full_reply"):
        return plan
    return {k: v for k, v in plan.items() if k not in ("scenes", "unmatched")}


def run_dry(app: Context, mode: str, updated_after: str | None = None) -> dict[str, Any]:
    """The dry run of ``all`` / ``recent`` (the task "Preview sync" and ``--dry-run``)."""
    return publish(app, plan_sync(app, mode, updated_after))


def run(app: Context) -> dict[str, Any]:
    """``ui_preview``: the page's table before the user confirms Sync all."""
    return plan_sync(app, "all", limit=PAGE_LIMIT)
