"""A Plex Media Server emulator that real python-plexapi (4.18) can talk to.

It is a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, daemon threads)
modelled on plexapi's own code (server.py ``PlexServer.query`` for status codes,
base.py/library.py for the XML it parses, mixins/edit.py for edits): XML replies, token in header or
query, exact paging with ``totalSize``, the PUT edit parameter language,
poster uploads, scans, and fault switches (latency, 401, 503, stall, refused
connections). Every request is recorded for tests to assert on.

Choices where real PMS behaviour has not been observed:

* tag edits: ``tag_semantics="replace"`` (an indexed list replaces that tag type)
  or ``"append"`` (indexed names are added); removals (``-=``) apply afterwards;
* list views carry at most 2 genres, 1 director, 1 writer, 2 countries, 3 roles,
  and no collections, labels or producers;
* ``title=`` filtering is a case-insensitive substring match;
* a section refresh with ``path=`` makes scheduled items under that folder appear
  at once; one without ``path`` covers the whole section;
* ``PUT /library/metadata/{id}/refresh`` (and ``sections/{id}/refresh?force=1``)
  reverts *unlocked* ``title``/``summary`` to the values the item was added with;
* ``tagging.text`` (a role) is stored on the item's tag; ``tag.thumb`` (a photo) on the tag
  itself, one per tag for the whole library, the last one written winning, as plexapi's
  maintainers found (python-plexapi PR #510: the same actor has the same ``id`` in every
  item, and ``addActor`` "can also be used to edit any existing actor's thumb"; the contract,
  ``shared/contracts/plex.md`` §4.3 "Actors / roles"). PMS keeps the URL as given and shows it
  as ``Role@thumb`` (an nfo agent's ``http://localhost/…`` shown as is:
  gboudreau/XBMCnfoMoviesImporter.bundle#106), and fetches it itself: each photo written is
  fetched once by an HTTP GET that follows redirects, recorded in ``photo_fetches`` (a
  success is a 200 with an ``image/*`` body; a login page is not);
* tag identity ignores case: PMS keeps one tag row per (type, name) and the row's
  spelling is the first one written, so a case-only change does not change what an
  item shows, and a removal of either spelling removes the tag (what users of PMS report);
* a request line (method, target and version) longer than ``max_url_bytes`` is answered
  414. The default, 8,190 bytes, is what the reverse proxies in front of PMS allow by
  default: Apache's ``LimitRequestLine`` (8190; server/protocol.c ``read_request_line``)
  and nginx's ``large_client_header_buffers`` (4 × 8k: the line and its CRLF in one 8 KB
  buffer; src/http/ngx_http_request.c answers ``NGX_HTTP_REQUEST_URI_TOO_LARGE``). PMS's
  own limit is not documented, and is not lower than that in what users report;
* ``redirect`` = (status, base URL) answers every request with that status and
  ``Location: <base URL><request target>``, as a reverse proxy in front of PMS that
  sends clients elsewhere does (nginx ``return 301 https://host$request_uri;``);
* a metadata GET for several ids (``/library/metadata/1,2,3``) answers 404 when any of
  them is unknown (``strict_batches``, the default; False: it lists the known ones and
  answers 404 only when none is). PMS's source is closed and both have been seen
  described; the client must read either right, and the default is the harder one;
* ``swap_replies`` makes a metadata read answer another item (a misbehaving proxy or
  cache in front of PMS); ``move_file``/``readd_item`` play a rescan that moved
  a file (same ratingKey, new path) or re-added an item under a new ratingKey.

Run ``python -m tests.emulators.plex_emulator`` to serve one by hand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import re
import socket
import struct
import threading
import time
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Self
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from tests.emulators import plex_history, plex_notify, plex_sessions
from tests.emulators.serving import EmulatorServer, TrackedHandler

MACHINE_ID = "5f1c0ffee0ddba11ab1ec0de5eed1dea11e1ba5e"
PMS_VERSION = "1.41.3.9314-a0bfb8370"
XML_TYPE = "text/xml;charset=utf-8"
HTML_TYPE = "text/html"
HTML_401 = (
    "<html><head><script>window.location = window.location.href.match("
    "/(^.+\\/)[^\\/]*$/)[1] + 'web/index.html';</script><title>Unauthorized</title>"
    "</head><body><h1>401 Unauthorized</h1></body></html>"
)
HTML_404 = "<html><head><title>Not Found</title></head><body><h1>404 Not Found</h1></body></html>"
HTML_400 = "<html><head><title>Bad Request</title></head><body><h1>400 Bad Request</h1></body></html>"
HTML_500 = (
    "<html><head><title>Internal Server Error</title></head><body><h1>500 Internal Server Error</h1></body></html>"
)
HTML_WEB = (  # Plex Web's index.html: HTML, not well-formed XML (void <meta>, <link> tags)
    '<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="favicon.ico">'
    "<title>Plex</title></head><body><div id='plex'></div></body></html>"
)
HTML_414 = (
    "<html><head><title>414 Request-URI Too Large</title></head><body><h1>414 Request-URI Too Large</h1></body></html>"
)
HTML_301 = (  # nginx's page for a ``return 301``
    "<html><head><title>301 Moved Permanently</title></head><body><center><h1>301 Moved Permanently</h1>"
    "</center><hr><center>nginx</center></body></html>"
)
HTML_503 = "<html><head><title>Service Unavailable</title></head><body><h1>503 Service Unavailable</h1></body></html>"

# edit prefix -> XML element; the filter key equals the prefix ("actor=12" on Role).
TAG_TYPES = {
    "genre": "Genre",
    "country": "Country",
    "collection": "Collection",
    "label": "Label",
    "director": "Director",
    "writer": "Writer",
    "actor": "Role",
    "producer": "Producer",
}
LIST_TAG_CAPS = {"genre": 2, "country": 2, "director": 1, "writer": 1, "actor": 3}
EDITABLE_FIELDS = (
    "title",
    "titleSort",
    "summary",
    "tagline",
    "studio",
    "originallyAvailableAt",
    "contentRating",
    "originalTitle",
    "editionTitle",
    "year",
    "userRating",
    "rating",
    "audienceRating",
    "addedAt",
)
LOCKABLE = set(EDITABLE_FIELDS) | set(TAG_TYPES) | {"thumb", "art", "theme", "clearLogo", "squareArt"}
IGNORED_EDIT_KEYS = {"id", "type", "includeExternalMedia"}
REVERTED_ON_REFRESH = ("title", "summary")
_TAG_KEY = re.compile(r"^(\w+)\[(\d*)\]\.(.+)$")


class EditError(ValueError):
    """An edit parameter PMS would reject with 400."""


# ----------------------------------------------------------------- requests
@dataclass(frozen=True)
class Request:
    """One decoded HTTP request: path and query keys/values fully percent-decoded."""

    method: str
    path: str
    pairs: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes

    @property
    def query(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for k, v in self.pairs:
            out.setdefault(k, []).append(v)
        return out

    def param(self, name: str) -> str | None:
        """First query value for ``name`` or None."""
        return next((v for k, v in self.pairs if k == name), None)

    def plex_value(self, name: str) -> str | None:
        """An ``X-Plex-*`` value from the headers, else from the query (PMS accepts both)."""
        lowered = {k.lower(): v for k, v in self.headers.items()}
        return lowered.get(name.lower(), self.param(name))


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = XML_TYPE
    headers: dict[str, str] = field(default_factory=dict)


def parse_request(handler: BaseHTTPRequestHandler) -> Request:
    """Decode the handler's request line, headers and body (keys decoded too)."""
    parts = urlsplit(handler.path)
    length = int(handler.headers.get("Content-Length") or 0)
    body = handler.rfile.read(length) if length else b""
    return Request(
        method=handler.command,
        path=unquote(parts.path),
        pairs=parse_qsl(parts.query, keep_blank_values=True),
        headers=dict(handler.headers.items()),
        body=body,
    )


def xml_reply(elem: ET.Element, headers: dict[str, str] | None = None) -> Reply:
    body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(elem, encoding="utf-8")
    return Reply(200, body, XML_TYPE, headers or {})


def html_reply(status: int, html: str) -> Reply:
    return Reply(status, html.encode(), HTML_TYPE)


# -------------------------------------------------------------------- state
@dataclass
class Section:
    key: int
    title: str
    type: str
    locations: list[str]
    stamp: int
    updated_at: int = 0
    scanned_at: int = 0
    content_changed_at: int = 1
    agent: str = "tv.plex.agents.none"  # none: processing ends at timeline state 1 (plex_notify)

    def __post_init__(self) -> None:
        self.updated_at = self.scanned_at = self.stamp

    def touch(self, now: int) -> None:
        """Content changed: strictly advance updatedAt and contentChangedAt."""
        self.updated_at = max(now, self.updated_at + 1)
        self.content_changed_at += 1

    def scanned(self, now: int) -> None:
        """A scan found or lost files (in real Plex, items come and go only by scans)."""
        self.scanned_at = max(now, self.scanned_at + 1)
        self.touch(now)


@dataclass
class Item:
    rating_key: int
    section: int
    file: str
    size: int
    duration_ms: int
    fields: dict[str, Any]
    initial: dict[str, Any]
    tags: dict[str, list[dict]]
    added_at: int
    updated_at: int
    locks: set[str] = field(default_factory=set)
    images: dict[str, list[dict]] = field(default_factory=lambda: {"posters": [], "arts": []})
    uploads: int = 0
    hashes: dict[str, str | None] = field(default_factory=lambda: {"posters": None, "arts": None})
    thumb: str = ""
    art: str = ""
    rated_at: int | None = None

    def snapshot(self) -> dict:
        return {
            "ratingKey": self.rating_key,
            "section": self.section,
            "files": [self.file],
            "fields": dict(self.fields),
            "locks": set(self.locks),
            "tags": {t: [x["tag"] for x in v] for t, v in self.tags.items()},
            "actors": [dict(x) for x in self.tags["actor"]],
            "uploads": self.uploads,
            "poster_hash": self.hashes["posters"],
            "art_hash": self.hashes["arts"],
            "thumb": self.thumb,
            "art": self.art,
            "lastRatedAt": self.rated_at,
        }


@dataclass
class Scheduled:
    due: float
    rating_key: int
    section: int
    file: str
    kwargs: dict


def _norm_tags(values: Any) -> list[dict]:
    return [dict(v) if isinstance(v, dict) else {"tag": str(v)} for v in (values or [])]


def _covers(scan_path: str | None, file: str) -> bool:
    """True if a scan of ``scan_path`` (a folder, or the file itself) would find ``file``."""
    if scan_path is None:
        return True
    root = scan_path.rstrip("/") or "/"
    folder = posixpath.dirname(file)
    return file == root or folder == root or folder.startswith(root.rstrip("/") + "/")


# ------------------------------------------------------------------- edits
@dataclass
class EditPlan:
    """An edit PUT's parameters, grouped by what they do."""

    values: dict[str, str] = field(default_factory=dict)
    locks: dict[str, bool] = field(default_factory=dict)
    slots: dict[str, dict[int, dict]] = field(default_factory=dict)
    removals: dict[str, list[str]] = field(default_factory=dict)
    clears: set[str] = field(default_factory=set)


def parse_edit(pairs: list[tuple[str, str]]) -> EditPlan:
    """Turn decoded ``(key, value)`` pairs into an EditPlan; EditError on unknown keys."""
    plan = EditPlan()
    for key, value in pairs:
        if key in IGNORED_EDIT_KEYS or key.startswith("X-Plex-"):
            continue
        match = _TAG_KEY.match(key)
        if match:
            _parse_tag_param(plan, *match.groups(), value)
        elif key.endswith(".value") and key[:-6] in EDITABLE_FIELDS:
            plan.values[key[:-6]] = value
        elif key.endswith(".locked") and key[:-7] in LOCKABLE:
            plan.locks[key[:-7]] = value == "1"
        else:
            raise EditError(key)
    return plan


def _parse_tag_param(plan: EditPlan, ttype: str, idx: str, attr: str, value: str) -> None:
    if ttype not in TAG_TYPES:
        raise EditError(ttype)
    if idx == "" and attr == "tag.tag-":
        # value arrived as quote(name1),quote(name2): split first, then decode each
        plan.removals.setdefault(ttype, []).extend(unquote(n) for n in value.split(",") if n)
    elif idx == "" and attr == "tag":
        plan.clears.add(ttype)
    elif idx and attr in ("tag.tag", "tagging.text", "tag.thumb"):
        name = {"tag.tag": "tag", "tagging.text": "role", "tag.thumb": "thumb"}[attr]
        plan.slots.setdefault(ttype, {}).setdefault(int(idx), {})[name] = value
    else:
        raise EditError(f"{ttype}[{idx}].{attr}")


def apply_edit(item: Item, plan: EditPlan, semantics: str) -> None:
    """Apply ``plan`` to ``item``: values, locks, clears, indexed tags, then removals."""
    item.fields.update(plan.values)
    for name, locked in plan.locks.items():
        (item.locks.add if locked else item.locks.discard)(name)
    for ttype in plan.clears:
        item.tags[ttype] = []
    for ttype, slots in plan.slots.items():
        listed = [slots[i] for i in sorted(slots) if slots[i].get("tag")]
        base = [] if semantics == "replace" else item.tags[ttype]
        item.tags[ttype] = _merge_tags(base, listed)
    for ttype, names in plan.removals.items():
        gone = {n.lower() for n in names}
        item.tags[ttype] = [t for t in item.tags[ttype] if t["tag"].lower() not in gone]


def _merge_tags(base: list[dict], listed: list[dict]) -> list[dict]:
    """``base`` plus ``listed``; tag identity is case-insensitive, later attributes win."""
    merged: dict[str, dict] = {t["tag"].lower(): dict(t) for t in base}
    for slot in listed:
        merged.setdefault(slot["tag"].lower(), {}).update(slot)
    return list(merged.values())


# -------------------------------------------------------------- the library
class Library:
    """Sections, items and scheduled items. Callers hold ``lock`` around every call."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.sections: dict[int, Section] = {}
        self.items: dict[int, Item] = {}
        self.pending: list[Scheduled] = []
        self.tag_ids: dict[tuple[str, str], int] = {}
        self.tag_names: dict[tuple[str, str], str] = {}  # (type, casefolded) -> the row's spelling
        self.next_key = 101
        # (type, case-folded name) -> the tag's photo URL (``tag.thumb``), one per tag server-wide
        self.photos: dict[tuple[str, str], str] = {}
        self.fetch_photo: Callable[[str], None] = lambda url: None  # PMS fetching a photo it was given
        self.notify: Callable[[dict], Any] = lambda message: None  # the notification websocket
        self.history = plex_history.History()
        self.sessions = plex_sessions.Sessions()
        self._scanned: dict[int, list[tuple[int, str]]] | None = None  # a scan's items, announced at its end
        self.clear_keeps_rated_at = False  # see ``rate``
        self.machine_id = MACHINE_ID

    def now(self) -> int:
        return int(self.clock())

    def add_section(self, title: str, locations: list[str], key: int | None, type: str, agent: str) -> int:
        key = key if key is not None else max(self.sections, default=0) + 1
        self.sections[key] = Section(key, title, type, list(locations), self.now(), agent=agent)
        return key

    def allocate_key(self) -> int:
        self.next_key += 1
        return self.next_key - 1

    def add_item(
        self,
        section_key: int,
        file: str,
        rating_key: int | None = None,
        title: str | None = None,
        size: int = 123456789,
        duration_ms: int = 1234000,
        **extra: Any,
    ) -> int:
        section = self.sections[section_key]
        rk = rating_key if rating_key is not None else self.allocate_key()
        fields: dict[str, Any] = {name: None for name in EDITABLE_FIELDS}
        fields.update(title=title or posixpath.splitext(posixpath.basename(file))[0], summary="")
        tags = {t: _norm_tags(extra.pop(t, None)) for t in TAG_TYPES}
        unknown = set(extra) - set(EDITABLE_FIELDS)
        if unknown:
            raise TypeError(f"unknown item fields: {sorted(unknown)}")
        fields.update({k: None if v is None else str(v) for k, v in extra.items()})
        now = self.now()
        item = Item(
            rk,
            section_key,
            file,
            size,
            duration_ms,
            fields,
            {k: fields[k] for k in REVERTED_ON_REFRESH},
            tags,
            now,
            now,
        )
        item.thumb, item.art = (f"/library/metadata/{rk}/{k}/{now}" for k in ("thumb", "art"))
        item.images["posters"].append({"id": plex_poster_id(rk, file), "selected": True, "hash": None})
        self.canonical_tags(item)
        self.items[rk] = item
        section.scanned(now)
        if self._scanned is None:
            self._announce(section_key, [(rk, fields["title"])])
        else:
            self._scanned.setdefault(section_key, []).append((rk, fields["title"]))
        return rk

    def _announce(self, section_key: int, items: list[tuple[int, str]]) -> None:
        """The notifications of a scan that added ``items`` to the section."""
        for message in plex_notify.scan_frames(section_key, items, self.sections[section_key].agent, self.now()):
            self.notify(message)

    def remove_item(self, rating_key: int) -> None:
        item = self.items.pop(rating_key)
        self.history.forget_item(rating_key)
        self.sections[item.section].scanned(self.now())
        title = item.fields["title"] or ""
        self.notify(plex_notify.timeline(rating_key, item.section, 9, title, self.now(), metadataState="deleted"))

    def tag_id(self, ttype: str, name: str) -> int:
        """Tags are server-wide entities: one id per (type, case-folded name)."""
        return self.tag_ids.setdefault((ttype, name.lower()), 1000 + len(self.tag_ids))

    def section_items(self, key: int) -> list[Item]:
        found = [i for i in self.items.values() if i.section == key]
        return sorted(found, key=lambda i: ((i.fields["titleSort"] or i.fields["title"] or "").lower(), i.rating_key))

    def materialize(self, section_key: int | None = None, scan_path: str | None = None) -> None:
        """Add scheduled items that are due, or that a scan of ``scan_path`` would find."""
        now = self.clock()
        keep = []
        self._scanned = {}
        try:
            for job in self.pending:
                scanned = section_key == job.section and _covers(scan_path, job.file)
                if scanned or job.due <= now:
                    self.add_item(job.section, job.file, rating_key=job.rating_key, **job.kwargs)
                else:
                    keep.append(job)
        finally:
            added, self._scanned = self._scanned, None
        self.pending = keep
        for key, items in added.items():  # one scan per section: its items' entries share frames
            self._announce(key, items)

    def refreshing(self, key: int) -> bool:
        return any(job.section == key for job in self.pending)

    def edit(self, ids: list[int], plan: EditPlan, semantics: str) -> None:
        now = self.now()
        for ttype, slots in plan.slots.items():
            for slot in slots.values():
                url = slot.pop("thumb", None)
                if url is not None and slot.get("tag"):
                    self.photos[(ttype, slot["tag"].lower())] = url
                    if url:
                        self.fetch_photo(url)
        for rk in ids:
            item = self.items[rk]
            apply_edit(item, plan, semantics)
            self.canonical_tags(item)
            item.updated_at = now
            self.sections[item.section].touch(now)
            self.notify(plex_notify.timeline(rk, item.section, 5, item.fields["title"] or "", now))

    def canonical_tags(self, item: Item) -> None:
        """Give every tag of ``item`` its tag row's spelling.

        One row per type and case-folded name; the row keeps the spelling it was created
        with (rows outlive their last item until PMS's "Optimize database", which the
        emulator never runs), so editing an item cannot change a tag's capitalisation.
        PMS's source is closed; the behaviour is what users report (a tag's
        capitalisation cannot be changed by editing an item). plexapi sends names only, never tag ids
        (``tag[i].tag.tag=<name>``, removal ``tag[].tag.tag-=<quoted names>``
        [plexapi mixins/edit.py `EditTagsMixin._tagHelper`]), so PMS resolves every
        name to its row, whatever the case.
        """
        for ttype, tags in item.tags.items():
            for tag in tags:
                tag["tag"] = self.tag_names.setdefault((ttype, tag["tag"].lower()), tag["tag"])
                if "thumb" in tag:  # given with add_item: the tag's photo, as an edit's would be
                    self.photos[(ttype, tag["tag"].lower())] = tag.pop("thumb")

    def photo(self, ttype: str, name: str) -> str | None:
        return self.photos.get((ttype, name.lower())) or None

    def move_file(self, rating_key: int, new_file: str) -> None:
        """A rescan found the item's file at a new path: same ratingKey, new Part@file."""
        item = self.items[rating_key]
        item.file = new_file
        self.sections[item.section].scanned(self.now())

    def readd_item(self, rating_key: int) -> int:
        """A rescan dropped the item and added its file again: a new metadata item (new
        ratingKey) whose metadata comes from the scan again (file name, no tags, no
        locks, no uploaded poster); nothing of the old item's edits carries over."""
        old = self.items.pop(rating_key)
        self.sections[old.section].scanned(self.now())
        return self.add_item(old.section, old.file, size=old.size, duration_ms=old.duration_ms)

    def upload(self, rk: int, kind: str, source: bytes) -> None:
        """Store an uploaded image as ``upload://<kind>/<sha1 of its bytes>`` (the same bytes
        again are the same entry: plexapi's tests find an upload by that name, tests/test_mixins.py
        ``_test_mixins_edit_image``, ``CUTE_CAT_SHA1``), select it, and lock thumb/art like PMS does."""
        item = self.items[rk]
        digest = hashlib.sha1(source).hexdigest()
        name = f"upload://{kind}/{digest}"
        if not any(e["id"] == name for e in item.images[kind]):
            item.images[kind].append({"id": name, "selected": False, "hash": digest})
        for entry in item.images[kind]:
            entry["selected"] = entry["id"] == name
        item.uploads += 1
        item.hashes[kind] = digest
        self._set_image(item, kind)

    def select(self, rk: int, kind: str, url: str) -> str:
        """Select an image by its ratingKey/URL (``PUT …/poster?url=``, plexapi media.py
        ``BaseResource.select``); the item then shows that image (``poster_hash``: the
        upload's hash, None for Plex's own) and thumb/art is locked, as after any choice made
        in Plex. An unknown URL counts as an upload by URL."""
        item = self.items[rk]
        if not any(e["id"] == url for e in item.images[kind]):
            self.upload(rk, kind, url.encode())
            return self._image_attr(item, kind)
        for entry in item.images[kind]:
            entry["selected"] = entry["id"] == url
            if entry["selected"]:
                item.hashes[kind] = entry["hash"]
        return self._set_image(item, kind)

    def _set_image(self, item: Item, kind: str) -> str:
        attr = "thumb" if kind == "posters" else "art"
        old = self._image_attr(item, kind)
        stamp = max(self.now(), int(old.rsplit("/", 1)[-1]) + 1)
        setattr(item, attr, f"/library/metadata/{item.rating_key}/{attr}/{stamp}")
        item.locks.add(attr)
        item.updated_at = stamp
        return getattr(item, attr)

    @staticmethod
    def _image_attr(item: Item, kind: str) -> str:
        return item.thumb if kind == "posters" else item.art

    def refresh_item(self, item: Item) -> None:
        """Agent refresh: unlocked title/summary fall back to the values the scan produced."""
        for name in REVERTED_ON_REFRESH:
            if name not in item.locks:
                item.fields[name] = item.initial[name]


# ------------------------------------------------------------- XML rendering
def _container(**attrs: Any) -> ET.Element:
    base = {
        "allowSync": "1",
        "identifier": "com.plexapp.plugins.library",
        "mediaTagPrefix": "/system/bundle/media/flags/",
        "mediaTagVersion": "1735689600",
    }
    base.update({k: str(v) for k, v in attrs.items()})
    return ET.Element("MediaContainer", base)


def render_root(machine_id: str = MACHINE_ID) -> ET.Element:
    mc = ET.Element(
        "MediaContainer",
        {
            "size": "2",
            "allowMediaDeletion": "1",
            "allowSync": "1",
            "friendlyName": "Stash2Plex Test PMS",
            "machineIdentifier": machine_id,
            "myPlex": "1",
            "myPlexSigninState": "ok",
            "platform": "Linux",
            "platformVersion": "6.1.0",
            "transcoderActiveVideoSessions": "0",
            "updatedAt": "1735689600",
            "version": PMS_VERSION,
        },
    )
    for key in ("library", "identity"):
        ET.SubElement(mc, "Directory", count="1", key=key, title=key)
    return mc


def render_identity(machine_id: str = MACHINE_ID) -> ET.Element:
    return ET.Element("MediaContainer", size="0", claimed="1", machineIdentifier=machine_id, version=PMS_VERSION)


def render_library() -> ET.Element:
    mc = _container(
        size=3, allowSync=0, art="/:/resources/library-art.jpg", content="", title1="Plex Library", title2=""
    )
    for key, title in (
        ("sections", "Library Sections"),
        ("recentlyAdded", "Recently Added Content"),
        ("onDeck", "On Deck Content"),
    ):
        ET.SubElement(mc, "Directory", key=key, title=title)
    return mc


def render_sections(lib: Library) -> ET.Element:
    mc = ET.Element("MediaContainer", size=str(len(lib.sections)), allowSync="0", title1="Plex Library")
    for s in lib.sections.values():
        d = ET.SubElement(
            mc,
            "Directory",
            {
                "allowSync": "1",
                "art": "/:/resources/movie-fanart.jpg",
                "composite": f"/library/sections/{s.key}/composite/{s.updated_at}",
                "filters": "1",
                "refreshing": "1" if lib.refreshing(s.key) else "0",
                "thumb": "/:/resources/video.png",
                "key": str(s.key),
                "type": s.type,
                "title": s.title,
                "agent": s.agent,
                "scanner": "Plex Video Files",
                "language": "xn",
                "uuid": f"0b6b3c1e-0000-4a4a-9c9c-{s.key:012d}",
                "updatedAt": str(s.updated_at),
                "createdAt": str(s.stamp),
                "scannedAt": str(s.scanned_at),
                "content": "1",
                "directory": "1",
                "contentChangedAt": str(s.content_changed_at),
                "hidden": "0",
            },
        )
        for i, path in enumerate(s.locations):
            ET.SubElement(d, "Location", id=str(s.key * 100 + i), path=path)
    return mc


def render_video(lib: Library, item: Item, full: bool) -> ET.Element:
    """One ``<Video>``; list views (full=False) truncate tags and omit ids and Field locks."""
    rk = item.rating_key
    attrs = {"ratingKey": str(rk), "key": f"/library/metadata/{rk}", "guid": f"local://{rk}", "type": "movie"}
    if full:
        section = lib.sections[item.section]
        attrs.update(
            librarySectionTitle=section.title,
            librarySectionID=str(section.key),
            librarySectionKey=f"/library/sections/{section.key}",
        )
    attrs.update({k: str(v) for k, v in item.fields.items() if v is not None})
    attrs.update(
        thumb=item.thumb,
        art=item.art,
        duration=str(item.duration_ms),
        addedAt=str(item.fields["addedAt"] or item.added_at),
        updatedAt=str(item.updated_at),
    )
    if item.rated_at is not None:
        attrs["lastRatedAt"] = str(item.rated_at)
    attrs.update(lib.history.item_attrs(rk))
    video = ET.Element("Video", attrs)
    _render_media(video, item)
    for ttype in TAG_TYPES:
        _render_tags(lib, video, ttype, item.tags[ttype], full)
    if full:
        for name in sorted(item.locks):
            ET.SubElement(video, "Field", locked="1", name=name)
    return video


def _render_media(video: ET.Element, item: Item) -> None:
    rk, ext = item.rating_key, posixpath.splitext(item.file)[1].lstrip(".") or "mp4"
    media = ET.SubElement(
        video,
        "Media",
        {
            "id": str(rk * 10),
            "duration": str(item.duration_ms),
            "bitrate": "4000",
            "width": "1920",
            "height": "1080",
            "aspectRatio": "1.78",
            "audioChannels": "2",
            "audioCodec": "aac",
            "videoCodec": "h264",
            "videoResolution": "1080",
            "container": ext,
            "videoFrameRate": "24p",
        },
    )
    ET.SubElement(
        media,
        "Part",
        {
            "id": str(rk * 100),
            "key": f"/library/parts/{rk * 100}/1735689600/file.{ext}",
            "duration": str(item.duration_ms),
            "file": item.file,
            "size": str(item.size),
            "container": ext,
        },
    )


def _render_tags(lib: Library, video: ET.Element, ttype: str, tags: list[dict], full: bool) -> None:
    if not full:
        tags = tags[: LIST_TAG_CAPS.get(ttype, 0)]
    for tag in tags:
        attrs = {}
        if full:
            tid = lib.tag_id(ttype, tag["tag"])
            attrs.update(id=str(tid), filter=f"{ttype}={tid}")
        attrs["tag"] = tag["tag"]
        if tag.get("role"):
            attrs["role"] = tag["role"]
        photo = lib.photo(ttype, tag["tag"])
        if full and photo:
            attrs["thumb"] = photo
        ET.SubElement(video, TAG_TYPES[ttype], attrs)


def plex_poster_id(rating_key: int, file: str) -> str:
    """The poster Plex makes itself for an item a scan added: a frame of the video kept in the
    media bundle, listed by ``GET …/posters`` as ``media://<n>/<hash>.bundle/Contents/Thumbnails/thumb1.jpg``
    with no provider (the form of a real PMS reply for a movie, beside its agent's ``metadata://``
    posters and ``upload://`` uploads; plexapi media.py ``BaseResource.resourceFilepath`` maps
    ``media://`` to the server's Media folder). A personal-media item has no agent posters, so
    this one is its own poster, selected until something else is."""
    digest = hashlib.sha1(f"{rating_key}:{file}".encode()).hexdigest()
    return f"media://{digest[0]}/{digest[1:]}.bundle/Contents/Thumbnails/thumb1.jpg"


def render_images(item: Item, kind: str) -> ET.Element:
    rows = item.images[kind]
    mc = _container(size=len(rows))
    del mc.attrib["allowSync"]
    for row in rows:
        url = f"/library/metadata/{item.rating_key}/file?url={quote(row['id'], safe='')}"
        ET.SubElement(
            mc, "Photo", key=url, ratingKey=row["id"], thumb=url, selected="1" if row["selected"] else "0", provider=""
        )
    return mc


# ------------------------------------------------------------------ routing
def _page_bounds(req: Request, total: int) -> tuple[int, int]:
    """Paging from ``X-Plex-Container-Start/Size`` headers or query; exact page sizes."""
    start = int(req.plex_value("X-Plex-Container-Start") or 0)
    size = req.plex_value("X-Plex-Container-Size")
    return start, total - start if size is None else int(size)


def section_all(lib: Library, req: Request, key: int) -> Reply:
    wanted_type = req.param("type")
    items = [] if wanted_type not in (None, "1", "movie") else lib.section_items(key)
    needle = (req.param("title") or "").lower()
    items = [i for i in items if needle in (i.fields["title"] or "").lower()]
    if req.param("inProgress") == "1":  # plexapi library.py ``search(inProgress=True)``: a resume point
        items = [i for i in items if int(lib.history.item_attrs(i.rating_key).get("viewOffset") or 0) > 0]
    rated_after = req.param("lastRatedAt>>")  # "lastRatedAt>>=N" (plexapi's date filter): rated at N or later
    if rated_after is not None:
        items = [i for i in items if i.rated_at is not None and i.rated_at >= int(rated_after)]
    if req.param("limit"):
        items = items[: int(req.param("limit"))]
    start, size = _page_bounds(req, len(items))
    page = items[start : start + max(size, 0)]
    section = lib.sections[key]
    mc = _container(
        size=len(page),
        totalSize=len(items),
        offset=start,
        librarySectionID=key,
        librarySectionTitle=section.title,
        title1=section.title,
        title2=f"All {section.title}",
        viewGroup="movie",
        viewMode="65592",
        librarySectionUUID=f"0b6b3c1e-0000-4a4a-9c9c-{key:012d}",
    )
    for item in page:
        mc.append(render_video(lib, item, full=False))
    return xml_reply(mc, {"X-Plex-Container-Start": str(start), "X-Plex-Container-Total-Size": str(len(items))})


def edit_items(lib: Library, req: Request, ids: list[int], semantics: str) -> Reply:
    try:
        plan = parse_edit(req.pairs)
    except EditError:
        return html_reply(400, HTML_400)
    lib.edit(ids, plan, semantics)
    return Reply()


def section_edit(lib: Library, req: Request, key: int, semantics: str) -> Reply:
    """``PUT /library/sections/{key}/all``: no ``id`` means every item of ``type`` in the section."""
    if req.param("type") not in (None, "1"):
        return html_reply(400, HTML_400)
    ids = [int(x) for x in (req.param("id") or "").split(",") if x.strip()]
    ids = ids or [i.rating_key for i in lib.section_items(key)]
    if any(lib.items.get(rk) is None or lib.items[rk].section != key for rk in ids):
        return html_reply(404, HTML_404)
    return edit_items(lib, req, ids, semantics)


def section_refresh(lib: Library, req: Request, key: int) -> Reply:
    if req.method != "DELETE":
        lib.materialize(key, req.param("path"))
        lib.sections[key].scanned(lib.now())
        if req.param("force") == "1":
            for item in lib.section_items(key):
                lib.refresh_item(item)
    return Reply()


def metadata(lib: Library, req: Request, ids: list[int], semantics: str, strict: bool = True) -> Reply:
    """GET returns the known ids (404 if none is known, or with ``strict`` if any is
    unknown); PUT needs every id to exist."""
    found = [lib.items[rk] for rk in ids if rk in lib.items]
    if not found or ((req.method == "PUT" or strict) and len(found) < len(ids)):
        return html_reply(404, HTML_404)
    if req.method == "PUT":
        return edit_items(lib, req, ids, semantics)
    sections = {i.section for i in found}
    extra = {}
    if len(sections) == 1:
        section = lib.sections[found[0].section]
        extra = {"librarySectionID": section.key, "librarySectionTitle": section.title}
    mc = _container(size=len(found), **extra)
    for item in found:
        mc.append(render_video(lib, item, full=True))
    return xml_reply(mc)


def item_images(lib: Library, req: Request, item: Item, kind: str) -> Reply:
    if req.method == "GET":
        return xml_reply(render_images(item, kind))
    url = req.param("url")
    if url is None and not req.body:
        return html_reply(400, HTML_400)
    lib.upload(item.rating_key, kind, url.encode() if url is not None else req.body)
    return Reply()


def item_subresource(lib: Library, req: Request, rk: int, sub: str) -> Reply:
    item = lib.items.get(rk)
    if item is None:
        return html_reply(404, HTML_404)
    if sub in ("posters", "arts") and req.method in ("GET", "POST"):
        return item_images(lib, req, item, sub)
    if sub in ("poster", "art") and req.method == "PUT":
        url = req.param("url")
        if not url:
            return html_reply(400, HTML_400)
        return Reply(200, lib.select(rk, sub + "s", url).encode(), XML_TYPE)
    if sub == "refresh" and req.method == "PUT":
        lib.refresh_item(item)
        return Reply()
    return html_reply(404, HTML_404)


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG (the emulator's stand-in for a transcoded poster)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def transcode_photo(lib: Library, req: Request) -> Reply:
    """``GET /photo/:/transcode?url=<thumb path>&width=&height=&format=png`` (what plexapi's
    ``PlexServer.transcodeImage`` builds): the item's poster scaled. The source must be an
    item's current ``thumb``; only ``format=png`` is modelled (Plex's default is JPEG)."""
    found = re.fullmatch(r"/library/metadata/(\d+)/thumb/\d+", req.param("url") or "")
    item = lib.items.get(int(found.group(1))) if found else None
    if item is None or item.thumb != req.param("url"):
        return html_reply(404, HTML_404)
    if req.param("format") != "png":
        return html_reply(400, HTML_400)
    width, height = (min(int(req.param(k) or 0) or 240, 1000) for k in ("width", "height"))
    shade = hashlib.sha1(f"{item.rating_key}:{item.thumb}".encode()).digest()[:3]
    return Reply(200, png(width, height, (shade[0], shade[1], shade[2])), "image/png")


TOP_LEVEL: dict[str, Callable[[Library], ET.Element]] = {
    "/": lambda lib: render_root(lib.machine_id),
    "/identity": lambda lib: render_identity(lib.machine_id),
    "/library": lambda lib: render_library(),
    "/library/sections": render_sections,
}


def rate(lib: Library, req: Request) -> Reply:
    """``PUT /:/rate?key=<ratingKey>&identifier=com.plexapp.plugins.library&rating=<0..10|-1>``.

    The request python-plexapi's ``rate()`` sends (plexapi/mixins/rating.py
    ``RatingMixin.rate``: ``rating=None`` becomes ``-1``, which clears the token user's
    rating; outside 0-10 it raises BadRequest before sending). The rating then shows as
    the item's ``userRating`` attribute (plexapi/video.py ``Video._loadData``) with
    ``lastRatedAt``. Whether a cleared rating keeps a ``lastRatedAt`` (dated then) or drops it is
    not documented: ``clear_keeps_rated_at`` plays either. Our choices for what PMS does not
    document: an unknown key is 404,
    a rating that is not -1 or 0-10, or another identifier, is 400.
    """
    item = lib.items.get(int(req.param("key") or 0))
    if item is None:
        return html_reply(404, HTML_404)
    rating = float(req.param("rating") or "nan")
    if req.param("identifier") != "com.plexapp.plugins.library" or not (rating == -1 or 0 <= rating <= 10):
        return html_reply(400, HTML_400)
    item.fields["userRating"] = None if rating == -1 else f"{rating:g}"
    item.rated_at = lib.now() if rating != -1 or lib.clear_keeps_rated_at else None
    return Reply()


def route(lib: Library, req: Request, semantics: str, strict: bool = True) -> Reply:
    """Dispatch one authorised request against ``lib`` (caller holds ``lib.lock``)."""
    lib.materialize()
    segs = [s for s in req.path.split("/") if s]
    if segs == [":", "rate"] and req.method == "PUT":
        return rate(lib, req)
    if req.path == "/status/sessions" and req.method == "GET":
        return xml_reply(lib.sessions.render(_container))
    if req.path == "/status/sessions/history/all" and req.method == "GET":
        rows = lib.history.select(req.query)
        start, size = _page_bounds(req, len(rows))
        return xml_reply(plex_history.render_rows(rows, start, size, _container))
    if segs == ["photo", ":", "transcode"] and req.method == "GET":
        return transcode_photo(lib, req)
    top = TOP_LEVEL.get("/" + "/".join(segs))
    if top is not None and req.method == "GET":
        return xml_reply(top(lib))
    if segs[:2] == ["library", "sections"] and len(segs) == 4 and segs[2].isdigit():
        return route_section(lib, req, int(segs[2]), segs[3], semantics)
    is_metadata = segs[:2] == ["library", "metadata"]
    if is_metadata and len(segs) == 3 and re.fullmatch(r"[\d,]+", segs[2]) and req.method in ("GET", "PUT"):
        return metadata(lib, req, [int(x) for x in segs[2].split(",") if x], semantics, strict)
    if segs[:2] == ["library", "metadata"] and len(segs) == 4 and segs[2].isdigit():
        return item_subresource(lib, req, int(segs[2]), segs[3])
    return html_reply(404, HTML_404)


def route_section(lib: Library, req: Request, key: int, sub: str, semantics: str) -> Reply:
    if key not in lib.sections:
        return html_reply(404, HTML_404)
    if sub == "all" and req.method == "GET":
        return section_all(lib, req, key)
    if sub == "all" and req.method == "PUT":
        return section_edit(lib, req, key, semantics)
    if sub == "refresh" and req.method in ("GET", "POST", "DELETE"):
        return section_refresh(lib, req, key)
    return html_reply(404, HTML_404)


# ------------------------------------------------------------------- server
class _Handler(TrackedHandler):
    """Thin HTTP adapter: everything is delegated to the owning PlexEmulator."""

    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes: without TCP_NODELAY the client's delayed ACK
    # stalls each keep-alive reply by ~40 ms. Plex Media Server answers through its own
    # HTTP stack with Nagle off (replies of a few hundred bytes come back in well under
    # a millisecond on a LAN), so the emulator must not add what Plex does not.
    disable_nagle_algorithm = True
    server_version = "PlexMediaServer/" + PMS_VERSION

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _serve(self) -> None:
        self.server.emulator._serve(self)  # type: ignore[attr-defined]

    do_GET = do_PUT = do_POST = do_DELETE = _serve

    def send_reply(self, reply: Reply) -> None:
        cut = self.server.emulator.cut_replies  # type: ignore[attr-defined]
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("X-Plex-Protocol", "1.0")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            # cut_replies: a PMS restarting mid-reply. The body stops short of Content-Length
            # and the connection closes: plexapi's PlexServer._request reads the body through
            # requests, whose Response.iter_content turns urllib3's ProtocolError
            # (IncompleteRead) into ChunkedEncodingError.
            self.wfile.write(reply.body[: len(reply.body) // 2] if cut else reply.body)
            self.wfile.flush()
            if cut:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:  # the client gave up (read timeout) or the connection was dropped
            self.close_connection = True


class _Server(EmulatorServer):
    def __init__(self, port: int, emulator: PlexEmulator) -> None:
        super().__init__(port, _Handler, emulator)
        if emulator.tls is not None:  # HTTPS with the test's (self-signed) certificate
            self.socket = emulator.tls.wrap_socket(self.socket, server_side=True)


def _request_record(req: Request, status: int, started: float, target: str = "") -> dict:
    return {
        "method": req.method,
        "path": req.path,
        "target": target,  # as it came on the request line, still percent-encoded
        "query": req.query,
        "headers": dict(req.headers),
        "body_len": len(req.body),
        "status": status,
        "time": started,
    }


class LoadModel:
    """A server with a few worker threads: each request holds one for its service time.

    PMS answers requests from a small pool of threads and its writes (database updates,
    metadata writes to disk) take tens of milliseconds; requests beyond the pool wait
    their turn, so latency grows with load. ``workers`` threads, ``write_s`` per PUT,
    POST or DELETE, ``read_s`` per GET. Waiting is FIFO (a ``threading.Semaphore``
    wakes waiters in order). ``waiting`` and ``served`` count the requests now waiting
    for a worker and being served; ``mean_waiting()``/``mean_at_plex()`` are their
    time-weighted means since ``measure()``, ``peak_waiting`` the most at once (benchmarks).
    ``arrivals`` lists each request since ``measure()`` in order as (method, how many requests
    were at Plex, waiting or served, when it came; tests: counts, where the time-weighted means
    move with a loaded machine's scheduling).
    """

    def __init__(self, workers: int = 4, write_s: float = 0.040, read_s: float = 0.010) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.workers, self.write_s, self.read_s = workers, write_s, read_s
        self._slots = threading.Semaphore(workers)
        self._busy = 0
        self._lock = threading.Lock()
        self.peak_busy = 0
        self.waiting = 0
        self.peak_waiting = 0
        self._since = self._last = time.perf_counter()
        self._area_waiting = self._area_at_plex = 0.0
        self.arrivals: list[tuple[str, int]] = []

    def serve(self, method: str, stopping: threading.Event) -> None:
        """Hold a worker for this request's service time (after waiting for one)."""
        with self._lock:
            self.arrivals.append((method, self.waiting + self._busy))
        if self._slots.acquire(blocking=False):
            self._count(busy=1)
        else:  # every worker busy: wait in line
            self._count(waiting=1)
            self._slots.acquire()
            self._count(waiting=-1, busy=1)
        try:
            stopping.wait(self.read_s if method == "GET" else self.write_s)
        finally:
            self._count(busy=-1)
            self._slots.release()

    @property
    def at_plex(self) -> int:
        return self.waiting + self._busy

    def _count(self, waiting: int = 0, busy: int = 0) -> None:
        with self._lock:
            now = time.perf_counter()
            self._area_waiting += self.waiting * (now - self._last)
            self._area_at_plex += (self.waiting + self._busy) * (now - self._last)
            self._last = now
            self.waiting += waiting
            self._busy += busy
            self.peak_waiting = max(self.peak_waiting, self.waiting)
            self.peak_busy = max(self.peak_busy, self._busy)

    def measure(self) -> None:
        """Start the means and peaks afresh."""
        self._count()
        with self._lock:
            self._since = self._last
            self._area_waiting = self._area_at_plex = 0.0
            self.peak_waiting, self.peak_busy = self.waiting, self._busy
            self.arrivals = []

    def measure_from_first_write(self) -> Callable[[dict], None]:
        """A ``PlexEmulator.on_request`` that starts the means at the first write (a plugin's
        start-up sends nothing to wait, and would thin them)."""
        started: list[bool] = []

        def hook(record: dict) -> None:
            if record["method"] in ("PUT", "POST") and not started:
                started.append(True)
                self.measure()

        return hook

    def mean_waiting(self) -> float:
        self._count()
        with self._lock:
            return self._area_waiting / max(self._last - self._since, 1e-9)

    def mean_at_plex(self) -> float:
        self._count()
        with self._lock:
            return self._area_at_plex / max(self._last - self._since, 1e-9)


class PlexEmulator:
    """A Plex Media Server on 127.0.0.1 for tests; see the module docstring for its choices.

    Fault switches (``latency``, ``stall``, ``fail_401``, ``fail_503``, ``fail_uploads``,
    ``fail_edits``, ``cut_replies``, ``tag_semantics``, ``load``) are plain attributes read
    once per request, so they may be flipped at any time. ``load`` (a ``LoadModel``) makes
    requests queue for a few worker threads, as a busy PMS does (benchmarks). ``fail_uploads`` answers 500 to poster/art
    uploads only; ``fail_edits`` answers its status to edits; ``cut_replies`` closes each
    connection halfway through the body. ``tls`` (an ``ssl.SSLContext``) serves HTTPS.
    ``clock`` (epoch seconds) dates items and sections and decides when scheduled items
    appear; a test may set it to move time on instead of sleeping.
    """

    def __init__(self, token: str = "plex-test-token", port: int = 0, tag_semantics: str = "replace", tls=None) -> None:
        if tag_semantics not in ("replace", "append"):
            raise ValueError(f"tag_semantics must be 'replace' or 'append', not {tag_semantics!r}")
        self.token = token
        self.port = port
        self.tag_semantics = tag_semantics
        self.latency = 0.0
        self.stall = 0.0
        self.load: LoadModel | None = None
        self.fail_401 = False
        self.fail_503 = False
        self.fail_uploads = False
        self.fail_edits = 0  # a status (e.g. 400) answered to every PUT edit
        self.cut_replies = False
        self.tls = tls  # an ssl.SSLContext: serve HTTPS
        self.max_url_bytes = 8190  # of the request line (see the module docstring)
        self.redirect: tuple[int, str] | None = None  # (status, base URL): a reverse proxy sending clients there
        self.strict_batches = True
        self.swap_replies: dict[int, int] = {}
        # called with each request's record after its reply is computed, before it is
        # sent: a test plays what happens on the server meanwhile (a rescan, say)
        self.on_request: Callable[[dict], None] | None = None
        self.requests: list[dict] = []
        self.notifications = plex_notify.Notifications()
        self._lib = Library()
        self._lib.notify = self.notifications.publish
        self._lib.fetch_photo = self._fetch_photo
        self.photo_fetches: list[dict] = []  # each photo URL PMS fetched: url, status, content_type, ok
        self._photos_done = threading.Condition()
        self._log_lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def clock(self) -> Callable[[], float]:
        return self._lib.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        with self._lib.lock:
            self._lib.clock = clock

    # -- lifecycle
    @property
    def url(self) -> str:
        return f"{'https' if self.tls is not None else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._stopping.clear()
        self._listen()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.refuse_connections()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def refuse_connections(self) -> None:
        """Stop listening and cut open connections; the port then refuses connections."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def accept_connections(self) -> None:
        """Listen again on the same port."""
        if self._server is None:
            self._listen()

    def _listen(self) -> None:
        self._server = _Server(self.port, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"plex-emulator-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # -- library set-up and inspection
    def add_section(
        self,
        title: str,
        locations: list[str],
        key: int | None = None,
        type: str = "movie",
        agent: str = "tv.plex.agents.none",
    ) -> int:
        """A section; ``agent`` its metadata agent (none, the default, as for "Other Videos")."""
        with self._lib.lock:
            return self._lib.add_section(title, locations, key, type, agent)

    def add_item(
        self,
        section_key: int,
        file: str,
        title: str | None = None,
        size: int = 123456789,
        duration_ms: int = 1234000,
        **fields: Any,
    ) -> int:
        """Add an item; ``fields`` are editable fields (``studio=...``) or tag lists (``genre=[...]``)."""
        with self._lib.lock:
            return self._lib.add_item(section_key, file, title=title, size=size, duration_ms=duration_ms, **fields)

    def remove_item(self, rating_key: int) -> None:
        with self._lib.lock:
            self._lib.remove_item(rating_key)

    def schedule_item(self, section_key: int, file: str, delay: float, **kw: Any) -> int:
        """Item appears after ``delay`` s or on a scan covering its folder; returns its future ratingKey."""
        with self._lib.lock:
            if section_key not in self._lib.sections:
                raise KeyError(section_key)
            rk = self._lib.allocate_key()
            self._lib.pending.append(Scheduled(self._lib.clock() + delay, rk, section_key, file, kw))
            return rk

    def item(self, rating_key: int) -> dict:
        """Snapshot of one item. Besides the documented keys it carries ``actors`` (tag dicts
        with ``role``/``thumb``), ``art_hash`` and ``art``; field values are strings or None."""
        with self._lib.lock:
            self._lib.materialize()
            snapshot = self._lib.items[rating_key].snapshot()
            for actor in snapshot["actors"]:
                actor["thumb"] = self._lib.photo("actor", actor["tag"])
            return snapshot

    def photo(self, name: str) -> str | None:
        """The photo URL Plex holds for the actor ``name`` (one for the whole library)."""
        with self._lib.lock:
            return self._lib.photo("actor", name)

    def _fetch_photo(self, url: str) -> None:
        """PMS fetching a photo URL it was given, in the background: recorded in ``photo_fetches``."""

        def fetch() -> None:
            import urllib.error
            import urllib.request

            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # follows redirects
            record: dict[str, Any] = {"url": url, "status": None, "content_type": "", "ok": False}
            try:
                with opener.open(url, timeout=5) as response:
                    record.update(status=response.status, content_type=response.headers.get("Content-Type", ""))
                    response.read()
            except urllib.error.HTTPError as exc:
                record["status"] = exc.code
            except (OSError, ValueError) as exc:
                record["error"] = type(exc).__name__
            record["ok"] = record["status"] == 200 and record["content_type"].startswith("image/")
            with self._photos_done:
                self.photo_fetches.append(record)
                self._photos_done.notify_all()

        threading.Thread(target=fetch, name="plex-photo-fetch", daemon=True).start()

    def wait_photo_fetches(self, count: int, timeout: float = 5.0) -> list[dict]:
        """The photo fetches once ``count`` have ended (AssertionError after ``timeout``)."""
        with self._photos_done:
            if not self._photos_done.wait_for(lambda: len(self.photo_fetches) >= count, timeout):
                raise AssertionError(f"{len(self.photo_fetches)} photo fetches ended, {count} expected")
            return list(self.photo_fetches)

    def items(self) -> list[dict]:
        with self._lib.lock:
            self._lib.materialize()
            return [i.snapshot() for i in self._lib.items.values()]

    # -- request log
    def requests_matching(self, method: str | None = None, path_prefix: str | None = None) -> list[dict]:
        with self._log_lock:
            return [
                r
                for r in self.requests
                if (method is None or r["method"] == method)
                and (path_prefix is None or r["path"].startswith(path_prefix))
            ]

    def _log_where(self, method: str, pattern: str) -> list[dict]:
        with self._log_lock:
            return [r for r in self.requests if r["method"] == method and re.fullmatch(pattern, r["path"])]

    def edit_requests(self) -> list[dict]:
        return self._log_where("PUT", r"/library/(sections/\d+/all|metadata/[\d,]+)/?")

    def metadata_reads(self, rating_key: int) -> list[dict]:
        return self._log_where("GET", rf"/library/metadata/{rating_key}/?")

    def rate_requests(self) -> list[dict]:
        return self._log_where("PUT", r"/:/rate")

    def upload_requests(self) -> list[dict]:
        return self._log_where("POST", r"/library/metadata/\d+/(posters|arts)/?")

    def scan_requests(self) -> list[dict]:
        with self._log_lock:
            return [r for r in self.requests if re.fullmatch(r"/library/sections/\d+/refresh/?", r["path"])]

    def clear_requests(self) -> None:
        with self._log_lock:
            self.requests.clear()

    # -- request handling
    def _serve(self, handler: _Handler) -> None:
        started = time.time()
        req = parse_request(handler)
        if req.method == "GET" and req.path in plex_notify.PATHS:
            self._listen_websocket(handler, req, started)
            return
        if len(handler.requestline.encode("latin-1")) > self.max_url_bytes:
            reply = html_reply(414, HTML_414)
        elif self.redirect is not None:
            status, base = self.redirect
            reply = Reply(status, HTML_301.encode(), HTML_TYPE, {"Location": base.rstrip("/") + handler.path})
        else:
            reply = self._answer(req)
        record = _request_record(req, reply.status, started, handler.path)
        with self._log_lock:  # recorded before the reply leaves, so clients never race the log
            self.requests.append(record)
        if self.on_request is not None:
            self.on_request(record)
        handler.send_reply(reply)

    def _listen_websocket(self, handler: _Handler, req: Request, started: float) -> None:
        """The notification websocket: 401 for a wrong token, as at any other path (the
        handshake is a GET), else the connection stays with ``notifications``."""
        refused = self.fail_401 or req.plex_value("X-Plex-Token") != self.token
        with self._log_lock:
            self.requests.append(_request_record(req, 401 if refused else 101, started, handler.path))
        if refused:
            handler.send_reply(html_reply(401, HTML_401))
            return
        self.notifications.serve(handler)

    def _answer(self, req: Request) -> Reply:
        """Apply fault switches in order (load, latency, stall, 401, 503, token, uploads, edits), then route."""
        load = self.load
        if load is not None:
            load.serve(req.method, self._stopping)
        for delay in (self.latency, self.stall):
            if delay > 0:
                self._stopping.wait(delay)
        if self.fail_401 or req.plex_value("X-Plex-Token") != self.token:
            return html_reply(401, HTML_401)
        if self.fail_503:
            return html_reply(503, HTML_503)
        if self.fail_uploads and req.method == "POST" and req.path.endswith(("/posters", "/arts")):
            return html_reply(500, HTML_500)
        if self.fail_edits and req.method == "PUT" and req.path.startswith("/library/"):
            return html_reply(self.fail_edits, HTML_400 if self.fail_edits == 400 else HTML_500)
        if req.method == "GET" and (req.path == "/web" or req.path.startswith("/web/")):
            # PMS serves the Plex Web app (HTML) under /web: a plex_url copied from the
            # browser ends in /web, and plexapi's PlexServer.__init__ then GETs <plex_url>/
            # and gets this page instead of the root MediaContainer.
            return html_reply(200, HTML_WEB)
        req = self._swapped(req)
        with self._lib.lock:
            try:
                return route(self._lib, req, self.tag_semantics, self.strict_batches)
            except ValueError:  # e.g. a non-integer paging header or id
                return html_reply(400, HTML_400)

    def _swapped(self, req: Request) -> Request:
        """A metadata GET for a key in ``swap_replies`` is answered with the other item."""
        if req.method != "GET" or not self.swap_replies or not req.path.startswith("/library/metadata/"):
            return req
        segs = req.path.split("/")
        if len(segs) != 4 or not re.fullmatch(r"[\d,]+", segs[3]):
            return req
        keys = [str(self.swap_replies.get(int(k), k)) for k in segs[3].split(",") if k]
        return dataclasses.replace(req, path="/library/metadata/" + ",".join(keys))

    # -- plays
    def play(self, rating_key: int, account_id: int = plex_history.OWNER, viewed_at: int | None = None) -> int:
        """A playback that reached the end: a watch-history row, the item's viewCount and
        lastViewedAt, and the session's ``stopped`` notification. Returns the history id."""
        with self._lib.lock:
            item = self._lib.items[rating_key]
            when = viewed_at if viewed_at is not None else self._lib.now()
            row = self._lib.history.play(rating_key, item.section, item.fields["title"] or "", when, account_id)
        session = str(row.history_id)
        self.notifications.publish(plex_notify.playing(session, rating_key, item.duration_ms, "stopped"))
        return row.history_id

    def play_twice(self, rating_key: int, after_s: int, viewed_at: int | None = None) -> tuple[int, int]:
        """One viewing from a client that writes it as two history rows, ``after_s`` apart
        (plex_history.py's module docstring); returns both history ids."""
        first = self.play(rating_key, viewed_at=viewed_at)
        with self._lib.lock:
            row = next(r for r in self._lib.history.rows if r.history_id == first)
        return first, self._lib.history.second_row(row, after_s).history_id

    @property
    def clear_keeps_rated_at(self) -> bool:
        """A rating cleared (``rate`` with -1) keeps a ``lastRatedAt`` (True) or drops it."""
        return self._lib.clear_keeps_rated_at

    @clear_keeps_rated_at.setter
    def clear_keeps_rated_at(self, keeps: bool) -> None:
        self._lib.clear_keeps_rated_at = keeps

    def set_machine_id(self, machine_id: str) -> None:
        """Another server answers at this address (a migration): its own machineIdentifier
        and its own watch history, whose ids count from 1 again."""
        with self._lib.lock:
            self._lib.machine_id = machine_id
            self._lib.history.rows.clear()

    def history_rows(self) -> list:
        """Every watch-history row (``plex_history.Row``), oldest first."""
        with self._lib.history.lock:
            return list(self._lib.history.rows)

    def set_view_offset(self, rating_key: int, offset_ms: int, account_id: int = plex_history.OWNER) -> None:
        """A playback stopped part-way: the account's resume point (``/:/timeline`` reports)."""
        self._lib.history.set_offset(rating_key, offset_ms, account_id)

    # -- playback sessions (plex_sessions)
    def start_playback(self, rating_key: int, account_id: int = plex_history.OWNER) -> str:
        """An account starts playing an item: a session in ``/status/sessions`` and its first
        ``playing`` report. Returns the session key."""
        with self._lib.lock:
            title = self._lib.items[rating_key].fields["title"] or ""
        playback = self._lib.sessions.start(rating_key, title, account_id)
        self.notifications.publish(plex_notify.playing(playback.session_key, rating_key, 0, "playing"))
        return playback.session_key

    def report_playback(self, session_key: str, offset_ms: int, state: str = "playing") -> None:
        """The player's next report (clients report every 1-10 s, and on each change of state:
        ``playing``, ``paused``, ``buffering``; its ``Player`` in ``/status/sessions`` shows it)."""
        if state not in ("playing", "paused", "buffering"):
            raise ValueError(f"a live session is playing, paused or buffering, not {state!r}")
        with self._lib.sessions.lock:
            playback = self._lib.sessions.live[session_key]
            playback.offset_ms, playback.state = offset_ms, state
        self.notifications.publish(plex_notify.playing(session_key, playback.rating_key, offset_ms, state))

    def stop_playback(self, session_key: str, offset_ms: int) -> None:
        """The session stops part-way: the account's resume point moves, the session leaves
        ``/status/sessions``, then ``stopped`` is sent."""
        playback = self._lib.sessions.end(session_key)
        self._lib.history.set_offset(playback.rating_key, offset_ms, playback.account_id)
        self.notifications.publish(plex_notify.playing(session_key, playback.rating_key, offset_ms, "stopped"))

    # -- rescans
    def move_file(self, rating_key: int, new_file: str) -> None:
        """A rescan found the item's file at ``new_file``: the ratingKey stays (PMS matches
        a moved file by its hash), Part@file changes."""
        with self._lib.lock:
            self._lib.move_file(rating_key, new_file)

    def readd_item(self, rating_key: int) -> int:
        """A rescan removed the item and added its file again under a new ratingKey, with
        fresh scan metadata (PMS keeps a ratingKey only for a file it recognises as moved)."""
        with self._lib.lock:
            return self._lib.readd_item(rating_key)


def main() -> int:
    """Serve an emulator with one empty "Stash" section until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default="plex-test-token")
    parser.add_argument("--tag-semantics", choices=("replace", "append"), default="replace")
    args = parser.parse_args()
    with PlexEmulator(args.token, args.port, args.tag_semantics) as emu:
        emu.add_section("Stash", ["/data/stash"])
        print(f"{emu.url}  (token {emu.token})", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
