"""The Stash2Plex page and scene panel inside Stash's real web UI (see conftest.py)."""

from __future__ import annotations

import requests

from sync_queue.health import HealthFile
from sync_queue.job import BULK, Job
from sync_queue.queue import JobQueue
from tests.runner import drainer_lock_held
from tests.test_ui_modes import closed_port, dead_letter, three_scene_states
from validation.fields import LABELS
from worker.photos import LOGIN_FIX, LOGIN_NEEDED

# A light theme as Stash users install it: custom CSS (Settings → Interface → Custom CSS),
# which Stash serves at /css.
LIGHT_THEME = """
body, .main, .navbar, .bg-dark { background-color: #f4f5f7 !important; color: #1d2125 !important; }
.navbar .nav-link, .navbar .btn, .navbar a { color: #1d2125 !important; }
.card, .tab-content, .nav-tabs { background-color: #ffffff !important; color: #1d2125 !important; }
.table, .table th, .table td { color: #1d2125 !important; }
a { color: #0b5cad; }
"""
CONTRAST_JS = """(selector) => {
  const el = document.querySelector(selector);
  const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = null;
  for (let n = el; n && !bg; n = n.parentElement) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) bg = c;
  }
  bg = bg || [255, 255, 255];
  const fg = parse(getComputedStyle(el).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


def texts(locator) -> list[str]:
    return [t.strip() for t in locator.all_inner_texts()]


def open_page_from_navbar(ui_page) -> None:
    ui_page.goto("/scenes")
    ui_page.page.locator(".s2p-nav-link:visible").first.click()
    ui_page.page.wait_for_url("**/stash2plex")


def test_page_shows_the_queue_the_dead_letters_and_plex_down(stash_ui, ui_page):
    stash_ui.configure(plex_url=f"http://127.0.0.1:{closed_port()}")
    dead_letter(stash_ui, 7, "PlexBadRequest", "Plex answered 400 to the edit of /plex/media/alpha.mp4", "Alpha")
    dead_letter(stash_ui, 8, "PlexBadRequest", "Plex answered 400 to the edit of /plex/media/beta.mp4", "Beta")
    dead_letter(stash_ui, 9, "InvalidMetadata", "the date 2024-13-01 is not a date", "Gamma")
    dead_letter(stash_ui, 10, "AmbiguousMatch", "two Plex items fit /plex/media/delta.mp4", "Delta")
    HealthFile(stash_ui.data_dir).update(performer_photos={"reason": LOGIN_NEEDED, "fix": LOGIN_FIX})
    page = ui_page.page
    with drainer_lock_held(stash_ui.data_dir):
        queue = JobQueue(stash_ui.data_dir / "queue")
        queue.put_many([Job(scene_id=1), Job(scene_id=2, priority=BULK), Job(scene_id=3, priority=BULK)])
        queue.close()
        open_page_from_navbar(ui_page)
        page.locator(".s2p-cards").wait_for()
        assert page.inner_text(".s2p-plex .s2p-state") == "not reachable"
        messages = " ".join(texts(page.locator(".s2p-message")))
        assert "Plex is not reachable" in messages
        assert "Performer photos are not written: Stash asks for a login" in messages
        assert "Set performer_photo_base_url (Performer photo address)" in messages
        assert page.inner_text(".s2p-interactive td") == "1"
        assert page.inner_text(".s2p-bulk td") == "2"
        assert page.inner_text(".s2p-drainer td") == "running"
    assert page.inner_text(".s2p-dlq-count") == "3"  # the ambiguous scene shows once: in the inbox
    assert page.inner_text(".s2p-dlq-inbox") == "1 more scene waits in the match inbox above."
    groups = page.locator(".s2p-dlq-group")
    assert [groups.nth(i).get_attribute("data-reason") for i in range(groups.count())] == [
        "PlexBadRequest",
        "InvalidMetadata",
    ]
    first = groups.nth(0)
    assert first.locator(".card-header strong").inner_text() == "Plex refused the edit"  # not a class name
    assert sorted(texts(first.locator(".s2p-dlq-entry td:first-child"))) == ["Alpha", "Beta"]
    assert "Plex server log" in first.locator(".s2p-advice").inner_text()
    assert texts(groups.nth(1).locator(".s2p-reason")) == ["the date 2024-13-01 is not a date"]
    assert page.locator('.s2p-dlq-entry[data-scene-id="10"]').count() == 0


def test_retry_on_a_dead_letter_entry_runs_the_plugin_and_the_entry_leaves_once_synced(stash_ui, ui_page):
    sid, rk = stash_ui.add_scene(1)
    stash_ui.stash.update_scene(sid, title="Back from the dead-letter queue")
    dead_letter(stash_ui, sid, "PlexBadRequest", "Plex answered 400 at the time", "Scene 1")
    dead_letter(stash_ui, 42, "InvalidMetadata", "a value Plex cannot take", "Other")
    page = ui_page.page
    ui_page.goto("/stash2plex")
    entry = page.locator(f'.s2p-dlq-entry[data-scene-id="{sid}"]')
    entry.locator(".s2p-retry").click()
    assert stash_ui.ui.wait_for_run("ui_retry").reply["error"] is None
    stash_ui.wait_drained()
    assert stash_ui.plex.item(rk)["fields"]["title"] == "Back from the dead-letter queue"
    entry.wait_for(state="detached")
    page.locator('.s2p-dlq-entry[data-scene-id="42"]').wait_for()
    assert page.inner_text(".s2p-dlq-count") == "1"
    assert [r.args for r in stash_ui.ui.runs if r.args.get("mode") == "ui_retry"] == [
        {"mode": "ui_retry", "scene_id": str(sid)}
    ]


def test_scene_panel_shows_synced_waiting_and_dead_lettered_and_sync_now_syncs(stash_ui, ui_page):
    (synced, synced_rk), (waiting, _), (dead, dead_rk) = three_scene_states(stash_ui)
    page = ui_page.page

    def panel(scene_id: int, state: str):
        if page.url == "about:blank":
            ui_page.goto(f"/scenes/{scene_id}")
        else:
            ui_page.navigate(f"/scenes/{scene_id}")
            page.locator(".scene-header", has_text=f"Scene {scene_id}").wait_for()
        page.locator(".s2p-tab").click()
        found = page.locator(f'.s2p-scene-panel[data-state="{state}"]')
        found.wait_for()
        return found

    with drainer_lock_held(stash_ui.data_dir):
        queue = JobQueue(stash_ui.data_dir / "queue")
        queue.put(Job(scene_id=waiting))
        queue.close()
        assert panel(waiting, "waiting").locator(".s2p-state").inner_text() == "Waiting"
    shown = panel(synced, "in_sync")
    assert shown.locator(".s2p-state").inner_text() == "In sync"
    assert shown.locator(".s2p-item td").inner_text() == f"#{synced_rk}"
    assert shown.locator(".s2p-library td").inner_text() == "Stash"
    assert shown.locator(".s2p-path td").inner_text() == "/plex/media/scene-00001.mp4"
    shown = panel(dead, "dead_lettered")
    assert shown.locator(".s2p-state").inner_text() == "Dead-lettered"
    assert "no Plex item at /plex/media/scene-00003.mp4" in shown.locator(".s2p-reason").inner_text()
    stash_ui.stash.update_scene(dead, title="Synced from the panel")
    shown.locator(".s2p-sync-now").click()
    assert stash_ui.ui.wait_for_run("ui_sync_scene").reply["error"] is None
    page.locator('.s2p-scene-panel[data-state="in_sync"]').wait_for()
    assert stash_ui.plex.item(dead_rk)["fields"]["title"] == "Synced from the panel"


def test_light_theme_and_phone_width_read_well(stash_ui, ui_page):
    stash_ui.ui.custom_css = LIGHT_THEME
    dead_letter(stash_ui, 5, "PlexBadRequest", "Plex answered 400 to /plex/media/a-rather-long-file-name.mp4", "Long")
    page = ui_page.page
    page.set_viewport_size({"width": 390, "height": 844})
    ui_page.goto("/stash2plex")
    page.locator(".s2p-dlq-entry").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    for button in page.locator(".s2p-page button:visible").all():  # nothing clipped or off-screen
        box = button.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, button.inner_text()
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(244, 245, 247)"  # the light theme is in force
    for selector in (".s2p-header h2", ".s2p-queue .s2p-kv th", ".s2p-advice", ".s2p-reason"):
        assert page.evaluate(CONTRAST_JS, selector) >= 4.5, selector


def test_disabled_plugin_and_unconfigured_plex_give_clear_messages(stash_ui, ui_page):
    stash_ui.configure(plex_token=None)
    page = ui_page.page
    ui_page.goto("/stash2plex")
    message = page.locator(".s2p-message", has_text="No Plex token set")
    message.wait_for()
    assert page.inner_text(".s2p-plex .s2p-token") == "not set"
    # Settings → Plugins while the page is open: a status poll already on its way gets Stash's
    # refusal (pkg/plugin/plugins.go Cache.RunPlugin), which the page then says in words
    ui_page.expected.append("plugin Stash2Plex is disabled")
    stash_ui.ui.plugins["Stash2Plex"].enabled = False
    page.locator(".navbar a[href='/scenes']").first.click()
    page.locator(".s2p-nav-link:visible").first.click()
    page.locator(".s2p-message", has_text="Stash2Plex is disabled").wait_for()


def test_preview_table_equals_what_the_sync_then_writes(stash_ui, ui_page):
    first, rk1 = stash_ui.add_scene(1, studio="Studio A", tags=["Tag1", "Tag2"])
    second, rk2 = stash_ui.add_scene(2, performers=["Alice"], date="2024-02-29")
    stash_ui.configure(content_rating="XXX", sort_title_template="{title}")  # every field has a change
    before = {rk: stash_ui.plex.item(rk) for rk in (rk1, rk2)}
    page = ui_page.page
    ui_page.goto("/stash2plex")
    page.locator(".s2p-preview-button").click()
    rows = page.locator(".s2p-plan-row")
    rows.first.wait_for()
    assert stash_ui.plex.edit_requests() == []  # nothing written before the user confirms
    shown = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        key = (int(row.get_attribute("data-scene-id")), row.get_attribute("data-field"))
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        shown[key] = cells[2:]
        assert cells[1] == LABELS[key[1]]  # named from the table of synced fields, never a raw key
    page.locator(".s2p-confirm").click()
    stash_ui.ui.wait_for_run("all")  # the click's mutation may reach Stash after this line starts
    stash_ui.wait_drained()
    written = {}
    for sid, rk in ((first, rk1), (second, rk2)):
        after = stash_ui.plex.item(rk)
        for name, value in after["fields"].items():
            old = before[rk]["fields"].get(name)
            if name == "titleSort":  # without one, Plex sorts by (and plexapi reads) the title
                old = old or before[rk]["fields"]["title"]
            if value != old:
                written[(sid, name)] = [old or "(empty)", value or "(empty)"]
        for tag_type, names in after["tags"].items():
            old = before[rk]["tags"].get(tag_type, [])
            added = [n for n in names if n not in old]
            removed = [n for n in old if n not in names]
            if added or removed:
                written[(sid, tag_type)] = [", ".join("−" + n for n in removed), ", ".join("+" + n for n in added)]
        if any(r["path"] == f"/library/metadata/{rk}/posters" for r in stash_ui.plex.upload_requests()):
            written[(sid, "poster")] = ["Plex's poster", "Stash's cover"]
    assert shown == written
    assert {key[1] for key in shown} >= {
        "title",
        "titleSort",
        "contentRating",
        "studio",
        "genre",
        "actor",
        "originallyAvailableAt",
        "year",
    }


def test_verify_runs_reconcile_as_a_stash_job_and_repairs_plex(stash_ui, ui_page):
    sid, rk = stash_ui.add_scene(1)
    assert stash_ui.task("all").error is None
    stash_ui.wait_drained()
    params = {"title.value": "Edited in Plex", "X-Plex-Token": stash_ui.plex.token}
    assert requests.put(f"{stash_ui.plex.url}/library/metadata/{rk}", params=params, timeout=10).ok
    page = ui_page.page
    ui_page.goto("/stash2plex")
    page.locator(".s2p-verify").click()
    page.locator(".s2p-message", has_text="Verify").wait_for()
    stash_ui.ui.wait_runs_finished()
    [run] = [r for r in stash_ui.ui.runs if r.args.get("mode") == "reconcile"]
    assert run.task is None and run.reply["error"] is None  # started by its mode, not by a menu entry's name
    assert stash_ui.stash.jobs[-1]["description"] == "Running plugin task: Stash2Plex: Verify"
    stash_ui.wait_drained()
    assert stash_ui.plex.item(rk)["fields"]["title"] == "Scene 1"
