"""The dispatcher: runs a mode's function, found in the registry (validation/modes.py).

A task's module is imported only when it runs, so a hook never pays for it.
"""

from __future__ import annotations

from typing import Any

from tasks.context import Context
from validation.modes import MODES, function


def run_task(mode: str, app: Context, params: dict[str, Any]) -> Any:
    """Run ``mode``'s function (its ``plan`` on a dry run); one that ``takes_args`` (or the
    command line's ``operands``) also gets the run's other args; ``app.options["mode"]`` says which mode (a function may serve two).
    The public Stash2Plex plugin's queue and dead letters are taken over first (once)."""
    row = MODES[mode]
    app.options["mode"] = mode
    func = function(row.plan if row.plan and app.options.get("dry_run") else row.run)
    app.take_over()
    return func(app, params) if row.takes_args or row.operands else func(app)
