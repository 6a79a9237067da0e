"""The Stash emulator as Stash's web server (tests/emulators/stash_ui.py), over real HTTP.

Needs the prebuilt UI and Stash's schema from the development workspace (see
tests/browser/conftest.py); skipped without them, as the schema conformance test is.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests import reference
from tests.emulators.stash_emulator import StashEmulator
from tests.emulators.stash_ui import SCHEMA_DIR, UI_BUILD
from tests.runner import REPO, plugin_config

reference.need("stash-ui/build/index.html", "Stash's prebuilt web UI")
reference.need("stash-schema/schema.graphql", "Stash's full schema")


@pytest.fixture
def served(tmp_path):
    with StashEmulator() as emu:
        emu.auth_required = False
        ui = emu.serve_ui(UI_BUILD, SCHEMA_DIR)
        ui.install_plugin(REPO, {"STASH2PLEX_DATA_DIR": str(tmp_path / "data")})
        yield emu
        ui.wait_runs_finished()


def get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def graphql(emu, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(emu.url + "/graphql", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read())


def test_app_paths_get_index_html_with_the_colour_and_assets_come_gzipped(served):
    status, headers, body = get(served.url + "/scenes/12")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"%COLOR%" not in body and b"#202b33" in body and b'<base href="/" />' in body
    script = next(p for p in (UI_BUILD / "assets").glob("*.js.gz"))
    request = urllib.request.Request(f"{served.url}/assets/{script.name[:-3]}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        assert response.headers["Content-Type"] == "text/javascript"
        assert gzip.decompress(response.read()) == gzip.decompress(script.read_bytes())
    assert get(served.url + "/assets/nope.js")[0] == 404
    assert get(served.url + "/css")[2] == b"" and get(served.url + "/customlocales")[2] == b"{}"


def test_performer_images_are_stashs_route_not_the_app(served):
    """``/performer/<id>/image`` is Stash's image route (internal/api/server.go mounts
    ``/performer`` before the UI's catch-all), not index.html."""
    from tests.emulators.stash_emulator import cover_png

    sid = served.add_scene(performers=["Ann"])
    ann = served.entity_id("performer", "Ann")
    served.set_performer_image(ann, cover_png(sid, 1))
    status, headers, body = get(f"{served.url}/performer/{ann}/image?t=1")
    assert (status, headers["Content-Type"], body) == (200, "image/png", cover_png(sid, 1))


def test_with_a_login_the_page_is_behind_it_as_in_stash(served):
    """Stash with a username and password (internal/api/authentication.go): an app path goes to
    the login page, a file or GraphQL is 401, the login page, /css and /assets are open."""

    def status(path: str) -> tuple[int, str]:
        request = urllib.request.Request(served.url + path)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request) as response:
                return response.status, response.headers.get("Location") or ""
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Location") or ""

    served.auth_required = True
    assert status("/scenes/12?x=1") == (302, "/login?returnURL=%2Fscenes%2F12%3Fx%3D1")
    assert status("/plugin/Stash2Plex/javascript") == (302, "/login?returnURL=%2Fplugin%2FStash2Plex%2Fjavascript")
    assert status("/plugin/Stash2Plex/assets/stash2plex.js")[0] == 401
    assert status("/graphql")[0] == 401
    assert status("/login")[0] == 200 and status("/css")[0] == 200
    assert status("/assets/none.js")[0] == 404  # open to all; this file does not exist


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_plugin_routes_serve_the_yml_ui_files_and_refuse_a_disabled_plugin(served):
    ui = plugin_config()["ui"]
    status, headers, body = get(served.url + "/plugin/Stash2Plex/javascript")
    assert status == 200 and headers["Content-Type"] == "text/javascript"
    assert body == b"".join((REPO / f).read_bytes() + b"\n" for f in ui["javascript"])
    status, headers, body = get(served.url + "/plugin/Stash2Plex/css")
    assert headers["Content-Type"] == "text/css" and body.startswith((REPO / ui["css"][0]).read_bytes())
    plugins = graphql(served, "{ plugins { id enabled paths { javascript css } } }")["data"]["plugins"]
    assert plugins == [
        {
            "id": "Stash2Plex",
            "enabled": True,
            "paths": {
                "javascript": [served.url + "/plugin/Stash2Plex/javascript"],
                "css": [served.url + "/plugin/Stash2Plex/css"],
            },
        }
    ]
    served.ui.plugins["Stash2Plex"].enabled = False
    assert get(served.url + "/plugin/Stash2Plex/javascript")[:3:2] == (400, b"plugin disabled\n")
    answer = graphql(served, 'mutation { runPluginOperation(plugin_id: "Stash2Plex", args: {mode: "ui_status"}) }')
    assert answer["errors"][0]["message"] == "plugin Stash2Plex is disabled"
    assert get(served.url + "/plugin/Other/javascript")[0] == 404


def test_run_plugin_operation_runs_the_plugin_with_exactly_the_args_and_returns_its_output(served):
    answer = graphql(
        served,
        'mutation Op($args: Map) { runPluginOperation(plugin_id: "Stash2Plex", args: $args) }',
        {"args": {"mode": "ui_scene", "scene_id": "1"}},
    )
    assert answer["data"]["runPluginOperation"]["state"] == "never_synced"
    assert [r.args for r in served.ui.runs] == [{"mode": "ui_scene", "scene_id": "1"}]
    failed = graphql(served, 'mutation { runPluginOperation(plugin_id: "Stash2Plex", args: {mode: "ui_scene"}) }')
    assert "args.scene_id is missing" in failed["errors"][0]["message"]


def test_run_plugin_task_is_a_job_with_the_default_args_applied(served):
    answer = graphql(
        served, 'mutation { runPluginTask(plugin_id: "Stash2Plex", task_name: "Show queue status", args_map: {}) }'
    )
    job_id = answer["data"]["runPluginTask"]
    served.ui.wait_runs_finished()
    [run] = served.ui.runs
    assert run.args == {"mode": "queue_status"} and run.reply["error"] is None
    job = graphql(served, f'{{ findJob(input: {{id: "{job_id}"}}) {{ status description }} }}')["data"]["findJob"]
    assert job == {"status": "FINISHED", "description": "Running plugin task: Show queue status"}
    missing = graphql(served, 'mutation { runPluginTask(plugin_id: "Stash2Plex", task_name: "Nope") }')
    assert missing["errors"][0]["message"] == "no task with name Nope in plugin Stash2Plex"


def test_websocket_acknowledges_graphql_transport_ws_and_streams_job_events(served):
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101")

    def send(message: dict) -> None:
        data = json.dumps(message).encode()
        mask = os.urandom(4)
        sock.sendall(bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def receive() -> dict:
        first = sock.recv(2)
        length = first[1] & 0x7F
        if length == 126:
            length = int.from_bytes(sock.recv(2), "big")
        data = b""
        while len(data) < length:
            data += sock.recv(length - len(data))
        return json.loads(data)

    send({"type": "connection_init", "payload": {}})
    assert receive() == {"type": "connection_ack"}
    send({"id": "1", "type": "subscribe", "payload": {"query": "subscription { jobsSubscribe { type } }"}})
    time.sleep(0.2)
    graphql(served, 'mutation { runPluginTask(plugin_id: "Stash2Plex", task_name: "Show queue status") }')
    events = [receive() for _ in range(2)]
    kinds = [e["payload"]["data"]["jobsSubscribe"]["type"] for e in events]
    assert kinds[0] == "ADD" and all(e["id"] == "1" and e["type"] == "next" for e in events)
    while kinds[-1] != "REMOVE":
        kinds.append(receive()["payload"]["data"]["jobsSubscribe"]["type"])
    sock.close()
