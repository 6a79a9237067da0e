"""Resume points from Plex, end to end: whose come back (the server owner's, while
``plays_accounts`` names the owner), from the timer and ``watch --once`` as from a stopped
playback, and never over a newer one Stash's own player saved."""

from __future__ import annotations

from tests.test_listener_e2e import synced_scene, until, watch_once, watching_resume


def save_resume_in_stash(plugin, scene_id: int, seconds: float) -> None:
    """What Stash's own player sends when playback stops part-way (``sceneSaveActivity``)."""
    import requests

    from tests.conftest import STASH_API_KEY

    query = "mutation($id: ID!, $t: Float) { sceneSaveActivity(id: $id, resume_time: $t) }"
    body = {"query": query, "variables": {"id": str(scene_id), "t": seconds}}
    reply = requests.post(f"{plugin.stash.url}/graphql", json=body, headers={"ApiKey": STASH_API_KEY}, timeout=5)
    assert reply.ok and "errors" not in reply.json(), reply.text


def sessions_read(plugin) -> int:
    return sum(r["path"] == "/status/sessions" for r in plugin.plex.requests_matching("GET"))


def resume_polls(plugin) -> int:
    return sum("inProgress" in r["query"] for r in plugin.plex.requests_matching("GET", "/library/sections/"))


def resume_time(plugin, scene_id: int) -> float | None:
    return plugin.stash.scene(scene_id).get("resume_time")


def test_watch_once_brings_the_owners_resume_point_and_keeps_a_newer_one_of_stash(plugin):
    plugin.configure(import_resume=True)
    sid, rk = synced_scene(plugin)
    watch_once(plugin)  # the first look: resume points from now on
    session = plugin.plex.start_playback(rk)
    plugin.plex.stop_playback(session, 125_000)  # while nothing listened
    watch_once(plugin)
    assert resume_time(plugin, sid) == 125.0
    save_resume_in_stash(plugin, sid, 300.0)  # then Stash's player, later
    watch_once(plugin)  # Plex's resume point did not move since: Stash's stays
    assert resume_time(plugin, sid) == 300.0


def test_another_accounts_stop_leaves_the_owners_resume_point_and_stashs_newer_one(plugin, tmp_path):
    """A household member (account 7, not in plays_accounts) plays the scene in Plex. The
    owner's socket sees the session's stop; the owner's resume point in Plex did not move,
    and Stash's own player saved a newer one: it stays, through the stop and the polls."""
    plugin.env["STASH2PLEX_WATCH_POLL_S"] = "0.3"
    sid, rk = synced_scene(plugin)
    other_sid, other_rk = synced_scene(plugin, 2)
    plugin.plex.set_view_offset(rk, 125_000)  # the owner stopped there, long ago
    save_resume_in_stash(plugin, sid, 300.0)  # Stash's player since
    with watching_resume(plugin, tmp_path / "watch.log") as log:
        theirs = plugin.plex.start_playback(rk, account_id=7)
        until(lambda: sessions_read(plugin) == 1, 5, "the session looked up")
        plugin.plex.report_playback(theirs, 30_000)
        plugin.plex.stop_playback(theirs, 40_000)
        mine = plugin.plex.start_playback(other_rk)  # then the owner, elsewhere: events go in order
        until(lambda: sessions_read(plugin) == 2, 5, "the session looked up")
        plugin.plex.stop_playback(mine, 50_000)
        until(lambda: resume_time(plugin, other_sid) == 50.0, 10, f"the owner's stop {log.read_text()}")
        polls = resume_polls(plugin)
        until(lambda: resume_polls(plugin) >= polls + 2, 5, "two more polls")
    assert resume_time(plugin, sid) == 300.0
    assert "a playback of account 7 left alone (not in plays_accounts)" in log.read_text()
