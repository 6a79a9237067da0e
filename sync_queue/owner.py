"""Which Stash a data folder belongs to: one data folder, one Stash.

Two Stash instances sharing a plugin folder once shared one data folder, and one's drainer
synced the other's jobs. So a folder records the Stash that first used it (``stash.json``: the
``Dir`` of ``server_connection``, Stash's config folder). Another Stash gets
``<plugin>/data-<8 hex digits of its config folder>`` beside the default one; a
``STASH2PLEX_DATA_DIR`` of another Stash is refused, saying what to do. A folder without the
file is claimed by the first Stash that uses it; a run without ``Dir`` (the command line) uses
the folder it is given.
"""

from __future__ import annotations

import json
import os

from core.errors import DataFileError
from core.platform import write_whole

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from pathlib import Path

OWNER_FILE = "stash.json"


def key(stash_dir: str) -> str:
    """A Stash's config folder as compared (absolute, case as the system compares it)."""
    return os.path.normcase(os.path.abspath(stash_dir)).rstrip("\\/") or os.sep


def owner(folder: Path | str) -> str | None:
    """The config folder of the Stash that claimed ``folder``; None when unclaimed."""
    path = os.path.join(folder, OWNER_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            data = json.loads(file.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DataFileError(
            f"{path} (which Stash this data folder belongs to) cannot be read ({exc}); "
            "if only one Stash uses this plugin, delete that file"
        ) from None
    value = data.get("stash_config_dir") if isinstance(data, dict) else None
    return key(value) if isinstance(value, str) and value else None


def claim(folder: Path, stash_dir: str) -> str:
    """Record ``stash_dir`` as the owner unless one is recorded; the owner either way."""
    found = owner(folder)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # made whole or not at all, so a run reading it meanwhile never sees it half written
        # (an empty file read as "cannot be read" failed a concurrent hook)
        write_whole(str(folder / OWNER_FILE), json.dumps({"stash_config_dir": stash_dir}), publish=os.link)
    except FileExistsError:  # two first runs: the other won
        return owner(folder) or key(stash_dir)
    except OSError:
        return key(stash_dir)  # a folder we cannot write fails later with its own clear error
    return key(stash_dir)


DATA_DIR_VARIABLE = "STASH2PLEX_DATA_DIR"


def data_folder(plugin_dir: str, stash_dir: str | None, env: dict[str, str]) -> str:
    """The data folder of a run: ``$STASH2PLEX_DATA_DIR`` when set, else ``<PluginDir>/data``;
    the folder of the Stash that claimed it first, another Stash gets its own beside it (see the
    module docstring). A folder this Stash claimed already is told from two small reads (a hook's
    usual case)."""
    named = env.get(DATA_DIR_VARIABLE)
    base = named or os.path.join(plugin_dir, "data")
    if stash_dir and os.path.isdir(base) and owner(base) == key(stash_dir):
        return base
    from pathlib import Path

    folder = Path(base)
    if stash_dir and not _not_a_folder(folder) and claim(folder, stash_dir) != key(stash_dir):
        if named:
            raise DataFileError(
                f"STASH2PLEX_DATA_DIR ({base}) holds the queue of another Stash (config folder {owner(base)}); "
                f"two Stash instances cannot share one data folder. Give this Stash (config folder "
                f"{key(stash_dir)}) a STASH2PLEX_DATA_DIR of its own, or unset it: each Stash then gets its "
                "own folder by itself"
            )
        import hashlib  # not on a hook's usual path (this is the second Stash's first run)

        folder = folder.with_name(f"{folder.name}-{hashlib.sha256(key(stash_dir).encode()).hexdigest()[:8]}")
        claim(folder, stash_dir)
    if _not_a_folder(folder):
        where = DATA_DIR_VARIABLE if named else "the plugin's data folder"
        raise DataFileError(
            f"{where} ({folder}) is a file, not a folder: point {DATA_DIR_VARIABLE} at a folder "
            "(or move that file away); nothing was queued or changed"
        )
    return str(folder)


def _not_a_folder(path: Path) -> bool:
    return path.exists() and not path.is_dir()
