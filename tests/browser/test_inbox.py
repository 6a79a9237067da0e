"""The match inbox on the Stash2Plex page, inside Stash's real UI (see conftest.py)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import SLOW_MS
from tests.browser.test_stash_ui import texts
from tests.conftest import EDGE_RELEASES
from tests.test_pins import dead, pins
from tests.test_ui_modes import dead_letter

# Hostile text in every field the inbox shows: a script may run from none of them.
XSS = "<img src=x onerror=window.__s2p_pwned=1></script><script>window.__s2p_pwned=2</script>"
HOSTILE_DIR = "a<img src=x onerror=window.__s2p_pwned=3>"
NO_SCRIPT_RAN = "() => window.__s2p_pwned === undefined && !document.querySelector('img[src=\"x\"], script:not([src])')"


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)  # the oldest and newest Stash we support
def test_pin_an_ambiguous_scene_mark_one_not_in_plex_and_no_script_runs(stash_ui, ui_page):
    stash, plex = stash_ui.stash, stash_ui.plex
    plex.add_section("Films " + XSS, ["/plex/other"], key=2)
    stash_ui.configure(path_map="/stash/media=/plex/media")
    name = "clip<script>.mp4"
    two = stash.add_scene(title="Two " + XSS, files=[{"path": f"/stash/media/{HOSTILE_DIR}/{name}", "size": 77}])
    first = plex.add_item(1, f"/plex/media/x/{name}", size=77)
    second = plex.add_item(2, f"/plex/other/{HOSTILE_DIR}/{name}", size=77)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    gone = stash.add_scene(title="Gone " + XSS, files=[{"path": "/stash/media/nowhere.mp4", "size": 1}])
    dead_letter(stash_ui, gone, "PlexNotFound", "not in Plex: " + XSS, "Gone " + XSS)
    assert dead(stash_ui) == {two: "AmbiguousMatch", gone: "PlexNotFound"}
    page = ui_page.page
    ui_page.goto("/stash2plex")
    card = page.locator(f'.s2p-inbox-scene[data-scene-id="{two}"]')
    card.locator(".s2p-inbox-title").wait_for()
    assert card.locator(".s2p-inbox-title").inner_text() == "Two " + XSS
    assert XSS in card.locator(f'.s2p-candidate[data-rating-key="{second}"] .s2p-library').inner_text()
    assert HOSTILE_DIR in card.locator(".s2p-reason").inner_text()
    thumb = card.locator(f'.s2p-candidate[data-rating-key="{second}"] img.s2p-thumb')
    thumb.wait_for(timeout=2 * SLOW_MS)  # Plex's poster, as image data (one plugin run for the page)
    src = thumb.get_attribute("src")
    assert src.startswith("data:image/png;base64,") and stash_ui.plex.token not in page.content()
    other = page.locator(f'.s2p-inbox-scene[data-scene-id="{gone}"]')
    assert other.locator(".s2p-reason").inner_text() == "not in Plex: " + XSS
    assert page.evaluate(NO_SCRIPT_RAN)
    card.locator(f'.s2p-candidate[data-rating-key="{second}"] .s2p-this-one').click()
    assert stash_ui.ui.wait_for_run("ui_pin").reply["error"] is None
    stash_ui.wait_drained()
    assert plex.item(second)["fields"]["title"] == "Two " + XSS and plex.item(first)["fields"]["title"] != "Two " + XSS
    card.wait_for(state="detached")
    other.locator(".s2p-not-in-plex").click()
    other.wait_for(state="detached")
    assert pins(stash_ui) == {two: ("item", second), gone: ("not_in_plex", None)}
    assert page.inner_text(".s2p-inbox-count") == "0" and page.evaluate(NO_SCRIPT_RAN)
    ui_page.goto(f"/stash2plex?scene={two}")  # the scene's Plex state shows the answer, and takes it back
    answer = page.locator(".s2p-scene-focus .s2p-pin td")
    answer.wait_for()
    assert answer.inner_text().startswith(f"pinned to Plex item #{second}")
    answer.locator(".s2p-unpin").click()
    assert stash_ui.ui.wait_for_run("ui_unpin").reply["error"] is None
    stash_ui.wait_drained()
    assert pins(stash_ui) == {gone: ("not_in_plex", None)} and page.evaluate(NO_SCRIPT_RAN)


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_saving_the_suggested_path_map_shrinks_the_inbox(stash_ui, ui_page):
    stash_ui.configure(path_map="/elsewhere=/plex/media", plex_concurrency=2)
    for n in range(3):
        sid = stash_ui.stash.add_scene(title=f"V{n}", files=[{"path": f"/data/vids/v{n}.mp4", "size": 10 + n}])
        stash_ui.plex.add_item(1, f"/plex/media/v{n}.mp4", size=10 + n, duration_ms=None)
        dead_letter(stash_ui, sid, "PlexNotFound", "not in Plex after 5 attempts", f"V{n}")
    odd = stash_ui.stash.add_scene(title="Odd", files=[{"path": "/data/odd/zzz.mp4", "size": 1}])
    dead_letter(stash_ui, odd, "AmbiguousMatch", "two Plex items fit", "Odd")
    stash_ui.plex.add_item(1, "/plex/media/p/zzz.mp4", size=1)
    stash_ui.plex.add_item(1, "/plex/media/q/zzz.mp4", size=1)
    page = ui_page.page
    ui_page.goto("/stash2plex")
    help_ = page.locator(".s2p-path-help")
    help_.wait_for()
    assert help_.locator(".s2p-rule").inner_text() == "/data/vids=/plex/media"
    assert help_.locator(".s2p-fixes").inner_text() == "3 scenes"
    assert texts(help_.locator(".s2p-rule-match")) == [  # shown before it is saved
        f"V{n}: /data/vids/v{n}.mp4 → /plex/media/v{n}.mp4" for n in range(3)
    ]
    page.locator(".s2p-inbox-count", has_text="4").wait_for()  # the list and the rule are two plugin runs
    help_.locator(".s2p-save-rule").click()
    stash_ui.ui.wait_for_run("ui_recheck")
    saved = stash_ui.stash.plugin_settings["Stash2Plex"]
    assert saved["path_map"] == "/data/vids=/plex/media;/elsewhere=/plex/media"
    assert saved["plex_url"] == stash_ui.plex.url and saved["plex_concurrency"] == 2  # the rest is kept
    stash_ui.wait_drained()
    page.locator(".s2p-inbox-count", has_text="1").wait_for()
    assert [page.locator(".s2p-inbox-scene").get_attribute("data-scene-id")] == [str(odd)]
    help_.wait_for(state="detached")  # the suggestion goes with the scenes it was for


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_the_page_and_a_scenes_plex_state_on_a_fresh_load_and_after_navigation(stash_ui, ui_page):
    """Before Stash v0.28 the app draws before plugin JavaScript runs: a fresh load of the
    page, and the navbar link on a fresh scene page, must show anyway (ui/stash2plex.js)."""
    sid, rk = stash_ui.add_scene(1)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    page = ui_page.page
    ui_page.goto("/stash2plex")
    page.locator(".s2p-cards").wait_for()
    ui_page.goto(f"/scenes/{sid}")
    page.locator(f'.s2p-nav-link[data-scene-id="{sid}"]:visible').first.click()
    page.wait_for_url(f"**/stash2plex?scene={sid}")
    panel = page.locator('.s2p-scene-focus .s2p-scene-panel[data-state="in_sync"]')
    panel.wait_for()
    assert panel.locator(".s2p-item td").inner_text() == f"#{rk}"
    ui_page.navigate("/scenes")
    page.locator(".s2p-nav-link:visible").first.click()
    page.wait_for_url("**/stash2plex")
    page.locator(".s2p-cards").wait_for()
    assert page.locator(".s2p-scene-focus").count() == 0
