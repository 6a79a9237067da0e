"""Drive the real python-plexapi against the Plex emulator.

Each test asserts both what plexapi put on the wire (the emulator's request log)
and the state the emulator ended up in, so the emulator stays faithful to what
plexapi sends and parses.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests
from plexapi.exceptions import BadRequest, NotFound, Unauthorized
from plexapi.library import MovieSection
from plexapi.server import PlexServer

from tests.emulators.plex_emulator import HTML_401, PlexEmulator

TOKEN = "emulator-test-token"
ROOT = "/data/stash"
ODD_NAMES = ["Tag, with comma", "A&B=C", "100% / sure?", "#hash", 'it\'s "quoted"']


@pytest.fixture
def emu() -> Iterator[PlexEmulator]:
    with PlexEmulator(token=TOKEN) as emulator:
        yield emulator


@pytest.fixture
def section_key(emu: PlexEmulator) -> int:
    return emu.add_section("Stash", [ROOT])


@pytest.fixture
def plex(emu: PlexEmulator, section_key: int) -> PlexServer:
    return PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=5)


def _full_item(plex: PlexServer, rk: int):
    item = plex.fetchItem(rk)
    item.reload()
    return item


def _section_attrs(plex: PlexServer) -> dict:
    return dict(plex.query("/library/sections")[0].attrib)


# ---------------------------------------------------------------- connect
def test_connect_sends_one_get_root_with_token_header(emu: PlexEmulator) -> None:
    plex = PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=5)
    assert plex.friendlyName == "Stash2Plex Test PMS"
    assert len(plex.machineIdentifier) == 40
    assert plex.version.startswith("1.41")
    [req] = emu.requests
    assert (req["method"], req["path"], req["query"], req["status"]) == ("GET", "/", {}, 200)
    assert req["headers"]["X-Plex-Token"] == TOKEN


def test_token_accepted_in_query_and_missing_token_gets_html_401(emu: PlexEmulator) -> None:
    ok = requests.get(f"{emu.url}/identity", params={"X-Plex-Token": TOKEN}, timeout=5)
    assert ok.status_code == 200
    assert ok.headers["Content-Type"] == "text/xml;charset=utf-8"
    assert 'claimed="1"' in ok.text
    denied = requests.get(f"{emu.url}/identity", timeout=5)
    assert (denied.status_code, denied.text) == (401, HTML_401)
    with pytest.raises(Unauthorized):
        PlexServer(emu.url, "wrong", session=requests.Session(), timeout=5)


# ---------------------------------------------------------------- sections
def test_sections(emu: PlexEmulator, plex: PlexServer) -> None:
    emu.clear_requests()
    [section] = plex.library.sections()
    assert isinstance(section, MovieSection)
    assert (section.key, section.title, section.locations) == (1, "Stash", [ROOT])
    assert section.refreshing is False
    assert plex.library.sectionByID(1).title == "Stash"
    assert [r["path"] for r in emu.requests] == ["/library", "/library/sections"]
    assert requests.get(f"{emu.url}/library/sections/", headers={"X-Plex-Token": TOKEN}, timeout=5).status_code == 200


# ---------------------------------------------------------------- finding
def test_all_pages_past_100_items_with_exact_requests(emu, section_key, plex) -> None:
    for i in range(250):
        emu.add_item(section_key, f"{ROOT}/s/scene {i:03d}.mp4")
    section = plex.library.section("Stash")
    emu.clear_requests()
    items = section.all()
    assert len({v.ratingKey for v in items}) == 250
    assert [v.title for v in items[:2]] == ["scene 000", "scene 001"]
    assert items[-1].locations == [f"{ROOT}/s/scene 249.mp4"]
    pages = emu.requests_matching("GET", "/library/sections/1/all")
    assert [(r["headers"]["X-Plex-Container-Start"], r["headers"]["X-Plex-Container-Size"]) for r in pages] == [
        ("0", "100"),
        ("100", "100"),
        ("200", "100"),
    ]
    assert len(emu.requests) == 3  # Media/Part in list views: no per-item reloads
    assert pages[0]["query"] == {"includeGuids": ["1"], "type": ["1"]}


def test_small_container_size_and_total_view_size(emu, section_key, plex) -> None:
    for i in range(20):
        emu.add_item(section_key, f"{ROOT}/clip {i:02d}.mp4")
    section = plex.library.section("Stash")
    emu.clear_requests()
    found = section.search(libtype="movie", container_size=7)
    assert [v.title for v in found] == [f"clip {i:02d}" for i in range(20)]
    assert len(emu.requests) == 3
    root = plex.query("/library/sections/1/all", headers={"X-Plex-Container-Start": "14", "X-Plex-Container-Size": "7"})
    assert (root.attrib["size"], root.attrib["totalSize"], root.attrib["offset"]) == ("6", "20", "14")
    assert root.attrib["librarySectionID"] == "1"
    assert section.totalViewSize() == 20
    assert emu.requests[-1]["query"]["X-Plex-Container-Size"] == ["0"]


def test_title_search_is_case_insensitive_substring_and_get_uses_limit(emu, section_key, plex) -> None:
    for name in ("Scene One", "scene two", "Other Clip"):
        emu.add_item(section_key, f"{ROOT}/{name}.mp4")
    section = plex.library.section("Stash")
    assert sorted(v.title for v in section.search(title="SCENE")) == ["Scene One", "scene two"]
    emu.clear_requests()
    assert section.get("clip").title == "Other Clip"
    assert emu.requests[0]["query"] == {"includeGuids": ["1"], "limit": ["1"], "title": ["clip"]}
    with pytest.raises(NotFound):
        section.get("nothing")


def test_list_view_truncates_tags_detail_view_has_all(emu, section_key, plex) -> None:
    rk = emu.add_item(
        section_key,
        f"{ROOT}/tagged.mp4",
        genre=["G1", "G2", "G3"],
        actor=["A1", "A2", "A3", "A4"],
        collection=["C"],
        label=["L"],
    )
    listed = plex.query("/library/sections/1/all")[0]
    assert [e.tag for e in listed] == ["Media", "Genre", "Genre", "Role", "Role", "Role"]
    assert "id" not in listed.find("Genre").attrib
    assert listed.find("Media/Part").attrib["file"] == f"{ROOT}/tagged.mp4"
    item = _full_item(plex, rk)
    assert [g.tag for g in item.genres] == ["G1", "G2", "G3"]
    assert [r.tag for r in item.roles] == ["A1", "A2", "A3", "A4"]
    assert [c.tag for c in item.collections] == ["C"] and [lb.tag for lb in item.labels] == ["L"]
    assert item.genres[0].filter == f"genre={item.genres[0].id}"
    assert item.roles[0].filter.startswith("actor=")
    assert item.fields == [] and item.librarySectionID == 1


def test_fetch_item_items_reload_and_404(emu, section_key, plex) -> None:
    a = emu.add_item(section_key, f"{ROOT}/a.mp4")
    b = emu.add_item(section_key, f"{ROOT}/b.mp4")
    emu.clear_requests()
    assert plex.fetchItem(a).title == "a"
    assert [v.ratingKey for v in plex.fetchItems([a, b])] == [a, b]
    assert [r["path"] for r in emu.requests] == [f"/library/metadata/{a}", f"/library/metadata/{a},{b}"]
    meta = plex.query(f"/library/metadata/{a}")
    assert meta.attrib["librarySectionID"] == "1" and meta[0].attrib["librarySectionID"] == "1"
    item = plex.fetchItem(a)
    emu.clear_requests()
    item.reload()
    assert emu.requests[0]["query"]["includeMarkers"] == ["1"]
    with pytest.raises(NotFound):
        plex.fetchItem(99999)
    emu.remove_item(b)
    with pytest.raises(NotFound):
        plex.fetchItem(b)


# ---------------------------------------------------------------- field edits
FIELD_EDITS = [
    ("editTitle", "title", "New Title: ä & ü / 100%"),
    ("editSortTitle", "titleSort", "Sort Me"),
    ("editSummary", "summary", "Line 1\nLine 2 <b>&</b>"),
    ("editTagline", "tagline", "A tagline"),
    ("editStudio", "studio", "Studio, Inc."),
    ("editOriginallyAvailable", "originallyAvailableAt", "2024-01-31"),
    ("editContentRating", "contentRating", "XXX"),
    ("editOriginalTitle", "originalTitle", "Original"),
]


@pytest.mark.parametrize(("method", "name", "value"), FIELD_EDITS)
def test_each_field_edit_sets_value_and_lock(emu, section_key, plex, method, name, value) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/edit me.mp4")
    item = plex.fetchItem(rk)
    emu.clear_requests()
    getattr(item, method)(value)
    [put] = emu.edit_requests()
    assert put["path"] == "/library/sections/1/all" and put["status"] == 200
    assert put["query"] == {f"{name}.locked": ["1"], f"{name}.value": [value], "id": [str(rk)], "type": ["1"]}
    state = emu.item(rk)
    assert state["fields"][name] == value and name in state["locks"]
    item.reload()
    assert getattr(item, name) is not None and item.isLocked(name)
    getattr(item, method)(value, locked=False)
    item.reload()
    assert not item.isLocked(name) and name not in emu.item(rk)["locks"]


def test_edit_field_year_and_empty_value(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/y.mp4", summary="old")
    item = plex.fetchItem(rk)
    item.editField("year", 2024)
    item.editSummary("")
    assert emu.item(rk)["fields"]["year"] == "2024"
    assert emu.item(rk)["fields"]["summary"] == ""
    assert _full_item(plex, rk).year == 2024


def test_batch_edits_send_one_put(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/batch.mp4")
    item = _full_item(plex, rk)
    emu.clear_requests()
    item.batchEdits()
    item.editTitle("Batched").editSummary("Sum").editStudio("Studio")
    item.addGenre(["G1", "G2"]).addLabel("Stash2Plex").addCollection("Coll")
    item.saveEdits()
    [put] = emu.edit_requests()
    assert put["query"]["genre[1].tag.tag"] == ["G2"] and put["query"]["id"] == [str(rk)]
    state = emu.item(rk)
    assert state["fields"]["title"] == "Batched" and state["fields"]["studio"] == "Studio"
    assert state["tags"]["genre"] == ["G1", "G2"] and state["tags"]["label"] == ["Stash2Plex"]
    assert state["locks"] >= {"title", "summary", "studio", "genre", "label", "collection"}


def test_section_put_without_id_edits_every_item(emu, section_key, plex) -> None:
    keys = [emu.add_item(section_key, f"{ROOT}/{n}.mp4") for n in "abc"]
    resp = requests.put(
        f"{emu.url}/library/sections/{section_key}/all",
        params={"type": 1, "studio.value": "Everyone"},
        headers={"X-Plex-Token": TOKEN},
        timeout=5,
    )
    assert (resp.status_code, resp.content) == (200, b"")
    assert {emu.item(k)["fields"]["studio"] for k in keys} == {"Everyone"}


def test_metadata_put_accepts_same_language(emu, section_key, plex) -> None:
    a = emu.add_item(section_key, f"{ROOT}/a.mp4", genre=["X", "Y"])
    b = emu.add_item(section_key, f"{ROOT}/b.mp4", genre=["Y"])
    plex.query(
        f"/library/metadata/{a},{b}", method=plex._session.put, params={"title.value": "Same", "genre[].tag": ""}
    )
    assert [emu.item(k)["fields"]["title"] for k in (a, b)] == ["Same", "Same"]
    assert [emu.item(k)["tags"]["genre"] for k in (a, b)] == [[], []]
    assert len(emu.edit_requests()) == 1
    with pytest.raises(BadRequest):
        plex.query(f"/library/metadata/{a}", method=plex._session.put, params={"bogus.value": "x"})


# ---------------------------------------------------------------- tags
@pytest.mark.parametrize("semantics", ["replace", "append"])
def test_tag_add_and_remove_odd_names(emu, section_key, plex, semantics) -> None:
    emu.tag_semantics = semantics
    rk = emu.add_item(section_key, f"{ROOT}/tags.mp4", genre=["Old"])
    item = _full_item(plex, rk)
    item.addGenre(ODD_NAMES)
    assert emu.item(rk)["tags"]["genre"] == ["Old", *ODD_NAMES]
    item.reload()
    emu.clear_requests()
    item.removeGenre(ODD_NAMES[:3])
    [put] = emu.edit_requests()
    assert put["query"]["genre[].tag.tag-"] == [",".join(quote(n) for n in ODD_NAMES[:3])]
    assert emu.item(rk)["tags"]["genre"] == ["Old", *ODD_NAMES[3:]]


def test_indexed_list_replaces_or_appends_per_switch(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/sem.mp4", genre=["A", "B"])
    params = {"genre[0].tag.tag": "C", "genre.locked": 1}
    plex.fetchItem(rk).edit(**params)
    assert emu.item(rk)["tags"]["genre"] == ["C"]
    emu.tag_semantics = "append"
    plex.fetchItem(rk).edit(**{"genre[0].tag.tag": "D"})
    assert emu.item(rk)["tags"]["genre"] == ["C", "D"]
    # an indexed list plus removals of the rest gives the same result under either rule
    for semantics in ("append", "replace"):
        emu.tag_semantics = semantics
        plex.fetchItem(rk).edit(**{"genre[0].tag.tag": "C", "genre[1].tag.tag": "E", "genre[].tag.tag-": quote("D")})
        assert emu.item(rk)["tags"]["genre"] == ["C", "E"]


def test_actor_roles_and_thumbs(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/actors.mp4")
    item = plex.fetchItem(rk)
    item.edit(
        **{
            "actor[0].tag.tag": "Performer A",
            "actor[0].tagging.text": "Lead",
            "actor[1].tag.tag": "Performer C",
            "actor[1].tag.thumb": "http://stash/p/7.jpg",
            "actor.locked": 1,
        }
    )
    item.reload()
    assert [(r.tag, r.role, r.thumb) for r in item.roles] == [
        ("Performer A", "Lead", None),
        ("Performer C", None, "http://stash/p/7.jpg"),
    ]
    assert item.isLocked("actor")
    item.editTags("actor", ["Performer A"], remove=True)
    assert emu.item(rk)["tags"]["actor"] == ["Performer C"]


def test_an_actors_photo_is_one_for_the_whole_library_and_fetched_by_plex(emu, section_key, plex) -> None:
    """Tags are server-wide: a photo written with one item shows on every item with that actor
    (the last one written wins), and PMS fetches the URL itself."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Images(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.startswith("/ok")
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "image/png" if ok else "text/plain")
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"png")

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Images)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        one = emu.add_item(section_key, f"{ROOT}/one.mp4", actor=["Performer C"])
        two = emu.add_item(section_key, f"{ROOT}/two.mp4", actor=["performer c", "Performer D"])
        plex.fetchItem(one).edit(**{"actor[0].tag.tag": "Performer C", "actor[0].tag.thumb": f"{base}/ok/1"})
        assert [(r.tag, r.thumb) for r in _full_item(plex, two).roles] == [
            ("Performer C", f"{base}/ok/1"),
            ("Performer D", None),
        ]
        plex.fetchItem(two).edit(**{"actor[0].tag.tag": "Performer C", "actor[0].tag.thumb": f"{base}/gone"})
        assert _full_item(plex, one).roles[0].thumb == emu.photo("performer C") == f"{base}/gone"
        fetched = [(f["url"], f["status"], f["ok"]) for f in emu.wait_photo_fetches(2)]
        assert sorted(fetched) == [(f"{base}/gone", 404, False), (f"{base}/ok/1", 200, True)]
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- images
def test_upload_poster_by_url_and_bytes(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/img.mp4")
    item = plex.fetchItem(rk)
    old_thumb = emu.item(rk)["thumb"]
    url = "http://stash.local:9999/scene/1/screenshot?t=1&x=a b"
    item.uploadPoster(url=url)
    state = emu.item(rk)
    assert state["poster_hash"] == hashlib.sha1(url.encode()).hexdigest()
    assert state["thumb"] != old_thumb and "thumb" in state["locks"]
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    item.uploadPoster(filepath=png)
    first, second = emu.upload_requests()
    assert first["query"] == {"url": [url]} and first["body_len"] == 0
    assert second["query"] == {} and second["body_len"] == len(png)
    state = emu.item(rk)
    assert (state["uploads"], state["poster_hash"]) == (2, hashlib.sha1(png).hexdigest())
    posters = item.posters()
    own, by_url, by_bytes = posters
    assert own.ratingKey.startswith("media://") and own.ratingKey.endswith(".bundle/Contents/Thumbnails/thumb1.jpg")
    assert [(p.ratingKey, p.selected) for p in (by_url, by_bytes)] == [
        (f"upload://posters/{hashlib.sha1(url.encode()).hexdigest()}", False),
        (f"upload://posters/{hashlib.sha1(png).hexdigest()}", True),
    ]
    item.setPoster(by_url)
    assert [p.selected for p in item.posters()] == [False, True, False]
    assert emu.item(rk)["poster_hash"] == hashlib.sha1(url.encode()).hexdigest()
    item.uploadPoster(filepath=png)  # the same bytes again: the same entry, selected
    assert [p.selected for p in item.posters()] == [False, False, True]
    item.setPoster(own)  # Plex's own poster (a frame of the video) back
    assert [p.selected for p in item.posters()] == [True, False, False] and emu.item(rk)["poster_hash"] is None
    item.unlockPoster()
    assert "thumb" not in emu.item(rk)["locks"]
    item.uploadArt(filepath=png)
    assert emu.item(rk)["art_hash"] == hashlib.sha1(png).hexdigest()
    assert "art" in emu.item(rk)["locks"]


# ---------------------------------------------------------------- scans
def test_scan_with_path_makes_scheduled_item_appear(emu, section_key, plex) -> None:
    rk = emu.schedule_item(section_key, f"{ROOT}/studio a/new & odd #1.mp4", delay=60)
    section = plex.library.section("Stash")
    assert _section_attrs(plex)["refreshing"] == "1"
    assert section.all() == []
    before = _section_attrs(plex)
    emu.clear_requests()
    section.update(path=f"{ROOT}/studio a")
    [scan] = emu.scan_requests()
    assert (scan["method"], scan["query"]) == ("GET", {"path": [f"{ROOT}/studio a"]})
    assert [v.ratingKey for v in section.all()] == [rk]
    after = _section_attrs(plex)
    assert after["refreshing"] == "0"
    assert int(after["updatedAt"]) > int(before["updatedAt"])
    assert int(after["contentChangedAt"]) > int(before["contentChangedAt"])
    section.cancelUpdate()
    assert emu.scan_requests()[-1]["method"] == "DELETE"


def test_scheduled_item_appears_after_delay_and_unrelated_scan_does_not_help(emu, section_key, plex):
    now = [1_800_000_000.0]
    emu.clock = lambda: now[0]
    rk = emu.schedule_item(section_key, f"{ROOT}/later/x.mp4", delay=0.3)
    section = plex.library.section("Stash")
    section.update(path=f"{ROOT}/elsewhere")
    now[0] += 0.29
    assert section.all() == []
    now[0] += 0.01
    assert [v.ratingKey for v in section.all()] == [rk]


def test_section_timestamps_change_on_edit_and_remove(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/t.mp4")
    first = _section_attrs(plex)
    plex.fetchItem(rk).editTitle("T2")
    second = _section_attrs(plex)
    emu.remove_item(rk)
    third = _section_attrs(plex)
    assert int(first["contentChangedAt"]) < int(second["contentChangedAt"]) < int(third["contentChangedAt"])
    assert int(first["updatedAt"]) < int(second["updatedAt"]) < int(third["updatedAt"])


def test_item_refresh_reverts_only_unlocked_fields(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/r.mp4", title="Scanned")
    item = plex.fetchItem(rk)
    item.editTitle("Kept").editSummary("Lost", locked=False)
    emu.clear_requests()
    item.refresh()
    assert [(r["method"], r["path"]) for r in emu.requests] == [("PUT", f"/library/metadata/{rk}/refresh")]
    assert emu.item(rk)["fields"]["title"] == "Kept" and emu.item(rk)["fields"]["summary"] == ""


# ---------------------------------------------------------------- faults
def test_fail_401_and_503(emu, section_key, plex) -> None:
    emu.fail_401 = True
    with pytest.raises(Unauthorized):
        plex.library.sections()
    emu.fail_401, emu.fail_503 = False, True
    with pytest.raises(BadRequest) as err:
        plex.query("/identity")
    assert not isinstance(err.value, Unauthorized) and "(503)" in str(err.value)
    emu.fail_503 = False
    assert plex.query("/identity").attrib["claimed"] == "1"
    assert [r["status"] for r in emu.requests[-3:]] == [401, 503, 200]


def test_refused_then_accepted_on_same_port(emu, section_key, plex) -> None:
    port = emu.port
    plex.query("/identity")  # leaves a pooled keep-alive connection
    emu.refuse_connections()
    with pytest.raises(requests.exceptions.ConnectionError):
        plex.query("/identity")
    emu.accept_connections()
    assert emu.port == port
    assert plex.query("/identity").attrib["claimed"] == "1"


def test_stall_past_timeout_and_latency(emu, section_key) -> None:
    plex = PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=0.5)
    emu.stall = 2.0
    with pytest.raises(requests.exceptions.ReadTimeout):
        plex.query("/identity")
    emu.stall = 0.0
    emu.latency = 0.25
    # a client that waits for longer than both: the 0.5 s above is 0.25 s of margin on a loaded machine
    patient = PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=30)
    started = time.monotonic()
    patient.query("/identity")
    assert 0.25 <= time.monotonic() - started < 2.0  # the latency's floor, under the stall just turned off


# ---------------------------------------------------------------- edges
def test_bad_requests_map_to_plexapi_errors(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/e.mp4")
    other = emu.add_section("Other", ["/other"])
    foreign = emu.add_item(other, "/other/f.mp4")
    with pytest.raises(BadRequest):
        plex.query("/library/sections/1/all", headers={"X-Plex-Container-Size": "many"})
    with pytest.raises(NotFound):
        plex.query(f"/library/metadata/{rk},424242", method=plex._session.put, params={"title.value": "x"})
    with pytest.raises(NotFound):
        plex.query(
            "/library/sections/1/all", method=plex._session.put, params={"id": foreign, "type": 1, "title.value": "x"}
        )
    with pytest.raises(NotFound):
        plex.query("/library/metadata/424242/posters")
    assert emu.item(rk)["fields"]["title"] == "e" and emu.item(foreign)["fields"]["title"] == "f"


def test_request_records_and_filters(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/r.mp4")
    emu.clear_requests()
    before = time.time()
    plex.fetchItem(rk).uploadArt(filepath=b"12345")
    fetch, upload = emu.requests
    assert set(fetch) == {"method", "path", "target", "query", "headers", "body_len", "status", "time"}
    assert before <= fetch["time"] <= upload["time"]
    assert (upload["method"], upload["path"], upload["body_len"]) == ("POST", f"/library/metadata/{rk}/arts", 5)
    assert emu.requests_matching("POST") == [upload] == emu.upload_requests()
    assert emu.requests_matching(path_prefix="/library/metadata") == [fetch, upload]
    assert emu.edit_requests() == [] and emu.scan_requests() == []


def test_concurrent_clients(emu, section_key, plex) -> None:
    from concurrent.futures import ThreadPoolExecutor

    keys = [emu.add_item(section_key, f"{ROOT}/c{i}.mp4") for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        titles = list(pool.map(lambda k: plex.fetchItem(k).title, keys))
    assert titles == [f"c{i}" for i in range(16)]
    assert len(emu.requests_matching("GET", "/library/metadata/")) == 16


def test_refused_for_fresh_clients_too(emu) -> None:
    emu.refuse_connections()
    with pytest.raises(requests.exceptions.ConnectionError):
        PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=2)
    emu.accept_connections()
    assert PlexServer(emu.url, TOKEN, session=requests.Session(), timeout=2).friendlyName


# ---------------------------------------------------------------- ratings
def test_rate_through_plexapi_sets_and_clears_the_user_rating(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/rated.mp4")
    item = _full_item(plex, rk)
    emu.clear_requests()
    item.rate(7.5)
    [req] = emu.rate_requests()
    assert req["query"] == {"key": [str(rk)], "identifier": ["com.plexapp.plugins.library"], "rating": ["7.5"]}
    reread = _full_item(plex, rk)
    assert reread.userRating == 7.5 and reread.lastRatedAt is not None
    item.rate()  # None: plexapi sends rating=-1
    assert _full_item(plex, rk).userRating is None
    with pytest.raises(BadRequest):  # plexapi refuses before sending
        item.rate(11)
    assert len(emu.rate_requests()) == 2
    bad = requests.put(
        f"{emu.url}/:/rate",
        params={"key": rk, "identifier": "com.plexapp.plugins.library", "rating": "12", "X-Plex-Token": TOKEN},
        timeout=5,
    )
    missing = requests.put(
        f"{emu.url}/:/rate",
        params={"key": 999999, "identifier": "com.plexapp.plugins.library", "rating": "5", "X-Plex-Token": TOKEN},
        timeout=5,
    )
    assert (bad.status_code, missing.status_code) == (400, 404)


def test_a_cleared_rating_keeps_or_drops_last_rated_at_and_replies_are_dated_by_the_clock(
    emu, section_key, plex
) -> None:
    from email.utils import parsedate_to_datetime

    rk = emu.add_item(section_key, f"{ROOT}/cleared.mp4")
    emu.clock = lambda: 1_700_000_000.0
    _full_item(plex, rk).rate(6)
    emu.clear_keeps_rated_at = True
    _full_item(plex, rk).rate()
    kept = _full_item(plex, rk)
    emu.clear_keeps_rated_at = False
    kept.rate()
    assert (kept.userRating, int(kept.lastRatedAt.timestamp())) == (None, 1_700_000_000)
    assert _full_item(plex, rk).lastRatedAt is None
    date = requests.get(f"{emu.url}/identity", timeout=5).headers["Date"]
    assert parsedate_to_datetime(date).timestamp() == 1_700_000_000


# ---------------------------------------------------------------- history quirks
def test_history_rows_of_one_viewing_twice_and_of_a_deleted_item_without_its_rating_key(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/watched.mp4")
    emu.play_twice(rk, after_s=30, viewed_at=1_600_000_000)
    rows = plex.history(mindate=None)
    assert sorted(int(r.viewedAt.timestamp()) for r in rows) == [1_600_000_000, 1_600_000_030]
    item = _full_item(plex, rk)  # each row counts, as a play's does
    assert (item.viewCount, int(item.lastViewedAt.timestamp())) == (2, 1_600_000_030)
    emu.remove_item(rk)
    rows = plex.history()
    assert len(rows) == 2 and all(r.ratingKey is None for r in rows)


# ---------------------------------------------------------------- fidelity: write-time hazards
@pytest.mark.parametrize("semantics", ["replace", "append"])
def test_tag_identity_ignores_case_and_the_first_spelling_stays(emu, section_key, plex, semantics) -> None:
    """PMS keeps one tag row per type and name, whatever the case."""
    emu.tag_semantics = semantics
    rk = emu.add_item(section_key, f"{ROOT}/case.mp4", genre=["drama"])
    item = _full_item(plex, rk)
    item.edit(**{"genre[0].tag.tag": "Drama"})
    assert emu.item(rk)["tags"]["genre"] == ["drama"]  # one row: the item keeps showing "drama"
    other = emu.add_item(section_key, f"{ROOT}/other.mp4", genre=["DRAMA"])
    assert emu.item(other)["tags"]["genre"] == ["drama"]
    _full_item(plex, rk).edit(**{"genre[0].tag.tag": "Drama", "genre[].tag.tag-": quote("drama")})
    assert emu.item(rk)["tags"]["genre"] == []  # removing the old spelling removes the tag itself


def test_a_request_line_past_max_url_bytes_is_answered_414(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/long.mp4")
    item = _full_item(plex, rk)
    with pytest.raises(BadRequest, match=r"^\(414\)"):
        item.edit(**{"summary.value": "字" * 950})  # 9 bytes a character once encoded: past 8,190
    assert emu.item(rk)["fields"]["summary"] == ""
    item.edit(**{"summary.value": "字" * 850})
    assert emu.item(rk)["fields"]["summary"] == "字" * 850
    emu.max_url_bytes = 16 * 1024
    item.edit(**{"summary.value": "字" * 1500})
    assert emu.item(rk)["fields"]["summary"] == "字" * 1500


def test_redirect_answers_every_request_with_its_status_and_location(emu, plex) -> None:
    import requests

    emu.redirect = (308, "https://plex.example:32400/base")
    reply = requests.post(f"{emu.url}/library/metadata/7/posters?x=%5B1%5D", data=b"img", allow_redirects=False)
    assert reply.status_code == 308
    assert reply.headers["Location"] == "https://plex.example:32400/base/library/metadata/7/posters?x=%5B1%5D"


def test_a_batch_read_with_an_unknown_id_is_404_unless_batches_are_lenient(emu, section_key, plex) -> None:
    from plexapi.exceptions import NotFound

    rk = emu.add_item(section_key, f"{ROOT}/one.mp4")
    with pytest.raises(NotFound):
        plex.query(f"/library/metadata/{rk},999999")
    emu.strict_batches = False
    assert [v.attrib["ratingKey"] for v in plex.query(f"/library/metadata/{rk},999999")] == [str(rk)]


def test_swap_replies_answers_another_item(emu, section_key, plex) -> None:
    a = emu.add_item(section_key, f"{ROOT}/a.mp4", title="A")
    b = emu.add_item(section_key, f"{ROOT}/b.mp4", title="B")
    emu.swap_replies = {a: b}
    got = plex.fetchItem(a)
    assert int(got.ratingKey) == b and got.title == "B"
    assert [int(i.ratingKey) for i in plex.fetchItems([a, b])] == [b, b]


def test_rescans_move_a_file_or_readd_an_item(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/x.mp4", title="X")
    before = _section_attrs(plex)["scannedAt"]
    emu.move_file(rk, f"{ROOT}/sub/x.mp4")
    assert [p.file for p in _full_item(plex, rk).iterParts()] == [f"{ROOT}/sub/x.mp4"]
    assert int(_section_attrs(plex)["scannedAt"]) > int(before)
    _full_item(plex, rk).edit(**{"genre[0].tag.tag": "G", "title.value": "Edited", "title.locked": 1})
    new = emu.readd_item(rk)  # a new metadata item: the scan's metadata, none of the old edits
    fresh = _full_item(plex, new)
    assert new != rk and fresh.title == "x" and fresh.genres == [] and not fresh.fields
    with pytest.raises(NotFound):
        plex.fetchItem(rk)


def test_sessions_read_by_plexapi_carry_the_users_account_and_leave_when_stopped(emu, section_key, plex) -> None:
    rk = emu.add_item(section_key, f"{ROOT}/a.mp4")
    mine, theirs = emu.start_playback(rk), emu.start_playback(rk, account_id=7)
    emu.report_playback(theirs, 30_000)
    sessions = {s.sessionKey: s for s in plex.sessions()}  # plexapi's PlexSession._loadData
    seen = {k: (s._userId, s.ratingKey, s.player.state, s.session.location) for k, s in sessions.items()}
    assert seen == {int(mine): (1, rk, "playing", "lan"), int(theirs): (7, rk, "playing", "lan")}
    assert sessions[int(theirs)].viewOffset == 30_000
    emu.stop_playback(theirs, 40_000)
    assert [s.sessionKey for s in plex.sessions()] == [int(mine)]
    sent = [m["NotificationContainer"] for m in emu.notifications.sent]
    reports = [c["PlaySessionStateNotification"][0] for c in sent if c["type"] == "playing"]
    assert (reports[-1]["sessionKey"], reports[-1]["state"]) == (theirs, "stopped")
    assert not any("User" in r or "accountID" in r for r in reports)  # a report names no account
    assert len(plex.query(f"/library/sections/{section_key}/all?type=1&inProgress=1")) == 0  # 7's is not the owner's


@pytest.mark.parametrize(("agent", "last"), [("tv.plex.agents.none", [1]), ("tv.plex.agents.movie", [2, 3, 4, 5, 5])])
def test_a_scan_ends_at_state_1_without_an_agent_and_batches_its_items(emu, agent, last) -> None:
    key = emu.add_section("Other", ["/other"], agent=agent)
    for name in ("a", "b"):
        emu.schedule_item(key, f"/other/{name}.mp4", delay=3600)
    requests.get(f"{emu.url}/library/sections/{key}/refresh", headers={"X-Plex-Token": TOKEN}, timeout=5)
    sent = [m["NotificationContainer"] for m in emu.notifications.sent]
    assert [c["type"] for c in sent] == [
        "activity",
        "timeline",
        "timeline",
        *["timeline"] * len(last),
        "activity",
        "status",
    ]
    timelines = [c for c in sent if c["type"] == "timeline"]
    assert {(c["size"], len(c["TimelineEntry"])) for c in timelines} == {(2, 2)}  # both items in each frame
    assert [c["TimelineEntry"][0]["state"] for c in timelines] == [0, 1, *last]
    assert set(timelines[-1]["TimelineEntry"][0]) & {"mediaState", "metadataState"} == set()
    assert sent[-2]["ActivityNotification"][0]["event"] == "ended"
    assert sent[-1]["StatusNotification"][0]["title"] == "Library scan complete"
