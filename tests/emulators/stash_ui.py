"""Stash's web server for browser tests: the real web UI, plugin UI files, plugin runs.

Attached to a :class:`~tests.emulators.stash_emulator.StashEmulator` with
``emu.serve_ui(build_dir, schema_dir)``. Then the emulator answers GraphQL against
Stash's **full** schema (``schema_dir``, the real ``graphql/`` folder), serves the
prebuilt UI the way Stash's Go server does, and runs installed plugins as Stash does.
Each behaviour names the upstream code it follows (stashapp/stash at cf3489e):

- static files and the app fallback: ``internal/api/server.go`` (``Start``: the UI
  file server, ``index.html`` for every path without an extension, ``%COLOR%``
  replaced); JS/CSS/SVG/Markdown exist only as ``.gz`` in the build and are sent with
  ``Content-Encoding: gzip``;
- ``/css``, ``/javascript`` (the user's custom CSS/JS, ``cssHandler``/``javascriptHandler``
  in ``server.go``) and ``/customlocales``;
- ``/plugin/{id}/javascript|css|assets``: ``internal/api/routes_plugin.go`` (the
  files listed in the plugin YAML's ``ui.javascript``/``ui.css`` concatenated, each
  followed by a newline, ``serveFiles`` in ``server.go``; 400 "plugin disabled");
- ``plugins { paths }``: ``internal/api/resolver_model_plugin.go`` (``pluginURLBuilder``:
  ``<base>/plugin/<id>/javascript`` only when the plugin lists UI files);
- ``runPluginOperation``: ``internal/api/resolver_mutation_plugin.go`` and
  ``pkg/plugin/plugins.go`` (``Cache.RunPlugin``: "plugin X is disabled"; stdin
  ``{server_connection, args}`` with exactly the given args; the reply's ``error``
  becomes a GraphQL error, else its ``output`` is returned);
- ``runPluginTask``: ``internal/manager/task_plugin.go`` (a job "Running plugin task:
  <name>", progress from the plugin's ``\\x01p\\x02`` lines) with ``defaultArgs``
  applied under the given ``args_map`` (``pkg/plugin/args.go`` ``applyDefaultArgs``);
- the websocket on ``/graphql`` (gqlgen ``transport.Websocket`` with the
  ``graphql-transport-ws`` protocol, ``internal/api/server.go``): ``connection_init`` is
  acknowledged, ``ping`` answered, and ``jobsSubscribe`` gets ADD/UPDATE/REMOVE events.

Fields the emulator does not model answer their type's zero value (empty string,
0, false, empty list, an object of zero values): the schema still validates every
query the UI sends, so a misspelt field or a wrong argument fails as in Stash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import os
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml
from graphql import (
    GraphQLEnumType,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    build_schema,
    default_field_resolver,
)

from tests import reference
from tests.runner import REPO, build_argv, decode_stderr, parse_reply

UI_BUILD = reference.path("stash-ui/build")  # Stash's prebuilt web UI (never shipped)
SCHEMA_DIR = reference.path("stash-schema")  # Stash's full GraphQL schema
THEME_COLOR = "#202b33"  # what Stash puts in for %COLOR% (config "theme_color" default)
_STUDIO_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 24"><rect width="64" height="24" rx="4" fill="#394b59"/></svg>'
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MENU_ITEMS = ["scenes", "images", "groups", "markers", "galleries", "performers", "studios", "tags"]
_ZERO_SCALARS: dict[str, Any] = {
    "String": "",
    "ID": "0",
    "Int": 0,
    "Float": 0.0,
    "Boolean": False,
    "Int64": 0,
    "Time": "1970-01-01T00:00:00Z",
    "Timestamp": "1970-01-01T00:00:00Z",
    "Map": {},
    "BoolMap": {},
    "PluginConfigMap": {},
}


def load_full_schema(schema_dir: Path) -> GraphQLSchema:
    """Stash's real schema: ``schema.graphql`` plus every file under ``types/``."""
    parts = [(schema_dir / "schema.graphql").read_text(encoding="utf-8")]
    parts += [p.read_text(encoding="utf-8") for p in sorted((schema_dir / "types").glob("*.graphql"))]
    return build_schema("\n".join(parts))


def zero_value(gql_type: Any) -> Any:
    """The value an unmodelled field answers: None when nullable, else its zero."""
    if not isinstance(gql_type, GraphQLNonNull):
        return None
    inner = gql_type.of_type
    if isinstance(inner, GraphQLList):
        return []
    if isinstance(inner, GraphQLEnumType):
        return next(iter(inner.values))
    if isinstance(inner, GraphQLScalarType):
        return _ZERO_SCALARS.get(inner.name, "")
    if isinstance(inner, GraphQLObjectType):
        return {}
    raise GraphQLError(f"the emulator cannot make up a value of type {inner}")


def defaulting_resolver(source: Any, info: Any, **args: Any) -> Any:
    """graphql-core's default resolver, with a zero value for keys the emulator lacks."""
    if isinstance(source, dict) and info.field_name not in source:
        return zero_value(info.return_type)
    return default_field_resolver(source, info, **args)


class InstalledPlugin:
    """One plugin folder as Stash's plugin cache holds it (``pkg/plugin/config.go``)."""

    def __init__(self, config_path: Path, env: dict[str, str]) -> None:
        self.config_path = config_path
        self.dir = config_path.parent
        self.id = config_path.stem  # Stash: the YAML file's name is the plugin id
        self.config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        self.env = env
        self.enabled = True

    @property
    def ui(self) -> dict:
        return self.config.get("ui") or {}

    def task(self, name: str) -> dict | None:
        return next((t for t in self.config.get("tasks") or [] if t.get("name") == name), None)


class PluginRun:
    """One run of a plugin process started by the emulator (for assertions)."""

    def __init__(self, plugin_id: str, args: dict, task: str | None) -> None:
        self.plugin_id, self.args, self.task = plugin_id, args, task
        self.reply: dict[str, Any] | None = None
        self.logs: list[tuple[str, str]] = []
        self.progress: list[float] = []
        self.returncode: int | None = None


class StashUI:
    """The web-server side of Stash: UI files, plugin routes, websocket, plugin runs."""

    def __init__(self, emu: Any, build_dir: Path, schema_dir: Path) -> None:
        for path, what in ((build_dir / "index.html", "the prebuilt UI"), (schema_dir / "schema.graphql", "schema")):
            if not path.is_file():
                raise FileNotFoundError(reference.missing(what, path))
        self.emu = emu
        self.build_dir = build_dir
        self.schema = self._bind(load_full_schema(schema_dir))
        self.plugins: dict[str, InstalledPlugin] = {}
        self.custom_css = ""  # what /css serves: the user's custom CSS (e.g. a light theme)
        self.runs: list[PluginRun] = []
        self.ui_config: dict[str, Any] = {"lastNoteSeen": 99991231}  # no Release Notes modal
        self._sockets: list[_Socket] = []
        self._lock = threading.Lock()

    # -- plugins ----------------------------------------------------------------------
    def install_plugin(self, plugin_dir: Path = REPO, env: dict[str, str] | None = None) -> InstalledPlugin:
        configs = sorted(plugin_dir.glob("*.yml"))
        if len(configs) != 1:
            raise ValueError(f"{plugin_dir} must hold exactly one plugin YAML, found {configs}")
        plugin = InstalledPlugin(configs[0], dict(env or {}))
        self.plugins[plugin.id] = plugin
        return plugin

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        plugin = self.plugins.get(plugin_id)
        if plugin is None:
            raise GraphQLError(f"no plugin with ID {plugin_id}")
        if not plugin.enabled:
            raise GraphQLError(f"plugin {plugin_id} is disabled")
        return plugin

    def _spawn(self, plugin: InstalledPlugin, args: dict) -> subprocess.Popen:
        """Start the plugin exactly as tests/runner.py (and Stash) do: argv, env, stdin."""
        document = {"server_connection": self.emu.server_connection(str(plugin.dir)), "args": args}
        env = dict(os.environ)
        env.update(plugin.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(plugin.dir.parent)) if p)
        proc = subprocess.Popen(
            build_argv(plugin.dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        threading.Thread(target=_feed, args=(proc, json.dumps(document).encode()), daemon=True).start()
        return proc

    def _finish(self, proc: subprocess.Popen, run: PluginRun, on_progress: Callable[[float], None] | None) -> None:
        """Read stderr line by line (progress as it comes) and stdout to EOF, then reap."""
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        err_lines = []
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            err_lines.append(line)
            _logs, progress = decode_stderr(line)
            if progress and on_progress:
                on_progress(progress[-1])
        reader.join()
        run.returncode = proc.wait()
        run.logs, run.progress = decode_stderr("".join(err_lines))
        run.reply = parse_reply((out[0] if out else b"").decode("utf-8", "replace"), run.returncode)

    def run_operation(self, plugin_id: str, args: dict | None) -> Any:
        plugin = self._plugin(plugin_id)
        run = PluginRun(plugin_id, dict(args or {}), None)
        self.runs.append(run)
        self._finish(self._spawn(plugin, run.args), run, None)
        if run.reply["error"]:
            raise GraphQLError(str(run.reply["error"]))
        return run.reply["output"]

    def run_task(self, plugin_id: str, task_name: str | None, description: str | None, args_map: dict | None) -> str:
        plugin = self._plugin(plugin_id)
        args = dict(args_map or {})
        if task_name is not None:
            task = plugin.task(task_name)
            if task is None:
                raise GraphQLError(f"no task with name {task_name} in plugin {plugin.config.get('name')}")
            for key, value in (task.get("defaultArgs") or {}).items():
                args.setdefault(key, value)
        label = description or task_name or plugin_id
        job = self.emu.add_job(description=f"Running plugin task: {label}", status="RUNNING", progress=None)
        job["startTime"] = job["addTime"]
        self.publish("ADD", job)
        run = PluginRun(plugin_id, args, task_name)
        self.runs.append(run)
        threading.Thread(target=self._task_thread, args=(plugin, run, job), daemon=True).start()
        return job["id"]

    def _task_thread(self, plugin: InstalledPlugin, run: PluginRun, job: dict) -> None:
        def progress(value: float) -> None:
            job["progress"] = value
            self.publish("UPDATE", job)

        try:
            self._finish(self._spawn(plugin, run.args), run, progress)
        finally:
            job["status"] = "FINISHED"
            job["progress"] = 1.0
            self.publish("REMOVE", job)

    def wait_for_run(self, mode: str, timeout: float = 30.0) -> PluginRun:
        """The first run whose args name ``mode``, once its process has ended."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = [r for r in list(self.runs) if r.args.get("mode") == mode and r.returncode is not None]
            if done:
                return done[0]
            time.sleep(0.05)
        raise TimeoutError(f"no finished plugin run with mode {mode!r} within {timeout} s")

    def wait_runs_finished(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while any(r.returncode is None for r in list(self.runs)):
            if time.monotonic() > deadline:
                raise TimeoutError("a plugin run did not finish in time")
            time.sleep(0.05)

    # -- GraphQL ------------------------------------------------------------------------
    def _bind(self, schema: GraphQLSchema) -> GraphQLSchema:
        emu = self.emu
        scene = schema.type_map["Scene"].fields  # type: ignore[union-attr]
        scene["studio"].resolve = lambda s, _i: emu._studios.get(s["_studio_id"])
        scene["performers"].resolve = lambda s, _i: [emu._performers[i] for i in s["_performer_ids"]]
        scene["tags"].resolve = lambda s, _i: [emu._tags[i] for i in s["_tag_ids"]]
        scene["paths"].resolve = emu._resolve_paths
        studio = schema.type_map["Studio"].fields  # type: ignore[union-attr]
        studio["parent_studio"].resolve = lambda s, _i: emu._studios.get(s["_parent_id"])
        # resolver_model_studio.go ImagePath: always a URL; `default=true` when no image is stored
        studio["image_path"].resolve = lambda s, info: f"{info.context['base_url']}/studio/{s['id']}/image?default=true"
        plugin = schema.type_map["Plugin"].fields  # type: ignore[union-attr]
        plugin["paths"].resolve = self._plugin_paths
        return schema

    def root(self) -> dict[str, Callable]:
        return {
            "configuration": lambda _info: self._configuration(),
            "systemStatus": lambda _info: {
                "status": "OK",
                "appSchema": 75,
                "databaseSchema": 75,
                "os": "linux",
                "workingDir": "/",
                "homeDir": "/root",
            },
            "plugins": lambda _info: [self._plugin_view(p) for p in self.plugins.values()],
            "pluginTasks": lambda _info: [
                {**t, "plugin": self._plugin_view(p)}
                for p in self.plugins.values()
                for t in p.config.get("tasks") or []
            ],
            "listScrapers": lambda _info, types: [],
            "installedPackages": lambda _info, type: [],
            "sceneMarkerTags": lambda _info, scene_id: [],
            "runPluginOperation": lambda _info, plugin_id, args=None: self.run_operation(plugin_id, args),
            "setPluginsEnabled": lambda _info, enabledMap: self._set_enabled(enabledMap),
            "runPluginTask": lambda _info, plugin_id, task_name=None, description=None, args=None, args_map=None: (
                self.run_task(plugin_id, task_name, description, args_map)
            ),
        }

    def _set_enabled(self, enabled_map: dict[str, bool]) -> bool:
        """``setPluginsEnabled`` (``resolver_mutation_plugin.go``): the map's plugins only."""
        for plugin_id, enabled in enabled_map.items():
            if plugin_id in self.plugins:
                self.plugins[plugin_id].enabled = bool(enabled)
        return True

    def _configuration(self) -> dict:
        emu = self.emu
        return {
            "general": {"apiKey": emu.api_key, "stashes": [], "databasePath": "/root/.stash/stash-go.sqlite"},
            "interface": {"menuItems": list(_MENU_ITEMS), "language": "en-GB", "cssEnabled": bool(self.custom_css)},
            "ui": dict(self.ui_config),
            "plugins": emu._resolve_plugins,
            "defaults": {},
            "scraping": {},
            "dlna": {},
        }

    def _plugin_view(self, p: InstalledPlugin) -> dict:
        c = p.config
        return {
            "id": p.id,
            "name": c.get("name") or p.id,
            "description": c.get("description"),
            "url": c.get("url"),
            "version": c.get("version"),
            "enabled": p.enabled,
            "tasks": [{"name": t["name"], "description": t.get("description")} for t in c.get("tasks") or []],
            "hooks": [
                {"name": h["name"], "description": h.get("description"), "hooks": h.get("triggeredBy") or []}
                for h in c.get("hooks") or []
            ],
            "settings": [
                {
                    "name": k,
                    "display_name": v.get("displayName"),
                    "description": v.get("description"),
                    "type": v["type"],
                }
                for k, v in (c.get("settings") or {}).items()
            ],
            "requires": (c.get("ui") or {}).get("requires") or [],
            "_plugin": p,
        }

    def _plugin_paths(self, view: dict, info: Any) -> dict:
        ui, base, pid = view["_plugin"].ui, info.context["base_url"], view["id"]
        return {
            "javascript": [f"{base}/plugin/{pid}/javascript"] if ui.get("javascript") else None,
            "css": [f"{base}/plugin/{pid}/css"] if ui.get("css") else None,
        }

    # -- HTTP: files ------------------------------------------------------------------------
    def handle_get(self, handler: Any) -> bool:
        """Answer a GET the UI server owns; False leaves it to the GraphQL emulator."""
        path = unquote(urlsplit(handler.path).path)
        if not _open_to_all(path) and handler._refused():  # Stash's login in front of all the rest
            return True
        if path == "/graphql" and handler.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket(handler)
            return True
        if path.startswith("/plugin/"):
            self._plugin_route(handler, path)
            return True
        if path == "/css":
            handler._send(200, self.custom_css.encode() + b"\n" if self.custom_css else b"", "text/css")
            return True
        if path == "/javascript":
            handler._send(200, b"", "text/javascript")
            return True
        if path == "/customlocales":
            handler._send(200, b"{}", "application/json")
            return True
        if re.fullmatch(r"/studio/\d+/image", path):  # routes_studio.go Image: the default studio image
            handler._send(200, _STUDIO_SVG, "image/svg+xml")
            return True
        if path.startswith(("/scene/", "/performer/", "/login")) or path == "/graphql":
            return False  # Stash's own routes, mounted before the UI's catch-all (internal/api/server.go)
        self._static(handler, path)
        return True

    def _static(self, handler: Any, path: str) -> None:
        name = path.rsplit("/", 1)[-1]
        if "." not in name:  # the app: every extension-less path
            html = (self.build_dir / "index.html").read_bytes().replace(b"%COLOR%", THEME_COLOR.encode())
            handler._send(200, html, "text/html; charset=utf-8")
            return
        target = (self.build_dir / path.lstrip("/")).resolve()
        if not target.is_relative_to(self.build_dir.resolve()):
            handler._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
            return
        kind = _content_type(name)
        if target.is_file():
            handler._send(200, target.read_bytes(), kind)
        elif target.with_name(target.name + ".gz").is_file():
            body = target.with_name(target.name + ".gz").read_bytes()
            handler._send(200, body, kind, {"Content-Encoding": "gzip"})
        else:
            handler._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

    def _plugin_route(self, handler: Any, path: str) -> None:
        parts = path.split("/", 4)  # '', 'plugin', id, kind, rest
        plugin = self.plugins.get(parts[2]) if len(parts) > 3 else None
        if plugin is None:
            handler._send(404, b"Not Found\n", "text/plain; charset=utf-8")
            return
        if not plugin.enabled:
            handler._send(400, b"plugin disabled\n", "text/plain; charset=utf-8")
            return
        if parts[3] in ("javascript", "css") and len(parts) == 4:
            files = plugin.ui.get(parts[3]) or []
            body = b"".join((plugin.dir / f).read_bytes() + b"\n" for f in files)
            handler._send(200, body, "text/javascript" if parts[3] == "javascript" else "text/css")
            return
        handler._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

    # -- websocket ----------------------------------------------------------------------
    def _websocket(self, handler: Any) -> None:
        key = handler.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        handler.send_response(101, "Switching Protocols")
        handler.send_header("Upgrade", "websocket")
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Sec-WebSocket-Accept", accept)
        handler.send_header("Sec-WebSocket-Protocol", "graphql-transport-ws")
        handler.end_headers()
        handler.wfile.flush()
        sock = _Socket(handler.connection)
        with self._lock:
            self._sockets.append(sock)
        try:
            self._serve_socket(sock)
        finally:
            with self._lock:
                self._sockets.remove(sock)
            handler.close_connection = True

    def _serve_socket(self, sock: _Socket) -> None:
        while True:
            message = sock.receive()
            if message is None:
                return
            try:
                data = json.loads(message)
            except ValueError:
                sock.close(4400, "invalid message")
                return
            kind = data.get("type")
            if kind == "connection_init":
                sock.send_json({"type": "connection_ack"})
            elif kind == "ping":
                sock.send_json({"type": "pong"})
            elif kind == "subscribe":
                query = (data.get("payload") or {}).get("query") or ""
                if "jobsSubscribe" in query:
                    sock.job_subscriptions.add(data["id"])
            elif kind == "complete":
                sock.job_subscriptions.discard(data.get("id"))

    def publish(self, kind: str, job: dict) -> None:
        """A jobsSubscribe event to every subscriber (``pkg/job/subscribe.go``)."""
        view = self.emu._job_view(job)
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            for sub_id in list(sock.job_subscriptions):
                payload = {"data": {"jobsSubscribe": {"type": kind, "job": view}}}
                sock.send_json({"id": sub_id, "type": "next", "payload": payload})


class _Socket:
    """A server-side RFC 6455 connection: text frames, ping/pong, close."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.job_subscriptions: set[str] = set()
        self._send_lock = threading.Lock()

    def _read(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def receive(self) -> str | None:
        """The next text message; None when the peer closed."""
        try:
            while True:
                head = self._read(2)
                if head is None:
                    return None
                opcode, length = head[0] & 0x0F, head[1] & 0x7F
                if length == 126:
                    length = struct.unpack(">H", self._read(2) or b"\0\0")[0]
                elif length == 127:
                    length = struct.unpack(">Q", self._read(8) or b"\0" * 8)[0]
                mask = self._read(4) if head[1] & 0x80 else b"\0\0\0\0"
                payload = self._read(length) if length else b""
                if mask is None or payload is None:
                    return None
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                if opcode == 0x8:
                    return None
                if opcode == 0x9:
                    self._frame(0xA, payload)
                elif opcode == 0x1:
                    return payload.decode("utf-8", "replace")
        except OSError:
            return None

    def _frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        header = bytes([0x80 | opcode]) + (
            bytes([n]) if n < 126 else (b"\x7e" + struct.pack(">H", n) if n < 65536 else b"\x7f" + struct.pack(">Q", n))
        )
        with self._send_lock:
            try:
                self.conn.sendall(header + payload)
            except OSError:
                pass

    def send_json(self, message: dict) -> None:
        self._frame(0x1, json.dumps(message).encode())

    def close(self, code: int, reason: str) -> None:
        self._frame(0x8, struct.pack(">H", code) + reason.encode())


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:
        pass


def _content_type(name: str) -> str:
    if name.endswith(".js") or name.endswith(".mjs"):
        return "text/javascript"
    kind, _ = mimetypes.guess_type(name)
    return kind or "application/octet-stream"


def _open_to_all(path: str) -> bool:
    """What Stash serves without a login (internal/api/authentication.go ``allowUnauthenticated``:
    the login page and its files, logout, the custom CSS and the UI's assets)."""
    return path.startswith(("/login", "/assets")) or path in ("/logout", "/css")
