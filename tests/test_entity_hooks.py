"""Tag, performer, studio and group changes reach Plex by themselves (no task run).

Through the real plugin process and both emulators: the Stash emulator changes the
entity as Stash does (names resolve per query, no scene's updated_at moves, a
deleted studio leaves scenes without one) and hands back the hookContext Stash
fires; the hook records one event; the drainer fans it out to exactly the scenes
whose Plex items show the entity. Items that do not show it get no request at all.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import EDGE_RELEASES

DEADLINE_S = 15.0


def _setup(plugin, **carried):
    """Scenes 0-2 carry the entity (kind=name in ``carried``), scene 3 carries another, scene 4 none."""
    items = {}
    for n in range(5):
        kw = {}
        for kind, name in carried.items():
            value = name if n < 3 else (f"Other {kind}" if n == 3 else None)
            if value is not None:
                kw[kind] = value if kind == "studio" else [value]
        items[n] = plugin.add_scene(n, **kw)
    assert plugin.task("all").output["synced"] == 5
    return items


def _touched(plugin, rating_key: int) -> bool:
    """Did any Plex request name this item (detail reads list several keys at once)?"""
    for request in plugin.plex.requests:
        parts = request["path"].split("/")
        if "metadata" in parts and str(rating_key) in ",".join(parts[parts.index("metadata") + 1 :]).split(","):
            return True
    return False


def _fire(plugin, context: dict | list[dict], done) -> None:
    """Fire the hook (or each hook of a list, in order, as Stash runs them), then wait (polling,
    no task run) until a drainer has run and exited and ``done()`` holds."""
    plugin.plex.clear_requests()
    deadline = time.monotonic() + DEADLINE_S
    runs = plugin.drainer_log().count("drainer finished")
    for one in context if isinstance(context, list) else [context]:
        run = plugin.hook(one)
        assert run.error is None, run.stderr
        assert run.output.endswith("queued"), run.output
    while not (plugin.drainer_log().count("drainer finished") > runs and not plugin.drainer_busy() and done()):
        assert time.monotonic() < deadline, f"not in line within {DEADLINE_S} s:\n{plugin.drainer_log()[-3000:]}"
        time.sleep(0.05)


def _shown(plugin, items, tag_type: str) -> dict[int, list[str]]:
    return {n: sorted(plugin.plex.item(rk)["tags"][tag_type]) for n, (_, rk) in items.items()}


def _untouched(plugin, items, ns) -> None:
    for n in ns:
        assert not _touched(plugin, items[n][1]), f"scene {n}'s item got a request: {plugin.plex.requests}"


def _shows(plugin, items, tag_type: str, expected: dict[int, list[str]], fold: bool = False):
    def norm(names):
        return sorted(n.casefold() for n in names) if fold else names

    return lambda: all(norm(_shown(plugin, items, tag_type)[n]) == norm(names) for n, names in expected.items())


@pytest.mark.parametrize("kind, tag_type", [("tags", "genre"), ("performers", "actor")])
def test_rename_case_only_rename_merge_and_destroy_reach_exactly_the_items_that_show_it(plugin, kind, tag_type):
    items = _setup(plugin, **{kind: "drama queen"})
    stash, one = plugin.stash, kind[:-1]
    eid = stash.entity_id(one, "drama queen")
    other = [f"Other {kind}"]

    _fire(
        plugin,
        stash.rename_entity(one, eid, "Melodrama"),
        _shows(plugin, items, tag_type, {0: ["Melodrama"], 1: ["Melodrama"], 2: ["Melodrama"]}),
    )
    assert _shown(plugin, items, tag_type) == {0: ["Melodrama"], 1: ["Melodrama"], 2: ["Melodrama"], 3: other, 4: []}
    _untouched(plugin, items, (3, 4))

    # Case only: Plex keeps one spelling per tag (one tag row per type and name), so the item may
    # keep the old one; the tag must never be removed.
    _fire(
        plugin,
        stash.rename_entity(one, eid, "MELODRAMA"),
        _shows(plugin, items, tag_type, {n: ["MELODRAMA"] for n in range(3)}, fold=True),
    )
    _untouched(plugin, items, (3, 4))

    if kind == "tags":  # Stash has a merge hook for tags only (performerMerge fires none)
        dest = stash.entity_id("tag", "Other tags")
        _fire(plugin, stash.merge_tags([eid], dest), _shows(plugin, items, tag_type, {n: other for n in range(3)}))
        assert len(plugin.plex.edit_requests()) == 3  # scene 3 already showed the destination: no request
        _untouched(plugin, items, (3, 4))
        eid = dest
        items.pop(3)  # it carries the destination now: the destroy below is its business too
        _fire(plugin, stash.destroy_entity(one, eid), _shows(plugin, items, tag_type, {n: [] for n in range(3)}))
        _untouched(plugin, items, (4,))
        return
    _fire(plugin, stash.destroy_entity(one, eid), _shows(plugin, items, tag_type, {n: [] for n in range(3)}))
    assert _shown(plugin, items, tag_type)[3] == other
    _untouched(plugin, items, (3, 4))


@pytest.mark.fresh
def test_studio_rename_case_only_rename_and_destroy(plugin):
    items = _setup(plugin, studio="Acme Films")
    stash = plugin.stash
    sid = stash.entity_id("studio", "Acme Films")

    def studio_is(name):
        return lambda: all(
            plugin.plex.item(items[n][1])["fields"]["studio"] == name  # a field: its new spelling is written
            and [c.casefold() for c in plugin.plex.item(items[n][1])["tags"]["collection"]]
            == ([name.casefold()] if name else [])  # a tag: Plex may keep the old spelling, never drops it
            for n in range(3)
        )

    _fire(plugin, stash.rename_entity("studio", sid, "Acme Pictures"), studio_is("Acme Pictures"))
    _untouched(plugin, items, (3, 4))
    _fire(plugin, stash.rename_entity("studio", sid, "acme pictures"), studio_is("acme pictures"))
    _untouched(plugin, items, (3, 4))
    _fire(plugin, stash.destroy_entity("studio", sid), studio_is(""))
    assert plugin.plex.item(items[3][1])["fields"]["studio"] == "Other studio"
    _untouched(plugin, items, (3, 4))


@pytest.mark.parametrize("stash", EDGE_RELEASES, indirect=True)
def test_group_changes_fan_out_to_their_scenes_only(plugin):
    """Before Stash v0.27 a group is a movie and its change fires Movie.* only; from v0.27
    Group.* and then Movie.*: every hook the release fires is run, and they are one event."""
    items = _setup(plugin, groups="Series A")
    stash = plugin.stash
    gid = stash.entity_id("group", "Series A")
    carried = {items[n][0] for n in range(3)}

    def checked():
        return carried <= {int(i) for r in stash.graphql_requests("S2PScenesById") for i in r["variables"]["ids"]}

    for change in (lambda: stash.rename_entity("group", gid, "series a"), lambda: stash.destroy_entity("group", gid)):
        stash.requests.clear()
        change()
        _fire(plugin, stash.last_hooks, checked)
        fetched = {int(i) for r in stash.graphql_requests("S2PScenesById") for i in r["variables"]["ids"]}
        assert fetched == carried  # exactly the group's scenes were checked
        _untouched(plugin, items, (3, 4))


def test_an_update_of_fields_plex_does_not_show_queues_nothing(plugin):
    plugin.add_scene(1, tags=["Kept"])
    tag = plugin.stash.entity_id("tag", "Kept")
    context = {
        "id": tag,
        "type": "Tag.Update.Post",
        "input": {"id": str(tag), "favorite": True},
        "inputFields": ["id", "favorite"],
    }
    run = plugin.hook(context)
    assert run.error is None and run.output == f"tag {tag}: nothing to sync"


# -- the fan-out itself, on the real queue and ledger files -------------------------------
class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)


def test_one_row_per_entity_expanded_a_batch_at_a_time_and_restarted_by_a_newer_event(tmp_path):
    from sync_queue.job import EntityEvent
    from sync_queue.ledger import Ledger, SceneRecord
    from sync_queue.queue import JobQueue
    from worker.worker import Parts, Worker

    ledger = Ledger(tmp_path)
    for sid in range(1, 251):
        ledger.save(SceneRecord(scene_id=sid, entities={"tag": [7] if sid % 2 else [8]}))
    hook_side = JobQueue(tmp_path / "queue")
    for n in range(3):  # three renames of the same tag while nothing ran: still one row
        hook_side.put_entity_events([EntityEvent("tag", 7, "Tag.Update.Post", 100.0 + n)])
    assert hook_side.counts()["entity_events"] == 1 and hook_side.counts()["pending"] == 1
    queue = JobQueue(tmp_path / "queue", consumer=True)
    worker = Worker(
        Parts(queue=queue, dlq=None, ledger=ledger, stash=None, syncer=None, breaker=None, stats_store=None, log=_Log())
    )
    assert worker.fan_out(50) == 50
    (event,) = queue.entity_events()
    assert event.after_scene == 99  # scenes 1, 3, …, 99 queued
    hook_side.put_entity_events([EntityEvent("tag", 7, "Tag.Update.Post", 200.0)])  # renamed again meanwhile
    assert worker.fan_out(100) == 100  # starts over from the first scene (the first 50 collapse into waiting jobs)
    assert worker.fan_out(100) == 25 and queue.entity_events() == []
    assert queue.counts()["bulk"] == 125  # every scene showing tag 7 exactly once, none of tag 8
    queue.close(), hook_side.close(), ledger.close()
