from __future__ import annotations

import pytest

from core.errors import AmbiguousMatch, PlexNotFound
from plex.matcher import (
    Choice,
    Confidence,
    Match,
    PathIndex,
    PlexFile,
    SceneFile,
    choose,
    match_scene,
)
from validation.pathmap import PathMap, PathRule, parent, parse_path_map

RULES = parse_path_map(
    r"/data=/media/stash; /data/special=/media/special; C:\Videos=/data/win;"
    r" \\nas\share=/mnt/nas; /win=D:\Media"
)

A = PlexFile(101, 1, "/media/stash/scenes/a.mp4", size=1000, duration_ms=60_000)
B1 = PlexFile(102, 1, "/media/stash/movies/b-part1.mp4")
B2 = PlexFile(102, 1, "/media/stash/movies/b-part2.mp4")
C1 = PlexFile(103, 1, "/media/stash/dup/c.mp4")
C2 = PlexFile(203, 2, "/media/stash/dup/c.mp4")
DX = PlexFile(104, 1, "/media/stash/x/d.mp4", size=500, duration_ms=30_000)
DY = PlexFile(105, 2, "/media/stash/y/d.mp4", size=700, duration_ms=45_000)
E = PlexFile(106, 1, "/media/stash/Case/E.mp4")
F = PlexFile(107, 1, "/media/stash/moved/f.mp4", size=2000, duration_ms=120_000)
G = PlexFile(108, 1, "/data/win/g.mp4")
H = PlexFile(109, 1, "/mnt/nas/h.mp4")
I = PlexFile(110, 1, "/media/special/i.mp4")
J2 = PlexFile(111, 1, "/media/stash/scenes/j-2.mp4")
K = PlexFile(112, 3, "D:\\Media\\k.mp4")
M1 = PlexFile(113, 1, "/media/stash/cd1/m.mp4")
M2 = PlexFile(113, 1, "/media/stash/cd2/m.mp4")
N1 = PlexFile(114, 1, "/media/stash/v/n.mp4", size=1)
N2 = PlexFile(114, 1, "/media/stash/v/n.mp4", size=2)
ALL = (A, B1, B2, C1, C2, DX, DY, E, F, G, H, I, J2, K, M1, M2, N1, N2)


def _match(*paths: str, case_insensitive: bool = False, rules: tuple[PathRule, ...] = RULES) -> Match:
    index = PathIndex(ALL, PathMap(rules, case_insensitive))
    return match_scene([SceneFile(p) for p in paths], index)


# (scene paths, case_insensitive, confidence, item, candidates, scene_index)
CASES = [
    pytest.param(["/data/scenes/a.mp4"], False, Confidence.HIGH, A, (A,), 0, id="prefix-map"),
    pytest.param(
        ["/data/special/i.mp4"],
        False,
        Confidence.HIGH,
        I,
        (I,),
        0,
        id="longest-prefix-wins",
    ),
    pytest.param(
        ["/data/scenes//a.mp4"],
        False,
        Confidence.HIGH,
        A,
        (A,),
        0,
        id="duplicate-separator",
    ),
    pytest.param(
        ["/database/a.mp4"],
        False,
        Confidence.MEDIUM,
        A,
        (A,),
        0,
        id="no-match-across-component",
    ),
    pytest.param([r"C:\Videos\g.mp4"], False, Confidence.HIGH, G, (G,), 0, id="windows-to-posix"),
    pytest.param(
        [r"c:\videos\g.mp4"],
        True,
        Confidence.HIGH,
        G,
        (G,),
        0,
        id="windows-case-insensitive",
    ),
    pytest.param(
        [r"c:\videos\g.mp4"],
        False,
        Confidence.MEDIUM,
        G,
        (G,),
        0,
        id="windows-case-sensitive",
    ),
    pytest.param([r"\\nas\share\h.mp4"], False, Confidence.HIGH, H, (H,), 0, id="unc"),
    pytest.param(["/win/k.mp4"], False, Confidence.HIGH, K, (K,), 0, id="posix-to-windows-plex"),
    pytest.param(
        ["/data/case/e.mp4"],
        False,
        Confidence.NONE,
        None,
        (),
        None,
        id="case-differs-sensitive",
    ),
    pytest.param(
        ["/data/case/e.mp4"],
        True,
        Confidence.HIGH,
        E,
        (E,),
        0,
        id="case-differs-insensitive",
    ),
    pytest.param(
        ["/data/dup/c.mp4"],
        False,
        Confidence.LOW,
        None,
        (C1, C2),
        0,
        id="same-path-two-sections",
    ),
    pytest.param(
        ["/data/movies/b-part2.mp4"],
        False,
        Confidence.HIGH,
        B2,
        (B2,),
        0,
        id="multipart-item",
    ),
    pytest.param(
        ["/data/v/n.mp4"],
        False,
        Confidence.HIGH,
        N1,
        (N1,),
        0,
        id="one-item-two-versions",
    ),
    pytest.param(
        ["/data/other/m.mp4"],
        False,
        Confidence.MEDIUM,
        M1,
        (M1,),
        0,
        id="one-item-parts-same-name",
    ),
    pytest.param(
        ["/data/scenes/j.mp4", "/data/scenes/j-2.mp4"],
        False,
        Confidence.HIGH,
        J2,
        (J2,),
        1,
        id="only-second-file-in-plex",
    ),
    pytest.param(
        ["/data/scenes/a.mp4", "/data/renamed/f.mp4"],
        False,
        Confidence.HIGH,
        A,
        (A,),
        0,
        id="primary-exact-first",
    ),
    pytest.param(
        ["/data/renamed/f.mp4", "/data/scenes/a.mp4"],
        False,
        Confidence.HIGH,
        A,
        (A,),
        1,
        id="exact-second-beats-name-primary",
    ),
    pytest.param(
        ["/data/renamed/f.mp4"],
        False,
        Confidence.MEDIUM,
        F,
        (F,),
        0,
        id="moved-name-only",
    ),
    pytest.param(
        ["/data/gone/z.mp4"],
        False,
        Confidence.NONE,
        None,
        (),
        None,
        id="deleted-from-plex",
    ),
    pytest.param(
        ["/data/elsewhere/d.mp4"],
        False,
        Confidence.LOW,
        None,
        (DX, DY),
        0,
        id="same-name-two-folders",
    ),
]


@pytest.mark.parametrize(("paths", "ci", "confidence", "item", "candidates", "scene_index"), CASES)
def test_match_table(
    paths: list[str],
    ci: bool,
    confidence: Confidence,
    item: PlexFile | None,
    candidates: tuple[PlexFile, ...],
    scene_index: int | None,
) -> None:
    got = _match(*paths, case_insensitive=ci)
    assert (got.confidence, got.item, got.candidates, got.scene_index) == (
        confidence,
        item,
        candidates,
        scene_index,
    )


def test_looked_for_holds_every_mapped_path() -> None:
    got = _match("/data/gone/z.mp4", r"C:\Videos\sub\z.mp4", "/elsewhere/z.mp4")
    assert got.looked_for == (
        "/media/stash/gone/z.mp4",
        "/data/win/sub/z.mp4",
        "/elsewhere/z.mp4",
    )
    assert got.reason == "no Plex item at /media/stash/gone/z.mp4, /data/win/sub/z.mp4, /elsewhere/z.mp4"


def test_trailing_slashes_in_rules_do_not_matter() -> None:
    rules = parse_path_map("/data/=/media/stash/")
    got = _match("/data/scenes/a.mp4", rules=rules)
    assert (got.confidence, got.item) == (Confidence.HIGH, A)


def test_empty_path_map_is_identity() -> None:
    got = _match("/media/stash/scenes/a.mp4", rules=parse_path_map(""))
    assert (got.confidence, got.item, got.reason) == (
        Confidence.HIGH,
        A,
        "exact path /media/stash/scenes/a.mp4",
    )


def test_index_lookups() -> None:
    index = PathIndex(ALL)
    assert len(index) == 18
    assert index.by_path("/media/stash/dup//c.mp4/") == [C1, C2]
    assert index.by_path("D:/Media/k.mp4") == [K]
    assert index.by_name("d.mp4") == [DX, DY]
    assert index.by_name("/anything/d.mp4") == [DX, DY]
    assert index.by_name("e.mp4") == []
    assert PathIndex(ALL, PathMap(case_insensitive=True)).by_name("e.mp4") == [E]


# --- choose ---------------------------------------------------------------------------


def _scene(path: str, size: int | None = None, duration_s: float | None = None) -> list[SceneFile]:
    return [SceneFile(path, size, duration_s)]


def _chosen(files: list[SceneFile], strict: bool = True) -> Choice:
    index = PathIndex(ALL, PathMap(RULES))
    return choose(match_scene(files, index), strict)


def test_strict_high_is_accepted() -> None:
    assert _chosen(_scene("/data/scenes/a.mp4")) == Choice(A, "exact path /media/stash/scenes/a.mp4")


def test_strict_medium_accepted_when_size_agrees() -> None:
    got = _chosen(_scene("/data/renamed/f.mp4", size=2000))
    assert got.item == F
    assert got.reason == (
        "no Plex item at /media/stash/renamed/f.mp4; only file named 'f.mp4' is "
        "/media/stash/moved/f.mp4; in Plex 2.0 KB, 2:00 long; "
        "in Stash 2.0 KB, length unknown"
    )


def test_strict_medium_accepted_when_duration_within_one_second() -> None:
    assert _chosen(_scene("/data/renamed/f.mp4", duration_s=121.0)).item == F


@pytest.mark.parametrize("strict", [True, False])
def test_a_differing_size_vetoes_a_name_match_even_when_the_duration_agrees(strict: bool) -> None:
    """The reproduced failure: same name elsewhere, duration equal, 100 MB apart: another video."""
    with pytest.raises(AmbiguousMatch, match="but it is another video"):
        _chosen(_scene("/data/renamed/f.mp4", size=2000 + 100_000_000, duration_s=120.0), strict=strict)


def test_strict_medium_refused_when_size_differs() -> None:
    with pytest.raises(AmbiguousMatch) as caught:
        _chosen(_scene("/data/renamed/f.mp4", size=1999))
    assert caught.value.candidates == ("/media/stash/moved/f.mp4",)
    assert str(caught.value) == (
        "no Plex item at /media/stash/renamed/f.mp4; only file named 'f.mp4' is "
        "/media/stash/moved/f.mp4, but it is another video (in Plex 2,000 bytes, "
        "2:00 long; in Stash 1,999 bytes, length unknown). Fix path_map so the "
        "scene's path equals the Plex path, or choose its item in the match inbox on the Stash2Plex page "
        "(or run 'python Stash2Plex.py pin <scene> <item>')."
    )


def test_strict_medium_refused_when_duration_off_by_more_than_one_second() -> None:
    with pytest.raises(AmbiguousMatch) as caught:
        _chosen(_scene("/data/renamed/f.mp4", duration_s=121.5))
    assert "(in Plex 2.0 KB, 2:00 long; in Stash size unknown, 2:01.5 long)" in str(caught.value)


def test_strict_medium_refused_when_nothing_can_be_compared() -> None:
    with pytest.raises(AmbiguousMatch, match="not confirmed"):
        _chosen([SceneFile(r"c:\videos\g.mp4", size=5, duration_s=9.0)])


def test_loose_medium_is_accepted_without_evidence() -> None:
    got = _chosen(_scene("/data/renamed/f.mp4"), strict=False)
    assert got.item == F
    assert got.reason.endswith("; accepted by file name (loose_matching on)")


def test_strict_low_names_every_candidate_and_what_to_do() -> None:
    with pytest.raises(AmbiguousMatch) as caught:
        _chosen(_scene("/data/elsewhere/d.mp4", size=500, duration_s=30.0))
    assert caught.value.candidates == ("/media/stash/x/d.mp4", "/media/stash/y/d.mp4")
    assert str(caught.value) == (
        "no Plex item at /media/stash/elsewhere/d.mp4; 2 items have a file named 'd.mp4': "
        "/media/stash/x/d.mp4 (item 104, section 1), /media/stash/y/d.mp4 (item 105, section 2). "
        "None is clearly the scene's file: choose its item in the match inbox on the Stash2Plex page "
        "(or run 'python Stash2Plex.py pin <scene> <item>'), remove the duplicates in Plex, or fix path_map "
        "so the scene's path equals exactly one Plex path."
    )


@pytest.mark.parametrize("strict", [True, False])
def test_none_raises_not_found_with_mapped_paths(strict: bool) -> None:
    with pytest.raises(PlexNotFound) as caught:
        _chosen([SceneFile("/data/gone/z.mp4"), SceneFile(r"C:\Videos\z.mp4")], strict)
    assert caught.value.looked_for == ("/media/stash/gone/z.mp4", "/data/win/z.mp4")
    assert str(caught.value) == (
        "No Plex item has the scene's file; looked for /media/stash/gone/z.mp4, "
        "/data/win/z.mp4. If Plex has not scanned it yet this resolves itself; "
        "otherwise check path_map."
    )


def test_loose_low_picks_the_only_candidate_whose_size_and_duration_agree() -> None:
    got = _chosen(_scene("/data/elsewhere/d.mp4", size=700, duration_s=45.4), strict=False)
    assert got == Choice(
        DY,
        "only candidate whose size and duration agree, of: /media/stash/x/d.mp4 (item 104, "
        "section 1), /media/stash/y/d.mp4 (item 105, section 2)",
    )


def test_loose_low_size_alone_is_not_enough() -> None:
    with pytest.raises(AmbiguousMatch):
        _chosen(_scene("/data/elsewhere/d.mp4", size=700), strict=False)


def test_loose_low_picks_the_unique_longest_common_suffix() -> None:
    got = _chosen(_scene("/otherroot/x/d.mp4"), strict=False)
    assert got.item == DX
    assert got.reason.startswith("only candidate sharing 2 trailing path components with /otherroot/x/d.mp4")


def test_loose_low_refuses_suffix_winner_contradicted_by_size() -> None:
    with pytest.raises(AmbiguousMatch):
        _chosen(_scene("/otherroot/x/d.mp4", size=700), strict=False)


def test_loose_low_refuses_exact_duplicates() -> None:
    with pytest.raises(AmbiguousMatch) as caught:
        _chosen(_scene("/data/dup/c.mp4"), strict=False)
    assert caught.value.candidates == (
        "/media/stash/dup/c.mp4",
        "/media/stash/dup/c.mp4",
    )
    assert "2 Plex items hold /media/stash/dup/c.mp4" in str(caught.value)


def test_loose_low_refuses_when_two_candidates_agree_equally() -> None:
    twins = (DX, PlexFile(199, 2, "/media/stash/z/d.mp4", size=500, duration_ms=30_000))
    files = _scene("/elsewhere/d.mp4", size=500, duration_s=30.0)
    match = match_scene(files, PathIndex(twins, PathMap(RULES)))
    with pytest.raises(AmbiguousMatch):
        choose(match, False)


# --- path_map parsing -------------------------------------------------------------------

FORM = "write stash_prefix=plex_prefix, rules separated by ';' (e.g. /data=/media/stash)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", f"path_map rule 1 'abc' has no '='; {FORM}"),
        ("/a=/b;abc", f"path_map rule 2 'abc' has no '='; {FORM}"),
        ("/a=/b; ;abc ", f"path_map rule 2 'abc' has no '='; {FORM}"),
        (" = /b", f"path_map rule 1 '= /b' has an empty Stash prefix; {FORM}"),
        ("/a=/b;/c= ", f"path_map rule 2 '/c=' has an empty Plex prefix; {FORM}"),
        (
            "/a=/b;/a/=/c",
            "path_map rule 2 '/a/=/c' repeats the Stash prefix of rule 1; keep one rule per Stash prefix",
        ),
    ],
)
def test_parse_path_map_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_path_map(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("text", [None, "", "   ", " ; ;; "])
def test_parse_path_map_empty_is_identity(text: str | None) -> None:
    assert parse_path_map(text) == ()


def test_parse_path_map_trims_and_keeps_order() -> None:
    assert parse_path_map(r" /data = /media ; C:\V = /v=x ;") == (
        PathRule("/data", "/media"),
        PathRule("C:\\V", "/v=x"),
    )


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("/data/x/y.mp4", "/data=/media", "/media/x/y.mp4"),
        ("/data", "/data=/media", "/media"),
        ("/database/y.mp4", "/data=/media", "/database/y.mp4"),
        ("/data/x/y.mp4", "/data/=/media/", "/media/x/y.mp4"),
        ("/data/x/y.mp4", "/=/root", "/root/data/x/y.mp4"),
        ("/data/x/y.mp4", "/data=/", "/x/y.mp4"),
        ("/data/x/y.mp4", "/data=/a;/data/x=/b", "/b/y.mp4"),
        ("/data/x/y.mp4", "/data/x=/b;/data=/a", "/b/y.mp4"),
        (r"C:\Videos\x\y.mp4", r"C:\Videos=/data", "/data/x/y.mp4"),
        ("C:/Videos/x/y.mp4", r"C:\Videos\=/data", "/data/x/y.mp4"),
        (r"\\nas\share\x\y.mp4", r"\\nas\share=/mnt", "/mnt/x/y.mp4"),
        ("/data/x/y.mp4", r"/data=D:\Media", r"D:\Media\x\y.mp4"),
        ("/data/x/y.mp4", "/data=D:/Media", "D:/Media/x/y.mp4"),
        ("/data/x/y.mp4", r"/data=\\nas\share", r"\\nas\share\x\y.mp4"),
        ("/data/x/y.mp4", r"/data=D:\\", r"D:\x\y.mp4"),
        (r"C:\Other\y.mp4", r"C:\Videos=/data", r"C:\Other\y.mp4"),
    ],
)
def test_map_path(path: str, text: str, expected: str) -> None:
    assert PathMap.parse(text).map(path) == expected


@pytest.mark.parametrize(
    ("path", "ci", "expected"),
    [
        ("/a//b/", False, "/a/b"),
        ("/A/B.mp4", True, "/a/b.mp4"),
        ("/", False, "/"),
        ("c:\\Videos\\\\x.mp4", False, "C:/Videos/x.mp4"),
        ("C:\\", False, "C:/"),
        (r"\\NAS\share\x", False, "//NAS/share/x"),
        (r"\\NAS\share\x", True, "//nas/share/x"),
        ("/Caf\u0065\u0301/x", False, "/Caf\u00e9/x"),
    ],
)
def test_normalize(path: str, ci: bool, expected: str) -> None:
    assert PathMap(case_insensitive=ci).key(path) == expected


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("/a/b/x.mp4", "/a/b"),
        ("/x.mp4", "/"),
        ("C:\\a\\x.mp4", "C:\\a"),
        ("C:\\x.mp4", "C:\\"),
        ("C:/a/x.mp4", "C:/a"),
        ("\\\\srv\\share\\a\\x.mp4", "\\\\srv\\share\\a"),
        ("/a/b\\c.mp4", "/a"),  # a backslash is part of a POSIX name
    ],
)
def test_parent_is_the_folder_written_as_the_path_writes_it(path: str, folder: str) -> None:
    """The folder a scan is asked for (worker/locate.py ``request_scan``)."""
    assert parent(path) == folder
