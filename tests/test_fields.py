"""The table of synced fields (validation/fields.py ``SYNCED``) and everything derived from
it: the Stash query, the hook's filter, the values, the reader of Plex's state, the
``skip_fields`` names and the page's labels. A row added to the table reaches all of them
or one of these tests fails."""

from __future__ import annotations

import pytest
from graphql import parse, validate

from hooks.lane import scene_records
from plex.client import PlexClient
from plex.desired import FIELD_VALUES, TAG_VALUES, Choices, desired_for
from plex.plan import Written, edit_params, plan_item
from stash.client import SCENE_FIELDS
from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator
from validation.config import load_settings
from validation.document import hook_values
from validation.fields import (
    FIELD,
    FIELDS,
    LABELS,
    PHOTO_ONLY,
    PLEX_FIELDS,
    POSTER,
    RATING,
    SCENE_SELECTION,
    SYNCED,
    TAG_TYPES,
    TAGS,
    TEMPLATE_SOURCES,
    check_fields,
    scene_selection,
)
from validation.metadata import scene_from_stash

REQUIRED = {"plex_url": "http://plex:32400", "plex_token": "tok"}


def scene(**kw):
    raw = {
        "id": 7,
        "title": "Alpha",
        "details": "Sum",
        "date": "2024-01-02",
        "code": "AB-1",
        "director": "D1",
        "rating100": 73,
        "studio": {"id": "3", "name": "Studio A", "parent_studio": {"name": "Network N"}},
        "performers": [{"id": "4", "name": "P1"}],
        "tags": [{"id": "5", "name": "Tag1"}],
        "groups": [{"group": {"id": "6", "name": "Series G"}}],
        "files": [{"path": "/m/a.mp4", "size": 1, "duration": 1.0}],
        "paths": {"screenshot": "http://stash/scene/7/screenshot"},
        **kw,
    }
    return scene_from_stash(raw)


def everything(**settings):
    """Settings under which every row has a value."""
    return Choices.build(
        load_settings(
            {
                **REQUIRED,
                "sort_title_template": "{title}",
                "tagline_from_code": True,
                "content_rating": "XXX",
                "tags_as": "both",
                "collections": "studio,groups",
                **settings,
            }
        )
    )


def test_every_row_has_one_value_function_and_a_label():
    assert set(FIELD_VALUES) == set(PLEX_FIELDS)
    assert set(TAG_VALUES) == set(TAG_TYPES)
    assert set(LABELS) == {row.plex for row in SYNCED}
    assert all(LABELS[key] and LABELS[key] != key for key in LABELS)
    assert len({row.plex for row in SYNCED}) == len(SYNCED)


def test_the_page_labels_every_field_the_preview_names():
    """titleSort and contentRating were shown as raw keys."""
    assert LABELS["titleSort"] == "Sort title" and LABELS["contentRating"] == "Content rating"
    desired = desired_for(scene(), everything())
    assert set(desired.fields) | set(desired.tags) | {"poster"} == set(LABELS)


def test_the_scene_query_reads_what_every_row_and_template_names():
    for row in SYNCED:
        assert all(selection in SCENE_SELECTION for selection in row.stash), row
    for selection, _ in TEMPLATE_SOURCES.values():
        assert selection in SCENE_SELECTION
    assert SCENE_FIELDS == SCENE_SELECTION
    with StashEmulator() as stash:
        query = parse("query Q($ids: [ID!]) { findScenes(ids: $ids) { scenes { %s } } }" % SCENE_SELECTION)
        assert validate(stash._active_schema(), query) == []


@pytest.mark.parametrize("row", SYNCED, ids=lambda row: row.plex)
def test_editing_only_what_a_row_reads_queues_a_job(row):
    for key in row.inputs:
        context = hook_values(
            {"id": 7, "type": "Scene.Update.Post", "input": {"id": "7", key: None}, "inputFields": ["id", key]}
        )
        [record] = scene_records(context, 0.0)
        assert key in record["fields"]


@pytest.mark.parametrize("name", FIELDS)
def test_skip_fields_leaves_each_rows_plex_key_alone(name):
    assert check_fields(name) == (name,)
    keys = {row.plex for row in SYNCED if row.name == name}
    written = desired_for(scene(), everything())
    skipped = desired_for(scene(), everything(skip_fields=name))
    for row in SYNCED:
        if row.kind == FIELD:
            assert (skipped.fields[row.plex] is None) == (row.plex in keys or written.fields[row.plex] is None)
        elif row.kind == TAGS:
            assert (row.plex in skipped.tags) == (row.plex not in keys)
        else:
            assert row.kind == POSTER and (skipped.poster_url is None) == (row.plex in keys)


def test_every_field_written_reads_back_the_same_so_it_is_never_drift():
    """What the planner writes for each row, Plex's state reader reads back as written: a
    field the reader missed would be rewritten and reported as drift on every sync."""
    desired = desired_for(scene(), everything())
    assert all(desired.fields[key] for key in PLEX_FIELDS)  # every field has a value to write
    with PlexEmulator(token="tok") as plex:
        plex.add_section("Stash", ["/plex"], key=1)
        rk = plex.add_item(1, "/plex/a.mp4")
        client = PlexClient(plex.url, plex.token, "test-client")
        state = client.item_state(rk)
        plan = plan_item(desired, state, Written(), preserve=False)
        assert {c.name for c in plan.fields} == set(PLEX_FIELDS)
        client.edit(rk, edit_params(plan))
        for change in plan.fields:
            if change.name == RATING:
                client.rate(rk, float(change.stash))
        again = client.item_state(rk)
        assert {key: again.fields[key] for key in PLEX_FIELDS} == {key: desired.fields[key] for key in PLEX_FIELDS}
        assert plan_item(desired, again, Written(plan.written_fields, plan.written_tags), preserve=False).empty


def test_the_metadata_model_reads_every_field_the_query_asks_for():
    """Each top-level field of the scene query changes the validated scene (``updated_at``
    is the worker's, read from the reply itself): a field added to the table reaches the
    model or this fails."""
    query = parse("{ s { %s } }" % SCENE_SELECTION)
    asked = [f.name.value for f in query.definitions[0].selection_set.selections[0].selection_set.selections]
    full = {
        "id": 7,
        "title": "T",
        "details": "D",
        "date": "2021-03",
        "code": "C",
        "director": "Dir",
        "rating100": 40,
        "organized": True,
        "studio": {"id": "3", "name": "S", "parent_studio": {"name": "N"}},
        "performers": [{"id": "4", "name": "P"}],
        "tags": [{"id": "5", "name": "G"}],
        "groups": [{"group": {"id": "6", "name": "Gr"}}],
        "files": [{"path": "/a.mp4", "size": 1, "duration": 1.0}],
        "paths": {"screenshot": "http://stash/scene/7/screenshot"},
        "updated_at": "2024-01-01T00:00:00Z",
    }
    assert set(asked) == set(full)
    whole = scene_from_stash(full)
    for name in set(asked) - {"id", "files", "updated_at"}:
        assert scene_from_stash({k: v for k, v in full.items() if k != name}) != whole, name


def test_image_path_is_read_only_with_performer_photos():
    """``image_path`` costs Stash a look-up per performer (resolver_model_performer.go
    ``ImagePath``): the query without it is the same query less that one field."""
    assert scene_selection(True) == SCENE_SELECTION and f" {PHOTO_ONLY} " in SCENE_SELECTION
    assert scene_selection(False).split() == [w for w in SCENE_SELECTION.split() if w != PHOTO_ONLY]
    with StashEmulator() as stash:
        query = parse("query Q { findScenes { scenes { %s } } }" % scene_selection(False))
        assert validate(stash._active_schema(), query) == []
