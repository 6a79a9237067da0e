"""The hook's fast lane: a well-formed scene hook queued with the standard library alone.

Stash runs post hooks inside the user's save, one after another (pkg/plugin/plugins.go
``executePostHooks``), so a bulk edit waits for one run of ours per scene. While a drainer
runs, this lane checks the document as the full lane does (validation/document.py), decides
the job the same way (hooks/scene_event.py), writes it to the inbox and nudges the drainer.
Anything else goes the full way (app/main.py): docs/architecture.md lists the cases.
"""

from __future__ import annotations

import os
import time

from core.errors import Stash2PlexError
from core.platform import is_locked
from hooks.scene_event import scene_job
from sync_queue import health, inbox
from sync_queue.owner import key, owner
from validation.document import SCENE_HOOKS, args_values, connection_values, hook_values, read_document

DATA_DIR_VARIABLE = "STASH2PLEX_DATA_DIR"


def queue_scene_hook(raw: str, env: dict[str, str]) -> tuple[str, str] | bool | None:
    """(reply, debug log line) when this lane queued the hook's job for a running drainer
    (or found nothing to queue). True when it wrote the job's line but the drainer had
    let go of its lock meanwhile: the full lane only starts a drainer (``hooks/handler.py``
    ``handle(queued=…)``). It must not write the job again: a drainer that looked once
    more may have moved the line and taken its job already, and a second line would be a
    second job of the same event. None hands the whole run to the full lane (nothing was
    written)."""
    try:
        return _queue(raw, env)
    except (Stash2PlexError, OSError, ValueError):
        return None


def _queue(raw: str, env: dict[str, str]) -> tuple[str, str] | bool | None:
    document = read_document(raw)
    context = args_values(document.get("args"))["hookContext"]
    if context is None:
        return None
    hook = hook_values(context)
    if hook["type"] not in SCENE_HOOKS:
        return None
    data_dir = claimed_data_dir(connection_values(document["server_connection"]), env)
    if data_dir is None or health.something_to_say(data_dir, time.time()):
        return None
    scene = hook["id"]
    decided = scene_job(hook["input"] is not None, hook["inputFields"])
    if decided is None:
        changed = ", ".join(hook["inputFields"] or ())
        return (
            f"scene {scene}: nothing to sync",
            f"scene {scene}: only {changed} changed, which Plex does not show; nothing queued",
        )
    priority, fields = decided
    lock = os.path.join(data_dir, inbox.LOCK_FILE)
    if not is_locked(lock):
        return None  # no drainer: the full lane queues the job and starts one
    inbox.put(data_dir, inbox.scene_record(scene, priority, hook["type"], fields, time.time()))
    # Looked at again after the write: a drainer that finished meanwhile either sees the
    # line (it checks once more after letting go of its lock) or is gone; either way the
    # line is the job, and the full lane only makes sure a drainer runs.
    if not _still_locked(lock):
        return True
    inbox.nudge(data_dir)
    return f"scene {scene} queued", f"scene {scene} queued ({priority})"


def _still_locked(lock: str) -> bool:
    try:
        return is_locked(lock)
    except OSError:  # the line is written: the full lane starts a drainer unless one runs
        return False


def claimed_data_dir(connection: dict, env: dict[str, str]) -> str | None:
    """The data folder (app/root.py ``data_dir_for``) when it exists and this Stash already
    claimed it (sync_queue/owner.py); None when the full lane must decide."""
    base = env.get(DATA_DIR_VARIABLE) or os.path.join(connection["PluginDir"], "data")
    stash_dir = connection["Dir"]
    if not stash_dir or not os.path.isdir(base):
        return None
    return base if owner(base) == key(stash_dir) else None
