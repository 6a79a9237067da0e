"""A Stash server emulator for tests: a real HTTP server speaking Stash's GraphQL.

`POST /graphql` is executed by graphql-core against `stash_schema.graphql`, a
subset of Stash's schema with Stash's own names, so the real stashapi client
(introspection, default fragments, error handling) runs unchanged against it.
`GET /scene/<id>/screenshot` serves cover bytes. Behaviour follows Stash's code:
422 for parse/validation errors and 400 for a body that is not JSON (gqlgen's
graphql/handler/transport/http_post.go), 200 with errors and partial data for
resolver errors, `jobQueue` null when idle (internal/api/resolver_query_job.go),
plugin settings only when stored, screenshot URLs of the form
`<base>/scene/<id>/screenshot?t=<updated_at unix seconds>`
(internal/api/urlbuilders/scene.go ``GetScreenshotURL``).

``StashEmulator(release="v0.25.0")`` plays one Stash release
(tests/emulators/stash_releases.py): that release's full schema, ``version`` answer,
hooks (``Movie.*`` before v0.27, ``Group.*`` then ``Movie.*`` after) and date rules
(partial dates only from v0.30). Without a release it plays v0.30.1 on the subset schema.

``serve_ui()`` makes it Stash's web server too (tests/emulators/stash_ui.py): the
real prebuilt UI, the plugin UI routes, the subscriptions websocket, and plugin runs
for ``runPluginOperation`` / ``runPluginTask``, against Stash's full schema.

Scenes live in dicts keyed by id and are replaced (never mutated) on update, so
request threads read consistent snapshots without holding the lock.

>>> with StashEmulator() as emu:
...     sid = emu.add_scene(title="A", tags=["x"])
...     emu.scene(sid)["tags"]
['x']
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import posixpath
import random
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable
from datetime import datetime, timezone, tzinfo
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlencode, urlsplit

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    build_ast_schema,
    execute,
    parse,
    validate,
)

from tests.emulators import stash_releases
from tests.emulators.serving import EmulatorServer, TrackedHandler

SCHEMA_PATH = Path(__file__).with_name("stash_schema.graphql")


def session_cookie_json(value: str) -> dict:
    """Stash's session cookie as its plugin input carries it: Go's ``http.Cookie``
    marshalled by encoding/json (every field, zero values included)."""
    return {
        "Name": "session",
        "Value": value,
        "Quoted": False,
        "Path": "",
        "Domain": "",
        "Expires": "0001-01-01T00:00:00Z",
        "RawExpires": "",
        "MaxAge": 0,
        "Secure": False,
        "HttpOnly": False,
        "SameSite": 0,
        "Partitioned": False,
        "Raw": "",
        "Unparsed": None,
    }


@functools.cache
def _schema_document() -> DocumentNode:
    """The schema's SDL, parsed and checked (by building it once) per process."""
    document = parse(SCHEMA_PATH.read_text(encoding="utf-8"))
    build_ast_schema(document)  # checks the SDL; each emulator then builds with assume_valid_sdl
    return document


# per release (None: the subset schema), see StashEmulator._document
_DEFAULT_DOCUMENTS: dict[str | None, dict[str, DocumentNode | list[GraphQLError]]] = {}

VERSION = {"version": "v0.30.1", "hash": "cf3489ef", "build_time": "2025-12-21 10:00:00"}
HOOK_INPUT_KEYS = (
    "clientMutationId",
    "id",
    "title",
    "code",
    "details",
    "director",
    "url",
    "urls",
    "date",
    "rating100",
    "o_counter",
    "organized",
    "studio_id",
    "gallery_ids",
    "performer_ids",
    "movies",
    "groups",
    "tag_ids",
    "cover_image",
    "stash_ids",
    "resume_time",
    "play_duration",
    "play_count",
    "primary_file_id",
)
# update_scene keyword -> SceneUpdateInput key
_UPDATE_KEYS = {
    "title": "title",
    "details": "details",
    "date": "date",
    "code": "code",
    "director": "director",
    "urls": "urls",
    "studio": "studio_id",
    "performers": "performer_ids",
    "tags": "tag_ids",
    "cover": "cover_image",
    "rating100": "rating100",
    "organized": "organized",
}
_ACTIVE_JOB_STATES = ("READY", "RUNNING", "STOPPING")
_SORT_KEYS: dict[str, Callable[[dict], Any]] = {
    "id": lambda s: s["id"],
    # ORDER BY on the stored RFC3339 text [S:pkg/sqlite/timestamp.go]: text order, as in Stash
    "updated_at": lambda s: s["updated_at"],
    "created_at": lambda s: s["created_at"],
    "title": lambda s: s["title"].casefold() if s["title"] is not None else None,
    "date": lambda s: s["date"],
    "path": lambda s: s["files"][0]["path"].casefold() if s["files"] else None,
}
_HTML_PAGE = b"<!DOCTYPE html><html><head><title>Login</title></head><body>Sign in</body></html>"
_DEFAULT_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 9"><rect width="16" height="9" fill="#555"/></svg>'
)
_SCREENSHOT_RE = re.compile(r"^/scene/(\d+)/screenshot$")
_PERFORMER_IMAGE_RE = re.compile(r"^/performer/(\d+)/image$")
_OPERATION_RE = re.compile(r"^\s*(?:query|mutation|subscription)\s+(\w+)")


# --- pure helpers ------------------------------------------------------------


def rfc3339(ts: float, tz: tzinfo | None = None) -> str:
    """Format like Go's time.RFC3339: whole seconds, offset, `Z` for UTC."""
    dt = datetime.fromtimestamp(int(ts), tz) if tz else datetime.fromtimestamp(int(ts)).astimezone()
    text = dt.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def parse_timestamp(value: str, tz: tzinfo | None = None) -> float | None:
    """Epoch seconds of an RFC3339 (or ISO date) string; None when unparseable."""
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz) if tz else dt.astimezone()
    return dt.timestamp()


def cover_png(scene_id: int, version: int) -> bytes:
    """A valid 8x8 PNG whose colour (and so bytes) depends on scene and version."""
    rgb = hashlib.sha256(f"{scene_id}:{version}".encode()).digest()[:3]
    raw = b"".join(b"\x00" + rgb * 8 for _ in range(8))

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def image_type(data: bytes) -> str:
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.lstrip().startswith(b"<svg"):
        return "image/svg+xml"
    return "application/octet-stream"


def _compare(modifier: str, value: Any, v1: Any, v2: Any) -> bool:
    """Stash's numeric/timestamp criterion semantics; NULL never matches."""
    if modifier == "IS_NULL":
        return value is None
    if modifier == "NOT_NULL":
        return value is not None
    if value is None:
        return False
    if modifier in ("BETWEEN", "NOT_BETWEEN"):
        inside = v1 <= value <= v2
        return inside if modifier == "BETWEEN" else not inside
    ops = {"EQUALS": value == v1, "NOT_EQUALS": value != v1, "GREATER_THAN": value > v1, "LESS_THAN": value < v1}
    if modifier not in ops:
        raise GraphQLError(f"unsupported modifier {modifier} for this criterion")
    return ops[modifier]


def _string_match(modifier: str, values: list[str | None], wanted: str) -> bool:
    present = [v for v in values if v is not None]
    if modifier in ("IS_NULL", "NOT_NULL"):
        return (not present) == (modifier == "IS_NULL")
    low = wanted.casefold()
    tests = {
        "EQUALS": lambda v: v.casefold() == low,
        "INCLUDES": lambda v: low in v.casefold(),
        "MATCHES_REGEX": lambda v: re.search(wanted, v, re.IGNORECASE) is not None,
    }
    negated = {"NOT_EQUALS": "EQUALS", "EXCLUDES": "INCLUDES", "NOT_MATCHES_REGEX": "MATCHES_REGEX"}
    if modifier in tests:
        return any(tests[modifier](v) for v in present)
    if modifier in negated:
        return not any(tests[negated[modifier]](v) for v in present)
    raise GraphQLError(f"unsupported modifier {modifier} for this criterion")


def _basename(path: str) -> str:
    return re.split(r"[\\/]", path)[-1]


# --- the emulator ------------------------------------------------------------


@functools.cache
def _release_schema(release: str | None) -> GraphQLSchema:
    """The schema with this module's resolvers, built once per release and process (the
    suite starts hundreds of emulators): each resolver finds its emulator in the execution
    context (``StashEmulator.execute`` passes ``context_value["emulator"]``)."""
    document = stash_releases.schema_document(release) if release else _schema_document()
    schema = build_ast_schema(document, assume_valid_sdl=True)
    emu = _emulator
    scene = schema.type_map["Scene"].fields  # type: ignore[union-attr]
    scene["studio"].resolve = lambda s, i: emu(i)._studios.get(s["_studio_id"])
    scene["performers"].resolve = lambda s, i: [emu(i)._performers[p] for p in s["_performer_ids"]]
    scene["tags"].resolve = lambda s, i: [emu(i)._tags[t] for t in s["_tag_ids"]]
    # Scene.groups from v0.27; Scene.movies (deprecated from v0.27) in every release: the
    # same rows, as the v0.27 migration renamed movies to groups keeping their ids
    # (pkg/sqlite/migrations/65_movie_group_rename.up.sql).
    for field, key in (("groups", "group"), ("movies", "movie")):
        if field in scene:
            scene[field].resolve = lambda s, i, key=key: [
                {key: emu(i)._groups[g], "scene_index": None} for g in s["_group_ids"]
            ]
    scene["paths"].resolve = lambda s, i: emu(i)._resolve_paths(s, i)
    performer = schema.type_map["Performer"].fields  # type: ignore[union-attr]
    performer["image_path"].resolve = lambda p, i: emu(i)._performer_image_path(p, i)
    # play_count = COUNT, last_played_at = MAX, play_history = every date, newest first
    # (the scene loaders over viewHistoryTable, pkg/sqlite/history.go), stored in UTC.
    scene["play_history"].resolve = lambda s, _i: [
        rfc3339(t, timezone.utc) for t in sorted(s.get("_plays", ()), reverse=True)
    ]
    scene["play_count"].resolve = lambda s, _i: len(s.get("_plays", ()))
    scene["last_played_at"].resolve = lambda s, _i: rfc3339(max(s["_plays"]), timezone.utc) if s.get("_plays") else None
    studio = schema.type_map["Studio"].fields  # type: ignore[union-attr]
    studio["parent_studio"].resolve = lambda s, i: emu(i)._studios.get(s["_parent_id"])
    # Tag.parents / Tag.children: the direct ones only (internal/api/resolver_model_tag.go
    # Parents, Children load by TagStore.FindByChildTagID / FindByParentTagID).
    tag = schema.type_map["Tag"].fields  # type: ignore[union-attr]
    tag["parents"].resolve = lambda t, i: [emu(i)._tags[p] for p in t.get("_parent_ids", []) if p in emu(i)._tags]
    tag["children"].resolve = lambda t, i: [c for c in emu(i)._tags.values() if t["id"] in c.get("_parent_ids", [])]
    return schema


def _emulator(info: Any) -> StashEmulator:
    return info.context["emulator"]


class StashEmulator:
    """An in-process Stash: scenes, studios, performers, tags, settings and jobs.

    Fault switches (read per request): `latency` seconds before answering;
    `image_trickle_s` sends a screenshot one byte per that many seconds;
    `fail_html` answers 200 with an HTML page; `fail_graphql_errors` answers
    200 `{"errors":[{"message":"database is locked"}],"data":null}`; `fail_401`
    answers 401. `auth_required` (default True) demands the session cookie or
    the ApiKey header / `apikey` parameter. `clock` and `tz` are injectable.
    """

    def __init__(
        self,
        session_cookie: str = "stash-test-cookie-secret",
        api_key: str = "",
        port: int = 0,
        release: str | None = None,
    ) -> None:
        self.release = release  # a tag of shared/stash-schema/versions, e.g. "v0.25.0"
        self._triggers = stash_releases.triggers(release) if release else None
        self.session_cookie = session_cookie
        self.api_key = api_key
        self.port = port
        self.url = ""
        self.auth_required = True
        self.latency = 0.0
        self.fail_html = False
        self.fail_graphql_errors = False
        self.fail_401 = False
        self.clock: Callable[[], float] = time.time
        self.tz: tzinfo | None = None
        self.version = release or VERSION["version"]  # e.g. "v0.24.3" to play an older server
        self.external_host = ""  # Stash's `external_host` setting: paths.* then point there
        # (certificate file, key file): serve https, as Stash does when both are configured
        # (internal/manager/config/config.go ``HasTLSConfig``); server_connection then says
        # Scheme https [S:pkg/plugin/plugins.go `makeServerConnection`]
        self.tls: tuple[str, str] | None = None
        # Stash's session cookie stops authenticating this many seconds after it was issued
        # (max_session_age, default 3600: internal/manager/config/config.go
        # DefaultMaxSessionAge; securecookie's timestamp check), by ``clock``
        self.session_max_age = 3600.0
        self.images_login_page = False  # a login portal answers image requests with HTML and 200
        self.config_dir = ""  # server_connection's Dir (Stash's config folder); default: the plugins folder's parent
        self.image_trickle_s = 0.0  # > 0: a screenshot's body is sent one byte per this many seconds
        # called with each GraphQL request's record after its reply is computed, before it
        # is sent: a test plays what a user does meanwhile (an edit, a deletion)
        self.on_graphql: Callable[[dict], None] | None = None
        self.plugin_settings: dict[str, dict] = {}
        self.jobs: list[dict] = []
        self.requests: list[dict] = []
        self.screenshot_requests: list[int] = []
        self.screenshot_headers: list[dict[str, str]] = []  # each screenshot request's headers
        self.performer_image_requests: list[dict] = []  # each performer image request: path, headers, status
        self.hook_contexts: list[dict] = []
        self.last_hooks: list[dict] = []  # every hookContext the last change fired, in order
        self.play_writes = 0  # sceneAddPlay requests answered
        self.activity_writes = 0  # sceneSaveActivity requests answered
        self._lock = threading.RLock()
        self._scenes: dict[int, dict] = {}
        self._studios: dict[int, dict] = {}
        self._performers: dict[int, dict] = {}
        self._tags: dict[int, dict] = {}
        self._groups: dict[int, dict] = {}
        self._name_index: dict[str, dict[str, int]] = {}
        self._next = {"scene": 1, "file": 1, "studio": 1, "performer": 1, "tag": 1, "group": 1, "job": 1}
        self._last_ts = 0
        self._schema = _release_schema(self.release)
        self._documents: dict[str, DocumentNode | list[GraphQLError]] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.ui = None  # a tests.emulators.stash_ui.StashUI once serve_ui() is called

    def serve_ui(self, build_dir: Path, schema_dir: Path):
        """Be Stash's web server too: the real UI, plugin UI files, plugin runs
        (tests/emulators/stash_ui.py). GraphQL then runs against the full schema."""
        from tests.emulators.stash_ui import StashUI

        self.ui = StashUI(self, Path(build_dir), Path(schema_dir))
        self._documents.clear()
        return self.ui

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> StashEmulator:
        server = EmulatorServer(self.port, _Handler, self)
        if self.tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            # the handshake in each connection's own thread, not in the accepting one
            server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self.port = server.server_address[1]
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="stash-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections: Stash is down (a client's
        next request is refused, not answered on a connection it kept)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.drop_connections()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def issue_cookie(self, at: float | None = None) -> str:
        """A session cookie value issued now (or ``at``), as Stash encodes one for each plugin
        run [S:pkg/session/plugin.go `MakePluginCookie`] and with each answer to a request it
        authenticated [S:pkg/session/session.go `GetSessionUserID`: "refresh the cookie"]:
        securecookie puts the time of issue inside the value; here it follows the secret."""
        return f"{self.session_cookie}.{int(self.clock() if at is None else at)}"

    def cookie_valid(self, value: str) -> bool:
        """Whether Stash accepts this session cookie now: ours, and not older than
        ``session_max_age`` (securecookie ``Codec.Decode``: ``t1 < t2-maxAge`` is expired)."""
        secret, _, issued = value.rpartition(".")
        if secret != self.session_cookie or not issued.isdigit():
            return False
        return not self.session_max_age or int(issued) >= self.clock() - self.session_max_age

    def server_connection(self, plugin_dir: str, host: str = "0.0.0.0") -> dict:
        """The `server_connection` object Stash writes on a plugin's stdin
        (pkg/plugin/plugins.go ``makeServerConnection``)."""
        cookie = session_cookie_json(self.issue_cookie())
        return {
            "Scheme": self.scheme,
            "Host": host,
            "Port": self.port,
            "SessionCookie": cookie,
            "Dir": self.config_dir or str(Path(plugin_dir).parent.parent),
            "PluginDir": str(plugin_dir),
        }

    # -- data: scenes and related objects ------------------------------------

    def add_scene(
        self,
        title: str | None = None,
        files: list[dict] | None = None,
        details: str | None = None,
        date: str | None = None,
        studio: str | None = None,
        performers: list[str] = (),  # type: ignore[assignment]
        tags: list[str] = (),
        groups: list[str] = (),  # type: ignore[assignment]
        code=None,
        director=None,
        urls=(),  # type: ignore[assignment]
        scene_id: int | None = None,
        rating100: int | None = None,
        organized: bool = False,
    ) -> int:
        """Create a scene and return its id.

        `files=None` gives one file `/data/scenes/scene-<id>.mp4`; `files=[]`
        none. Every scene starts with a generated cover (`cover_version` 1).
        """
        refused = stash_releases.partial_date_refused(date, self._played())
        if refused:
            raise ValueError(refused)
        with self._lock:
            sid = scene_id if scene_id is not None else self._next["scene"]
            if sid in self._scenes:
                raise ValueError(f"scene {sid} exists")
            self._next["scene"] = max(self._next["scene"], sid + 1)
            ts = self._tick(strict=False)
            if files is None:
                files = [{"path": f"/data/scenes/scene-{sid}.mp4", "size": 1048576, "duration": 600.0}]
            stamp = rfc3339(ts, self.tz)
            self._scenes[sid] = {
                "id": sid,
                "title": title,
                "code": code,
                "details": details,
                "director": director,
                "urls": list(urls),
                "date": date,
                "rating100": rating100,
                "organized": organized,
                "created_at": stamp,
                "updated_at": stamp,
                "_created_ts": ts,
                "_updated_ts": ts,
                "files": self._make_files(files),
                "_studio_id": self._named("studio", studio) if studio else None,
                "_performer_ids": [self._named("performer", n) for n in performers],
                "_tag_ids": [self._named("tag", n) for n in tags],
                "_group_ids": [self._named("group", n) for n in groups],
                "_cover": None,
                "_has_cover": True,
                "_cover_version": 1,
            }
            return sid

    def update_scene(self, scene_id: int, **changes: Any) -> dict:
        """Apply changes as a `sceneUpdate` would; return the hookContext Stash sends.

        Keys: those of add_scene (`studio=None` clears it), `cover` (bytes, or
        None for no cover), `rating100`, `organized`. A change of `files` only
        is a scan-style update: the context then has `input: null` and no
        `inputFields`.
        """
        unknown = set(changes) - set(_UPDATE_KEYS) - {"files"}
        if unknown:
            raise TypeError(f"unknown scene fields: {sorted(unknown)}")
        if scene_id not in self._scenes:
            raise KeyError(scene_id)
        hook_input = dict.fromkeys(self._hook_input_keys())
        hook_input["id"] = str(scene_id)
        fields = ["id"]
        for key, value in changes.items():
            if key in _UPDATE_KEYS:
                hook_input[_UPDATE_KEYS[key]] = self._input_value(key, value)
                fields.append(_UPDATE_KEYS[key])
        with self._lock:
            self._apply({k: hook_input[k] for k in fields}, scene_id, changes.get("files"))
        if fields == ["id"] and "files" in changes:
            context = {"id": scene_id, "type": "Scene.Update.Post", "input": None}
        else:
            context = {"id": scene_id, "type": "Scene.Update.Post", "input": hook_input, "inputFields": fields}
        self.hook_contexts.append(context)
        self.last_hooks = [context]
        return context

    def set_tag_parents(self, name: str, parents: list[str]) -> dict:
        """``tagUpdate`` of tag ``name`` with ``parent_ids`` (parents created when new).

        Returns the hookContext Stash fires: ``Tag.Update.Post`` for that tag only, with the
        input and the keys sent (resolver_mutation_tag.go ``TagUpdate``). The input is the
        generated ``TagUpdateInput`` as JSON: empty and null fields are left out (``omitempty``).
        """
        with self._lock:
            tid = self._named("tag", name)
            self._tags[tid]["_parent_ids"] = [self._named("tag", p) for p in parents]
            given = {"id": str(tid), "parent_ids": [str(i) for i in self._tags[tid]["_parent_ids"]]}
        return self._entity_hook("tag", "Update", tid, _omit_empty(given), ["id", "parent_ids"])

    def set_studio_parent(self, name: str, parent: str | None) -> dict:
        """``studioUpdate`` of studio ``name`` with ``parent_id``; returns the
        ``Studio.Update.Post`` hookContext (resolver_mutation_studio.go ``StudioUpdate``), fired
        for that studio only."""
        with self._lock:
            sid = self._named("studio", name)
            studio = self._studios[sid]
            studio["_parent_id"] = self._named("studio", parent) if parent else None
            given = {"id": str(sid), "parent_id": str(studio["_parent_id"]) if parent else None}
        return self._entity_hook("studio", "Update", sid, _omit_empty(given), ["id", "parent_id"])

    def delete_scene(self, scene_id: int, delete_file: bool | None = None) -> dict:
        """``sceneDestroy``; returns the hookContext Stash fires after it:
        ``Scene.Destroy.Post`` with the scene's id and, as input, the ``SceneDestroyInput``
        given plus the scene's checksum, oshash and primary path, no inputFields
        (internal/api/resolver_mutation_scene.go ``SceneDestroy`` → ``ExecutePostHooks(ctx,
        s.ID, hook.SceneDestroyPost, plugin.SceneDestroyInput{…}, nil)``; pkg/plugin/hooks.go
        ``SceneDestroyInput``). The file itself stays unless ``delete_file``."""
        with self._lock:
            scene = self._scenes.pop(scene_id)
        given = {"id": str(scene_id), "delete_file": delete_file, "delete_generated": None}
        path = scene["files"][0]["path"] if scene["files"] else ""
        context = {
            "id": scene_id,
            "type": "Scene.Destroy.Post",
            "input": {**given, "checksum": "", "oshash": "", "path": path},
        }
        self.hook_contexts.append(context)
        self.last_hooks = [context]
        return context

    def scene(self, scene_id: int) -> dict:
        """A plain view of a stored scene (names instead of ids), for assertions."""
        s = self._scenes[scene_id]
        view = {k: v for k, v in s.items() if not k.startswith("_")}
        view["files"] = [dict(f) for f in s["files"]]
        view["studio"] = self._studios[s["_studio_id"]]["name"] if s["_studio_id"] else None
        view["performers"] = [self._performers[i]["name"] for i in s["_performer_ids"]]
        view["tags"] = [self._tags[i]["name"] for i in s["_tag_ids"]]
        view["groups"] = [self._groups[i]["name"] for i in s["_group_ids"]]
        view["cover_version"] = s["_cover_version"]
        return view

    def updated_ts(self, scene_id: int) -> int:
        """The scene's ``updated_at`` as epoch seconds (the emulator's logical clock)."""
        return int(self._scenes[scene_id]["_updated_ts"])

    def scene_plays(self, scene_id: int) -> list[int]:
        """The scene's play history as epoch seconds, oldest first."""
        return sorted(self._scenes[scene_id].get("_plays", ()))

    def screenshot_bytes(self, scene_id: int) -> bytes:
        """What `GET /scene/<id>/screenshot` serves for this scene now."""
        s = self._scenes[scene_id]
        if s["_cover"] is not None:
            return s["_cover"]
        return cover_png(scene_id, s["_cover_version"]) if s["_has_cover"] else _DEFAULT_SVG

    def add_job(self, description: str = "Scanning...", status: str = "RUNNING", progress: float | None = None) -> dict:
        with self._lock:
            job = {
                "id": str(self._next["job"]),
                "status": status,
                "description": description,
                "progress": progress,
                "subTasks": None,
                "addTime": rfc3339(self.clock(), self.tz),
                "startTime": None,
                "endTime": None,
                "error": None,
            }
            self._next["job"] += 1
            self.jobs.append(job)
            return job

    def graphql_requests(self, containing: str | None = None) -> list[dict]:
        """Recorded GraphQL requests, optionally only those whose query has `containing`."""
        return [r for r in list(self.requests) if containing is None or containing in r["query"]]

    # -- data: tags, performers, studios and groups ---------------------------
    #
    # Scenes hold entity ids and names are resolved per query, so a rename shows in
    # every scene at once; none of these operations moves a scene's updated_at
    # (Stash changes only the entity's row and the join tables).

    def _entity_tables(self) -> dict[str, dict[int, dict]]:
        return {"studio": self._studios, "performer": self._performers, "tag": self._tags, "group": self._groups}

    def entity_id(self, kind: str, name: str) -> int:
        """The id of the tag/performer/studio/group called ``name`` (KeyError when none)."""
        return self._name_index[kind][name]

    def rename_entity(self, kind: str, entity_id: int, name: str) -> dict:
        """``tagUpdate``/``performerUpdate``/``studioUpdate``/``groupUpdate`` with a new name.

        Returns the hookContext Stash fires: ``<Kind>.Update.Post`` with the entity's id,
        the update input and the keys sent as inputFields
        (Stash: internal/api/resolver_mutation_tag.go ``TagUpdate`` →
        ``ExecutePostHooks(ctx, t.ID, hook.TagUpdatePost, input, translator.getFields())``;
        the same in resolver_mutation_performer.go, _studio.go, _group.go).
        """
        with self._lock:
            entity = self._entity_tables()[kind][entity_id]
            index = self._name_index[kind]
            index.pop(entity["name"], None)
            self._entity_tables()[kind][entity_id] = {**entity, "name": name}
            index[name] = entity_id
        return self._entity_hook(kind, "Update", entity_id, {"id": str(entity_id), "name": name}, ["id", "name"])

    def destroy_entity(self, kind: str, entity_id: int) -> dict:
        """``tagDestroy``/``performerDestroy``/``studioDestroy``/``groupDestroy``.

        The join rows go with the entity (ON DELETE CASCADE) and a scene's studio_id
        becomes NULL (``on delete SET NULL``, pkg/sqlite/migrations/47_scene_urls.up.sql);
        the hook is ``<Kind>.Destroy.Post`` with the id and the ``{id}`` input, no
        inputFields (resolver_mutation_tag.go ``TagDestroy``).
        """
        with self._lock:
            entity = self._entity_tables()[kind].pop(entity_id)
            self._name_index[kind].pop(entity["name"], None)
            self._replace_in_scenes(kind, {entity_id}, None)
        return self._entity_hook(kind, "Destroy", entity_id, {"id": str(entity_id)}, None)

    def merge_tags(self, sources: list[int], destination: int) -> dict:
        """``tagsMerge``: scenes carrying a source tag carry the destination instead
        (once), the sources are deleted (pkg/sqlite/tag.go ``TagStore.Merge``), and the
        hook is ``Tag.Merge.Post`` with the destination's id and the
        ``{source, destination}`` input (resolver_mutation_tag.go ``TagsMerge``)."""
        with self._lock:
            for sid in sources:
                entity = self._tags.pop(sid)
                self._name_index["tag"].pop(entity["name"], None)
            self._replace_in_scenes("tag", set(sources), destination)
        data = {"source": [str(s) for s in sources], "destination": str(destination)}
        return self._entity_hook("tag", "Merge", destination, data, None)

    def merge_performers(self, sources: list[int], destination: int) -> None:
        """``performerMerge``: like tagsMerge for the scenes, but Stash fires NO hook for it
        (resolver_mutation_performer.go ``PerformerMerge`` calls no ExecutePostHooks)."""
        with self._lock:
            for sid in sources:
                entity = self._performers.pop(sid)
                self._name_index["performer"].pop(entity["name"], None)
            self._replace_in_scenes("performer", set(sources), destination)

    def _replace_in_scenes(self, kind: str, gone: set[int], instead: int | None) -> None:
        """Scenes are replaced, never mutated (readers hold snapshots); updated_at stays."""
        for sid, scene in list(self._scenes.items()):
            if kind == "studio":
                if scene["_studio_id"] in gone:
                    self._scenes[sid] = {**scene, "_studio_id": instead}
                continue
            key = f"_{kind}_ids"
            if not gone.intersection(scene[key]):
                continue
            ids = [i for i in scene[key] if i not in gone]
            if instead is not None and instead not in ids:
                ids.append(instead)
            self._scenes[sid] = {**scene, key: ids}

    def set_performer_image(self, performer_id: int, image: bytes | None) -> dict:
        """``performerUpdate`` with a new image (None: the image removed), as the performer's
        page does: the image is stored, ``updated_at`` moves (so does ``image_path``'s ``t``:
        internal/api/urlbuilders/performer.go), and the hook is ``Performer.Update.Post`` with
        ``image`` among its inputFields (resolver_mutation_performer.go ``PerformerUpdate``)."""
        with self._lock:
            old = self._performers[performer_id]
            self._performers[performer_id] = {**old, "_image": image, "_updated_ts": self._tick(strict=True)}
        data = None if image is None else f"data:{image_type(image)};base64,{base64.b64encode(image).decode()}"
        given = {"id": str(performer_id), "image": data}
        return self._entity_hook("performer", "Update", performer_id, given, ["id", "image"])

    def performer_image_url(self, performer_id: int, base: str | None = None) -> str:
        """The performer's ``image_path`` as Stash answers it to a client of ``base`` (default: ``url``)."""
        with self._lock:
            performer = self._performers[performer_id]
        return self._performer_image_path(performer, None, base or self.url)

    def performer_image(self, performer_id: int, default: bool = False) -> bytes:
        """What ``GET /performer/<id>/image`` serves: its image, else (or with ``default=true``)
        a generic one (internal/api/routes_performer.go ``Image``)."""
        image = self._performers[performer_id]["_image"]
        return _DEFAULT_SVG if default or image is None else image

    def _performer_image_path(self, performer: dict, info: Any, base: str = "") -> str:
        """``<base>/performer/<id>/image?t=<updated_at>``, plus ``&default=true`` without an image
        (internal/api/urlbuilders/performer.go ``GetPerformerImageURL``; base as for paths)."""
        root = self.external_host.rstrip("/") or base or info.context["base_url"]
        url = f"{root}/performer/{performer['id']}/image?t={performer['_updated_ts']}"
        return url if performer.get("_image") is not None else f"{url}&default=true"

    def _entity_hook(self, kind: str, op: str, entity_id: int, given: dict, fields: list[str] | None) -> dict:
        """Append the hookContexts Stash fires for this change (``last_hooks``) and return
        the first. A group's change fires ``Movie.*`` alone before v0.27 and ``Group.*`` then
        ``Movie.*`` from v0.27 (``stash_releases.group_hook_kinds``)."""
        names = [kind.capitalize()]
        if kind == "group":
            names = list(stash_releases.group_hook_kinds(self._played(), self._triggers))
        contexts: list[dict] = []
        for name in names:
            context: dict[str, Any] = {"id": entity_id, "type": f"{name}.{op}.Post", "input": given}
            if fields:
                context["inputFields"] = fields
            contexts.append(context)
        self.hook_contexts.extend(contexts)
        self.last_hooks = contexts
        return contexts[0]

    def _played(self) -> stash_releases.Version:
        """The release this emulator plays (its ``version`` answer decides)."""
        return stash_releases.version_of(self.version)

    def _hook_input_keys(self) -> tuple[str, ...]:
        return stash_releases.hook_input_keys(HOOK_INPUT_KEYS, self._played())

    def _stored_date(self, value: Any) -> str | None:
        try:
            return stash_releases.stored_date(value, self._played())
        except ValueError as exc:
            raise GraphQLError(str(exc)) from None

    # -- internals: mutation ------------------------------------------------

    def _tick(self, strict: bool) -> int:
        """Whole-second logical clock; strict ticks are above every earlier stamp."""
        now = int(self.clock())
        if strict:
            now = max(now, self._last_ts + 1)
        self._last_ts = max(self._last_ts, now)
        return now

    def _named(self, kind: str, name: str) -> int:
        """Id of the studio/performer/tag with this name, created when new."""
        index = self._name_index.setdefault(kind, {})
        if name not in index:
            table = self._entity_tables()
            oid = index[name] = self._next[kind]
            self._next[kind] += 1
            table[kind][oid] = {"id": oid, "name": name, "_parent_id": None, "_parent_ids": []}
            table[kind][oid].update(_updated_ts=int(self.clock()), _image=None)
        return index[name]

    def _make_files(self, files: list[dict]) -> list[dict]:
        made = []
        for f in files:
            made.append(
                {
                    "id": self._next["file"],
                    "path": f["path"],
                    "basename": _basename(f["path"]),
                    "size": int(f.get("size", 0)),
                    "duration": float(f.get("duration", 0.0)),
                }
            )
            self._next["file"] += 1
        return made

    def _input_value(self, key: str, value: Any) -> Any:
        """The SceneUpdateInput value a client would send for an update_scene change."""
        with self._lock:
            if key == "studio":
                return str(self._named("studio", value)) if value else None
            if key in ("performers", "tags"):
                return [str(self._named(key[:-1], n)) for n in value]
        if key == "cover":
            return None if value is None else (f"data:{image_type(value)};base64,{base64.b64encode(value).decode()}")
        return list(value) if key == "urls" else value

    def _apply(self, update: dict, scene_id: int, files: list[dict] | None = None) -> dict:
        """Apply a SceneUpdateInput-shaped dict (caller holds the lock)."""
        old = self._scenes.get(scene_id)
        if old is None:
            raise GraphQLError(f"scene with id {scene_id} not found")
        new = dict(old)
        for key in ("title", "code", "details", "director", "rating100"):
            if key in update:
                new[key] = update[key]
        if "date" in update:
            new["date"] = self._stored_date(update["date"])
        if "organized" in update:
            new["organized"] = bool(update["organized"])
        if "urls" in update:
            new["urls"] = list(update["urls"] or [])
        if "studio_id" in update:
            new["_studio_id"] = self._lookup(self._studios, update["studio_id"], "studio")
        if "performer_ids" in update:
            new["_performer_ids"] = [
                self._lookup(self._performers, i, "performer") for i in update["performer_ids"] or []
            ]
        if "tag_ids" in update:
            new["_tag_ids"] = [self._lookup(self._tags, i, "tag") for i in update["tag_ids"] or []]
        if "groups" in update:  # SceneUpdateInput.groups: [SceneGroupInput {group_id, scene_index}]
            new["_group_ids"] = [self._lookup(self._groups, g["group_id"], "group") for g in update["groups"] or []]
        if "cover_image" in update:
            new["_cover"] = _decode_data_url(update["cover_image"])
            new["_has_cover"] = new["_cover"] is not None
            new["_cover_version"] = old["_cover_version"] + 1
        if files is not None:
            new["files"] = self._make_files(files)
        ts = self._tick(strict=True)
        new["_updated_ts"], new["updated_at"] = ts, rfc3339(ts, self.tz)
        self._scenes[scene_id] = new
        return new

    @staticmethod
    def _lookup(table: dict[int, dict], oid: Any, kind: str) -> int | None:
        if oid is None:
            return None
        try:
            key = int(oid)
        except (TypeError, ValueError):
            raise GraphQLError(f"invalid {kind} id: {oid}") from None
        if key not in table:
            raise GraphQLError(f"{kind} with id {key} not found")
        return key

    # -- internals: GraphQL --------------------------------------------------

    def _root(self) -> dict[str, Callable]:
        return {
            "version": lambda _info: {**VERSION, "version": self.version},
            # username: set while Stash asks for a login (a username and password configured)
            "configuration": lambda _info: {
                "general": {"apiKey": self.api_key, "username": "stash-user" if self.auth_required else ""},
                "plugins": self._resolve_plugins,
            },
            "findScene": self._resolve_find_scene,
            "findScenes": self._resolve_find_scenes,
            "findTags": self._resolve_find_tags,
            "jobQueue": lambda _info: (
                [self._job_view(j) for j in self.jobs if j.get("status", "RUNNING") in _ACTIVE_JOB_STATES] or None
            ),
            "findJob": lambda _info, input: next(
                (self._job_view(j) for j in self.jobs if str(j.get("id")) == str(input["id"])), None
            ),
            "sceneUpdate": self._resolve_scene_update,
            "bulkSceneUpdate": self._resolve_bulk_scene_update,
            "configurePlugin": self._resolve_configure_plugin,
            "sceneAddPlay": self._resolve_scene_add_play,
            "sceneSaveActivity": self._resolve_scene_save_activity,
        }

    def _resolve_scene_add_play(self, _info: Any, id: str, times: list[str] | None = None) -> dict:
        """``sceneAddPlay`` as Stash v0.25-v0.30 does it (internal/api/resolver_mutation_scene.go
        ``SceneAddPlay`` → ``viewHistoryTable.addDates``, pkg/sqlite/history.go): one row per
        time, whole seconds, no unique key, so the same time twice is two plays; no times is
        one play now. Fires no plugin hook."""
        scene_id = self._lookup(self._scenes, id, "scene")
        stamps = []
        for text in times or []:
            value = parse_timestamp(text)
            if value is None or "T" not in text:
                raise GraphQLError(f"invalid time: {text}")
            stamps.append(int(value))
        with self._lock:
            old = self._scenes[scene_id]  # type: ignore[index]
            plays = list(old.get("_plays", ())) + (stamps or [int(time.time())])
            self._scenes[scene_id] = {**old, "_plays": plays}  # type: ignore[index]
            self.play_writes += 1
        history = [rfc3339(t, timezone.utc) for t in sorted(plays, reverse=True)]
        return {"count": len(plays), "history": history}

    def _resolve_scene_save_activity(
        self, _info: Any, id: str, resume_time: float | None = None, playDuration: float | None = None
    ) -> bool:
        """``sceneSaveActivity`` (SceneStore.SaveActivity, pkg/sqlite/scene.go): resume_time is
        set when given; play_duration grows by playDuration (not idempotent). No plugin hook."""
        scene_id = self._lookup(self._scenes, id, "scene")
        with self._lock:
            new = dict(self._scenes[scene_id])  # type: ignore[index]
            if resume_time is not None:
                new["resume_time"] = resume_time
            if playDuration is not None:
                new["play_duration"] = (new.get("play_duration") or 0.0) + playDuration
            self._scenes[scene_id] = new  # type: ignore[index]
            self.activity_writes += 1
        return True

    def _job_view(self, job: dict) -> dict:
        view = dict.fromkeys(("subTasks", "progress", "startTime", "endTime", "error"))
        view.update(status="RUNNING", description="", addTime=rfc3339(self.clock(), self.tz))
        view.update(job)
        return view

    def _resolve_plugins(self, _info: Any, include: list[str] | None = None) -> dict:
        """Stash: no/empty `include` gives every stored map; otherwise only non-empty ones."""
        settings = self.plugin_settings
        if not include:
            return dict(settings)
        return {k: settings[k] for k in include if settings.get(k)}

    def _resolve_configure_plugin(self, _info: Any, plugin_id: str, input: dict) -> dict:
        self.plugin_settings[plugin_id] = dict(input)
        return self.plugin_settings[plugin_id]

    def _resolve_paths(self, scene: dict, info: Any) -> dict:
        # Stash: BaseURLMiddleware uses external_host instead of the request's host when
        # it is set [S:internal/api/server.go `BaseURLMiddleware`], and the screenshot URL
        # is BaseURL + /scene/<id>/screenshot?t=<updated_at> [S:internal/api/urlbuilders/scene.go].
        root = self.external_host.rstrip("/") or info.context["base_url"]
        base = f"{root}/scene/{scene['id']}"
        stream = f"{base}/stream" + (f"?apikey={self.api_key}" if self.api_key else "")
        return {
            "screenshot": f"{base}/screenshot?t={scene['_updated_ts']}",
            "preview": f"{base}/preview",
            "stream": stream,
        }

    def _resolve_find_scene(self, _info: Any, id: str | None = None, checksum: str | None = None) -> dict | None:
        if id is None:
            return None
        try:
            return self._scenes.get(int(id))
        except ValueError:
            raise GraphQLError(f"invalid scene id: {id}") from None

    def _resolve_scene_update(self, _info: Any, input: dict) -> dict:
        scene_id = self._lookup(self._scenes, input["id"], "scene")
        with self._lock:
            new = self._apply(input, scene_id)  # type: ignore[arg-type]
        hook_input = dict.fromkeys(self._hook_input_keys())
        hook_input.update(input)
        context = {"id": scene_id, "type": "Scene.Update.Post", "input": hook_input, "inputFields": list(input)}
        self.hook_contexts.append(context)
        self.last_hooks = [context]
        return new

    def _resolve_bulk_scene_update(self, _info: Any, input: dict) -> list[dict]:
        """``bulkSceneUpdate`` as Stash's ``BulkSceneUpdate`` does it
        [S:internal/api/resolver_mutation_scene.go `BulkSceneUpdate`]: one partial update
        applied to every scene in one transaction (an error leaves every scene as it was),
        then, outside it, ``Scene.Update.Post`` for each scene with the *bulk* input itself
        and the keys the caller sent as inputFields (``ExecutePostHooks(ctx, scene.ID,
        hook.SceneUpdatePost, input, translator.getFields())``). The input is gqlgen's
        generated ``BulkSceneUpdateInput`` marshalled to JSON, whose nullable fields carry
        ``omitempty`` (gqlgen modelgen's default since PR #2436): only keys with a value
        appear. ``group_ids`` wins over ``movie_ids`` (``translator.hasField("group_ids")``).
        """
        ids = [int(self._lookup(self._scenes, i, "scene")) for i in input.get("ids") or []]  # type: ignore[arg-type]
        with self._lock:
            before = dict(self._scenes)
            try:
                for sid in ids:
                    self._apply(self._bulk_as_update(self._scenes[sid], input), sid)
            except GraphQLError:
                self._scenes = before  # the transaction is rolled back
                raise
        given = _omit_empty(input)
        contexts = [{"id": sid, "type": "Scene.Update.Post", "input": given, "inputFields": list(input)} for sid in ids]
        self.hook_contexts.extend(contexts)
        self.last_hooks = contexts
        return [self._scenes[sid] for sid in ids]

    def _bulk_as_update(self, scene: dict, bulk: dict) -> dict:
        """One scene's SceneUpdateInput-shaped change for a BulkSceneUpdateInput: ``{ids, mode}``
        values applied to what the scene has (SET replaces, ADD appends the missing ones,
        REMOVE drops; pkg/models/update.go ``RelationshipUpdateMode``)."""
        update = {k: bulk[k] for k in ("title", "code", "details", "director", "date", "rating100") if k in bulk}
        if "organized" in bulk:
            update["organized"] = bulk["organized"]
        if "studio_id" in bulk:
            update["studio_id"] = bulk["studio_id"]
        if bulk.get("urls") is not None:
            update["urls"] = _bulk_values(scene["urls"], bulk["urls"]["mode"], bulk["urls"].get("values") or [])
        for key, table, kind in (("performer_ids", self._performers, "performer"), ("tag_ids", self._tags, "tag")):
            if bulk.get(key) is not None:
                given = [self._lookup(table, i, kind) for i in bulk[key].get("ids") or []]
                update[key] = [str(i) for i in _bulk_values(scene[f"_{kind}_ids"], bulk[key]["mode"], given)]
        groups = bulk.get("group_ids") if "group_ids" in bulk else bulk.get("movie_ids")
        if groups is not None:
            given = [self._lookup(self._groups, i, "group") for i in groups.get("ids") or []]
            update["groups"] = [{"group_id": str(i)} for i in _bulk_values(scene["_group_ids"], groups["mode"], given)]
        if (bulk.get("gallery_ids") or {}).get("ids"):
            raise GraphQLError("gallery with id %s not found" % bulk["gallery_ids"]["ids"][0])  # no galleries here
        return update

    def _resolve_find_scenes(
        self,
        _info: Any,
        filter: dict | None = None,
        scene_filter: dict | None = None,
        ids: list[str] | None = None,
        scene_ids: list[int] | None = None,
    ) -> dict:
        find = filter or {}
        if ids or scene_ids:
            # Stash: with a non-empty id list, FindScenes calls SceneStore.FindMany and
            # ignores scene_filter, paging and sorting; scenes come back in the order asked
            # [S:internal/api/resolver_query_find_scene.go `FindScenes`].
            found = self._find_many(ids or [str(i) for i in scene_ids or []])
            return {
                "count": len(found),
                "scenes": found,
                "duration": lambda _i: sum(s["files"][0]["duration"] for s in found if s["files"]),
                "filesize": lambda _i: float(sum(s["files"][0]["size"] for s in found if s["files"])),
            }
        scenes = self._candidates(ids, scene_ids)
        if scene_filter:
            scenes = [s for s in scenes if self._matches(s, scene_filter)]
        if find.get("q"):
            words = find["q"].casefold().split()
            scenes = [s for s in scenes if all(w in _search_text(s) for w in words)]
        scenes = _sorted(scenes, find.get("sort"), find.get("direction") or "ASC")
        per_page = find.get("per_page")
        per_page = 25 if per_page is None else per_page
        page = max(find.get("page") or 1, 1)
        window = scenes if per_page < 0 else scenes[(page - 1) * per_page : page * per_page]
        return {
            "count": len(scenes),
            "scenes": window,
            "duration": lambda _i: sum(s["files"][0]["duration"] for s in scenes if s["files"]),
            "filesize": lambda _i: float(sum(s["files"][0]["size"] for s in scenes if s["files"])),
        }

    def _resolve_find_tags(self, _info: Any, filter: dict | None = None) -> dict:
        """Tags by name, paged like findScenes (per_page -1: all; default 25), as
        internal/api/resolver_query_find_tag.go FindTags with no tag_filter."""
        find = filter or {}
        with self._lock:
            tags = sorted(self._tags.values(), key=lambda t: (t["name"].casefold(), t["id"]))
        per_page = find.get("per_page")
        per_page = 25 if per_page is None else per_page
        page = max(find.get("page") or 1, 1)
        window = tags if per_page < 0 else tags[(page - 1) * per_page : page * per_page]
        return {"count": len(tags), "tags": window}

    def _find_many(self, raw_ids: list[str]) -> list[dict]:
        """Stash's SceneStore.FindMany: the whole query fails when any id is missing.

        [S:pkg/sqlite/scene.go `FindMany`] places each found scene at the first index of
        its id (``slices.Index``) and then returns ``scene with id N not found`` for the
        first empty slot, so a missing id, and also a repeated one, fails the query. As
        ``findScenes`` is non-null the reply is ``{"errors": [...], "data": null}``.
        """
        try:
            wanted = [int(raw) for raw in raw_ids]
        except ValueError:
            raise GraphQLError(f"invalid ids: {raw_ids}") from None
        scenes = self._scenes
        slots: list[dict | None] = [None] * len(wanted)
        for sid in dict.fromkeys(wanted):
            if sid in scenes:
                slots[wanted.index(sid)] = scenes[sid]
        for i, scene in enumerate(slots):
            if scene is None:
                raise GraphQLError(f"scene with id {wanted[i]} not found")
        return [s for s in slots if s is not None]

    def _candidates(self, ids: list[str] | None, scene_ids: list[int] | None) -> list[dict]:
        scenes = self._scenes
        if ids is None and scene_ids is None:
            with self._lock:
                return list(scenes.values())
        wanted: set[int] = set(scene_ids or [])
        for raw in ids or []:
            try:
                wanted.add(int(raw))
            except ValueError:
                raise GraphQLError(f"invalid scene id: {raw}") from None
        return [scenes[i] for i in sorted(wanted) if i in scenes]

    def _matches(self, s: dict, crit: dict) -> bool:
        for name in ("updated_at", "created_at"):
            if crit.get(name) and not self._time_match(s, name, crit[name]):
                return False
        if crit.get("id") and not _compare(
            crit["id"]["modifier"], s["id"], crit["id"]["value"], crit["id"].get("value2")
        ):
            return False
        if crit.get("organized") is not None and s["organized"] != crit["organized"]:
            return False
        if crit.get("title") and not _string_match(crit["title"]["modifier"], [s["title"]], crit["title"]["value"]):
            return False
        paths = [f["path"] for f in s["files"]]
        return not crit.get("path") or _string_match(crit["path"]["modifier"], paths, crit["path"]["value"])

    def _time_match(self, s: dict, name: str, crit: dict) -> bool:
        """Stash compares the stored RFC3339 text with the given text, as text.

        Timestamps are stored as ``time.RFC3339`` text in the server's zone
        [S:pkg/sqlite/timestamp.go `Timestamp.Value`], and the criterion becomes
        ``column > ?`` with the caller's string [S:pkg/sqlite/sql.go
        `getTimestampWhereClause`]: SQLite compares the two as text. A value in another
        zone or form therefore compares wrongly, exactly as it does in Stash.
        BETWEEN without value2 ends at now + 1 day, formatted in the server's zone.
        """
        modifier, v1, v2 = crit["modifier"], crit["value"], crit.get("value2")
        if v2 is None:
            v2 = rfc3339(self.clock() + 86400, self.tz)
        return _compare(modifier, s[name], v1, v2)

    def _argument_too_new(self, query: str) -> str | None:
        """An older server's schema validation error for arguments added in v0.25.0.

        ``findScenes(ids: [ID!])`` and ``configuration.plugins(include: [ID!])`` first
        appear in v0.25.0 [S:graphql/schema/schema.graphql at v0.25.0]; before that gqlgen
        rejects the query with 422 "Unknown argument".
        """
        match = re.match(r"v?(\d+)\.(\d+)", self.version)
        if not match or (int(match.group(1)), int(match.group(2))) >= (0, 25):
            return None
        for field_name, arg in (("findScenes", "ids"), ("plugins", "include")):
            if re.search(rf"{field_name}\s*\([^)]*\b{arg}\s*:", query):
                return f'Unknown argument "{arg}" on field "{field_name}".'
        return None

    def _document(self, query: str) -> DocumentNode | list[GraphQLError]:
        """Parse and validate once per query text; errors are returned, not raised. Against
        the default schema the result is shared by every emulator of the process: their
        schemas come from the same SDL and differ only in resolvers, which validation does
        not look at (the suite starts hundreds of emulators that send the same queries)."""
        documents = self._documents if self.ui is not None else _DEFAULT_DOCUMENTS.setdefault(self.release, {})
        cached = documents.get(query)
        if cached is None:
            try:
                doc = parse(query)
            except GraphQLError as err:
                return [err]
            errors = validate(self._active_schema(), doc)
            cached = errors if errors else doc
            if len(documents) < 512:
                documents[query] = cached
        return cached

    def _active_schema(self) -> GraphQLSchema:
        return self.ui.schema if self.ui is not None else self._schema

    def execute(self, body: dict, base_url: str) -> tuple[int, dict]:
        """Run one GraphQL request body; return (HTTP status, response JSON)."""
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return 422, {"errors": [{"message": "no operation provided"}], "data": None}
        missing = self._argument_too_new(query)
        if missing:
            return 422, {"errors": [{"message": missing}], "data": None}
        doc = self._document(query)
        if isinstance(doc, list):
            return 422, {"errors": [e.formatted for e in doc], "data": None}
        key = ("ui" if self.ui is not None else self.release, query)
        if key in _INTROSPECTIONS and not body.get("variables"):
            return 200, _INTROSPECTIONS[key]
        root = self._root()
        extra: dict[str, Any] = {}
        if self.ui is not None or self.release:
            # the full schema: fields the emulator does not model answer their zero value
            from tests.emulators.stash_ui import defaulting_resolver

            extra["field_resolver"] = defaulting_resolver
        if self.ui is not None:
            root.update(self.ui.root())
        result = execute(
            self._active_schema(),
            doc,
            root_value=root,
            **extra,
            context_value={"base_url": base_url, "emulator": self},
            variable_values=body.get("variables") or None,
            operation_name=body.get("operationName"),
        )
        payload: dict[str, Any] = {}
        if result.errors:
            payload["errors"] = [e.formatted for e in result.errors]
            if result.data is None and all(e.path is None for e in result.errors):
                return 422, {"errors": payload["errors"], "data": None}
        payload["data"] = result.data
        if not result.errors and not body.get("variables") and _introspection_only(doc):
            _INTROSPECTIONS[key] = payload  # the schema's own description: the same for every emulator of it
        return 200, payload


# Introspection answers per (release or "ui", query text): stashapi introspects the whole
# schema each time it connects, which takes graphql-core longer than the rest of a run.
_INTROSPECTIONS: dict[tuple[str | None, str], dict] = {}


def _introspection_only(doc: DocumentNode) -> bool:
    """Whether every operation of ``doc`` selects only ``__schema``/``__type`` (no data)."""
    operations = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    return bool(operations) and all(
        isinstance(sel, FieldNode) and sel.name.value.startswith("__")
        for op in operations
        for sel in op.selection_set.selections
    )


def _decode_data_url(value: str | None) -> bytes | None:
    if value is None:
        return None
    match = re.match(r"^data:[^;,]*;base64,(.*)$", value, re.DOTALL)
    if not match:
        raise GraphQLError("cover_image: only base64 data URLs are supported by the emulator")
    try:
        return base64.b64decode(match.group(1), validate=True)
    except binascii.Error:
        raise GraphQLError("cover_image: invalid base64") from None


def _bulk_values(current: list, mode: str, given: list) -> list:
    """A bulk ``{ids|values, mode}`` change applied to a scene's list."""
    if mode == "SET":
        return list(dict.fromkeys(given))
    if mode == "ADD":
        return current + [v for v in dict.fromkeys(given) if v not in current]
    return [v for v in current if v not in given]


def _omit_empty(value: Any) -> Any:
    """A GraphQL input as Go's encoding/json writes a struct whose nullable fields are
    ``omitempty``: nil pointers and empty slices are left out, at every depth (an empty
    string behind a pointer stays)."""
    if isinstance(value, dict):
        return {k: _omit_empty(v) for k, v in value.items() if v is not None and v != []}
    return value


def _search_text(s: dict) -> str:
    parts = [s["title"], s["details"], s["code"]] + [f["path"] for f in s["files"]]
    return " ".join(p for p in parts if p).casefold()


def _sorted(scenes: list[dict], sort: str | None, direction: str) -> list[dict]:
    """Order as Stash's ORDER BY would: NULLs first ascending, id breaks ties."""
    if sort is None:
        return scenes
    if sort == "random" or sort.startswith("random_"):
        seed = sort.partition("_")[2] or "0"
        shuffled = sorted(scenes, key=lambda s: s["id"])
        random.Random(seed).shuffle(shuffled)
        return shuffled
    key = _SORT_KEYS.get(sort)
    if key is None:
        raise GraphQLError(f"invalid sort: {sort}")

    def order(s: dict) -> tuple:
        value = key(s)
        return (value is not None, value if value is not None else 0, s["id"])

    return sorted(scenes, key=order, reverse=direction == "DESC")


# --- HTTP ----------------------------------------------------------------------


class _Handler(TrackedHandler):
    protocol_version = "HTTP/1.1"
    # Stash is a Go net/http server, and Go sets TCP_NODELAY on every TCP connection it
    # accepts (golang/go src/net/tcpsock.go, newTCPConn: setNoDelay(fd, true)). Without
    # it our headers and body go out as two small writes and the client's delayed ACK
    # stalls every keep-alive reply by ~40 ms, which Stash itself never does.
    disable_nagle_algorithm = True
    server_version = "StashEmulator/0.30.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    @property
    def emu(self) -> StashEmulator:
        return self.server.emulator  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        started = time.time()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlsplit(self.path).path != "/graphql":
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
            return
        status, payload = self._graphql(raw)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        query = body.get("query") if isinstance(body.get("query"), str) else ""
        match = _OPERATION_RE.match(query)
        record = {
            "operation": body.get("operationName") or (match.group(1) if match else None),
            "query": query,
            "variables": body.get("variables") or {},
            "status": status,
            "time": started,
        }
        self.emu.requests.append(record)
        if self.emu.on_graphql is not None:
            self.emu.on_graphql(record)
        if isinstance(payload, bytes):
            self._send(status, payload, "text/html; charset=utf-8")
        else:
            self._send(status, json.dumps(payload).encode(), "application/json")

    def _graphql(self, raw: bytes) -> tuple[int, dict | bytes]:
        emu = self.emu
        if emu.latency:
            time.sleep(emu.latency)
        if not self._authorised():
            return 401, {"errors": [{"message": "unauthorized"}], "data": None}
        if emu.fail_html:
            return 200, _HTML_PAGE
        if emu.fail_graphql_errors:
            return 200, {"errors": [{"message": "database is locked"}], "data": None}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"errors": [{"message": "json request body could not be decoded"}], "data": None}
        if not isinstance(body, dict):
            return 400, {"errors": [{"message": "json request body must be an object"}], "data": None}
        host = self.headers.get("Host") or emu.url.split("://", 1)[1]
        return emu.execute(body, f"{emu.scheme}://{host}")

    def do_GET(self) -> None:
        emu = self.emu
        if emu.ui is not None and emu.ui.handle_get(self):
            return
        path = urlsplit(self.path).path
        if path.startswith("/login"):  # served to anyone (internal/api/authentication.go allowUnauthenticated)
            self._send(200, _HTML_PAGE, "text/html; charset=utf-8")
            return
        performer = _PERFORMER_IMAGE_RE.match(path)
        if performer is not None:
            self._performer_image(int(performer.group(1)))
            return
        match = _SCREENSHOT_RE.match(urlsplit(self.path).path)
        if emu.latency:
            time.sleep(emu.latency)
        if self._refused():
            return
        if emu.fail_html or (emu.images_login_page and match is not None):
            self._send(200, _HTML_PAGE, "text/html; charset=utf-8")
        elif match is None:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
        else:
            scene_id = int(match.group(1))
            emu.screenshot_requests.append(scene_id)
            emu.screenshot_headers.append(dict(self.headers))
            try:
                data = emu.screenshot_bytes(scene_id)
            except KeyError:
                self._send(404, b"Not Found\n", "text/plain; charset=utf-8")
                return
            if emu.image_trickle_s:
                self._trickle(data, image_type(data), emu.image_trickle_s)
            else:
                self._send(200, data, image_type(data))

    def _performer_image(self, performer_id: int) -> None:
        """``GET /performer/<id>/image`` behind Stash's authentication middleware (internal/api/
        server.go mounts ``/performer`` after ``r.Use(authenticateHandler())``; authentication.go
        ``authenticateHandler``, as every image route: ``_refused``; the fixtures' API key goes with
        a login, as Stash makes one only for a user); else the image (internal/api/
        routes_performer.go ``Image``)."""
        emu = self.emu
        query = parse_qs(urlsplit(self.path).query)
        record = {"path": self.path, "headers": dict(self.headers), "status": 200}
        emu.performer_image_requests.append(record)
        refused = self._refused()
        if refused:
            record["status"] = refused
            return
        try:
            data = emu.performer_image(performer_id, default=query.get("default") == ["true"])
        except KeyError:
            record["status"] = 404
            self._send(404, b"Not Found\n", "text/plain; charset=utf-8")
            return
        self._send(200, data, image_type(data))

    def _refused(self) -> int:
        """Stash's authentication middleware on a route other than GraphQL (internal/api/
        authentication.go ``authenticateHandler``): a wrong API key is 401 (pkg/session/session.go
        ``Authenticate``); with a login configured (``auth_required``: ``HasCredentials``) and no
        valid credential (an expired session reads as none: ``GetSessionUserID``), a page (a path
        without an extension, or ``.html``; not ``/graphql``) is redirected to the login page (302
        to ``/login?returnURL=…``), anything else is 401. The status sent, or 0 when the request
        may go on."""
        if self._authorised():
            return 0
        emu = self.emu
        key = self.headers.get("ApiKey") or (parse_qs(urlsplit(self.path).query).get("apikey") or [None])[0]
        path = urlsplit(self.path).path
        page = path != "/graphql" and posixpath.splitext(path)[1] in ("", ".html")  # else 401, not the login page
        if key is not None or emu.fail_401 or not emu.auth_required or not page:
            self._send(401, b"", "text/plain; charset=utf-8", {"WWW-Authenticate": "FormBased"})
            return 401
        target = "/login?" + urlencode({"returnURL": self.path})
        self._send(302, b"", "text/html; charset=utf-8", {"Location": target})
        return 302

    def _trickle(self, body: bytes, content_type: str, pause_s: float) -> None:
        """A slow link, or a server that stalls mid-reply: one byte per ``pause_s``; stops
        when the client hangs up."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for at in range(len(body)):
                self.wfile.write(body[at : at + 1])
                self.wfile.flush()
                time.sleep(pause_s)
        except OSError:
            self.close_connection = True

    def _authorised(self) -> bool:
        emu = self.emu
        if emu.fail_401:
            return False
        key = self.headers.get("ApiKey") or (parse_qs(urlsplit(self.path).query).get("apikey") or [None])[0]
        if key is not None:
            return bool(emu.api_key) and key == emu.api_key
        if not emu.auth_required:
            return True
        # Go's Request.Cookie(name) returns the FIRST cookie of that name in the header
        # (net/http readCookies keeps header order); gorilla/sessions reads that one only.
        cookies = [c.strip().partition("=") for c in (self.headers.get("Cookie") or "").split(";")]
        value = next((v for n, _, v in cookies if n == "session"), None)
        if value is None or not emu.cookie_valid(value):
            return False
        # A good session is saved again: a Set-Cookie with a fresh value on the answer
        # (GetSessionUserID → session.Save; CookieStore options Path "/", MaxAge, SameSite Lax).
        renewed = emu.issue_cookie()
        expires = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(emu.clock() + emu.session_max_age))
        max_age = int(emu.session_max_age)
        self._renewed = f"session={renewed}; Path=/; Expires={expires}; Max-Age={max_age}; SameSite=Lax"
        return True

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        renewed, self._renewed = getattr(self, "_renewed", None), None
        if renewed:
            self.send_header("Set-Cookie", renewed)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(argv: list[str] | None = None) -> int:
    """Serve a seeded emulator until interrupted (for manual poking)."""
    import argparse

    parser = argparse.ArgumentParser(description="Stash emulator")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenes", type=int, default=10)
    parser.add_argument("--no-auth", action="store_true")
    args = parser.parse_args(argv)
    emu = StashEmulator(port=args.port)
    emu.auth_required = not args.no_auth
    for n in range(1, args.scenes + 1):
        emu.add_scene(
            title=f"Scene {n}",
            studio=f"Studio {n % 5}",
            tags=[f"tag{n % 7}"],
            performers=[f"Performer {n % 11}"],
            date="2024-01-01",
        )
    emu.start()
    print(json.dumps({"url": emu.url, "server_connection": emu.server_connection("/tmp/plugins/x")}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
