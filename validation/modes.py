"""The modes: one row per thing a run can be asked to do, the one table every surface reads.

A row says what runs (``module:function``, imported only when the mode runs, so a hook
never pays for a task), who may ask for it and how the command line shows it: the
validator (validation/plugin_input.py) accepts the modes Stash may send, the dispatcher
(tasks/__init__.py) runs them, the command line (app/cli.py) lists, parses and prints
them, and the page (ui/*.js) starts each by its id. Stash's task menu (``tasks:`` of
Stash2Plex.yml, a static file Stash reads) names its task by ``defaultArgs.mode``;
tests/test_plugin_yml.py checks the menu against the rows.

>>> MODES["retry_dlq"].run, MODES["ui_retry"].takes_args
('tasks.dlq_tasks:retry_dlq', True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TASK, OPERATION, COMMAND = "task", "operation", "command"


@dataclass(frozen=True)
class Mode:
    """``kind``: TASK (Stash's task menu and the command line), OPERATION (the page, through
    runPluginOperation; answers JSON) or COMMAND (the command line only: it answers a
    person at a terminal)."""

    id: str
    run: str
    kind: str = TASK
    help: str = ""  # the command line's line for it
    takes_args: bool = False  # the function is also given the run's ``args`` (so is one with ``operands``)
    plan: str = ""  # what runs instead on a dry run, when the task's own function does not plan
    dry_run: bool = False  # a dry run is possible (the command line's --dry-run; a menu entry's dry_run)
    operands: str = ""  # the command line's positional arguments, as its usage shows them
    aliases: tuple[str, ...] = ()
    quiet: bool = False  # its log lines repeat what the command line prints
    lines: str = ""  # how the command line prints the reply for a person (``module:function``)
    checks: bool = False  # the reply is a verdict: ``ok`` and ``problems`` lead its printout; exit 1 when not ok


def function(ref: str) -> Callable[..., Any]:
    """The function a row names (``module:function``), imported now."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


_ROWS = (
    Mode(
        "all",
        "tasks.sync_all:run",
        help="sync every scene that differs from what was last written to Plex",
        plan="tasks.preview:plan",
        dry_run=True,
    ),
    Mode(
        "recent",
        "tasks.sync_all:run",
        help="sync scenes updated since the last sync (the last 24 h when there was none)",
        plan="tasks.preview:plan",
        dry_run=True,
    ),
    Mode(
        "reconcile",
        "tasks.reconcile:run",
        help="verify every linked Plex item against Stash and repair what differs",
        dry_run=True,
    ),
    Mode("process_queue", "tasks.process_queue:run", help="work through every queued job now, retries included"),
    Mode(
        "queue_status",
        "tasks.queue_status:run",
        help="pending jobs, retries, the dead-letter queue and cumulative stats",
        aliases=("status",),
        quiet=True,
        lines="tasks.queue_status:format_status",
    ),
    Mode("clear_queue", "tasks.dlq_tasks:clear_queue", help="drop every pending job (the dead-letter queue is kept)"),
    Mode("clear_dlq", "tasks.dlq_tasks:clear_dlq", help="delete every dead-letter entry"),
    Mode("purge_dlq", "tasks.dlq_tasks:purge_dlq", help="delete dead-letter entries older than 30 days"),
    Mode("retry_dlq", "tasks.dlq_tasks:retry_dlq", help="put every dead-letter entry back into the queue"),
    Mode(
        "health_check",
        "tasks.health_check:run",
        help="check Stash, Plex, the token, the libraries and path_map",
        checks=True,
    ),
    Mode(
        "import_plays",
        "tasks.import_plays:run",
        help="add Plex's watch history of synced scenes to Stash's play history (each play once)",
        dry_run=True,
    ),
    Mode(
        "inspect",
        "tasks.inspect:run",
        COMMAND,
        "inspect <scene id>: the scene's paths, candidate items, ledger record and planned edit",
        operands=" <scene id>",
        lines="tasks.inspect:inspect_lines",
    ),
    Mode(
        "unmatched",
        "tasks.unmatched:run",
        COMMAND,
        "every scene with no Plex item, by folder, with a path_map rule when one would help",
        lines="tasks.unmatched:unmatched_lines",
    ),
    Mode(
        "pin",
        "tasks.pins:pin",
        COMMAND,
        "pin <scene id> <ratingKey>: sync the scene to that Plex item from now on (before any match)",
        operands=" <scene id> <ratingKey>",
    ),
    Mode(
        "unpin",
        "tasks.pins:unpin",
        COMMAND,
        "unpin <scene id>: remove the scene's pin (or Not in Plex / Skip answer); the matcher decides again",
        operands=" <scene id>",
    ),
    Mode("ui_status", "tasks.ui:status", OPERATION),
    Mode("ui_scene", "tasks.ui:scene", OPERATION, takes_args=True),
    Mode("ui_retry", "tasks.ui:sync_scene", OPERATION, takes_args=True),
    Mode("ui_sync_scene", "tasks.ui:sync_scene", OPERATION, takes_args=True),
    Mode("ui_preview", "tasks.preview:run", OPERATION),
    Mode("ui_pin", "tasks.pins:pin", OPERATION, takes_args=True),
    Mode("ui_unpin", "tasks.pins:unpin", OPERATION, takes_args=True),
    Mode("ui_inbox", "tasks.inbox:run", OPERATION, takes_args=True),
    Mode("ui_path_help", "tasks.inbox:path_help", OPERATION),
    Mode("ui_recheck", "tasks.inbox:recheck", OPERATION),
    Mode("ui_thumbs", "tasks.inbox:thumbs", OPERATION, takes_args=True),
)
MODES = {row.id: row for row in _ROWS}
TASK_MODES = tuple(row.id for row in _ROWS if row.kind == TASK)
OPERATION_MODES = tuple(row.id for row in _ROWS if row.kind == OPERATION)
# What Stash may send (a task of the menu, or the page's runPluginTask / runPluginOperation).
STASH_MODES = TASK_MODES + OPERATION_MODES
COMMAND_LINE_MODES = tuple(row.id for row in _ROWS if row.kind in (TASK, COMMAND))
