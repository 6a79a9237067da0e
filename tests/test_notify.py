"""Notifications reach a local HTTP receiver; one that is down or slow changes nothing.

The plugin runs as Stash runs it (hooks, the detached drainer) against the emulators;
the receiver is a real HTTP server on 127.0.0.1 that records what it is sent.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.notify import build, problem, secrets_of
from tests.runner import create_context, drainer_lock_held
from worker.events import SyncEvents

TOKEN_PATH = "/hook/tok-a1b2c3d4e5f6g7h8"


class Receiver:
    """Records every POST (path, headers, JSON body); ``delay`` holds each answer back."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.delay = 0.0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(owner.delay)
                owner.received.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                try:
                    self.send_response(200)
                    self.end_headers()
                except OSError:
                    pass  # the client gave up

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, scheme: str = "http", path: str = TOKEN_PATH) -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def wait_for(self, n: int, timeout: float = 60.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.received) < n:
            assert time.monotonic() < deadline, f"only {len(self.received)} notifications: {self.received}"
            time.sleep(0.05)
        return self.received

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ambiguous_scenes(plugin, n: int) -> list[int]:
    """Scenes whose file name two Plex items share, in other folders: AmbiguousMatch (dead-lettered)."""
    ids = []
    for i in range(n):
        name = f"dup-{i}.mp4"
        ids.append(
            plugin.stash.add_scene(title=f"Dup {i}", files=[{"path": f"/stash/media/{name}", "size": 5, "duration": 1}])
        )
        plugin.plex.add_item(1, f"/plex/media/a/{name}", size=7)
        plugin.plex.add_item(1, f"/plex/media/b/{name}", size=9)
    return ids


def test_dead_lettered_jobs_are_one_message_per_run_grouped_by_reason(plugin, receiver):
    plugin.configure(notify_urls=f"{receiver.url()}, {receiver.url('json', '/apprise')}")
    good = plugin.add_scene(1)
    with drainer_lock_held(plugin.data_dir):  # all three queued before one drainer run takes them
        for sid in ambiguous_scenes(plugin, 2):
            plugin.hook(create_context(sid))
    plugin.hook(plugin.stash.update_scene(good[0], title="Still synced"))
    plugin.wait_drained()
    got = receiver.wait_for(2)
    time.sleep(0.3)
    assert len(receiver.received) == 2  # one message per URL, not one per scene
    assert sorted(r["path"] for r in got) == ["/apprise", TOKEN_PATH]
    body = got[0]["json"]
    assert body["title"] == "Stash2Plex: 2 scenes moved to the dead-letter queue" and body["type"] == "failure"
    assert body["message"].startswith("2 × AmbiguousMatch (scenes ")
    assert plugin.plex.item(good[1])["fields"]["title"] == "Still synced"
    assert TOKEN_PATH not in plugin.drainer_log() and "tok-a1b2" not in plugin.drainer_log()


def test_an_outage_longer_than_the_threshold_and_its_end_are_notified(plugin, receiver):
    plugin.configure(notify_urls=receiver.url("ntfy", "/alerts"), notify_plex_down_minutes=0.01)
    sid, rk = plugin.add_scene(1)
    plugin.plex.refuse_connections()
    plugin.hook(plugin.stash.update_scene(sid, title="After the outage"))
    down = receiver.wait_for(1)[0]
    assert down["path"] == "/" and down["json"]["topic"] == "alerts"
    assert down["json"]["title"] == "Stash2Plex: Plex is unreachable"
    assert "Plex has been unreachable for" in down["json"]["message"]
    health = json.loads((plugin.data_dir / "sync_health.json").read_text())
    assert health["plex_down_notified"] is True and health["failing"]["reason"].startswith("Plex is unavailable")
    plugin.plex.accept_connections()
    back = receiver.wait_for(2)[1]
    assert back["json"]["title"] == "Stash2Plex: Plex is reachable again"
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "After the outage"
    assert len(receiver.received) == 2
    assert "failing" not in json.loads((plugin.data_dir / "sync_health.json").read_text())


def test_a_receiver_that_is_down_or_slow_changes_nothing_about_the_sync(plugin, receiver):
    receiver.delay = 8.0  # longer than the 5 s timeout
    plugin.configure(notify_urls=f"http://127.0.0.1:{closed_port()}{TOKEN_PATH} {receiver.url()}")
    scenes = [plugin.add_scene(n) for n in range(3)]
    dead = ambiguous_scenes(plugin, 1)
    for sid, _ in scenes:
        plugin.hook(plugin.stash.update_scene(sid, title=f"Synced {sid}"))
    plugin.hook(create_context(dead[0]))
    plugin.wait_drained()
    assert [plugin.plex.item(rk)["fields"]["title"] for _, rk in scenes] == [f"Synced {sid}" for sid, _ in scenes]
    status = plugin.task("queue_status").output
    assert status["dlq_by_reason"] == {"AmbiguousMatch": 1} and status["pending"] == 0
    deadline = time.monotonic() + 30  # the drainer gives deliveries in flight one timeout as it exits
    while "failed: no answer within 5 s" not in plugin.drainer_log() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = plugin.drainer_log()
    assert "failed: ConnectionError" in log and "failed: no answer within 5 s" in log, log[-2000:]
    finished = re.search(r"drainer finished: [^\n]*\b1 failed", log)
    assert finished, log[-2000:]
    assert finished.start() < log.index("no answer within 5 s")  # the sync did not wait
    assert "tok-a1b2" not in log


# -- pure parts -----------------------------------------------------------------------------
def test_requests_per_scheme():
    assert build("discord://123/tok_abcdef", "T", "M").url == "https://discord.com/api/webhooks/123/tok_abcdef"
    gotify = build("gotifys://g.lan/apps/AbCdEf123", "T", "M", "failure")
    assert (gotify.url, gotify.headers, gotify.json["priority"]) == (
        "https://g.lan/apps/message",
        {"X-Gotify-Key": "AbCdEf123"},
        8,
    )
    ntfy = build("ntfy://my-topic", "T", "M")
    assert (ntfy.label, ntfy.url, ntfy.json) == (
        "ntfy://ntfy.sh",
        "https://ntfy.sh/",
        {"topic": "my-topic", "title": "T", "message": "M"},
    )
    hook = build("https://u:p%40ss@h.example:8443/x?k=1", "T", "M")
    assert (hook.label, hook.url, hook.auth) == (
        "https://h.example:8443",
        "https://h.example:8443/x?k=1",
        ("u", "p@ss"),
    )
    assert problem("ftp://secret@host/x", 2) == (
        "entry 2 has 'ftp://'; use one of http://, https://, json://, jsons://, ntfy://, ntfys://, gotify://, "
        "gotifys://, discord://"
    )
    assert "my-topic" in secrets_of("ntfy://my-topic")


def test_dead_letter_text_groups_by_reason():
    events = SyncEvents(health=None)
    for sid in (3, 4, 5):
        events.dead_lettered(sid, "PlexNotFound", "not in Plex after 8 attempts")
    events.dead_lettered(9, "AmbiguousMatch", "two items")
    assert events.dead_letter_text() == (
        "Stash2Plex: 4 scenes moved to the dead-letter queue",
        "3 × PlexNotFound (scenes 3, 4, 5): not in Plex after 8 attempts\n1 × AmbiguousMatch (scenes 9): two items",
    )
    assert events.dead_letter_text() is None  # sent once
