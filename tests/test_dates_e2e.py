"""Dates end to end (hook → queue → drainer → Plex): Plex's ``year`` from the scene's date,
and Stash v0.30's partial dates (``2021``, ``2021-03``: pkg/models/date.go, date
precision), which give a year and never a made-up day."""

from __future__ import annotations

import pytest


def edited_keys(plugin) -> set[str]:
    return {key for r in plugin.plex.edit_requests() for key in r["query"]}


@pytest.mark.fresh
def test_editing_only_a_partial_date_syncs_the_year_and_no_day(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.plex.clear_requests()
    context = plugin.stash.update_scene(sid, date="2021-03")
    assert context["inputFields"] == ["id", "date"]
    run = plugin.hook(context)
    assert run.error is None and run.output == f"scene {sid} queued", run.stderr
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert item["fields"]["year"] == "2021" and "year" in item["locks"]
    assert item["fields"]["originallyAvailableAt"] is None  # no made-up first of March
    assert "originallyAvailableAt.value" not in edited_keys(plugin)
    assert "is not YYYY-MM-DD" not in plugin.drainer_log()  # no warning on every sync
    plugin.plex.clear_requests()
    assert plugin.task("all").error is None
    plugin.wait_drained()
    assert plugin.plex.edit_requests() == []  # nothing drifts: the year reads back as written


def test_a_day_made_partial_clears_our_day_and_keeps_the_users(plugin):
    ours, ours_rk = plugin.add_scene(1, date="2021-03-15")
    plugin.stash.add_scene(title="Scene 2", date="2019", files=[{"path": "/stash/media/b.mp4"}])
    theirs_rk = plugin.plex.add_item(1, "/plex/media/b.mp4", originallyAvailableAt="2019-06-01")
    plugin.configure(path_map="/stash/media=/plex/media", title_template="{title} ({year})")
    assert plugin.task("all").error is None
    plugin.wait_drained()
    first = plugin.plex.item(ours_rk)["fields"]
    assert (first["originallyAvailableAt"], first["year"], first["title"]) == ("2021-03-15", "2021", "Scene 1 (2021)")
    other = plugin.plex.item(theirs_rk)["fields"]
    assert (other["originallyAvailableAt"], other["year"], other["title"]) == ("2019-06-01", "2019", "Scene 2 (2019)")
    run = plugin.hook(plugin.stash.update_scene(ours, date="2021"))  # less precise in Stash
    assert run.error is None, run.stderr
    plugin.wait_drained()
    after = plugin.plex.item(ours_rk)["fields"]
    assert (after["originallyAvailableAt"] or "", after["year"]) == ("", "2021")  # the day we wrote is gone


def test_skip_fields_year_leaves_plexs_year_and_writes_the_date(plugin):
    plugin.stash.add_scene(title="Scene 1", date="2021-03-15", files=[{"path": "/stash/media/a.mp4"}])
    rk = plugin.plex.add_item(1, "/plex/media/a.mp4", year="1999")
    plugin.configure(path_map="/stash/media=/plex/media", skip_fields="year")
    assert plugin.task("all").error is None
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    assert (item["fields"]["originallyAvailableAt"], item["fields"]["year"]) == ("2021-03-15", "1999")
    assert "year" not in item["locks"] and "year.value" not in edited_keys(plugin)
