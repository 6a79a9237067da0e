"""Plex requests of **Sync all scenes** with performer photos: a library synced without them,
then with them turned on, a re-run, and one performer's new image (counts, not times: the
figures do not depend on the machine). The real plugin against both emulators.

    python tests/bench/photos.py [scenes] [performers]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from tests.conftest import Plugin  # noqa: E402
from tests.emulators.plex_emulator import PlexEmulator  # noqa: E402
from tests.emulators.stash_emulator import StashEmulator, cover_png  # noqa: E402

PER_SCENE = 3  # performers on each scene


def main(scenes: int = 200, performers: int = 20) -> None:
    with StashEmulator() as stash, PlexEmulator(token="bench") as plex, tempfile.TemporaryDirectory() as tmp:
        stash.auth_required = False  # a Stash without a login: Plex may fetch its images
        plex.add_section("Stash", ["/plex/media"], key=1)
        data = Path(tmp) / "data"
        plugin = Plugin(stash, plex, data, {"STASH2PLEX_DATA_DIR": str(data), "STASH2PLEX_DRAINER_LINGER_S": "0"})
        for n in range(scenes):
            plugin.add_scene(n, performers=[f"P{(n + k) % performers}" for k in range(PER_SCENE)])
        for k in range(performers):
            stash.set_performer_image(stash.entity_id("performer", f"P{k}"), cover_png(k, 1))
        print(f"{scenes} scenes, {performers} performers with an image, {PER_SCENE} a scene")
        _all(plugin, "photos off, first sync")
        _all(plugin, "photos turned on", performer_photos=True)
        _all(plugin, "a re-run", performer_photos=True)
        stash.set_performer_image(stash.entity_id("performer", "P3"), cover_png(3, 2))
        _all(plugin, "one performer's new image", performer_photos=True)


def _all(plugin: Plugin, label: str, **settings: object) -> None:
    plugin.configure(**settings)
    plugin.plex.clear_requests()
    synced = plugin.task("all").output["synced"]
    edits = plugin.plex.edit_requests()
    photos = sum(1 for r in edits for key in r["query"] if key.endswith(".tag.thumb"))
    reads = len(plugin.plex.requests_matching("GET", "/library/metadata"))
    print(f"{label:27} synced {synced:4}  edit requests {len(edits):4}  photos sent {photos:3}  item reads {reads:3}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
