"""A Stash scene as Stash2Plex will write it: validated, sanitised, capped.

Control characters are removed (the line breaks and tabs of ``details`` are kept),
text is capped at lengths Plex handles comfortably, a date that is not a day, a month
or a year is dropped with a warning rather than sent (plexapi passes date strings
through unvalidated), and a scene without files cannot be synced (there is nothing to
find in Plex).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.clock import rfc3339
from core.errors import InvalidMetadata

MAX_TITLE = 255
MAX_DETAILS = 20_000
MAX_NAME = 255
MAX_TAGS = 500
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\ufeff]")
_CONTROL_NO_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b\ufeff]")
_PARTIAL_DATE = re.compile(r"\d{4}(-(0[1-9]|1[0-2]))?")  # Stash's month and year precision


def clean_line(text: Any, limit: int = MAX_NAME) -> str:
    """One-line text: no control characters or line breaks, trimmed, capped."""
    if text is None:
        return ""
    value = _CONTROL_NO_BREAKS.sub(" ", str(text))
    return " ".join(value.split())[:limit].strip()


def clean_block(text: Any, limit: int = MAX_DETAILS) -> str:
    """Multi-line text: control characters removed, line breaks kept, capped."""
    if text is None:
        return ""
    value = str(text).replace("\r\n", "\n").replace("\r", "\n")
    value = _CONTROL.sub("", value)
    return value[:limit].strip()


class SceneFileMeta(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    path: str = Field(min_length=1)
    size: int | None = None
    duration: float | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("file path contains a NUL character")
        return value


class SceneMetadata(BaseModel):
    """What Stash wants the Plex item to show."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    title: str = ""
    details: str = ""
    date: str = ""  # YYYY-MM-DD, or YYYY-MM / YYYY (Stash v0.30+); empty for none
    studio: str = ""
    parent_studio: str = ""
    performers: tuple[str, ...] = ()
    # performer name → the route of its Stash image (``/performer/<id>/image?t=<stamp>``), for
    # performers with an image of their own (``performer_image_route``)
    performer_images: dict[str, str] = {}
    tags: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    code: str = ""
    director: str = ""
    rating100: int | None = None
    updated_at: float | None = None  # epoch seconds of the scene's last change in Stash (None: unknown)
    organized: bool = False
    files: tuple[SceneFileMeta, ...] = ()
    screenshot: str | None = None
    warnings: tuple[str, ...] = ()
    # Ids of the tags, performers, studio and groups, kind → sorted ids (the ledger
    # keeps them, so a changed entity reaches exactly the items that show it).
    entities: dict[str, tuple[int, ...]] = {}

    @field_validator("files")
    @classmethod
    def _has_files(cls, value: tuple[SceneFileMeta, ...]) -> tuple[SceneFileMeta, ...]:
        if not value:
            raise ValueError("the scene has no files, so there is nothing to find in Plex")
        return value


def _names(items: Any, what: str, warnings: list[str]) -> tuple[str, ...]:
    names: list[str] = []
    for item in items or []:
        name = clean_line(item.get("name") if isinstance(item, dict) else item)
        if name and name not in names:
            names.append(name)
    if len(names) > MAX_TAGS:
        warnings.append(f"{len(names)} {what}; only the first {MAX_TAGS} are written to Plex")
        names = names[:MAX_TAGS]
    return tuple(names)


def stash_route(url: str, first: str) -> str:
    """The path from its last ``first`` segment on, and the query, of a URL Stash built
    (``paths.*``, ``image_path``): what Stash serves there, whatever base it was built on
    (``external_host``, or the request's host and ``X-Forwarded-Prefix``:
    internal/api/server.go ``BaseURLMiddleware``).

    >>> stash_route("https://stash.example/prefix/performer/3/image?t=17", "/performer/")
    '/performer/3/image?t=17'
    """
    parts = urlsplit(url)
    at = parts.path.rfind(first)
    path = parts.path[at:] if at >= 0 else parts.path
    return f"{path}?{parts.query}" if parts.query else path


_PERFORMER_IMAGE = re.compile(r"/performer/\d+/image")


def performer_image_route(image_path: Any) -> str | None:
    """The route of a performer's own image, ``/performer/<id>/image?t=<stamp>``, None for none.
    Stash adds ``default=true`` to the ``image_path`` of a performer without an image, and the
    route then serves a generic silhouette (internal/api/urlbuilders/performer.go
    ``GetPerformerImageURL``, internal/api/routes_performer.go ``Image``): no photo rather than a
    placeholder. Only ``t`` is kept: Plex stores the URL, and no other parameter (an ``apikey``
    least of all) may ride along.

    >>> performer_image_route("http://h:9999/performer/3/image?t=17&apikey=k")
    '/performer/3/image?t=17'
    >>> performer_image_route("http://h/performer/4/image?t=1&default=true"), performer_image_route("http://h/p.jpg")
    (None, None)
    """
    if not isinstance(image_path, str):
        return None
    path, _, query = stash_route(image_path, "/performer/").partition("?")
    given = parse_qs(query)
    if not _PERFORMER_IMAGE.fullmatch(path) or given.get("default") == ["true"]:
        return None
    stamp = given.get("t", [""])[0]
    return f"{path}?t={stamp}" if stamp.isdigit() else path


def _images(items: Any, names: tuple[str, ...]) -> dict[str, str]:
    """performer name → its image's route, for the performers written (``names``) that have one."""
    found: dict[str, str] = {}
    for item in items or []:
        if not isinstance(item, dict):
            continue
        name, route = clean_line(item.get("name")), performer_image_route(item.get("image_path"))
        if route is not None and name in names:
            found.setdefault(name, route)
    return found


def _date(value: Any, warnings: list[str]) -> str:
    """A day ``YYYY-MM-DD``, or from Stash v0.30 a month ``YYYY-MM`` or a year ``YYYY``, as
    Stash answers them (pkg/models/date.go ``Date.String``: the format of the date's
    precision); anything else is dropped with a warning."""
    if not value:
        return ""
    text = str(value)
    try:
        return dt.date.fromisoformat(text[:10]).isoformat()
    except ValueError:
        pass
    if _PARTIAL_DATE.fullmatch(text) and text[:4] != "0000":
        return text
    warnings.append(f"date {text[:40]!r} is not YYYY-MM-DD, YYYY-MM or YYYY; the date is not written")
    return ""


def _ids(items: Any) -> tuple[int, ...]:
    values = [str(item.get("id")) for item in items or [] if isinstance(item, dict)]
    return tuple(sorted({int(value) for value in values if value.isdigit()}))


def _groups(raw: dict[str, Any]) -> list[Any]:
    return [g.get("group") for g in raw.get("groups") or [] if isinstance(g, dict)]


def entities_of(raw: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """kind → sorted ids of the scene's tags, performers, studio (and its parent, whose name
    collections and templates show) and groups (no empty kinds)."""
    studio = raw.get("studio")
    studios = [studio, studio.get("parent_studio")] if isinstance(studio, dict) else []
    found = {
        "tag": _ids(raw.get("tags")),
        "performer": _ids(raw.get("performers")),
        "studio": _ids([s for s in studios if isinstance(s, dict)]),
        "group": _ids(_groups(raw)),
    }
    return {kind: ids for kind, ids in found.items() if ids}


def _instant(value: Any) -> float | None:
    """Stash's RFC3339 ``updated_at`` as epoch seconds; None when absent or not RFC3339 with an offset.

    >>> _instant("2025-01-02T03:04:05+01:00"), _instant("2025-01-02T03:04:05Z"), _instant(None)
    (1735783445.0, 1735787045.0, None)
    """
    instant = rfc3339(value)
    return instant.timestamp() if instant is not None else None


def _rating(value: Any, warnings: list[str]) -> int | None:
    """Stash's rating100 (1-100; null = no rating)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        warnings.append(f"rating100 {str(value)[:20]!r} is not a whole number from 0 to 100; the rating is not written")
        return None
    return value


def scene_from_stash(raw: dict[str, Any]) -> SceneMetadata:
    """Validate one scene from GraphQL; raises InvalidMetadata with the reason."""
    warnings: list[str] = []
    try:
        details = clean_block(raw.get("details"))
        if raw.get("details") and len(str(raw["details"])) > MAX_DETAILS:
            warnings.append(f"details are {len(str(raw['details']))} characters; cut to {MAX_DETAILS}")
        return SceneMetadata(
            id=int(raw["id"]),
            title=clean_line(raw.get("title"), MAX_TITLE),
            details=details,
            date=_date(raw.get("date"), warnings),
            studio=clean_line((raw.get("studio") or {}).get("name")),
            parent_studio=clean_line(((raw.get("studio") or {}).get("parent_studio") or {}).get("name")),
            performers=(performers := _names(raw.get("performers"), "performers", warnings)),
            performer_images=_images(raw.get("performers"), performers),
            tags=_names(raw.get("tags"), "tags", warnings),
            groups=_names(_groups(raw), "groups", warnings),
            code=clean_line(raw.get("code")),
            director=clean_line(raw.get("director")),
            rating100=_rating(raw.get("rating100"), warnings),
            updated_at=_instant(raw.get("updated_at")),
            organized=bool(raw.get("organized")),
            files=tuple(raw.get("files") or ()),
            screenshot=(raw.get("paths") or {}).get("screenshot"),
            warnings=tuple(warnings),
            entities=entities_of(raw),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidMetadata(
            f"scene {raw.get('id')} cannot be synced: {where}: {first['msg'].removeprefix('Value error, ')}"
        ) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidMetadata(f"scene {raw.get('id')!r} cannot be synced: malformed data from Stash ({exc})") from None


def scene_or_why(raw: dict[str, Any] | None, scene_id: int) -> tuple[SceneMetadata | None, str]:
    """(the scene Stash sent, ""), or (None, why it cannot be shown): gone from Stash, or
    its data not valid (the scene panel and the inbox say it alike)."""
    if raw is None:
        return None, f"scene {scene_id} is not in Stash any more"
    try:
        return scene_from_stash(raw), ""
    except InvalidMetadata as exc:
        return None, str(exc)
