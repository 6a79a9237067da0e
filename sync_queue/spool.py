"""What a hook hands the drainer: a line in the spool file, a nudge, and the drainer's lock.

A hook appends its job (a scene's, or an entity event) as one JSON line to
``queue/inbox.spool`` with plain file appends (core/platform.py ``append``): no SQLite, so a
queue file held by another process (a backup tool, a ``sqlite3`` shell) or a busy disk never
makes Stash's save wait. The consumer moves the lines in before each take
(``JobQueue``): it takes the file aside (``inbox.spool.taken``), puts its jobs (the queue's
rule collapses them: one waiting job per scene, a user's edit over bulk work), then deletes
it, so a crash in between moves a line twice, never loses one. A line a hook could not
finish (a full disk) is cut off by the next line's leading newline and skipped.
Standard library only.
"""

from __future__ import annotations

import json
import os

from core.platform import append, take_aside

LOCK_FILE = "drainer.lock"  # held by the one consumer for its life (core/platform.py)
NUDGE_FILE = "drainer.nudge"  # touched by a hook: something happened (the drainer compares settings)
QUEUE_FOLDER, QUEUE_FILE = "queue", "data.db"
SPOOL_FILE = "inbox.spool"
TAKEN_SUFFIX = ".taken"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from typing import Any


def spool_path(queue_dir: str) -> str:
    return os.path.join(queue_dir, SPOOL_FILE)


def nudge(data_dir: str) -> None:
    """Tell a running drainer that something happened (best effort: it also looks by itself)."""
    try:
        with open(os.path.join(data_dir, NUDGE_FILE), "a"):
            pass
        os.utime(os.path.join(data_dir, NUDGE_FILE))
    except OSError:
        pass


def put(data_dir: str, record: dict[str, Any]) -> None:
    """Append one job (:func:`scene_record`, :func:`entity_record`) to the spool of the data
    folder's queue; OSError when the disk refuses."""
    folder = os.path.join(data_dir, QUEUE_FOLDER)
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    line = json.dumps(record, separators=(",", ":"))
    append(spool_path(folder), f"\n{line}\n".encode())


def an_id(value: Any) -> bool:
    """Whether ``value`` may be a line's scene or entity id: a whole number from 1 that SQLite
    stores (a larger one would stop every later move of the spool into the queue)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def scene_record(scene_id: int, priority: str, event: str, fields: tuple[str, ...], at: float) -> dict[str, Any]:
    return {"scene": scene_id, "priority": priority, "event": event, "fields": list(fields), "at": at}


# Marks a performer's event whose only change Plex could show is its image: the drainer, which
# knows the settings, passes it over with performer_photos off (nothing of it is written).
IMAGE_ONLY = " (image only)"


def entity_record(kind: str, entity_id: int, event: str, at: float) -> dict[str, Any]:
    return {"entity": kind, "id": entity_id, "event": event, "at": at}


def read(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of one spool file and the lines that are none (cut off, damaged)."""
    try:
        with open(path, "rb") as file:
            blob = file.read()
    except FileNotFoundError:
        return [], []
    records, bad = [], []
    for raw in blob.split(b"\n"):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict) and ("scene" in value or "entity" in value):
            records.append(value)
        else:
            bad.append(raw[:80].decode("utf-8", "replace"))
    return records, bad


def take(queue_dir: str) -> str | None:
    """The consumer's side: the spool file to move in now (one left by an interrupted move
    first), taken aside so that new lines go to a new file; None when there is none."""
    spool = spool_path(queue_dir)
    taken = spool + TAKEN_SUFFIX
    if not os.path.exists(taken) and not take_aside(spool, taken):
        return None
    os.utime(taken)  # when it was taken, or its move resumed (:func:`moving_for`)
    return taken


def moving_for(queue_dir: str, now: float) -> float:
    """How long the consumer has been moving a taken spool file in (0 when it is not): it
    takes milliseconds, unless another program holds the queue file."""
    try:
        return max(0.0, now - os.stat(spool_path(queue_dir) + TAKEN_SUFFIX).st_mtime)
    except OSError:
        return 0.0


def holds_work(queue_dir: str) -> bool:
    """Whether a hook left anything to move in (one ``stat`` a file: a lingering drainer asks often)."""
    spool = spool_path(queue_dir)
    for path in (spool, spool + TAKEN_SUFFIX):
        try:
            if os.stat(path).st_size:
                return True
        except OSError:
            pass
    return False


def clear(queue_dir: str) -> None:
    """Delete the spool (the consumer's ``clear``)."""
    spool = spool_path(queue_dir)
    while (taken := take(queue_dir)) is not None:
        os.remove(taken)
        if not os.path.exists(spool):
            break
