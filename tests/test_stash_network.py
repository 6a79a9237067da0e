"""The ways the plugin reaches Stash: threads sharing one client, https, session cookies."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest

from stash.client import StashClient
from tests.emulators.stash_emulator import cover_png
from tests.runner import REPO
from validation.plugin_input import ServerConnection


class _GateLog:
    """stashapi's log, holding the thread that logs ``gate_on`` until released."""

    def __init__(self, gate_on: str) -> None:
        self.gate_on, self.reached, self.release = gate_on, threading.Event(), threading.Event()

    def debug(self, message: object) -> None:
        if self.gate_on in str(message) and not self.reached.is_set():
            self.reached.set()
            self.release.wait(10)


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
    https://127.0.0.1, whose certificate names the server (here self-signed, too)."""
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
