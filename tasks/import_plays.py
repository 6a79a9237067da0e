"""``import_plays``: Plex's whole watch history of synced scenes into Stash's play history.

The explicit import of plays made before ``import_plays`` was turned on (the ``watch``
command then keeps up with new ones). Each play is added once (``worker/plays.py``):
running it again, or beside ``watch``, adds nothing twice. ``dry_run`` counts what it
would add and writes nothing.
"""

from __future__ import annotations

from core.errors import ConfigError
from tasks.context import Context


def run(app: Context) -> dict:
    settings = app.settings()
    why = settings.problem("plays_accounts")
    if why:  # whose plays to read is unknown: none are read (a bad value turns only this off)
        raise ConfigError(why)
    dry_run = bool(app.options.get("dry_run"))
    counts = app.play_import().run(settings.play_accounts, from_start=True, dry_run=dry_run)
    added = "plays_to_add" if dry_run else "plays_added"
    keys = (added, "plays_in_stash", "plays_known", "plays_not_synced", "plays_same_viewing")
    result = {"dry_run": dry_run, "accounts": list(settings.play_accounts), **{k: counts.get(k, 0) for k in keys}}
    verb = "would add" if dry_run else "added"
    app.log.info(
        f"Plex watch history: {verb} {result[added]} play(s) to Stash; {result['plays_in_stash']} already there"
    )
    return result
