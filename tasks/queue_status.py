"""``queue_status``: what is waiting, what failed and why, and the cumulative statistics: the
reply, and as readable lines (``format_status``) that the task logs and the command line prints.
"""

from __future__ import annotations

from typing import Any

from core.privacy import Placeholders
from sync_queue.health import drainer_stop
from sync_queue.stats import iso_local
from tasks.context import Context, queue_state


def run(app: Context) -> dict[str, Any]:
    queue = queue_state(app)  # before the dead letters: a job done meanwhile is a dead letter by then
    dlq = app.dlq().summary(newest=5)
    ledger = app.ledger()
    stats = app.stats().snapshot()
    status = {
        **queue,
        "dlq": dlq["count"],
        "dlq_by_reason": dlq["by_reason"],
        "dlq_newest": [{**e, "failed_at": iso_local(e["failed_at"])} for e in dlq["newest"]],
        "drainer_running": app.drainer_running(),
        "last_sync": stats["last_success_at"],  # any run: the background drainer's too
        "last_full_sync": ledger.meta("last_sync_at"),
        "synced_scenes": ledger.count(),
        "stats": stats,
        "last_drainer_error": drainer_stop(app.health().state()),
    }
    private = app.private()
    if private is not None:
        status = placeholders_in(status, private)
    for line in format_status(status):
        app.log.info(line)
    return status


def placeholders_in(status: dict[str, Any], private: Placeholders) -> dict[str, Any]:
    """The status with scene titles and file paths replaced (the private_logs setting)."""
    for entry in status["dlq_newest"]:
        private.note_title(entry["title"])
    newest = [{**e, "title": private.title(e["title"]), "reason": private(e["reason"])} for e in status["dlq_newest"]]
    error = status.get("last_drainer_error")
    if isinstance(error, dict):
        error = {**error, "error": private(str(error.get("error")))}
    stats = dict(status.get("stats") or {})
    if isinstance(stats.get("last_failure"), dict):
        stats["last_failure"] = {**stats["last_failure"], "message": private(str(stats["last_failure"]["message"]))}
    return {**status, "dlq_newest": newest, "last_drainer_error": error, "stats": stats}


def format_status(status: dict[str, Any]) -> list[str]:
    """The reply of :func:`run` as human-readable lines: queue, dead-letter queue, statistics."""
    return [*_queue_lines(status), *_dlq_lines(status), *_stats_lines(status.get("stats") or {})]


def _queue_lines(status: dict[str, Any]) -> list[str]:
    waiting = f"{status['retrying']:,} waiting for a retry"
    if status.get("next_retry_at"):
        waiting += f", the next at {status['next_retry_at']}"
    if status.get("entity_events"):
        waiting += f", {status['entity_events']:,} tag/performer/studio/group changes to fan out"
    lines = [
        f"{status['pending']:,} pending ({waiting}), {status['dlq']:,} in the dead-letter queue"
        + "".join(f"; {n:,} × {reason}" for reason, n in status["dlq_by_reason"].items())
    ]
    drainer = "a background drainer is running" if status.get("drainer_running") else "no background drainer is running"
    lines.append(
        f"{drainer}; {status.get('synced_scenes', 0):,} scenes in the sync ledger; "
        f"last sync {status.get('last_sync') or 'never'}; "
        f"last 'all'/'recent' {status.get('last_full_sync') or 'never'}"
    )
    if status.get("set_aside"):
        n = status["set_aside"]
        lines.append(
            f"{n:,} unreadable queue entr{'y' if n == 1 else 'ies'} set aside (kept in queue/data.db, never retried)"
        )
    if status.get("last_drainer_error"):
        lines.append(f"the last background drainer stopped: {status['last_drainer_error'].get('error')}")
    return lines


def _dlq_lines(status: dict[str, Any]) -> list[str]:
    return [f"DLQ scene {e['scene_id']} {e['title'] or ''!r}: {e['reason']}" for e in status.get("dlq_newest", [])]


def _stats_lines(stats: dict[str, Any]) -> list[str]:
    if not stats:
        return []
    avg = stats.get("avg_plex_ms")
    parts = [
        f"synced {stats['synced']:,}",
        f"unchanged {stats['unchanged']:,}",
        f"failed {stats['failed_total']:,}" + _by_class(stats["failed"]),
        f"retried {stats['retried_total']:,}" + _by_class(stats["retried"]),
        f"gone {stats['gone']:,}",
        f"posters {stats['posters']:,}",
        f"avg Plex {avg:,.0f} ms/job" if avg is not None else "avg Plex n/a",
        f"last success {stats.get('last_success_at') or 'never'}",
    ]
    lines = [", ".join(parts)]
    failure = stats.get("last_failure")
    if failure:
        route = "dead-lettered" if failure.get("dead_lettered") else "retried"
        lines.append(
            f"last failure {stats.get('last_failure_at')} ({route}): {failure['error_class']}: {failure['message']}"
        )
    return lines


def _by_class(counts: dict[str, int]) -> str:
    return f" ({', '.join(f'{name} {n:,}' for name, n in counts.items())})" if counts else ""
