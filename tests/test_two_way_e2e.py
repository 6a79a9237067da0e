"""Plays and ratings coming back from Plex, as a real household and a real server make them:
clocks that differ, items that change owner, one viewing written twice, a new server, plays
before the link, ratings cleared, settings changed under a running ``watch``. The real plugin
process against the emulators."""

from __future__ import annotations

import sqlite3
import time

import pytest

from tests.test_listener_e2e import rate_in_plex, synced_scene, task, until, watch_once, watching

PLAYED = 1_600_000_000  # 2020


def rated_scene(plugin, n: int = 1, rating100: int = 40) -> tuple[int, int]:
    """A scene synced with its rating (Plex shows rating100 / 10), and the first look of the ratings import."""
    sid, rk = synced_scene(plugin, n)
    plugin.hook(plugin.stash.update_scene(sid, rating100=rating100))
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["userRating"] == f"{rating100 / 10:g}"
    watch_once(plugin)
    return sid, rk


def later(plugin, seconds: float) -> None:
    """Stash's clock moves on (its updated_at), without waiting."""
    now = time.time()
    plugin.stash.clock = lambda: time.time() - now + now + seconds


# -- ratings: which side changed, on one clock ------------------------------------------------
def test_an_unrelated_edit_in_stash_after_a_plex_rating_leaves_stash_at_the_plex_rating(plugin):
    plugin.configure(import_ratings=True)
    sid, rk = rated_scene(plugin)
    rate_in_plex(plugin, rk, 8)
    later(plugin, 5)
    plugin.hook(plugin.stash.update_scene(sid, title="Renamed"))  # stamps updated_at: no rating changed
    plugin.wait_drained()
    watch_once(plugin)
    assert plugin.plex.item(rk)["fields"]["userRating"] == "8"
    assert plugin.stash.scene(sid)["rating100"] == 80


@pytest.mark.parametrize("offset", [-600, 600], ids=["plex-10-min-behind", "plex-10-min-ahead"])
def test_ratings_go_both_ways_whatever_plex_hosts_clock_says(plugin, offset):
    """Plex's lastRatedAt and the poll's watermark are Plex's clock; Stash's updated_at is Stash's."""
    plugin.configure(import_ratings=True)
    plugin.plex.clock = lambda: time.time() + offset
    sid, rk = rated_scene(plugin)
    rate_in_plex(plugin, rk, 8)
    watch_once(plugin)
    assert plugin.stash.scene(sid)["rating100"] == 80  # 10 min behind: never asked for before
    plugin.hook(plugin.stash.hook_contexts[-1])  # the hook our sceneUpdate fired
    plugin.wait_drained()
    later(plugin, 2)
    plugin.hook(plugin.stash.update_scene(sid, rating100=60))  # then the user changes it in Stash
    plugin.wait_drained()
    watch_once(plugin)
    assert plugin.plex.item(rk)["fields"]["userRating"] == "6"  # 10 min ahead: Plex's looked newer
    assert plugin.stash.scene(sid)["rating100"] == 60


@pytest.mark.parametrize("keeps", [False, True], ids=["lastRatedAt-dropped", "lastRatedAt-kept"])
def test_a_rating_cleared_in_plex_is_cleared_in_stash(plugin, keeps):
    plugin.configure(import_ratings=True)
    plugin.plex.clear_keeps_rated_at = keeps
    sid, rk = rated_scene(plugin)
    rate_in_plex(plugin, rk, -1)
    watch_once(plugin)
    assert plugin.stash.scene(sid)["rating100"] is None
    plugin.hook(plugin.stash.hook_contexts[-1])
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["userRating"] is None  # and not written back


def test_a_rating_cleared_in_stash_after_one_given_in_plex_clears_plex_too(plugin):
    """Both sides changed before the plugin saw either; Stash's clear came later and wins."""
    from tests.runner import drainer_lock_held

    plugin.configure(import_ratings=True)
    sid, rk = rated_scene(plugin)
    rate_in_plex(plugin, rk, 5)
    later(plugin, 2)
    with drainer_lock_held(plugin.data_dir):
        plugin.hook(plugin.stash.update_scene(sid, rating100=None))
    plugin.task("process_queue")
    plugin.wait_drained()
    watch_once(plugin)
    assert (plugin.stash.scene(sid)["rating100"], plugin.plex.item(rk)["fields"]["userRating"]) == (None, None)


def test_a_running_watch_takes_changed_settings_without_a_restart(plugin, tmp_path):
    """A new Plex token and import_ratings turned on, saved in Stash while ``watch`` runs."""
    sid, rk = synced_scene(plugin)
    log = tmp_path / "watch.log"
    with watching(plugin, log):
        plugin.plex.token = "a-new-token"
        plugin.configure(import_ratings=True)
        rate_in_plex(plugin, rk, 8)  # (the import's first look reads from 2 minutes before it)
        until(lambda: plugin.stash.scene(sid)["rating100"] == 80, 10, f"rating in Stash {log.read_text()}")


# -- plays: whose, once, from which server ---------------------------------------------------
def test_a_reused_path_gets_none_of_the_old_owners_plays(plugin):
    old, rk = synced_scene(plugin)
    for at in (PLAYED, PLAYED + 3600):  # watched twice in 2020, before any scene held the item: old's
        plugin.plex.play(rk, viewed_at=at)
    assert plugin.hook(plugin.stash.delete_scene(old)).error is None
    plugin.wait_drained()
    new = plugin.stash.add_scene(
        title="New at the old path", files=[{"path": "/stash/media/scene-00001.mp4", "size": 1001, "duration": 60.0}]
    )
    plugin.hook({"id": new, "type": "Scene.Create.Post", "input": None})
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "New at the old path"
    plugin.plex.play(rk)  # the new scene's own
    run = task(plugin, "import_plays")
    assert run.error is None, run.stderr
    assert plugin.stash.scene_plays(new) == [plugin.plex.history_rows()[-1].viewed_at]


def test_one_viewing_written_as_two_history_rows_is_one_play(plugin):
    sid, rk = synced_scene(plugin)
    plugin.plex.play_twice(rk, after_s=45, viewed_at=PLAYED)  # a 60 s item: rows 45 s apart
    plugin.plex.play(rk, viewed_at=PLAYED + 600)  # watched again later: a play of its own
    with sqlite3.connect(plugin.data_dir / "state.db") as db:  # no cached index: Plex says the duration
        db.execute("DELETE FROM plex_index")
    run = task(plugin, "import_plays")
    assert run.error is None, run.stderr
    assert plugin.stash.scene_plays(sid) == [PLAYED, PLAYED + 600]
    assert run.output["plays_same_viewing"] == 1


def test_plays_of_a_new_server_are_not_taken_for_the_old_ones(plugin):
    """A Plex migration (or a new plex_url): the new server counts its history ids from 1 again."""
    sid, rk = synced_scene(plugin)
    plugin.plex.play(rk, viewed_at=PLAYED)
    assert task(plugin, "import_plays").output["plays_added"] == 1
    plugin.plex.set_machine_id("0ddba11c0ffee0000000000000000000000000aa")
    plugin.plex.play(rk, viewed_at=PLAYED + 600)  # history id 1, on the new server
    run = task(plugin, "import_plays")
    assert run.output["plays_added"] == 1, run.stderr
    assert plugin.stash.scene_plays(sid) == [PLAYED, PLAYED + 600]


def test_a_play_before_its_item_is_linked_reaches_stash_when_it_is(plugin):
    plugin.configure(import_plays=True)
    sid, rk = plugin.add_scene(1)  # in both, not synced yet
    watch_once(plugin)  # the first look: plays from now on
    plugin.plex.play(rk)
    other = plugin.plex.add_item(1, "/plex/media/not-ours.mp4", duration_ms=60000)
    plugin.plex.play(other, viewed_at=int(time.time()) + 900)  # the history's read position moves on
    watch_once(plugin)  # no scene is linked to the item yet
    assert plugin.stash.scene_plays(sid) == []
    plugin.hook(plugin.stash.update_scene(sid, title="Synced"))
    plugin.wait_drained()
    watch_once(plugin)
    assert plugin.stash.scene_plays(sid) == [plugin.plex.history_rows()[-2].viewed_at]


def test_a_journal_from_before_servers_were_recorded_keeps_its_plays(plugin):
    """plays.db keyed by historyKey alone: its rows become the first server's (no play added twice)."""
    sid, rk = synced_scene(plugin)
    plugin.plex.play(rk, viewed_at=PLAYED)
    plugin.stash._resolve_scene_add_play(None, str(sid), ["2020-09-13T12:26:40Z"])  # added by the older version
    with sqlite3.connect(plugin.data_dir / "plays.db") as db:
        db.executescript(
            "CREATE TABLE applied (history_key TEXT PRIMARY KEY, scene_id INTEGER NOT NULL, rating_key INTEGER "
            "NOT NULL, viewed_at INTEGER NOT NULL, account_id INTEGER NOT NULL, written INTEGER NOT NULL, at REAL "
            "NOT NULL); CREATE TABLE since (account_id INTEGER PRIMARY KEY, viewed_at INTEGER NOT NULL, floor "
            "INTEGER NOT NULL);"
        )
        db.execute("INSERT INTO applied VALUES ('/status/sessions/history/1', ?, ?, ?, 1, 1, 0)", (sid, rk, PLAYED))
    run = task(plugin, "import_plays")
    assert (run.output["plays_added"], run.output["plays_known"]) == (0, 1), run.stderr
    assert plugin.stash.scene_plays(sid) == [PLAYED]
