"""Screenshots of the plugin's UI for docs/images/: ``python -m tests.browser.screenshots``.

Seeds the emulators with a small library, photographs the Stash2Plex page before the first
Sync all, then syncs (some scenes synced, a few for the inbox, one dead letter, one edit
waiting) and photographs the page (dark and light theme, phone width), the inbox, the preview
and the Plex tab of a scene page, inside Stash's real UI in Chromium.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from sync_queue.dlq import DeadLetterQueue
from sync_queue.job import Job
from tests.browser.conftest import CHROMIUM, StashUIPlugin
from tests.browser.test_stash_ui import LIGHT_THEME
from tests.conftest import PLEX_TOKEN, _stop_drainers
from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator
from tests.emulators.stash_ui import SCHEMA_DIR, UI_BUILD
from tests.runner import REPO

OUT = REPO / "docs" / "images"
SCENES = [
    ("Sunset over the bay", "Blue Studio", ["Beach", "Outdoor"], ["Alice"]),
    ("City lights", "Blue Studio", ["Night"], ["Bob"]),
    ("Mountain trail", "Green Films", ["Outdoor", "Hiking"], ["Alice", "Carol"]),
    ("Rainy afternoon", "Green Films", ["Indoor"], ["Dave"]),
]


def seed_inbox(plugin: StashUIPlugin) -> None:
    """For the inbox: a scene two Plex items fit, and three found by file name only (their
    Stash folder is not in path_map, so the page suggests a rule and lists what it would match)."""
    stash, plex = plugin.stash, plugin.plex
    stash.add_scene(
        title="Beach day", files=[{"path": "/stash/media/beach/day.mp4", "size": 734_003_200, "duration": 1520.0}]
    )
    plex.add_item(1, "/plex/media/2023/day.mp4", size=734_003_200, duration_ms=1_520_000)
    plex.add_item(1, "/plex/media/2024/day.mp4", size=734_003_200, duration_ms=1_519_500)
    for n, title in enumerate(("Harbour at dawn", "Forest walk", "Snow in the city")):
        name = title.lower().replace(" ", "-") + ".mp4"
        size = 512_000_000 + n * 7_340_032
        stash.add_scene(title=title, files=[{"path": f"/mnt/nas/videos/{name}", "size": size, "duration": 900.0 + n}])
        plex.add_item(1, f"/plex/media/{name}", size=size, duration_ms=(900 + n) * 1000)


def seed(plugin: StashUIPlugin) -> dict[str, int]:
    ids = {}
    for n, (title, studio, tags, performers) in enumerate(SCENES, 1):
        ids[title], _ = plugin.add_scene(n, title=title, studio=studio, tags=tags, performers=performers)
    seed_inbox(plugin)
    return ids


def sync(plugin: StashUIPlugin, ids: dict[str, int]) -> None:
    assert plugin.task("all").error is None
    plugin.wait_drained()
    plugin.stash.update_scene(ids["City lights"], title="City lights at night", tags=["Night", "Skyline"])
    missing = plugin.stash.add_scene(
        title="Old holiday video", files=[{"path": "/stash/media/holiday.mp4", "size": 5, "duration": 60.0}]
    )
    dlq = DeadLetterQueue(plugin.data_dir)
    dlq.add(
        Job(scene_id=missing, attempt=4), "PlexNotFound", "no Plex item at /plex/media/holiday.mp4", "Old holiday video"
    )
    dlq.add(
        Job(scene_id=ids["Rainy afternoon"], attempt=4),
        "PlexBadRequest",
        "Plex answered 400 Bad Request to the edit of item 104",
        "Rainy afternoon",
    )
    dlq.close()


def shoot(page, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUT / name), full_page=True)
    print(OUT / name)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        with StashEmulator() as stash, PlexEmulator(token=PLEX_TOKEN) as plex, sync_playwright() as p:
            plex.add_section("Stash", ["/plex/media"], key=1)
            stash.auth_required = False
            ui = stash.serve_ui(UI_BUILD, SCHEMA_DIR)
            env = {"STASH2PLEX_DATA_DIR": str(Path(tmp) / "data")}
            ui.install_plugin(REPO, env)
            plugin = StashUIPlugin(stash, plex, Path(tmp) / "data", env)
            plugin.configure()
            ids = seed(plugin)
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: route.fulfill(status=200, body=""))
            page = context.new_page()
            page.goto(stash.url + "/stash2plex")
            page.locator(".s2p-unchecked").wait_for()
            page.locator(".s2p-inbox-empty").wait_for()
            shoot(page, "ui-not-checked.png")
            sync(plugin, ids)
            page.goto(stash.url + "/stash2plex")
            page.locator(".s2p-dlq-entry").first.wait_for()
            page.locator(".s2p-inbox-scene").first.wait_for()
            inbox = page.locator(".s2p-inbox")
            inbox.locator(".s2p-path-help").wait_for()
            page.locator(".s2p-candidate img.s2p-thumb").first.wait_for(timeout=120_000)
            shoot(page, "ui-page-dark.png")
            page.evaluate("window.scrollTo(0, 0)")
            box = inbox.bounding_box()  # the whole page's picture, cut to the inbox: no navbar over it
            page.screenshot(path=str(OUT / "ui-inbox.png"), full_page=True, clip=box)
            print(OUT / "ui-inbox.png")
            page.locator(".s2p-preview-button").click()
            page.locator(".s2p-plan-row").first.wait_for()
            shoot(page, "ui-preview.png")
            page.goto(stash.url + f"/scenes/{ids['Sunset over the bay']}")
            page.locator(".s2p-tab").click()
            page.locator('.s2p-scene-panel[data-state="in_sync"]').wait_for()
            page.screenshot(path=str(OUT / "ui-scene-panel.png"))
            ui.custom_css = LIGHT_THEME
            page.goto(stash.url + "/stash2plex")
            page.locator(".s2p-dlq-entry").first.wait_for()
            page.locator(".s2p-inbox-scene").first.wait_for()
            shoot(page, "ui-page-light.png")
            page.set_viewport_size({"width": 390, "height": 844})
            ui.custom_css = ""
            page.goto(stash.url + "/stash2plex")
            page.locator(".s2p-dlq-entry").first.wait_for()
            page.screenshot(path=str(OUT / "ui-phone.png"))
            browser.close()
            ui.wait_runs_finished()
            _stop_drainers(plugin.data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
