"""Dry runs: what ``all`` / ``recent`` would write, scene by scene, without writing.

The same scenes ``all`` would queue (desired state differs from the ledger), the same
item finding and the same plan as the worker's write step (``Syncer.preview``), so
the plan equals what the real run then does. Run from Stash ("Preview sync (no
writes)"), the log gets a capped summary and the full plan is saved as a file in the
data folder, named in the reply; the command line prints it as a table or ``--json``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from core.errors import AmbiguousMatch, InvalidMetadata, PlexNotFound
from validation.metadata import scene_from_stash
from worker.preview import plan_entry, plan_lines, unmatched_entry, writes

LOG_LIMIT = 20
PAGE_SIZE = 500


class PlanReport:
    """Collects a dry run's entries; ``finish`` saves the plan file and logs the summary."""

    def __init__(self, app, mode: str) -> None:
        self.app, self.mode = app, mode
        self.scenes: list[dict[str, Any]] = []
        self.unmatched: list[dict[str, Any]] = []

    def finish(self, checked: int, **extra: Any) -> dict[str, Any]:
        full = {
            "dry_run": True,
            "mode": self.mode,
            "checked": checked,
            "would_write": len(self.scenes),
            "unmatched_count": len(self.unmatched),
            **extra,
            "scenes": self.scenes,
            "unmatched": self.unmatched,
        }
        folder = self.app.data_dir / "plans"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.mode}-dry-run-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(full, ensure_ascii=False, indent=1), encoding="utf-8")
        full["plan_file"] = str(path)
        for line in plan_lines(full, limit=LOG_LIMIT):
            self.app.log.info(line)
        if self.app.options.get("full_reply"):
            return full
        return {k: v for k, v in full.items() if k not in ("scenes", "unmatched")}


def run_preview(app, updated_after: str | None, label: str) -> dict[str, Any]:
    """A dry run of ``all`` (or ``recent`` with ``updated_after``)."""
    from tasks.sync_all import may_differ

    app.settings()
    stash, syncer, ledger = app.stash(), app.syncer(), app.ledger()
    report = PlanReport(app, label)
    page, seen, no_change = 1, 0, 0
    while True:
        total, raw = stash.scenes_page(page, PAGE_SIZE, updated_after)
        if not raw:
            break
        changed = set(may_differ(app, raw))
        work = []
        records = ledger.get_many(sorted(changed))
        for item in raw:
            sid = int(item["id"])
            if sid not in changed:
                continue
            try:
                work.append((scene_from_stash(item), records.get(sid)))
            except InvalidMetadata as exc:
                report.unmatched.append(unmatched_entry(None, sid, [], str(exc)))
        no_change += _plan_page(app, syncer, work, report)
        seen += len(raw)
        if seen >= total or len(raw) < PAGE_SIZE:
            break
        page += 1
    return report.finish(checked=seen, no_change=no_change)


def _plan_page(app, syncer, work: list, report: PlanReport) -> int:
    no_change = 0
    try:
        syncer.prefetch(work)
        for scene, record in work:
            try:
                preview = syncer.preview(scene, record)
            except (PlexNotFound, AmbiguousMatch) as exc:
                report.unmatched.append(unmatched_entry(scene, scene.id, syncer.mapped_paths(scene), str(exc)))
                continue
            entry = plan_entry(scene, preview.rating_key, preview.how, preview.plan, preview.poster)
            if writes(entry):
                report.scenes.append(entry)
            else:
                no_change += 1
    finally:
        syncer.end_batch()
    return no_change
