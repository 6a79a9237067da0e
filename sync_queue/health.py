"""How the background sync is doing, in ``<data>/sync_health.json``, cheap for a hook to read.

The drainer records whether sync is failing (why, what to do) and whether Plex is down
(since when, whether notified). A hook reads it with one ``open`` (no SQLite, no network)
and, while sync fails, warns in Stash's log at most once a minute for all hooks together
(``warned.at``'s mtime). Writes are atomic; a missing or unreadable file reads as fine.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from core.platform import write_whole

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

HEALTH_FILE = "sync_health.json"
WARNED_FILE = "warned.at"
WARN_EVERY_S = 60.0
BUSY_WARN_S = 5.0  # the drainer's move of the hooks' edits takes milliseconds; this long: a held file


def read(data_dir: Path | str) -> dict[str, Any]:
    try:
        with open(os.path.join(data_dir, HEALTH_FILE), encoding="utf-8") as file:
            value = json.loads(file.read())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write(data_dir: Path | str, state: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a full disk must not stop a sync for a hint
        write_whole(os.path.join(data_dir, HEALTH_FILE), json.dumps(state, ensure_ascii=False))


class HealthFile:
    """The drainer's (and a task's) side: record failures, clear them, track Plex outages.

    Every change is a read-modify-write of the small file under a lock (one process
    may call from several worker threads); different processes rarely write at once,
    and the last writer wins, which is right for "the latest outcome".
    """

    def __init__(self, data_dir: Path | str, clock=time.time) -> None:
        import threading

        self.data_dir = data_dir
        self.clock = clock
        self._lock = threading.Lock()

    def state(self) -> dict[str, Any]:
        return read(self.data_dir)

    def update(self, **changes: Any) -> dict[str, Any]:
        """Apply ``changes`` (None removes a key); returns the new state. Writes only on a change."""
        with self._lock:
            old = read(self.data_dir)
            new = {k: v for k, v in {**old, **changes}.items() if v is not None}
            if new != old:
                _write(self.data_dir, new)
            return new

    def failing(self, reason: str, fix: str = "") -> None:
        """The drainer stopped on ``reason``; ``stopped`` tells it from Plex's outage, recorded
        here too while a drainer still runs (worker/notices.py)."""
        self.update(failing={"reason": reason, "fix": fix, "at": self.clock(), "stopped": True})

    def ok(self) -> None:
        if "failing" in self.state():
            self.update(failing=None)


def drainer_stop(state: dict[str, Any]) -> dict[str, Any] | None:
    """Why the last background drainer stopped, as the replies' ``last_drainer_error``
    (``{error, at}``); None after a clean run and while the failing is Plex's outage."""
    failing = state.get("failing")
    if isinstance(failing, dict) and failing.get("stopped") and failing.get("reason"):
        return {"error": str(failing["reason"]), "at": failing.get("at")}
    return None


# One-time notices (worker/photos.py; app/root.py ``take_over``): recorded with ``told`` false by a
# run whose log the user does not read (the drainer's, in drainer.log), then said in Stash's log
# by the next hook.
NOTICES = ("performer_photos", "predecessor_taken")


def _untold(state: dict[str, Any]) -> tuple[str, dict] | None:
    for key in NOTICES:
        notice = state.get(key)
        if isinstance(notice, dict) and notice.get("reason") and notice.get("told") is False:
            return key, notice
    return None


def notice_due(data_dir: Path | str, state: dict[str, Any] | None = None) -> str | None:
    """An untold notice's text for Stash's log, marked told; None when there is none.
    ``state``: the health file as the caller read it already (a hook reads it once)."""
    found = _untold(read(data_dir) if state is None else state)
    if found is None:
        return None
    key, notice = found
    HealthFile(data_dir).update(**{key: {**notice, "told": True}})
    return f"{notice['reason']}; {notice.get('fix') or ''}".rstrip("; ")


def warning_due(
    data_dir: Path | str,
    now: float,
    busy_s: float = 0.0,
    every_s: float = WARN_EVERY_S,
    state: dict[str, Any] | None = None,
) -> str | None:
    """The warning a hook should log now, or None (sync is fine, or warned within ``every_s``):
    background sync failing, or (``busy_s``) the running drainer stuck that long moving the
    hooks' edits into a queue file another program holds.

    Marks the warning as given, so hooks running at the same moment log it about once.
    ``state``: the health file as the caller read it already.
    """
    failing = (read(data_dir) if state is None else state).get("failing")
    if isinstance(failing, dict) and failing.get("reason"):
        text = _failing_text(failing, now)
    elif busy_s >= BUSY_WARN_S:
        text = (
            f"the queue file has been busy for {busy_s:.0f} s: another program (a backup tool, an antivirus, "
            "a sqlite3 shell) is holding it. Edits are kept and reach Plex once it lets go"
        )
    else:
        return None
    marker = os.path.join(data_dir, WARNED_FILE)
    with contextlib.suppress(OSError):
        if now - os.stat(marker).st_mtime < every_s:
            return None
    with contextlib.suppress(OSError):
        open(marker, "a").close()
        os.utime(marker, (now, now))
    return text


def _failing_text(failing: dict, now: float) -> str:
    try:
        since = time.strftime("%H:%M", time.localtime(float(failing.get("at") or now)))
    except (TypeError, ValueError, OverflowError, OSError):  # a damaged file: said as of now
        since = time.strftime("%H:%M", time.localtime(now))
    fix = str(failing.get("fix") or "")
    reason = str(failing["reason"])
    text = f"background sync is failing (last try {since}): {reason}"
    return f"{text} — {fix}" if fix and fix not in reason else text
