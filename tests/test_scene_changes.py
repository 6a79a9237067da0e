"""Every way Stash changes what a scene's Plex item shows is followed.

Stash's bulk scene editor (``bulkSceneUpdate``) fires ``Scene.Update.Post`` per scene with
the *bulk* input (``ids``, ``group_ids: {ids, mode}``, …), not a ``SceneUpdateInput``: the
emulator fires it as Stash does and the hooks run through the real plugin process.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from hooks.lane import entity_records, scene_records
from stash.releases import GROUPS_SINCE, parse_version
from tests import reference
from tests.conftest import EDGE_RELEASES
from validation.document import hook_values

RELEASES = reference.path("stash-schema/versions")
# Input keys whose change Plex never shows (ids, galleries, play history, links, stash-box ids).
NOT_SHOWN = {
    "clientMutationId",
    "id",
    "ids",
    "url",
    "urls",
    "gallery_ids",
    "o_counter",
    "stash_ids",
    "resume_time",
    "play_duration",
    "play_count",
}


def _input_keys(release: Path, name: str) -> list[str]:
    """The fields of input type ``name`` in a release's real schema (graphql-core parses it)."""
    from graphql import InputObjectTypeDefinitionNode, parse

    document = parse((release / "types" / "scene.graphql").read_text())
    for node in document.definitions:
        if isinstance(node, InputObjectTypeDefinitionNode) and node.name.value == name:
            return [f.name.value for f in node.fields or ()]
    raise AssertionError(f"{name} not in {release.name}")


def _releases() -> list[Path]:
    found = sorted(p for p in RELEASES.glob("v*") if (p / "types" / "scene.graphql").exists())
    if not found:
        pytest.skip(reference.missing("Stash's schemas per release", RELEASES))
    return found


@pytest.mark.parametrize("name", ["SceneUpdateInput", "BulkSceneUpdateInput"])
def test_every_scene_update_key_of_every_release_queues_a_job_unless_plex_never_shows_it(name):
    for release in _releases():
        for key in _input_keys(release, name):
            context = hook_values(
                {"id": 1, "type": "Scene.Update.Post", "input": {key: None}, "inputFields": ["ids", key]}
            )
            assert (scene_records(context, 0.0) == []) == (key in NOT_SHOWN), f"{release.name} {name}.{key}"


def _bulk_update(stash, variables: dict) -> list[dict] | None:
    """``bulkSceneUpdate`` over HTTP, as a script or another plugin sends it; the hooks it
    fired (None when the release's schema refuses the input)."""
    before = len(stash.hook_contexts)
    reply = requests.post(
        f"{stash.url}/graphql",
        json={
            "query": "mutation B($input: BulkSceneUpdateInput!) { bulkSceneUpdate(input: $input) { id } }",
            "variables": {"input": variables},
        },
        headers={"ApiKey": stash.api_key},
        timeout=10,
    )
    if reply.status_code == 422:
        return None
    assert reply.status_code == 200 and "errors" not in reply.json(), reply.text
    return stash.hook_contexts[before:]


@pytest.mark.parametrize("stash", EDGE_RELEASES, indirect=True)
@pytest.mark.parametrize("key", ["group_ids", "movie_ids"])
def test_a_bulk_edit_of_groups_only_reaches_plex(plugin, key):
    plugin.configure(collections="groups")
    items = dict(plugin.add_scene(n, groups=["Series A"] if n == 2 else []) for n in range(3))
    assert plugin.task("all").output["synced"] == 3
    ids = list(items)
    group = str(plugin.stash.entity_id("group", "Series A"))

    contexts = _bulk_update(plugin.stash, {"ids": [str(i) for i in ids[:2]], key: {"ids": [group], "mode": "ADD"}})
    if parse_version(plugin.stash.version) < GROUPS_SINCE and key == "group_ids":
        assert contexts is None  # BulkSceneUpdateInput.group_ids first appears in v0.27.0
        return
    assert contexts is not None

    assert [c["id"] for c in contexts] == ids[:2]
    assert contexts[0]["input"] == {"ids": [str(i) for i in ids[:2]], key: {"ids": [group], "mode": "ADD"}}
    assert sorted(contexts[0]["inputFields"]) == sorted(["ids", key])
    plugin.plex.clear_requests()
    for context in contexts:
        run = plugin.hook(context)
        # "queued" even when the drainer of `all` stops as the hook writes its line: the hook
        # looks at the drainer's lock after the write (hooks/lane.py).
        assert run.error is None and run.output == f"scene {context['id']} queued", run.output
    plugin.wait_drained(30)
    assert {sid: plugin.plex.item(rk)["tags"]["collection"] for sid, rk in items.items()} == {
        sid: ["Series A"] for sid in ids
    }
    assert len(plugin.plex.edit_requests()) == 2


# -- hierarchy: a parent's change fires a hook for the parent only ------------------------------
DEADLINE_S = 20.0


def _fire(plugin, context: dict, done) -> None:
    """Fire an entity hook, then wait (no task run) until ``done()`` holds and nothing is pending."""
    run = plugin.hook(context)
    assert run.error is None and run.output.endswith("queued"), run.output
    deadline = time.monotonic() + DEADLINE_S
    while not (done() and plugin.status()["pending"] == 0):
        assert time.monotonic() < deadline, f"not in line within {DEADLINE_S} s:\n{plugin.drainer_log()[-3000:]}"
        time.sleep(0.05)


def test_a_parent_studios_rename_reaches_its_child_studios_scenes(plugin):
    plugin.configure(collections="parent_studio", title_template="{parent_studio}: {title}")
    stash = plugin.stash
    items = {n: plugin.add_scene(n, studio="Child A" if n < 2 else "Other") for n in range(3)}
    stash.set_studio_parent("Child A", "Network")
    assert plugin.task("all").output["synced"] == 3
    network = stash.entity_id("studio", "Network")

    def shown(n):
        fields = plugin.plex.item(items[n][1])
        return fields["fields"]["title"], fields["tags"]["collection"]

    assert shown(0) == ("Network: Scene 0", ["Network"])
    plugin.plex.clear_requests()
    _fire(plugin, stash.rename_entity("studio", network, "Network Two"), lambda: shown(1)[1] == ["Network Two"])
    assert [shown(n) for n in range(3)] == [
        ("Network Two: Scene 0", ["Network Two"]),
        ("Network Two: Scene 1", ["Network Two"]),
        ("Scene 2", []),
    ]
    edited = [r["query"]["id"][0] for r in plugin.plex.edit_requests()]
    assert sorted(map(str, edited)) == sorted(str(items[n][1]) for n in (0, 1)), edited


def test_a_tag_moving_under_a_hidden_tag_hides_it_and_its_descendants_in_a_running_drainer(plugin):
    plugin.configure(hide_tags="Private")
    plugin.env["STASH2PLEX_DRAINER_LINGER_S"] = "30"  # one drainer sees both moves: it reads the tree again
    stash = plugin.stash
    stash.set_tag_parents("Leaf", ["Mid"])
    items = {n: plugin.add_scene(n, tags=[("Leaf", "Mid", "Other")[n]]) for n in range(3)}
    stash.set_tag_parents("Private", [])
    assert plugin.task("all").output["synced"] == 3

    def genres():
        return [plugin.plex.item(items[n][1])["tags"]["genre"] for n in range(3)]

    assert genres() == [["Leaf"], ["Mid"], ["Other"]]
    _fire(plugin, stash.set_tag_parents("Mid", ["Private"]), lambda: genres() == [[], [], ["Other"]])
    assert plugin.drainer_busy()  # still lingering: the next move reaches the same drainer
    _fire(plugin, stash.set_tag_parents("Mid", []), lambda: genres() == [["Leaf"], ["Mid"], ["Other"]])


def test_a_skipped_scene_is_synced_once_its_tag_leaves_the_skipped_tag(plugin):
    plugin.configure(skip_tags="Skip")
    stash = plugin.stash
    stash.set_tag_parents("Leaf", ["Skip"])
    sid, rk = plugin.add_scene(0, tags=["Leaf"])
    other, _ = plugin.add_scene(1)
    run = plugin.task("all")
    assert run.output["synced"] == 1 and plugin.plex.item(rk)["fields"]["title"] != "Scene 0", run.output
    _fire(plugin, stash.set_tag_parents("Leaf", []), lambda: plugin.plex.item(rk)["fields"]["title"] == "Scene 0")
    assert plugin.plex.item(rk)["tags"]["genre"] == ["Leaf"]


@pytest.mark.parametrize(
    "given, fields",
    [
        ({"id": "5", "child_ids": ["7", "8"]}, ["id", "child_ids"]),  # tagUpdate: the new list
        ({"ids": ["5"], "child_ids": {"ids": ["7", "8"], "mode": "ADD"}}, ["ids", "child_ids"]),  # bulkTagUpdate
        # what is no tag id SQLite stores is passed over: another script's digit, 2**63, a flag
        ({"id": "5", "child_ids": ["7", "\u0663", str(2**63), True, 8]}, ["id", "child_ids"]),
    ],
)
def test_tags_given_a_new_parent_get_events_of_their_own(given, fields):
    """The ledger finds a scene by its tags and their ancestors: a tag that becomes a child here
    did not have this tag among them, so it needs its own event."""
    context = hook_values({"id": 5, "type": "Tag.Update.Post", "input": given, "inputFields": fields})
    assert [(r["entity"], r["id"]) for r in entity_records(context, 0.0)] == [("tag", 5), ("tag", 7), ("tag", 8)]


def test_a_performers_new_image_is_followed_like_a_rename():
    """A performer's image is its photo in Plex (performer_photos); its other details are not shown."""

    def events(kind: str, fields: list[str]) -> list:
        context = hook_values({"id": 4, "type": f"{kind}.Update.Post", "input": {"id": "4"}, "inputFields": fields})
        return [(r["entity"], r["id"]) for r in entity_records(context, 0.0)]

    assert events("Performer", ["id", "image"]) == [("performer", 4)]
    assert events("Performer", ["id", "birthdate"]) == []
    assert events("Tag", ["id", "image"]) == []  # a tag's image is not shown in Plex
