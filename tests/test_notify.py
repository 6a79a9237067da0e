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

from core.notify import as_webhook, problem, secrets_of, service
from tests.runner import create_context, drainer_lock_held
from worker.notices import RunNotices

TOKEN_PATH = "/hook/tok-a1b2c3d4e5f6g7h8"


class Receiver:
    """Records every POST (path, headers, JSON body); ``delay`` holds each answer back."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.delay = 0.0
        self.redirect_to = ""  # answer 307 to this URL instead
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(owner.delay)
                owner.received.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                try:
                    self.send_response(307 if owner.redirect_to else 200)
                    if owner.redirect_to:
                        self.send_header("Location", owner.redirect_to + self.path)
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
    assert plugin.status()["last_drainer_error"] is None  # the drainer waits for Plex: it has not stopped
    plugin.plex.accept_connections()
    back = receiver.wait_for(2)[1]
    assert back["json"]["title"] == "Stash2Plex: Plex is reachable again"
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "After the outage"
    assert len(receiver.received) == 2
    assert "failing" not in json.loads((plugin.data_dir / "sync_health.json").read_text())


def test_a_receiver_that_is_down_or_slow_changes_nothing_about_the_sync(plugin, receiver):
    receiver.delay = 8.0  # longer than the 5 s timeout
    closed = closed_port()
    plugin.configure(notify_urls=f"http://127.0.0.1:{closed}{TOKEN_PATH} {receiver.url()}")
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
    slow = f"notification to http://127.0.0.1:{receiver.port} failed: no answer within 5 s"
    while slow not in plugin.drainer_log() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = plugin.drainer_log()
    down = f"notification to http://127.0.0.1:{closed} failed: connection refused"
    assert down in log and slow in log, log[-2000:]
    finished = re.search(r"drainer finished: [^\n]*\b1 failed", log)
    assert finished, log[-2000:]
    assert finished.start() < log.index(slow)  # the sync did not wait
    assert "tok-a1b2" not in log


def test_dead_letters_of_many_drainer_runs_are_one_message_per_interval(plugin, receiver):
    """Issue 25.7: a burst of hooks is many short drainer runs; each sent its own message
    (46 in 40 s for 200 hooks). One per ten minutes; what comes sooner is told in the next."""
    plugin.configure(notify_urls=receiver.url())
    dead = ambiguous_scenes(plugin, 4)
    for sid in dead[:3]:  # three drainer runs, one after the other
        plugin.hook(create_context(sid))
        plugin.wait_drained()
    first = receiver.wait_for(1)[0]["json"]
    assert first["title"] == "Stash2Plex: 1 scene moved to the dead-letter queue", first
    health_path = plugin.data_dir / "sync_health.json"

    def held() -> int:  # the last run records what it held back as it finishes
        entry = json.loads(health_path.read_text()).get("dead_letters_held", {}).get("AmbiguousMatch", {})
        return entry.get("count", 0)

    deadline = time.monotonic() + 10
    while held() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    health = json.loads(health_path.read_text())
    assert health["dead_letters_held"]["AmbiguousMatch"]["count"] == 2, health
    time.sleep(0.5)
    assert len(receiver.received) == 1
    health["dead_letters_notified_at"] -= 601  # ten minutes later
    health_path.write_text(json.dumps(health))
    plugin.hook(create_context(dead[3]))
    plugin.wait_drained()
    second = receiver.wait_for(2)[1]["json"]
    assert second["title"] == "Stash2Plex: 3 scenes moved to the dead-letter queue", second
    assert second["message"].startswith(f"3 × AmbiguousMatch (scenes {dead[1]}, {dead[2]}, {dead[3]}): ")


def test_a_notification_redirected_elsewhere_never_carries_its_token_there(plugin, receiver):
    """Issue 25.7: requests keeps custom headers (X-Gotify-Key) across a redirect to another
    host. Redirects are not followed: the token goes only to the host the user named."""
    elsewhere = Receiver()
    try:
        receiver.redirect_to = f"http://localhost:{elsewhere.port}"
        plugin.configure(notify_urls=receiver.url("gotify", "/AbCdEfGhIj12345"))
        plugin.hook(create_context(ambiguous_scenes(plugin, 1)[0]))
        plugin.wait_drained()
        assert receiver.wait_for(1)[0]["headers"]["X-Gotify-Key"] == "AbCdEfGhIj12345"
        deadline = time.monotonic() + 15
        while f"notification to gotify://127.0.0.1:{receiver.port} failed" not in plugin.drainer_log():
            assert time.monotonic() < deadline, plugin.drainer_log()[-2000:]
            time.sleep(0.1)
        assert elsewhere.received == []
        assert "AbCdEfGhIj12345" not in plugin.drainer_log()
    finally:
        elsewhere.close()


# -- pure parts -----------------------------------------------------------------------------
def test_every_apprise_url_and_plain_webhooks():
    """Apprise reads the URLs (no request here: Discord's server is not ours to call)."""
    assert type(service("https://discord.com/api/webhooks/123/tok_abcdef")).__name__ == "NotifyDiscord"
    assert type(service("discord://123/tok_abcdef")).__name__ == "NotifyDiscord"
    assert type(service("ntfy://my-topic")).__name__ == "NotifyNtfy"
    assert type(service("https://h.example/hook")).__name__ == "NotifyJSON"  # a plain webhook, as before
    assert as_webhook("https://u:p%40ss@h.example:8443/x?k=1") == "jsons://u:p%40ss@h.example:8443/x?-k=1"
    assert service("nosuchservice://host/x") is None
    assert problem("no-scheme-at-all", 2) == "entry 2 has no scheme; write it as Apprise does, e.g. ntfy://my-topic"
    assert "my-topic" in secrets_of("ntfy://my-topic")


def test_dead_letter_text_groups_by_reason():
    notices = RunNotices(health=None)
    for sid in (3, 4, 5):
        notices.dead_lettered(sid, "PlexNotFound", "not in Plex after 8 attempts")
    notices.dead_lettered(9, "AmbiguousMatch", "two items")
    assert notices.dead_letter_text() == (
        "Stash2Plex: 4 scenes moved to the dead-letter queue",
        "3 × PlexNotFound (scenes 3, 4, 5): not in Plex after 8 attempts\n1 × AmbiguousMatch (scenes 9): two items",
    )
    assert notices.dead_letter_text() is None  # sent once


def test_the_health_check_names_a_url_apprise_cannot_use_without_its_secret(plugin):
    plugin.configure(notify_urls="ntfy://my-topic-7f3k nosuchservice://host.lan/secret-token-123")
    plugin.add_scene(1)
    run = plugin.task("health_check")
    problems = run.output["problems"]
    assert problems == [
        "setting notify_urls: entry 2 (nosuchservice://host.lan) is not a URL Apprise can use; "
        "check it against Apprise's documentation of that service"
    ], problems
    assert "secret-token-123" not in run.stderr and "my-topic-7f3k" not in run.stderr
