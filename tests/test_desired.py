"""What a scene should look like in Plex under the settings (pure: exact values)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from plex.desired import Choices, desired_for, plex_rating, with_descendants
from validation.config import load_settings
from validation.fields import render_template
from validation.metadata import scene_from_stash

REQUIRED = {"plex_url": "http://plex:32400", "plex_token": "tok"}


def scene(**kw):
    raw = {
        "id": 7,
        "title": "Alpha",
        "details": "Sum",
        "date": "2024-01-02",
        "code": "AB-1",
        "director": "D1, D2,, D1",
        "rating100": 73,
        "organized": True,
        "studio": {"name": "Studio A", "parent_studio": {"name": "Network N"}},
        "performers": [{"name": "P1"}],
        "tags": [{"name": "Tag1"}, {"name": "Internal/Child"}],
        "groups": [{"group": {"name": "Series G"}, "scene_index": 1}],
        "files": [{"path": "/m/Some File.mp4", "size": 1, "duration": 1.0}],
        "paths": {"screenshot": "http://stash/scene/7/screenshot"},
    }
    raw.update(kw)
    return scene_from_stash(raw)


def desired(tag_parents=None, **settings):
    return desired_for(scene(), Choices.build(load_settings({**REQUIRED, **settings}), tag_parents))


@pytest.mark.parametrize(("rating100", "shown"), [(None, ""), (73, "7.5"), (20, "2.0"), (100, "10.0"), (1, "0.0")])
def test_rating_is_kept_to_the_nearest_half_point(rating100, shown):
    assert plex_rating(rating100) == shown


def test_defaults():
    d = desired()
    assert d.fields == {
        "title": "Alpha",
        "summary": "Sum",
        "studio": "Studio A",
        "originallyAvailableAt": "2024-01-02",
        "year": "2024",
        "titleSort": None,
        "tagline": None,
        "contentRating": None,
        "userRating": "7.5",
    }
    assert d.tags == {
        "genre": ("Tag1", "Internal/Child"),
        "label": (),
        "actor": ("P1",),
        "director": ("D1", "D2"),
        "collection": ("Studio A",),
    }
    assert d.poster_url == "http://stash/scene/7/screenshot"


def test_choices_shape_the_fields_and_tags():
    d = desired(
        tags_as="both",
        collections="groups, parent_studio, studio",
        content_rating="XXX",
        tagline_from_code=True,
        title_template="[{code}] {title} ({year})",
        sort_title_template="{studio} {date}",
    )
    assert d.fields["title"] == "[AB-1] Alpha (2024)" and d.fields["titleSort"] == "Studio A 2024-01-02"
    assert d.fields["tagline"] == "AB-1" and d.fields["contentRating"] == "XXX"
    assert d.tags["genre"] == d.tags["label"] == ("Tag1", "Internal/Child")
    assert d.tags["collection"] == ("Series G", "Network N", "Studio A")


def test_skipped_fields_are_left_alone():
    d = desired(skip_fields="title, rating, performers, tags, collections, poster, director")
    assert d.fields["title"] is None and d.fields["userRating"] is None
    assert set(d.tags) == set() and d.poster_url is None


def test_collections_none_writes_an_empty_set():
    assert desired(collections="none").tags["collection"] == ()


def test_hidden_tags_cover_their_descendants_in_any_case():
    parents = {"Internal/Child": ["Internal"], "Internal": ["Meta"], "Tag1": []}
    assert desired(parents, hide_tags="meta").tags["genre"] == ("Tag1",)
    assert with_descendants(("A",), {"B": ["A"], "C": ["B"], "A": ["C"]}) == {"a", "b", "c"}  # a cycle


def test_title_template_falls_back_to_the_file_name():
    s = scene(title=None, studio=None)
    d = desired_for(s, Choices.build(load_settings({**REQUIRED, "title_template": "{studio} - {title}"})))
    assert d.fields["title"] == "Some File"
    assert desired_for(s, Choices.build(load_settings(REQUIRED))).fields["title"] is None


@pytest.mark.parametrize(
    ("template", "values", "text"),
    [
        ("{studio} - {title}", {"title": "A"}, "A"),
        ("{date} {title}", {"title": "A", "date": "2024-01-02"}, "2024-01-02 A"),
        ("[{code}] {title}", {"title": "A"}, "A"),
        ("{title}  |  {studio}", {"title": "A", "studio": "S"}, "A | S"),
    ],
)
def test_render_template(template, values, text):
    assert render_template(template, values) == text


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"skip_fields": "title, ratings"}, "setting skip_fields: 'ratings' is not a field Stash2Plex writes"),
        ({"tags_as": "tags"}, "setting tags_as: must be one of genres, labels, both, got 'tags'"),
        ({"collections": "series"}, "setting collections: 'series' is not a collection source"),
        ({"organized_only": "maybe"}, "setting organized_only: must be true or false, got 'maybe'"),
    ],
)
def test_bad_choices_are_clear_errors(settings, message):
    with pytest.raises(ConfigError, match="^" + __import__("re").escape(message)):
        load_settings({**REQUIRED, **settings})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"title_template": "{name}"}, "setting title_template: {name} is not a field a template can use"),
        ({"sort_title_template": "{title!r}"}, "setting sort_title_template: {title!r} is not a field"),
        ({"title_template": "{title"}, "setting title_template: is not a valid template"),
    ],
)
def test_a_bad_template_is_named_and_not_used(settings, message):
    """A template is optional: a bad one is left out (the plain title, Plex's sort title), named."""
    loaded = load_settings({**REQUIRED, **settings})
    (name,) = settings
    assert getattr(loaded, name) == ""
    (problem,) = loaded.problems
    assert problem.startswith(message) and problem == loaded.problem(name), problem
    assert problem.endswith("until it is fixed")


def test_the_public_plugins_field_switches_saved_false_become_skip_fields():
    settings = load_settings({**REQUIRED, "sync_summary": False, "sync_tags": "false", "sync_studio": True})
    assert settings.skip_fields == ("summary", "tags")
    assert settings.adopted.taken_over == ("sync_summary, sync_tags → skip_fields = 'summary, tags'",)
    assert settings.adopted.ignored == ("sync_studio (true: written, as by default)",)
    everything = load_settings({**REQUIRED, "sync_master": False})
    assert not any(everything.writes(f) for f in ("title", "rating", "poster", "collections"))
    assert load_settings({**REQUIRED, "sync_summary": False, "skip_fields": "poster"}).skip_fields == ("poster",)


def test_the_state_hash_input_differs_only_where_the_output_does():
    """A scene without tags looks the same whether tags go to genres or labels."""
    bare = scene(tags=[])
    as_genres = desired_for(bare, Choices.build(load_settings(REQUIRED)))
    as_labels = desired_for(bare, Choices.build(load_settings({**REQUIRED, "tags_as": "labels"})))
    assert as_genres.digest() == as_labels.digest()
    assert desired(tags_as="labels").digest() != desired().digest()


@pytest.mark.parametrize("field", ["rating100", "director", "code", "groups", "organized"])
def test_a_hook_for_a_newly_written_field_queues_the_scene(field):
    from hooks.lane import scene_records
    from validation.document import hook_values

    context = hook_values(
        {"id": 3, "type": "Scene.Update.Post", "input": {"id": "3", field: None}, "inputFields": ["id", field]}
    )
    assert [r["fields"] for r in scene_records(context, 0.0)] == [[field]]


@pytest.mark.parametrize(
    ("stash", "day", "year", "warned"),
    [
        ("2021-03-15", "2021-03-15", "2021", False),
        ("2021-03", "", "2021", False),  # Stash v0.30+: a month, no made-up day
        ("2021", "", "2021", False),  # a year
        ("2021-13", "", "", True),
        ("0000", "", "", True),
        ("March 2021", "", "", True),
        (None, "", "", False),
    ],
)
def test_partial_dates_give_a_year_and_never_a_made_up_day(stash, day, year, warned):
    s = scene(date=stash)
    d = desired_for(s, Choices.build(load_settings({**REQUIRED, "title_template": "{title} ({year}) {date}"})))
    assert (d.fields["originallyAvailableAt"], d.fields["year"]) == (day, year)
    assert d.fields["title"] == " ".join(f"Alpha ({year}) {s.date}".replace("()", "").split()).strip()
    assert any("is not YYYY-MM-DD, YYYY-MM or YYYY" in w for w in s.warnings) == warned


def test_skip_fields_year_leaves_the_year_alone_and_writes_the_date():
    d = desired(skip_fields="year")
    assert (d.fields["originallyAvailableAt"], d.fields["year"]) == ("2024-01-02", None)
