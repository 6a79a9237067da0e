"""Stash's stdin document, checked value by value: the standard library only.

Every run uses these checks: the hook (hooks/lane.py), which must not pay for dataclasses
or typing, and the models of validation/plugin_input.py built from the values they return. A value that fails raises :class:`InputError` naming the key, the
value and what was expected.
"""

from __future__ import annotations

import json

from core.errors import InputError
from core.log import shortened

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it as True)
if TYPE_CHECKING:
    from typing import Any

# Scene.Destroy.Post queues the deleted scene's id like an edit: its job finds the scene gone
# and takes what was written for it off the items no scene owns now (worker/sync.py
# ``release_gone``). Stash sends it for sceneDestroy, scenesDestroy and its clean task, with
# the scene's path in the input and no inputFields (internal/api/resolver_mutation_scene.go
# ``SceneDestroy``; internal/manager/task_clean.go).
SCENE_HOOKS = ("Scene.Update.Post", "Scene.Create.Post", "Scene.Destroy.Post")
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


def got(value: Any) -> str:
    """A value a message names: its repr cut to 60 characters (a reply never echoes a whole
    value back)."""
    return shortened(repr(value), 60)


def shown(value: Any) -> str:
    return f" (got {shortened(str(value), 60)!r})" if not isinstance(value, (dict, list)) else ""


def text(data: dict, key: str, where: str, required: bool = True, default: str = "") -> str:
    value = data.get(key, None)
    if value is None:
        if required:
            raise InputError(f"{where}.{key} is missing")
        return default
    if not isinstance(value, str):
        raise InputError(f"{where}.{key} must be a string{shown(value)}")
    if required and not value:
        raise InputError(f"{where}.{key} must not be empty")
    return value


def integer(data: dict, key: str, where: str, low: int, high: int) -> int:
    value = data.get(key, None)
    if value is None:
        raise InputError(f"{where}.{key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}.{key} must be a whole number{shown(value)}")
    if not low <= value <= high:
        raise InputError(f"{where}.{key} must be between {low} and {high}{shown(value)}")
    return value


def json_object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def read_document(raw: str) -> dict:
    """The JSON object on stdin, with ``server_connection`` present."""
    if not raw.strip():
        raise InputError("stdin is empty: Stash writes one JSON document on stdin; run Stash2Plex from Stash")
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError:  # an int over Python's 4,300-digit limit (json reads it with int())
        raise InputError(
            "stdin is not a Stash plugin input: a number in it has more digits than Python reads"
        ) from None
    except RecursionError:
        raise InputError("stdin is not a Stash plugin input: its JSON is nested too deeply") from None
    if not isinstance(document, dict):
        raise InputError(f"stdin must be a JSON object, got {type(document).__name__}")
    if document.get("server_connection") is None:
        raise InputError("server_connection is missing from stdin: Stash always sends it; was this run by Stash?")
    return document


def cookie_values(data: Any) -> dict[str, str] | None:
    if data is None:
        return None
    data = json_object(data, "server_connection.SessionCookie")
    value = data.get("Value")
    # Never echo the value: it is the user's session.
    if not isinstance(value, str) or not value:
        raise InputError("server_connection.SessionCookie.Value must be a non-empty string")
    return {
        "Name": text(data, "Name", "server_connection.SessionCookie", False, "session") or "session",
        "Value": value,
    }


def connection_values(data: Any) -> dict[str, Any]:
    """``server_connection``'s values (Stash's ``StashServerConnection``), checked."""
    where = "server_connection"
    data = json_object(data, where)
    scheme = text(data, "Scheme", where, False, "http") or "http"
    if scheme not in ("http", "https"):
        raise InputError(f"{where}.Scheme must be http or https{shown(scheme)}")
    return {
        "Host": text(data, "Host", where),
        "Port": integer(data, "Port", where, 1, 65535),
        "PluginDir": text(data, "PluginDir", where),
        "Scheme": scheme,
        "SessionCookie": cookie_values(data.get("SessionCookie")),
        "ApiKey": text(data, "ApiKey", where, False) or None,
        "Dir": text(data, "Dir", where, False) or None,
    }


def hook_values(data: Any) -> dict[str, Any]:
    """``args.hookContext``'s values, checked (``inputFields`` a tuple or None)."""
    where = "args.hookContext"
    data = json_object(data, where)
    scene_id = integer(data, "id", where, 1, 2**63 - 1)
    trigger = text(data, "type", where)
    if trigger not in HOOK_TRIGGERS:
        raise InputError(f"{where}.type: Stash2Plex handles only {', '.join(HOOK_TRIGGERS)}, not {trigger!r}")
    fields = data.get("inputFields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise InputError(f"{where}.inputFields must be a list of field names{shown(fields)}")
    return {
        "id": scene_id,
        "type": trigger,
        "input": data.get("input"),
        "inputFields": tuple(fields) if fields is not None else None,
    }


def args_values(data: Any) -> dict[str, Any]:
    """``args``' values, checked: ``mode``, ``hookContext`` (raw), ``params``, ``dry_run``."""
    data = {} if data is None else json_object(data, "args")
    mode = data.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise InputError(f"args.mode must be a string{shown(mode)}")
    dry_run = data.get("dry_run", "false")
    if dry_run not in ("true", "false"):
        raise InputError(f'args.dry_run must be "true" or "false"{shown(dry_run)}')
    return {
        "mode": mode,
        "hookContext": data.get("hookContext"),
        "params": {k: v for k, v in data.items() if k not in ("mode", "hookContext")},
        "dry_run": dry_run == "true",
    }
