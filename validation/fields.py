"""What Stash2Plex can write, and the settings that choose it, checked once.

``FIELDS`` are the names ``skip_fields`` accepts. Title templates name scene values
in braces (``{studio} - {title}``); ``TEMPLATE_FIELDS`` are the names they may use.
"""

from __future__ import annotations

import re
import string

FIELDS = (
    "title",
    "sort_title",
    "summary",
    "tagline",
    "date",
    "studio",
    "content_rating",
    "rating",
    "performers",
    "director",
    "tags",
    "collections",
    "poster",
)
TEMPLATE_FIELDS = ("title", "studio", "parent_studio", "date", "year", "code", "director", "performers", "file_name")
TAGS_AS = ("genres", "labels", "both")
COLLECTION_SOURCES = ("studio", "parent_studio", "groups")
NO_COLLECTIONS = "none"
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]|\{\s*\}")
_EDGE = " -–—|:,;/·"


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names, trimmed, empty ones dropped, repeats removed."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def check_fields(text: str) -> tuple[str, ...]:
    chosen = tuple(n.lower() for n in names(text))
    unknown = [n for n in chosen if n not in FIELDS]
    if unknown:
        raise ValueError(
            f"{', '.join(repr(n) for n in unknown)} is not a field Stash2Plex writes; known fields: {', '.join(FIELDS)}"
        )
    return chosen


def check_choice(text: str, allowed: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value not in allowed:
        raise ValueError(f"must be one of {', '.join(allowed)}, got {text!r}")
    return value


def check_collections(text: str) -> tuple[str, ...]:
    chosen = tuple(n.lower() for n in names(text))
    if chosen == (NO_COLLECTIONS,):
        return ()
    unknown = [n for n in chosen if n not in COLLECTION_SOURCES]
    if unknown:
        raise ValueError(
            f"{', '.join(repr(n) for n in unknown)} is not a collection source; use any of "
            f"{', '.join(COLLECTION_SOURCES)} separated by commas, or {NO_COLLECTIONS}"
        )
    return chosen


def check_template(text: str) -> str:
    """A template whose every ``{name}`` is a known field (no formats, no attributes)."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(
            f"is not a valid template ({exc}); write names in braces, e.g. '{{studio}} - {{title}}'"
        ) from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                f"{shown} is not a field a template can use; known fields: "
                + ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            )
    return text


def render_template(template: str, values: dict[str, str]) -> str:
    """The template filled in; separators and brackets left empty by a missing value are dropped."""
    text = template.format_map({name: values.get(name, "") for name in TEMPLATE_FIELDS})
    text = " ".join(_EMPTY_BRACKETS.sub("", text).split())
    while text and (text[0] in _EDGE or text[-1] in _EDGE):
        text = text.strip(_EDGE)
    return text
