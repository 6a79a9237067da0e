"""``process_queue``: drain everything now in the foreground, retries included."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.progress import ProgressReporter, counts_text

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Mapping

    from tasks.context import Context
    from worker.worker import Worker


def run(app: Context) -> dict:
    app.settings()  # a missing plex_url/plex_token fails here, before any job is taken
    with app.consumer() as queue:
        total = queue.ready_count() + queue.parked_count()
        reporter = ProgressReporter(app.log, total, "jobs")
        worker = app.worker(queue, probe_now=True)
        stats = worker.run(retry_waiting_now=True, progress=lambda s: reporter.update(sum_done(s)))
        reporter.update(sum_done(stats), final=True)
        left = queue.parked_count()
    return finish(app, worker, stats, left)


def sum_done(stats: Mapping[str, int]) -> int:
    return sum(stats[k] for k in ("synced", "unchanged", "gone", "failed", "retrying", "waiting_for_plex"))


def finish(app: Context, worker: Worker, stats: Counter[str], left: int) -> dict:
    """Report, and hand leftover retries to a background drainer. (The cumulative
    statistics were recorded batch by batch by the worker.)"""
    keys = ("synced", "unchanged", "gone", "failed", "retrying", "waiting_for_plex", "posters")
    result = {**{k: stats.get(k, 0) for k in keys}, **dict(stats), "waiting": left}
    if worker.abort_error is not None:
        # The run stopped early (Plex rejected the token, or a setting is wrong): say
        # why. The jobs not yet done stay queued and no background drainer is started:
        # it would only stop the same way.
        raise worker.abort_error
    if left:
        app.ensure_drainer()
        app.log.info(f"{left} jobs wait for a retry; a background drainer will run them when due")
    app.log.info(f"done: {counts_text(stats)}")
    return result
