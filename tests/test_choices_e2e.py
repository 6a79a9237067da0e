"""Field choices and scene filters end to end: the real plugin process, both emulators.

Each option group seeds a small library once and syncs it with the defaults; then one
option at a time is changed (cumulatively) and ``all`` runs again. Each step checks
what the Plex items show AND which items Plex was asked to change: exactly the ones
the option affects (the desired-state hash holds everything that shapes a write, so
the others are not even queued, or are planned to no request at all).
"""

from __future__ import annotations

import pytest

from tests.test_ui_modes import operation


class Library:
    """The plugin plus the settings built up step by step."""

    def __init__(self, plugin) -> None:
        self.plugin, self.settings = plugin, {}
        self.keys: dict[str, int] = {}
        self.runs: list = []

    def scene(self, label: str, n: int, plex_title: str | None = None, **kw) -> int:
        name = f"scene-{n:05d}.mp4"
        sid = self.plugin.stash.add_scene(
            files=[{"path": f"/stash/media/{name}", "size": 1000 + n, "duration": 60.0}], **kw
        )
        self.keys[label] = self.plugin.plex.add_item(
            1, f"/plex/media/{name}", title=plex_title, size=1000 + n, duration_ms=60000
        )
        return sid

    def item(self, label: str) -> dict:
        return self.plugin.plex.item(self.keys[label])

    def sync(self, **settings) -> tuple[set[str], dict]:
        """Save ``settings`` on top of the earlier ones, run ``all``; the labels Plex was asked to change."""
        self.settings.update(settings)
        self.plugin.configure(**self.settings)
        self.plugin.plex.clear_requests()
        run = self.plugin.task("all")
        self.runs.append(run)
        assert run.error is None and run.output["failed"] == 0, run.stderr
        plex = self.plugin.plex
        touched = {int(r["query"]["id"][0]) for r in plex.edit_requests()}
        touched |= {int(r["query"]["key"][0]) for r in plex.rate_requests()}
        touched |= {int(r["path"].split("/")[3]) for r in plex.upload_requests()}
        by_key = {rk: label for label, rk in self.keys.items()}
        return {by_key[k] for k in touched}, run.output


@pytest.fixture
def library(plugin):
    return Library(plugin)


def test_field_choices(library):
    stash = library.plugin.stash
    one = library.scene(
        "one",
        1,
        title="Alpha",
        details="Sum 1",
        date="2024-01-02",
        studio="Studio A",
        tags=["Tag1", "Tag2"],
        performers=["P1"],
        director="D1, D2",
        rating100=73,
        code="AB-1",
        groups=["Series G"],
    )
    library.scene("two", 2, plex_title="Plex's own")
    three = library.scene(
        "three", 3, title="Gamma", date="2023-05-05", studio="Studio B", tags=["Tag3"], rating100=40, code="C-3"
    )
    stash.set_studio_parent("Studio A", "Network N")

    # defaults: tags as genres, the studio as collection, director split on commas, rating in half stars
    touched, _ = library.sync()
    assert touched == {"one", "two", "three"}
    one_item = library.item("one")
    assert one_item["fields"]["title"] == "Alpha" and one_item["fields"]["userRating"] == "7.5"
    assert one_item["tags"]["genre"] == ["Tag1", "Tag2"] and one_item["tags"]["label"] == []
    assert one_item["tags"]["director"] == ["D1", "D2"] and one_item["tags"]["collection"] == ["Studio A"]
    assert not one_item["fields"]["tagline"] and not one_item["fields"]["contentRating"]
    assert library.item("three")["fields"]["userRating"] == "4"
    assert library.item("two")["fields"]["title"] == "Plex's own"  # no title in Stash, no template: left
    assert library.item("two")["fields"]["userRating"] is None

    touched, _ = library.sync(tags_as="labels")
    assert touched == {"one", "three"}
    assert library.item("one")["tags"]["label"] == ["Tag1", "Tag2"] and library.item("one")["tags"]["genre"] == []

    touched, _ = library.sync(collections="studio, parent_studio, groups")
    assert touched == {"one"}
    assert library.item("one")["tags"]["collection"] == ["Studio A", "Network N", "Series G"]

    touched, _ = library.sync(content_rating="XXX")
    assert touched == {"one", "two", "three"}
    assert {library.item(x)["fields"]["contentRating"] for x in ("one", "two", "three")} == {"XXX"}

    touched, _ = library.sync(tagline_from_code="true")
    assert touched == {"one", "three"}
    assert library.item("one")["fields"]["tagline"] == "AB-1"

    touched, _ = library.sync(title_template="{studio} - {title}")
    assert touched == {"one", "two", "three"}
    assert library.item("one")["fields"]["title"] == "Studio A - Alpha"
    assert library.item("two")["fields"]["title"] == "scene-00002"  # {title} falls back to the file name

    touched, _ = library.sync(sort_title_template="{year} {title}")
    assert touched == {"one", "three"}  # two: "scene-00002" is already what Plex sorts by
    assert library.item("one")["fields"]["titleSort"] == "2024 Alpha"

    stash.update_scene(three, rating100=None)  # no rating in Stash clears the one written
    touched, _ = library.sync()
    assert touched == {"three"} and library.item("three")["fields"]["userRating"] is None

    stash.update_scene(one, rating100=20, director="D3", cover=b"\x89PNG\r\n\x1a\nnew cover")
    touched, _ = library.sync(skip_fields="rating, director, poster")
    assert touched == set()  # left out: neither written nor unlocked
    assert library.item("one")["fields"]["userRating"] == "7.5" and library.item("one")["tags"]["director"] == [
        "D1",
        "D2",
    ]
    assert library.item("one")["uploads"] == 1

    touched, _ = library.sync(collections="none")
    assert touched == {"one", "three"}
    assert library.item("one")["tags"]["collection"] == []

    # skip_fields unset, the public Stash2Plex plugin's switch saved as false: that field is not
    # written, and the fields no longer left out are written again
    stash.update_scene(one, details="Changed in Stash")
    touched, _ = library.sync(skip_fields="", sync_summary=False)
    assert touched == {"one"}
    one_item = library.item("one")
    assert one_item["fields"]["summary"] == "Sum 1" and one_item["fields"]["userRating"] == "2"
    assert one_item["tags"]["director"] == ["D3"] and one_item["uploads"] == 2


def test_scene_filters(library):
    plugin, stash = library.plugin, library.plugin.stash
    private = library.scene("private", 1, title="P", tags=["Private"])
    internal = library.scene("internal", 2, title="I", tags=["Kinky", "Internal/Child"])
    loose = library.scene("unorganized", 3, title="U", tags=["Public"])
    library.scene("organized", 4, title="O", tags=["public"], organized=True)
    stash.set_tag_parents("Internal/Child", ["Internal"])
    stash.set_tag_parents("Private", ["Hidden Things"])

    touched, _ = library.sync()
    assert touched == {"private", "internal", "unorganized", "organized"}
    assert library.item("internal")["tags"]["genre"] == ["Kinky", "Internal/Child"]

    touched, _ = library.sync(hide_tags="INTERNAL")  # any case, and the children of a hidden tag
    assert touched == {"internal"}
    assert library.item("internal")["tags"]["genre"] == ["Kinky"]

    stash.update_scene(private, title="P changed")
    touched, output = library.sync(skip_tags="hidden things")  # the parent of Private: skipped too
    assert touched == set() and output["out_of_scope"] == 1
    assert "1 out of scope (left as they are in Plex)" in " ".join(library.runs[-1].messages("info"))
    assert library.item("private")["fields"]["title"] == "P"  # left as it is

    stash.update_scene(loose, title="U changed")
    touched, output = library.sync(organized_only=True)
    assert touched == set() and output["out_of_scope"] == 3  # only "organized" is
    assert library.item("unorganized")["fields"]["title"] == "U"

    # a hook for a scene out of scope: the drainer acknowledges it without writing
    plugin.plex.clear_requests()
    plugin.hook(stash.update_scene(private, title="P again"))
    plugin.wait_drained()
    assert plugin.plex.edit_requests() == [] and library.item("private")["fields"]["title"] == "P"
    assert f"scene {private} is not synced: not organized" in plugin.drainer_log()

    verify = plugin.task("reconcile").output  # Verify Plex against Stash: reported, left as they are
    assert verify["drift"]["out_of_scope"] == {"count": 3, "first": sorted([private, internal, loose])}, verify
    assert plugin.plex.edit_requests() == []
    panel = operation(plugin, mode="ui_scene", scene_id=str(private)).output  # the scene panel in Stash's UI
    assert (panel["state"], panel["reason"]) == ("out_of_scope", "not organized (organized_only is on)"), panel

    touched, output = library.sync(organized_only=False, skip_tags="")  # back in scope: synced again
    assert touched == {"private", "unorganized"} and output["out_of_scope"] == 0
