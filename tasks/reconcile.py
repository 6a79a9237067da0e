"""``reconcile`` (task "Verify Plex against Stash"): Plex is the truth, the ledger a cache.

For when Plex changed underneath (a metadata refresh, an edit in Plex Web, "Fix match", a
re-added item, a restored database, a lost ledger): lists the libraries afresh, compares
every scene's linked item (one detail request per 50 items) field by field, lock, tags and
poster, repairs only what differs through the sync's own write step, and reports each
kind of drift with its first scenes. ``--dry-run`` plans instead (tasks/preview.py's
shape). Scenes the settings leave out are counted ``out_of_scope`` and left as they are.
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidMetadata
from stash.client import PAGE_SIZE
from tasks.context import Context, one_scene
from validation.metadata import scene_from_stash
from worker.breaker import plex_answered
from worker.preview import PlanReport, plan_entry, publish, unmatched_entry
from worker.progress import ProgressReporter
from worker.reconcile import Finding, Reconciler
from worker.verdict import OUT_OF_SCOPE, verdict

FIRST_FEW = 5


class DriftReport:
    """Counts per kind of drift, with the first few scene ids of each."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, Any]] = {}
        self.counts = {"checked": 0, "in_line": 0, "repaired": 0, "unmatched": 0, "failed": 0, "released": 0}

    def add(self, kind: str, scene_id: int) -> None:
        entry = self.kinds.setdefault(kind, {"count": 0, "first": []})
        entry["count"] += 1
        if len(entry["first"]) < FIRST_FEW:
            entry["first"].append(scene_id)

    def count(self, kind: str, scene_id: int) -> None:
        """A scene counted (``failed``, ``released``) and listed among the kind's first few."""
        self.counts[kind] += 1
        self.add(kind, scene_id)

    def as_dict(self) -> dict[str, Any]:
        ordered = dict(sorted(self.kinds.items(), key=lambda kv: -kv[1]["count"]))
        return {**self.counts, "drift": ordered}

    def lines(self) -> list[str]:
        c = self.counts
        head = (
            f"reconcile: {c['checked']:,} scenes checked, {c['in_line']:,} in line, {c['repaired']:,} repaired, "
            f"{c['unmatched']:,} without a Plex item, {c['failed']:,} failed"
            + (f", {c['released']:,} Plex items released (no scene holds their file)" if c["released"] else "")
        )
        return [head] + [
            f"  {kind}: {v['count']:,} (first: {', '.join(map(str, v['first']))})"
            for kind, v in self.as_dict()["drift"].items()
        ]


def run(app: Context) -> dict[str, Any]:
    dry = bool(app.options.get("dry_run"))
    settings = app.settings()
    report = DriftReport()
    plan = PlanReport("reconcile") if dry else None
    with app.consumer():  # no drainer writes to Plex or the ledger meanwhile
        app.index().reload()  # asks Plex at once, whatever the breaker says (the user clicked)
        plex_answered(app.breaker, app.log)
        reconciler = Reconciler(app.syncer(), app.ledger(), settings)
        progress = ProgressReporter(app.log, 0, "scenes")
        ids = set[int]()
        for total, raw in app.stash().scene_pages():
            _page(app, reconciler, raw, report, plan)
            ids.update(int(item["id"]) for item in raw)
            progress.update(len(ids), total)
        if not dry:
            _release_gone(app, app.ledger().scene_ids() - ids, report)
    result = {"dry_run": dry, **report.as_dict(), "plex_detail_reads": reconciler.reads}
    for line in report.lines():
        app.log.info(line)
    if plan is not None:
        full_reply = bool(app.options.get("full_reply"))
        result.update(publish(plan.finish(checked=report.counts["checked"]), app.data_dir, app.log, full_reply))
    return result


def _release_gone(app: Context, candidates: set[int], report: DriftReport) -> None:
    """Scenes with a record that no page showed, and that Stash confirms are gone (a
    scene deleted meanwhile shifts the pages): the items written for them that no scene
    holds now are released (worker/release.py ``release_gone``)."""
    ordered = sorted(candidates)
    for start in range(0, len(ordered), PAGE_SIZE):
        chunk = ordered[start : start + PAGE_SIZE]
        alive = app.stash().scenes_by_id(chunk)
        records = app.ledger().get_many([sid for sid in chunk if sid not in alive])
        for sid, record in sorted(records.items()):
            released, error = one_scene(app.syncer().releaser.release_gone, sid, record)
            if error is not None:
                report.count("failed", sid)
                app.log.warning(f"scene {sid} (deleted in Stash): its Plex item was not released: {error}")
            for key in released or ():
                report.count("released", sid)
                app.log.info(
                    f"scene {sid} no longer exists in Stash: Plex item {key} released (no scene holds its file)"
                )


def _page(app: Context, reconciler: Reconciler, raw: list[dict], report: DriftReport, plan: PlanReport | None) -> None:
    scenes = []
    records = app.ledger().get_many([int(item["id"]) for item in raw])
    for item in raw:
        report.counts["checked"] += 1
        try:
            scene = scene_from_stash(item)
        except InvalidMetadata as exc:
            report.add("invalid", int(item["id"]))
            if plan is not None:
                plan.unmatched.append(unmatched_entry(None, int(item["id"]), [], str(exc)))
            continue
        if verdict(app.syncer(), scene, records.get(scene.id)).kind == OUT_OF_SCOPE:
            report.add("out_of_scope", scene.id)  # left out by skip_tags/organized_only: not checked, not written
        else:
            scenes.append(scene)
    findings = reconciler.check(scenes)
    try:
        for finding in findings:
            _settle(app, reconciler, finding, report, plan)
    finally:
        for finding in findings:
            if finding.rating_key is not None:
                app.plex().forget(finding.rating_key)


def _settle(
    app: Context, reconciler: Reconciler, finding: Finding, report: DriftReport, plan: PlanReport | None
) -> None:
    sid = finding.scene.id
    for kind in finding.drift:
        report.add(kind, sid)
    if not finding.matched:
        report.counts["unmatched"] += 1
        if plan is not None:
            plan.unmatched.append(
                unmatched_entry(finding.scene, sid, app.syncer().locator.mapped_paths(finding.scene), finding.reason)
            )
        return
    if not finding.drift:
        report.counts["in_line"] += 1
    if plan is not None:
        if finding.needs_write and finding.rating_key is not None and finding.plan is not None:
            plan.scenes.append(
                plan_entry(finding.scene, finding.rating_key, finding.how, finding.plan, finding.poster, finding.drift)
            )
        return
    result, error = one_scene(reconciler.repair, finding)
    if error is not None:
        report.count("failed", sid)
        app.log.warning(f"scene {sid}: not repaired: {error}")
        return
    if finding.drift:
        report.counts["repaired"] += 1
        what = "; ".join(result.plan.describe()) if result is not None else "ledger corrected"
        app.log.info(f"scene {sid} → Plex item {finding.rating_key}: repaired ({', '.join(finding.drift)}): {what}")
