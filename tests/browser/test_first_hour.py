"""A new user's first hour on the Stash2Plex page, inside Stash's real UI (see conftest.py):
the page says what it has not checked yet, follows the work it starts, refuses a pin that
would make two scenes share a Plex item, and says whether a ``watch`` runs."""

from __future__ import annotations

import signal

import pytest

from tests.browser.conftest import SLOW_MS
from tests.conftest import EDGE_RELEASES
from tests.test_listener_e2e import start_watch
from tests.test_pins import dead, pins
from tests.test_ui_modes import dead_letter

SIZE = 4242


def ambiguous_scene(stash_ui, title: str = "Two fit") -> tuple[int, int, int]:
    """A scene whose file name two Plex items hold, neither at its mapped path."""
    sid = stash_ui.stash.add_scene(title=title, files=[{"path": "/stash/media/a/clip.mp4", "size": SIZE}])
    first = stash_ui.plex.add_item(1, "/plex/media/x/clip.mp4", size=SIZE, duration_ms=None)
    second = stash_ui.plex.add_item(1, "/plex/media/y/clip.mp4", size=SIZE, duration_ms=None)
    return sid, first, second


def rendered(page) -> None:
    """Let React draw what the last answer brought (two animation frames)."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_before_the_first_check_nothing_reads_as_all_well_and_sync_all_fills_the_page(stash_ui, ui_page):
    stash_ui.add_scene(1)
    two, _, _ = ambiguous_scene(stash_ui)
    page = ui_page.page
    held = []  # the inbox's first answer, held back: its count must not show a number meanwhile
    page.route(
        "**/graphql",
        lambda route: held.append(route) if "ui_inbox" in (route.request.post_data or "") else route.continue_(),
    )
    ui_page.goto("/stash2plex")
    page.locator(".s2p-cards").wait_for()
    page.locator(".s2p-inbox-loading").wait_for()
    assert page.locator(".s2p-inbox-count").count() == 0
    for route in held:
        route.continue_()
    page.unroute("**/graphql")  # (continues any held since)
    page.locator(".s2p-inbox-count").wait_for()
    unchecked = page.locator(".s2p-unchecked")
    assert unchecked.inner_text().startswith("Not checked yet.")
    assert page.inner_text(".s2p-synced-scenes td") == "not checked yet"
    assert page.inner_text(".s2p-inbox-empty") == "Not checked yet: the scenes Sync all cannot settle show here."
    assert page.inner_text(".s2p-dlq-empty") == "Not checked yet: Sync all looks at every scene."
    assert "Nothing to settle" not in page.content() and "No dead letters" not in page.content()

    unchecked.locator(".s2p-check-now").click()  # the one action that checks
    page.locator(".s2p-task-done", has_text="Sync all is done.").wait_for(timeout=2 * SLOW_MS)
    [run] = [r for r in stash_ui.ui.runs if r.args.get("mode") == "all"]
    assert run.reply["error"] is None
    card = page.locator(f'.s2p-inbox-scene[data-scene-id="{two}"]')  # no reload: the inbox follows
    card.wait_for()
    assert card.locator(".s2p-lead").inner_text().startswith("Several Plex items have this scene's file name.")
    page.locator(".s2p-unchecked").wait_for(state="detached")
    assert page.inner_text(".s2p-synced-scenes td") == "1" and page.inner_text(".s2p-inbox-count") == "1"
    assert page.inner_text(".s2p-dlq-inbox") == "1 more scene waits in the match inbox above."
    assert page.locator(f'.s2p-dlq-entry[data-scene-id="{two}"]').count() == 0  # a scene shows once


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_refresh_reloads_the_inbox_and_a_pins_notice_turns_into_synced(stash_ui, ui_page):
    stash_ui.add_scene(1)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    page = ui_page.page
    ui_page.goto("/stash2plex")
    page.locator(".s2p-inbox-empty", has_text="Nothing to settle").wait_for()
    two, _, second = ambiguous_scene(stash_ui, "Found later")  # dead-lettered while the page is open
    dead_letter(stash_ui, two, "AmbiguousMatch", "two Plex items fit", "Found later")
    page.locator(".s2p-refresh").first.click()
    card = page.locator(f'.s2p-inbox-scene[data-scene-id="{two}"]')
    card.wait_for()
    card.locator(f'.s2p-candidate[data-rating-key="{second}"] .s2p-this-one').click()
    page.locator(".s2p-message", has_text=f"Found later is synced to Plex item #{second}.").wait_for()
    assert stash_ui.plex.item(second)["fields"]["title"] == "Found later"


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_no_path_map_rule_is_offered_from_one_scene_two_plex_items_fit(stash_ui, ui_page):
    two, _, _ = ambiguous_scene(stash_ui)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    assert dead(stash_ui) == {two: "AmbiguousMatch"}
    page = ui_page.page
    with page.expect_response(lambda r: "ui_path_help" in (r.request.post_data or "")):
        ui_page.goto("/stash2plex")
    page.locator(f'.s2p-inbox-scene[data-scene-id="{two}"]').wait_for()
    rendered(page)
    assert page.locator(".s2p-path-help").count() == 0  # one click on a rule would settle the user's choice
    assert "pin <scene> <item>" in page.inner_text(f'.s2p-inbox-scene[data-scene-id="{two}"] .s2p-reason')


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_a_pin_onto_the_item_another_scene_holds_is_refused_on_the_page(stash_ui, ui_page):
    stash, plex = stash_ui.stash, stash_ui.plex
    owner = stash.add_scene(title="The owner", files=[{"path": "/stash/media/clip.mp4", "size": SIZE}])
    owned = plex.add_item(1, "/plex/media/clip.mp4", size=SIZE, duration_ms=None)  # its exact path
    other = stash.add_scene(title="Copy", files=[{"path": "/stash/media/b/clip.mp4", "size": SIZE}])
    plex.add_item(1, "/plex/media/x/clip.mp4", size=SIZE, duration_ms=None)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    assert dead(stash_ui) == {other: "AmbiguousMatch"}
    page = ui_page.page
    ui_page.goto("/stash2plex")
    candidate = page.locator(f'.s2p-inbox-scene[data-scene-id="{other}"] .s2p-candidate[data-rating-key="{owned}"]')
    candidate.wait_for()
    assert candidate.locator(".s2p-held-by").inner_text() == f"Scene #{owner}'s item"
    ui_page.expected.append(f"Plex item {owned} is scene {owner}")  # the refusal, as Stash relays it
    candidate.locator(".s2p-this-one").click()
    refused = page.locator(".s2p-message", has_text="This one failed")
    refused.wait_for()
    text = refused.inner_text()
    assert f"Plex item {owned} is scene {owner} ('The owner')'s" in text and "choose 'Skip this scene'" in text
    assert pins(stash_ui) == {} and plex.item(owned)["fields"]["title"] == "The owner"


@pytest.mark.parametrize("stash_ui", EDGE_RELEASES, indirect=True)
def test_the_page_says_whether_a_watch_runs(stash_ui, ui_page, tmp_path):
    stash_ui.configure(import_plays=True)
    page = ui_page.page
    ui_page.goto("/stash2plex")
    page.locator('.s2p-watch[data-running="no"]').wait_for()
    problem = page.inner_text(".s2p-watch-problem")
    assert problem.startswith("import_plays is on, but no watch is running: plays, resume points and ratings")
    watch = start_watch(stash_ui, tmp_path / "watch.log")
    try:
        log = tmp_path / "watch.log"
        for _ in range(int(SLOW_MS / 250)):
            if log.exists() and "watching Plex" in log.read_text():
                break
            page.wait_for_timeout(250)
        page.locator(".s2p-refresh").first.click()
        running = page.locator('.s2p-watch[data-running="yes"]')
        running.wait_for()
        assert running.locator(".s2p-since").inner_text() != "never"
        assert page.locator(".s2p-watch-problem").count() == 0
    finally:
        watch.send_signal(signal.SIGTERM)
        watch.wait()
