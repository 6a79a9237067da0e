"""Queue and dead-letter housekeeping tasks."""

from __future__ import annotations

import time

from core.log import first_ids
from sync_queue.job import INTERACTIVE
from tasks.context import Context, queue_again

PURGE_AFTER_S = 30 * 24 * 3600


def _said(app: Context, message: str) -> str:
    app.log.info(message)
    return message


def clear_queue(app: Context) -> str:
    """Delete every waiting job. It takes the drainer lock first (a running drainer hands
    over and writes nothing more), so no edit lands in Plex after the reply."""
    with app.consumer() as queue:
        removed = queue.clear()
    app.log.info(f"removed {removed} pending jobs; the dead-letter queue is unchanged")
    return f"removed {removed} pending jobs"


def clear_dlq(app: Context) -> str:
    return _said(app, f"deleted {app.dlq().clear()} dead-letter entries")


def purge_dlq(app: Context) -> str:
    removed = app.dlq().clear(older_than=time.time() - PURGE_AFTER_S)
    return _said(app, f"deleted {removed} dead-letter entries older than 30 days")


def retry_dlq(app: Context) -> str:
    """Every DLQ entry back into the queue with a fresh retry budget."""
    requeued = queue_again(app, None, INTERACTIVE)
    if rebuilt := requeued.rebuilt:
        shown = first_ids(rebuilt[:10], len(rebuilt))
        app.log.warning(
            f"{len(rebuilt)} dead-letter entr{'y' if len(rebuilt) == 1 else 'ies'} could not be read "
            f"(scenes {shown}); queued again by scene id, every other entry as it was"
        )
    return _said(app, f"{len(requeued.dead)} dead-letter entries queued again")
