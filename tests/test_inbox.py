"""The match inbox (tasks/inbox.py), run as Stash runs the page's operations."""

from __future__ import annotations

import base64

from tests.test_cli import cli
from tests.test_pins import dead
from tests.test_ui_modes import dead_letter, operation


def three_kinds(plugin) -> dict[str, int]:
    """An ambiguous scene, one Plex lacks, and one accepted by file name only; ``all`` run."""
    stash, plex = plugin.stash, plugin.plex
    ids = {
        "ambiguous": stash.add_scene(
            title="Two fit", files=[{"path": "/stash/media/a/clip.mp4", "size": 500, "duration": 60.0}]
        ),
        "loose": stash.add_scene(
            title="By name", files=[{"path": "/stash/media/c/named.mp4", "size": 900, "duration": 90.0}]
        ),
    }
    plex.add_item(1, "/plex/media/x/clip.mp4", size=500, duration_ms=60000)
    plex.add_item(1, "/plex/media/y/clip.mp4", size=500, duration_ms=60000)
    ids["loose_rk"] = plex.add_item(1, "/plex/media/moved/named.mp4", size=900, duration_ms=90000)
    ids["same_size"] = plex.add_item(1, "/plex/media/renamed.mp4", size=700, duration_ms=30000)
    assert plugin.task("all").error is None
    plugin.wait_drained()
    ids["unmatched"] = stash.add_scene(  # dead-lettered as a sync leaves it after its retries
        title="Nowhere", files=[{"path": "/stash/media/b/gone.mp4", "size": 700, "duration": 30.0}]
    )
    dead_letter(plugin, ids["unmatched"], "PlexNotFound", "not in Plex after 5 attempts", "Nowhere")
    return ids


def test_the_inbox_lists_ambiguous_unmatched_and_loose_scenes_with_their_candidates(plugin):
    ids = three_kinds(plugin)
    run = operation(plugin, mode="ui_inbox")
    assert run.error is None, run.stderr
    out = run.output
    assert out["counts"] == {"ambiguous": 1, "unmatched": 1, "loose": 1} and out["total"] == 3
    by_kind = {s["kind"]: s for s in out["scenes"]}
    assert [s["kind"] for s in out["scenes"]] == ["ambiguous", "unmatched", "loose"]
    two = by_kind["ambiguous"]
    assert two["title"] == "Two fit"
    assert two["files"] == [
        {"path": "/stash/media/a/clip.mp4", "mapped_path": "/plex/media/a/clip.mp4", "size": 500, "duration": 60.0}
    ]
    assert [(c["path"], c["library"], c["size"], c["duration"], c["same_size"]) for c in two["candidates"]] == [
        ("/plex/media/x/clip.mp4", "Stash", 500, 60.0, True),
        ("/plex/media/y/clip.mp4", "Stash", 500, 60.0, True),
    ]
    nowhere = by_kind["unmatched"]  # no file of that name: Plex's files of the same size are offered
    assert [c["rating_key"] for c in nowhere["candidates"]] == [ids["same_size"]]
    loose = by_kind["loose"]
    assert loose["linked"] == ids["loose_rk"] and loose["candidates"][0]["rating_key"] == ids["loose_rk"]
    assert loose["reason"] == (
        "no Plex item at /plex/media/c/named.mp4; only file named 'named.mp4' is /plex/media/moved/named.mp4; "
        "in Plex 900 bytes, 1:30 long; in Stash 900 bytes, 1:30 long"
    )
    found = operation(plugin, mode="ui_inbox", query="NOWHERE", per_page="1").output
    assert found["total"] == 1 and [s["scene_id"] for s in found["scenes"]] == [ids["unmatched"]]
    paged = operation(plugin, mode="ui_inbox", per_page=2, page=2).output
    assert paged["total"] == 3 and [s["kind"] for s in paged["scenes"]] == ["loose"]
    assert (
        operation(plugin, mode="ui_inbox", per_page=0).error
        == "args.per_page must be a whole number from 1 to 100, got 0"
    )
    # answering takes a scene out; confirming the loose match (a pin to its item) does too
    assert operation(plugin, mode="ui_pin", scene_id=ids["loose"], rating_key=ids["loose_rk"]).error is None
    assert operation(plugin, mode="ui_pin", scene_id=ids["unmatched"], answer="not_in_plex").error is None
    plugin.wait_drained()
    left = operation(plugin, mode="ui_inbox").output
    assert left["counts"] == {"ambiguous": 1, "unmatched": 0, "loose": 0}


def test_path_help_suggests_the_rule_that_fixes_most_and_recheck_shrinks_the_inbox(plugin):
    plugin.configure(path_map="/elsewhere=/plex/media")
    ids = []
    for n in range(3):  # dead-lettered as the sync leaves them after their retries
        name = f"v{n}.mp4"
        sid = plugin.stash.add_scene(title=f"V{n}", files=[{"path": f"/data/vids/{name}", "size": 10 + n}])
        rk = plugin.plex.add_item(1, f"/plex/media/{name}", size=10 + n, duration_ms=None)
        dead_letter(plugin, sid, "PlexNotFound", "not in Plex after 5 attempts", f"V{n}")
        ids.append((sid, rk))
    odd = plugin.stash.add_scene(title="Odd", files=[{"path": "/data/odd/zzz.mp4", "size": 1}])
    plugin.plex.add_item(1, "/plex/media/p/zzz.mp4", size=1)
    plugin.plex.add_item(1, "/plex/media/q/zzz.mp4", size=1)
    dead_letter(plugin, odd, "AmbiguousMatch", "two Plex items fit", "Odd")
    help_ = operation(plugin, mode="ui_path_help").output
    assert help_ == {
        "unmatched": 4,
        "rule": "/data/vids=/plex/media",
        "fixes": 3,
        "path_map": "/data/vids=/plex/media;/elsewhere=/plex/media",
        "matches": [  # shown before it is saved: each to the one item of its name, the ambiguous one not
            {
                "scene_id": sid,
                "title": f"V{n}",
                "stash_path": f"/data/vids/v{n}.mp4",
                "plex_path": f"/plex/media/v{n}.mp4",
                "rating_key": rk,
            }
            for n, (sid, rk) in enumerate(ids)
        ],
    }
    plugin.configure(path_map=help_["path_map"])  # what the page's button saves through configurePlugin
    assert operation(plugin, mode="ui_recheck").output == {"queued": 4}
    plugin.wait_drained()
    assert operation(plugin, mode="ui_inbox").output["total"] == 1
    assert dead(plugin) == {odd: "AmbiguousMatch"}


def test_no_rule_is_suggested_from_one_scene_two_plex_items_fit(plugin):
    """One click on such a rule would settle the choice the inbox leaves to the user."""
    plugin.configure(path_map="/stash/media=/plex/media")
    sid = plugin.stash.add_scene(title="Two fit", files=[{"path": "/stash/media/a/clip.mp4", "size": 5}])
    plugin.plex.add_item(1, "/plex/media/x/clip.mp4", size=5)
    plugin.plex.add_item(1, "/plex/media/y/clip.mp4", size=5)
    assert plugin.task("all").error is None
    plugin.wait_drained()
    assert dead(plugin) == {sid: "AmbiguousMatch"}
    assert operation(plugin, mode="ui_path_help").output == {
        "unmatched": 1,
        "rule": None,
        "fixes": 0,
        "path_map": None,
        "matches": [],
    }
    out = cli(plugin, "unmatched", "--json").json()
    assert out["count"] == 1 and out["suggested_path_map"] is None


def test_thumbs_are_plex_posters_as_image_data_without_the_token(plugin):
    _, rk = plugin.add_scene(1)
    out = operation(plugin, mode="ui_thumbs", rating_keys=f"{rk},99999").output
    head, data = out["images"][str(rk)].split(",", 1)
    assert head == "data:image/png;base64" and base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    assert out["images"]["99999"] is None and plugin.plex.token not in str(out)
    bad = operation(plugin, mode="ui_thumbs", rating_keys="")
    assert bad.error == "args.rating_keys must list 1 to 600 Plex ratingKeys (e.g. \"12,34\"), got ''"
    long = operation(plugin, mode="ui_thumbs", rating_keys=",".join(["1"] * 5000))  # over 600: named, not echoed whole
    assert long.error.endswith("got " + repr(",".join(["1"] * 5000))[:59] + "…")


def test_with_plex_down_the_inbox_still_lists_its_scenes_and_says_why_no_candidates(plugin):
    from tests.test_ui_modes import closed_port

    sid = plugin.stash.add_scene(title="Two fit", files=[{"path": "/stash/media/a/clip.mp4", "size": 5}])
    dead_letter(plugin, sid, "AmbiguousMatch", "two Plex items fit", "Two fit")
    plugin.configure(plex_url=f"http://127.0.0.1:{closed_port()}")
    out = operation(plugin, mode="ui_inbox")
    assert out.error is None, out.stderr
    assert [(s["scene_id"], s["candidates"]) for s in out.output["scenes"]] == [(sid, [])]
    assert out.output["plex_problem"].startswith("Plex refused the connection")
    help_ = operation(plugin, mode="ui_path_help")
    assert help_.error is None and help_.output["rule"] is None


def test_a_cards_held_by_mark_and_a_pin_onto_that_item_give_one_answer(plugin):
    """A candidate is marked another scene's exactly when a pin onto it is refused: the
    recorded owner must still hold the item's file (worker/release.py ``holders``)."""
    moved, left = plugin.add_scene(1, name="x/clip.mp4")[0], plugin.add_scene(2, name="y/clip.mp4")[0]
    assert plugin.task("all").error is None
    plugin.wait_drained()
    plugin.stash.update_scene(moved, files=[{"path": "/stash/media/moved.mp4", "size": 1001}])  # not synced yet
    sid = plugin.stash.add_scene(title="Two fit", files=[{"path": "/stash/media/a/clip.mp4", "size": 5}])
    dead_letter(plugin, sid, "AmbiguousMatch", "two Plex items fit", "Two fit")
    (card,) = operation(plugin, mode="ui_inbox").output["scenes"]
    marks = {c["path"]: (c["rating_key"], c["held_by"]) for c in card["candidates"]}
    (free, free_mark), (held, held_mark) = marks["/plex/media/x/clip.mp4"], marks["/plex/media/y/clip.mp4"]
    assert (free_mark, held_mark) == (None, left)
    refused = operation(plugin, mode="ui_pin", scene_id=sid, rating_key=held)
    assert refused.error is not None and refused.error.startswith(f"Plex item {held} is scene {left} ('Scene 2')'s")
    assert operation(plugin, mode="ui_pin", scene_id=sid, rating_key=free).error is None
