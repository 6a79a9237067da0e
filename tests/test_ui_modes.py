"""The plain modes behind the page in Stash's UI (tasks/ui.py), run as Stash runs the plugin.

Stash's ``runPluginOperation`` writes ``{server_connection, args}`` with exactly the
args the page gives (no defaultArgs) and returns the reply's ``output``.
"""

from __future__ import annotations

import re
import socket

from sync_queue.dlq import DeadLetterQueue
from sync_queue.job import BULK, Job
from sync_queue.queue import JobQueue
from tests.runner import REPO, drainer_lock_held, run_plugin, task_document
from tests.test_cli import cli
from validation.fields import LABELS


def operation(plugin, **args):
    run = run_plugin({"server_connection": plugin.connection, "args": args}, env=plugin.env)
    return run


def dead_letter(plugin, scene_id: int, error_class: str, reason: str, title: str) -> None:
    dlq = DeadLetterQueue(plugin.data_dir)
    dlq.add(Job(scene_id=scene_id, attempt=4), error_class, reason, title)
    dlq.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_shows_queue_dead_letters_grouped_and_plex_down(plugin):
    plugin.configure(plex_url=f"http://127.0.0.1:{closed_port()}")
    dead_letter(plugin, 7, "PlexNotFound", "no Plex item at /plex/media/a.mp4", "A")
    dead_letter(plugin, 8, "PlexNotFound", "no Plex item at /plex/media/b.mp4", "B")
    dead_letter(plugin, 9, "AmbiguousMatch", "two items fit", "C")
    with drainer_lock_held(plugin.data_dir):
        queue = JobQueue(plugin.data_dir / "queue")
        queue.put_many([Job(scene_id=1), Job(scene_id=2, priority=BULK), Job(scene_id=3, priority=BULK)])
        queue.close()
        run = operation(plugin, mode="ui_status")
    assert run.error is None, run.stderr
    out = run.output
    assert out["queue"]["interactive"] == 1 and out["queue"]["bulk"] == 2 and out["queue"]["pending"] == 3
    assert out["drainer_running"] is True
    assert out["dlq"]["count"] == 3
    groups = out["dlq"]["groups"]
    assert [g["error_class"] for g in groups] == ["PlexNotFound", "AmbiguousMatch"]
    assert sorted(s["scene_id"] for s in groups[0]["scenes"]) == [7, 8]
    assert "path_map" in groups[0]["advice"] and "Loose matching (loose_matching)" in groups[1]["advice"]
    assert [(g["label"], g["in_inbox"]) for g in groups] == [
        ("Not found in Plex", True),
        ("Several Plex items fit", True),
    ]
    assert "pin <scene> <item>" in groups[1]["advice"]
    assert out["plex"]["reachable"] is False and out["plex"]["token"] == "unknown" and out["plex"]["since"]
    since = out["plex"]["since"]
    again = operation(plugin, mode="ui_status").output
    assert again["plex"]["since"] == since  # unchanged while Plex stays down


def test_status_says_plex_up_and_token_rejected_or_missing(plugin):
    out = operation(plugin, mode="ui_status").output
    assert out["plex"]["reachable"] is True and out["plex"]["token"] == "accepted" and out["plex"]["version"]
    plugin.configure(plex_token="wrong-token")
    out = operation(plugin, mode="ui_status").output
    assert out["plex"]["token"] == "rejected" and out["plex"]["reachable"] is True
    plugin.configure(plex_token=None)
    out = operation(plugin, mode="ui_status").output
    assert out["plex"]["token"] == "missing" and "plex_token" in out["plex"]["problem"]
    assert out["watch"] == {"running": False, "since": None, "needed_for": [], "problem": False, "message": None}


def test_status_is_not_checked_until_all_has_looked_at_every_scene(plugin):
    plugin.add_scene(1)
    assert operation(plugin, mode="ui_status").output["checked_at"] is None
    assert plugin.task("recent").error is None  # only the changed scenes: not a check of all
    assert operation(plugin, mode="ui_status").output["checked_at"] is None
    assert plugin.task("all").error is None
    assert operation(plugin, mode="ui_status").output["checked_at"] is not None


def three_scene_states(plugin) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Three synced scenes ((id, ratingKey) each); the third then has a dead letter (the
    second is the one a test queues)."""
    scenes = [plugin.add_scene(n) for n in (1, 2, 3)]
    assert plugin.task("all").error is None
    plugin.wait_drained()
    dead_letter(plugin, scenes[2][0], "PlexNotFound", "no Plex item at /plex/media/scene-00003.mp4", "Scene 3")
    return scenes[0], scenes[1], scenes[2]


def test_scene_states_synced_waiting_dead_lettered_changed(plugin):
    (synced, _), (waiting, _), (dead, _) = three_scene_states(plugin)
    run = operation(plugin, mode="ui_scene", scene_id=str(synced))
    out = run.output
    assert run.error is None, run.error
    assert out["state"] == "in_sync" and out["library"] == "Stash" and out["rating_key"]
    assert out["plex_path"] == "/plex/media/scene-00001.mp4" and out["last_written"]
    out = operation(plugin, mode="ui_scene", scene_id=dead).output
    assert out["state"] == "dead_lettered" and "no Plex item" in out["reason"] and "path_map" in out["advice"]
    plugin.stash.update_scene(synced, title="Changed in Stash")
    assert operation(plugin, mode="ui_scene", scene_id=synced).output["state"] == "changed"
    with drainer_lock_held(plugin.data_dir):
        assert operation(plugin, mode="ui_sync_scene", scene_id=str(waiting)).output["queued"] is True
        assert operation(plugin, mode="ui_scene", scene_id=waiting).output["state"] == "waiting"


def test_retry_one_entry_requeues_only_that_scene_and_it_syncs(plugin):
    sid, rk = plugin.add_scene(1)
    plugin.stash.update_scene(sid, title="Retried")
    dead_letter(plugin, sid, "PlexNotFound", "not found then", "Scene 1")
    dead_letter(plugin, 99, "PlexNotFound", "other", "Other")
    run = operation(plugin, mode="ui_retry", scene_id=str(sid))
    assert run.error is None and run.output == {"scene_id": sid, "queued": True, "already_queued": False}
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Retried"
    groups = operation(plugin, mode="ui_status").output["dlq"]["groups"]
    assert [s["scene_id"] for g in groups for s in g["scenes"]] == [99]
    again = operation(plugin, mode="ui_retry", scene_id=sid)
    assert again.output is None and "not in the dead-letter queue" in again.error


def test_bad_scene_id_is_a_clear_error_and_queues_nothing(plugin):
    for bad in ("abc", -3, True, None):
        args = {"mode": "ui_sync_scene"} | ({} if bad is None else {"scene_id": bad})
        run = operation(plugin, **args)
        assert run.output is None and "args.scene_id" in run.error, (bad, run.error)
    with drainer_lock_held(plugin.data_dir):
        assert operation(plugin, mode="ui_status").output["queue"]["pending"] == 0


def test_the_page_asks_for_modes_of_the_registry_only():
    """ui/*.js starts every run by its mode id (validation/modes.py), never by a menu entry's name."""
    from validation.modes import STASH_MODES

    for name in ("stash2plex.js", "inbox.js"):
        script = (REPO / "ui" / name).read_text(encoding="utf-8")
        asked = re.findall(r'operation\("(\w+)"', script) + re.findall(r'\bmode: "(\w+)"', script)
        assert asked and set(asked) <= set(STASH_MODES), (name, set(asked) - set(STASH_MODES))
        assert "task_name" not in script, name
    page = (REPO / "ui" / "stash2plex.js").read_text(encoding="utf-8")
    assert {"all", "reconcile", "retry_dlq"} <= set(re.findall(r'\bmode: "(\w+)"', page))


def test_operation_modes_are_not_tasks_of_the_menu():
    from validation.modes import MODES, OPERATION, OPERATION_MODES, TASK, TASK_MODES

    assert OPERATION_MODES and not set(OPERATION_MODES) & set(TASK_MODES)
    assert all(MODES[mode].kind == OPERATION for mode in OPERATION_MODES)
    # a task of the menu gets no args (the command line's operands go to its commands only)
    assert not [m.id for m in MODES.values() if (m.takes_args or m.operands) and m.kind == TASK]


def test_preview_lists_per_field_changes_writes_nothing_and_matches_the_sync(plugin):
    sid, rk = plugin.add_scene(1, studio="Studio A", tags=["Tag1", "Tag2"])
    plugin.plex.clear_requests()
    run = operation(plugin, mode="ui_preview")
    assert run.error is None, run.stderr
    assert plugin.plex.edit_requests() == []  # a preview writes nothing
    [change] = run.output["scenes"]
    assert change["scene_id"] == sid and change["rating_key"] == rk and run.output["checked"] == 1
    fields = {f["field"]: (f["current"], f["new"]) for f in change["fields"]}
    assert fields == {"title": ("scene-00001", "Scene 1"), "studio": ("", "Studio A")}
    tags = {t["type"]: (t["added"], t["removed"]) for t in change["tags"]}
    assert tags == {"genre": (["Tag1", "Tag2"], []), "collection": (["Studio A"], [])}
    assert run.output["labels"] == LABELS  # the page names every field from the table
    assert plugin.task("all").error is None
    plugin.wait_drained()
    item = plugin.plex.item(rk)
    for name, (_, new) in fields.items():
        assert item["fields"][name] == new
    assert sorted(item["tags"]["genre"]) == ["Tag1", "Tag2"] and item["tags"]["collection"] == ["Studio A"]
    assert operation(plugin, mode="ui_preview").output["scenes"] == []


def test_the_page_the_command_line_and_the_task_answer_one_plan_shape(plugin):
    """One planner (tasks/preview.py): the page, ``all --dry-run`` and the task "Preview
    sync" answer the same keys and the same entries (docs/usage.md, the preview's reply)."""
    sid, rk = plugin.add_scene(1, studio="Studio A")
    lonely = plugin.stash.add_scene(
        title="Lonely", files=[{"path": "/stash/media/lonely.mp4", "size": 9, "duration": 1.0}]
    )
    page = operation(plugin, mode="ui_preview")
    assert page.error is None, page.stderr
    done = cli(plugin, "all", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.json()
    task = run_plugin(task_document(plugin.connection, "all", dry_run="true"), env=plugin.env)
    assert task.error is None, task.stderr
    assert set(line) - {"plan_file"} == set(page.output)
    assert set(task.output) == set(line) - {"scenes", "unmatched"}
    for key in ("scenes", "unmatched", "checked", "would_write", "unmatched_count", "no_change", "more", "labels"):
        assert page.output[key] == line[key], key
    assert [e["scene_id"] for e in page.output["scenes"]] == [sid] and page.output["scenes"][0]["rating_key"] == rk
    assert [u["scene_id"] for u in page.output["unmatched"]] == [lonely] and page.output["more"] is False


def test_the_page_preview_says_more_only_when_scenes_are_left_out(plugin):
    """The page lists ``PAGE_LIMIT`` scenes at most: exactly that many is the whole plan."""
    from tasks.preview import PAGE_LIMIT

    for n in range(1, PAGE_LIMIT + 1):
        plugin.add_scene(n)
    whole = operation(plugin, mode="ui_preview").output
    assert (len(whole["scenes"]), whole["more"]) == (PAGE_LIMIT, False)
    plugin.add_scene(PAGE_LIMIT + 1)
    cut = operation(plugin, mode="ui_preview").output
    assert (len(cut["scenes"]), cut["more"]) == (PAGE_LIMIT, True)


def listings(plugin) -> list[dict]:
    """Plex's section listings (``GET /library/sections/<id>/all``) since the requests were cleared."""
    return [r for r in plugin.plex.requests_matching("GET", "/library/sections/") if r["path"].endswith("/all")]


def test_the_scene_panel_after_a_plex_scan_reads_its_item_not_the_whole_library(plugin):
    """A scan moves the section's ``scannedAt``: the panel's link check reads the linked item
    (a library may hold 100,000 items) and leaves the listing to the syncs that need it."""
    (synced, rk), _, _ = three_scene_states(plugin)
    plugin.plex.add_item(1, "/plex/media/scanned-in.mp4")  # a scan
    plugin.plex.clear_requests()
    panel = operation(plugin, mode="ui_scene", scene_id=synced).output
    assert (panel["state"], panel["library"]) == ("in_sync", "Stash"), panel
    assert listings(plugin) == []
    assert len(plugin.plex.metadata_reads(rk)) <= 2  # the link check's read and the library's


def test_the_scene_panel_reads_an_item_deleted_replaced_or_left_out_as_changed(plugin):
    """The panel's link check on the item itself keeps the index's verdicts: an item Plex
    deleted, one whose file was replaced and one in a library plex_libraries leaves out."""
    plugin.plex.add_section("Other", ["/plex/media/other"], key=2)
    (deleted, kd), (replaced, kr) = plugin.add_scene(1), plugin.add_scene(2)
    left_out = plugin.stash.add_scene(title="Other", files=[{"path": "/stash/media/other/o.mp4", "duration": 60.0}])
    kl = plugin.plex.add_item(2, "/plex/media/other/o.mp4", duration_ms=60000)
    assert plugin.task("all").error is None
    plugin.wait_drained()
    plugin.plex.remove_item(kd)
    plugin.plex.move_file(kr, "/plex/media/replacement.mp4")
    plugin.configure(plex_libraries="Stash")
    plugin.plex.clear_requests()
    expected = {
        deleted: f"Plex item {kd} no longer exists",
        replaced: f"Plex no longer lists item {kr} at /plex/media/scene-00002.mp4 (a rescan may have re-added it)",
        left_out: f"Plex item {kl} is in a library that plex_libraries leaves out",
    }
    for scene_id, reason in expected.items():
        panel = operation(plugin, mode="ui_scene", scene_id=scene_id).output
        assert (panel["state"], panel["reason"]) == ("changed", reason), panel
    assert listings(plugin) == []
