"""The Stash emulator, driven through the real stashapi client and raw HTTP."""

from __future__ import annotations

import base64
import time
from datetime import UTC, timedelta, timezone

import pytest
import requests
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLObjectType,
    build_schema,
)
from stashapi.stashapp import StashInterface

from tests import reference
from tests.emulators.stash_emulator import SCHEMA_PATH, StashEmulator, cover_png

FRAGMENT = (
    "id title code details director urls date rating100 organized created_at updated_at "
    "studio { id name parent_studio { id name } } performers { id name } tags { id name } "
    "files { id path basename size duration } paths { screenshot preview stream }"
)
T0 = 1_767_000_000  # 2025-12-29T09:20:00Z


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def emu():
    with StashEmulator() as emulator:
        emulator.clock = FakeClock()
        emulator.tz = UTC
        yield emulator


@pytest.fixture
def stash(emu: StashEmulator) -> StashInterface:
    return StashInterface(emu.server_connection("/tmp/stash/plugins/Stash2Plex"))


def post(emu: StashEmulator, body: dict | bytes, cookie: bool = True) -> requests.Response:
    cookies = {"session": emu.issue_cookie()} if cookie else {}
    if isinstance(body, bytes):
        return requests.post(f"{emu.url}/graphql", data=body, cookies=cookies, timeout=5)
    return requests.post(f"{emu.url}/graphql", json=body, cookies=cookies, timeout=5)


# --- start-up and connection ---------------------------------------------------


def test_server_connection_has_stash_shape(emu: StashEmulator) -> None:
    conn = emu.server_connection("/cfg/plugins/Stash2Plex")
    assert conn["Host"] == "0.0.0.0" and conn["Port"] == emu.port and conn["Scheme"] == "http"
    assert conn["PluginDir"] == "/cfg/plugins/Stash2Plex" and conn["Dir"] == "/cfg"
    cookie = conn["SessionCookie"]
    assert cookie["Name"] == "session" and emu.cookie_valid(cookie["Value"])
    assert list(cookie) == [
        "Name",
        "Value",
        "Quoted",
        "Path",
        "Domain",
        "Expires",
        "RawExpires",
        "MaxAge",
        "Secure",
        "HttpOnly",
        "SameSite",
        "Partitioned",
        "Raw",
        "Unparsed",
    ]
    assert "ApiKey" not in conn


def test_stashapi_starts_with_version_apikey_and_introspection(emu: StashEmulator, stash: StashInterface) -> None:
    assert str(stash.version).startswith("v0.30.1")
    assert stash.url == f"{emu.url}/graphql"
    operations = [r["operation"] for r in emu.requests]
    assert operations[:2] == ["StashVersion", "getApiKey"]
    assert "__schema" in emu.requests[2]["query"]
    assert all(r["status"] == 200 for r in emu.requests)
    for name in ("Scene", "Job", "ConfigResult", "VideoFile", "Version"):
        assert f"fragment {name} on {name}" in stash.fragments[name]


def test_api_key_is_reported_and_accepted(emu: StashEmulator) -> None:
    emu.api_key = "secret-key"
    conn = {"Scheme": "http", "Host": "127.0.0.1", "Port": emu.port, "ApiKey": "secret-key"}
    stash = StashInterface(conn)
    result = stash.call_GQL("query getApiKey{ configuration { general { apiKey } } }")
    assert result["configuration"]["general"]["apiKey"] == "secret-key"
    wrong = requests.post(
        f"{emu.url}/graphql", json={"query": "{ version { version } }"}, headers={"ApiKey": "nope"}, timeout=5
    )
    assert wrong.status_code == 401


def test_api_key_is_empty_when_unset(stash: StashInterface) -> None:
    result = stash.call_GQL("query { configuration { general { apiKey } } }")
    assert result["configuration"]["general"]["apiKey"] == ""


# --- scenes ----------------------------------------------------------------


def test_find_scene_returns_stash_shaped_scene(emu: StashEmulator, stash: StashInterface) -> None:
    sid = emu.add_scene(
        title="Alpha",
        details="d",
        date="2024-05-06",
        studio="Studio A",
        performers=["Ann", "Bob"],
        tags=["t1"],
        code="C-1",
        director="Dir",
        urls=["https://example.org/a"],
        files=[
            {"path": "/media/a.mp4", "size": 12345678901, "duration": 61.5},
            {"path": "C:\\media\\b.mkv", "size": 2, "duration": 1.0},
        ],
    )
    scene = stash.find_scene(sid, fragment=FRAGMENT)
    assert scene["id"] == str(sid) and scene["title"] == "Alpha" and scene["code"] == "C-1"
    assert scene["studio"] == {"id": "1", "name": "Studio A", "parent_studio": None}
    assert [p["name"] for p in scene["performers"]] == ["Ann", "Bob"]
    assert scene["tags"] == [{"id": "1", "name": "t1"}]
    assert scene["urls"] == ["https://example.org/a"] and scene["organized"] is False
    assert [f["basename"] for f in scene["files"]] == ["a.mp4", "b.mkv"]
    assert scene["files"][0]["size"] == 12345678901 and scene["files"][0]["duration"] == 61.5
    assert scene["created_at"] == scene["updated_at"] == "2025-12-29T09:20:00Z"
    assert scene["paths"]["screenshot"] == f"{emu.url}/scene/{sid}/screenshot?t={T0}"
    assert stash.find_scene(sid)["studio"] == {"id": "1"}  # stashapi's default fragment
    assert stash.find_scene(999) is None


def test_timestamps_carry_the_server_offset(emu: StashEmulator, stash: StashInterface) -> None:
    emu.tz = timezone(timedelta(hours=1))
    sid = emu.add_scene(title="x")
    assert stash.find_scene(sid, fragment="created_at")["created_at"] == "2025-12-29T10:20:00+01:00"
    since = {"updated_at": {"value": "2025-12-29T09:19:59Z", "modifier": "GREATER_THAN"}}
    assert len(stash.find_scenes(f=since, fragment="id")) == 1


def test_find_scenes_pages_and_sorts(emu: StashEmulator, stash: StashInterface) -> None:
    for n in range(30):
        emu.add_scene(title=f"t{(n * 7) % 30:02d}")
    count, first = stash.find_scenes(
        filter={"per_page": 10, "page": 1, "sort": "title"}, fragment="id title", get_count=True
    )
    assert count == 30 and [s["title"] for s in first] == [f"t{n:02d}" for n in range(10)]
    last = stash.find_scenes(
        filter={"per_page": 10, "page": 3, "sort": "title", "direction": "DESC"}, fragment="id title"
    )
    assert [s["title"] for s in last] == [f"t{n:02d}" for n in range(9, -1, -1)]
    by_id = stash.find_scenes(filter={"per_page": -1, "sort": "id", "direction": "DESC"}, fragment="id")
    assert [int(s["id"]) for s in by_id] == list(range(30, 0, -1))
    assert stash.find_scenes(filter={"per_page": 25, "page": 2, "sort": "id"}, fragment="id")[0] == {"id": "26"}
    assert len(stash.find_scenes(fragment="id")) == 30  # stashapi default: per_page -1


def test_find_scenes_rejects_unknown_sort(emu: StashEmulator, stash: StashInterface) -> None:
    emu.add_scene(title="x")
    with pytest.raises(Exception, match="query failed"):
        stash.find_scenes(filter={"per_page": 5, "sort": "bogus"}, fragment="id")
    assert "invalid sort: bogus" in post(emu, {"query": '{ findScenes(filter: {sort: "bogus"}) { count } }'}).text


def test_updated_at_filter_and_strictly_increasing_updates(emu: StashEmulator, stash: StashInterface) -> None:
    ids = [emu.add_scene(title=f"s{n}") for n in range(5)]
    emu.clock.now = T0 + 100
    emu.update_scene(ids[1], title="changed")
    emu.update_scene(ids[3], details="changed")  # same second: must still be later
    s1, s3 = emu.scene(ids[1]), emu.scene(ids[3])
    assert s1["updated_at"] < s3["updated_at"] and s1["created_at"] == emu.scene(ids[0])["created_at"]
    since = {"updated_at": {"value": "2025-12-29T09:21:00Z", "modifier": "GREATER_THAN"}}
    found = stash.find_scenes(f=since, filter={"per_page": -1, "sort": "updated_at"}, fragment="id updated_at")
    assert [int(s["id"]) for s in found] == [ids[1], ids[3]]
    # The same instant written in another zone compares as text, as in Stash's SQL: "10:…" > "09:…Z"
    offset = {"updated_at": {"value": "2025-12-29T10:21:00+01:00", "modifier": "GREATER_THAN"}}
    assert len(stash.find_scenes(f=offset, fragment="id")) == 0
    earlier_text = {"updated_at": {"value": "2025-12-29T08:00:00+01:00", "modifier": "GREATER_THAN"}}
    assert len(stash.find_scenes(f=earlier_text, fragment="id")) == 5  # 09:20Z is after 09:00Z, yet "08" < "09"
    before = {"updated_at": {"value": "2025-12-29T09:21:00Z", "modifier": "LESS_THAN"}}
    assert len(stash.find_scenes(f=before, fragment="id")) == 3
    between = {"updated_at": {"value": "2025-12-29T09:21:40Z", "value2": "2025-12-29T09:21:40Z", "modifier": "BETWEEN"}}
    assert [s["id"] for s in stash.find_scenes(f=between, fragment="id")] == [str(ids[1])]


def test_find_scenes_by_ids_with_call_gql(emu: StashEmulator, stash: StashInterface) -> None:
    for n in range(6):
        emu.add_scene(title=f"s{n}")
    query = (
        "query ScenesByIds($ids: [ID!]) { findScenes(ids: $ids, filter: {per_page: -1}) "
        "{ count scenes { id title files { path } } } }"
    )
    result = stash.call_GQL(query, {"ids": ["5", "2"]})["findScenes"]
    assert result["count"] == 2 and [s["id"] for s in result["scenes"]] == ["5", "2"]  # the order asked


@pytest.mark.parametrize("ids", [["5", "2", "99"], ["2", "2"]])
def test_find_scenes_by_ids_fails_whole_when_an_id_is_missing_or_repeated(emu, stash, ids) -> None:
    for n in range(6):
        emu.add_scene(title=f"s{n}")
    query = "query ScenesByIds($ids: [ID!]) { findScenes(ids: $ids) { count scenes { id } } }"
    response = post(emu, {"query": query, "variables": {"ids": ids}})
    body = response.json()
    assert response.status_code == 200 and body["data"] is None
    missing = "99" if "99" in ids else "2"
    assert body["errors"][0]["message"] == f"scene with id {missing} not found"
    assert body["errors"][0]["path"] == ["findScenes"]
    with pytest.raises(Exception, match="query failed"):
        stash.call_GQL(query, {"ids": ids})


def test_an_older_server_reports_its_version_and_rejects_newer_arguments(emu, stash) -> None:
    emu.version = "v0.24.3"
    assert stash.stash_version().minor == 24
    response = post(emu, {"query": "query Q($ids: [ID!]) { findScenes(ids: $ids) { count } }"})
    assert response.status_code == 422 and "Unknown argument" in response.json()["errors"][0]["message"]


def test_external_host_changes_the_screenshot_url(emu, stash) -> None:
    sid = emu.add_scene(title="x")
    emu.external_host = "https://stash.example.invalid"
    found = stash.call_GQL("query { findScene(id: %d) { paths { screenshot } } }" % sid)["findScene"]
    assert found["paths"]["screenshot"].startswith(f"https://stash.example.invalid/scene/{sid}/screenshot?t=")


def test_scene_update_mutation_through_stashapi(emu: StashEmulator, stash: StashInterface) -> None:
    sid = emu.add_scene(title="old", tags=["a"])
    tag_b = emu.update_scene(emu.add_scene(tags=["b"]), title="other")["input"]  # creates tag b
    assert tag_b["title"] == "other"
    emu.clock.now = T0 + 50
    assert stash.update_scene({"id": sid, "title": "new", "tag_ids": ["2"]}) == str(sid)
    scene = emu.scene(sid)
    assert scene["title"] == "new" and scene["tags"] == ["b"] and scene["updated_at"] > scene["created_at"]
    hook = emu.hook_contexts[-1]
    assert hook["inputFields"] == ["id", "title", "tag_ids"] and hook["input"]["tag_ids"] == ["2"]
    bad = post(emu, {"query": 'mutation { sceneUpdate(input: {id: "1", tag_ids: ["77"]}) { id } }'})
    assert bad.status_code == 200 and bad.json()["data"] == {"sceneUpdate": None}


def test_update_scene_returns_hook_context(emu: StashEmulator) -> None:
    sid = emu.add_scene(title="t", studio="S")
    cover = cover_png(1, 99)
    ctx = emu.update_scene(sid, title="T2", tags=["x", "y"], studio=None, cover=cover)
    assert ctx["id"] == sid and ctx["type"] == "Scene.Update.Post"
    assert ctx["inputFields"] == ["id", "title", "tag_ids", "studio_id", "cover_image"]
    assert len(ctx["input"]) == 24 and ctx["input"]["id"] == str(sid)
    assert ctx["input"]["tag_ids"] == ["1", "2"] and ctx["input"]["studio_id"] is None
    assert ctx["input"]["cover_image"] == "data:image/png;base64," + base64.b64encode(cover).decode()
    assert ctx["input"]["details"] is None and ctx["input"]["performer_ids"] is None
    assert emu.scene(sid)["studio"] is None and emu.screenshot_bytes(sid) == cover
    scan = emu.update_scene(sid, files=[{"path": "/new.mp4", "size": 1, "duration": 2.0}])
    assert scan == {"id": sid, "type": "Scene.Update.Post", "input": None}
    with pytest.raises(TypeError):
        emu.update_scene(sid, rating=5)
    emu.delete_scene(sid)
    with pytest.raises(KeyError):
        emu.scene(sid)


# --- settings and jobs ---------------------------------------------------------


def test_plugin_config(emu: StashEmulator, stash: StashInterface) -> None:
    assert stash.find_plugin_config("Stash2Plex") == {}
    raw = stash.call_GQL('query { configuration { plugins(include: ["Stash2Plex"]) } }')
    assert raw["configuration"]["plugins"] == {}
    emu.plugin_settings["Stash2Plex"] = {"plex_url": "http://plex:32400", "max_retries": 5, "dry_run": True}
    emu.plugin_settings["Other"] = {"x": 1}
    assert stash.find_plugin_config("Stash2Plex") == emu.plugin_settings["Stash2Plex"]
    assert set(stash.find_plugins_config()) == {"Stash2Plex", "Other"}


def test_job_queue_is_null_when_idle(emu: StashEmulator, stash: StashInterface) -> None:
    assert stash.job_queue() is None
    job = emu.add_job("Scanning...")
    emu.jobs.append({"id": "9", "status": "FINISHED", "description": "Generating..."})
    queue = stash.job_queue()
    assert [(j["id"], j["status"], j["description"]) for j in queue] == [("1", "RUNNING", "Scanning...")]
    assert stash.find_job("9")["status"] == "FINISHED" and stash.find_job("42") is None
    job["status"] = "FINISHED"
    assert stash.job_queue() is None


# --- screenshots -----------------------------------------------------------


def test_screenshots_need_auth_and_follow_cover_changes(emu: StashEmulator, stash: StashInterface) -> None:
    sid = emu.add_scene(title="s")
    url = stash.find_scene(sid, fragment="paths { screenshot }")["paths"]["screenshot"]
    first = stash.s.get(url, timeout=5)  # stashapi's session carries the cookie
    assert first.status_code == 200 and first.headers["Content-Type"] == "image/png"
    assert first.content == cover_png(sid, 1) != cover_png(sid + 1, 1)
    anonymous = requests.get(url, timeout=5, allow_redirects=False)  # to the login page, as Stash does
    assert anonymous.status_code == 302 and anonymous.headers["Location"].startswith("/login?returnURL=%2Fscene%2F")
    assert requests.get(url, cookies={"session": "forged"}, timeout=5, allow_redirects=False).status_code == 302
    emu.update_scene(sid, cover=b"\xff\xd8\xff\xe0jpeg-bytes")
    new_url = stash.find_scene(sid, fragment="paths { screenshot }")["paths"]["screenshot"]
    assert new_url != url
    again = requests.get(new_url, cookies={"session": emu.issue_cookie()}, timeout=5)
    assert again.headers["Content-Type"] == "image/jpeg" and again.content.endswith(b"jpeg-bytes")
    emu.update_scene(sid, cover=None)
    default = requests.get(new_url, cookies={"session": emu.issue_cookie()}, timeout=5)
    assert default.status_code == 200 and default.headers["Content-Type"] == "image/svg+xml"
    assert emu.screenshot_requests == [sid, sid, sid]
    missing = requests.get(f"{emu.url}/scene/999/screenshot", cookies={"session": emu.issue_cookie()}, timeout=5)
    assert missing.status_code == 404


def test_screenshot_accepts_apikey_parameter(emu: StashEmulator) -> None:
    emu.api_key = "k1"
    sid = emu.add_scene()
    assert requests.get(f"{emu.url}/scene/{sid}/screenshot?apikey=k1", timeout=5).status_code == 200
    assert requests.get(f"{emu.url}/scene/{sid}/screenshot?apikey=k2", timeout=5).status_code == 401


def test_performer_images_are_behind_stashs_login(emu: StashEmulator, stash: StashInterface) -> None:
    """image_path as Stash builds it (``&default=true`` without an image), and the route as
    Stash's authentication middleware guards it: no credential → 302 to the login page (a path
    without an extension), a wrong key → 401, a key or session → the image."""
    emu.api_key = "k1"
    sid = emu.add_scene(performers=["Ann"])
    ann = emu.entity_id("performer", "Ann")
    query = "performers { id image_path }"
    path = stash.find_scene(sid, fragment=query)["performers"][0]["image_path"]
    assert path == f"{emu.url}/performer/{ann}/image?t={T0}&default=true"
    hook = emu.set_performer_image(ann, cover_png(77, 1))
    assert (hook["type"], hook["inputFields"]) == ("Performer.Update.Post", ["id", "image"])
    path = stash.find_scene(sid, fragment=query)["performers"][0]["image_path"]
    assert path == f"{emu.url}/performer/{ann}/image?t={T0 + 1}"  # updated_at moved
    anonymous = requests.get(path, timeout=5, allow_redirects=False)
    assert anonymous.status_code == 302
    assert anonymous.headers["Location"] == f"/login?returnURL=%2Fperformer%2F{ann}%2Fimage%3Ft%3D{T0 + 1}"
    followed = requests.get(path, timeout=5)  # as Plex fetching it would
    assert followed.status_code == 200 and followed.headers["Content-Type"].startswith("text/html")
    assert requests.get(path + "&apikey=k2", timeout=5).status_code == 401
    keyed = requests.get(path, headers={"ApiKey": "k1"}, timeout=5)
    assert keyed.content == cover_png(77, 1) and keyed.headers["Content-Type"] == "image/png"
    assert stash.s.get(path + "&default=true", timeout=5).headers["Content-Type"] == "image/svg+xml"
    emu.auth_required = False
    assert requests.get(path, timeout=5).content == cover_png(77, 1)  # no login configured: open to all
    assert [r["status"] for r in emu.performer_image_requests] == [302, 302, 401, 200, 200, 200]


# --- transport and faults ----------------------------------------------------


def test_transport_status_codes(emu: StashEmulator) -> None:
    invalid = post(emu, {"query": "{ findScene(id: 1) { path } }"})
    assert invalid.status_code == 422 and invalid.json()["data"] is None
    assert "Cannot query field 'path'" in invalid.json()["errors"][0]["message"]
    assert post(emu, {"query": "{ version {"}).status_code == 422
    bad_var = post(
        emu,
        {
            "query": "query Q($f: FindFilterType) { findScenes(filter: $f) { count } }",
            "variables": {"f": {"per_page": "ten"}},
        },
    )
    assert bad_var.status_code == 422
    assert post(emu, b"not json").status_code == 400
    assert post(emu, {"query": "{ version { version } }"}, cookie=False).status_code == 401
    partial = post(emu, {"query": '{ findScene(id: "abc") { id } version { version } }'})
    assert partial.status_code == 200
    assert partial.json()["data"] == {"findScene": None, "version": {"version": "v0.30.1"}}
    assert partial.json()["errors"][0]["path"] == ["findScene"]
    assert [r["status"] for r in emu.graphql_requests()] == [422, 422, 422, 400, 401, 200]
    assert len(emu.graphql_requests(containing="findScene(")) == 2


def test_auth_can_be_disabled(emu: StashEmulator) -> None:
    emu.auth_required = False
    assert post(emu, {"query": "{ version { version } }"}, cookie=False).status_code == 200


@pytest.mark.parametrize("switch", ["fail_html", "fail_graphql_errors", "fail_401"])
def test_fault_switches_make_stashapi_raise(emu: StashEmulator, stash: StashInterface, switch: str) -> None:
    setattr(emu, switch, True)
    with pytest.raises(Exception, match="query failed"):
        stash.find_scene(1, fragment="id")
    response = post(emu, {"query": "{ version { version } }"})
    expected = {
        "fail_html": (200, "text/html"),
        "fail_graphql_errors": (200, "application/json"),
        "fail_401": (401, "application/json"),
    }[switch]
    assert (response.status_code, response.headers["Content-Type"].split(";")[0]) == expected
    if switch == "fail_graphql_errors":
        assert response.json() == {"errors": [{"message": "database is locked"}], "data": None}
    setattr(emu, switch, False)
    assert stash.find_scene(1, fragment="id") is None


def test_latency(emu: StashEmulator, stash: StashInterface) -> None:
    emu.latency = 0.2
    started = time.monotonic()
    stash.find_scene(1, fragment="id")
    assert time.monotonic() - started >= 0.2


def test_a_middle_page_of_a_large_library(emu: StashEmulator, stash: StashInterface) -> None:
    # (How fast the emulator pages is a benchmark's business: tests/bench/, not a timed test.)
    for n in range(3_000):
        emu.add_scene(
            title=f"scene {n}", studio=f"studio {n % 40}", performers=[f"p{n % 500}"], tags=[f"tag{n % 60}", "common"]
        )
    count, scenes = stash.find_scenes(
        filter={"per_page": 1000, "page": 2, "sort": "updated_at"}, fragment=FRAGMENT, get_count=True
    )
    assert count == 3_000 and len(scenes) == 1000
    assert [s["id"] for s in scenes] == [str(n) for n in range(1001, 2001)]


# --- schema conformance ------------------------------------------------------


def _real_schema_sdl() -> str:
    schema_dir = reference.need("stash-schema", "Stash's full schema")
    files = [schema_dir / "schema.graphql", *sorted((schema_dir / "types").glob("*.graphql"))]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def _mismatches(ours_type, real_type) -> list[str]:
    name = ours_type.name
    if type(ours_type) is not type(real_type):
        return [f"{name}: kind differs"]
    problems = []
    if isinstance(ours_type, GraphQLEnumType):
        problems += [f"{name}.{v}: missing" for v in ours_type.values if v not in real_type.values]
    if isinstance(ours_type, (GraphQLObjectType, GraphQLInputObjectType)):
        for field_name, field in ours_type.fields.items():
            real_field = real_type.fields.get(field_name)
            if real_field is None:
                problems.append(f"{name}.{field_name}: missing")
                continue
            if str(field.type) != str(real_field.type):
                problems.append(f"{name}.{field_name}: {field.type} != {real_field.type}")
            for arg_name, arg in getattr(field, "args", {}).items():
                real_arg = real_field.args.get(arg_name)
                if real_arg is None or str(arg.type) != str(real_arg.type):
                    problems.append(f"{name}.{field_name}({arg_name}): {arg.type} differs")
    return problems


def test_schema_is_a_subset_of_stashs_schema() -> None:
    real = build_schema(_real_schema_sdl())
    ours = build_schema(SCHEMA_PATH.read_text(encoding="utf-8"))
    problems = []
    for type_name, ours_type in ours.type_map.items():
        if type_name.startswith("__"):
            continue
        real_type = real.type_map.get(type_name)
        if real_type is None:
            problems.append(f"{type_name}: not in Stash's schema")
            continue
        problems += _mismatches(ours_type, real_type)
    assert problems == []


def test_tag_parents_groups_and_parent_studio(emu: StashEmulator, stash: StashInterface) -> None:
    sid = emu.add_scene(title="A", studio="Studio A", tags=["Child"], groups=["Series G"], rating100=55)
    emu.set_tag_parents("Child", ["Parent"])
    emu.set_studio_parent("Studio A", "Network N")
    query = "query Q($f: FindFilterType) { findTags(filter: $f) { count tags { name parents { name } children { name } } } }"
    tags = stash.call_GQL(query, {"f": {"per_page": -1}})["findTags"]
    assert tags["count"] == 2
    assert tags["tags"] == [
        {"name": "Child", "parents": [{"name": "Parent"}], "children": []},
        {"name": "Parent", "parents": [], "children": [{"name": "Child"}]},
    ]
    scene = stash.call_GQL(
        "query S($id: ID) { findScene(id: $id) { rating100 studio { parent_studio { name } } groups { group { name } } } }",
        {"id": str(sid)},
    )["findScene"]
    assert scene == {
        "rating100": 55,
        "studio": {"parent_studio": {"name": "Network N"}},
        "groups": [{"group": {"name": "Series G"}}],
    }
