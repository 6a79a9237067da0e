"""Talking to Plex through plexapi: list sections, read an item, edit, upload, scan.

Every call goes through :func:`plex.errors.plex_errors`, and quick in-call retries
for network blips go through tenacity (a reset connection is retried once after a
short pause; a refused connection or a 503 is not: the circuit breaker owns that).
"""

from __future__ import annotations

import functools
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus, urljoin, urlsplit

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random

from core.clock import ServerClock, response_hook
from core.errors import ConfigError, PlexNotFound, PlexUnavailable, TransientError
from core.http import fixed_environment_session
from plex.errors import not_plex_named, plex_errors
from plex.gate import PlexRequests
from validation.fields import PLEX_FIELDS, RATING, TAG_TYPES, rating_text

REQUEST_TIMEOUT_S = 15.0
LIST_PAGE_SIZE = 500
LIST_IN_FLIGHT = 4  # listing pages read at once
PRODUCT = "Stash2Plex"

blip_retry = retry(
    retry=retry_if_exception(lambda e: isinstance(e, TransientError) and not isinstance(e, PlexUnavailable)),
    stop=stop_after_attempt(2),
    wait=wait_random(0.1, 0.5),
    reraise=True,
)


@dataclass(frozen=True)
class SectionInfo:
    key: int
    title: str
    type: str
    stamp: str  # scannedAt: files appear, move and vanish in Plex only through scans
    locations: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlexItemState:
    """What Plex shows for one item now (from its detail view: full tag lists)."""

    rating_key: int
    section_id: int
    files: tuple[str, ...]
    fields: dict[str, str]
    tags: dict[str, tuple[str, ...]]
    locked: frozenset[str] = field(default_factory=frozenset)
    parts: tuple[tuple[str, int | None, int | None], ...] = ()  # (file, size, duration ms) per Part
    thumb: str = ""  # the poster's path on the server (``/library/metadata/<key>/thumb/<stamp>``)
    photos: dict[str, str] = field(default_factory=dict)  # actor (case-folded) → ``Role@thumb``, its photo URL
    rated_at: int | None = None  # ``lastRatedAt``: when the token's user (or we) last rated it


class PlexClient:
    """A connection to one Plex server (created lazily on first use)."""

    def __init__(self, url: str, token: str, client_id: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.url = url
        self._token = token
        self.client_id = client_id
        self.timeout = timeout
        self._server = None
        self.session: Any = None  # requests' Session plexapi's server sends through (ours: made when connecting)
        self._connecting = threading.Lock()  # threads share the client: one connection is made
        self.clock = ServerClock()  # Plex's clock, from its replies' Date headers
        self.base_url = url.rstrip("/")  # where requests go: plex_url after its redirects, once connected
        self._sections: dict[int, int] = {}  # ratingKey → library section, from the last read
        self.requests = PlexRequests()  # how many at Plex at once, how long Plex took (plex/gate.py)

    @property
    def server(self):
        if self._server is None:
            with self._connecting:
                if self._server is None:
                    self._server = self._connect()
        return self._server

    @blip_retry
    def _connect(self):
        import plexapi
        import requests
        from plexapi.server import PlexServer

        # In-place update: plexapi.server holds a reference to this very dict.
        plexapi.X_PLEX_IDENTIFIER = self.client_id
        plexapi.X_PLEX_PRODUCT = PRODUCT
        plexapi.BASE_HEADERS.update(plexapi.reset_base_headers())
        session = fixed_environment_session(requests.Session(), self.url)
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.hooks["response"].append(response_hook(self.clock, time.time))
        self.requests.install(session, adapter)
        session.hooks["response"].append(functools.partial(self._refuse_write_redirect, session))
        with plex_errors("connecting to Plex", self.url):
            base = self._final_url(session)
        with plex_errors("connecting to Plex", self.url), not_plex_named(self.url):
            server = PlexServer(base, self._token, session=session, timeout=self.timeout)
            if not server.machineIdentifier:  # a reply that parsed, but is not Plex's root MediaContainer
                raise ET.ParseError("no machineIdentifier in the answer at /")
        self.base_url, self.session = base, session
        return server

    @property
    def machine_id(self) -> str:
        """The server's ``machineIdentifier`` (a new server, or a new ``plex_url``, has another)."""
        return str(self.server.machineIdentifier)

    def now(self) -> float:
        """Plex's clock now (learned from its replies: connects first)."""
        self.server  # noqa: B018 (a reply to learn from)
        return self.clock.to_server(time.time())

    @property
    def redirected(self) -> bool:
        """Whether plex_url answered with a redirect when connecting (``base_url`` is then
        where it led: every request goes there)."""
        return self.base_url != self.url.rstrip("/")

    def _final_url(self, session) -> str:
        """plex_url after the redirects a reverse proxy in front of Plex answers (http to
        https, another name or path), followed once, here, by requests: writes never follow
        one (``_refuse_write_redirect``). Asked at ``/identity`` without the token, so the token goes
        only to where the redirects lead, never along the way. A redirect elsewhere (a login
        page) is refused before it is followed: its host may not even answer us."""
        import requests

        def same_place(response, *args, **kwargs):
            if not response.is_redirect:
                return
            target = urljoin(response.url, response.headers["Location"]).split("?")[0].rstrip("/")
            if not target.endswith("/identity"):
                response.close()
                raise ConfigError(
                    f"setting plex_url: {self.url} answered with a redirect to {target}, which is not the same "
                    "place on another address; set plex_url to the address of Plex itself"
                )

        # run at each hop, before it is followed; a request's hooks replace the session's (requests merge_hooks)
        hooks = {"response": [*session.hooks["response"], same_place]}
        try:
            response = session.get(
                self.url.rstrip("/") + "/identity", headers=_who_asks(), timeout=self.timeout, hooks=hooks
            )
        except requests.TooManyRedirects:
            raise ConfigError(
                f"setting plex_url: {self.url} redirects more than {session.max_redirects} times; is it Plex?"
            ) from None
        response.close()
        if not response.history:
            return self.url.rstrip("/")  # as given: requests normalises it (a host in lower case), no redirect
        return response.url.split("?")[0].rstrip("/")[: -len("/identity")]

    def auth_headers(self) -> dict[str, str]:
        """The headers of every request plexapi sends [plexapi server.py ``PlexServer._headers``]:
        who asks, and the token (a header, so it is never part of a URL a library might log)."""
        return {**_who_asks(), "X-Plex-Token": self._token}

    def version(self) -> str:
        return str(self.server.version)

    @blip_retry
    def sections(self) -> list[SectionInfo]:
        """Every library section, fresh from Plex (one request)."""
        with plex_errors("listing Plex libraries", self.url):
            root = self.server.query("/library/sections")
        return [
            SectionInfo(
                key=int(node.attrib["key"]),
                title=node.attrib.get("title", ""),
                type=node.attrib.get("type", ""),
                # Not updatedAt/contentChangedAt: our own edits move those, and every
                # index check would then list the whole section again.
                stamp=node.attrib.get("scannedAt", ""),
                locations=tuple(loc.attrib.get("path", "") for loc in node.iter("Location")),
            )
            for node in root.iter("Directory")
        ]

    def list_files(self, section_key: int, on_page=None) -> list[tuple[int, str, int | None, int | None]]:
        """(ratingKey, file, size, duration ms) for every Part in a section, paged.

        The first page says how many items there are; the other pages are then read up
        to ``LIST_IN_FLIGHT`` at a time (a library of 20,000 files is 40 pages: read one
        after another they kept the first write waiting for seconds). A library that grew
        meanwhile has its further pages read in another round. ``on_page(rows)`` is called with
        each page's rows as it arrives (from the reading threads).
        """

        def page(start: int) -> tuple[list[tuple[int, str, int | None, int | None]], int]:
            rows, total = self._list_rows(section_key, start)
            if on_page is not None:
                on_page(rows)
            return rows, total

        from concurrent.futures import ThreadPoolExecutor

        rows, total = page(0)
        start = LIST_PAGE_SIZE
        while start < total:
            starts = range(start, total, LIST_PAGE_SIZE)
            with ThreadPoolExecutor(max_workers=LIST_IN_FLIGHT, thread_name_prefix="plex-list") as pool:
                pages = list(pool.map(page, starts))
            for found, _ in pages:
                rows.extend(found)
            total, start = pages[-1][1], starts[-1] + LIST_PAGE_SIZE  # the count as the last page saw it
        return rows

    @blip_retry
    def _list_rows(self, section_key: int, start: int) -> tuple[list[tuple[int, str, int | None, int | None]], int]:
        """One page of the listing as rows (the XML is not kept), and the section's item count."""
        headers = {"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": str(LIST_PAGE_SIZE)}
        with plex_errors(f"listing Plex library {section_key}", self.url):
            root = self.server.query(f"/library/sections/{section_key}/all?type=1", headers=headers)
        rows = []
        for video in root.iter("Video"):
            key = int(video.attrib["ratingKey"])
            for part in video.iter("Part"):
                rows.append(
                    (
                        key,
                        part.attrib.get("file", ""),
                        as_int(part.attrib.get("size")),
                        as_int(part.attrib.get("duration") or video.attrib.get("duration")),
                    )
                )
        return rows, as_int(root.attrib.get("totalSize")) or 0

    def item_state(self, rating_key: int) -> PlexItemState:
        """Read an item's detail view (one request); raises PlexNotFound when gone."""
        state = self.item_states([rating_key]).get(int(rating_key))
        if state is None:
            raise PlexNotFound(f"Plex has no item {rating_key}")
        return state

    @blip_retry
    def item_states(self, rating_keys: list[int]) -> dict[int, PlexItemState]:
        """Detail views of many items in one request, read straight from the XML.

        The request plexapi's ``fetchItems`` sends (``GET /library/metadata/a,b,c``), but no
        plexapi objects are built: building them (plexapi base.py ``findItems`` /
        ``_buildItem``, an object per tag, media and part) costs more CPU than the request,
        and ``all`` and ``reconcile`` read every item. Only the items asked for are kept
        (a reply is keyed by its own ratingKey); items Plex no longer has are absent.

        One item asked for and another answered is an error: a proxy or cache in front of
        Plex can answer so, and writing to it would put this scene's data on another video.
        """
        asked = {int(k) for k in rating_keys}
        if not asked:
            return {}
        from plexapi.exceptions import NotFound

        with plex_errors(f"reading {len(asked)} Plex items", self.url):
            try:
                root = self.server.query("/library/metadata/" + ",".join(map(str, sorted(asked))))
            except NotFound:
                return self._split_read(sorted(asked))
        states: dict[int, PlexItemState] = {}
        for video in root:
            key = as_int(video.attrib.get("ratingKey"))
            if key in asked and key not in states:
                states[key] = self._remember(_state_from_xml(video, as_int(root.attrib.get("librarySectionID"))))
        if len(asked) == 1 and not states and len(root):
            raise TransientError(
                f"Plex answered item {root[0].attrib.get('ratingKey')} when asked for item {min(asked)} "
                "(is a proxy or cache in front of Plex?); nothing was written"
            )
        return states

    def _split_read(self, keys: list[int]) -> dict[int, PlexItemState]:
        """A batch answered 404: one missing item may be enough for that, so the halves are
        read again until the missing ones are found (a few requests per missing item);
        only a single item's 404 says that item is gone."""
        if len(keys) == 1:
            return {}
        half = len(keys) // 2
        return {**self.item_states(keys[:half]), **self.item_states(keys[half:])}

    def _remember(self, state: PlexItemState) -> PlexItemState:
        self._sections[state.rating_key] = state.section_id  # where an edit of this item is sent
        return state

    def edit_target_length(self, state: PlexItemState, params: dict[str, Any]) -> int:
        """Bytes of the request target of an edit as it goes on the wire: plex_url's path
        (a reverse proxy's prefix) and ``_edit_target``, with ``[`` and ``]`` percent-encoded
        (urllib3 encodes them in a query: util/url.py ``_encode_invalid_chars``)."""
        target = _edit_target(state.section_id, state.rating_key, params)
        return len(urlsplit(self.base_url).path) + len(target) + 2 * (target.count("[") + target.count("]"))

    # The writes send exactly what plexapi's item methods send, without first building
    # the item's plexapi object: that needs the item's detail view as objects, which
    # costs more CPU than the write itself (see ``item_states``).
    @blip_retry
    def edit(self, rating_key: int, params: dict[str, Any]) -> None:
        """One PUT with every field and tag change of the item."""
        section = self._section_of(rating_key)
        self._write(f"editing Plex item {rating_key}", "PUT", _edit_target(section, rating_key, params))

    def _write(self, what: str, method: str, key: str, body: bytes | None = None) -> None:
        """``PlexServer.query(key, method=session.put/post, data=body)``; a redirect is refused
        (``_refuse_write_redirect``). The reply's body is not used (PMS answers a poster's
        choice with a bare path, which plexapi media.py ``select`` ignores too)."""
        with plex_errors(what, self.url):
            server = self.server
            try:
                server.query(key, method=getattr(self.session, method.lower()), data=body)
            except ET.ParseError:
                pass

    def _refuse_write_redirect(self, session, response, *args, **kwargs):
        """A response hook on ``session``: a write is done only when Plex itself answered it.
        Through a 301 or 302, requests sends a POST again as a GET without its body [requests
        sessions.py ``SessionRedirectMixin.rebuild_method``], which a poster URL answers 200:
        plexapi would report an upload that never happened. A redirect answered to a write
        (hooks run before requests follows it) is an error that names where it leads, and the
        next request connects again (``_final_url``), unless another writer has already done so."""
        if not (response.is_redirect and response.request.method in ("PUT", "POST")):
            return response
        response.close()
        with self._connecting:
            if self.session is session:
                self._server = None
        raise TransientError(
            f"Plex's address answered a write with a redirect ({response.status_code}) to "
            f"{_where(response, urlsplit(self.base_url).path)}; nothing was written there. Stash2Plex connects "
            "again and follows it once; set plex_url to that address to skip the redirect"
        )

    @blip_retry
    def rate(self, rating_key: int, rating: float | None) -> None:
        """The token user's rating (0-10); None clears it [plexapi mixins/rating.py ``rate``]."""
        value = -1 if rating is None else rating
        if not 0 <= value <= 10 and value != -1:
            raise ValueError(f"a Plex rating is 0-10, not {rating}")
        key = f"/:/rate?key={int(rating_key)}&identifier=com.plexapp.plugins.library&rating={value}"
        self._write(f"rating Plex item {rating_key}", "PUT", key)

    @blip_retry
    def upload_poster(self, rating_key: int, image: bytes) -> None:
        """[plexapi mixins/resources.py ``uploadPoster(filepath=<bytes>)``]"""
        key = f"/library/metadata/{int(rating_key)}/posters"
        self._write(f"uploading the poster of Plex item {rating_key}", "POST", key, image)

    @blip_retry
    def posters(self, rating_key: int) -> list[tuple[str, bool]]:
        """The item's posters as (ratingKey, selected), in Plex's order [plexapi mixins.py
        ``PosterMixin.posters``: ``GET /library/metadata/{id}/posters``, one ``Photo`` each].
        An upload is ``upload://posters/<sha1 of its bytes>``; Plex's own are ``media://``
        (a frame of the video) or ``metadata://`` (an agent's)."""
        with plex_errors(f"reading the posters of Plex item {rating_key}", self.url):
            root = self.server.query(f"/library/metadata/{int(rating_key)}/posters")
        return [(p.attrib.get("ratingKey", ""), p.attrib.get("selected") == "1") for p in root.iter("Photo")]

    @blip_retry
    def select_poster(self, rating_key: int, poster: str) -> None:
        """Show one of the item's posters [plexapi media.py ``BaseResource.select``: ``PUT
        /library/metadata/{id}/poster?url=<quote_plus(ratingKey)>``; PMS answers with a bare
        path, which plexapi ignores, and so does this]."""
        key = f"/library/metadata/{int(rating_key)}/poster?url={quote_plus(poster)}"
        self._write(f"choosing the poster of Plex item {rating_key}", "PUT", key)

    def _section_of(self, rating_key: int) -> int:
        section = self._sections.get(rating_key)
        return section if section is not None else self.item_state(rating_key).section_id

    @blip_retry
    def scan_folder(self, section_key: int, folder: str) -> None:
        """Ask Plex to scan one folder of a section (returns at once; Plex scans in the background)."""
        with plex_errors(f"asking Plex to scan {folder}", self.url):
            self.server.library.sectionByID(int(section_key)).update(path=folder)

    @blip_retry
    def thumbnail(self, rating_key: int, width: int = 240, height: int = 135) -> bytes:
        """The item's poster, scaled by Plex's photo transcoder (a PNG): one detail read for its
        current ``thumb``, one image request [plexapi server.py ``transcodeImage``: the same
        path and parameters, sent with the token as a header, never in a URL we hand out].
        Raises PlexNotFound when the item or its poster is gone."""
        from plexapi.utils import joinArgs

        state = self.item_state(rating_key)
        self.forget(rating_key)
        if not state.thumb:
            raise PlexNotFound(f"Plex item {rating_key} has no poster")
        params = {"url": state.thumb, "height": height, "width": width, "minSize": 1, "upscale": 1, "format": "png"}
        url = f"{self.base_url}/photo/:/transcode{joinArgs(params)}"  # connected: item_state read
        with plex_errors(f"reading the poster of Plex item {rating_key}", self.url):
            response = self.session.get(url, headers=self.auth_headers(), timeout=self.timeout)
            response.raise_for_status()
        return response.content

    def forget(self, rating_key: int) -> None:
        self._sections.pop(rating_key, None)


def _tag_element(tag_type: str) -> str:
    """A tag type's element in a detail view [plexapi video.py ``Movie._loadData``: Role is an actor]."""
    return "Role" if tag_type == "actor" else tag_type.capitalize()


def _fields_of(attrs: dict[str, str]) -> dict[str, str]:
    """Every synced Plex field (validation/fields.py) as the plans compare it: a Video's
    attribute as it is, but for the three Plex shows differently from how it is written."""
    fields = {key: attrs.get(key, "") for key in PLEX_FIELDS}
    fields["originallyAvailableAt"] = fields["originallyAvailableAt"][:10]
    fields["titleSort"] = attrs.get("titleSort", attrs.get("title", ""))  # plexapi: titleSort defaults to title
    fields[RATING] = rating_text(float(attrs[RATING])) if attrs.get(RATING) else ""
    return fields


def _state_from_xml(video, section_id: int | None) -> PlexItemState:
    """A ``PlexItemState`` from one ``<Video>`` of a detail view (the attributes plexapi reads)."""
    attrs = video.attrib
    parts = [part.attrib for media in video.iter("Media") for part in media.iter("Part")]
    return PlexItemState(
        rating_key=int(attrs["ratingKey"]),
        section_id=as_int(attrs.get("librarySectionID")) or section_id or 0,
        files=tuple(p.get("file", "") for p in parts),
        fields=_fields_of(attrs),
        tags={t: tuple(e.attrib.get("tag", "") for e in video.findall(_tag_element(t))) for t in TAG_TYPES},
        locked=frozenset(f.attrib.get("name", "") for f in video.findall("Field") if f.attrib.get("locked") == "1"),
        parts=tuple(
            (p.get("file", ""), as_int(p.get("size")), as_int(p.get("duration") or attrs.get("duration")))
            for p in parts
        ),
        thumb=attrs.get("thumb", ""),
        rated_at=as_int(attrs.get("lastRatedAt")),
        photos={
            role.attrib.get("tag", "").casefold(): role.attrib["thumb"]
            for role in video.findall("Role")
            if role.attrib.get("thumb")
        },
    )


def _edit_target(section_id: int, rating_key: int, params: dict[str, Any]) -> str:
    """The request target of ``item.edit(**params)`` for a movie: ``PUT
    /library/sections/<id>/all?<params>&type=1&id=<ratingKey>`` [plexapi base.py
    ``PlexPartialObject._edit`` adds ``type``, library.py ``LibrarySection._edit`` adds
    ``id`` and joins with utils.py ``joinArgs``]."""
    from plexapi.utils import joinArgs

    args = {**params, "type": 1, "id": str(int(rating_key))}
    return f"/library/sections/{int(section_id)}/all{joinArgs(args)}"


def _where(response, base_path: str) -> str:
    """The address a redirect leads to: its base when it keeps the request's path (after
    plex_url's own path), never the query (the edit's values)."""
    target = urlsplit(urljoin(response.url, response.headers.get("Location", "")))
    path, asked = target.path, urlsplit(response.url).path[len(base_path.rstrip("/")) :]
    if path.endswith(asked):
        path = path[: -len(asked)]
    return f"{target.scheme}://{target.netloc}{path}"


def _who_asks() -> dict[str, str]:
    """plexapi's headers naming our client (``plexapi.BASE_HEADERS``, set when connecting)."""
    import plexapi

    return {k: v for k, v in plexapi.BASE_HEADERS.items() if v is not None}


def as_int(value: Any) -> int | None:
    """A number Plex sends, as an int (None when absent or not one): PMS sends ids as
    strings and sometimes ints (Tautulli casts ``sectionID``)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
