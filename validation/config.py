"""Plugin settings, as saved in Stash, validated with their defaults.

Stash stores no defaults (a never-saved setting is absent), so every default lives here,
and Stash2Plex.yml's descriptions state the same values (a test checks). Stash's page draws
a never-saved setting as off, ``0`` or empty and the first click saves that: every switch
defaults to false and a number saved as 0 means its default. Old names: ``validation.legacy``.

Every run (hook's drainer, task, command line, ``watch``) reads them through ``load_settings``
and decides alike: a bad value of a setting in ``OPTIONAL`` turns only its feature off (the
reason is in ``Settings.problems``: health check, the page's status, the log), any other bad
value stops the sync (``ConfigError``), since it would change what is written to Plex.
"""

from __future__ import annotations

import contextlib
import math
from collections import namedtuple
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from core.errors import ConfigError
from validation import fields
from validation.legacy import Adopted, translate
from validation.pathmap import PathMap

MAX_ACCOUNT_ID = 2**63 - 1  # the largest integer SQLite stores (the plays' journal keeps each account's place)
MAX_CONTENT_RATING = 64  # Plex's ratings are short (R, TV-MA, de/16); a long one made every edit's URL too long
PLEX_EXAMPLE, PLEX_PORT = "http://192.168.1.10:32400", "Plex listens on 32400"
LIBRARIES = "library names separated by commas, e.g. 'Stash, Other Videos'"
OWNER_ACCOUNT = 1  # the Plex server owner's account id (plexapi ``PlexSession.user``, ``MyPlexAccount.history``)


def boolean(value: Any) -> bool:
    """A switch's value as Stash or a command line gives it; ValueError when it is none."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"must be true or false, got {value!r}")


Switch = Annotated[bool, BeforeValidator(boolean)]  # every switch defaults to false (Stash shows unsaved as off)


def _parsed(check: Callable[[str], Any], wanted: str = "text") -> BeforeValidator:
    """A value saved as text in Stash, read by ``check`` (a list read already passes)."""
    return BeforeValidator(lambda value: value if isinstance(value, tuple) else check(_text(value, wanted)))


def _address(value: str, example: str, port_hint: str) -> str:
    """``value`` as a server's base address (trimmed, no trailing ``/``); ValueError naming what is wrong."""
    value = value.strip().rstrip("/")
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https:// (e.g. {example}), got {_no_login(value)!r}")
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ValueError(
            f"has a port that is not a number from 1 to 65535 ({port_hint}), got {_no_login(value)!r}"
        ) from None
    if not parts.hostname:
        raise ValueError(f"has no host name (e.g. {example}), got {_no_login(value)!r}")
    return value


def _no_login(url: str) -> str:
    """``url`` as a message may repeat it: without a ``user:password@`` and with ``?…``/``#…``
    in place of its query and fragment, where an API key or token may ride (with or without
    a scheme: a value is often refused for lacking one).

    >>> _no_login("admin:pw@stash.lan:9999/p?apikey=k#f"), _no_login("http://u:pw@h:1/#k?t=k")
    ('stash.lan:9999/p?…', 'http://h:1/#…')
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((at for at in (rest.find("?"), rest.find("#")) if at >= 0), default=len(rest))
    host, slash, path = rest[:end].partition("/")
    cut = rest[end : end + 1]
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}{cut and cut + '…'}"


def _notify_urls(value: Any) -> tuple[str, ...]:
    from core.notify import problem, split_urls

    if value is None:
        return ()
    if not isinstance(value, str):
        raise ValueError("must be URLs separated by spaces or commas, e.g. ntfy://my-topic")
    urls = split_urls(value)
    for position, url in enumerate(urls, 1):
        why = problem(url, position)
        if why:
            raise ValueError(why)  # never the URL itself: it holds tokens
    return tuple(urls)


def _minutes(value: Any) -> Any:
    if value is None:
        return None  # the fallback of a bad value (load_settings drops a saved None)
    if _unset(value):
        return DEFAULTS["notify_plex_down_minutes"]
    return _number_in(value, 0, 10080, "a number of minutes above 0, at most 10080 (a week)", whole=False)


def _photo_base(text: str) -> str:
    """Plex stores and shows the photo URLs made from it: no credential may be part of it."""
    if not text.strip():
        return ""
    value = _address(text, "http://192.168.1.20:9999", "Stash listens on 9999")
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if "@" in parts.netloc:
        raise ValueError(
            f"must not carry a user name or password (Plex stores and shows the photo URLs), got "
            f"{_no_login(value)!r}; give an address that serves performer images without a login"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            "must be an address without ?… or #… (Plex stores and shows the photo URLs: never put an API key "
            "there), e.g. http://192.168.1.20:9999"
        )
    return value


def _token(value: str) -> str:
    value = value.strip()
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(
            "must be your Plex token without spaces (Plex Web → any item → Get Info → View XML → X-Plex-Token)"
        )
    odd = [ch for ch in value if ord(ch) > 0xFF or not ch.isprintable()]
    if odd:
        # HTTP headers carry Latin-1 only (http.client would raise UnicodeEncodeError mid-request)
        raise ValueError(
            f"contains the character {odd[0]!r}, which a Plex token never has and an HTTP header cannot "
            "carry; copy the token again (Plex Web → any item → Get Info → View XML → X-Plex-Token)"
        )
    return value


def _accounts(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts == ["0"]:
        return ()  # what Stash may save for a never-set value: the default (the server owner)
    bad = [p for p in parts if not (p.isascii() and p.isdigit() and 0 < int(p) <= MAX_ACCOUNT_ID)]
    if bad:
        raise ValueError(
            "must be Plex account ids (whole numbers from 1 to 2^63-1) separated by commas "
            f"(1 is the server owner), got {bad[0][:40]!r}"
        )
    return tuple(int(p) for p in parts)


def _content_rating(text: str) -> str:
    value = " ".join(text.split())
    if len(value) > MAX_CONTENT_RATING:
        raise ValueError(
            f"must be at most {MAX_CONTENT_RATING} characters, a rating such as R or TV-MA "
            f"(got {len(value)} characters)"
        )
    return value


def _concurrency(value: Any) -> Any:
    if _unset(value):
        return DEFAULTS["plex_concurrency"]
    return _number_in(value, 1, 16, "a whole number from 1 to 16")


class Settings(BaseModel):
    """The validated settings. ``plex_token`` is a secret: never log this object."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    plex_url: Annotated[str, AfterValidator(partial(_address, example=PLEX_EXAMPLE, port_hint=PLEX_PORT))] = Field(
        min_length=1
    )
    plex_token: Annotated[str, AfterValidator(_token)] = Field(min_length=1, repr=False)
    plex_libraries: Annotated[tuple[str, ...], _parsed(fields.names, LIBRARIES)] = ()
    case_insensitive_paths: Switch = False
    # with the case rule above (validated first, also when path_map is not set): the one value matching reads
    path_map: PathMap = Field(default=None, validate_default=True)
    loose_matching: Switch = False
    preserve_plex_edits: Switch = False
    trigger_plex_scan: Switch = False
    plex_concurrency: Annotated[int, BeforeValidator(_concurrency)] = Field(default=6, ge=1, le=16)
    # secrets: tokens live in these URLs
    notify_urls: Annotated[tuple[str, ...], BeforeValidator(_notify_urls)] = Field(default=(), repr=False)
    # None: the notice is off (a bad value, OPTIONAL)
    notify_plex_down_minutes: Annotated[float | None, BeforeValidator(_minutes)] = Field(default=10, gt=0, le=10080)
    private_logs: Switch = False

    skip_fields: Annotated[tuple[str, ...], _parsed(fields.check_fields)] = ()
    tags_as: Annotated[str, _parsed(partial(fields.check_choice, allowed=fields.TAGS_AS))] = "genres"
    collections: Annotated[tuple[str, ...], _parsed(fields.check_collections)] = ("studio",)
    content_rating: Annotated[str, _parsed(_content_rating)] = ""
    tagline_from_code: Switch = False
    title_template: Annotated[str, _parsed(fields.check_template)] = ""
    sort_title_template: Annotated[str, _parsed(fields.check_template)] = ""
    skip_tags: Annotated[tuple[str, ...], _parsed(fields.names)] = ()
    hide_tags: Annotated[tuple[str, ...], _parsed(fields.names)] = ()
    organized_only: Switch = False
    import_plays: Switch = False
    plays_accounts: Annotated[tuple[int, ...], _parsed(_accounts)] = ()
    import_resume: Switch = False
    import_ratings: Switch = False
    performer_photos: Switch = False
    performer_photo_base_url: Annotated[str, _parsed(_photo_base)] = ""
    _adopted: Adopted = PrivateAttr(default_factory=Adopted)
    _problems: dict[str, str] = PrivateAttr(default_factory=dict)

    def writes(self, field: str) -> bool:
        """False when ``skip_fields`` names this field."""
        return field not in self.skip_fields

    @property
    def adopted(self) -> Adopted:
        """The old setting names this configuration took over or ignored."""
        return self._adopted

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per bad optional value: the setting, why, and what is off meanwhile."""
        return tuple(self._problems.values())

    def problem(self, name: str) -> str | None:
        """Why the optional setting ``name`` is not used (None when its value is good)."""
        return self._problems.get(name)

    def summary(self) -> dict[str, Any]:
        """Every setting's effective value, for people (health_check): the token is never shown."""
        shown: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name in self._problems:
                value = "(bad value: not used)"
            elif name == "plex_token":
                value = "(set, hidden)"
            elif name == "notify_urls":
                value = f"({len(value)} set, hidden)" if value else ""  # tokens live in these URLs
            elif name == "path_map":
                value = str(value)
            elif name == "collections" and not value:
                value = fields.NO_COLLECTIONS
            elif isinstance(value, tuple):
                value = ", ".join(str(v) for v in value)
            shown[name] = value
        return shown

    @field_validator("path_map", mode="before")
    @classmethod
    def _path_map(cls, value: Any, info: ValidationInfo) -> PathMap:
        if isinstance(value, PathMap):
            return value
        if value is not None and not isinstance(value, str):
            raise ValueError("must be text like /stash/media=/plex/media;/other=/mnt/other")
        return PathMap.parse(value, bool(info.data.get("case_insensitive_paths")))

    @property
    def play_accounts(self) -> tuple[int, ...]:
        """Whose Plex plays count: ``plays_accounts``, or the server owner (account 1)."""
        return self.plays_accounts or (OWNER_ACCOUNT,)

    @property
    def resume_on(self) -> bool:
        """Resume points come back: ``import_resume``, and the owner's plays count (Plex shows
        the owner's token the owner's resume points only)."""
        return self.import_resume and OWNER_ACCOUNT in self.play_accounts


def _as_saved(value: Any) -> Any:
    """A default as Stash saves the setting: a list as text, no value as empty."""
    return ", ".join(value) if isinstance(value, tuple) else "" if value is None else value


DEFAULTS: dict[str, Any] = {
    name: _as_saved(info.default) for name, info in Settings.model_fields.items() if not info.is_required()
}


# What a bad value of an optional setting becomes: ``value``, with ``also`` set too (a feature
# switched off), and the sentence that says so.
Fallback = namedtuple("Fallback", "value consequence also", defaults=({},))


PLAYS_OFF = "Plex plays are not imported until it is fixed"
PHOTOS_OFF = "performer photos are not written until it is fixed"
OPTIONAL: dict[str, Fallback] = {
    "plex_concurrency": Fallback(DEFAULTS["plex_concurrency"], f"the default, {DEFAULTS['plex_concurrency']}, is used"),
    "notify_urls": Fallback((), "no notification is sent until it is fixed"),
    "notify_plex_down_minutes": Fallback(None, "no notice that Plex is down is sent until it is fixed"),
    "title_template": Fallback("", "Stash's title is written until it is fixed"),
    "sort_title_template": Fallback("", "Plex's own sort title is kept until it is fixed"),
    "import_plays": Fallback(False, PLAYS_OFF),
    # whose plays and resume points count is unknown: none are read
    "plays_accounts": Fallback(
        (),
        "Plex plays and resume points are not brought to Stash until it is fixed",
        {"import_plays": False, "import_resume": False},
    ),
    "import_resume": Fallback(False, "resume points are not brought to Stash until it is fixed"),
    "import_ratings": Fallback(False, "ratings are not brought to Stash until it is fixed"),
    "performer_photos": Fallback(False, PHOTOS_OFF),
    "performer_photo_base_url": Fallback("", PHOTOS_OFF, {"performer_photos": False}),
}


def _unset(value: Any) -> bool:
    """0 (what Stash shows, and may save, for a number never set) or empty: the default.

    >>> _unset(0), _unset(" 0 "), _unset(""), _unset("0.5"), _unset(3)
    (True, True, True, False, False)
    """
    return value == 0 or (isinstance(value, str) and value.strip() in ("0", ""))


def _number_in(value: Any, low: float, high: float, wanted: str, whole: bool = True) -> float | int:
    """``value`` (a number, or its text) within ``low``..``high`` (above ``low`` when not
    ``whole``); ValueError naming ``wanted`` otherwise."""
    number = math.nan  # fails every range
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError, OverflowError):
            number = float(value)
    if not (low <= number <= high if whole else low < number <= high) or (whole and not number.is_integer()):
        raise ValueError(f"must be {wanted}, got {str(value)[:40]!r}")
    return int(number) if whole else number


SETTINGS_PAGE = "Settings → Plugins → Stash2Plex"  # where Stash's user sets them


def in_stash(name: str) -> str:
    return f"open {SETTINGS_PAGE} and fill it in"


def _text(value: Any, wanted: str = "text") -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be {wanted}, got {value!r}")
    return value


def _message_of(item: Any, missing=in_stash) -> str:
    """One validation error as a sentence naming the setting."""
    name = ".".join(str(p) for p in item["loc"]) or "settings"
    reason = item["msg"].removeprefix("Value error, ")
    if item["type"] == "missing":
        return f"setting {name} is not set: {missing(name)}"
    return f"setting {name}: {reason}"


def load_settings(saved: dict[str, Any] | None, missing=in_stash) -> Settings:
    """Validate the saved settings map (``{}`` when none were saved): the one reader of
    settings for every run.

    ``missing(name)`` says where to set a missing setting, in the words of the place
    the message is read (Stash's settings page, or the command line's flags). A bad
    optional value (``OPTIONAL``) takes its fallback and is named in ``problems``;
    any other bad value raises ConfigError.
    """
    values = {k: v for k, v in (saved or {}).items() if v is not None and v != ""}
    values, adopted = translate(values, set(Settings.model_fields))
    problems: dict[str, str] = {}
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        bad = {str(item["loc"][0]) for item in exc.errors() if item["loc"]}
        if not bad or not bad <= set(OPTIONAL):
            raise ConfigError("; ".join(_message_of(item, missing) for item in exc.errors()[:5])) from None
        problems = {
            (name := str(item["loc"][0])): f"{_message_of(item, missing)}; {OPTIONAL[name].consequence}"
            for item in exc.errors()
        }
        settings = Settings.model_validate({**values, **_fallbacks(bad)})
    settings._adopted = adopted
    settings._problems = {**problems, **_contradictions(settings)}
    return settings


def _contradictions(settings: Settings) -> dict[str, str]:
    """Good values that together leave a feature that is on with nothing to do (keyed apart
    from the settings' names: neither value is bad)."""
    if settings.import_resume and not settings.resume_on and settings.plays_accounts:
        accounts = ",".join(map(str, settings.plays_accounts))
        return {
            "import_resume+plays_accounts": (
                f"setting import_resume: on, but plays_accounts ({accounts}) leaves out the server owner "
                f"({OWNER_ACCOUNT}), the only account whose resume points Plex shows the plugin; add "
                f"{OWNER_ACCOUNT} to plays_accounts or turn import_resume off; {OPTIONAL['import_resume'].consequence}"
            )
        }
    return {}


def _fallbacks(names: set[str]) -> dict[str, Any]:
    """The values that replace bad optional ones (a feature's switch off with them)."""
    values: dict[str, Any] = {}
    for name in sorted(names):
        values.update(OPTIONAL[name].also)
    for name in names:
        values[name] = OPTIONAL[name].value
    return values
