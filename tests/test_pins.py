"""A user's answer for a scene (tasks/pins.py), end to end: the real plugin against the emulators.

A pin is honoured before any match, kept through ``all``, ``reconcile`` and index
reloads, and checked at write time: a pinned item Plex deleted sends the scene back to
the inbox (the dead-letter queue) with its pin removed.
"""

from __future__ import annotations

from sync_queue.dlq import DeadLetterQueue
from sync_queue.ledger import Ledger
from tests.runner import drainer_lock_held
from tests.test_cli import cli
from tests.test_ui_modes import listings, operation

SIZE = 5555


def ambiguous(plugin) -> tuple[int, int, int]:
    """A scene whose file name two Plex items hold, neither at its mapped path: dead-lettered."""
    sid = plugin.stash.add_scene(
        title="Clip", files=[{"path": "/stash/media/a/clip.mp4", "size": SIZE, "duration": 60.0}]
    )
    first = plugin.plex.add_item(1, "/plex/media/x/clip.mp4", size=SIZE, duration_ms=60000)
    second = plugin.plex.add_item(1, "/plex/media/y/clip.mp4", size=SIZE, duration_ms=60000)
    assert plugin.task("all").error is None
    plugin.wait_drained()
    assert dead(plugin) == {sid: "AmbiguousMatch"}
    return sid, first, second


def dead(plugin) -> dict[int, str]:
    dlq = DeadLetterQueue(plugin.data_dir)
    try:
        return {e["scene_id"]: e["error_class"] for e in dlq.entries()}
    finally:
        dlq.close()


def pins(plugin) -> dict:
    ledger = Ledger(plugin.data_dir)
    try:
        return {sid: (p.answer, p.rating_key) for sid, p in ledger.pins().items()}
    finally:
        ledger.close()


def title(plugin, rk: int) -> str | None:
    return plugin.plex.item(rk)["fields"]["title"]


def test_a_pin_syncs_at_once_and_holds_through_all_reconcile_and_index_reloads(plugin):
    sid, first, second = ambiguous(plugin)
    run = operation(plugin, mode="ui_pin", scene_id=str(sid), rating_key=str(second))
    assert run.error is None, run.stderr
    assert run.output == {
        "scene_id": sid,
        "answer": "item",
        "rating_key": second,
        "library": "Stash",
        "plex_path": "/plex/media/y/clip.mp4",
        "queued": True,
    }
    plugin.wait_drained()
    assert title(plugin, second) == "Clip" and title(plugin, first) != "Clip"
    assert dead(plugin) == {}
    plugin.plex.add_item(1, "/plex/media/z/other.mp4")  # a scan: the index is listed again
    plugin.hook(plugin.stash.update_scene(sid, title="Clip, edited"))
    plugin.wait_drained()
    assert title(plugin, second) == "Clip, edited"
    assert plugin.task("all").error is None
    plugin.wait_drained()
    rec = plugin.task("reconcile")
    assert rec.error is None, rec.stderr
    plugin.wait_drained()
    assert title(plugin, second) == "Clip, edited" and title(plugin, first) != "Clip, edited"
    assert dead(plugin) == {} and pins(plugin) == {sid: ("item", second)}
    shown = operation(plugin, mode="ui_scene", scene_id=sid).output
    assert shown["pin"] == {"answer": "item", "rating_key": second} and shown["state"] == "in_sync"
    assert shown["rating_key"] == second


def test_a_pin_after_a_plex_scan_checks_its_item_without_listing_the_library(plugin):
    """Which library the item is in takes the sections (one request), not their listing."""
    sid, _, second = ambiguous(plugin)
    plugin.plex.add_item(1, "/plex/media/z/scanned-in.mp4")  # a scan
    plugin.plex.clear_requests()
    with drainer_lock_held(plugin.data_dir):  # the pin's own requests only, not its sync's
        run = operation(plugin, mode="ui_pin", scene_id=str(sid), rating_key=str(second))
    assert run.error is None and run.output["library"] == "Stash", run.stderr
    assert listings(plugin) == []


def test_a_pin_to_an_item_plex_deleted_goes_back_to_the_inbox(plugin):
    sid, first, second = ambiguous(plugin)
    assert operation(plugin, mode="ui_pin", scene_id=sid, rating_key=second).error is None
    plugin.wait_drained()
    plugin.plex.remove_item(second)
    plugin.hook(plugin.stash.update_scene(sid, title="After the delete"))
    plugin.wait_drained()
    assert dead(plugin) == {sid: "PinnedItemGone"}
    assert pins(plugin) == {}
    assert title(plugin, first) != "After the delete"


def test_pinning_to_a_missing_item_is_refused_and_not_in_plex_and_skip_settle_the_scene(plugin):
    sid, first, _ = ambiguous(plugin)
    refused = operation(plugin, mode="ui_pin", scene_id=sid, rating_key=99999)
    assert refused.error == "Plex has no item 99999: choose an item Plex shows (its ratingKey)"
    assert pins(plugin) == {} and dead(plugin) == {sid: "AmbiguousMatch"}
    assert operation(plugin, mode="ui_pin", scene_id=sid, answer="not_in_plex").error is None
    plugin.wait_drained()
    assert dead(plugin) == {} and pins(plugin) == {sid: ("not_in_plex", None)}
    other = plugin.stash.add_scene(title="Other", files=[{"path": "/stash/media/b/none.mp4", "size": 1}])
    assert operation(plugin, mode="ui_pin", scene_id=other, answer="skip").error is None
    plugin.hook(plugin.stash.update_scene(sid, title="Still not in Plex"))
    plugin.wait_drained()
    assert dead(plugin) == {}
    bad = operation(plugin, mode="ui_pin", scene_id=sid, answer="maybe")
    assert bad.error == "args.answer must be one of item, not_in_plex, skip, got 'maybe'"
    long = operation(plugin, mode="ui_pin", scene_id=sid, answer="x" * 10_000)  # a reply is no echo chamber
    assert long.error == "args.answer must be one of item, not_in_plex, skip, got " + repr("x" * 10_000)[:59] + "…"
    assert operation(plugin, mode="ui_unpin", scene_id=sid).output == {
        "scene_id": sid,
        "unpinned": True,
        "queued": True,
    }
    plugin.wait_drained()
    assert dead(plugin) == {sid: "AmbiguousMatch"}  # the matcher decides again
    assert title(plugin, first) != "Still not in Plex"


def test_pin_and_unpin_on_the_command_line(plugin):
    sid, first, _ = ambiguous(plugin)
    done = cli(plugin, "pin", str(sid), str(first))
    assert done.returncode == 0, done.stderr
    plugin.wait_drained()
    assert title(plugin, first) == "Clip" and pins(plugin) == {sid: ("item", first)}
    usage = cli(plugin, "pin", str(sid))
    assert usage.returncode == 2 and "pin needs the Plex item's ratingKey after the scene id" in usage.stderr
    done = cli(plugin, "unpin", str(sid), "--json")
    assert done.returncode == 0 and done.json() == {"scene_id": sid, "unpinned": True, "queued": True}
    assert pins(plugin) == {}


def test_a_pin_onto_the_item_another_scene_holds_is_refused_with_what_would_work(plugin):
    owner, rk = plugin.add_scene(1, title="The owner")  # its item, by its exact path
    assert plugin.task("all").error is None
    plugin.wait_drained()
    other = plugin.stash.add_scene(title="Other", files=[{"path": "/stash/media/nowhere.mp4", "size": 1}])
    refused = operation(plugin, mode="ui_pin", scene_id=other, rating_key=rk)
    assert refused.error == (
        f"Plex item {rk} is scene {owner} ('The owner')'s: it holds that scene's file /plex/media/scene-00001.mp4. "
        f"Pinned to scene {other} too, it would change hands on every sync, showing one scene's title, tags and "
        f"cover, then the other's. If scene {other} is a copy of scene {owner} ('The owner'), choose 'Skip this "
        "scene' for it (or merge the two scenes in Stash); if its own file is not in Plex yet, choose 'Not in "
        "Plex' or let Plex scan it, then choose its own item."
    )
    done = cli(plugin, "pin", str(other), str(rk))
    assert done.returncode != 0 and f"Plex item {rk} is scene {owner}" in done.stderr
    assert pins(plugin) == {}
    assert operation(plugin, mode="ui_pin", scene_id=owner, rating_key=rk).error is None  # its own item: fine
    third = plugin.stash.add_scene(title="Third", files=[{"path": "/stash/media/gone.mp4", "size": 2}])
    again = operation(plugin, mode="ui_pin", scene_id=third, rating_key=rk)  # pinned by another scene now
    assert again.error.startswith(f"Plex item {rk} is scene {owner} ('The owner')'s")
    plugin.wait_drained()
    assert title(plugin, rk) == "The owner" and pins(plugin) == {owner: ("item", rk)}


def test_a_deleted_scenes_pin_goes_with_it(plugin):
    """A scene deleted from Stash leaves no pin: its item may be pinned to another scene
    (the pin of a scene that is gone would refuse it for good, naming a scene nobody sees)."""
    owner, rk = plugin.add_scene(1, title="Gone soon")
    assert operation(plugin, mode="ui_pin", scene_id=owner, rating_key=rk).error is None
    plugin.wait_drained()
    assert plugin.hook(plugin.stash.delete_scene(owner)).error is None
    plugin.wait_drained()
    assert pins(plugin) == {}
    other = plugin.stash.add_scene(title="Its copy", files=[{"path": "/stash/media/elsewhere.mp4", "size": 1}])
    assert operation(plugin, mode="ui_pin", scene_id=other, rating_key=rk).error is None
    plugin.wait_drained()
    assert pins(plugin) == {other: ("item", rk)}
