"""The hook's fast lane: a well-formed scene hook queued with the standard library alone.

Stash runs post hooks inside the user's save, one after another (pkg/plugin/plugins.go
``executePostHooks``), so a bulk edit waits for one run of ours per scene. While a drainer
runs, this lane checks the document as the full lane does (validation/document.py), decides
the job the same way (hooks/scene_event.py), writes it to the inbox and nudges the drainer.
Anything else goes the full way (app/main.py): docs/architecture.md lists the cases.
"""

from __future__ import annotations

import os
import sqlite3
import time

from core.errors import Stash2PlexError
from core.platform import is_locked
from hooks.scene_event import scene_job
from sync_queue import health, inbox
from sync_queue.owner import key, owner
from validation.document import SCENE_HOOKS, args_values, connection_values, hook_values, read_document

DATA_DIR_VARIABLE = "STASH2PLEX_DATA_DIR"


def queue_scene_hook(raw: str, env: dict[str, str]) -> tuple[str, str] | None:
    """(reply, debug log line) when this lane queued the hook's job (or found nothing to
    queue); None hands the run to the full lane."""
    try:
        return _queue(raw, env)
    except (Stash2PlexError, OSError, sqlite3.Error, ValueError):
        return None


def _queue(raw: str, env: dict[str, str]) -> tuple[str, str] | None:
    document = read_document(raw)
    context = args_values(document.get("args"))["hookContext"]
    if context is None:
        return None
    hook = hook_values(context)
    if hook["type"] not in SCENE_HOOKS:
        return None
    data_dir = claimed_data_dir(connection_values(document["server_connection"]), env)
    if data_dir is None or health.warning_pending(data_dir, time.time()) is not None:
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
    added = inbox.put(inbox.queue_path(data_dir), scene, priority, hook["type"], fields, time.time())
    # Looked at again after the write: a drainer that finished meanwhile either sees the
    # row (it checks once more after letting go of its lock) or is gone, and then the
    # full lane starts one (its job collapses into this row when the drainer moves it).
    if added is None or not is_locked(lock):
        return None
    inbox.nudge(data_dir)
    what = "queued" if added else "already queued"
    return f"scene {scene} {what}", f"scene {scene} {what} ({priority})"


def claimed_data_dir(connection: dict, env: dict[str, str]) -> str | None:
    """The data folder (app/root.py ``data_dir_for``) when it exists and this Stash already
    claimed it (sync_queue/owner.py); None when the full lane must decide."""
    base = env.get(DATA_DIR_VARIABLE) or os.path.join(connection["PluginDir"], "data")
    stash_dir = connection["Dir"]
    if not stash_dir or not os.path.isdir(base):
        return None
    return base if owner(base) == key(stash_dir) else None
