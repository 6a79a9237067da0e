"""``all`` and ``recent``: page through Stash, queue what may differ, drain in the foreground.

One GraphQL request per page of scenes: the page's scenes are handed to the worker
as prefetched data, so bulk jobs cost no second Stash request. Scenes whose desired
state is unchanged since the last successful write are not even queued (they are
counted as unchanged in the cumulative statistics, page by page). Pages are
streamed (never the whole library in memory). Killing the task at any point loses
nothing: queued jobs stay in the queue for ``process_queue`` or the next run.
"""

from __future__ import annotations

import datetime as dt
import time

from core.errors import InvalidMetadata
from sync_queue.job import BULK, Job
from sync_queue.stats import Delta
from tasks.process_queue import finish
from tasks.progress import ProgressReporter
from validation.metadata import scene_from_stash

PAGE_SIZE = 500
RECENT_DEFAULT_S = 24 * 3600


def _now_rfc3339() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def run_all(app):
    if app.options.get("dry_run"):
        from tasks.dry_run import run_preview

        return run_preview(app, updated_after=None, label="all")
    return _sync(app, updated_after=None, label="all")


def run_recent(app):
    since = app.ledger().meta("last_sync_at")
    if not since:
        since = (dt.datetime.now().astimezone() - dt.timedelta(seconds=RECENT_DEFAULT_S)).isoformat(timespec="seconds")
    app.log.info(f"syncing scenes updated after {since}")
    if app.options.get("dry_run"):
        from tasks.dry_run import run_preview

        return run_preview(app, updated_after=since, label="recent")
    return _sync(app, updated_after=since, label="recent")


def may_differ(app, scenes: list[dict]) -> list[int]:
    """Scenes whose desired state differs from what was last written (or is unknown)."""
    syncer = app.syncer()
    hashes = app.ledger().state_hashes([int(s["id"]) for s in scenes])
    changed = []
    for raw in scenes:
        sid = int(raw["id"])
        try:
            digest = syncer.state_hash(scene_from_stash(raw))
        except InvalidMetadata:
            digest = None  # queue it: the worker records why it cannot be synced
        if digest is None or hashes.get(sid) != digest:
            changed.append(sid)
    return changed


def _count_unchanged(app, n: int, now: float) -> None:
    """Scenes not queued because nothing changed: counted like the worker's skips."""
    delta = Delta()
    delta.unchanged(now, n)
    app.stats().record(delta)


def _sync(app, updated_after: str | None, label: str):
    started = _now_rfc3339()
    app.settings()
    stash = app.stash()
    with app.consumer() as queue:
        worker = app.worker(queue, probe_now=True)
        reporter = ProgressReporter(app.log, 0, "scenes")
        page, seen, queued = 1, 0, 0
        while True:
            total, scenes = stash.scenes_page(page, PAGE_SIZE, updated_after)
            if not scenes:
                break
            changed = may_differ(app, scenes)
            now = time.time()
            _count_unchanged(app, len(scenes) - len(changed), now)
            queued += queue.put_many(
                Job(scene_id=sid, priority=BULK, event=f"task:{label}", enqueued_at=now) for sid in changed
            )
            prefetched = {int(s["id"]): s for s in scenes if int(s["id"]) in set(changed)}
            worker.run(prefetched=prefetched)
            seen += len(scenes)
            reporter.update(seen, total)
            if worker.abort_error is not None or seen >= total or len(scenes) < PAGE_SIZE:
                break
            page += 1
        left = queue.parked_count()
    app.log.info(f"{label}: {seen} scenes checked, {queued} queued")
    result = finish(app, worker, worker.stats, left)
    if worker.abort_error is None:
        app.ledger().set_meta("last_sync_at", started)
    return {"checked": seen, "queued": queued, **result}
