"""Real networks between the plugin and Plex (issue 24.5, 25.6): a reverse proxy that
answers with redirects, a proxy that limits the request line, through the real plugin
process against the Plex emulator (``redirect`` and ``max_url_bytes`` play the proxy).
Plex over https is in ``tests/test_causes.py``
(``test_a_self_signed_certificate_is_named_with_its_remedy``)."""

from __future__ import annotations

import pytest

from core.errors import TransientError
from tests.conftest import PLEX_TOKEN
from tests.emulators.plex_emulator import PlexEmulator
from tests.runner import drainer_lock_held


@pytest.fixture
def second_plex():
    """Where a redirect leads: another server with the same library as ``plugin.plex``."""
    with PlexEmulator(token=PLEX_TOKEN) as emulator:
        emulator.add_section("Stash", ["/plex/media"], key=1)
        yield emulator


# -- a reverse proxy that answers with a redirect ---------------------------------------------
@pytest.mark.parametrize("status", [301, 308])
def test_a_plex_behind_a_redirecting_proxy_is_written_where_the_redirect_leads(plugin, status):
    """plex_url is a proxy that redirects every request: the edit and the poster (a POST,
    which requests would turn into a body-less GET through a 301) reach Plex itself, and
    health check says where plex_url leads."""
    sid, rk = plugin.add_scene(1, details="About one", tags=["Drama"])
    with PlexEmulator(token=PLEX_TOKEN) as proxy:
        proxy.redirect = (status, plugin.plex.url)
        plugin.configure(plex_url=proxy.url)
        run = plugin.task("all")
        assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
        item = plugin.plex.item(rk)
        assert item["fields"]["summary"] == "About one" and item["tags"]["genre"] == ["Drama"]
        assert item["uploads"] == 1 and [r["method"] for r in plugin.plex.upload_requests()] == ["POST"]

        check = plugin.task("health_check")
        assert check.output["ok"] is True, check.output
        assert check.output["plex"]["url"] == plugin.plex.url
        assert any(f"redirects to {plugin.plex.url}" in m for m in check.messages("info")), check.messages()
        # The proxy was asked only where it leads, without the token.
        assert {(r["method"], r["path"]) for r in proxy.requests} == {("GET", "/identity")}
        assert not any("X-Plex-Token" in r["headers"] for r in proxy.requests)
    assert plugin.task("queue_status").output["dlq"] == 0


def test_a_redirect_to_a_login_page_stops_the_run_naming_it_without_following_it(plugin):
    """plex_url is a proxy that sends clients to its login page (nginx ``return 302
    https://auth/login?rd=$request_uri``), here on a host nobody answers at: that is not
    Plex on another address, which no retry can fix; the run stops naming where the
    redirect leads, and the job is kept."""
    sid, _ = plugin.add_scene(1)
    with PlexEmulator(token=PLEX_TOKEN) as proxy:
        proxy.redirect = (302, "http://127.0.0.1:9/login?rd=")  # the discard port: nothing listens
        plugin.configure(plex_url=proxy.url)
        with drainer_lock_held(plugin.data_dir):
            assert plugin.hook(plugin.stash.update_scene(sid, title="Behind a login")).error is None
        run = plugin.task("process_queue")
    assert run.error and "answered with a redirect to http://127.0.0.1:9/login, which is not" in run.error, run.error
    assert plugin.task("queue_status").output["pending"] == 1


def test_a_redirect_answered_to_a_poster_upload_is_never_taken_as_done(plugin, second_plex):
    """Plex's address starts redirecting between the edit and the poster: the upload that
    requests would turn into a GET (answered 200 with the poster list) is not taken as
    done; the plugin connects again and the poster is stored where the redirect leads."""
    sid, rk = plugin.add_scene(1)
    assert second_plex.add_item(1, "/plex/media/scene-00001.mp4", size=1001, duration_ms=60000) == rk

    def proxy_turns_on(record: dict) -> None:
        if record["method"] == "PUT" and record["path"].startswith("/library/sections/"):
            plugin.plex.redirect = (301, second_plex.url)

    plugin.plex.on_request = proxy_turns_on
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
    assert plugin.plex.item(rk)["fields"]["title"] == "Scene 1"  # the edit, before the redirect
    assert plugin.plex.item(rk)["uploads"] == 0
    assert second_plex.item(rk)["uploads"] == 1
    assert [r["method"] for r in second_plex.upload_requests()] == ["POST"]
    assert second_plex.requests_matching("GET", f"/library/metadata/{rk}/posters") == []


def test_a_write_answered_with_a_redirect_is_an_error_naming_where_it_leads(plex, second_plex):
    from plex.client import PlexClient

    rk = plex.add_item(1, "/plex/media/a.mp4")
    client = PlexClient(plex.url, plex.token, "test-client")
    client.version()
    plex.redirect = (301, second_plex.url + "/plex")
    with pytest.raises(TransientError, match=rf"redirect \(301\) to {second_plex.url}/plex;") as caught:
        client._write("uploading a poster", "POST", f"/library/metadata/{rk}/posters", b"\x89PNG")
    assert "nothing was written" in str(caught.value) and "posters" not in str(caught.value)
    assert second_plex.requests == [] and plex.item(rk)["uploads"] == 0


def test_a_write_refused_late_leaves_the_connection_made_since_alone(plex, second_plex):
    """Writers share the client: a redirect answered to a write sent before the client
    connected again (where the redirect leads) does not drop that new connection; only a
    refusal on the connection in use makes the next request connect again."""
    import threading

    from plex.client import PlexClient

    rk = plex.add_item(1, "/plex/media/a.mp4")
    client = PlexClient(plex.url, plex.token, "test-client")
    client.version()
    arrived, answer = threading.Event(), threading.Event()

    def upload_answered_late(record: dict) -> None:
        if record["method"] == "POST":
            arrived.set()
            answer.wait(5)

    plex.on_request, plex.redirect = upload_answered_late, (301, second_plex.url)
    late: list[BaseException] = []

    def upload() -> None:
        try:
            client._write("uploading a poster", "POST", f"/library/metadata/{rk}/posters", b"\x89PNG")
        except TransientError as exc:
            late.append(exc)

    writer = threading.Thread(target=upload)
    writer.start()
    assert arrived.wait(5)
    with pytest.raises(TransientError, match="redirect"):
        client._write("rating", "PUT", f"/:/rate?key={rk}&identifier=com.plexapp.plugins.library&rating=5")
    client.version()  # connected again, where the redirect leads
    answer.set()
    writer.join(5)
    assert len(late) == 1 and "redirect (301)" in str(late[0])
    client.version()
    assert len(second_plex.requests_matching("GET", "/identity")) == 1


# -- our requests beside plexapi's own calls ------------------------------------------------
def test_what_we_send_beside_plexapis_calls_is_what_plexapi_sends(plex):
    """The poster's image and the websocket are requested beside ``PlexServer.query``: with
    plexapi's session, headers and path, and a failure told as ``query`` tells it [server.py
    ``PlexServer._session``, ``_headers``, ``query``; alert.py ``AlertListener.key``]. A plexapi
    release that changes one of them fails here."""
    import requests
    from plexapi.alert import AlertListener
    from plexapi.exceptions import NotFound, Unauthorized

    from plex.client import PlexClient
    from plex.errors import translate
    from plex.notifications import Connection

    client = PlexClient(plex.url, plex.token, "test-client")
    server = client.server
    assert client.session is server._session
    assert client.auth_headers() == {k: v for k, v in server._headers().items() if v is not None}
    assert Connection.KEY == AlertListener.key
    for key, headers, kind in [
        ("/library/metadata/424242", None, NotFound),
        ("/library/sections", {"X-Plex-Token": "x"}, Unauthorized),
    ]:
        with pytest.raises(kind) as by_plexapi:
            server.query(key, headers=headers)
        reply = requests.get(server.url(key), headers={**client.auth_headers(), **(headers or {})}, timeout=5)
        with pytest.raises(requests.HTTPError) as by_requests:
            reply.raise_for_status()
        ours, theirs = translate(by_requests.value, "reading"), translate(by_plexapi.value, "reading")
        assert (type(ours), str(ours)) == (type(theirs), str(theirs))


def test_the_watch_history_is_read_through_plexapis_own_paging(plex):
    """250 plays of the owner, one of another account and one of a deleted item: the owner's
    from ``since`` on, oldest first, in three pages of 100 (plexapi base.py ``fetchItems``)."""
    from plex.client import PlexClient
    from plex.history import Play, read_history

    rk = plex.add_item(1, "/plex/media/a.mp4")
    gone = plex.add_item(1, "/plex/media/b.mp4")
    ids = [plex.play(rk, viewed_at=1_700_000_000 + n) for n in range(250)]
    plex.play(rk, account_id=7, viewed_at=1_700_000_100)
    plex.play(gone, viewed_at=1_700_000_100)
    plex.remove_item(gone)
    client = PlexClient(plex.url, plex.token, "test-client")
    plays = read_history(client, 1, since=1_700_000_010)
    assert plays == [
        Play(f"/status/sessions/history/{i}", rk, 1_700_000_000 + n, 1) for n, i in enumerate(ids) if n >= 10
    ]
    pages = [
        r["headers"].get("X-Plex-Container-Start") for r in plex.requests_matching("GET", "/status/sessions/history")
    ]
    assert pages == ["0", "100", "200"]


# -- a proxy that limits the request line -----------------------------------------------------
def test_an_8_kb_request_line_limit_takes_long_non_ascii_details_and_many_tags_complete(plugin):
    """nginx's and Apache's default limit: every edit fits, nothing is shortened that a
    split can carry whole (issue 25.6: a short description with hundreds of tags), and
    nothing is dead-lettered for its length."""
    plugin.plex.max_url_bytes = 8190
    details = "長い説明、" * 140  # 700 characters, 9 bytes each once encoded
    tags = [f"Tag number {n:03d}" for n in range(150)]
    sid, rk = plugin.add_scene(1, details=details, tags=tags, performers=["Ann", "Bo"], studio="Acme")
    many = [f"T{n}" for n in range(295)]  # alone they fit one request; with the fields they do not
    short = "A short description of the scene"
    sid2, rk2 = plugin.add_scene(2, details=short, tags=many, studio="Acme")
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 2 and run.output["failed"] == 0, run.stderr[-2000:]
    item = plugin.plex.item(rk)
    assert item["fields"]["summary"] == details
    assert sorted(item["tags"]["genre"]) == tags and sorted(item["tags"]["actor"]) == ["Ann", "Bo"]
    other = plugin.plex.item(rk2)
    assert other["fields"]["summary"] == short and sorted(other["tags"]["genre"]) == sorted(many)
    assert len([r for r in plugin.plex.edit_requests() if r["query"]["id"] == [str(rk2)]]) == 2  # split once
    assert not any("shortened" in m for m in run.messages())
    sent = plugin.plex.edit_requests()
    assert sent and all(r["status"] == 200 for r in sent)
    assert all("%5B" in r["target"] and "[" not in r["target"] for r in sent if any("[" in k for k in r["query"]))
    assert plugin.task("queue_status").output["dlq"] == 0


def test_a_lower_proxy_limit_is_met_by_smaller_requests_never_the_dead_letter_queue(plugin):
    plugin.plex.max_url_bytes = 3000
    details = "é" * 800  # 4,800 bytes once encoded: more than the proxy takes in one line
    tags = [f"Tag {n:02d}" for n in range(40)]
    sid, rk = plugin.add_scene(1, details=details, tags=tags)
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 1 and run.output["failed"] == 0, run.stderr[-2000:]
    item = plugin.plex.item(rk)
    assert sorted(item["tags"]["genre"]) == tags and item["fields"]["title"] == "Scene 1"
    summary = item["fields"]["summary"]
    assert summary.endswith("…") and details.startswith(summary[:-1]) and len(summary) > 100
    assert [r["status"] for r in plugin.plex.edit_requests()][0] == 414
    assert plugin.task("queue_status").output["dlq"] == 0


def test_a_plex_url_that_does_not_redirect_is_not_said_to(plugin):
    """A host name typed in capitals (as Windows shows it): Plex answers there, so health
    check says nothing of a redirect, and requests go to plex_url as given."""
    plugin.configure(plex_url=plugin.plex.url.replace("127.0.0.1", "LOCALHOST"))
    check = plugin.task("health_check")
    assert check.output["ok"] is True, check.output
    assert check.output["plex"]["url"] == plugin.plex.url.replace("127.0.0.1", "LOCALHOST")
    assert not any("redirects to" in m for m in check.messages("info")), check.messages()
