"""``queue_status``: what is waiting, what failed and why, and when the last sync ran."""

from __future__ import annotations

import datetime as dt
from typing import Any


def _when(timestamp: float | None) -> str | None:
    if not timestamp:
        return None
    return dt.datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def run(app) -> dict[str, Any]:
    counts = app.producer_queue().counts()
    dlq = app.dlq().summary(newest=5)
    ledger = app.ledger()
    status = {
        "pending": counts["pending"],
        "interactive": counts["interactive"],
        "bulk": counts["bulk"],
        "in_flight": counts["in_flight"],
        "retrying": counts["retrying"],
        "next_retry_at": _when(counts["next_retry_at"]),
        "dlq": dlq["count"],
        "dlq_by_reason": dlq["by_reason"],
        "dlq_newest": [{**e, "failed_at": _when(e["failed_at"])} for e in dlq["newest"]],
        "drainer_running": app.drainer_running(),
        "last_sync": ledger.meta("last_sync_at"),
        "synced_scenes": ledger.count(),
        "outcomes": ledger.meta("outcomes", {}),
        "last_drainer_error": ledger.meta("last_drainer_error"),
    }
    app.log.info(
        f"{status['pending']} pending ({status['retrying']} waiting for a retry), {status['dlq']} in the dead-letter queue"
        + "".join(f"; {n} × {reason}" for reason, n in dlq["by_reason"].items())
    )
    for entry in status["dlq_newest"]:
        app.log.info(f"DLQ scene {entry['scene_id']} {entry['title'] or ''!r}: {entry['reason']}")
    return status
