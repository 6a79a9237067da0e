"""The edit planner (plex/plan.py): what to change on a Plex item and the ONE edit()
call's parameters, as exact values. Pure: no Plex, no ledger."""

from __future__ import annotations

import pytest

from plex.client import PlexItemState
from plex.plan import (
    Desired,
    FieldChange,
    TagChange,
    Written,
    edit_params,
    plan_item,
    release_plan,
    split_removals,
)


def item(fields: dict[str, str] | None = None, **tags: tuple[str, ...]) -> PlexItemState:
    return PlexItemState(rating_key=101, section_id=1, files=("/plex/a.mp4",), fields=fields or {}, tags=tags)


def want(title: str | None = "New", **tags: tuple[str, ...]) -> Desired:
    return Desired(fields={"title": title}, tags=tags, poster_url=None)


# -- fields ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("wanted", "on_plex", "wrote", "preserve", "change"),
    [
        ("New", "Old", None, False, FieldChange("title", "Old", "New")),
        ("New", "New", "Old", False, None),  # already shows it
        (None, "Old", None, False, None),  # Stash2Plex leaves the field alone
        ("", "Old", None, False, None),  # Stash has nothing and never had: Plex's value stays
        ("", "Ours", "Ours", False, FieldChange("title", "Ours", "")),  # cleared in Stash: cleared in Plex
        ("", "User's", "Ours", False, None),  # the user changed it in Plex since: not ours to clear
        ("New", "User's", "Ours", True, None),  # preserve: the user's value stays
        ("New", "", "Ours", True, FieldChange("title", "", "New")),  # preserve fills an empty field
        ("New", "Ours", "Ours", True, FieldChange("title", "Ours", "New")),  # ...and updates our own value
    ],
)
def test_field_rules(wanted, on_plex, wrote, preserve, change):
    written = Written(fields={"title": wrote} if wrote is not None else {})
    plan = plan_item(want(wanted), item({"title": on_plex}), written, preserve)
    assert plan.fields == ((change,) if change else ())
    assert plan.tags == ()


def test_what_was_written_is_carried_forward():
    plan = plan_item(want("New", genre=("A",)), item({"title": "Old"}, genre=("A",)), Written({"summary": "S"}), False)
    assert plan.written_fields == {"summary": "S", "title": "New"}
    assert plan.written_tags == {"genre": ["A"]}  # already shown in Plex; tag types not wanted are not planned
    unchanged = plan_item(want("Same"), item({"title": "Same"}), None, False)
    assert unchanged.empty and unchanged.written_fields == {"title": "Same"}


# -- tags -----------------------------------------------------------------------------------
def test_tags_keep_the_users_and_remove_only_ours():
    # Plex: B (ours), C (the user's), D (ours, gone from Stash). Stash wants A, B.
    plan = plan_item(
        want(None, genre=("A", "B")), item(genre=("B", "C", "D")), Written(tags={"genre": ["B", "D"]}), False
    )
    assert plan.tags == (TagChange("genre", ("B", "C", "D"), ("A", "B", "C"), ("D",)),)
    assert plan.written_tags["genre"] == ["A", "B"]
    assert plan.describe() == ["genre +A", "genre -D"]


def test_tags_already_right_need_no_change_and_preserve_leaves_users_tags():
    assert plan_item(want(None, genre=("A",)), item(genre=("A",)), None, False).empty
    kept = plan_item(want(None, genre=("A",)), item(genre=("U",)), Written(tags={"genre": ["X"]}), True)
    assert kept.tags == () and kept.written_tags["genre"] == ["X"]  # fill-only: U stays, our record too


# -- the edit() parameters ------------------------------------------------------------------
def test_edit_params_lock_every_field_and_list_every_tag():
    plan = plan_item(
        Desired(fields={"title": "New", "summary": ""}, tags={"genre": ("A", "B, c")}, poster_url=None),
        item({"title": "Old", "summary": "Ours"}, genre=("Old tag", "U")),
        Written(fields={"summary": "Ours"}, tags={"genre": ["Old tag"]}),
        False,
    )
    assert edit_params(plan) == {
        "title.value": "New",
        "title.locked": 1,
        "summary.value": "",
        "summary.locked": 1,
        "genre.locked": 1,
        "genre[0].tag.tag": "A",
        "genre[1].tag.tag": "B, c",
        "genre[2].tag.tag": "U",
        "genre[].tag.tag-": "Old%20tag",  # removals are URL-quoted, comma-separated
    }
    assert plan.describe() == ["title: 'Old' → 'New'", "summary: 'Ours' → ''", "genre +A, B, c", "genre -Old tag"]


def test_removed_tags_with_commas_are_quoted_one_by_one():
    plan = plan_item(
        want(None, actor=()), item(actor=("Doe, J", "A&B")), Written(tags={"actor": ["Doe, J", "A&B"]}), False
    )
    assert edit_params(plan) == {"actor.locked": 1, "actor[].tag.tag-": "Doe%2C%20J,A%26B"}


# -- releasing an item no scene owns --------------------------------------------------------
def test_a_release_takes_off_only_what_is_still_ours_and_unlocks_it():
    plex = item(
        {"title": "Ours", "summary": "User's", "studio": "S", "userRating": "8"},
        genre=("A", "U"),
        actor=("P",),
        collection=(),
    )
    wrote = Written(
        fields={"title": "Ours", "summary": "Ours", "studio": "S", "userRating": "8"},
        tags={"genre": ["A"], "actor": ["P"], "collection": ["S"]},
    )
    plan = release_plan(plex, wrote, "a", preserve=False)
    assert plan.fields == (
        FieldChange("title", "Ours", "a"),  # Plex's own title for the file a.mp4
        FieldChange("studio", "S", ""),
        FieldChange("userRating", "8", ""),
    )  # the summary the user typed stays
    assert plan.tags == (TagChange("genre", ("A", "U"), ("U",), ("A",)), TagChange("actor", ("P",), (), ("P",)))
    assert edit_params(plan, locked=False) == {
        "title.value": "a",
        "title.locked": 0,
        "studio.value": "",
        "studio.locked": 0,
        "genre.locked": 0,
        "genre[0].tag.tag": "U",
        "genre[].tag.tag-": "A",
        "actor.locked": 0,
        "actor[].tag.tag-": "P",
    }
    kept = release_plan(plex, wrote, "a", preserve=True)  # fill-only: a list holding the user's tags stays
    assert [t.tag_type for t in kept.tags] == ["actor"]
    assert release_plan(item({"title": "a"}), Written({"title": "a"}), "a", False).empty  # already Plex's own


def test_a_long_removal_list_goes_in_as_many_requests_as_it_needs():
    params = {"genre.locked": 0, "genre[0].tag.tag": "U", "genre[].tag.tag-": ",".join(f"t{n}" for n in range(10))}

    def length(p: dict) -> int:
        return sum(len(k) + len(str(v)) for k, v in p.items())

    assert split_removals(params, length, 200) == [params]
    parts = split_removals(params, length, 50)
    assert parts == [
        {"genre.locked": 0, "genre[0].tag.tag": "U", "genre[].tag.tag-": "t0"},  # 48: with ",t1" 51
        {"genre.locked": 0, "genre[].tag.tag-": "t1,t2,t3,t4,t5,t6,t7"},  # 49
        {"genre.locked": 0, "genre[].tag.tag-": "t8,t9"},
    ]
    assert all(length(p) <= 50 for p in parts)


def test_the_state_hash_is_unchanged_by_the_faster_digest():
    """Ledgers written before keep their hashes: the digest hashes the same bytes as
    ``dataclasses.asdict`` did."""
    import hashlib
    import json
    from dataclasses import asdict

    from plex.plan import Desired

    desired = Desired({"title": "Ä", "summary": None}, {"genre": ("x", "Y"), "actor": ()}, "http://stash/s.jpg")
    extra = [["/plex/a.mp4"], False]
    state = asdict(desired)
    assert state.pop("photos") == {}  # without performer photos, the hash is what it was before them
    before = json.dumps([state, extra], sort_keys=True, ensure_ascii=False)
    assert desired.digest(extra) == hashlib.sha256(before.encode()).hexdigest()
    with_photo = Desired(desired.fields, desired.tags, desired.poster_url, {"A": "http://s/performer/1/image?t=5"})
    assert with_photo.digest(extra) not in (desired.digest(extra), Desired(**{**state, "photos": {"A": "x"}}).digest())


# -- performer photos -----------------------------------------------------------------------
ANN = "http://stash.lan:9999/performer/3/image?t=17"


def photographed(**photos: str) -> Desired:
    return Desired(fields={}, tags={"actor": ("Ann", "Bea")}, poster_url=None, photos=photos)


def test_a_photo_goes_beside_its_actor_even_when_the_list_is_unchanged():
    plex = item(actor=("Bea", "Ann", "User's"))
    plan = plan_item(photographed(Ann=ANN), plex, Written(tags={"actor": ["Ann", "Bea"]}), False)
    assert plan.tags == (TagChange("actor", ("Bea", "Ann", "User's"), ("Ann", "Bea", "User's"), (), {"ann": ANN}),)
    assert edit_params(plan) == {
        "actor.locked": 1,
        "actor[0].tag.tag": "Ann",
        "actor[0].tag.thumb": ANN,  # python-plexapi#462: beside actor[N].tag.tag
        "actor[1].tag.tag": "Bea",
        "actor[2].tag.tag": "User's",
    }
    assert plan.describe() == ["actor photo: Ann"]


def test_a_photo_plex_shows_or_this_process_sent_is_not_sent_again():
    shown = PlexItemState(101, 1, (), {}, {"actor": ("Ann", "Bea")}, photos={"ann": ANN})
    assert plan_item(photographed(Ann=ANN), shown, None, False).empty
    unread = item(actor=("Ann", "Bea"))  # read before another item's edit sent the photo
    assert plan_item(photographed(Ann=ANN), unread, None, False, sent={"ann": ANN}).empty
    newer = ANN.replace("t=17", "t=18")
    assert (
        edit_params(plan_item(photographed(Ann=newer), shown, None, False, sent={"ann": ANN}))["actor[0].tag.thumb"]
        == newer
    )


def test_fill_only_mode_sends_no_photo_with_a_list_holding_the_users_actors():
    plex = item(actor=("Ann", "Bea", "User's"))
    assert plan_item(photographed(Ann=ANN), plex, Written(tags={"actor": ["Ann", "Bea"]}), True).empty
    ours = plan_item(photographed(Ann=ANN), item(actor=("Ann", "Bea")), Written(tags={"actor": ["Ann", "Bea"]}), True)
    assert ours.tags[0].photos == {"ann": ANN}
