"""``process_queue``: drain everything now in the foreground, retries included."""

from __future__ import annotations

from tasks.context import Context
from worker.pipeline import work
from worker.progress import ProgressReporter, finish, sum_done


def run(app: Context) -> dict:
    app.settings()  # a missing plex_url/plex_token fails here, before any job is taken
    with app.consumer() as queue:
        total = queue.ready_count() + queue.parked_count()
        reporter = ProgressReporter(app.log, total, "jobs")
        worker = app.worker(queue, probe_now=True)
        stats = work(worker, retry_waiting_now=True, progress=lambda s: reporter.update(sum_done(s)))
        reporter.update(sum_done(stats), final=True)
        left = queue.parked_count()
    return finish(worker, left, app.ensure_drainer)
