"""Where the interpreter looks for packages, set before anything needs one.

Stash starts ``python -S Stash2Plex.py`` (no ``site``: no site-packages, no ``.pth`` files
to run), so a hook starts as fast as Python can when its packages are in ``deps/``
(app/bootstrap.py). Every other run, and a hook whose packages live in site-packages, turns
``site`` on first (:func:`enable_site`): the same folders end up on ``sys.path`` as without
``-S``. Only ``os`` and ``sys`` here: this runs on the hook's path.
"""

from __future__ import annotations

import os
import sys

DEPS_DIR = "deps"
HOOK_PACKAGE = "persistqueue"  # present in deps/ once the bootstrap installed the requirements there


class DependencyError(Exception):
    """The packages are missing and could not be installed; the message says what to run
    (raised by app/bootstrap.py; here so that a hook catches it without importing that)."""


def deps_dir(plugin_dir: str) -> str:
    """The plugin-local package folder of this Python (compiled wheels differ by version)."""
    return os.path.join(plugin_dir, DEPS_DIR, f"py{sys.version_info.major}{sys.version_info.minor}")


def use_local_packages(plugin_dir: str) -> bool:
    """Put the plugin-local package folder first on ``sys.path`` when it exists; True when it
    holds what a hook imports."""
    target = deps_dir(plugin_dir)
    if not os.path.isdir(target):
        return False
    if target not in sys.path:
        sys.path.insert(0, target)
        import importlib

        importlib.invalidate_caches()
    return os.path.isdir(os.path.join(target, HOOK_PACKAGE))


def enable_site() -> bool:
    """Run what ``site`` does at start-up when Python was started without it (``-S``);
    True when that changed ``sys.path``."""
    if not sys.flags.no_site:
        return False
    import site

    if site.ENABLE_USER_SITE is not None:  # set by site.main(): it ran already
        return False
    before = list(sys.path)
    site.main()
    return sys.path != before


def prepare(plugin_dir: str, hook: bool) -> None:
    """Packages for this run: a hook with its packages in ``deps/`` skips ``site``."""
    if not (hook and use_local_packages(plugin_dir)):
        enable_site()
        use_local_packages(plugin_dir)  # first again: site may have put folders before it
