"""The document Stash writes on a plugin's stdin, as validated models.

``{"server_connection": {...}, "args": {...}}`` (Stash's pkg/plugin/common/msg.go
``PluginInput``, ``StashServerConnection``, filled by pkg/plugin/plugins.go
``makeServerConnection``: no JSON tags, so the keys are capitalised). Tasks get their
``defaultArgs`` in ``args``; a hook's ``hookContext`` is read by hooks/lane.py alone. Frozen
dataclasses with explicit checks (validation/document.py, which the hook uses alone), not pydantic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from core.errors import InputError
from validation.document import (
    ENTITY_HOOKS,
    HOOK_MODE,
    HOOK_TRIGGERS,
    SCENE_HOOKS,
    args_values,
    connection_values,
    cookie_values,
    read_document,
    shown,
)
from validation.modes import STASH_MODES, TASK_MODES


@dataclass(frozen=True)
class Cookie:
    Name: str
    Value: str = dataclasses.field(repr=False)

    @classmethod
    def parse(cls, data: Any) -> Cookie | None:
        values = cookie_values(data)
        return None if values is None else cls(**values)


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
        values = connection_values(data)
        return cls(**{**values, "SessionCookie": Cookie.parse(values["SessionCookie"])})

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


def scene_id_arg(params: dict[str, Any], key: str = "scene_id") -> int:
    """A scene id from ``args`` (a number, or the string id the GraphQL API gives)."""
    value = params.get(key)
    if value is None:
        raise InputError(f"args.{key} is missing: this mode needs the id of a Stash scene")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise InputError(f"args.{key} must be a Stash scene id (a whole number from 1){shown(value)}")
    return value


def rating_key_arg(params: dict[str, Any]) -> int:
    """A Plex ratingKey from ``args`` (a number, or its text)."""
    value = params.get("rating_key")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise InputError(f"args.rating_key must be the ratingKey of a Plex item (a whole number from 1), got {value!r}")
    return value


@dataclass(frozen=True)
class PluginArgs:
    mode: str | None = None
    # every other key of ``args`` (what runPluginOperation / runPluginTask passed)
    params: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    dry_run: bool = False  # defaultArgs dry_run: "true" (the "Preview sync (no writes)" task)

    @classmethod
    def parse(cls, data: Any) -> PluginArgs:
        values = args_values(data)
        del values["hookContext"]  # a hook's document never comes here (hooks/lane.py)
        return cls(**values)


@dataclass(frozen=True)
class PluginInput:
    server_connection: ServerConnection
    args: PluginArgs = PluginArgs()

    @property
    def mode(self) -> str:
        """The task mode from ``defaultArgs`` (a hook's run never parses its document here)."""
        if self.args.mode is None:
            raise InputError(
                "args.mode is missing: each task in Stash2Plex.yml sets defaultArgs.mode "
                f"(one of {', '.join(TASK_MODES)})"
            )
        if self.args.mode not in STASH_MODES:
            raise InputError(
                f"args.mode {self.args.mode!r} is not a Stash2Plex mode; expected one of {', '.join(TASK_MODES)}"
            )
        return self.args.mode


def parse_plugin_input(raw: str) -> PluginInput:
    """Parse stdin text into a :class:`PluginInput` or raise :class:`InputError`."""
    document = read_document(raw)
    parsed = PluginInput(
        server_connection=ServerConnection.model_validate(document["server_connection"]),
        args=PluginArgs.parse(document.get("args")),
    )
    parsed.mode  # noqa: B018 - validate the mode now, so the error names it
    return parsed


__all__ = [
    "ENTITY_HOOKS",
    "HOOK_MODE",
    "HOOK_TRIGGERS",
    "SCENE_HOOKS",
    "PluginInput",
    "ServerConnection",
]
