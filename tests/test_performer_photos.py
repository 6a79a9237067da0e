"""Performer photos on Plex's cast (``performer_photos``), through the real plugin process.

Plex takes an actor's photo only as a URL it fetches itself and keeps one per actor for the
whole library; the Plex emulator keeps it so and fetches it as PMS does, the Stash emulator
serves performer images behind Stash's login. What is checked: a photo is written once per
performer and image (not per item, not on a re-run), only for performers with an image, is
followed when the image changes, and never carries a credential: with a login in front of
Stash no photo URL is written and the user is told once where they look.
"""

from __future__ import annotations

from tests.conftest import STASH_API_KEY, STASH_COOKIE
from tests.emulators.stash_emulator import cover_png
from tests.test_entity_hooks import _fire
from tests.test_ui_modes import operation


def _thumbs(plugin) -> list[str]:
    """Every photo URL Plex was sent since its request log was cleared (``actor[N].tag.thumb``)."""
    return [
        value
        for request in plugin.plex.edit_requests()
        for key, values in request["query"].items()
        if key.endswith(".tag.thumb")
        for value in values
    ]


def _cast(plugin, items) -> dict[int, dict[str, str | None]]:
    """Per scene, each actor its item shows and that actor's photo URL."""
    return {
        n: {actor["tag"]: actor["thumb"] for actor in plugin.plex.item(rk)["actors"]} for n, (_, rk) in items.items()
    }


def _setup(plugin, **settings):
    """Ann (with an image) and Bea (without) on scenes 0 and 1, Bea alone on scene 2."""
    items = {n: plugin.add_scene(n, performers=["Ann", "Bea"] if n < 2 else ["Bea"]) for n in range(3)}
    ann = plugin.stash.entity_id("performer", "Ann")
    plugin.stash.set_performer_image(ann, cover_png(900, 1))
    plugin.configure(performer_photos=True, **settings)
    return items, ann


def _no_stash_credential(plugin) -> None:
    """No request Plex received, and no file of the data folder, carries Stash's API key or
    session, nor an ``apikey=`` parameter (stashapi's log says "with ApiKey", no key)."""
    seen = repr(plugin.plex.requests)
    assert "apikey" not in seen.lower() and STASH_API_KEY not in seen and STASH_COOKIE not in seen
    for path in plugin.data_dir.rglob("*"):
        try:
            blob = path.read_bytes().lower() if path.is_file() else b""
        except FileNotFoundError:
            continue  # SQLite's -wal file, taken away by a process finishing
        assert b"apikey=" not in blob and STASH_API_KEY.lower().encode() not in blob, path


def test_a_photo_is_written_once_per_image_followed_when_it_changes_and_never_again(plugin):
    plugin.stash.api_key, plugin.stash.auth_required = "", False  # a Stash without a login
    items, ann = _setup(plugin)
    first = plugin.stash.performer_image_url(ann)

    preview = operation(plugin, mode="ui_preview").output["scenes"]  # what the page's Preview shows
    photos = {e["scene_id"]: [t.get("photos") for t in e["tags"] if t["type"] == "actor"] for e in preview}
    assert photos == {items[0][0]: [["Ann"]], items[1][0]: [["Ann"]], items[2][0]: [[]]}
    assert plugin.plex.edit_requests() == []

    assert plugin.task("all").output["synced"] == 3
    assert _cast(plugin, items) == {0: {"Ann": first, "Bea": None}, 1: {"Ann": first, "Bea": None}, 2: {"Bea": None}}
    assert _thumbs(plugin) == [first]  # one actor, one photo for the whole library: written once
    assert [(f["url"], f["ok"]) for f in plugin.plex.wait_photo_fetches(1)] == [(first, True)]
    assert plugin.task("health_check").output["performer_photos"] == {"base": plugin.stash.url, "problem": None}

    plugin.plex.clear_requests()
    assert plugin.task("all").output["synced"] == 0
    assert plugin.plex.edit_requests() == []  # a re-run writes nothing

    # A new image: Stash's image_path carries a new timestamp, and the performer's hook is
    # followed as a rename is: every item showing Ann keeps a photo Plex can fetch.
    _fire(plugin, plugin.stash.set_performer_image(ann, cover_png(900, 2)), lambda: plugin.plex.photo("Ann") != first)
    second = plugin.stash.performer_image_url(ann)
    assert second != first
    assert _cast(plugin, items) == {0: {"Ann": second, "Bea": None}, 1: {"Ann": second, "Bea": None}, 2: {"Bea": None}}
    assert _thumbs(plugin) == [second]
    assert [(f["url"], f["ok"]) for f in plugin.plex.wait_photo_fetches(2)][1:] == [(second, True)]

    plugin.plex.clear_requests()
    assert plugin.task("all").output["synced"] == 0
    assert plugin.plex.edit_requests() == []


def test_behind_a_login_no_photo_url_is_written_and_the_user_is_told_once(plugin):
    # The fixture's Stash asks for a login and has an API key: Plex could fetch a photo only
    # with a credential in its URL, which Plex would store and show.
    items, ann = _setup(plugin)

    run = plugin.task("all")
    assert run.output["synced"] == 3
    notices = [m for m in run.messages("warning") if "performer photos are not written" in m]
    assert len(notices) == 1 and "performer_photo_base_url" in notices[0], run.messages()
    assert _thumbs(plugin) == [] and plugin.plex.photo("Ann") is None
    assert _cast(plugin, items)[0] == {"Ann": None, "Bea": None}
    _no_stash_credential(plugin)

    check = plugin.task("health_check").output
    assert check["performer_photos"]["base"] is None
    assert any("performer photos are not written" in p for p in check["problems"]), check["problems"]
    assert plugin.task("ui_status").output["performer_photos"]["fix"].startswith("set performer_photo_base_url")

    again = plugin.task("all")  # told once: the log does not repeat it on every run
    assert not [m for m in again.messages("warning") if "performer photos" in m]

    # With an address of the user's choosing, the URLs carry no credential either; this
    # Stash still asks Plex for a login there, and Plex's fetch says so.
    # (Stash by another name than the plugin's, as Plex in Docker would reach it.)
    elsewhere = plugin.stash.url.replace("127.0.0.1", "localhost")
    plugin.configure(performer_photos=True, performer_photo_base_url=elsewhere + "/")
    plugin.plex.clear_requests()
    assert plugin.task("all").output["synced"] == 2  # the scenes showing Ann; Bea has no image
    photo = plugin.stash.performer_image_url(ann).replace(plugin.stash.url, elsewhere)
    assert photo.startswith(elsewhere + "/performer/")
    assert _thumbs(plugin) == [photo] and plugin.plex.photo("Ann") == photo
    fetched = plugin.plex.wait_photo_fetches(1)
    assert [(f["url"], f["ok"]) for f in fetched] == [(photo, False)]
    assert plugin.stash.performer_image_requests[-1]["status"] == 302  # to Stash's login page
    _no_stash_credential(plugin)
    assert plugin.task("ui_status").output["performer_photos"] is None


def test_a_notice_only_the_drainer_logged_reaches_stashs_log_with_the_next_hook(plugin):
    """The drainer's log is a file the user does not read: the next hook says it in Stash's log, once."""
    items, _ = _setup(plugin)
    sid, rk = items[0]
    said = []
    for title in ("One", "Two", "Three"):
        run = plugin.hook(plugin.stash.update_scene(sid, title=title))
        assert run.error is None, run.stderr
        said.append(sum("performer photos are not written" in m for m in run.messages("warning")))
        plugin.wait_drained(timeout=30)
        assert plugin.plex.item(rk)["fields"]["title"] == title
    assert plugin.drainer_log().count("performer photos are not written") == 1
    assert said == [0, 1, 0]  # the first hook ran before the drainer found it
    _no_stash_credential(plugin)


def test_with_photos_off_no_image_is_asked_for_and_a_new_image_queues_no_scene(plugin):
    """Stash looks each performer's image up to answer ``image_path`` (resolver_model_performer.go
    ``ImagePath``: ``Performer.HasImage``): with photos off no scene read asks for it, and a
    performer's new image, of which nothing is written to Plex, checks no scene."""
    items = {n: plugin.add_scene(n, performers=["Ann"]) for n in range(2)}
    ann = plugin.stash.entity_id("performer", "Ann")
    assert plugin.task("all").output["synced"] == 2
    asked = plugin.stash.graphql_requests("findScenes")
    assert asked and not [r for r in asked if "image_path" in r["query"]]

    before = len(plugin.stash.graphql_requests())
    _fire(plugin, plugin.stash.set_performer_image(ann, cover_png(900, 1)), lambda: True)
    assert plugin.stash.graphql_requests("findScenes")[len(asked) :] == [], plugin.stash.graphql_requests()[before:]
    assert "checking the scenes that show it" not in plugin.drainer_log()
    assert plugin.plex.edit_requests() == [] and _cast(plugin, items)[0] == {"Ann": None}
