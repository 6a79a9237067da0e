"""The ways the plugin reaches Stash: threads sharing one client, https, session cookies."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

import pytest
import requests

from stash.client import StashClient
from tests.conftest import STASH_COOKIE, Plugin
from tests.emulators.stash_emulator import StashEmulator, cover_png
from tests.runner import REPO
from tests.test_recovery import _stopping_drainers
from tests.test_reliability import status, titles_match, wait_for
from validation.plugin_input import ServerConnection


class _GateLog:
    """stashapi's log, holding the thread that logs ``gate_on`` until released."""

    def __init__(self, gate_on: str) -> None:
        self.gate_on, self.reached, self.release = gate_on, threading.Event(), threading.Event()

    def debug(self, message: object) -> None:
        if self.gate_on in str(message) and not self.reached.is_set():
            self.reached.set()
            self.release.wait(10)


def test_connecting_sends_two_small_queries_and_no_introspection(stash):
    """stashapi's constructor introspects Stash's whole schema for fragments we never use:
    our client connects with the version and the API key alone."""
    StashClient(ServerConnection.model_validate(stash.server_connection(str(REPO))))
    sent = [r["query"] for r in stash.requests]
    assert len(sent) == 2 and not any("__schema" in q for q in sent), sent
    assert "StashVersion" in sent[0] and "getApiKey" in sent[1]


def test_a_failed_call_is_explained_by_its_own_reply_not_another_threads(stash):
    """A deleted scene fails ``findScenes(ids:)`` as a whole and is dropped by the id its
    error names; another thread's good reply arriving meanwhile must not hide that error."""
    kept = stash.add_scene(title="Kept")
    log = _GateLog("scene with id 999 not found")
    client = StashClient(ServerConnection.model_validate(stash.server_connection(str(REPO))), logger=log)
    found: dict = {}
    worker = threading.Thread(target=lambda: found.update(client.scenes_by_id([kept, 999])))
    worker.start()
    assert log.reached.wait(10)  # its reply is in, stashapi is logging the error before it raises
    assert client.version() == "v0.30.1"  # another thread's reply lands meanwhile
    log.release.set()
    worker.join(10)
    assert list(found) == [kept]


def _certificate(folder, name: str) -> tuple[str, str]:
    """A self-signed certificate for ``name`` (not for 127.0.0.1), made by the openssl CLI."""
    cert, key = folder / "stash.crt", folder / "stash.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}"]
        + ["-addext", f"subjectAltName=DNS:{name}"],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_stash_over_https_on_loopback_with_a_certificate_for_another_name(plugin, tmp_path):
    """Stash with TLS sends ``Scheme: https, Host: 0.0.0.0``: the plugin reaches it at
    https://127.0.0.1, whose certificate names the server (here self-signed, too). A
    ``REQUESTS_CA_BUNDLE`` without it (set on many systems) changes nothing: requests would
    let it override an unverified Session's ``verify=False`` (``merge_environment_settings``)."""
    import certifi

    plugin.env["REQUESTS_CA_BUNDLE"] = certifi.where()
    stash = plugin.stash
    stash.stop()
    stash.tls = _certificate(tmp_path, "stash.example.lan")
    stash.start()  # the same port, now https
    assert plugin.connection["Scheme"] == "https" and plugin.connection["Host"] == "0.0.0.0"
    sid, rk = plugin.add_scene(1)
    run = plugin.hook(stash.update_scene(sid, title="Over TLS", cover=cover_png(sid, 7)))
    assert run.error is None, run.stderr
    plugin.wait_drained(30)
    assert plugin.plex.item(rk)["fields"]["title"] == "Over TLS"
    assert plugin.plex.upload_requests(), "the poster was read from Stash over https"
    assert "Unverified" not in plugin.drainer_log() and "Warning" not in plugin.drainer_log()
    check = plugin.task("health_check")
    assert check.error is None and not check.messages("error"), check.logs


def test_a_certificate_is_checked_on_any_other_host(tmp_path):
    """Only loopback skips the check: ``--stash-url https://stash.example.lan`` is verified."""
    from stash.client import _verifies

    def connection(scheme: str, host: str) -> ServerConnection:
        return ServerConnection.model_validate({"Scheme": scheme, "Host": host, "Port": 9999, "PluginDir": "/p"})

    assert [_verifies(connection("https", h)) for h in ("0.0.0.0", "127.0.0.1", "::1", "localhost", "127.1.2.3")] == [
        False
    ] * 5
    assert [_verifies(connection("https", h)) for h in ("stash.example.lan", "192.168.1.5", "10.0.0.1")] == [True] * 3
    assert _verifies(connection("http", "0.0.0.0"))


# -- session cookies: Stash's last an hour, and Stash renews them with each answer -----------------
def test_the_emulator_expires_and_renews_cookies_as_stash_does(stash):
    """Go reads the first ``session`` cookie of a request; a good one is answered with a renewed one."""
    now = [time.time()]
    stash.clock = lambda: now[0]
    url, body = f"{stash.url}/graphql", {"query": "{ version { version } }"}

    def answer(cookies: str) -> int:
        return requests.post(url, json=body, headers={"Cookie": cookies}, timeout=5).status_code

    given = stash.issue_cookie()
    now[0] += 60
    first = requests.post(url, json=body, headers={"Cookie": f"session={given}"}, timeout=5)
    assert first.status_code == 200 and "Max-Age=3600" in first.headers["Set-Cookie"]
    renewed = first.cookies["session"]
    assert renewed != given
    now[0] += 3570  # the given cookie is 3,630 s old, the renewed one 3,570 s
    assert answer(f"session={given}") == 401 and answer(f"session={renewed}") == 200
    assert answer(f"session={given}; session={renewed}") == 401  # the first one counts
    assert answer(f"session={renewed}; session={given}") == 200


def test_a_drainer_that_asks_stash_keeps_its_session_past_the_first_hour(plex, tmp_path):
    """Without an API key a drainer lives on its session cookie. Stash renews it with each
    answer; the drainer must send the renewed one, or its session ends an hour after it started."""
    now = [time.time()]
    data_dir = tmp_path / "data"
    with StashEmulator(session_cookie=STASH_COOKIE) as stash, _stopping_drainers(data_dir):
        stash.clock = lambda: now[0]
        plugin = Plugin(
            stash, plex, data_dir, {"STASH2PLEX_DATA_DIR": str(data_dir), "STASH2PLEX_BREAKER_RECOVERY_S": "2"}
        )
        plugin.configure()
        scenes = dict(plugin.add_scene(n) for n in range(2))
        first, second = scenes
        plex.refuse_connections()
        assert plugin.hook(stash.update_scene(first, title="Session 1")).error is None
        wait_for(lambda: "Plex is unavailable" in plugin.drainer_log(), 15, "the job to wait for Plex")
        now[0] += 3000  # 50 minutes on
        asked = len(stash.graphql_requests("S2PConfig"))
        assert plugin.hook(stash.update_scene(second, title="Session 2")).error is None  # nudges the drainer
        wait_for(lambda: len(stash.graphql_requests("S2PConfig")) > asked, 15, "the drainer to read its settings")
        now[0] += 1200  # the first cookie is 70 minutes old, the one Stash renewed 20
        plex.accept_connections()
        wait_for(lambda: not titles_match(plugin, scenes), 30, "both edits in Plex", step=0.1)
        # the edit is in Plex a moment before its job is acknowledged
        wait_for(lambda: status(plugin)["pending"] == 0, 10, "the jobs acknowledged", step=0.1)
        after = status(plugin)
        assert after["dlq"] == 0 and after["pending"] == 0, after
        assert "refused the plugin's session" not in plugin.drainer_log()
