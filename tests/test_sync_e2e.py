"""The sync path end to end: hook → queue → drainer → Plex, through the runner."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import EDGE_RELEASES
from tests.runner import drainer_lock_held


@pytest.mark.fresh
@pytest.mark.parametrize("stash", EDGE_RELEASES, indirect=True)  # the oldest and newest Stash we support
def test_hook_edit_reaches_plex_with_every_field_locked(plugin):
    plugin.configure(collections="studio, groups")
    sid, rk = plugin.add_scene(1, groups=["Series G"])
    plugin.plex.clear_requests()
    context = plugin.stash.update_scene(
        sid,
        title="New Title",
        details="Line one\nLine two",
        date="2024-02-29",
        studio="Studio A",
        performers=["Alice", "Bob"],
        tags=["Tag1", "Tag2"],
    )
    run = plugin.hook(context)
    assert run.error is None, run.stderr
    assert run.output == f"scene {sid} queued"
    plugin.wait_drained()
    # The drainer wrote it, not the hook (which imports no HTTP client: test_hook_imports.py;
    # the drainer may reach Plex before the hook's process has exited, so no timing here).
    assert f"scene {sid} → Plex item {rk}" in plugin.drainer_log()
    item = plugin.plex.item(rk)
    assert item["fields"]["title"] == "New Title"
    assert item["fields"]["summary"] == "Line one\nLine two"
    assert item["fields"]["studio"] == "Studio A"
    assert item["fields"]["originallyAvailableAt"] == "2024-02-29"
    assert sorted(item["tags"]["genre"]) == ["Tag1", "Tag2"]
    assert sorted(item["tags"]["actor"]) == ["Alice", "Bob"]
    assert sorted(item["tags"]["collection"]) == ["Series G", "Studio A"]
    assert {"title", "summary", "studio", "originallyAvailableAt", "genre", "actor", "collection"} <= set(item["locks"])
    assert item["uploads"] == 1
    assert len(plugin.plex.edit_requests()) == 1, plugin.drainer_log()


@pytest.mark.parametrize("semantics", ["replace", "append"])
def test_removals_in_stash_disappear_from_plex(plugin, semantics):
    plugin.plex.tag_semantics = semantics
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


# New interpreters for one release (the imports they check do not depend on it), forked runs for the other.
@pytest.mark.parametrize(
    "stash", [EDGE_RELEASES[0], pytest.param(EDGE_RELEASES[1], marks=pytest.mark.fresh)], indirect=True
)
def test_all_syncs_120_scenes_then_resync_makes_no_writes(plugin):
    for n in range(120):  # noqa: B007
        plugin.add_scene(n, tags=[f"T{n % 7}"], studio=f"Studio {n % 5}")
    plugin.plex.clear_requests()
    plugin.stash.requests.clear()
    run = plugin.task("all")
    assert run.error is None, run.stderr[-3000:]
    assert run.output["synced"] == 120, [m for m in run.messages() if "scene" in m and "→" not in m][:20]
    assert len(plugin.plex.edit_requests()) == 120
    pages = plugin.stash.graphql_requests("S2PScenesAfter")
    by_id = plugin.stash.graphql_requests("S2PScenesById")
    # One small first page (writing starts sooner), then pages of 500: none per scene.
    assert [r["variables"]["filter"]["per_page"] for r in pages] == [100, 500] and not by_id
    assert run.progress and run.progress[-1] == 1.0
    for item in plugin.plex.items():
        assert item["fields"]["title"].startswith("Scene ")
    plugin.plex.clear_requests()
    again = plugin.task("all")
    assert again.output["unchanged"] == 0 and again.output["queued"] == 0
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []


@pytest.mark.parametrize("semantics", ["replace", "append"])
def test_tags_added_in_plex_by_the_user_are_kept(plugin, semantics):
    plugin.plex.tag_semantics = semantics
    sid, _ = plugin.add_scene(3, name="kept.mp4")
    rk = [i for i in plugin.plex.items() if i["files"][0].endswith("kept.mp4")][0]["ratingKey"]
    plugin.hook(plugin.stash.update_scene(sid, tags=["S1", "S2"]))
    plugin.wait_drained()
    from plexapi.server import PlexServer  # the user adds a genre in Plex themselves

    item = PlexServer(plugin.plex.url, plugin.plex.token).fetchItem(rk)
    item.reload()
    item.addGenre("UserTag")
    assert sorted(plugin.plex.item(rk)["tags"]["genre"]) == ["S1", "S2", "UserTag"]
    plugin.hook(plugin.stash.update_scene(sid, tags=["S2", "S3"]))
    plugin.wait_drained()
    assert sorted(plugin.plex.item(rk)["tags"]["genre"]) == ["S2", "S3", "UserTag"]


def test_poster_uploaded_only_when_its_bytes_change(plugin):
    sid, rk = plugin.add_scene(4)
    plugin.hook(plugin.stash.update_scene(sid, title="First"))
    plugin.wait_drained()
    assert plugin.plex.item(rk)["uploads"] == 1
    plugin.hook(plugin.stash.update_scene(sid, title="Second"))  # new screenshot URL, same bytes
    plugin.wait_drained()
    assert plugin.plex.item(rk)["uploads"] == 1
    plugin.hook(plugin.stash.update_scene(sid, cover=b"\x89PNG\r\n\x1a\n new cover bytes"))
    plugin.wait_drained()
    assert plugin.plex.item(rk)["uploads"] == 2


def test_preserve_plex_edits_fills_only_empty_fields(plugin):
    plugin.configure(preserve_plex_edits=True)
    sid = plugin.stash.add_scene(
        title="Stash Title",
        details="Stash details",
        studio="Stash Studio",
        files=[{"path": "/stash/media/p.mp4", "size": 5, "duration": 60.0}],
    )
    rk = plugin.plex.add_item(1, "/plex/media/p.mp4", title="Title Edited In Plex", size=5, duration_ms=60000)
    plugin.hook(plugin.stash.update_scene(sid, tags=["T"]))
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert item["fields"]["title"] == "Title Edited In Plex"
    assert item["fields"]["summary"] == "Stash details"
    assert item["fields"]["studio"] == "Stash Studio"
    assert item["tags"]["genre"] == ["T"]


def test_events_for_a_waiting_scene_collapse_into_one_job(plugin):
    sid, _ = plugin.add_scene(5)
    with drainer_lock_held(plugin.data_dir):  # keep the drainer away
        replies = [plugin.hook(plugin.stash.update_scene(sid, title=f"v{i}")).output for i in range(3)]
        assert replies == [f"scene {sid} queued"] * 3
        assert plugin.task("queue_status").output["pending"] == 1  # one scene waits
    run = plugin.task("process_queue")
    assert run.error is None and run.output["synced"] == 1
    assert plugin.plex.items()[0]["fields"]["title"] == "v2"


def test_a_failed_poster_upload_keeps_the_metadata_and_the_job_retries_it(plugin):
    sid, rk = plugin.add_scene(6)
    plugin.plex.fail_uploads = True
    plugin.hook(plugin.stash.update_scene(sid, title="Metadata first"))
    deadline = time.monotonic() + 30
    while "poster not updated" not in plugin.drainer_log() and time.monotonic() < deadline:
        time.sleep(0.1)
    item = plugin.plex.item(rk)
    assert item["fields"]["title"] == "Metadata first" and item["uploads"] == 0
    assert "the poster is retried" in plugin.drainer_log()
    plugin.plex.fail_uploads = False  # no further edit: the job's own retry uploads it
    plugin.wait_drained()
    assert plugin.plex.item(rk)["uploads"] == 1
    assert len(plugin.plex.edit_requests()) == 1
    assert plugin.task("queue_status").output["dlq"] == 0


def test_edits_arriving_while_the_drainer_finishes_are_never_stranded(plugin):
    """Hooks at uneven gaps: some land while a drainer is exiting (lock still held, so
    the hook starts none). Every edit must still reach Plex with nobody running a task."""
    import random

    rng = random.Random(11)
    scenes = [plugin.add_scene(100 + n) for n in range(6)]
    expected = {}
    for round_no in range(12):
        sid, rk = scenes[round_no % len(scenes)]
        title = f"Round {round_no}"
        assert plugin.hook(plugin.stash.update_scene(sid, title=title)).error is None
        expected[rk] = title
        time.sleep(rng.uniform(0.0, 0.6))
    plugin.wait_drained()
    assert {rk: plugin.plex.item(rk)["fields"]["title"] for rk in expected} == expected


def _lock_pid(plugin) -> str:
    return (plugin.data_dir / "drainer.lock").read_text().strip()


def _wait_title(plugin, rk: int, title: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while plugin.plex.item(rk)["fields"]["title"] != title:
        assert time.monotonic() < deadline, plugin.drainer_log()[-3000:]
        time.sleep(0.05)


def test_an_idle_drainer_lingers_and_writes_the_next_hooks_edit(plugin):
    """A bulk edit runs our hook once per scene, a few per second: one warm drainer writes
    them all instead of one drainer started (and its packages imported) per hook."""
    plugin.env["STASH2PLEX_DRAINER_LINGER_S"] = "20"
    first, rk1 = plugin.add_scene(1)
    second, rk2 = plugin.add_scene(2)
    assert plugin.hook(plugin.stash.update_scene(first, title="First")).output == f"scene {first} queued"
    _wait_title(plugin, rk1, "First")
    time.sleep(0.5)  # the queue is empty now; the drainer waits for more
    assert plugin.drainer_busy(), "the drainer exited at once instead of lingering"
    pid = _lock_pid(plugin)
    run = plugin.hook(plugin.stash.update_scene(second, title="Second"))
    assert run.output == f"scene {second} queued" and "drainer started" not in run.stderr
    _wait_title(plugin, rk2, "Second")
    assert _lock_pid(plugin) == pid
    assert plugin.drainer_log().count("drainer finished") == 0
    if hasattr(os, "getpriority"):  # the drainer gives way to hooks and to Stash
        assert os.getpriority(os.PRIO_PROCESS, int(pid)) > os.getpriority(os.PRIO_PROCESS, 0)
