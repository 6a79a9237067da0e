"""Stash2Plex: keeps Plex metadata in step with Stash.

Stash runs ``python Stash2Plex.py`` once per hook event and per task, with one JSON
document on stdin; the reply is one JSON object ``{"output", "error"}`` on stdout
and logs go to stderr in Stash's protocol. With arguments it is a command line:
``Stash2Plex.py drain`` (the detached background drainer a hook starts), and
``Stash2Plex.py <task> [options]`` / ``--help`` (every task from a shell, app/cli.py;
``demo`` runs the demo against the bundled emulators). Tasks, the drainer and the
command line first make sure the runtime packages are importable (app/bootstrap.py);
a hook, which Stash waits for inside every scene edit and imports none of them, runs
that check only when it starts the drainer (a first run installs them then).
"""

from __future__ import annotations

import os
import sys

# The oldest Python the plugin runs on: SQLite's result codes on its errors (``sqlite_errorcode``
# and the ``sqlite3.SQLITE_*`` names, sync_queue/sqlite.py) and RFC3339's ``Z`` in
# ``datetime.fromisoformat`` came with 3.11.
MIN_PYTHON = (3, 11)


def main(stdin, stdout, stderr, env: dict[str, str], argv: list[str] | None = None) -> int:
    """Run one invocation (app/main.py); returns the process exit status."""
    problem = too_old(sys.version_info)
    if problem is not None:
        if argv:
            stderr.write(problem + "\n")
        else:  # Stash reads one JSON reply
            import json

            stdout.write(json.dumps({"output": None, "error": problem}))
        return 1
    _find_packages()
    from app.main import main as run

    return run(stdin, stdout, stderr, env, argv)


def too_old(version) -> str | None:
    """What to tell a user whose Python is older than ``MIN_PYTHON``; None when it is not.

    >>> too_old((3, 10, 12))
    'Stash2Plex needs Python 3.11 or newer; it was started with Python 3.10.12. Install a newer Python and set its path in Stash (Settings → System → Python Path)'
    >>> too_old((3, 11, 0)) is None
    True
    """
    if tuple(version[:2]) >= MIN_PYTHON:
        return None
    return (
        f"Stash2Plex needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; it was started with Python "
        f"{'.'.join(map(str, version[:3]))}. Install a newer Python and set its path in Stash "
        "(Settings → System → Python Path)"
    )


def _find_packages() -> None:
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path[:1] != [here]:
        sys.path.insert(0, here)


if __name__ == "__main__":
    _find_packages()
    from app.main import utf8_stdio

    utf8_stdio()
    sys.exit(main(sys.stdin, sys.stdout, sys.stderr, dict(os.environ), sys.argv[1:]))
