"""Plugin settings, as saved in Stash, validated with their defaults.

Stash stores no defaults (a never-saved setting is absent), so every default lives here,
and Stash2Plex.yml's descriptions state the same values (a test checks). Stash's page draws
a never-saved setting as off, ``0`` or empty and the first click saves that: every switch
defaults to false and a number saved as 0 means its default. Old names: ``validation.legacy``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from core.errors import ConfigError
from validation import fields
from validation.legacy import Adopted, translate
from validation.pathmap import PathRule, parse_path_map

DEFAULTS: dict[str, Any] = {
    "plex_libraries": "",
    "path_map": "",
    "loose_matching": False,
    "preserve_plex_edits": False,
    "trigger_plex_scan": False,
    "case_insensitive_paths": False,
    "plex_concurrency": 6,
    "notify_urls": "",
    "notify_plex_down_minutes": 10,
    "private_logs": False,
    "skip_fields": "",
    "tags_as": "genres",
    "collections": "studio",
    "content_rating": "",
    "tagline_from_code": False,
    "title_template": "",
    "sort_title_template": "",
    "skip_tags": "",
    "hide_tags": "",
    "organized_only": False,
    "import_plays": False,
    "plays_accounts": "",
    "import_resume": False,
    "import_ratings": False,
}


MAX_CONTENT_RATING = 64  # Plex's ratings are short (R, TV-MA, de/16); a long one made every edit's URL too long


class Settings(BaseModel):
    """The validated settings. ``plex_token`` is a secret: never log this object."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    plex_url: str = Field(min_length=1)
    plex_token: str = Field(min_length=1, repr=False)
    plex_libraries: tuple[str, ...] = ()
    path_map: tuple[PathRule, ...] = ()
    loose_matching: bool = DEFAULTS["loose_matching"]
    preserve_plex_edits: bool = DEFAULTS["preserve_plex_edits"]
    trigger_plex_scan: bool = DEFAULTS["trigger_plex_scan"]
    case_insensitive_paths: bool = DEFAULTS["case_insensitive_paths"]
    plex_concurrency: int = Field(default=DEFAULTS["plex_concurrency"], ge=1, le=16)
    notify_urls: tuple[str, ...] = Field(default=(), repr=False)  # secrets: tokens live in these URLs
    notify_plex_down_minutes: float = Field(default=DEFAULTS["notify_plex_down_minutes"], gt=0, le=10080)
    private_logs: bool = DEFAULTS["private_logs"]

    @field_validator("notify_urls", mode="before")
    @classmethod
    def _notify_urls(cls, value: Any) -> tuple[str, ...]:
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

    @field_validator("notify_plex_down_minutes", mode="before")
    @classmethod
    def _minutes(cls, value: Any) -> Any:
        return DEFAULTS["notify_plex_down_minutes"] if value in (0, "0") else value

    skip_fields: tuple[str, ...] = ()
    tags_as: str = DEFAULTS["tags_as"]
    collections: tuple[str, ...] = (DEFAULTS["collections"],)
    content_rating: str = DEFAULTS["content_rating"]
    tagline_from_code: bool = DEFAULTS["tagline_from_code"]
    title_template: str = DEFAULTS["title_template"]
    sort_title_template: str = DEFAULTS["sort_title_template"]
    skip_tags: tuple[str, ...] = ()
    hide_tags: tuple[str, ...] = ()
    organized_only: bool = DEFAULTS["organized_only"]
    import_plays: bool = DEFAULTS["import_plays"]
    plays_accounts: tuple[int, ...] = ()
    import_resume: bool = DEFAULTS["import_resume"]
    import_ratings: bool = DEFAULTS["import_ratings"]
    _adopted: Adopted = PrivateAttr(default_factory=Adopted)

    def writes(self, field: str) -> bool:
        """False when ``skip_fields`` names this field."""
        return field not in self.skip_fields

    @property
    def adopted(self) -> Adopted:
        """The old setting names this configuration took over or ignored."""
        return self._adopted

    def summary(self) -> dict[str, Any]:
        """Every setting's effective value, for people (health_check): the token is never shown."""
        shown: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "plex_token":
                value = "(set, hidden)"
            elif name == "notify_urls":
                value = f"({len(value)} set, hidden)" if value else ""  # tokens live in these URLs
            elif name == "path_map":
                value = "; ".join(f"{r.stash_prefix}={r.plex_prefix}" for r in value)
            elif name == "collections" and not value:
                value = fields.NO_COLLECTIONS
            elif isinstance(value, tuple):
                value = ", ".join(str(v) for v in value)
            shown[name] = value
        return shown

    @field_validator("plex_url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (e.g. http://192.168.1.10:32400), got {value!r}")
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError:
            raise ValueError(
                f"has a port that is not a number from 1 to 65535 (Plex listens on 32400), got {_no_login(value)!r}"
            ) from None
        if not parts.hostname:
            raise ValueError(f"has no host name (e.g. http://192.168.1.10:32400), got {_no_login(value)!r}")
        return value

    @field_validator("plex_token")
    @classmethod
    def _token(cls, value: str) -> str:
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

    @field_validator("plex_libraries", mode="before")
    @classmethod
    def _libraries(cls, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        raise ValueError("must be library names separated by commas, e.g. 'Stash, Other Videos'")

    @field_validator("path_map", mode="before")
    @classmethod
    def _path_map(cls, value: Any) -> tuple[PathRule, ...]:
        if value is None or isinstance(value, tuple):
            return value or ()
        if not isinstance(value, str):
            raise ValueError("must be text like /stash/media=/plex/media;/other=/mnt/other")
        return parse_path_map(value)

    @field_validator(
        "loose_matching",
        "preserve_plex_edits",
        "trigger_plex_scan",
        "case_insensitive_paths",
        "tagline_from_code",
        "organized_only",
        "private_logs",
        "import_plays",
        "import_resume",
        "import_ratings",
        mode="before",
    )
    @classmethod
    def _boolean(cls, value: Any) -> bool:
        return boolean(value)

    @field_validator("plays_accounts", mode="before")
    @classmethod
    def _accounts(cls, value: Any) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        parts = [p.strip() for p in _text(value).split(",") if p.strip()]
        bad = [p for p in parts if not p.isdigit()]
        if bad:
            raise ValueError(f"must be Plex account ids separated by commas (1 is the server owner), got {bad[0]!r}")
        return tuple(int(p) for p in parts)

    @property
    def play_accounts(self) -> tuple[int, ...]:
        """Whose Plex plays count: ``plays_accounts``, or the server owner (account 1)."""
        return self.plays_accounts or (1,)

    @field_validator("skip_fields", mode="before")
    @classmethod
    def _skip_fields(cls, value: Any) -> tuple[str, ...]:
        return value if isinstance(value, tuple) else fields.check_fields(_text(value))

    @field_validator("tags_as", mode="before")
    @classmethod
    def _tags_as(cls, value: Any) -> str:
        return fields.check_choice(_text(value), fields.TAGS_AS)

    @field_validator("collections", mode="before")
    @classmethod
    def _collections(cls, value: Any) -> tuple[str, ...]:
        return value if isinstance(value, tuple) else fields.check_collections(_text(value))

    @field_validator("title_template", "sort_title_template", mode="before")
    @classmethod
    def _template(cls, value: Any) -> str:
        return fields.check_template(_text(value).strip())

    @field_validator("content_rating", mode="before")
    @classmethod
    def _content_rating(cls, value: Any) -> str:
        value = " ".join(_text(value).split())
        if len(value) > MAX_CONTENT_RATING:
            raise ValueError(
                f"must be at most {MAX_CONTENT_RATING} characters, a rating such as R or TV-MA "
                f"(got {len(value)} characters)"
            )
        return value

    @field_validator("skip_tags", "hide_tags", mode="before")
    @classmethod
    def _tag_names(cls, value: Any) -> tuple[str, ...]:
        return value if isinstance(value, tuple) else fields.names(_text(value))

    @field_validator("plex_concurrency", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value == 0 or (isinstance(value, str) and value.strip() in ("0", "")):
            return DEFAULTS["plex_concurrency"]  # what Stash shows (and may save) for a never-set number
        return value


def boolean(value: Any) -> bool:
    """A switch's value as Stash or a command line gives it; ValueError when it is none."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"must be true or false, got {value!r}")


def _no_login(url: str) -> str:
    """``url`` without a ``user:password@`` (a message must not repeat a password)."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"


def _in_stash(name: str) -> str:
    return "open Settings → Plugins → Stash2Plex and fill it in"


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {value!r}")
    return value


def _message(error: ValidationError, missing=_in_stash) -> str:
    parts = []
    for item in error.errors()[:5]:
        name = ".".join(str(p) for p in item["loc"]) or "settings"
        reason = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            reason = f"is not set: {missing(name)}"
        parts.append(f"setting {name} {reason}" if item["type"] == "missing" else f"setting {name}: {reason}")
    return "; ".join(parts)


def load_settings(saved: dict[str, Any] | None, missing=_in_stash) -> Settings:
    """Validate the saved settings map (``{}`` when none were saved).

    ``missing(name)`` says where to set a missing setting, in the words of the place
    the message is read (Stash's settings page, or the command line's flags).
    """
    values = {k: v for k, v in (saved or {}).items() if v is not None and v != ""}
    values, adopted = translate(values, set(Settings.model_fields))
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_message(exc, missing)) from None
    settings._adopted = adopted
    return settings
