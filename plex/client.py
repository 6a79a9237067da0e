"""Talking to Plex through plexapi: list sections, read an item, edit, upload, scan.

Every call goes through :func:`plex.errors.plex_errors`, and quick in-call retries
for network blips go through tenacity (a reset connection is retried once after a
short pause; a refused connection or a 503 is not: the circuit breaker owns that).
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random

from core.errors import PlexUnavailable, TransientError
from core.http import fixed_environment_session
from plex.errors import not_plex_named, plex_errors

REQUEST_TIMEOUT_S = 15.0
LIST_PAGE_SIZE = 500
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


RATING = "userRating"  # written through plexapi's rate(), not edit()


def rating_text(value: float | None) -> str:
    """A Plex user rating (0-10) as the text plans compare; empty for none."""
    return "" if value is None else f"{float(value):.1f}"


def _date_text(value: Any) -> str:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.strftime("%Y-%m-%d")
    return str(value or "")


class PlexClient:
    """A connection to one Plex server (created lazily on first use)."""

    def __init__(self, url: str, token: str, client_id: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.url = url
        self._token = token
        self.client_id = client_id
        self.timeout = timeout
        self._server = None
        self._items: dict[int, Any] = {}

    @property
    def server(self):
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
        with plex_errors("connecting to Plex", self.url), not_plex_named(self.url):
            server = PlexServer(self.url, self._token, session=session, timeout=self.timeout)
            if not server.machineIdentifier:  # a reply that parsed, but is not Plex's root MediaContainer
                raise ET.ParseError("no machineIdentifier in the answer at /")
            return server

    def version(self) -> str:
        return str(self.server.version)

    @blip_retry
    def sections(self) -> list[SectionInfo]:
        """Every library section, fresh from Plex (one request)."""
        with plex_errors("listing Plex libraries", self.url):
            root = self.server.query("/library/sections")
        found = []
        for node in root.iter("Directory"):
            # Not updatedAt/contentChangedAt: our own edits move those, and every
            # index check would then list the whole section again.
            stamp = node.attrib.get("scannedAt", "")
            found.append(
                SectionInfo(
                    key=int(node.attrib["key"]),
                    title=node.attrib.get("title", ""),
                    type=node.attrib.get("type", ""),
                    stamp=stamp,
                    locations=tuple(loc.attrib.get("path", "") for loc in node.iter("Location")),
                )
            )
        return found

    def list_files(self, section_key: int) -> list[tuple[int, str, int | None, int | None]]:
        """(ratingKey, file, size, duration ms) for every Part in a section, paged."""
        rows: list[tuple[int, str, int | None, int | None]] = []
        start = 0
        while True:
            root = self._list_page(section_key, start)
            for video in root.iter("Video"):
                key = int(video.attrib["ratingKey"])
                for part in video.iter("Part"):
                    rows.append(
                        (
                            key,
                            part.attrib.get("file", ""),
                            _int(part.attrib.get("size")),
                            _int(part.attrib.get("duration") or video.attrib.get("duration")),
                        )
                    )
            total = _int(root.attrib.get("totalSize")) or 0
            start += LIST_PAGE_SIZE
            if start >= total:
                return rows

    @blip_retry
    def _list_page(self, section_key: int, start: int):
        headers = {"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": str(LIST_PAGE_SIZE)}
        with plex_errors(f"listing Plex library {section_key}", self.url):
            return self.server.query(f"/library/sections/{section_key}/all?type=1", headers=headers)

    @blip_retry
    def item_state(self, rating_key: int) -> PlexItemState:
        """Read an item's detail view (one request); raises PlexNotFound when gone.

        What came back must be the item asked for: a proxy or cache in front of Plex can
        answer with another item (contracts/plex.md §10.4), and writing to it would put
        this scene's data on another video.
        """
        with plex_errors(f"reading Plex item {rating_key}", self.url):
            item = self.server.fetchItem(int(rating_key))
        if str(item.ratingKey) != str(int(rating_key)):
            raise TransientError(
                f"Plex answered item {item.ratingKey} when asked for item {rating_key} "
                "(is a proxy or cache in front of Plex?); nothing was written"
            )
        return self._remember(item)

    @blip_retry
    def item_states(self, rating_keys: list[int]) -> dict[int, PlexItemState]:
        """Detail views of many items in one request; items Plex no longer has are absent."""
        if not rating_keys:
            return {}
        with plex_errors(f"reading {len(rating_keys)} Plex items", self.url):
            try:
                items = self.server.fetchItems([int(k) for k in rating_keys])
            except Exception as exc:
                from plexapi.exceptions import NotFound

                if isinstance(exc, NotFound):
                    return {}
                raise
            asked = {int(k) for k in rating_keys}
            # Only the items asked for, once each (a reply is keyed by its own ratingKey).
            fresh = {int(i.ratingKey): i for i in reversed(items) if int(i.ratingKey) in asked}
            states = [self._remember(item) for item in fresh.values()]
        return {state.rating_key: state for state in states}

    @blip_retry
    def read_states(self, rating_keys: list[int]) -> dict[int, PlexItemState]:
        """Detail views of many items in one request, read straight from the XML.

        The same request as ``item_states`` (``GET /library/metadata/a,b,c``, plexapi's
        ``fetchItems``), but no plexapi objects are built: building them (plexapi
        base.py ``findItems``/``_buildItem`` for every tag) costs about 25 ms an item,
        far more than the request, and ``reconcile`` reads every linked item. Only the
        items asked for are kept (a reply is keyed by its own ratingKey); items Plex no
        longer has are absent.
        """
        asked = {int(k) for k in rating_keys}
        if not asked:
            return {}
        from plexapi.exceptions import NotFound

        with plex_errors(f"reading {len(asked)} Plex items"):
            try:
                root = self.server.query("/library/metadata/" + ",".join(map(str, sorted(asked))))
            except NotFound:
                return {}
        states = {}
        for video in root:
            key = _int(video.attrib.get("ratingKey"))
            if key in asked and key not in states:
                states[key] = _state_from_xml(video, _int(root.attrib.get("librarySectionID")))
        return states

    def _remember(self, item) -> PlexItemState:
        item._autoReload = False  # the detail view is complete; no hidden extra GETs
        state = PlexItemState(
            rating_key=int(item.ratingKey),
            section_id=int(item.librarySectionID),
            files=tuple(part.file for part in item.iterParts()),
            fields={
                "title": item.title or "",
                "summary": item.summary or "",
                "studio": item.studio or "",
                "originallyAvailableAt": _date_text(item.originallyAvailableAt),
                "titleSort": item.titleSort or "",
                "tagline": item.tagline or "",
                "contentRating": item.contentRating or "",
                RATING: rating_text(item.userRating),
            },
            tags={
                "genre": tuple(t.tag for t in item.genres),
                "actor": tuple(t.tag for t in item.roles),
                "collection": tuple(t.tag for t in item.collections),
                "label": tuple(t.tag for t in item.labels),
                "director": tuple(t.tag for t in item.directors),
            },
            locked=frozenset(f.name for f in item.fields if f.locked),
            parts=tuple(
                (part.file, _int(part.size), _int(getattr(part, "duration", None) or item.duration))
                for part in item.iterParts()
            ),
        )
        self._items[state.rating_key] = item
        return state

    @staticmethod
    def edit_target_length(state: PlexItemState, params: dict[str, Any]) -> int:
        """Bytes of the request target plexapi sends for ``item.edit(**params)``:
        ``PUT /library/sections/<id>/all?<args>`` with ``id`` and ``type`` added
        [plexapi library.py `LibrarySection._edit`, utils.py `joinArgs`]."""
        from plexapi.utils import joinArgs

        args = {**params, "id": str(state.rating_key), "type": 1}
        return len(f"/library/sections/{state.section_id}/all") + len(joinArgs(args).encode())

    @blip_retry
    def edit(self, rating_key: int, params: dict[str, Any]) -> None:
        """One PUT with every field and tag change of the item."""
        with plex_errors(f"editing Plex item {rating_key}", self.url):
            item = self._items.get(rating_key) or self.server.fetchItem(int(rating_key))
            item.edit(**params)

    @blip_retry
    def rate(self, rating_key: int, rating: float | None) -> None:
        """The token user's rating (0-10) through plexapi's own ``rate()``; None clears it."""
        with plex_errors(f"rating Plex item {rating_key}"):
            item = self._items.get(rating_key) or self.server.fetchItem(int(rating_key))
            item.rate(rating)

    @blip_retry
    def upload_poster(self, rating_key: int, image: bytes) -> None:
        with plex_errors(f"uploading the poster of Plex item {rating_key}", self.url):
            item = self._items.get(rating_key) or self.server.fetchItem(int(rating_key))
            item.uploadPoster(filepath=image)

    @blip_retry
    def scan_folder(self, section_key: int, folder: str) -> None:
        """Ask Plex to scan one folder of a section (returns at once; Plex scans in the background)."""
        with plex_errors(f"asking Plex to scan {folder}", self.url):
            self.server.library.sectionByID(int(section_key)).update(path=folder)

    def forget(self, rating_key: int) -> None:
        self._items.pop(rating_key, None)


def _state_from_xml(video, section_id: int | None) -> PlexItemState:
    """A ``PlexItemState`` from one ``<Video>`` of a detail view (the attributes plexapi reads)."""
    attrs = video.attrib
    parts = [part.attrib for media in video.iter("Media") for part in media.iter("Part")]
    return PlexItemState(
        rating_key=int(attrs["ratingKey"]),
        section_id=_int(attrs.get("librarySectionID")) or section_id or 0,
        files=tuple(p.get("file", "") for p in parts),
        fields={
            "title": attrs.get("title", ""),
            "summary": attrs.get("summary", ""),
            "studio": attrs.get("studio", ""),
            "originallyAvailableAt": attrs.get("originallyAvailableAt", "")[:10],
            "titleSort": attrs.get("titleSort", attrs.get("title", "")),  # plexapi: titleSort defaults to title
            "tagline": attrs.get("tagline", ""),
            "contentRating": attrs.get("contentRating", ""),
            RATING: rating_text(float(attrs["userRating"])) if attrs.get("userRating") else "",
        },
        tags={
            "genre": tuple(t.attrib.get("tag", "") for t in video.findall("Genre")),
            "actor": tuple(t.attrib.get("tag", "") for t in video.findall("Role")),
            "collection": tuple(t.attrib.get("tag", "") for t in video.findall("Collection")),
            "label": tuple(t.attrib.get("tag", "") for t in video.findall("Label")),
            "director": tuple(t.attrib.get("tag", "") for t in video.findall("Director")),
        },
        locked=frozenset(f.attrib.get("name", "") for f in video.findall("Field") if f.attrib.get("locked") == "1"),
        parts=tuple(
            (p.get("file", ""), _int(p.get("size")), _int(p.get("duration") or attrs.get("duration"))) for p in parts
        ),
    )


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
