"""The document Stash writes on a plugin's stdin, as validated models.

Shape (contract §2.3): ``{"server_connection": {...}, "args": {...}}``. The
connection struct has no JSON tags in Go, so its keys are capitalised. Tasks get
their ``defaultArgs`` in ``args``; hooks get ``defaultArgs`` plus ``hookContext``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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
)
HOOK_MODE = "hook"
SCENE_HOOKS = ("Scene.Update.Post", "Scene.Create.Post")


class Cookie(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Name: str = "session"
    Value: str = Field(min_length=1)


class ServerConnection(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Scheme: Literal["http", "https"] = "http"
    Host: str = Field(min_length=1)
    Port: int = Field(ge=1, le=65535)
    SessionCookie: Cookie | None = None
    Dir: str = ""
    PluginDir: str = Field(min_length=1)

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


class HookContext(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int = Field(ge=1)
    type: str
    input: Any = None
    inputFields: list[str] | None = None

    @field_validator("type")
    @classmethod
    def _known_trigger(cls, value: str) -> str:
        if value not in SCENE_HOOKS:
            raise ValueError(f"Stash2Plex handles only {', '.join(SCENE_HOOKS)}, not {value!r}")
        return value


class PluginArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: str | None = None
    hookContext: HookContext | None = None


class PluginInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
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
        if self.args.mode not in TASK_MODES:
            raise InputError(
                f"args.mode {self.args.mode!r} is not a Stash2Plex mode; expected one of "
                f"{', '.join(TASK_MODES)}"
            )
        return self.args.mode


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "document"
        value = item.get("input")
        secret = "SessionCookie" in where
        shown = "" if secret or isinstance(value, (dict, list)) else f" (got {str(value)[:60]!r})"
        parts.append(f"{where}: {item['msg']}{shown}")
    return "; ".join(parts)


def parse_plugin_input(raw: str) -> PluginInput:
    """Parse stdin text into a :class:`PluginInput` or raise :class:`InputError`."""
    if not raw.strip():
        raise InputError("stdin is empty: Stash writes one JSON document on stdin; run Stash2Plex from Stash")
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(document, dict):
        raise InputError(f"stdin must be a JSON object, got {type(document).__name__}")
    if document.get("server_connection") is None:
        raise InputError("server_connection is missing from stdin: Stash always sends it; was this run by Stash?")
    try:
        parsed = PluginInput.model_validate(document)
    except ValidationError as exc:
        raise InputError(f"invalid plugin input: {_describe(exc)}") from None
    parsed.mode  # noqa: B018 - validate the mode now, so the error names it
    return parsed
