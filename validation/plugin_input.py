"""The document Stash writes on a plugin's stdin, as validated models.

``{"server_connection": {...}, "args": {...}}`` (Stash's pkg/plugin/common/msg.go
``PluginInput``, ``StashServerConnection``, filled by pkg/plugin/plugins.go
``makeServerConnection``: no JSON tags, so the keys are capitalised), as frozen dataclasses
built from validation/document.py's checks (which the hook uses alone), not pydantic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from core.errors import InputError
from validation.document import args_values, connection_values, got, read_document
from validation.modes import STASH_MODES, TASK_MODES


@dataclass(frozen=True)
class Cookie:
    Name: str
    Value: str = dataclasses.field(repr=False)


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
        cookie = values["SessionCookie"]
        return cls(**{**values, "SessionCookie": None if cookie is None else Cookie(**cookie)})

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


SCENE_ID = "a Stash scene id (a whole number from 1)"
RATING_KEY = "the ratingKey of a Plex item (a whole number from 1)"


def whole_arg(params: dict[str, Any], key: str, what: str, top: int = 2**63 - 1, default: int | None = None) -> int:
    """A whole number from 1 to ``top`` in ``args`` (a number, or its text: the GraphQL API
    gives ids as text); ``what`` says what it must be."""
    value = params.get(key, default)
    if value is None:
        raise InputError(f"args.{key} is missing: this mode needs {what}")
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= len(str(top)):  # int() reads it
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        named = "" if isinstance(value, (dict, list)) else f", got {got(value)}"  # as document.shown: no whole objects
        raise InputError(f"args.{key} must be {what}{named}")
    return value


def scene_id_arg(params: dict[str, Any]) -> int:
    return whole_arg(params, "scene_id", SCENE_ID)


@dataclass(frozen=True)
class PluginInput:
    """A task's document (a hook's is read by hooks/lane.py alone): the mode from its
    ``defaultArgs``, every other key of ``args`` (what runPluginOperation / runPluginTask
    passed) and ``dry_run`` (defaultArgs ``"true"``: the "Preview sync (no writes)" task)."""

    server_connection: ServerConnection
    mode: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    dry_run: bool = False


def parse_plugin_input(raw: str) -> PluginInput:
    """Parse stdin text into a :class:`PluginInput` or raise :class:`InputError`."""
    document = read_document(raw)
    connection = ServerConnection.model_validate(document["server_connection"])
    args = args_values(document.get("args"))
    if args["mode"] is None:
        raise InputError(
            f"args.mode is missing: each task in Stash2Plex.yml sets defaultArgs.mode (one of {', '.join(TASK_MODES)})"
        )
    if args["mode"] not in STASH_MODES:
        raise InputError(
            f"args.mode {got(args['mode'])} is not a Stash2Plex mode; expected one of {', '.join(TASK_MODES)}"
        )
    return PluginInput(connection, args["mode"], args["params"], args["dry_run"])
