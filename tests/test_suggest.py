"""plex/suggest.py: the one place a path_map rule is suggested (pure: an index, no server)."""

from __future__ import annotations

from plex.matcher import PathIndex, PlexFile, SceneFile
from plex.suggest import Unsettled, suggest_rule, unsettled
from validation.pathmap import AS_IS, PathMap


def scene(sid: int, path: str, size: int | None = 10) -> Unsettled:
    return Unsettled(sid, f"S{sid}", SceneFile(path, size))


def index(*files: tuple[int, str, int | None], paths: PathMap = AS_IS) -> PathIndex:
    return PathIndex((PlexFile(rk, 1, path, size) for rk, path, size in files), paths)


def test_several_scenes_that_agree_give_the_rule_and_what_it_would_match():
    plex = index((1, "/plex/media/a.mp4", 10), (2, "/plex/media/b/c.mp4", 11))
    found = suggest_rule([scene(7, "/nas/a.mp4"), scene(8, "/nas/b/c.mp4", 11)], plex)
    assert found is not None and found.rule == "/nas=/plex/media"
    assert found.as_dict() == [
        {"scene_id": 7, "title": "S7", "stash_path": "/nas/a.mp4", "plex_path": "/plex/media/a.mp4", "rating_key": 1},
        {
            "scene_id": 8,
            "title": "S8",
            "stash_path": "/nas/b/c.mp4",
            "plex_path": "/plex/media/b/c.mp4",
            "rating_key": 2,
        },
    ]


def test_one_scene_is_no_evidence_for_a_folder_wide_rule():
    assert suggest_rule([scene(7, "/nas/a.mp4")], index((1, "/plex/media/a.mp4", 10))) is None


def test_a_scene_two_plex_items_fit_is_never_a_source():
    plex = index((1, "/plex/x/clip.mp4", 10), (2, "/plex/y/clip.mp4", 10))
    assert suggest_rule([scene(7, "/stash/media/clip.mp4")], plex) is None


def test_no_rule_that_would_settle_a_scene_several_items_fit():
    plex = index(
        (1, "/plex/media/a.mp4", 10),
        (2, "/plex/media/b.mp4", 10),
        (3, "/plex/media/clip.mp4", 10),  # the rule maps the third scene here exactly ...
        (4, "/plex/other/clip.mp4", 10),  # ... but this one fits it too: the user's choice
    )
    scenes = [scene(7, "/nas/a.mp4"), scene(8, "/nas/b.mp4"), scene(9, "/nas/clip.mp4")]
    assert suggest_rule(scenes, plex) is None
    found = suggest_rule(scenes[:2], plex)
    assert found is not None and [scene.scene_id for scene, _ in found.matches] == [7, 8]


def test_another_video_of_the_same_name_is_no_source_and_vetoes_a_rule():
    plex = index((1, "/plex/media/a.mp4", 10), (2, "/plex/media/b.mp4", 10), (3, "/plex/media/c.mp4", 99))
    assert suggest_rule([scene(7, "/nas/a.mp4"), scene(9, "/nas/c.mp4")], plex) is None  # one source only
    assert suggest_rule([scene(7, "/nas/a.mp4"), scene(8, "/nas/b.mp4"), scene(9, "/nas/c.mp4")], plex) is None


def test_scenes_found_by_their_path_already_are_left_out_and_existing_rules_apply():
    rules = PathMap.parse("/old=/plex/old")
    plex = index((1, "/plex/media/a.mp4", 10), (2, "/plex/media/b.mp4", 10), (3, "/plex/old/c.mp4", 10), paths=rules)
    found = suggest_rule([scene(7, "/nas/a.mp4"), scene(8, "/nas/b.mp4"), scene(9, "/old/c.mp4")], plex)
    assert (
        found is not None
        and found.rule == "/nas=/plex/media"
        and [scene.scene_id for scene, _ in found.matches] == [7, 8]
    )


def test_unsettled_reads_the_primary_file_of_stash_scenes_and_skips_the_rest():
    raws = [
        {"id": "3", "title": "T", "files": [{"path": "/a.mp4", "size": 5, "duration": 1.5}, {"path": "/b.mp4"}]},
        {"id": "4", "title": "No file", "files": []},
        {"id": "5", "title": "Bad", "files": [{"path": ""}]},
    ]
    assert unsettled(raws) == [Unsettled(3, "T", SceneFile("/a.mp4", 5, 1.5))]
