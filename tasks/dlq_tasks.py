"""Queue and dead-letter housekeeping tasks."""

from __future__ import annotations

import time

from sync_queue.job import INTERACTIVE
from tasks.context import Context

PURGE_AFTER_S = 30 * 24 * 3600


def clear_queue(app: Context) -> str:
    """Delete every waiting job. It takes the drainer lock first (a running drainer hands
    over and writes nothing more), so no edit lands in Plex after the reply."""
    with app.consumer() as queue:
        removed = queue.clear()
    app.log.info(f"removed {removed} pending jobs; the dead-letter queue is unchanged")
    return f"removed {removed} pending jobs"


def clear_dlq(app: Context) -> str:
    removed = app.dlq().clear()
    app.log.info(f"deleted {removed} dead-letter entries")
    return f"deleted {removed} dead-letter entries"


def purge_dlq(app: Context) -> str:
    removed = app.dlq().clear(older_than=time.time() - PURGE_AFTER_S)
    app.log.info(f"deleted {removed} dead-letter entries older than 30 days")
    return f"deleted {removed} dead-letter entries older than 30 days"


def retry_dlq(app: Context) -> str:
    """Every DLQ entry back into the queue with a fresh retry budget."""
    requeued = app.dlq().requeue(app.producer_queue(), None, INTERACTIVE, time.time())
    rebuilt, count = requeued.rebuilt, len(requeued.dead)
    if rebuilt:
        shown = ", ".join(str(sid) for sid in rebuilt[:10]) + (", …" if len(rebuilt) > 10 else "")
        app.log.warning(
            f"{len(rebuilt)} dead-letter entr{'y' if len(rebuilt) == 1 else 'ies'} could not be read "
            f"(scenes {shown}); queued again by scene id, every other entry as it was"
        )
    if count:
        app.ensure_drainer()
    app.log.info(f"{count} dead-letter entries queued again")
    return f"{count} dead-letter entries queued again"
