"""Every way Stash changes what a scene's Plex item shows is followed.

Stash's bulk scene editor (``bulkSceneUpdate``) fires ``Scene.Update.Post`` per scene with
the *bulk* input (``ids``, ``group_ids: {ids, mode}``, …), not a ``SceneUpdateInput``: the
emulator fires it as Stash does and the hooks run through the real plugin process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from hooks.handler import job_for
from validation.plugin_input import HookContext

RELEASES = Path(__file__).resolve().parent.parent.parent / "shared" / "stash-schema" / "versions"
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
        pytest.skip(f"no Stash schemas under {RELEASES}")
    return found


@pytest.mark.parametrize("name", ["SceneUpdateInput", "BulkSceneUpdateInput"])
def test_every_scene_update_key_of_every_release_queues_a_job_unless_plex_never_shows_it(name):
    for release in _releases():
        for key in _input_keys(release, name):
            context = HookContext.parse(
                {"id": 1, "type": "Scene.Update.Post", "input": {key: None}, "inputFields": ["ids", key]}
            )
            job = job_for(context, 0.0)
            assert (job is None) == (key in NOT_SHOWN), f"{release.name} {name}.{key}"


def _bulk_update(stash, variables: dict) -> list[dict]:
    """``bulkSceneUpdate`` over HTTP, as a script or another plugin sends it; the hooks it fired."""
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
    assert reply.status_code == 200 and "errors" not in reply.json(), reply.text
    return stash.hook_contexts[before:]


@pytest.mark.parametrize("key", ["group_ids", "movie_ids"])
def test_a_bulk_edit_of_groups_only_reaches_plex(plugin, key):
    plugin.configure(collections="groups")
    items = dict(plugin.add_scene(n, groups=["Series A"] if n == 2 else []) for n in range(3))
    assert plugin.task("all").output["synced"] == 3
    ids = list(items)
    group = str(plugin.stash.entity_id("group", "Series A"))

    contexts = _bulk_update(plugin.stash, {"ids": [str(i) for i in ids[:2]], key: {"ids": [group], "mode": "ADD"}})

    assert [c["id"] for c in contexts] == ids[:2]
    assert contexts[0]["input"] == {"ids": [str(i) for i in ids[:2]], key: {"ids": [group], "mode": "ADD"}}
    assert sorted(contexts[0]["inputFields"]) == sorted(["ids", key])
    plugin.plex.clear_requests()
    for context in contexts:
        run = plugin.hook(context)
        assert run.error is None and run.output == f"scene {context['id']} queued", run.output
    plugin.wait_drained(30)
    assert {sid: plugin.plex.item(rk)["tags"]["collection"] for sid, rk in items.items()} == {
        sid: ["Series A"] for sid in ids
    }
    assert len(plugin.plex.edit_requests()) == 2
