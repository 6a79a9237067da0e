"""Requests sent straight into the requests Session's connection pool (core/http.py
``DirectPool``) are the requests the Session sends, byte for byte; behind a proxy, or
when Stash answers anything but the image, the Session sends them."""

from __future__ import annotations

import pytest

from core.errors import StashRefused
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import REPO


@pytest.mark.parametrize("auth", ["cookie", "api key"])
def test_a_screenshot_read_sends_what_the_session_sends(auth):
    from stash.client import StashClient
    from validation.plugin_input import ServerConnection

    emu = StashEmulator(api_key="the-api-key" if auth == "api key" else "").start()
    try:
        emu.auth_required = True
        sid = emu.add_scene(title="A", files=[{"path": "/stash/a.mp4", "size": 1, "duration": 1.0}])
        client = StashClient(ServerConnection.model_validate(emu.server_connection(str(REPO))))
        url = f"{emu.url}/scene/{sid}/screenshot"
        data, kind = client.image(url)
        response = client._api.s.get(url, timeout=5)
        assert client._direct.usable  # the first read went the direct way
        assert (data, kind) == (response.content, response.headers["Content-Type"])
        direct, session = emu.screenshot_headers
        assert direct == session
        assert ("ApiKey" in direct) is (auth == "api key") and ("Cookie" in direct) is (auth == "cookie")

        emu.fail_401 = True  # a refusal is read again through the Session, whose reply names it
        with pytest.raises(StashRefused, match=r"Stash refused .* \(401\)"):
            client.image(url)
    finally:
        emu.stop()


def test_writes_behind_a_proxy_go_through_the_session(plex, monkeypatch):
    """No direct pool when a proxy applies to plex_url: the Session (which knows how to
    talk through it) sends the writes; without one the writes skip the Session's work."""
    import requests

    from core.http import DirectPool
    from plex.client import PlexClient

    session = requests.Session()
    session.proxies = {"http": "http://proxy.invalid:3128"}
    assert not DirectPool(session, plex.url, {}).usable
    session.proxies = {"https": "http://proxy.invalid:3128"}  # for https only: plex_url is http
    assert DirectPool(session, plex.url, {}).usable

    key = plex.add_item(1, "/plex/media/a.mp4", title="A")
    client = PlexClient(plex.url, plex.token, "test-client")
    client.item_states([key])
    monkeypatch.setattr(type(client._direct), "usable", property(lambda self: False))  # as behind a proxy
    client.edit(key, {"title.value": "Through the session", "title.locked": 1})
    assert plex.item(key)["fields"]["title"] == "Through the session"
