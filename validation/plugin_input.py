"""The document Stash writes on a plugin's stdin, as validated models.

``{"server_connection": {...}, "args": {...}}`` (Stash's pkg/plugin/common/msg.go
``PluginInput``, ``StashServerConnection``, filled by pkg/plugin/plugins.go
``makeServerConnection``: no JSON tags, so the keys are capitalised). Tasks get their
``defaultArgs`` in ``args``; hooks also ``hookContext``. Frozen dataclasses with explicit
checks, not pydantic: this is the hook's path, which Stash waits for in every scene edit.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from core.errors import InputError

TASK_MODES = (
    "all",
    "recent",
    "process_queue",
    "queue_status",
    "clear_queue",
    "clear_dlq",
    "purge_dlq",
    "retry_dlq",
    "health_check",
    "reconcile",
    "import_plays",
)
# Plain modes that are not tasks of the menu: the plugin's page in Stash's UI calls
# them through runPluginOperation (tasks/ui.py) and reads the JSON in ``output``.
OPERATION_MODES = (
    "ui_status",
    "ui_scene",
    "ui_retry",
    "ui_sync_scene",
    "ui_preview",
    "ui_pin",
    "ui_unpin",
    "ui_inbox",
    "ui_path_help",
    "ui_recheck",
    "ui_thumbs",
)
HOOK_MODE = "hook"
SCENE_HOOKS = ("Scene.Update.Post", "Scene.Create.Post")
# Stash's entity hooks (pkg/plugin/hook/hooks.go): the trigger → the kind of entity its
# hookContext.id names. There is no Performer/Studio/Group merge hook (performerMerge
# fires none). A group is a movie before Stash v0.27, which fires Movie.* only; from
# v0.27 Stash fires Group.* and then Movie.* for the same change, with the same id
# (internal/api/resolver_mutation_group.go `GroupUpdate`): both record the same one
# entity event (the queue keeps one row per entity), so the second costs one hook run.
ENTITY_HOOKS = {
    "Tag.Update.Post": "tag",
    "Tag.Merge.Post": "tag",
    "Tag.Destroy.Post": "tag",
    "Performer.Update.Post": "performer",
    "Performer.Destroy.Post": "performer",
    "Studio.Update.Post": "studio",
    "Studio.Destroy.Post": "studio",
    "Group.Update.Post": "group",
    "Group.Destroy.Post": "group",
    "Movie.Update.Post": "group",
    "Movie.Destroy.Post": "group",
}
HOOK_TRIGGERS = SCENE_HOOKS + tuple(ENTITY_HOOKS)


def _shown(value: Any) -> str:
    return f" (got {str(value)[:60]!r})" if not isinstance(value, (dict, list)) else ""


def _text(data: dict, key: str, where: str, required: bool = True, default: str = "") -> str:
    value = data.get(key, None)
    if value is None:
        if required:
            raise InputError(f"{where}.{key} is missing")
        return default
    if not isinstance(value, str):
        raise InputError(f"{where}.{key} must be a string{_shown(value)}")
    if required and not value:
        raise InputError(f"{where}.{key} must not be empty")
    return value


def _integer(data: dict, key: str, where: str, low: int, high: int) -> int:
    value = data.get(key, None)
    if value is None:
        raise InputError(f"{where}.{key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}.{key} must be a whole number{_shown(value)}")
    if not low <= value <= high:
        raise InputError(f"{where}.{key} must be between {low} and {high}{_shown(value)}")
    return value


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Cookie:
    Name: str
    Value: str = dataclasses.field(repr=False)

    @classmethod
    def parse(cls, data: Any) -> Cookie | None:
        if data is None:
            return None
        data = _object(data, "server_connection.SessionCookie")
        value = data.get("Value")
        # Never echo the value: it is the user's session.
        if not isinstance(value, str) or not value:
            raise InputError("server_connection.SessionCookie.Value must be a non-empty string")
        return cls(
            Name=_text(data, "Name", "server_connection.SessionCookie", False, "session") or "session", Value=value
        )


@dataclass(frozen=True)
class ServerConnection:
    Host: str
    Port: int
    PluginDir: str
    Scheme: str = "http"
    SessionCookie: Cookie | None = None
    # Not sent by Stash: the standalone command line (and the drainer it starts)
    # authenticates with Stash's API key instead of a session cookie.
    ApiKey: str | None = dataclasses.field(default=None, repr=False)
    # Stash's config folder: which Stash this is (its data folder is its own, sync_queue/owner.py)
    Dir: str | None = None

    @classmethod
    def model_validate(cls, data: Any) -> ServerConnection:
        where = "server_connection"
        data = _object(data, where)
        scheme = _text(data, "Scheme", where, False, "http") or "http"
        if scheme not in ("http", "https"):
            raise InputError(f"{where}.Scheme must be http or https{_shown(scheme)}")
        return cls(
            Host=_text(data, "Host", where),
            Port=_integer(data, "Port", where, 1, 65535),
            PluginDir=_text(data, "PluginDir", where),
            Scheme=scheme,
            SessionCookie=Cookie.parse(data.get("SessionCookie")),
            ApiKey=_text(data, "ApiKey", where, False) or None,
            Dir=_text(data, "Dir", where, False) or None,
        )

    def model_dump(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def host_for_client(self) -> str:
        """Stash's default bind host 0.0.0.0 (or ::) means "this machine"."""
        return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.Host, self.Host)

    @property
    def base_url(self) -> str:
        host = self.host_for_client
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{self.Scheme}://{host}:{self.Port}"

    @property
    def cookie_value(self) -> str | None:
        return self.SessionCookie.Value if self.SessionCookie else None


@dataclass(frozen=True)
class HookContext:
    id: int
    type: str
    input: Any = None
    inputFields: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, data: Any) -> HookContext:
        where = "args.hookContext"
        data = _object(data, where)
        scene_id = _integer(data, "id", where, 1, 2**63 - 1)
        trigger = _text(data, "type", where)
        if trigger not in HOOK_TRIGGERS:
            raise InputError(f"{where}.type: Stash2Plex handles only {', '.join(HOOK_TRIGGERS)}, not {trigger!r}")
        fields = data.get("inputFields")
        if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
            raise InputError(f"{where}.inputFields must be a list of field names{_shown(fields)}")
        return cls(
            id=scene_id,
            type=trigger,
            input=data.get("input"),
            inputFields=tuple(fields) if fields is not None else None,
        )

    @property
    def entity_kind(self) -> str | None:
        """``tag``/``performer``/``studio``/``group`` for an entity hook, None for a scene hook."""
        return ENTITY_HOOKS.get(self.type)


def scene_id_arg(params: dict[str, Any], key: str = "scene_id") -> int:
    """A scene id from ``args`` (a number, or the string id the GraphQL API gives)."""
    value = params.get(key)
    if value is None:
        raise InputError(f"args.{key} is missing: this mode needs the id of a Stash scene")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise InputError(f"args.{key} must be a Stash scene id (a whole number from 1){_shown(value)}")
    return value


@dataclass(frozen=True)
class PluginArgs:
    mode: str | None = None
    hookContext: HookContext | None = None
    # every other key of ``args`` (what runPluginOperation / runPluginTask passed)
    params: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    dry_run: bool = False  # defaultArgs dry_run: "true" (the "Preview sync (no writes)" task)

    @classmethod
    def parse(cls, data: Any) -> PluginArgs:
        if data is None:
            return cls()
        data = _object(data, "args")
        mode = data.get("mode")
        if mode is not None and not isinstance(mode, str):
            raise InputError(f"args.mode must be a string{_shown(mode)}")
        context = data.get("hookContext")
        params = {k: v for k, v in data.items() if k not in ("mode", "hookContext")}
        dry_run = data.get("dry_run", "false")
        if dry_run not in ("true", "false"):
            raise InputError(f'args.dry_run must be "true" or "false"{_shown(dry_run)}')
        return cls(
            mode=mode,
            hookContext=HookContext.parse(context) if context is not None else None,
            params=params,
            dry_run=dry_run == "true",
        )


@dataclass(frozen=True)
class PluginInput:
    server_connection: ServerConnection
    args: PluginArgs = PluginArgs()

    @property
    def mode(self) -> str:
        """``hook`` for a hook event, else the task mode from ``defaultArgs``."""
        if self.args.hookContext is not None:
            return HOOK_MODE
        if self.args.mode is None:
            raise InputError(
                "args.mode is missing: each task in Stash2Plex.yml sets defaultArgs.mode "
                f"(one of {', '.join(TASK_MODES)})"
            )
        if self.args.mode not in TASK_MODES + OPERATION_MODES:
            raise InputError(
                f"args.mode {self.args.mode!r} is not a Stash2Plex mode; expected one of {', '.join(TASK_MODES)}"
            )
        return self.args.mode


def parse_plugin_input(raw: str) -> PluginInput:
    """Parse stdin text into a :class:`PluginInput` or raise :class:`InputError`."""
    if not raw.strip():
        raise InputError("stdin is empty: Stash writes one JSON document on stdin; run Stash2Plex from Stash")
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InputError("stdin is not a Stash plugin input: its JSON is nested too deeply") from None
    if not isinstance(document, dict):
        raise InputError(f"stdin must be a JSON object, got {type(document).__name__}")
    if document.get("server_connection") is None:
        raise InputError("server_connection is missing from stdin: Stash always sends it; was this run by Stash?")
    parsed = PluginInput(
        server_connection=ServerConnection.model_validate(document["server_connection"]),
        args=PluginArgs.parse(document.get("args")),
    )
    parsed.mode  # noqa: B018 - validate the mode now, so the error names it
    return parsed
