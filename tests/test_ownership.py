"""An item keeps nothing of a scene that no longer owns it; every write is checked on a
read made after the decision to write; an entity change during a bulk run is not undone
by it (issue 25, parts 1-3).

Through the real plugin process and both emulators. Plex-side changes are made the way
Plex makes them: a rescan that finds files at new paths keeps the items' ratingKeys
(``move_file``), so two items can exchange files; a new scene in Stash at a deleted
scene's path is the same Plex item.
"""

from __future__ import annotations

import hashlib

from tests.emulators.stash_emulator import _DEFAULT_SVG
from tests.runner import drainer_lock_held

A_PATH, B_PATH = "/plex/media/scene-00000.mp4", "/plex/media/scene-00001.mp4"


def _server(plugin):
    from plexapi.server import PlexServer

    return PlexServer(plugin.plex.url, plugin.plex.token)


def _two_scenes(plugin, b_cover: bool = True) -> tuple[tuple[int, int], tuple[int, int]]:
    a = plugin.add_scene(0, tags=["Alpha"], performers=["Ann"], studio="A Studio", details="About A")
    b = plugin.add_scene(1, tags=["Beta", "Both"], performers=["Bob"], studio="B Studio", details="About B")
    if not b_cover:
        plugin.stash.update_scene(b[0], cover=None)  # Stash serves its default image: Plex keeps its own
    assert plugin.task("all").output["synced"] == 2
    return a, b


def _exchange(plex, ka: int, kb: int) -> None:
    """A rescan finds each item's file at the other's path (ratingKeys stay)."""
    plex.move_file(ka, "/plex/media/exchange.tmp")
    plex.move_file(kb, A_PATH)
    plex.move_file(ka, B_PATH)


def _shows(plugin, rating_key: int, sid: int) -> None:
    """The item shows scene ``sid`` and nothing of any other scene (a scene without a
    cover: Plex's own poster, not another scene's upload)."""
    scene, item = plugin.stash.scene(sid), plugin.plex.item(rating_key)
    assert item["fields"]["title"] == scene["title"]
    assert (item["fields"]["summary"] or "") == (scene["details"] or "")
    assert item["fields"]["studio"] == scene["studio"]
    assert sorted(item["tags"]["genre"]) == sorted(scene["tags"])
    assert sorted(item["tags"]["actor"]) == sorted(scene["performers"])
    assert item["tags"]["collection"] == [scene["studio"]]
    cover = plugin.stash.screenshot_bytes(sid)
    assert item["poster_hash"] == (None if cover == _DEFAULT_SVG else hashlib.sha1(cover).hexdigest())


def _released(plugin, rating_key: int) -> None:
    """The item shows nothing Stash2Plex wrote: Plex's own title (the file's name), no
    summary, studio, tags, actors or collections of ours, Plex's own poster, unlocked."""
    item = plugin.plex.item(rating_key)
    name = item["files"][0].rsplit("/", 1)[1].rsplit(".", 1)[0]
    assert item["fields"]["title"] == name, item["fields"]
    assert (item["fields"]["summary"] or "", item["fields"]["studio"] or "") == ("", ""), item["fields"]
    assert item["tags"]["genre"] == item["tags"]["actor"] == item["tags"]["collection"] == [], item["tags"]
    assert item["poster_hash"] is None
    assert not item["locks"] & {"title", "summary", "studio", "genre", "actor", "collection", "thumb"}, item["locks"]


def test_a_new_scene_at_a_deleted_scenes_path_gets_the_item_without_anything_written_for_the_old_one(plugin):
    stash, plex = plugin.stash, plugin.plex
    (old, rk), _ = _two_scenes(plugin)
    _server(plugin).fetchItem(rk).addGenre("Mine")  # the user's own tag in Plex: it stays
    with drainer_lock_held(plugin.data_dir):  # both jobs in one batch: the deletion's is settled first
        assert plugin.hook(stash.delete_scene(old)).error is None
        sa = stash.add_scene(
            title="New at the old path",
            files=[{"path": "/stash/media/scene-00000.mp4", "size": 1000, "duration": 60.0}],
            tags=["Gamma"],
            performers=["Gil"],
        )
        assert plugin.hook({"id": sa, "type": "Scene.Create.Post", "input": None}).error is None
    assert plugin.task("process_queue").error is None

    item = plex.item(rk)
    assert item["fields"]["title"] == "New at the old path"
    assert (item["fields"]["summary"], item["fields"]["studio"]) in {("", ""), (None, None), ("", None), (None, "")}
    assert sorted(item["tags"]["genre"]) == ["Gamma", "Mine"]
    assert item["tags"]["actor"] == ["Gil"] and item["tags"]["collection"] == []
    assert item["poster_hash"] == hashlib.sha1(stash.screenshot_bytes(sa)).hexdigest()

    plex.clear_requests()
    checked = plugin.task("reconcile").output
    assert (checked["in_line"], checked["repaired"]) == (2, 0), checked
    assert plugin.task("all").output["queued"] == 0 and plex.edit_requests() == []


def test_items_exchanging_files_keep_nothing_of_the_other_scene_after_reconcile(plugin):
    (sa, ka), (sb, kb) = _two_scenes(plugin)
    _exchange(plugin.plex, ka, kb)
    out = plugin.task("reconcile").output
    assert out["repaired"] == 2, out
    _shows(plugin, kb, sa)
    _shows(plugin, ka, sb)
    plugin.plex.clear_requests()
    again = plugin.task("reconcile").output
    assert again["in_line"] == 2 and plugin.plex.edit_requests() == []
    assert plugin.task("all").output["queued"] == 0
    # Back again, and B deleted in Stash without a hook (the plugin was not installed, or
    # Stash's clean task): reconcile gives A its item and takes A's data off B's.
    _exchange(plugin.plex, kb, ka)
    plugin.stash.delete_scene(sb)
    out = plugin.task("reconcile").output
    _shows(plugin, ka, sa)
    _released(plugin, kb)
    assert (out["repaired"], out["released"]) == (1, 1), out
    plugin.plex.clear_requests()
    assert plugin.task("reconcile").output["released"] == 0 and plugin.plex.edit_requests() == []


def test_items_exchanging_files_keep_nothing_of_the_other_scene_after_edits(plugin):
    """Also: B has no cover, so the item that takes B's file gets Plex's own poster back
    (not A's); and once B is deleted in Stash, the item holding B's file keeps nothing
    of A either (it was written for A when it held A's file)."""
    stash = plugin.stash
    (sa, ka), (sb, kb) = _two_scenes(plugin, b_cover=False)
    _exchange(plugin.plex, ka, kb)
    for sid in (sa, sb):
        assert plugin.hook(stash.update_scene(sid, title=f"Edited {sid}")).error is None
    plugin.wait_drained()
    _shows(plugin, kb, sa)
    _shows(plugin, ka, sb)
    _exchange(plugin.plex, kb, ka)  # and back: each item returns to a scene whose record still links it
    for sid in (sa, sb):
        assert plugin.hook(stash.update_scene(sid, details=f"Story {sid}")).error is None
    plugin.wait_drained()
    _shows(plugin, ka, sa)
    _shows(plugin, kb, sb)
    _exchange(plugin.plex, ka, kb)  # once more, and B is deleted in Stash (its file stays)
    assert plugin.hook(stash.delete_scene(sb)).error is None
    assert plugin.hook(stash.update_scene(sa, title="After B left")).error is None
    plugin.wait_drained()
    _shows(plugin, kb, sa)
    _released(plugin, ka)


def test_reconcile_checks_the_file_on_a_read_made_after_it_decided_to_write(plugin):
    """Files exchanged between reconcile's detail read and its repairs: each scene's
    data still goes only to the item holding its file."""
    sa, ka = plugin.add_scene(0, tags=["Alpha"], performers=["Ann"], studio="A Studio", details="About A")
    sb, kb = plugin.add_scene(1, tags=["Beta"], performers=["Bob"], studio="B Studio", details="About B")
    plex, done = plugin.plex, []

    def exchange_after_the_check(record):
        if record["method"] == "GET" and record["path"].startswith("/library/metadata/") and "," in record["path"]:
            if not done:
                done.append(True)
                _exchange(plex, ka, kb)

    plex.on_request = exchange_after_the_check
    try:
        out = plugin.task("reconcile").output  # a new ledger: both scenes drift, both are written
    finally:
        plex.on_request = None
    assert done and out["repaired"] == 2, out
    _shows(plugin, kb, sa)
    _shows(plugin, ka, sb)


def test_a_performer_destroyed_while_all_runs_is_not_written_back_from_the_page_read_before(plugin):
    stash = plugin.stash
    scenes = {plugin.add_scene(n, performers=["Gone", "Stays"])[0]: None for n in range(3)}
    assert plugin.task("all").output["synced"] == 3
    for sid in scenes:
        stash.update_scene(sid, title=f"Retitled {sid}")  # no hook: all finds the change
    done = []

    def destroy_after_the_first_page(record):
        if record["operation"] == "S2PScenesAfter" and not done:
            done.append(True)
            assert plugin.hook(stash.destroy_entity("performer", stash.entity_id("performer", "Gone"))).error is None

    stash.on_graphql = destroy_after_the_first_page
    try:
        run = plugin.task("all")
    finally:
        stash.on_graphql = None
    assert done and run.error is None, run.stderr[-2000:]
    plugin.wait_drained()
    for item in plugin.plex.items():
        assert item["fields"]["title"].startswith("Retitled") and item["tags"]["actor"] == ["Stays"], item


def test_reconcile_names_an_item_written_for_another_scene_since_and_gives_it_back(plugin):
    (sa, ka), (sb, kb) = _two_scenes(plugin)
    _exchange(plugin.plex, ka, kb)
    assert plugin.hook(plugin.stash.update_scene(sa, title="Only A was edited")).error is None
    plugin.wait_drained()  # A's data went to kb (it holds A's file); B's record still links kb
    _shows(plugin, kb, sa)
    _exchange(plugin.plex, kb, ka)  # and back: B's file is in kb again, written for A meanwhile
    out = plugin.task("reconcile").output
    assert out["drift"]["owner_changed"]["first"] == [sb] and out["repaired"] == 2, out
    _shows(plugin, ka, sa)
    _shows(plugin, kb, sb)
    assert plugin.task("all").output["queued"] == 0
    # Exchanged once more, and A deleted in Stash unheard: ``all`` gives B its item and
    # finds A gone, so the item now holding A's file keeps nothing of B.
    _exchange(plugin.plex, ka, kb)
    plugin.stash.delete_scene(sa)
    run = plugin.task("all")
    # kb (A's file, B's data) is released; ka (B's file, A's data) too when the deletion's
    # job runs before B's sync, which then writes B there.
    assert (run.output["synced"], run.output["gone"], run.output["released"] in (1, 2)) == (1, 1, True), run.output
    _shows(plugin, ka, sb)
    _released(plugin, kb)


def test_an_item_another_scene_took_over_is_stale_for_the_panel_inspect_preview_and_all(plugin):
    """One verdict (worker/verdict.py): B's ledger record still links kb with B's state hash,
    but A's data was written there since. The scene panel once said "in sync"."""
    from tests.test_cli import cli
    from tests.test_ui_modes import operation

    (sa, ka), (sb, kb) = _two_scenes(plugin)
    assert operation(plugin, mode="ui_scene", scene_id=str(sb)).output["state"] == "in_sync"
    _exchange(plugin.plex, ka, kb)
    assert plugin.hook(plugin.stash.update_scene(sa, title="Only A was edited")).error is None
    plugin.wait_drained()  # A's data went to kb (it holds A's file); B's record still links kb
    taken = f"Plex item {kb} was written for scene {sa} since (it changed owner)"
    panel = operation(plugin, mode="ui_scene", scene_id=str(sb)).output
    assert (panel["state"], panel["reason"]) == ("changed", taken), panel
    inspected = cli(plugin, "inspect", str(sb), "--json").json()
    assert inspected["verdict"] == {"kind": "stale", "why": taken}
    assert f"verdict: stale: {taken}" in cli(plugin, "inspect", str(sb)).stdout
    plan = cli(plugin, "all", "--dry-run", "--json").json()
    assert [e["scene_id"] for e in plan["scenes"]] == [sb], plan  # A is unchanged: only B is planned
    assert plugin.task("all").output["queued"] == 1
    plugin.wait_drained()
    _shows(plugin, ka, sb)
    assert operation(plugin, mode="ui_scene", scene_id=str(sb)).output["state"] == "in_sync"


def test_a_dry_run_says_plexs_own_poster_comes_back_where_the_write_restores_it(plugin):
    """B has no cover and its file moves to the item showing A's upload: the preview plans
    Plex's own poster back on that item (it said "none"), and the real run does it."""
    from tests.test_cli import cli

    (sa, ka), (sb, kb) = _two_scenes(plugin, b_cover=False)
    _exchange(plugin.plex, ka, kb)
    plan = cli(plugin, "all", "--dry-run", "--json").json()
    by_scene = {e["scene_id"]: e for e in plan["scenes"]}
    assert (by_scene[sb]["rating_key"], by_scene[sb]["poster"]) == (ka, "restore"), by_scene
    assert (by_scene[sa]["rating_key"], by_scene[sa]["poster"]) == (kb, "upload"), by_scene
    assert "poster: Plex's own back" in cli(plugin, "all", "--dry-run").stdout
    assert plugin.plex.item(ka)["poster_hash"] is not None  # nothing was written
    assert plugin.task("all").error is None
    _shows(plugin, ka, sb)
    _shows(plugin, kb, sa)


def test_a_dry_run_leaves_a_poster_chosen_in_plex_where_the_write_leaves_it(plugin):
    """As above, but the user has since chosen another poster on A's item in Plex (plexapi
    mixins/resources.py ``setPoster`` → media.py ``BaseResource.select``: ``PUT
    /library/metadata/{id}/poster?url=<ratingKey>``, which PMS selects and locks): the write
    leaves that choice alone (no poster chosen, the lock kept), and the preview says so."""
    from tests.test_cli import cli

    (sa, ka), (sb, kb) = _two_scenes(plugin, b_cover=False)
    item = _server(plugin).fetchItem(ka)
    item.setPoster(next(p for p in item.posters() if p.ratingKey.startswith("media://")))
    _exchange(plugin.plex, ka, kb)
    plan = cli(plugin, "all", "--dry-run", "--json").json()
    by_scene = {e["scene_id"]: e for e in plan["scenes"]}
    assert (by_scene[sb]["rating_key"], by_scene[sb]["poster"]) == (ka, "none"), by_scene
    assert "poster: Plex's own back" not in cli(plugin, "all", "--dry-run").stdout
    plugin.plex.clear_requests()
    assert plugin.task("all").error is None
    assert plugin.plex.requests_matching("PUT", f"/library/metadata/{ka}/poster") == []
    assert "thumb" in plugin.plex.item(ka)["locks"]  # the user's choice, not unlocked as a restore does
    _shows(plugin, ka, sb)
    _shows(plugin, kb, sa)
