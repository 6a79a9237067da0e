"""Finding the right Plex item, end to end: hook → queue → drainer → Plex, through the runner.

Each table case sets up Plex items and one Stash scene, fires the scene's update
hook and checks which Plex item received the new title, or that none did and why.
Only ``PathMap.suggest`` (pure) is imported from the plugin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from tests.conftest import POLL_S
from tests.runner import create_context
from validation.pathmap import PathMap

SIZE = 4242
DURATION_S = 60.0


@dataclass(frozen=True)
class P:
    """One Plex item (one file)."""

    path: str
    section: int = 1
    size: int = SIZE
    duration_ms: int = int(DURATION_S * 1000)


@dataclass(frozen=True)
class Case:
    name: str
    scene: tuple[str, ...]  # the Stash scene's file paths, primary first
    plex: tuple[P, ...]
    expect: str | None  # the Plex path whose item gets the title; None: no item does
    settings: dict = field(default_factory=dict)
    reason: tuple[str, ...] = ()  # for expect=None: what the DLQ reason names (empty: not found, retried)
    other_section: bool = False  # add section 2 "Other" at /plex/other


CASES = [
    Case("prefix map", ("/stash/media/a/one.mp4",), (P("/plex/media/a/one.mp4"),), "/plex/media/a/one.mp4"),
    Case(
        "no map, same paths",
        ("/plex/media/one.mp4",),
        (P("/plex/media/one.mp4"),),
        "/plex/media/one.mp4",
        {"path_map": None},
    ),
    Case(
        "longest prefix wins",
        ("/stash/media/one.mp4",),
        (P("/plex/media/wrong/media/one.mp4"), P("/plex/media/one.mp4")),
        "/plex/media/one.mp4",
        {"path_map": "/stash=/plex/media/wrong;/stash/media=/plex/media"},
    ),
    Case(
        "prefix matches whole folders only",
        ("/stash/media2/one.mp4",),
        (P("/plex/media2/one.mp4"), P("/plex/media/extra/one.mp4")),
        "/plex/media/extra/one.mp4",
        {"path_map": "/stash/media=/plex/media;/stash/media2=/plex/media/extra"},
    ),
    Case(
        "trailing slashes in rule",
        ("/stash/media/a/one.mp4",),
        (P("/plex/media/a/one.mp4"),),
        "/plex/media/a/one.mp4",
        {"path_map": "/stash/media/=/plex/media/"},
    ),
    Case(
        "windows stash path",
        ("C:\\Videos\\Studio A\\one.mp4",),
        (P("/plex/media/Studio A/one.mp4"),),
        "/plex/media/Studio A/one.mp4",
        {"path_map": "C:\\Videos=/plex/media"},
    ),
    Case(
        "windows, lower drive, slashes, trailing separator",
        ("c:/Videos/sub/one.mp4",),
        (P("/plex/media/sub/one.mp4"),),
        "/plex/media/sub/one.mp4",
        {"path_map": "C:\\Videos\\=/plex/media"},
    ),
    Case(
        "case differs, insensitive on",
        ("/stash/media/Studio/Scene.MP4",),
        (P("/plex/media/studio/scene.mp4"),),
        "/plex/media/studio/scene.mp4",
        {"case_insensitive_paths": True},
    ),
    Case(
        "case differs in rule, insensitive on",
        ("/stash/media/one.mp4",),
        (P("/plex/media/one.mp4"),),
        "/plex/media/one.mp4",
        {"case_insensitive_paths": True, "path_map": "/STASH/Media=/plex/media"},
    ),
    Case(
        "case differs, insensitive off",
        ("/stash/media/Studio/Scene.MP4",),
        (P("/plex/media/studio/scene.mp4"),),
        None,
        {"case_insensitive_paths": False},
    ),
    Case(
        "duplicates across folders, exact path decides",
        ("/stash/media/b/one.mp4",),
        (P("/plex/media/a/one.mp4"), P("/plex/media/b/one.mp4")),
        "/plex/media/b/one.mp4",
    ),
    Case(
        "duplicates across sections, exact path decides",
        ("/stash/media/one.mp4",),
        (P("/plex/other/one.mp4", section=2), P("/plex/media/one.mp4")),
        "/plex/media/one.mp4",
        other_section=True,
    ),
    Case(
        "duplicates across sections, no exact path, strict",
        ("/stash/media/new/one.mp4",),
        (P("/plex/other/one.mp4", section=2), P("/plex/media/old/one.mp4")),
        None,
        reason=("/plex/other/one.mp4", "/plex/media/old/one.mp4"),
        other_section=True,
    ),
    Case(
        "unconfigured library is not searched",
        ("/stash/media/new/one.mp4",),
        (P("/plex/other/one.mp4", section=2), P("/plex/media/old/one.mp4")),
        "/plex/media/old/one.mp4",
        {"plex_libraries": "Stash"},
        other_section=True,
    ),
    Case(
        "multi-file scene, only the second file in Plex",
        ("/stash/media/one.mp4", "/stash/media/two.mp4"),
        (P("/plex/media/two.mp4"),),
        "/plex/media/two.mp4",
    ),
    Case(
        "multi-file scene, primary file wins",
        ("/stash/media/one.mp4", "/stash/media/two.mp4"),
        (P("/plex/media/two.mp4"), P("/plex/media/one.mp4")),
        "/plex/media/one.mp4",
    ),
    Case(
        "renamed folder, size agrees: medium written",
        ("/stash/media/old/one.mp4",),
        (P("/plex/media/new/one.mp4"),),
        "/plex/media/new/one.mp4",
    ),
    Case(
        "renamed folder, size and duration differ, strict: refused",
        ("/stash/media/old/one.mp4",),
        (P("/plex/media/new/one.mp4", size=999, duration_ms=90_000),),
        None,
        reason=("/plex/media/new/one.mp4", "another video"),
    ),
    Case(
        "renamed folder, size differs though the duration agrees, strict off: refused",
        ("/stash/media/old/one.mp4",),
        (P("/plex/media/new/one.mp4", size=999),),
        None,
        {"loose_matching": True},
        reason=("/plex/media/new/one.mp4", "another video"),
    ),
    Case(
        "strict off: the only candidate whose size and duration agree",
        ("/stash/media/new/one.mp4",),
        (P("/plex/media/a/one.mp4", size=1), P("/plex/media/b/one.mp4")),
        "/plex/media/b/one.mp4",
        {"loose_matching": True},
    ),
    Case(
        "strict off: the candidate sharing the most trailing folders",
        ("/stash/media/Studio/one.mp4",),
        (P("/plex/media/x/one.mp4"), P("/plex/media/old/Studio/one.mp4")),
        "/plex/media/old/Studio/one.mp4",
        {"loose_matching": True},
    ),
    Case(
        "strict on: two same-name candidates, none written",
        ("/stash/media/Studio/one.mp4",),
        (P("/plex/media/x/one.mp4"), P("/plex/media/old/Studio/one.mp4")),
        None,
        reason=("/plex/media/x/one.mp4", "/plex/media/old/Studio/one.mp4"),
    ),
]


# -- helpers ----------------------------------------------------------------------------
STATUS_POLL_S = 0.1


def settle(plugin, timeout: float = 40.0) -> dict:
    """Wait until every pending job has been tried (some may wait for a retry); the queue status."""
    since = time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the queue's status (a few database reads here) while the drainer works, every
        # STATUS_POLL_S: polled at POLL_S it took a third of this process's CPU meanwhile
        time.sleep(POLL_S if not plugin.drainer_busy() else STATUS_POLL_S)
        status = plugin.status()
        error = status.get("last_drainer_error")
        if error and error["at"] >= since:  # (an older one is a previous drainer's)
            raise AssertionError(f"drainer failed: {error}\n{plugin.drainer_log()}")
        # a job parked for its retry still counts as in flight, so only compare these two
        if status["pending"] == status["retrying"]:
            return status
    raise AssertionError(f"queue did not settle within {timeout} s: {status}\n{plugin.drainer_log()}")


def add_scene(plugin, paths, title: str = "Before") -> int:
    files = [{"path": p, "size": SIZE, "duration": DURATION_S} for p in paths]
    return plugin.stash.add_scene(title=title, files=files)


def titled(plugin, keys: dict[str, int], title: str = "Synced") -> list[str]:
    return [path for path, rk in keys.items() if plugin.plex.item(rk)["fields"]["title"] == title]


# -- the table -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matching(plugin, case: Case):
    if case.other_section:
        plugin.plex.add_section("Other", ["/plex/other"], key=2)
    keys = {p.path: plugin.plex.add_item(p.section, p.path, size=p.size, duration_ms=p.duration_ms) for p in case.plex}
    sid = add_scene(plugin, case.scene)
    plugin.configure(**case.settings)
    plugin.hook(plugin.stash.update_scene(sid, title="Synced"))
    status = settle(plugin)
    assert titled(plugin, keys) == ([case.expect] if case.expect else []), plugin.drainer_log()
    if case.expect is not None:
        assert status["pending"] == 0 and status["dlq"] == 0
        assert len(plugin.plex.edit_requests()) == 1
        return
    assert plugin.plex.edit_requests() == []
    if case.reason:
        assert status["pending"] == 0
        (entry,) = status["dlq_newest"]
        assert entry["scene_id"] == sid
        for text in case.reason:
            assert text in entry["reason"], entry["reason"]
    else:  # not found: waits for Plex to scan the file, on the slow schedule
        assert status["dlq"] == 0 and status["retrying"] == 1


def test_same_name_in_two_folders_strict_writes_neither_and_names_both(plugin):
    keys = {
        p: plugin.plex.add_item(1, p, size=SIZE, duration_ms=60_000)
        for p in ("/plex/media/studio a/clip.mp4", "/plex/media/studio b/clip.mp4")
    }
    sid = add_scene(plugin, ["/stash/media/clip.mp4"])
    plugin.configure(strict_matching=True)  # the old name, still read
    plugin.hook(plugin.stash.update_scene(sid, title="Synced"))
    status = settle(plugin)
    assert titled(plugin, keys) == [] and plugin.plex.edit_requests() == []
    assert status["pending"] == 0 and status["dlq"] == 1
    reason = status["dlq_newest"][0]["reason"]
    assert "/plex/media/studio a/clip.mp4" in reason and "/plex/media/studio b/clip.mp4" in reason
    assert "path_map" in reason


def test_item_deleted_after_linking_is_matched_again_at_its_new_path(plugin):
    """The same long-lived drainer links, then re-matches (a waiting job keeps it alive)."""
    old = plugin.plex.add_item(1, "/plex/media/one.mp4", size=SIZE, duration_ms=60_000)
    waiting = add_scene(plugin, ["/stash/media/not-in-plex.mp4"])
    sid = add_scene(plugin, ["/stash/media/one.mp4"])
    plugin.hook(plugin.stash.update_scene(waiting, title="Waits"))
    plugin.hook(plugin.stash.update_scene(sid, title="First"))
    settle(plugin)
    assert plugin.plex.item(old)["fields"]["title"] == "First"

    plugin.plex.remove_item(old)
    new = plugin.plex.add_item(1, "/plex/media/moved/one.mp4", size=SIZE, duration_ms=60_000)
    plugin.hook(plugin.stash.update_scene(sid, title="Second"))
    status = settle(plugin)
    assert plugin.plex.item(new)["fields"]["title"] == "Second", plugin.drainer_log()
    assert status["retrying"] == 1 and status["dlq"] == 0  # only the scene Plex does not have
    log = plugin.drainer_log()
    assert "matching again" in log and log.count("drainer finished") == 0  # one drainer did it all


def test_new_scene_before_plex_has_it_triggers_one_scan_then_syncs(plugin):
    plugin.configure(trigger_plex_scan=True)
    rk = plugin.plex.schedule_item(1, "/plex/media/new/fresh.mp4", delay=30, size=SIZE, duration_ms=60_000)
    sid = add_scene(plugin, ["/stash/media/new/fresh.mp4"], title="Fresh Scene")
    plugin.hook(create_context(sid))
    status = settle(plugin)
    assert status["retrying"] == 1, plugin.drainer_log()  # first attempt: not found, scan requested
    scans = plugin.plex.scan_requests()
    assert len(scans) == 1 and scans[0]["query"]["path"] == ["/plex/media/new"]
    # The scan made the item appear; retry the waiting job now instead of in up to 30 s
    # (unless the drainer, told of the new item by Plex's notification, was quicker).
    run = plugin.task("process_queue")
    assert run.error is None, run.stderr
    plugin.wait_drained(20)
    assert plugin.plex.item(rk)["fields"]["title"] == "Fresh Scene", run.output
    assert len(plugin.plex.scan_requests()) <= 1


# -- health_check ----------------------------------------------------------------------------
def _library(plugin, n: int = 8) -> None:
    """Stash under /mnt/nas/videos, Plex under /plex/media; one Plex-only folder name per studio."""
    for i in range(n):
        rel = f"studio {i % 3}/scene-{i}.mp4"
        plugin.stash.add_scene(
            title=f"S{i}", files=[{"path": f"/mnt/nas/videos/{rel}", "size": 10 + i, "duration": 60.0}]
        )
        plugin.plex.add_item(1, f"/plex/media/{rel}", size=10 + i, duration_ms=60_000)


def test_health_check_suggests_the_rule_for_a_wrong_path_map_and_none_for_a_right_one(plugin):
    _library(plugin)
    plugin.plex.add_section("Movies", ["/plex/movies"], key=2)
    plugin.configure(path_map="/stash/media=/plex/media", plex_libraries="Stash")
    run = plugin.task("health_check")
    assert run.error is None, run.stderr
    out = run.output
    assert out["ok"] is False
    assert out["stash"] == {"reachable": True, "version": "v0.30.1"}
    assert out["plex"]["token_accepted"] is True and out["plex"]["version"].startswith("1.41")
    assert out["libraries"]["configured"] == ["Stash"] and out["libraries"]["not_configured"] == ["Movies"]
    pm = out["path_map"]
    assert pm["sampled"] == 8 and pm["matched"] == 0 and pm["share"] == 0
    assert len(pm["unmatched_examples"]) == 5
    assert pm["unmatched_examples"][0] == {
        "stash_path": "/mnt/nas/videos/studio 0/scene-0.mp4",
        "mapped_path": "/mnt/nas/videos/studio 0/scene-0.mp4",
    }
    assert pm["suggested_path_map"] == "/mnt/nas/videos=/plex/media"
    assert any("/mnt/nas/videos=/plex/media" in m for m in run.messages("warning"))

    plugin.configure(path_map=pm["suggested_path_map"], plex_libraries="Stash")
    again = plugin.task("health_check").output
    assert again["ok"] is True, again["problems"]
    assert again["path_map"]["share"] == 1.0 and again["path_map"]["suggested_path_map"] is None
    assert again["path_map"]["unmatched_examples"] == []


def test_health_check_reports_a_rejected_token_and_an_unreachable_plex_without_failing(plugin):
    plugin.plex.fail_401 = True
    run = plugin.task("health_check")
    assert run.error is None and run.returncode == 0, run.stderr
    assert run.output["ok"] is False and run.output["plex"]["token_accepted"] is False
    assert any("token rejected" in p for p in run.output["problems"])
    assert any("token rejected" in m for m in run.messages("warning"))

    plugin.plex.fail_401 = False
    plugin.plex.refuse_connections()
    run = plugin.task("health_check")
    assert run.error is None, run.stderr
    assert run.output["ok"] is False and run.output["plex"]["reachable"] is False
    assert any("Plex is not reachable" in p for p in run.output["problems"])


def test_health_check_reports_an_unreachable_stash_without_failing(plugin):
    plugin.stash.stop()
    run = plugin.task("health_check")
    assert run.error is None, run.stderr
    assert run.output["ok"] is False and run.output["stash"]["reachable"] is False
    assert any("Stash is not reachable" in p for p in run.output["problems"])


# -- PathMap.suggest (pure) --------------------------------------------------------------------
@pytest.mark.parametrize(
    "pairs, expected",
    [
        (
            [("/mnt/nas/videos/a/x.mp4", "/plex/media/a/x.mp4"), ("/mnt/nas/videos/y.mp4", "/plex/media/y.mp4")],
            "/mnt/nas/videos=/plex/media",
        ),
        ([("C:\\Videos\\a\\x.mp4", "/plex/media/a/x.mp4")], "C:\\Videos=/plex/media"),
        ([("/data/x.mp4", "D:\\Plex\\x.mp4")], "/data=D:\\Plex"),
        ([("/videos/x.mp4", "/media/videos/x.mp4")], "/=/media"),
        ([("/same/x.mp4", "/same/x.mp4")], None),
        ([], None),
        # the majority rule wins over a stray same-name file elsewhere
        (
            [
                ("/s/a/x.mp4", "/p/a/x.mp4"),
                ("/s/b/y.mp4", "/p/b/y.mp4"),
                ("/s/b/y.mp4", "/junk/y.mp4"),
                ("/s/c/z.mp4", "/p/c/z.mp4"),
            ],
            "/s=/p",
        ),
        # pairs deriving different but compatible rules: the more general one explains all
        ([("/s/media/x.mp4", "/p/media/x.mp4"), ("/s/media/other/y.mp4", "/p/media/other/y.mp4")], "/s=/p"),
        # only a rule the setting can hold: ';' separates rules, the first '=' ends the Stash prefix
        ([("/mnt/x;y/v/a.mp4", "/plex/media/a.mp4")], None),
        ([("/mnt/v/a.mp4", "/plex/x;y/a.mp4")], None),
        ([("/mnt/x=y/v/a.mp4", "/plex/m/a.mp4")], None),
        ([("/mnt/v/a.mp4", "/plex/x=y/a.mp4")], "/mnt/v=/plex/x=y"),
    ],
)
def test_suggest_path_map(pairs, expected):
    assert PathMap().suggest(pairs) == expected


def test_suggest_path_map_case_insensitive():
    pairs = [("/Stash/Media/Studio/x.mp4", "/plex/studio/X.mp4")]
    assert PathMap().suggest(pairs) is None
    assert PathMap(case_insensitive=True).suggest(pairs) == "/Stash/Media=/plex"


def test_case_insensitive_rule_keeps_the_link_on_the_next_sync(plugin):
    rk = plugin.plex.add_item(1, "/plex/media/one.mp4", size=SIZE, duration_ms=60_000)
    sid = add_scene(plugin, ["/stash/media/one.mp4"])
    plugin.configure(case_insensitive_paths=True, path_map="/STASH/Media=/plex/media")
    for title in ("First", "Second"):
        plugin.hook(plugin.stash.update_scene(sid, title=title))
        assert settle(plugin)["pending"] == 0
        assert plugin.plex.item(rk)["fields"]["title"] == title
    assert "matching again" not in plugin.drainer_log()
