"""The modes: one row per thing a run can be asked to do, the one table every surface reads.

A row says what runs (``module:function``, imported only when the mode runs, so a hook
never pays for a task), who may ask for it, and how each surface shows it: the validator
(validation/plugin_input.py) accepts the modes Stash may send, the dispatcher
(tasks/__init__.py) runs them, the command line (app/cli.py) lists and parses them, and
Stash's task menu (``tasks:`` of Stash2Plex.yml, a static file Stash reads) is written from
the rows by ``python tools/plugin_yml.py`` (tests/test_plugin_yml.py checks the file).
The page (ui/*.js) starts each by its id.

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
class MenuEntry:
    """A task of Stash's menu (Settings → Tasks): its ``defaultArgs`` are the mode and ``dry_run``."""

    name: str
    description: str
    dry_run: bool = False


@dataclass(frozen=True)
class Mode:
    """``kind``: TASK (Stash's menu and the command line), OPERATION (the page, through
    runPluginOperation; answers JSON) or COMMAND (the command line only: it answers a
    person at a terminal)."""

    id: str
    run: str
    kind: str
    help: str = ""  # the command line's line for it
    menu: tuple[MenuEntry, ...] = ()
    takes_args: bool = False  # the function is also given the run's ``args``
    plan: str = ""  # what runs instead on a dry run (``dry_run``), when the task's own function does not plan
    dry_run: bool = False  # the command line takes --dry-run
    operands: str = ""  # the command line's positional arguments, as its usage shows them
    aliases: tuple[str, ...] = ()
    quiet: bool = False  # its log lines repeat what the command line prints
    lines: str = ""  # how the command line prints the reply for a person (``module:function``)


def _task(
    id: str,
    run: str,
    help: str,
    *menu: MenuEntry,
    dry_run: bool = False,
    plan: str = "",
    aliases: tuple[str, ...] = (),
    quiet: bool = False,
    lines: str = "",
) -> Mode:
    dry_run = dry_run or bool(plan)
    return Mode(id, run, TASK, help, menu, dry_run=dry_run, plan=plan, aliases=aliases, quiet=quiet, lines=lines)


def _operation(id: str, run: str, takes_args: bool = False) -> Mode:
    return Mode(id, run, OPERATION, takes_args=takes_args)


def _command(id: str, run: str, help: str, lines: str, operands: str = "") -> Mode:
    return Mode(id, run, COMMAND, help, operands=operands, lines=lines)


def function(ref: str) -> Callable[..., Any]:
    """The function a row names (``module:function``), imported now."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


# In the order of Stash's task menu; then the command line's own, then the page's.
_ROWS = (
    _task(
        "all",
        "tasks.sync_all:run_all",
        "sync every scene that differs from what was last written to Plex",
        MenuEntry(
            "Sync all scenes",
            "Compares every Stash scene with what was last written to Plex and syncs the ones that differ. "
            "Shows progress; safe to stop and run again.",
        ),
        MenuEntry(
            "Preview sync (no writes)",
            "What 'Sync all scenes' would write, scene by scene (current → new), and which scenes have no Plex "
            "item, without writing anything. A summary goes to the log; the full plan is saved in the plugin's "
            "data folder (named in the result).",
            dry_run=True,
        ),
        plan="tasks.preview:plan_all",
    ),
    _task(
        "reconcile",
        "tasks.reconcile:run",
        "verify every linked Plex item against Stash and repair what differs",
        MenuEntry(
            "Verify Plex against Stash",
            "Reads every linked Plex item and repairs what differs from Stash (fields, locks, tags, poster), "
            "finds items that were re-added or moved, and rebuilds the sync ledger. Use after Plex changed "
            "underneath (refresh, Fix match, restore) or the ledger was lost.",
        ),
        dry_run=True,
    ),
    _task(
        "recent",
        "tasks.sync_all:run_recent",
        "sync scenes updated since the last sync (the last 24 h when there was none)",
        MenuEntry(
            "Sync recent changes",
            "Syncs scenes updated since the last successful sync (the last 24 hours when there was none).",
        ),
        plan="tasks.preview:plan_recent",
    ),
    _task(
        "process_queue",
        "tasks.process_queue:run",
        "work through every queued job now, retries included",
        MenuEntry(
            "Process queue now",
            "Works through every queued job in the foreground, including jobs waiting for a retry.",
        ),
    ),
    _task(
        "queue_status",
        "tasks.queue_status:run",
        "pending jobs, retries, the dead-letter queue and cumulative stats",
        MenuEntry(
            "Show queue status",
            "Reports pending jobs, scheduled retries, the dead-letter queue grouped by reason, and the last sync.",
        ),
        aliases=("status",),
        quiet=True,
        lines="tasks.queue_status:format_status",
    ),
    _task(
        "clear_queue",
        "tasks.dlq_tasks:clear_queue",
        "drop every pending job (the dead-letter queue is kept)",
        MenuEntry(
            "Clear queue",
            "Drops every pending job (nothing is written to Plex). The dead-letter queue is kept.",
        ),
    ),
    _task(
        "clear_dlq",
        "tasks.dlq_tasks:clear_dlq",
        "delete every dead-letter entry",
        MenuEntry("Clear dead-letter queue", "Deletes every entry of the dead-letter queue."),
    ),
    _task(
        "purge_dlq",
        "tasks.dlq_tasks:purge_dlq",
        "delete dead-letter entries older than 30 days",
        MenuEntry("Purge old dead-letter entries", "Deletes dead-letter entries older than 30 days."),
    ),
    _task(
        "retry_dlq",
        "tasks.dlq_tasks:retry_dlq",
        "put every dead-letter entry back into the queue",
        MenuEntry(
            "Retry dead-letter queue",
            "Puts every dead-letter entry back into the queue with a fresh retry budget.",
        ),
    ),
    _task(
        "health_check",
        "tasks.health_check:run",
        "check Stash, Plex, the token, the libraries and path_map",
        MenuEntry(
            "Health check",
            "Checks Plex (reachable, version, token, libraries), Stash, and how many scenes the path map "
            "finds in Plex, with a suggested path_map when most are missing.",
        ),
    ),
    _task(
        "import_plays",
        "tasks.import_plays:run",
        "add Plex's watch history of synced scenes to Stash's play history (each play once)",
        MenuEntry(
            "Import Plex watch history",
            "Adds every Plex play of a synced scene (watch history of the accounts in plays_accounts) to the "
            "scene's play history in Stash, each play once; running it again adds nothing twice.",
        ),
        MenuEntry(
            "Preview Plex watch history import (no writes)",
            "How many plays 'Import Plex watch history' would add, without writing anything.",
            dry_run=True,
        ),
        dry_run=True,
    ),
    _command(
        "inspect",
        "tasks.inspect:run",
        "inspect <scene id>: the scene's paths, candidate items, ledger record and planned edit",
        "tasks.inspect:inspect_lines",
        " <scene id>",
    ),
    _command(
        "unmatched",
        "tasks.unmatched:run",
        "every scene with no Plex item, by folder, with a path_map rule when one would help",
        "tasks.unmatched:unmatched_lines",
    ),
    _command(
        "pin",
        "tasks.pins:pin_cli",
        "pin <scene id> <ratingKey>: sync the scene to that Plex item from now on (before any match)",
        "",
        " <scene id> <ratingKey>",
    ),
    _command(
        "unpin",
        "tasks.pins:unpin_cli",
        "unpin <scene id>: remove the scene's pin (or Not in Plex / Skip answer); the matcher decides again",
        "",
        " <scene id>",
    ),
    _operation("ui_status", "tasks.ui:status"),
    _operation("ui_scene", "tasks.ui:scene", takes_args=True),
    _operation("ui_retry", "tasks.ui:retry_entry", takes_args=True),
    _operation("ui_sync_scene", "tasks.ui:sync_scene", takes_args=True),
    _operation("ui_preview", "tasks.preview:run"),
    _operation("ui_pin", "tasks.pins:pin", takes_args=True),
    _operation("ui_unpin", "tasks.pins:unpin", takes_args=True),
    _operation("ui_inbox", "tasks.inbox:run", takes_args=True),
    _operation("ui_path_help", "tasks.inbox:path_help"),
    _operation("ui_recheck", "tasks.inbox:recheck"),
    _operation("ui_thumbs", "tasks.inbox:thumbs", takes_args=True),
)
MODES = {row.id: row for row in _ROWS}
TASK_MODES = tuple(row.id for row in _ROWS if row.kind == TASK)
OPERATION_MODES = tuple(row.id for row in _ROWS if row.kind == OPERATION)
# What Stash may send (a task of the menu, or the page's runPluginTask / runPluginOperation).
STASH_MODES = TASK_MODES + OPERATION_MODES
COMMAND_LINE_MODES = tuple(row.id for row in _ROWS if row.kind in (TASK, COMMAND))
