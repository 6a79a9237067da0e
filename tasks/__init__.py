"""The task menu: one module per task, looked up by the ``mode`` in defaultArgs.

Modules are imported only when their task runs, so a hook never pays for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# The composition root (app/root.py ``App``) that every task is given. Tasks may not import
# app/ (tests/test_layers.py), so here it is Any.
App = Any

TASKS = {
    "all": "tasks.sync_all:run_all",
    "recent": "tasks.sync_all:run_recent",
    "process_queue": "tasks.process_queue:run",
    "queue_status": "tasks.queue_status:run",
    "clear_queue": "tasks.dlq_tasks:clear_queue",
    "clear_dlq": "tasks.dlq_tasks:clear_dlq",
    "purge_dlq": "tasks.dlq_tasks:purge_dlq",
    "retry_dlq": "tasks.dlq_tasks:retry_dlq",
    "health_check": "tasks.health_check:run",
    "reconcile": "tasks.reconcile:run",
    "import_plays": "tasks.import_plays:run",
}
# Command line only: a Stash task takes no argument, and these answer a person at a terminal.
CLI_TASKS = {
    "inspect": "tasks.inspect:run",
    "unmatched": "tasks.unmatched:run",
    "pin": "tasks.pins:pin_cli",
    "unpin": "tasks.pins:unpin_cli",
}
# Operations of the plugin's page in Stash's UI (validation.plugin_input.OPERATION_MODES):
# called with runPluginOperation; each answers JSON.
OPERATIONS = {
    "ui_status": "tasks.ui:status",
    "ui_scene": "tasks.ui:scene",
    "ui_retry": "tasks.ui:retry_entry",
    "ui_sync_scene": "tasks.ui:sync_scene",
    "ui_preview": "tasks.preview:run",
    "ui_pin": "tasks.pins:pin",
    "ui_unpin": "tasks.pins:unpin",
    "ui_inbox": "tasks.inbox:run",
    "ui_path_help": "tasks.inbox:path_help",
    "ui_recheck": "tasks.inbox:recheck",
    "ui_thumbs": "tasks.inbox:thumbs",
}
# modes that read further arguments (``args`` besides ``mode``) from Stash
TAKES_ARGS = frozenset({"ui_scene", "ui_retry", "ui_sync_scene", "ui_pin", "ui_unpin", "ui_inbox", "ui_thumbs"})


def resolve(mode: str) -> Callable[..., Any]:
    module_name, _, func = {**TASKS, **OPERATIONS, **CLI_TASKS}[mode].partition(":")
    return getattr(importlib.import_module(module_name), func)


def run_task(mode: str, app: App, params: dict) -> Any:
    """Run the task for ``mode``; those in ``TAKES_ARGS`` also get the other args. The
    public Stash2Plex plugin's queue and dead letters are taken over first (once)."""
    func = resolve(mode)
    app.take_over()
    return func(app, params) if mode in TAKES_ARGS else func(app)
