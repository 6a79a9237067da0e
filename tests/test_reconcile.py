"""Plex is the truth: ``reconcile`` repairs drift, dry runs write nothing, and the
command line explains matching (``inspect``, ``unmatched``).

Through the real plugin process (Stash's tasks and the command line) and both
emulators. Plex-side changes are made the way a user or Plex makes them: through
real plexapi calls (unlock, remove a genre, unlock the poster, refresh) or by the
item leaving and coming back under a new ratingKey after a rescan.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest

from tests.conftest import EDGE_RELEASES
from tests.runner import run_plugin, task_document
from tests.test_cli import cli
from tests.test_write_time import run_deleting_after_the_first_page


def _server(plugin):
    from plexapi.server import PlexServer

    return PlexServer(plugin.plex.url, plugin.plex.token)


def _scenes(plugin, n: int = 4) -> dict[int, tuple[int, int]]:
    items = {
        i: plugin.add_scene(i, tags=["Drama", f"T{i}"], performers=[f"P{i}"], studio="Acme", details=f"About {i}")
        for i in range(n)
    }
    assert plugin.task("all").output["synced"] == n
    return items


def _wipe(plugin, rating_key: int) -> None:
    """What a user's unlock + metadata refresh does: unlocked title/summary revert, genres gone, poster unlocked."""
    item = _server(plugin).fetchItem(rating_key)
    item.edit(**{"title.locked": 0, "summary.locked": 0, "genre.locked": 0})
    item.removeGenre([g.tag for g in item.genres], locked=False)
    item.unlockPoster()
    item.refresh()


def _in_line(plugin, rating_key: int, n: int) -> None:
    item = plugin.plex.item(rating_key)
    assert item["fields"]["title"] == f"Scene {n}" and item["fields"]["summary"] == f"About {n}"
    assert sorted(item["tags"]["genre"]) == sorted(["Drama", f"T{n}"])
    assert {"title", "summary", "genre", "thumb"} <= item["locks"]


def _edited_keys(plugin) -> set[int]:
    keys = set()
    for request in plugin.plex.edit_requests() + plugin.plex.upload_requests():
        path = request["path"]
        keys.add(int(request["query"]["id"][0]) if "sections" in path else int(path.split("/")[3]))
    return keys


@pytest.mark.parametrize("stash", EDGE_RELEASES, indirect=True)  # the oldest and newest Stash we support
def test_reconcile_repairs_a_wiped_item_a_re_added_item_a_performer_merge_and_a_lost_ledger(plugin):
    items = _scenes(plugin)
    (sa, ra), (sb, rb), (sc, rc), (sd, rd) = (items[i] for i in range(4))
    _wipe(plugin, ra)
    plugin.plex.remove_item(rb)  # a rescan lost it and found it again under a new ratingKey
    rb2 = plugin.plex.add_item(1, "/plex/media/scene-00001.mp4", size=1001, duration_ms=60000)
    stash = plugin.stash  # merged in Stash: no hook fires for performerMerge
    stash.merge_performers([stash.entity_id("performer", "P2")], stash.entity_id("performer", "P3"))
    plugin.plex.clear_requests()

    preview = cli(plugin, "reconcile", "--dry-run", "--json")
    assert preview.returncode == 0, preview.stderr[-2000:]
    assert _edited_keys(plugin) == set() and preview.json()["repaired"] == 0
    assert sorted(e["rating_key"] for e in preview.json()["scenes"]) == sorted([ra, rb2, rc])

    run = plugin.task("reconcile")
    assert run.error is None, run.stderr[-3000:]
    out = run.output
    drift = {kind: v["first"] for kind, v in out["drift"].items()}
    for kind in ("title", "summary", "genre", "poster"):  # the re-added item starts from the scan's values
        assert sorted(drift[kind]) == sorted([sa, sb]), kind
    assert drift["item_gone"] == [sb] and drift["studio"] == [sb]
    assert drift["actor"] == [sb, sc]
    assert (out["checked"], out["repaired"], out["in_line"], out["unmatched"]) == (4, 3, 1, 0)
    assert out["plex_detail_reads"] == 4  # one read for 4 items, and each item written read again before its write
    for n, key in ((0, ra), (1, rb2)):
        _in_line(plugin, key, n)
    assert plugin.plex.item(rc)["tags"]["actor"] == ["P3"]
    assert _edited_keys(plugin) == {ra, rb2, rc}  # the item in line got no write
    assert any("reconcile: 4 scenes checked" in m for m in run.messages("info"))

    plugin.plex.clear_requests()
    again = plugin.task("all")  # the ledger is right again: nothing to do
    assert again.output["queued"] == 0 and _edited_keys(plugin) == set()

    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (plugin.data_dir / name).unlink(missing_ok=True)
    lost = plugin.task("reconcile").output
    assert lost["drift"]["ledger_missing"]["count"] == 4 and lost["repaired"] == 4
    assert _edited_keys(plugin) == set()  # Plex was right: only the ledger was rebuilt
    assert plugin.task("all").output["queued"] == 0 and _edited_keys(plugin) == set()

    plugin.configure(preserve_plex_edits=True)  # a title the user typed in Plex stays
    _server(plugin).fetchItem(rd).editTitle("Typed in Plex")
    kept = plugin.task("reconcile").output
    assert plugin.plex.item(rd)["fields"]["title"] == "Typed in Plex" and kept["repaired"] == 0


def _plan_of_edits(plugin) -> dict[int, tuple[set[str], set[str]]]:
    """rating key → (fields sent, tag types sent), from the edit requests Plex received."""
    sent: dict[int, tuple[set[str], set[str]]] = {}
    for request in plugin.plex.edit_requests():
        params = dict(parse_qsl("&".join(f"{k}={v[0]}" for k, v in request["query"].items())))
        key = int(request["query"]["id"][0]) if "sections" in request["path"] else int(request["path"].split("/")[3])
        fields = {k[: -len(".value")] for k in params if k.endswith(".value")}
        tags = {k.split("[")[0] for k in params if "[" in k}
        sent[key] = (fields, tags)
    return sent


def test_a_dry_run_writes_nothing_and_its_plan_is_what_the_real_run_does(plugin):
    items = _scenes(plugin, 3)
    (s0, r0), (s1, r1), (s2, _) = (items[i] for i in range(3))
    stash = plugin.stash
    stash.update_scene(s0, title="Renamed", tags=["Drama", "New"])
    stash.update_scene(s1, details="Longer story", cover=b"\x89PNG\r\n\x1a\n other cover")
    lonely = stash.add_scene(
        title="Not in Plex", files=[{"path": "/stash/media/lonely.mp4", "size": 9, "duration": 1.0}]
    )
    plugin.plex.clear_requests()

    done = cli(plugin, "all", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.json()
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []
    by_scene = {e["scene_id"]: e for e in plan["scenes"]}
    assert set(by_scene) == {s0, s1} and [u["scene_id"] for u in plan["unmatched"]] == [lonely]
    title = next(f for f in by_scene[s0]["fields"] if f["field"] == "title")
    assert (title["current"], title["new"]) == ("Scene 0", "Renamed")
    assert by_scene[s0]["tags"] == [
        {"type": "genre", "added": ["New"], "removed": ["T0"], "photos": [], "lock_only": False}
    ]
    assert by_scene[s1]["poster"] == "upload" and by_scene[s0]["poster"] == "unchanged"
    table = cli(plugin, "all", "--dry-run").stdout
    assert "'Scene 0' → 'Renamed'" in table and "genre: +New −T0" in table and "lonely.mp4" in table

    task = run_plugin(task_document(plugin.connection, "all", dry_run="true"), env=plugin.env)
    assert task.error is None and plugin.plex.edit_requests() == []
    saved = json.loads(open(task.output["plan_file"], encoding="utf-8").read())
    assert saved["scenes"] == plan["scenes"] and "scenes" not in task.output
    assert any("would be written" in m for m in task.messages("info"))

    assert plugin.task("all").error is None
    planned = {
        e["rating_key"]: ({f["field"] for f in e["fields"]}, {t["type"] for t in e["tags"]}) for e in plan["scenes"]
    }
    assert _plan_of_edits(plugin) == planned
    uploads = {int(r["path"].split("/")[3]) for r in plugin.plex.upload_requests()}
    assert uploads == {e["rating_key"] for e in plan["scenes"] if e["poster"] == "upload"} == {r1}

    stash.update_scene(s1, cover=b"\x89PNG\r\n\x1a\n a third cover")
    plugin.configure(skip_fields="poster")  # the real run would upload no poster: neither does the plan
    plan = cli(plugin, "all", "--dry-run", "--json").json()
    assert [e["poster"] for e in plan["scenes"] if e["scene_id"] == s1] in ([], ["none"])


def test_inspect_unmatched_and_the_health_check_pointer(plugin):
    matched, rk = plugin.add_scene(1)
    for n in range(3):  # Plex sees these under another folder: no path_map rule for it yet
        plugin.stash.add_scene(
            title=f"Other {n}", files=[{"path": f"/stash/other/o{n}.mp4", "size": 5 + n, "duration": 60.0}]
        )
        plugin.plex.add_item(1, f"/plex/elsewhere/o{n}.mp4", size=None, duration_ms=None)  # unconfirmed by name
    plugin.stash.add_scene(title="Nowhere", files=[{"path": "/stash/media/nowhere.mp4", "size": 1, "duration": 1.0}])

    done = cli(plugin, "unmatched", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.json()
    assert out["count"] == 4 and [(g["folder"], g["count"]) for g in out["groups"]] == [
        ("/stash/other", 3),
        ("/stash/media", 1),
    ]
    assert out["suggested_path_map"] == "/stash/other=/plex/elsewhere" and out["fixes"]["scenes"] == 3
    assert "/stash/other=/plex/elsewhere" in cli(plugin, "unmatched").stdout

    text = cli(plugin, "inspect", str(matched)).stdout
    assert f"candidate item {rk} /plex/media/scene-00001.mp4 (by exact path" in text
    assert f"decision: item {rk}" in text and "ledger: no record" in text and "title: lock 'Scene 1'" not in text
    assert "planned: scene" in text
    assert cli(plugin, "inspect").returncode == 2 and cli(plugin, "status", "--dry-run").returncode == 2

    health = plugin.task("health_check").output
    assert health["unmatched"] == {"count": 4, "list_with": "python Stash2Plex.py unmatched"}


def _plexapi_view(item) -> dict:
    """What plexapi's own objects show of an item, in ``PlexItemState``'s terms."""
    parts = list(item.iterParts())
    return {
        "files": tuple(p.file for p in parts),
        "title": item.title or "",
        "summary": item.summary or "",
        "studio": item.studio or "",
        "originallyAvailableAt": item.originallyAvailableAt.strftime("%Y-%m-%d") if item.originallyAvailableAt else "",
        "titleSort": item.titleSort or "",
        "userRating": "" if item.userRating is None else f"{item.userRating:.1f}",
        "genre": tuple(t.tag for t in item.genres),
        "actor": tuple(t.tag for t in item.roles),
        "collection": tuple(t.tag for t in item.collections),
        "locked": frozenset(f.name for f in item.fields if f.locked),
        "parts": tuple((p.file, p.size, p.duration or item.duration) for p in parts),
    }


def _our_view(state) -> dict:
    keys = ("title", "summary", "studio", "originallyAvailableAt", "titleSort", "userRating")
    tags = {k: state.tags[k] for k in ("genre", "actor", "collection")}
    return {
        "files": state.files,
        **{k: state.fields[k] for k in keys},
        **tags,
        "locked": state.locked,
        "parts": state.parts,
    }


def test_reading_detail_views_from_the_xml_agrees_with_plexapi(plex):
    """The client reads detail views from the XML; it sees exactly what plexapi's objects show."""
    from plexapi.server import PlexServer

    from plex.client import PlexClient

    keys = [
        plex.add_item(1, "/plex/media/a.mp4", title="A", summary="Line\nTwo", studio="S", genre=["G1", "g2"]),
        plex.add_item(1, "/plex/media/b.mp4", originallyAvailableAt="2024-02-29", actor=["P"], collection=["C"]),
    ]
    server = PlexServer(plex.url, plex.token)
    server.fetchItem(keys[0]).edit(**{"title.value": "A", "title.locked": 1, "genre.locked": 1})
    server.fetchItem(keys[1]).rate(7)
    client = PlexClient(plex.url, plex.token, "test-client")
    states = client.item_states(keys + [999])
    assert sorted(states) == keys
    for key in keys:
        assert _our_view(states[key]) == _plexapi_view(server.fetchItem(key))
        assert _our_view(client.item_state(key)) == _plexapi_view(server.fetchItem(key))


def test_writes_send_what_plexapis_item_methods_send(plex):
    """edit, rate and upload_poster skip building the item's object and the requests
    Session's per-request work, not a byte of the request (headers included)."""
    from plexapi.server import PlexServer

    from plex.client import PlexClient

    key = plex.add_item(1, "/plex/media/a.mp4", title="A")
    params = {"title.value": "B & C", "title.locked": 1, "genre[0].tag.tag": "x/y", "genre[].tag.tag-": "old"}

    def sent(write) -> list:
        plex.clear_requests()
        write()
        return [(r["method"], r["path"], r["query"], r["body_len"], r["headers"]) for r in plex.requests]

    item = PlexServer(plex.url, plex.token).fetchItem(key)
    item.section()  # plexapi reads /library and /library/sections on its first edit: done here
    client = PlexClient(plex.url, plex.token, "test-client")
    client.item_states([key])
    assert sent(lambda: client.edit(key, params)) == sent(lambda: item.edit(**params))
    assert sent(lambda: client.rate(key, 7.5)) == sent(lambda: item.rate(7.5))
    assert sent(lambda: client.rate(key, None)) == sent(lambda: item.rate())
    assert sent(lambda: client.upload_poster(key, b"\xff\xd8 jpeg")) == sent(
        lambda: item.uploadPoster(filepath=b"\xff\xd8 jpeg")
    )
    forgot = PlexClient(plex.url, plex.token, "test-client")  # no read first: one GET finds the library
    forgot.version()  # connected
    assert [m for m, *_ in sent(lambda: forgot.edit(key, params))] == ["GET", "PUT"]


def test_relock_sends_a_right_but_unlocked_value_again_locked_and_nothing_else():
    from plex.client import PlexItemState
    from plex.plan import Desired, edit_params, plan_item

    shown = {"title": "T", "summary": "", "studio": "", "originallyAvailableAt": ""}
    state = PlexItemState(
        1, 1, ("/a.mp4",), shown, {"genre": ("G",), "actor": ("P",), "collection": ()}, frozenset({"genre"})
    )
    want = {"title": "T", "summary": None, "studio": None, "originallyAvailableAt": None}
    desired = Desired(want, {"genre": ("G",), "actor": ("P",), "collection": ()}, None)
    assert plan_item(desired, state, None, False).empty  # a sync does not touch locks
    plan = plan_item(desired, state, None, False, relock=True)
    assert edit_params(plan) == {
        "title.value": "T",
        "title.locked": 1,
        "actor.locked": 1,
        "actor[0].tag.tag": "P",
        "collection.locked": 1,  # nothing on either side, and unlocked: a refresh could fill it
    }


def test_a_batch_read_with_one_item_gone_finds_which_and_repairs_the_others(plugin):
    """Plex answers 404 for ``/library/metadata/a,b,c`` when one of them is gone: the
    batch is split until the gone one is found, and the other items are repaired."""
    items = _scenes(plugin, 3)
    (s0, r0), (s1, r1), (s2, r2) = (items[i] for i in range(3))
    _wipe(plugin, r0)
    _wipe(plugin, r2)
    assert plugin.plex.strict_batches

    def gone_after_the_listing(record: dict) -> None:
        if record["method"] == "GET" and record["path"] == "/library/sections/1/all":
            plugin.plex.on_request = None
            plugin.plex.remove_item(r1)  # deleted in Plex between the listing and the detail read

    plugin.plex.on_request = gone_after_the_listing
    run = plugin.task("reconcile")
    assert run.error is None, run.stderr[-3000:]
    out = run.output
    assert out["drift"]["item_gone"]["first"] == [s1]
    assert (out["checked"], out["repaired"]) == (3, 2)
    for n, key in ((0, r0), (2, r2)):
        _in_line(plugin, key, n)


def test_reconcile_locks_a_field_it_owns_that_shows_nothing_on_either_side(plugin):
    """A scene without tags: the item's genre list is empty in Stash and Plex. The sync's
    edit locks it too; once a user unlocks it, the next agent refresh could fill it, so
    reconcile counts the missing lock as drift and sets it, once."""
    sid, rk = plugin.add_scene(1, details="About one")
    assert plugin.task("all").output["synced"] == 1
    assert plugin.plex.item(rk)["tags"]["genre"] == [] and "genre" in plugin.plex.item(rk)["locks"]
    _server(plugin).fetchItem(rk).edit(**{"genre.locked": 0, "collection.locked": 0})
    plugin.plex.clear_requests()
    run = plugin.task("reconcile")
    assert run.error is None, run.stderr[-3000:]
    assert set(run.output["drift"]["unlocked"]["first"]) == {sid} and run.output["repaired"] == 1
    item = plugin.plex.item(rk)
    assert {"genre", "actor", "collection", "title", "summary"} <= item["locks"]
    assert item["tags"]["genre"] == [] and item["fields"]["summary"] == "About one"
    again = plugin.task("reconcile").output
    assert again["repaired"] == 0 and "unlocked" not in again["drift"]


def test_a_scene_without_a_cover_is_in_line_with_plexs_own_poster(plugin):
    """Stash serves its default image for a scene without a cover, so the sync uploads
    nothing and Plex's own poster stays unlocked: reconcile finds it in line (it repaired
    the poster on every run, and its dry run planned an upload the write never makes)."""
    sid, rk = plugin.add_scene(1)
    plugin.stash.update_scene(sid, cover=None)  # Stash now serves its default SVG
    assert plugin.task("all").output["synced"] == 1
    plugin.plex.clear_requests()
    plan = cli(plugin, "reconcile", "--dry-run", "--json").json()
    assert plan["scenes"] == [] and plan["in_line"] == 1, plan
    out = plugin.task("reconcile").output
    assert (out["in_line"], out["repaired"], out["drift"]) == (1, 0, {}), out
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []


def test_reconcile_checks_every_scene_while_scenes_of_the_first_page_are_deleted(plugin):
    """Scenes deleted in Stash while reconcile works through it (after its first page was
    read) make none of the rest slip past: the pages go by id (``StashClient.scene_pages``),
    where by page number the next page began 30 scenes too late and 20 were never checked."""
    run = run_deleting_after_the_first_page(plugin, "reconcile", range(50, 80))  # on the first page (of 500)
    assert run.output["checked"] == 520, run.output


def test_an_edit_saved_while_reconcile_holds_the_drainer_lock_is_drained_after_it(plugin):
    """Its hook found the lock held (reconcile takes it: no drainer writes meanwhile) and only
    nudged; the task, letting go, starts the drainer that hook would have."""
    sid, rk = plugin.add_scene(1)
    hooked: list = []

    def edit_meanwhile(record: dict) -> None:
        if not hooked and plugin.drainer_busy():
            hooked.append(plugin.hook(plugin.stash.update_scene(sid, title="Saved during reconcile")))

    plugin.plex.on_request = edit_meanwhile
    assert plugin.task("reconcile").error is None
    plugin.plex.on_request = None
    assert hooked and hooked[0].error is None
    plugin.wait_drained(timeout=15)
    assert plugin.plex.item(rk)["fields"]["title"] == "Saved during reconcile"
