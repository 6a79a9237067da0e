"""Never write the wrong thing: each reproduction of issue 11, end to end.

Every test runs the real plugin process (tests/runner.py) against both emulators and
fails on the code before the write-time checks (see docs/architecture.md,
"Write-time invariants").
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from tests.runner import drainer_lock_held

MB = 1_000_000


def _title(plugin, rk: int) -> str:
    return plugin.plex.item(rk)["fields"]["title"]


def _folded(names) -> list[str]:
    return sorted(n.casefold() for n in names)


# -- 1. the item written holds the scene's file ----------------------------------------
@pytest.mark.parametrize("strict", [True, False])
def test_a_same_name_file_of_another_size_is_never_written(plugin, strict):
    plugin.configure(strict_matching=strict)
    sid = plugin.stash.add_scene(
        title="Mine", files=[{"path": "/stash/media/a/clip.mp4", "size": 5 * MB, "duration": 60.0}]
    )
    other = plugin.plex.add_item(1, "/plex/media/b/clip.mp4", title="Other", size=105 * MB, duration_ms=60000)
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert run.output["failed"] == 1 and run.output["synced"] == 0
    assert _title(plugin, other) == "Other" and plugin.plex.edit_requests() == []
    [entry] = plugin.task("queue_status").output["dlq_newest"]
    assert "another video" in str(entry) and "/plex/media/b/clip.mp4" in str(entry), entry
    assert sid


def test_a_rescan_mid_run_that_moved_a_file_does_not_misdirect_the_write(plugin):
    """Plex rescans right after the plugin listed the library: the item at P moves to
    P/sub (same ratingKey) and a new item takes P. The scene now at P goes to the new item."""
    plugin.configure(plex_concurrency=1)
    new_sid = plugin.stash.add_scene(
        title="New video", files=[{"path": "/stash/media/p.mp4", "size": 2000, "duration": 60.0}]
    )
    old_sid = plugin.stash.add_scene(
        title="Old video", files=[{"path": "/stash/media/sub/p.mp4", "size": 1000, "duration": 60.0}]
    )
    old_rk = plugin.plex.add_item(1, "/plex/media/p.mp4", title="old", size=1000, duration_ms=60000)
    moved = {}

    def rescan_after_listing(record):
        if record["path"] == "/library/sections/1/all" and record["method"] == "GET" and not moved:
            plugin.plex.move_file(old_rk, "/plex/media/sub/p.mp4")
            moved["new"] = plugin.plex.add_item(1, "/plex/media/p.mp4", title="p", size=2000, duration_ms=60000)

    plugin.plex.on_request = rescan_after_listing
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None, run.stderr[-2000:]
    assert moved, "the rescan was not played"
    assert _title(plugin, moved["new"]) == "New video"
    assert _title(plugin, old_rk) in ("old", "Old video")  # never the new scene's data
    assert new_sid < old_sid


def test_a_reply_for_another_item_is_never_written(plugin):
    sid_a, rk_a = plugin.add_scene(1, title="A title")
    sid_b, rk_b = plugin.add_scene(2, title="B title")
    plugin.plex.swap_replies = {rk_a: rk_b}  # a proxy answers item B when asked for A
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert _title(plugin, rk_b) == "B title"
    assert _title(plugin, rk_a) == "scene-00001"  # untouched, not B's and not written blindly
    assert run.output["synced"] == 1 and run.output["retrying"] == 1
    assert any(f"answered item {rk_b} when asked for item {rk_a}" in m for m in run.messages())
    plugin.plex.swap_replies = {}  # the job's own retry (a background drainer) then writes A
    plugin.wait_drained()
    assert _title(plugin, rk_a) == "A title" and _title(plugin, rk_b) == "B title"


def test_a_file_plex_re_added_as_a_new_item_is_written_again(plugin):
    """Trust the servers over our memory: the ledger says the scene is in sync, but Plex
    re-added its file as a new item (new ratingKey, the scan's metadata)."""
    sid, rk = plugin.add_scene(1, tags=["T1"])
    assert plugin.task("all").output["synced"] == 1
    new = plugin.plex.readd_item(rk)
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
    item = plugin.plex.item(new)
    assert item["fields"]["title"] == "Scene 1" and item["tags"]["genre"] == ["T1"] and item["uploads"] == 1


# -- 2. plex_libraries on every path ------------------------------------------------
def test_a_link_into_a_library_no_longer_selected_is_not_used(plugin):
    old = plugin.plex.add_section("Old", ["/plex/old"], key=2)
    sid = plugin.stash.add_scene(title="v1", files=[{"path": "/stash/media/x.mp4", "size": 7, "duration": 60.0}])
    rk_old = plugin.plex.add_item(old, "/plex/old/x.mp4", title="x", size=7, duration_ms=60000)
    plugin.configure(plex_libraries="Old", path_map="/stash/media=/plex/old")
    assert plugin.task("all").output["synced"] == 1 and _title(plugin, rk_old) == "v1"
    plugin.configure(plex_libraries="Stash", path_map="/stash/media=/plex/old")
    plugin.stash.update_scene(sid, title="v2")
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert _title(plugin, rk_old) == "v1" and run.output["synced"] == 0
    assert any("plex_libraries leaves out" in m for m in run.messages())


def test_a_tv_library_in_plex_libraries_is_a_configuration_error(plugin):
    plugin.plex.add_section("TV Shows", ["/plex/tv"], key=3, type="show")
    plugin.configure(plex_libraries="Stash, TV Shows")
    plugin.add_scene(1)
    run = plugin.task("all")
    assert run.error and "'TV Shows' (a TV show library)" in run.error
    assert "only movie or video libraries" in run.error
    assert plugin.plex.edit_requests() == []


# -- 3. a user's edit is never reverted by older data --------------------------------
def test_an_edit_during_all_is_not_reverted_by_the_page_fetched_before_it(plugin):
    """The page is read and queued; while the first batch is written the user edits
    scene 220 (its hook queues an interactive job, written next). The bulk job for 220,
    in a later batch, must not write the page's older title over the edit."""
    plugin.configure(plex_concurrency=1)
    scenes = [plugin.add_scene(n) for n in range(1, 231)]
    sid, rk = scenes[219]
    edited = {}

    def user_edits_while_the_first_batch_is_written(record):
        if record["method"] == "PUT" and not edited:
            edited["context"] = plugin.stash.update_scene(sid, title="User's edit")
            edited["hook"] = plugin.hook(edited["context"])  # queued while the task holds the lock

    plugin.plex.on_request = user_edits_while_the_first_batch_is_written
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None, run.stderr[-2000:]
    assert edited and edited["hook"].error is None
    assert _title(plugin, rk) == "User's edit"
    assert _title(plugin, scenes[0][1]) == "Scene 1"


# -- 4. case-only renames never delete ------------------------------------------------
@pytest.mark.parametrize("semantics", ["replace", "append"])
def test_case_only_renames_keep_tags_actors_and_collections(plugin, semantics):
    plugin.plex.tag_semantics = semantics
    sid, rk = plugin.add_scene(1, tags=["drama", "kept"], performers=["john doe"], studio="acme films")
    assert plugin.task("all").output["synced"] == 1
    plugin.stash.update_scene(sid, tags=["Drama", "kept"], performers=["John Doe"], studio="Acme Films")
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    item = plugin.plex.item(rk)
    assert _folded(item["tags"]["genre"]) == ["drama", "kept"]
    assert _folded(item["tags"]["actor"]) == ["john doe"]
    assert _folded(item["tags"]["collection"]) == ["acme films"]
    assert item["fields"]["studio"] == "Acme Films"
    assert not any("tag.tag-" in key for r in plugin.plex.edit_requests() for key in r["query"])


# -- 5. deleted scenes are a normal event ---------------------------------------------
def test_deleted_scenes_are_acknowledged_as_gone_and_their_batch_mates_sync_first_pass(plugin):
    scenes = [plugin.add_scene(n) for n in range(1, 9)]
    with drainer_lock_held(plugin.data_dir):
        for sid, _ in scenes:
            plugin.hook(plugin.stash.update_scene(sid, title=f"Edited {sid}"))
        for sid, _ in scenes[1:8:3]:
            plugin.stash.delete_scene(sid)
    run = plugin.task("process_queue")
    assert run.error is None, run.stderr[-2000:]
    assert run.output["gone"] == 3 and run.output["synced"] == 5
    assert run.output["retrying"] == 0 and run.output["failed"] == 0
    status = plugin.task("queue_status").output
    assert status["dlq"] == 0 and status["pending"] == 0
    live = [(sid, rk) for i, (sid, rk) in enumerate(scenes) if i % 3 != 1]
    assert all(_title(plugin, rk) == f"Edited {sid}" for sid, rk in live)


# -- 6. long text never costs the scene -----------------------------------------------
def test_twenty_thousand_cjk_characters_are_shortened_and_nothing_else_is_lost(plugin):
    details = "長" * 20_000
    sid, rk = plugin.add_scene(1, title="Long one", details=details, tags=["T1"], studio="S")
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert run.output["synced"] == 1 and run.output["failed"] == 0
    item = plugin.plex.item(rk)
    assert item["fields"]["title"] == "Long one" and item["tags"]["genre"] == ["T1"]
    assert item["fields"]["studio"] == "S" and item["tags"]["collection"] == ["S"]
    summary = item["fields"]["summary"]
    assert summary.endswith("…") and details.startswith(summary[:-1]) and len(summary) > 800  # 9 bytes each in 8 KB
    assert all(r["status"] == 200 for r in plugin.plex.edit_requests())
    assert any("details shortened from 20000 to" in m for m in run.messages("info"))
    plugin.plex.clear_requests()
    assert plugin.task("all").output["queued"] == 0 and plugin.plex.edit_requests() == []


# -- 7. posters only from real images of the right scene ------------------------------
def test_a_scene_without_a_cover_keeps_plexs_own_poster(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.stash.update_scene(sid, cover=None)  # Stash now serves its default SVG
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
    assert plugin.plex.item(rk)["uploads"] == 0 and plugin.plex.upload_requests() == []


def test_the_screenshot_comes_through_our_own_connection_when_external_host_is_set(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.stash.external_host = "http://127.0.0.1:9"  # the public name: unreachable from here
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
    assert plugin.plex.item(rk)["uploads"] == 1
    assert plugin.stash.screenshot_requests == [sid]


def test_a_login_page_instead_of_the_image_is_not_uploaded_and_the_job_retries(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.stash.images_login_page = True
    run = plugin.task("all")
    assert run.error is None, run.stderr[-2000:]
    assert plugin.plex.item(rk)["uploads"] == 0 and _title(plugin, rk) == "Scene 1"
    assert run.output["retrying"] == 1 and run.output["synced"] == 0
    assert any("not a JPEG, PNG or WebP image" in m for m in run.messages())
    plugin.stash.images_login_page = False  # the job's own retry then uploads the real image
    plugin.wait_drained()
    assert plugin.plex.item(rk)["uploads"] == 1


# -- 8. all sees every scene while scenes are deleted ----------------------------------
def run_deleting_after_the_first_page(plugin, mode: str, deleted: range) -> object:
    """``mode`` run over 520 scenes without a file (no Plex work); the scenes ``ids[deleted]``
    are deleted in Stash once it has read its first page of scenes."""
    ids = [plugin.stash.add_scene(title=f"S{n}", files=[]) for n in range(1, 521)]
    done = []

    def delete_after_the_first_page(record):
        if record["operation"] in ("S2PScenesAfter", "S2PScenesPage") and not done:  # (the old name too)
            for sid in (ids[i] for i in deleted):
                plugin.stash.delete_scene(sid)
            done.append(True)

    plugin.stash.on_graphql = delete_after_the_first_page
    try:
        run = plugin.task(mode)
    finally:
        plugin.stash.on_graphql = None
    assert done and run.error is None, run.stderr[-2000:]
    return run


def test_all_checks_every_scene_while_scenes_of_the_first_page_are_deleted(plugin):
    run = run_deleting_after_the_first_page(plugin, "all", range(50, 80))  # read on the first page (of 100)
    assert run.output["checked"] == 520
    asked = [r["variables"]["scene_filter"]["id"]["value"] for r in plugin.stash.graphql_requests("S2PScenesAfter")]
    assert asked == [0, 100]  # by id: the deleted scenes make none of the rest slip


# -- 9. recent compares timestamps as Stash does ---------------------------------------
def test_recent_across_a_dst_change_and_another_time_zone_misses_nothing(plugin):
    berlin = ZoneInfo("Europe/Berlin")
    now = {"t": dt.datetime(2025, 10, 26, 2, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))).timestamp()}
    plugin.stash.tz, plugin.stash.clock = berlin, lambda: now["t"]
    plugin.env["TZ"] = "America/New_York"  # the command line runs elsewhere
    sid, rk = plugin.add_scene(1)
    assert plugin.task("all").output["synced"] == 1
    now["t"] += 30 * 60  # clocks went back: 02:00+01:00 is later, though it sorts earlier as text
    plugin.stash.update_scene(sid, title="After the change")
    assert plugin.stash.scene(sid)["updated_at"] == "2025-10-26T02:00:00+01:00"
    run = plugin.task("recent")
    assert run.error is None, run.stderr[-2000:]
    assert run.output["synced"] == 1 and _title(plugin, rk) == "After the change"
