"""The sync path end to end: hook → queue → drainer → Plex, through the runner."""

from __future__ import annotations


def test_hook_edit_reaches_plex_with_every_field_locked(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.plex.clear_requests()
    context = plugin.stash.update_scene(
        sid, title="New Title", details="Line one\nLine two", date="2024-02-29", studio="Studio A",
        performers=["Alice", "Bob"], tags=["Tag1", "Tag2"],
    )
    run = plugin.hook(context)
    assert run.error is None, run.stderr
    assert run.output == f"scene {sid} queued"
    assert run.wall < 2.0
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert item["fields"]["title"] == "New Title"
    assert item["fields"]["summary"] == "Line one\nLine two"
    assert item["fields"]["studio"] == "Studio A"
    assert item["fields"]["originallyAvailableAt"] == "2024-02-29"
    assert sorted(item["tags"]["genre"]) == ["Tag1", "Tag2"]
    assert sorted(item["tags"]["actor"]) == ["Alice", "Bob"]
    assert item["tags"]["collection"] == ["Studio A"]
    assert {"title", "summary", "studio", "originallyAvailableAt", "genre", "actor", "collection"} <= set(item["locks"])
    assert item["uploads"] == 1
    assert len(plugin.plex.edit_requests()) == 1, plugin.drainer_log()


def test_removals_in_stash_disappear_from_plex(plugin):
    sid, rk = plugin.add_scene(2)
    plugin.hook(plugin.stash.update_scene(sid, studio="S1", performers=["A", "B"], tags=["T1", "T2"]))
    plugin.wait_drained()
    plugin.plex.clear_requests()
    plugin.hook(plugin.stash.update_scene(sid, studio=None, performers=["A"], tags=["T2"]))
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert item["tags"]["genre"] == ["T2"]
    assert item["tags"]["actor"] == ["A"]
    assert item["tags"]["collection"] == []
    assert not item["fields"]["studio"]


def test_all_syncs_300_scenes_then_resync_makes_no_writes(plugin):
    for n in range(300):
        plugin.add_scene(n, tags=[f"T{n % 7}"], studio=f"Studio {n % 5}")
    plugin.plex.clear_requests()
    plugin.stash.requests.clear()
    run = plugin.task("all")
    assert run.error is None, run.stderr[-3000:]
    assert run.output["synced"] == 300
    assert len(plugin.plex.edit_requests()) == 300
    pages = plugin.stash.graphql_requests("S2PScenesPage")
    by_id = plugin.stash.graphql_requests("S2PScenesById")
    assert len(pages) == 1 and not by_id
    assert run.progress and run.progress[-1] == 1.0
    for item in plugin.plex.items():
        assert item["fields"]["title"].startswith("Scene ")
    plugin.plex.clear_requests()
    again = plugin.task("all")
    assert again.output["unchanged"] == 0 and again.output["queued"] == 0
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []
