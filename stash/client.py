"""Stash's GraphQL API through stashapi, with its errors translated once, here.

stashapi raises a bare ``Exception("<status> <reason> query failed. …")`` for every
GraphQL failure and lets ``requests`` errors through; above this module only our
own exception tree is seen.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from core.clock import ServerClock, response_hook
from core.errors import ConfigError, SlowDownload, StashQueryError, StashRefused, StashUnavailable
from core.http import fixed_environment_session
from core.netcause import Cause, host_of, network_cause
from stash import stashapi_insides
from stash.releases import as_groups, refusal, spelled
from validation.fields import SCENE_SELECTION, scene_selection
from validation.metadata import stash_route
from validation.plugin_input import ServerConnection

PLUGIN_ID = "Stash2Plex"
REQUEST_TIMEOUT_S = 30.0
PAGE_SIZE = 500  # scenes per request of a walk through the library
IMAGE_DEADLINE_S = 60.0  # a whole screenshot download: the read timeout never ends a trickle
SCENE_FIELDS = SCENE_SELECTION  # what the synced fields read, photos on (validation/fields.py)
_FIND_BY_IDS = (
    "query S2PScenesById($ids: [ID!], $filter: FindFilterType) {"
    " findScenes(ids: $ids, filter: $filter) { count scenes { %s } } }" % SCENE_FIELDS
)
_TAG_TREE = (
    "query S2PTagTree($filter: FindFilterType) { findTags(filter: $filter) { count tags { id name parents { id } } } }"
)
_FIND_AFTER = (
    "query S2PScenesAfter($filter: FindFilterType, $scene_filter: SceneFilterType) {"
    " findScenes(filter: $filter, scene_filter: $scene_filter) { count scenes { %s } } }" % SCENE_FIELDS
)
_NEWEST = (
    'query S2PNewest { findScenes(filter: {per_page: 1, sort: "updated_at", direction: DESC})'
    " { scenes { updated_at } } }"
)
# Stash's SceneStore.FindMany fails the whole findScenes(ids:) query with this message
# for the first id that no longer exists [S:pkg/sqlite/scene.go `FindMany`].
_MISSING_SCENE = re.compile(r"scene with id (\d+) not found")
_PLUGIN_CONFIG = "query S2PConfig($include: [ID!]) { configuration { plugins(include: $include) } }"
_VERSION = "query S2PVersion { version { version } }"
_LOGIN = "query S2PLogin { configuration { general { username } } }"


def _refused(response: Any, what: str) -> StashRefused:
    """Stash refused the credentials a request carried (401/403): which ones, and what to do."""
    status, headers = response.status_code, getattr(getattr(response, "request", None), "headers", None) or {}
    if headers.get("ApiKey"):
        text = (
            f"Stash refused the API key ({status}); copy the current key from Stash → Settings → "
            "Security → API Key (--stash-api-key or STASH2PLEX_STASH_API_KEY)"
        )
    elif headers.get("Cookie"):
        text = (
            f"Stash refused the plugin's session ({status}); a session expires (Stash's default session "
            "age is 1 hour). The jobs stay queued: the next hook or task starts with a fresh session. "
            "An API key avoids this wait: generate one in Stash (Settings → Security → API Key) and "
            "Stash2Plex uses it instead of the session"
        )
    else:
        text = (
            f"Stash asks for credentials ({status}); give its API key (Stash → Settings → Security → "
            "API Key) with --stash-api-key or STASH2PLEX_STASH_API_KEY"
        )
    return StashRefused(f"{text} (while {what})")


@contextlib.contextmanager
def stash_errors(what: str, last_reply=lambda: None, url: str = "") -> Iterator[None]:
    """Translate requests/stashapi failures into our tree, by type (``core/netcause.py``):
    unreachable → StashUnavailable, session/key refused → StashRefused, GraphQL errors →
    StashQueryError. ``last_reply()`` returns Stash's last HTTP response (or None)."""
    try:
        yield
    except (StashUnavailable, StashRefused, StashQueryError):
        raise
    except Exception as exc:  # requests' errors, or stashapi's bare Exception (no secrets in it)
        raise _translate(exc, what, last_reply(), url) from None


def _translate(exc: BaseException, what: str, response: Any, url: str) -> Exception:
    cause = network_cause(exc)
    if cause is not Cause.NONE:
        return StashUnavailable(f"{_network_text(cause, url)} while {what}")
    if getattr(response, "status_code", None) in (401, 403):
        return _refused(response, what)
    import requests

    if type(exc) is not Exception and not isinstance(exc, requests.RequestException):
        raise exc  # neither stashapi's bare Exception nor a requests error: a bug of ours, with its traceback
    if response is None:
        return StashQueryError(f"Stash answered with an error: {exc} (while {what})")
    return _from_reply(response, what, exc)


def _from_reply(response: Any, what: str, exc: BaseException) -> Exception:
    """What Stash's reply to a failed call says, since stashapi reports every failure as
    ``"<status> <reason> query failed"``: an outage (a 5xx, or a page that is not GraphQL
    where GraphQL was due: a proxy's or login form's), or GraphQL errors."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        kind = (response.headers.get("Content-Type") or "an unknown type").split(";")[0]
        text = f"Stash answered {status} with {kind} instead of GraphQL; is a proxy or login page in front of Stash?"
        return (StashQueryError if 300 <= status < 500 else StashUnavailable)(f"{text} (while {what})")
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        texts = [str(e.get("message") if isinstance(e, dict) else e)[:300] for e in errors[:3]]
        text = f"Stash answered with GraphQL errors: {'; '.join(texts)}"
    else:
        text = f"Stash answered {status}" if status >= 500 else f"Stash answered with an error: {exc}"
    return (StashUnavailable if status >= 500 else StashQueryError)(f"{text} (while {what})")


def _read_within(response: Any, seconds: float) -> bytes:
    """The body of a streamed reply, or StashUnavailable once ``seconds`` have passed: a
    timer closes the connection then (a per-read timeout restarts with every byte, so a
    server that sends one byte every few seconds would otherwise hold the sync for ever)."""
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _shut(response)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        content = response.content
    except Exception:
        if not expired.is_set():
            raise
        content = b""
    finally:
        timer.cancel()
    if expired.is_set():
        raise SlowDownload(
            f"Stash took longer than {seconds:.0f} s to send a screenshot (it came in too slowly); "
            "the download was stopped"
        )
    return content


def _shut(response: Any) -> None:
    """End a download in flight from another thread: shutting the socket down wakes the
    blocked read at once (closing it alone waits for the next byte)."""
    import socket

    sock = getattr(getattr(getattr(response, "raw", None), "_connection", None), "sock", None)
    with contextlib.suppress(OSError, AttributeError):
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        response.close()


def _sent_to_login(response: Any) -> bool:
    """Whether Stash redirected the read to its login page: with a login configured, a
    request without a valid session or key (an expired session reads as none) is answered
    302 to ``<prefix>/login?returnURL=…`` (internal/api/authentication.go
    ``authenticateHandler``), which requests follows to a 200 HTML page."""
    return bool(response.history) and urlsplit(response.url).path.endswith("/login")


def _image_refused(response: Any) -> Exception:
    """What Stash's answer to a screenshot read other than the image means (a refused
    session or key, Stash failing, or no such image); requests' ``HTTPError`` would read
    as a network failure (it is an ``OSError``)."""
    status, what = response.status_code, "downloading a screenshot"
    if _sent_to_login(response):
        return _refused(response.history[0], what)
    if status in (401, 403):
        return _refused(response, what)
    return (StashUnavailable if status >= 500 else StashQueryError)(f"Stash answered {status} while {what}")


def _network_text(cause: Cause, url: str) -> str:
    host = host_of(url) if url else "Stash"
    return {
        Cause.REFUSED: f"Stash refused the connection at {host}; is Stash running?",
        Cause.DNS: f"the name of the Stash host ({host}) could not be resolved",
        Cause.CONNECT_TIMEOUT: f"Stash at {host} did not accept a connection in time",
        Cause.READ_TIMEOUT: f"Stash did not answer within {REQUEST_TIMEOUT_S:.0f} s",
        Cause.TLS_CERT: f"Stash's TLS certificate at {host} was rejected; set REQUESTS_CA_BUNDLE to its CA file",
        Cause.TLS: f"the TLS handshake with Stash at {host} failed",
        Cause.RESET: "the connection to Stash broke mid-reply",
    }.get(cause, f"cannot connect to Stash at {host}")


_PLAY_HISTORY = "query S2PPlays($id: ID!) { findScene(id: $id) { id play_history } }"
_ACTIVITY = "query S2PActivity($id: ID!) { findScene(id: $id) { id resume_time rating100 updated_at } }"
_SAVE_RESUME = "mutation S2PResume($id: ID!, $t: Float) { sceneSaveActivity(id: $id, resume_time: $t) }"
_SET_RATING = "mutation S2PRate($id: ID!, $r: Int) { sceneUpdate(input: {id: $id, rating100: $r}) { id } }"
_ADD_PLAY = "mutation S2PAddPlay($id: ID!, $times: [Timestamp!]) { sceneAddPlay(id: $id, times: $times) { count } }"


class LibraryLog:
    """What stashapi logs, at debug level only, marked as its own.

    stashapi writes several ERROR lines of its own (``GRAPHQL_ERROR:…``, "GQL data
    response is null", "… query failed") before raising; ``stash_errors`` then says
    in one line what failed and what to do. Its lines stay available at debug.
    """

    def __init__(self, target: Any) -> None:
        self.target = target

    def _debug(self, message: object, *args: Any, **kwargs: Any) -> None:
        self.target.debug(f"[stashapi] {message}")

    trace = debug = info = warning = error = critical = exception = progress = _debug


def _verifies(connection: ServerConnection) -> bool:
    """Whether Stash's TLS certificate is checked: always, except on this machine's loopback.

    Stash gives plugins its bind host, by default ``0.0.0.0``, which we reach as
    ``127.0.0.1``; its certificate names the server's real name (or is self-signed), so
    the hostname check (or the chain) fails there for every Stash with TLS. Skipping the
    check on loopback is safe: the connection never leaves this machine, so there is no
    network to attack, and only a process on this machine can listen on 127.0.0.1, which
    is exactly what a plain-http Stash (the default) already trusts. Any other host
    (the command line's ``--stash-url https://stash.example.lan``) is checked as usual.
    """
    if connection.Scheme.lower() != "https":
        return True
    host = connection.host_for_client.strip("[]")
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def _quiet_unverified(host: str) -> None:
    """urllib3 warns on every unverified request, on stderr, which Stash logs as errors."""
    import warnings

    warnings.filterwarnings(
        "ignore",
        message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
        category=Warning,  # urllib3's InsecureRequestWarning, matched by its text
    )


class StashClient:
    """The few Stash queries Stash2Plex needs."""

    def __init__(
        self, connection: ServerConnection, logger: Any = None, image_deadline_s: float = IMAGE_DEADLINE_S
    ) -> None:
        self.image_deadline_s = image_deadline_s
        self.scene_fields = scene_selection(photos=False)  # until read_photos: settings come from Stash
        cookie, verify = connection.SessionCookie, _verifies(connection)
        conn = {  # stashapi takes an empty value as none given
            "Scheme": connection.Scheme,
            "Host": connection.host_for_client,
            "Port": connection.Port,
            "SessionCookie": None if cookie is None else {"Name": cookie.Name, "Value": cookie.Value},
            "ApiKey": connection.ApiKey,
            "Logger": None if logger is None else LibraryLog(logger),
        }
        # Stash's last reply to each thread: a call's own reply, whatever other threads
        # (the writer pool reading covers, a task's listing thread) receive meanwhile.
        self._replies = threading.local()
        self.clock = ServerClock()  # Stash's clock, from its replies' Date headers
        if not verify:
            _quiet_unverified(connection.host_for_client.strip("[]"))
        with stash_errors("connecting", self._last_reply, connection.base_url):
            # force_api_key: when Stash has an API key, use it instead of the session
            # cookie, which stops authenticating about an hour after Stash issued it
            # (a drainer waiting on retries can live longer than that).
            interface = stashapi_insides.interface(lambda session: self._prepare(session, verify))
            self._api = interface(conn, verify_ssl=verify, force_api_key=True)
        fixed_environment_session(self._api.s, self._api.url)
        self.api_key = self._api.s.headers.get("ApiKey") or None
        self._base = urlsplit(self._api.url)
        if self.api_key is None and cookie is not None:
            self._follow_renewed_session(cookie.Name)
        # the release whose queries this client sends (stash/releases.py), from the version
        # stashapi read when it connected (no extra request)
        version = self._api.version
        self.release = (getattr(version, "major", 0), getattr(version, "minor", 0), getattr(version, "patch", 0))
        if refused := refusal(self.release):
            raise ConfigError(refused)

    def _follow_renewed_session(self, name: str) -> None:
        """Send the session cookie Stash renewed last, not the one we were given.

        Stash renews the cookie on every request its session authenticates (pkg/session/session.go
        ``GetSessionUserID``). stashapi stores the given cookie with no domain, so the renewal (this
        host's) was kept beside it and both were sent, the given one first; Go reads the first
        (``Request.Cookie``), so the session expired one max session age after the run started.
        Stored as this host's, the given cookie is replaced by each renewal, and a drainer that asks
        Stash at least that often keeps its session.
        """
        # the domain the jar files this host's own cookies under: the host as in the URL,
        # ``.local`` added when it has no dot (http.cookiejar ``eff_request_host``:
        # ``localhost.local``, ``[::1].local``)
        host = re.sub(r":\d+$", "", self._base.netloc.rpartition("@")[2]).lower()
        jar, host = self._api.s.cookies, host if "." in host else f"{host}.local"
        given = [c for c in jar if c.name == name and not c.domain]
        if not any(c.name == name and c.domain == host for c in jar):
            for cookie in given[:1]:
                jar.set(name, cookie.value, domain=host, path="/")
        for cookie in given:
            jar.clear(cookie.domain, cookie.path, name)

    def _remember(self, response, *args, **kwargs):
        """requests runs response hooks in the thread that sent the request."""
        self._replies.last = response
        return response

    def _last_reply(self):
        return getattr(self._replies, "last", None)

    def _prepare(self, session: Any, verify: bool) -> None:
        """stashapi's Session, before its first request: a timeout on every request (stashapi
        sets none; a stalled Stash must not hang the drainer for ever), each reply remembered
        and its ``Date`` noted, and without verification the environment ignored: requests lets
        ``REQUESTS_CA_BUNDLE`` (set on many systems) override ``verify=False`` while ``trust_env``
        is on (``Session.merge_environment_settings``; ``fixed_environment_session`` sets the
        proxies once connected)."""
        original = session.request

        def request(method, url, **kwargs):
            kwargs.setdefault("timeout", REQUEST_TIMEOUT_S)
            return original(method, url, **kwargs)

        session.request = request
        session.hooks["response"] += [self._remember, response_hook(self.clock, time.time)]
        if not verify:
            session.trust_env = False

    def _call(self, query: str, variables: dict[str, Any], what: str) -> dict[str, Any]:
        self._replies.last = None
        with stash_errors(what, self._last_reply, self._api.url):
            data = self._api.call_GQL(spelled(query, self.release), variables)
        if not isinstance(data, dict):
            raise StashUnavailable(f"Stash answered without data while {what}")
        found = data.get("findScenes")
        if isinstance(found, dict) and isinstance(found.get("scenes"), list):  # one shape for every release
            found["scenes"] = [as_groups(s) if isinstance(s, dict) else s for s in found["scenes"]]
        return data

    def plugin_settings(self) -> dict[str, Any]:
        data = self._call(_PLUGIN_CONFIG, {"include": [PLUGIN_ID]}, "reading the plugin settings")
        plugins = (data.get("configuration") or {}).get("plugins") or {}
        return plugins.get(PLUGIN_ID) or {}

    def read_photos(self, on: bool) -> None:
        """Whether scene reads ask for performers' ``image_path`` (``performer_photos``), set
        from the settings each time they are read."""
        self.scene_fields = scene_selection(on)

    def needs_login(self) -> bool:
        """Whether Stash serves its images only to a logged-in client (the session cookie, an
        ``ApiKey`` header or ``apikey`` parameter), as Plex fetching a performer photo is not.
        Stash asks for a login when it has a username and password (internal/api/authentication.go
        ``authenticateHandler``: ``HasCredentials``), and an API key exists only with a username
        (internal/api/resolver_mutation_configure.go ``GenerateAPIKey``); the password hash is
        never asked for."""
        if self.api_key is not None:
            return True
        data = self._call(_LOGIN, {}, "reading whether Stash asks for a login")
        general = (data.get("configuration") or {}).get("general") or {}
        return bool(general.get("username"))

    def scenes_by_id(self, scene_ids: list[int]) -> dict[int, dict[str, Any]]:
        """One request for many scenes; scenes that no longer exist are absent.

        Stash fails the whole query when any id is missing (or repeated), naming the
        first such id: ids are asked once each, and a named id is dropped and the rest
        asked again (one more request per deleted scene, none when nothing was deleted).
        """
        ids = list(dict.fromkeys(scene_ids))
        while ids:
            try:
                return self._scenes_by_id(ids)
            except StashQueryError as exc:
                gone = _MISSING_SCENE.search(str(exc))
                if gone is None or int(gone.group(1)) not in ids:
                    raise
                ids.remove(int(gone.group(1)))
        return {}

    def _scenes_by_id(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        variables = {"ids": [str(i) for i in ids], "filter": {"per_page": -1, "sort": "id"}}
        _, scenes = self._find(_FIND_BY_IDS, variables, f"fetching {len(ids)} scenes")
        return {int(s["id"]): s for s in scenes if isinstance(s, dict) and "id" in s}

    def _find(self, query: str, variables: dict[str, Any], what: str) -> tuple[int, list[dict]]:
        """A ``findScenes`` query (written with every field, ``SCENE_FIELDS``) with the fields
        read now: how many scenes match, and this page of them."""
        data = self._call(query.replace(SCENE_FIELDS, self.scene_fields), variables, what)
        result = data.get("findScenes") or {}
        return int(result.get("count") or 0), list(result.get("scenes") or [])

    def scenes_after(self, last_id: int, per_page: int, updated_after: str | None = None) -> tuple[int, list[dict]]:
        """The first ``per_page`` scenes with an id above ``last_id``, in id order, and how
        many such scenes there are. Paging by id instead of by page number skips nothing
        when scenes are deleted (or added) while a task works through the library."""
        scene_filter: dict[str, Any] = {"id": {"value": int(last_id), "modifier": "GREATER_THAN"}}
        if updated_after:
            scene_filter["updated_at"] = {"value": updated_after, "modifier": "GREATER_THAN"}
        variables = {
            "filter": {"page": 1, "per_page": per_page, "sort": "id", "direction": "ASC"},
            "scene_filter": scene_filter,
        }
        return self._find(_FIND_AFTER, variables, f"fetching scenes after id {last_id}")

    def newest_updated_at(self) -> str | None:
        """The newest scene's ``updated_at``, exactly as Stash wrote it (its own zone and
        form: Stash compares timestamps as text), or None when Stash has no scenes."""
        data = self._call(_NEWEST, {}, "reading the newest update time")
        scenes = (data.get("findScenes") or {}).get("scenes") or []
        return str(scenes[0].get("updated_at") or "") or None if scenes else None

    def scene_pages(
        self,
        size: int = PAGE_SIZE,
        updated_after: str | None = None,
        wanted: Callable[[], bool] = lambda: True,
        first: int | None = None,
    ) -> Iterator[tuple[int, list[dict]]]:
        """Stash's scenes (those updated after ``updated_after``) page by page, by id
        (``scenes_after``: a scene deleted meanwhile makes none slip), each with how many there
        are, while ``wanted()`` (asked before a page is read, never after the last); the first
        page holds ``first`` scenes when given."""
        last_id, seen, asked = 0, 0, first or size
        while wanted():
            left, raw = self.scenes_after(last_id, asked, updated_after)
            if not raw:
                return
            yield seen + left, raw
            seen += len(raw)
            if len(raw) < asked or len(raw) >= left:
                return
            last_id, asked = max(int(scene["id"]) for scene in raw), size

    def play_history(self, scene_id: int) -> list[str] | None:
        """The scene's plays, as Stash gives them (``Scene.play_history``, RFC3339, newest
        first); None when the scene is gone."""
        data = self._call(_PLAY_HISTORY, {"id": scene_id}, f"reading scene {scene_id}'s play history")
        scene = data.get("findScene")
        if scene is None:
            return None
        return list(scene.get("play_history") or [])

    def add_play(self, scene_id: int, when: str) -> None:
        """One play at ``when`` (RFC3339). Not idempotent (``sceneAddPlay`` adds a row per
        time, internal/api/resolver_mutation_scene.go): callers check ``play_history`` first."""
        self._call(_ADD_PLAY, {"id": scene_id, "times": [when]}, f"adding a play to scene {scene_id}")

    def scene_state(self, scene_id: int) -> dict[str, Any] | None:
        """``resume_time`` (s), ``rating100`` and ``updated_at`` of a scene; None when it is gone."""
        return self._call(_ACTIVITY, {"id": scene_id}, f"reading scene {scene_id}").get("findScene")

    def save_resume(self, scene_id: int, seconds: float) -> None:
        """``sceneSaveActivity`` with ``resume_time`` only: setting it is idempotent; the
        play duration (which it adds to) is never sent."""
        self._call(_SAVE_RESUME, {"id": scene_id, "t": seconds}, f"saving scene {scene_id}'s resume point")

    def set_rating(self, scene_id: int, rating100: int | None) -> None:
        """``sceneUpdate`` of ``rating100`` only (it fires the scene's update hook)."""
        self._call(_SET_RATING, {"id": scene_id, "r": rating100}, f"rating scene {scene_id}")

    def tag_tree(self) -> dict[int, tuple[str, tuple[int, ...]]]:
        """Every tag: id → (name, its parents' ids), in one request, for the tag filters
        (a filter covers a tag's descendants) and the tags a scene's item depends on."""
        data = self._call(_TAG_TREE, {"filter": {"per_page": -1}}, "reading the tag hierarchy")
        tree: dict[int, tuple[str, tuple[int, ...]]] = {}
        for t in (data.get("findTags") or {}).get("tags") or []:
            if isinstance(t, dict) and t.get("name") and str(t.get("id")).isdigit():
                parents = [str(p.get("id")) for p in t.get("parents") or [] if isinstance(p, dict)]
                tree[int(t["id"])] = (str(t["name"]), tuple(int(p) for p in parents if p.isdigit()))
        return tree

    def tag_parents(self) -> dict[str, list[str]]:
        """Every tag's name and its parents' names (one request)."""
        tree = self.tag_tree()
        return {name: [tree[p][0] for p in parents if p in tree] for name, parents in tree.values()}

    def version(self) -> str:
        data = self._call(_VERSION, {}, "reading the version")
        return (data.get("version") or {}).get("version") or "unknown"

    def own_url(self, url: str) -> str:
        """``url`` (from ``paths``) moved onto the connection the plugin was given.

        With ``external_host`` set, Stash builds ``paths.*`` from it
        [S:internal/api/server.go `BaseURLMiddleware`]: a public name, a proxy, an SSO
        portal the plugin may not reach. The path from ``/scene/`` on (and the query) is
        what Stash serves, so ask our own connection for it.
        """
        parts = urlsplit(stash_route(url, "/scene/"))
        return urlunsplit((self._base.scheme, self._base.netloc, parts.path, parts.query, ""))

    @property
    def own_base(self) -> str:
        """Stash's address as the plugin reaches it (scheme, host, port; never a login)."""
        netloc = self._base.netloc.rpartition("@")[2]
        return urlunsplit((self._base.scheme, netloc, "", "", ""))

    def image(self, url: str) -> tuple[bytes, str]:
        """Download a scene image through our own connection: (bytes, Content-Type).

        Through the requests Session, which sends the session's cookies (and takes a
        renewed one), follows a redirect and decodes every ``Content-Encoding`` it
        advertised (urllib3 asks for br or zstd only when it can decode them)."""
        own = self.own_url(url)
        self._replies.last = None
        with stash_errors("downloading a screenshot", self._last_reply, self._api.url):
            response = self._api.s.get(own, timeout=REQUEST_TIMEOUT_S, stream=True)
            content = _read_within(response, self.image_deadline_s)
        if response.status_code != 200 or _sent_to_login(response):
            raise _image_refused(response)
        return content, response.headers.get("Content-Type", "")
