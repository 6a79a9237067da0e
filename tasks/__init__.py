"""The task menu: one module per task, looked up by the ``mode`` in defaultArgs.

Modules are imported only when their task runs, so a hook never pays for them.
"""

from __future__ import annotations

import importlib

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
}


def resolve(mode: str):
    module_name, _, func = TASKS[mode].partition(":")
    return getattr(importlib.import_module(module_name), func)
